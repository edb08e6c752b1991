// Launcher of the warptile rung: one block per 128×128 tile of C, the operand layouts picked from
// the strides (launch_fp32_tiled).
#include "kernels/launch.h"
#include "kernels/warptile.cuh"

namespace torch_gemm {
namespace {

struct WarptileLaunch {
  template <typename LayoutA, typename LayoutB>
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    using Config = WarptileConfig;
    dim3 grid;
    if (!grid_for_block_tiles<Config>(p, &grid)) return refuse("grid: more tiles than a grid holds");
    // 2 stages of (kBlockK, kBlockM + pad) + (kBlockK, kBlockN + pad) floats = 16.5 KB of static
    // shared memory: under the 48 KB that would need cudaFuncAttributeMaxDynamicSharedMemorySize.
    gemm_warptile_kernel<Config, LayoutA, LayoutB><<<grid, Config::kThreads, 0, stream>>>(p);
    return check_launch("gemm_warptile_kernel");
  }
};

}  // namespace

LaunchStatus launch_gemm_warptile(const GemmParams& params, cudaStream_t stream) {
  return launch_fp32_tiled<WarptileLaunch>(params, stream);
}

}  // namespace torch_gemm
