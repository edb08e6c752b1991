// wgmma_sm90's kernels for tf32 slim 128x160 tiles, two consumer warpgroups (both operands
// K-major, C from registers): their own translation unit, so that the build compiles the kernel
// family in parallel (launch_config.cuh).
#include "kernels/sm90/launch_config.cuh"

namespace torch_gemm {
namespace sm90 {

template LaunchStatus launch_config<float, 2, kWgmmaSlimBlockN160>(
    const Plan&, const GemmParams&, cudaStream_t);

}  // namespace sm90
}  // namespace torch_gemm
