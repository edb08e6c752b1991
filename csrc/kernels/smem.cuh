// Rung 2, smem: each block stages a kTile×kTile tile of A and of B in shared memory, so every
// element fetched from global memory is used kTile times.
#pragma once

#include "kernels/grid.cuh"
#include "kernels/numeric.cuh"

namespace torch_gemm {

template <int kTile_>
struct SmemConfig {
  static constexpr int kTile = kTile_;  // block computes a (kTile, kTile) tile of C, one thread per element
  static_assert(kTile * kTile <= 1024, "one thread per output element: at most 1024 threads per block");
  static_assert(kTile % 16 == 0, "kTile must be a multiple of 16: half-warps read whole rows of sB");
};

template <typename T, typename Config>
__global__ void __launch_bounds__(Config::kTile * Config::kTile)
gemm_smem_kernel(GemmParams p) {
  using Acc = acc_t<T>;
  p = batch_element(p, blockIdx.z);
  constexpr int kTile = Config::kTile;
  const T* __restrict__ A = static_cast<const T*>(p.a);
  const T* __restrict__ B = static_cast<const T*>(p.b);
  T* __restrict__ C = static_cast<T*>(p.c);

  // Stored in the accumulator type: each element is converted once on the way in instead of
  // kTile times in the inner loop.
  __shared__ Acc sA[kTile][kTile];  // (kTile rows of M, kTile of K)
  __shared__ Acc sB[kTile][kTile];  // (kTile of K, kTile columns of N)

  const int tx = threadIdx.x;  // along N (and along K when loading A)
  const int ty = threadIdx.y;  // along M (and along K when loading B)
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  const int64_t tiles_m = ceil_div(p.M, kTile);

  // gridDim.y is capped at 65535: blocks stride over row tiles. The bound is uniform across the
  // block, so every thread reaches every __syncthreads.
  for (int64_t tile_m = blockIdx.y; tile_m < tiles_m; tile_m += gridDim.y) {
    const int64_t m = tile_m * kTile + ty;
    Acc acc = Acc(0);
    for (int64_t k0 = 0; k0 < p.K; k0 += kTile) {
      // Out-of-range elements load as zero, so edge tiles need no special case in the dot product.
      const int64_t ka = k0 + tx;
      const int64_t kb = k0 + ty;
      sA[ty][tx] = (m < p.M && ka < p.K)
                       ? to_acc<Acc>(A[m * p.a_stride_m + ka * p.a_stride_k]) : Acc(0);
      sB[ty][tx] = (kb < p.K && n < p.N)
                       ? to_acc<Acc>(B[kb * p.b_stride_k + n * p.b_stride_n]) : Acc(0);
      __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
      for (int kk = 0; kk < kTile; ++kk) {
        // sA[ty][kk] is one address per warp row (broadcast); sB[kk][tx] is consecutive words:
        // neither access has bank conflicts.
        acc += sA[ty][kk] * sB[kk][tx];
      }
      __syncthreads();  // everyone is done reading before the next tiles overwrite them
    }
    if (m < p.M && n < p.N) {
      C[m * p.c_stride_m + n * p.c_stride_n] = from_acc<T>(add_bias<T>(p, n, acc));
    }
  }
}

}  // namespace torch_gemm
