// Launcher of the multistage rung: the configuration and split-K from plan_multistage, the
// operand layouts from the strides (launch_fp32_tiled), and the workspace split-K needs.
#include <algorithm>

#include "kernels/launch.h"
#include "kernels/multistage.cuh"

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
  if (params.dtype != DType::kFloat32 || params.M == 0 || params.N == 0) return 0;
  // The launcher plans each chunk of the batch (launch_fp32_tiled): a last chunk of one product
  // may split K where the whole batch does not.
  const int sms = sm_count_of(params);
  int64_t bytes = 0;
  for (const int64_t chunk : {std::min(params.batch, kMaxGridZ), params.batch % kMaxGridZ}) {
    if (chunk == 0) continue;
    GemmParams planned = params;
    planned.batch = chunk;
    bytes = std::max(bytes, splitk_workspace_bytes(planned, plan_multistage(planned, sms).split));
  }
  return bytes;
}

MultistageChoice multistage_choice(int64_t M, int64_t N, int64_t K) {
  GemmParams p;
  p.M = M, p.N = N, p.K = K;
  const MultistagePlan plan = plan_multistage(p, sm_count_of(p));
  return plan.large ? MultistageChoice{MultistageLargeConfig::kBlockM, MultistageLargeConfig::kBlockN,
                                       plan.split.splits}
                    : MultistageChoice{MultistageSmallConfig::kBlockM, MultistageSmallConfig::kBlockN,
                                       plan.split.splits};
}

LaunchStatus launch_gemm_multistage(const GemmParams& params, cudaStream_t stream) {
  return launch_fp32_tiled<MultistageLaunch>(params, stream);
}

}  // namespace torch_gemm
