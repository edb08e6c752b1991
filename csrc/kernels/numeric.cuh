// Element-type traits shared by every CUDA rung: the accumulator type (fp32 for the 16-bit
// types, as cuBLAS does, fp64 for fp64) and conversions in and out of it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#include "kernels/gemm_params.h"
#include "kernels/launch_status.h"

namespace torch_gemm {

template <typename T> struct AccumulatorFor { using type = float; };
template <> struct AccumulatorFor<double> { using type = double; };

template <typename T>
using acc_t = typename AccumulatorFor<T>::type;

template <typename Acc, typename T>
__device__ __forceinline__ Acc to_acc(T x) { return static_cast<Acc>(x); }
template <>
__device__ __forceinline__ float to_acc<float, __half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T, typename Acc>
__device__ __forceinline__ T from_acc(Acc x) { return static_cast<T>(x); }
template <>
__device__ __forceinline__ __half from_acc<__half, float>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float x) {
  return __float2bfloat16_rn(x);
}

// fp32 → tf32 (10 mantissa bits), rounded to nearest with ties away from zero, as cuBLAS rounds
// its TF32 operands; the tensor cores themselves would drop the low 13 bits, a truncation whose
// bias doubles the error of a long dot product. cvt.rna.tf32 is sm_80+; the TF32 paths that call
// this run on sm_90 only, so older targets compile the identity.
__device__ __forceinline__ float round_to_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits);
#else
  return x;
#endif
}

// acc + bias[n] when the params carry a bias (gemm::linear_tiled), in the accumulator type.
template <typename T, typename Acc>
__device__ __forceinline__ Acc add_bias(const GemmParams& p, int64_t n, Acc acc) {
  if (p.bias == nullptr) return acc;
  return acc + to_acc<Acc>(static_cast<const T*>(p.bias)[n * p.bias_stride]);
}

// Runs Launcher<T>::run(params, stream) with the CUDA element type T for params.dtype, so that
// each launcher is written once as a template and instantiated for all four dtypes.
template <template <typename> class Launcher>
LaunchStatus dispatch_dtype(const GemmParams& params, cudaStream_t stream) {
  switch (params.dtype) {
    case DType::kFloat32: return Launcher<float>::run(params, stream);
    case DType::kFloat64: return Launcher<double>::run(params, stream);
    case DType::kFloat16: return Launcher<__half>::run(params, stream);
    case DType::kBFloat16: return Launcher<__nv_bfloat16>::run(params, stream);
  }
  return refuse("unknown dtype");
}

}  // namespace torch_gemm
