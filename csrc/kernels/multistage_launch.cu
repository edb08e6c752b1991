// Launcher of the multistage rung: the tile and split-K from plan_multistage (multistage_plan.h),
// the operand layouts from the strides (launch_fp32_tiled), and the workspace split-K needs.
#include <cstdlib>
#include <optional>
#include <string>

#include "kernels/launch.h"
#include "kernels/multistage.cuh"
#include "kernels/multistage_plan.h"

namespace torch_gemm {
namespace {

// TORCH_GEMM_MULTISTAGE_PLAN, read per call so that one process can time every plan (a getenv
// costs far less than the launch): false where it is set to something not a plan.
bool forced_plan(std::optional<MultistageForced>* forced, std::string* error) {
  return read_multistage_plan(std::getenv("TORCH_GEMM_MULTISTAGE_PLAN"), forced, error);
}

struct MultistageLaunch {
  template <typename LayoutA, typename LayoutB>
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    std::optional<MultistageForced> forced;
    std::string error;
    if (!forced_plan(&forced, &error)) return refuse(error);
    const MultistagePlan plan =
        plan_multistage(p, sm_count_of(p), nullptr, forced ? &*forced : nullptr);
    const int64_t needed = splitk_workspace_bytes(p, plan.split);
    if (needed > p.workspace_bytes) {
      return refuse("workspace of " + std::to_string(p.workspace_bytes) +
                    " bytes, the split-K plan needs " + std::to_string(needed));
    }
    float* workspace = static_cast<float*>(p.workspace);
    switch (plan.tile_id) {
      case MultistageTileId::kLarge:
        return run_multistage<MultistageLargeConfig, LayoutA, LayoutB>(p, plan.split, workspace, stream);
      case MultistageTileId::kSmall:
        return run_multistage<MultistageSmallConfig, LayoutA, LayoutB>(p, plan.split, workspace, stream);
      case MultistageTileId::kNarrow:
        break;
    }
    return run_multistage<MultistageNarrowConfig, LayoutA, LayoutB>(p, plan.split, workspace, stream);
  }
};

}  // namespace

int64_t gemm_multistage_workspace_bytes(const GemmParams& params) {
  if (params.dtype != DType::kFloat32) return 0;
  std::optional<MultistageForced> forced;
  std::string error;  // the launch refuses such a value; no workspace is asked for it
  if (!forced_plan(&forced, &error)) return 0;
  return multistage_workspace_bytes(params, sm_count_of(params), forced ? &*forced : nullptr);
}

LaunchStatus launch_gemm_multistage(const GemmParams& params, cudaStream_t stream) {
  return launch_fp32_tiled<MultistageLaunch>(params, stream);
}

}  // namespace torch_gemm
