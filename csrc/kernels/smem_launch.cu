// Launchers of the smem rung at tiles 16 and 32: a kTile×kTile thread block per tile of C.
#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "kernels/smem.cuh"

namespace torch_gemm {
namespace {

template <int kTile>
struct SmemLauncher {
  template <typename T>
  struct For {
    static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
      using Config = SmemConfig<kTile>;
      if (p.M == 0 || p.N == 0) return {};
      const dim3 block(kTile, kTile);
      return for_each_batch_chunk(p, kMaxGridZ, [&](const GemmParams& chunk) {
        const dim3 grid(static_cast<unsigned>(ceil_div(p.N, kTile)),
                        grid_y_for(ceil_div(p.M, kTile)), static_cast<unsigned>(chunk.batch));
        gemm_smem_kernel<T, Config><<<grid, block, 0, stream>>>(chunk);
        return check_launch("gemm_smem_kernel");
      });
    }
  };
};

}  // namespace

LaunchStatus launch_gemm_smem16(const GemmParams& params, cudaStream_t stream) {
  return dispatch_dtype<SmemLauncher<16>::For>(params, stream);
}

LaunchStatus launch_gemm_smem32(const GemmParams& params, cudaStream_t stream) {
  return dispatch_dtype<SmemLauncher<32>::For>(params, stream);
}

}  // namespace torch_gemm
