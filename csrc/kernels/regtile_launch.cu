#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "kernels/regtile.cuh"

namespace torch_gemm {
namespace {

struct RegtileLaunch {
  template <typename LayoutA, typename LayoutB>
  static cudaError_t run(const GemmParams& p, cudaStream_t stream) {
    using Config = RegtileConfig;
    const int64_t tiles_m = (p.M + Config::kBlockM - 1) / Config::kBlockM;
    const int64_t tiles_n = (p.N + Config::kBlockN - 1) / Config::kBlockN;
    dim3 grid;
    if (!grid_for_tiles(tiles_m * tiles_n, &grid)) return cudaErrorInvalidValue;
    gemm_regtile_kernel<Config, LayoutA, LayoutB><<<grid, Config::kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t launch_gemm_regtile(const GemmParams& params, cudaStream_t stream) {
  if (params.dtype != DType::kFloat32) return cudaErrorInvalidValue;  // fp32-only rung
  if (params.M == 0 || params.N == 0) return cudaSuccess;             // empty C: nothing to write
  return dispatch_operand_layouts<RegtileLaunch>(params, stream);
}

}  // namespace torch_gemm
