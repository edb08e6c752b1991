// Launcher of the naive rung: a 32×8 thread block per 32×8 tile of C.
#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "kernels/naive.cuh"

namespace torch_gemm {
namespace {

template <typename T>
struct NaiveLauncher {
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    using Config = NaiveConfig;
    if (p.M == 0 || p.N == 0) return {};
    const dim3 block(Config::kBlockN, Config::kBlockM);
    return for_each_batch_chunk(p, kMaxGridZ, [&](const GemmParams& chunk) {
      const dim3 grid(static_cast<unsigned>(ceil_div(p.N, Config::kBlockN)),
                      grid_y_for(ceil_div(p.M, Config::kBlockM)), static_cast<unsigned>(chunk.batch));
      gemm_naive_kernel<T, Config><<<grid, block, 0, stream>>>(chunk);
      return check_launch("gemm_naive_kernel");
    });
  }
};

}  // namespace

LaunchStatus launch_gemm_naive(const GemmParams& params, cudaStream_t stream) {
  return dispatch_dtype<NaiveLauncher>(params, stream);
}

}  // namespace torch_gemm
