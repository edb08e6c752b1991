// Launcher of the multistage rung: the tile and split-K from plan_multistage (multistage_plan.h),
// the operand layouts from the strides (launch_fp32_tiled), and the workspace split-K needs.
#include "kernels/launch.h"
#include "kernels/multistage.cuh"
#include "kernels/multistage_plan.h"

namespace torch_gemm {
namespace {

struct MultistageLaunch {
  template <typename LayoutA, typename LayoutB>
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    const MultistagePlan plan = plan_multistage(p, sm_count_of(p));
    const int64_t needed = splitk_workspace_bytes(p, plan.split);
    if (needed > p.workspace_bytes) {
      return refuse("workspace of " + std::to_string(p.workspace_bytes) +
                    " bytes, the split-K plan needs " + std::to_string(needed));
    }
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
  if (params.dtype != DType::kFloat32) return 0;
  return multistage_workspace_bytes(params, sm_count_of(params));
}

LaunchStatus launch_gemm_multistage(const GemmParams& params, cudaStream_t stream) {
  return launch_fp32_tiled<MultistageLaunch>(params, stream);
}

}  // namespace torch_gemm
