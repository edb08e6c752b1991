#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "kernels/warptile.cuh"

namespace torch_gemm {
namespace {

struct WarptileLaunch {
  template <typename LayoutA, typename LayoutB>
  static cudaError_t run(const GemmParams& p, cudaStream_t stream) {
    using Config = WarptileConfig;
    const int64_t tiles_m = (p.M + Config::kBlockM - 1) / Config::kBlockM;
    const int64_t tiles_n = (p.N + Config::kBlockN - 1) / Config::kBlockN;
    dim3 grid;
    if (!grid_for_tiles(tiles_m * tiles_n, &grid)) return cudaErrorInvalidValue;
    // 2 stages of (kBlockK, kBlockM + pad) + (kBlockK, kBlockN + pad) floats = 16.5 KB of static
    // shared memory: under the 48 KB that would need cudaFuncAttributeMaxDynamicSharedMemorySize.
    gemm_warptile_kernel<Config, LayoutA, LayoutB><<<grid, Config::kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t launch_gemm_warptile(const GemmParams& params, cudaStream_t stream) {
  if (params.dtype != DType::kFloat32) return cudaErrorInvalidValue;  // fp32-only rung
  if (params.M == 0 || params.N == 0) return cudaSuccess;             // empty C: nothing to write
  return dispatch_operand_layouts<WarptileLaunch>(params, stream);
}

}  // namespace torch_gemm
