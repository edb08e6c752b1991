// Host entry points of the CUDA rungs. Each takes the params struct and the stream to launch on,
// returns a LaunchStatus (the error of the step that failed, and which step), and touches no
// torch API.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemm_params.h"
#include "kernels/launch_status.h"

namespace torch_gemm {

using GemmLaunchFn = LaunchStatus (*)(const GemmParams&, cudaStream_t);
// Bytes of workspace a launch of these params needs (params.workspace), for the rungs that use one.
using GemmWorkspaceFn = int64_t (*)(const GemmParams&);

// warptile's block tile, (kBlockM, kBlockN): kernel="auto" counts its tiles against the SMs.
constexpr int64_t kWarptileBlockM = 128;
constexpr int64_t kWarptileBlockN = 128;
// wgmma_sm90's block tile (kernel="auto" runs tf32 on it where M and N fill its 128 rows). The
// launcher takes 64-row tiles (kWgmmaNarrowBlockM, one consumer warpgroup) where the 128-row ones
// would not fill half the SMs, 64×128 ones (kWgmmaSmallBlockN, 16-bit) where even those would not,
// and splits K where the tiles leave most SMs idle and K is long.
constexpr int64_t kWgmmaBlockM = 128;
constexpr int64_t kWgmmaNarrowBlockM = 64;
constexpr int64_t kWgmmaBlockN = 256;
constexpr int64_t kWgmmaSmallBlockN = 128;

LaunchStatus launch_gemm_naive(const GemmParams& params, cudaStream_t stream);
LaunchStatus launch_gemm_smem16(const GemmParams& params, cudaStream_t stream);
LaunchStatus launch_gemm_smem32(const GemmParams& params, cudaStream_t stream);
// The register-tiled rungs take fp32 only (refused for any other dtype).
LaunchStatus launch_gemm_regtile(const GemmParams& params, cudaStream_t stream);
LaunchStatus launch_gemm_warptile(const GemmParams& params, cudaStream_t stream);
// cp.async (sm_80+); with split-K it needs gemm_multistage_workspace_bytes of workspace.
LaunchStatus launch_gemm_multistage(const GemmParams& params, cudaStream_t stream);
int64_t gemm_multistage_workspace_bytes(const GemmParams& params);

// The output tile and K split count multistage picks for an fp32 (M, N, K) on the current
// device (for tests and the benchmark record).
struct MultistageChoice {
  int block_m, block_n, splits;
};
MultistageChoice multistage_choice(int64_t M, int64_t N, int64_t K);

// A few rows of A against B streamed once (decode): matrix-vector products on the CUDA cores,
// 16-byte loads where A's rows and B's columns are contiguous (a linear's weight is).
LaunchStatus launch_gemm_gemv(const GemmParams& params, cudaStream_t stream);
// Rows of A at or below which kernel="auto" takes gemv where B's columns are contiguous: for the
// 16-bit types one (from two rows on, wgmma's tiles were mostly faster), for float32 and float64
// two (benchmarks/NOTES.md).
constexpr int64_t kGemvMaxRows16Bit = 1;
constexpr int64_t kGemvMaxRowsWide = 2;

// Tensor cores (mma.sync, sm_80+): bf16 and fp16 only (refused for fp32 and fp64).
LaunchStatus launch_gemm_mma_sm80(const GemmParams& params, cudaStream_t stream);

// Hopper wgmma + TMA (sm_90a builds, compute capability 9.0): bf16 and fp16. Operands TMA cannot
// address are first repacked into gemm_wgmma_sm90_workspace_bytes of workspace.
LaunchStatus launch_gemm_wgmma_sm90(const GemmParams& params, cudaStream_t stream);
int64_t gemm_wgmma_sm90_workspace_bytes(const GemmParams& params);

}  // namespace torch_gemm
