// Launcher of the regtile rung: one block per 128×128 tile of C, the operand layouts picked from
// the strides (launch_fp32_tiled).
#include "kernels/launch.h"
#include "kernels/regtile.cuh"

namespace torch_gemm {
namespace {

struct RegtileLaunch {
  template <typename LayoutA, typename LayoutB>
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    using Config = RegtileConfig;
    dim3 grid;
    if (!grid_for_block_tiles<Config>(p, &grid)) return refuse("grid: more tiles than a grid holds");
    gemm_regtile_kernel<Config, LayoutA, LayoutB><<<grid, Config::kThreads, 0, stream>>>(p);
    return check_launch("gemm_regtile_kernel");
  }
};

}  // namespace

LaunchStatus launch_gemm_regtile(const GemmParams& params, cudaStream_t stream) {
  return launch_fp32_tiled<RegtileLaunch>(params, stream);
}

}  // namespace torch_gemm
