// Copies an operand that TMA cannot address (a stride that is not a multiple of 16 bytes, a
// misaligned base, no unit stride) into a dense workspace whose rows are padded to 16 bytes, so
// that the tensor-core rung reads it like any aligned operand. Keeps the operand's major order:
// the dimension with the smaller stride stays innermost, so reads and writes are both coalesced.
#pragma once

#include <cstdint>

#include "kernels/grid.cuh"

namespace torch_gemm {

// One operand (batch, outer, inner) → dst[z][o][i] at dst + (z·outer + o)·ld + i.
struct RepackView {
  const void* src;
  int64_t batch, outer, inner;
  int64_t stride_batch, stride_outer, stride_inner;
  void* dst;
  int64_t ld;  // padded inner extent of dst rows
};

// Grid-stride over every element; consecutive threads take consecutive inner indices.
template <typename T>
__global__ void repack_operand_kernel(RepackView v) {
  const int64_t total = v.batch * v.outer * v.inner;
  const T* src = static_cast<const T*>(v.src);
  T* dst = static_cast<T*>(v.dst);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % v.inner;
    const int64_t row = e / v.inner;  // z·outer + o
    const int64_t o = row % v.outer;
    const int64_t z = row / v.outer;
    dst[row * v.ld + i] = src[z * v.stride_batch + o * v.stride_outer + i * v.stride_inner];
  }
}

}  // namespace torch_gemm
