// The Hopper kernel's mainloop: the consumers' accumulator layout, which the tf32 fragment loads
// and the epilogue follow.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sm90/ptx.cuh"

namespace torch_gemm {
namespace sm90 {

#ifdef TORCH_GEMM_SM90A_DEVICE

// The accumulator layout of wgmma: warp w of the warpgroup holds rows 16w..16w+15; for each 8
// columns j, lane l holds rows l/4 and l/4 + 8, columns 8j + 2(l%4) and the one after:
// d[4j], d[4j+1] in the upper row, d[4j+2], d[4j+3] in the lower.

// Which of the consumer's 64 rows of C this thread's accumulators of rows l/4 + 8·half hold. Where
// tf32's A fragments come from an MN-major tile (kPermuted), each warp loads rows in another order:
// in wgmma's order the lanes of one fragment load read 2 chunks of 4 rows' 128-byte lines, which
// the swizzle puts on 16 banks (2-way conflicts on every load); rows 16 apart (chunks c and c + 4)
// go to 32. The products of the permuted rows land in the same registers, so the epilogue stores
// row accumulator_row(...) where wgmma's layout says row 16w + l/4 + 8·half. Both orders keep
// warps 0–1 in rows 0–31 and warps 2–3 in rows 32–63.
template <bool kPermuted>
__device__ __forceinline__ int accumulator_row(int warp, int lane, int half) {
  if constexpr (kPermuted) {
    const int g = lane / 4;
    return 32 * (warp / 2) + 4 * (2 * (warp % 2) + half) + g % 4 + 16 * (g / 4);
  } else {
    return warp * 16 + half * 8 + lane / 4;
  }
}

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90
}  // namespace torch_gemm
