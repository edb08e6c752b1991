// Host entry points of the CUDA rungs. Each takes the params struct and the stream to launch on,
// returns a LaunchStatus (the error of the step that failed, and which step), and touches no
// torch API.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm_params.h"
#include "kernels/launch_status.h"
#include "kernels/tiles.h"

namespace torch_gemm {

using GemmLaunchFn = LaunchStatus (*)(const GemmParams&, cudaStream_t);
// Bytes of workspace a launch of these params needs (params.workspace), for the rungs that use one.
using GemmWorkspaceFn = int64_t (*)(const GemmParams&);

LaunchStatus launch_gemm_naive(const GemmParams& params, cudaStream_t stream);
LaunchStatus launch_gemm_smem16(const GemmParams& params, cudaStream_t stream);
LaunchStatus launch_gemm_smem32(const GemmParams& params, cudaStream_t stream);
// The register-tiled rungs take fp32 only (refused for any other dtype).
LaunchStatus launch_gemm_regtile(const GemmParams& params, cudaStream_t stream);
LaunchStatus launch_gemm_warptile(const GemmParams& params, cudaStream_t stream);
// cp.async (sm_80+); with split-K it needs gemm_multistage_workspace_bytes of workspace (its plan:
// multistage_plan.h).
LaunchStatus launch_gemm_multistage(const GemmParams& params, cudaStream_t stream);
int64_t gemm_multistage_workspace_bytes(const GemmParams& params);

// A few rows of A against B streamed once (decode): matrix-vector products on the CUDA cores,
// 16-byte loads where A's rows and B's columns are contiguous (a linear's weight is). kernel="auto"
// takes it up to kGemvMaxRows16Bit / kGemvMaxRowsWide / kGemvMaxRowsFloat32 rows (tiles.h).
LaunchStatus launch_gemm_gemv(const GemmParams& params, cudaStream_t stream);

// Decode on the tensor cores (mma.sync, sm_80+): a few tokens against a linear's weight streamed
// once, Cᵀ = W·Aᵀ; K split across blocks where the columns are few, the partial sums in
// gemm_decode_sm80_workspace_bytes of workspace. bf16/fp16 (and float32 as tf32) whose operands
// are contiguous 16-byte vectors along K; bf16/fp16 up to 16 tokens against an N-major weight
// whose rows are such vectors (dx), K split in a cluster on sm_90, no workspace; other layouts
// (and dtypes) run on gemv.
LaunchStatus launch_gemm_decode_sm80(const GemmParams& params, cudaStream_t stream);
int64_t gemm_decode_sm80_workspace_bytes(const GemmParams& params);

// Tensor cores (mma.sync, sm_80+): bf16 and fp16 only (refused for fp32 and fp64).
LaunchStatus launch_gemm_mma_sm80(const GemmParams& params, cudaStream_t stream);

// Hopper wgmma + TMA (sm_90a builds, compute capability 9.0): bf16 and fp16. Operands TMA cannot
// address are first repacked into gemm_wgmma_sm90_workspace_bytes of workspace.
LaunchStatus launch_gemm_wgmma_sm90(const GemmParams& params, cudaStream_t stream);
int64_t gemm_wgmma_sm90_workspace_bytes(const GemmParams& params);

// float32 at float32's accuracy on wgmma_sm90's TF32 tensor cores (3xTF32): each operand split
// once into TF32 big and small parts in gemm_wgmma_sm90_3xtf32_workspace_bytes of workspace, the
// three products big·big + big·small + small·big run as one TF32 product over three K-segments.
LaunchStatus launch_gemm_wgmma_sm90_3xtf32(const GemmParams& params, cudaStream_t stream);
int64_t gemm_wgmma_sm90_3xtf32_workspace_bytes(const GemmParams& params);

}  // namespace torch_gemm
