// The one description of a GEMM that crosses from the torch boundary into the launchers:
// C[M, N] = A[M, K] · B[K, N], every operand addressed through its own element strides, so
// transposed and sliced views reach the kernels without a copy. No torch headers here.
#pragma once

#include <cstdint>

namespace torch_gemm {

// Element types the CUDA kernels are instantiated for. The torch boundary maps ScalarType onto
// this; the launchers switch on it to pick the template instantiation.
enum class DType : int { kFloat32, kFloat64, kFloat16, kBFloat16 };

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

  // Scratch memory a launcher asked for (GemmWorkspaceFn), allocated by the caller on the same
  // stream; null when none was asked for.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

}  // namespace torch_gemm
