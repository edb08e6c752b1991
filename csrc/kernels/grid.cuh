// Grid arithmetic shared by the launchers.
#pragma once

#include <algorithm>
#include <cstdint>

namespace torch_gemm {

constexpr int64_t kMaxGridY = 65535;  // hardware limit on gridDim.y; kernels stride past it

inline int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

inline unsigned grid_y_for(int64_t tiles) {
  return static_cast<unsigned>(std::min(tiles, kMaxGridY));
}

}  // namespace torch_gemm
