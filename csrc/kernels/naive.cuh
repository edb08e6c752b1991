// Rung 1, naive: one thread per element of C, each reading a row of A and a column of B straight
// from global memory: the baseline of the ladder, every operand element fetched once per use.
#pragma once

#include "kernels/grid.cuh"
#include "kernels/numeric.cuh"

namespace torch_gemm {

struct NaiveConfig {
  static constexpr int kBlockN = 32;  // threads along N: a warp covers 32 consecutive columns, so
                                      // its loads of B and stores of C coalesce when N is contiguous
  static constexpr int kBlockM = 8;   // threads along M
};

template <typename T, typename Config>
__global__ void __launch_bounds__(Config::kBlockN * Config::kBlockM)
gemm_naive_kernel(GemmParams p) {
  using Acc = acc_t<T>;
  p = batch_element(p, blockIdx.z);
  const T* __restrict__ A = static_cast<const T*>(p.a);
  const T* __restrict__ B = static_cast<const T*>(p.b);
  T* __restrict__ C = static_cast<T*>(p.c);

  const int64_t n = static_cast<int64_t>(blockIdx.x) * Config::kBlockN + threadIdx.x;
  if (n >= p.N) return;  // no barriers in this kernel, so threads past N can leave at once
  // gridDim.y is capped at 65535, so rows beyond one grid's reach are covered by striding.
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * Config::kBlockM + threadIdx.y; m < p.M;
       m += static_cast<int64_t>(gridDim.y) * Config::kBlockM) {
    const T* a_row = A + m * p.a_stride_m;
    const T* b_col = B + n * p.b_stride_n;
    Acc acc = Acc(0);
    for (int64_t k = 0; k < p.K; ++k) {
      acc += to_acc<Acc>(a_row[k * p.a_stride_k]) * to_acc<Acc>(b_col[k * p.b_stride_k]);
    }
    C[m * p.c_stride_m + n * p.c_stride_n] = from_acc<T>(add_bias<T>(p, n, acc));
  }
}

}  // namespace torch_gemm
