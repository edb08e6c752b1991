// Host entry points of the CUDA rungs. Each takes the params struct and the stream to launch on,
// returns the launch's cudaError_t (cudaGetLastError after the launch), and touches no torch API.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm_params.h"

namespace torch_gemm {

using GemmLaunchFn = cudaError_t (*)(const GemmParams&, cudaStream_t);

// warptile's block tile, (kBlockM, kBlockN): kernel="auto" counts its tiles against the SMs.
constexpr int64_t kWarptileBlockM = 128;
constexpr int64_t kWarptileBlockN = 128;

cudaError_t launch_gemm_naive(const GemmParams& params, cudaStream_t stream);
cudaError_t launch_gemm_smem16(const GemmParams& params, cudaStream_t stream);
cudaError_t launch_gemm_smem32(const GemmParams& params, cudaStream_t stream);
// The register-tiled rungs take fp32 only (cudaErrorInvalidValue for any other dtype).
cudaError_t launch_gemm_regtile(const GemmParams& params, cudaStream_t stream);
cudaError_t launch_gemm_warptile(const GemmParams& params, cudaStream_t stream);

}  // namespace torch_gemm
