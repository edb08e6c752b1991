// wgmma_sm90's kernels for bf16 slim 128x160 tiles, two consumer warpgroups: their own translation
// unit, so that the build compiles the kernel family in parallel (launch_config.cuh).
#include "kernels/sm90/launch_config.cuh"

namespace torch_gemm {
namespace sm90 {

template LaunchStatus launch_config<__nv_bfloat16, 2, kWgmmaSlimBlockN160>(
    const Plan&, const GemmParams&, cudaStream_t);

}  // namespace sm90
}  // namespace torch_gemm
