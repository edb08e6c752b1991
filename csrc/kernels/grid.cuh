// Grid arithmetic shared by the launchers.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace torch_gemm {

constexpr int64_t kMaxGridY = 65535;  // hardware limit on gridDim.y; kernels stride past it

__host__ __device__ constexpr int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

inline unsigned grid_y_for(int64_t tiles) {
  return static_cast<unsigned>(std::min(tiles, kMaxGridY));
}

constexpr int64_t kMaxGridX = 2147483647;  // hardware limit on gridDim.x

// A grid of at least `tiles` blocks for linear_tile_index: all on gridDim.x (no 65535 cap on the
// M tiles), spilling into gridDim.y only past 2^31 - 1 tiles. Loop-free kernels keep the int64
// state of a tile loop out of registers. False past 2^31·65535 tiles (a C of exabytes).
inline bool grid_for_tiles(int64_t tiles, dim3* grid) {
  const int64_t x = std::min(tiles, kMaxGridX);
  const int64_t y = ceil_div(tiles, x);
  if (y > kMaxGridY) return false;
  *grid = dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
  return true;
}

}  // namespace torch_gemm
