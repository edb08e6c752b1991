// The one description of a GEMM that crosses from the torch boundary into the launchers:
// C[z] = A[z] · B[z] (+ bias) for z < batch, every operand through its own element strides, so that
// transposed, sliced and broadcast (stride 0) views reach the kernels without a copy. No torch here.
#pragma once

#include <cstdint>

// Host and device where compiled by nvcc (kernels use dtype_size and ceil_div), host only in the
// torch boundary's and the plans' C++.
#ifdef __CUDACC__
#define TORCH_GEMM_HOST_DEVICE __host__ __device__
#else
#define TORCH_GEMM_HOST_DEVICE
#endif

namespace torch_gemm {

// Element types the CUDA kernels are instantiated for. The torch boundary maps ScalarType onto
// this; the launchers switch on it to pick the template instantiation.
enum class DType : int { kFloat32, kFloat64, kFloat16, kBFloat16 };

TORCH_GEMM_HOST_DEVICE constexpr int64_t dtype_size(DType dtype) {
  return dtype == DType::kFloat64 ? 8 : dtype == DType::kFloat32 ? 4 : 2;
}

// Tiles of y covering x (x >= 0, y > 0).
TORCH_GEMM_HOST_DEVICE constexpr int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

// x rounded up to a multiple of `multiple` (x >= 0, multiple > 0).
TORCH_GEMM_HOST_DEVICE constexpr int64_t round_up(int64_t x, int64_t multiple) {
  return ceil_div(x, multiple) * multiple;
}

// Hardware limit on gridDim.z: launchers (and the plans that size their workspaces) chunk the
// batch into launches of at most this many.
constexpr int64_t kMaxGridZ = 65535;

struct GemmParams {
  int64_t M = 0, N = 0, K = 0;
  DType dtype = DType::kFloat32;

  const void* a = nullptr;  // (M, K)
  int64_t a_stride_m = 0;   // elements between A[m, k] and A[m + 1, k]
  int64_t a_stride_k = 0;   // elements between A[m, k] and A[m, k + 1]

  const void* b = nullptr;  // (K, N)
  int64_t b_stride_k = 0;
  int64_t b_stride_n = 0;

  void* c = nullptr;        // (M, N), written, never read
  int64_t c_stride_m = 0;
  int64_t c_stride_n = 0;

  // Batched products (gemm::bmm_tiled): `batch` independent products, operand z at the pointers
  // above moved by z times these element strides. Launchers put z on blockIdx.z (batch_element).
  int64_t batch = 1;
  int64_t a_stride_batch = 0;
  int64_t b_stride_batch = 0;
  int64_t c_stride_batch = 0;

  // gemm::linear_tiled: bias[n] (same dtype as the operands) is added to every row of C in the
  // epilogue, in the accumulator type before the one rounding to the output type; null for none.
  // The same bias serves every batch element.
  const void* bias = nullptr;  // (N)
  int64_t bias_stride = 0;

  // gemm::mm_tiled_row_sum: row_sum[z·M + m] = Σ_k A[z, m, k], summed in fp32 and rounded once to
  // the operands' dtype, written by kernels whose table entry says fuses_row_sum (wgmma_sm90:
  // beside the product, kernels/row_sum.cuh); null for none. Only where N > 0.
  void* row_sum = nullptr;  // (batch, M), contiguous

  // Scratch memory a launcher asked for (GemmWorkspaceFn), allocated by the caller on the same
  // stream; null when none was asked for.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;

  // Multiprocessors of the device the product runs on, set once per call by the torch boundary
  // so that its workspace plan and the launcher's see the same device; 0: the launcher asks
  // (sm_count_of).
  int sm_count = 0;

  // wgmma_sm90 only: this is 3xTF32's inner product (three_tf32.cu), float32 operands already
  // split into TF32 values and K-major. It runs on the promoted 128-column tf32 tiles, whose
  // big·big k-tiles' sums are added in fp32 (sm90/mainloop.cuh), never transposed.
  bool tf32_promoted = false;
};

}  // namespace torch_gemm
