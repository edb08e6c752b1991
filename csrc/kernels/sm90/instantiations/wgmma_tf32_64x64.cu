// wgmma_sm90's kernels for tf32 64x64 tiles, one consumer warpgroup (paired along M or single,
// unsplit): their own translation unit, so that the build compiles the kernel family in parallel
// (launch_config.cuh).
#include "kernels/sm90/launch_config.cuh"

namespace torch_gemm {
namespace sm90 {

template LaunchStatus launch_config<float, 1, kWgmmaTinyBlockN>(
    const Plan&, const GemmParams&, cudaStream_t);

}  // namespace sm90
}  // namespace torch_gemm
