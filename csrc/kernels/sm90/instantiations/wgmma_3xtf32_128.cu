// wgmma_sm90's kernels for 3xTF32's promoted 128x128 and 64x128 tiles: their own translation unit,
// so that the build compiles the kernel family in parallel (launch_config.cuh).
#include "kernels/sm90/launch_config.cuh"

namespace torch_gemm {
namespace sm90 {

template LaunchStatus launch_config<float, 2, kWgmmaSmallBlockN, true>(
    const Plan&, const GemmParams&, cudaStream_t);
template LaunchStatus launch_config<float, 1, kWgmmaSmallBlockN, true>(
    const Plan&, const GemmParams&, cudaStream_t);

}  // namespace sm90
}  // namespace torch_gemm
