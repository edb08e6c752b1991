// Launcher of the multistage rung: the configuration and split-K from plan_multistage, the
// operand layouts from the strides (launch_fp32_tiled), and the workspace split-K needs.
#include "kernels/launch.h"
#include "kernels/multistage.cuh"

namespace torch_gemm {
namespace {

struct MultistageLaunch {
  template <typename LayoutA, typename LayoutB>
  static cudaError_t run(const GemmParams& p, cudaStream_t stream) {
    const MultistagePlan plan = plan_multistage(p, current_sm_count());
    if (splitk_workspace_bytes(p, plan.split) > p.workspace_bytes) return cudaErrorInvalidValue;
    float* workspace = static_cast<float*>(p.workspace);
    return plan.large
               ? run_multistage<MultistageLargeConfig, LayoutA, LayoutB>(p, plan.split, workspace,
                                                                        stream)
               : run_multistage<MultistageSmallConfig, LayoutA, LayoutB>(p, plan.split, workspace,
                                                                        stream);
  }
};

}  // namespace

int64_t gemm_multistage_workspace_bytes(const GemmParams& params) {
  if (params.dtype != DType::kFloat32 || params.M == 0 || params.N == 0) return 0;
  return splitk_workspace_bytes(params, plan_multistage(params, current_sm_count()).split);
}

MultistageChoice multistage_choice(int64_t M, int64_t N, int64_t K) {
  GemmParams p;
  p.M = M, p.N = N, p.K = K;
  const MultistagePlan plan = plan_multistage(p, current_sm_count());
  return plan.large ? MultistageChoice{MultistageLargeConfig::kBlockM, MultistageLargeConfig::kBlockN,
                                       plan.split.splits}
                    : MultistageChoice{MultistageSmallConfig::kBlockM, MultistageSmallConfig::kBlockN,
                                       plan.split.splits};
}

cudaError_t launch_gemm_multistage(const GemmParams& params, cudaStream_t stream) {
  return launch_fp32_tiled<MultistageLaunch>(params, stream);
}

}  // namespace torch_gemm
