// wgmma_sm90's kernels for tf32 128x192 tiles, two consumer warpgroups (pairs, unsplit): their own
// translation unit, so that the build compiles the kernel family in parallel (launch_config.cuh).
#include "kernels/sm90/launch_config.cuh"

namespace torch_gemm {
namespace sm90 {

template LaunchStatus launch_config<float, 2, kWgmmaMidBlockN>(
    const Plan&, const GemmParams&, cudaStream_t);

}  // namespace sm90
}  // namespace torch_gemm
