// wgmma_sm90's kernels for fp16 128x192 tiles and the slim 128x80 and 128x96 ones, two consumer
// warpgroups: their own translation unit, so that the build compiles the kernel family in parallel
// (launch_config.cuh).
#include "kernels/sm90/launch_config.cuh"

namespace torch_gemm {
namespace sm90 {

template LaunchStatus launch_config<__half, 2, kWgmmaMidBlockN>(
    const Plan&, const GemmParams&, cudaStream_t);
template LaunchStatus launch_config<__half, 2, kWgmmaSlimBlockN80>(
    const Plan&, const GemmParams&, cudaStream_t);
template LaunchStatus launch_config<__half, 2, kWgmmaSlimBlockN96>(
    const Plan&, const GemmParams&, cudaStream_t);

}  // namespace sm90
}  // namespace torch_gemm
