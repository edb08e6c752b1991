// Launcher of the tensor-core decode rung (bf16/fp16, float32 as tf32): token tiles from M, the
// split of K inside a block and across blocks (so that the weight's columns keep every SM
// streaming); for bf16/fp16 up to 16 tokens against an N-major weight, the kernel that reads its
// rows (K split in a cluster on sm_90); and the fallback to gemv where the operands are not
// contiguous, aligned 16-byte vectors.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "kernels/decode_sm80.cuh"
#include "kernels/decode_sm80_n_major.cuh"
#include "kernels/device_cache.h"
#include "kernels/grid.cuh"
#include "kernels/launch.h"

namespace torch_gemm {
namespace {

using Cfg = DecodeSm80Config;

// bf16/fp16, and float32 (which the op runs here only where torch allows TF32: the table's
// float32_as_tf32).
bool mma_dtype(const GemmParams& p) {
  return p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat16 || p.dtype == DType::kFloat32;
}

// TORCH_GEMM_DECODE_CLUSTER: the N-major kernel's cluster size, forced (tuning; unset: the plan's).
// Read per launch, not once per process as wgmma's overrides are, so that one process can time
// every size against the others: a getenv costs far less than the launch.
int forced_n_major_cluster() { return parse_decode_cluster(std::getenv("TORCH_GEMM_DECODE_CLUSTER")); }

template <typename T, int kTokenTiles>
LaunchStatus launch_n_major(const GemmParams& p, const DecodeNMajorPlan& plan, cudaStream_t stream) {
  return for_each_batch_chunk(p, kMaxGridZ, [&](const GemmParams& chunk) {
    const dim3 grid(static_cast<unsigned>(plan.blocks_x), static_cast<unsigned>(plan.splits),
                    static_cast<unsigned>(chunk.batch));
    const auto kernel = decode_sm80_n_major_kernel<T, kTokenTiles>;
    if (plan.splits == 1) {
      kernel<<<grid, DecodeNMajorConfig::kThreads, 0, stream>>>(chunk, plan.chunks_per_split);
      return check_launch("decode_sm80_n_major_kernel");
    }
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = dim3(DecodeNMajorConfig::kThreads);
    config.stream = stream;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 1;
    cluster.val.clusterDim.y = static_cast<unsigned>(plan.splits);
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    return check_call(cudaLaunchKernelEx(&config, kernel, chunk, plan.chunks_per_split),
                      "cudaLaunchKernelEx of decode_sm80_n_major_kernel (a cluster of K's splits)");
  });
}

template <typename T>
LaunchStatus launch_n_major_tiles(const GemmParams& p, cudaStream_t stream) {
  // The kernel's cluster code is in its sm_90 image, which a build with sm_90a code runs on 9.0
  // (elsewhere, as from a JIT-compiled compute_80 image on a later GPU, it would trap).
#ifdef TORCH_GEMM_WITH_SM90A
  const bool clusters = current_compute_capability() == 90;
#else
  const bool clusters = false;
#endif
  const DecodeNMajorPlan plan = plan_decode_n_major(p, sm_count_of(p), clusters, forced_n_major_cluster());
  if (plan.blocks_x > kMaxGridX) return refuse("N past the grid's reach");
  return plan.token_tiles == 1 ? launch_n_major<T, 1>(p, plan, stream) : launch_n_major<T, 2>(p, plan, stream);
}

template <typename T, int kTokenTiles, int kWarpsPerColumn>
LaunchStatus launch_plan(const GemmParams& p, const DecodePlan& plan, cudaStream_t stream) {
  if (plan.warps_per_column != kWarpsPerColumn) {
    return refuse("plan_decode's warps a column group are not the instantiated kernel's");
  }
  return for_each_batch_chunk(p, kMaxGridZ, [&](const GemmParams& chunk) {
    GemmParams q = chunk;
    if (plan.splits == 1) q.workspace = nullptr;  // the kernel stores C itself
    const dim3 grid(static_cast<unsigned>(plan.blocks_x), static_cast<unsigned>(plan.splits),
                    static_cast<unsigned>(chunk.batch));
    decode_sm80_kernel<T, kTokenTiles, kWarpsPerColumn><<<grid, Cfg::kThreads, 0, stream>>>(q, plan.chunks_per_split);
    LaunchStatus status = check_launch("decode_sm80_kernel");
    if (!status.ok() || plan.splits == 1) return status;
    const int64_t blocks = std::min<int64_t>(ceil_div(q.M * q.N, int64_t{Cfg::kThreads}), sm_count_of(p) * 4);
    decode_sm80_reduce<T><<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(chunk.batch)),
                           Cfg::kThreads, 0, stream>>>(q, static_cast<int>(plan.splits));
    return check_launch("decode_sm80_reduce");
  });
}

template <typename T>
LaunchStatus launch_tiles(const GemmParams& p, const DecodePlan& plan, cudaStream_t stream) {
  switch (plan.token_tiles) {
    case 1: return launch_plan<T, 1, 8>(p, plan, stream);
    case 2: return launch_plan<T, 2, 8>(p, plan, stream);
    case 4:  // plan_decode: one warp a column group for float32
      if constexpr (std::is_same_v<T, float>) {
        return launch_plan<T, 4, 1>(p, plan, stream);
      } else {
        return launch_plan<T, 4, 4>(p, plan, stream);
      }
    default: return launch_plan<T, 8, 2>(p, plan, stream);
  }
}

}  // namespace

LaunchStatus launch_gemm_decode_sm80(const GemmParams& params, cudaStream_t stream) {
  if (params.M == 0 || params.N == 0 || params.batch == 0) return {};
  if (decode_n_major_layout(params)) {
    return params.dtype == DType::kBFloat16 ? launch_n_major_tiles<__nv_bfloat16>(params, stream)
                                            : launch_n_major_tiles<__half>(params, stream);
  }
  // Layouts the 16-byte loads cannot take (and float64) go to gemv, which reads any strides.
  if (!mma_dtype(params) || params.K == 0 || !decode_vector_loads(params)) return launch_gemm_gemv(params, stream);
  const DecodePlan plan = plan_decode(params, sm_count_of(params));
  if (plan.blocks_x > kMaxGridX) return refuse("N past the grid's reach");
  if (plan.splits > 1 && params.workspace_bytes < gemm_decode_sm80_workspace_bytes(params)) {
    return refuse("workspace smaller than the split plan needs");
  }
  switch (params.dtype) {
    case DType::kBFloat16: return launch_tiles<__nv_bfloat16>(params, plan, stream);
    case DType::kFloat16: return launch_tiles<__half>(params, plan, stream);
    default: return launch_tiles<float>(params, plan, stream);
  }
}

int64_t gemm_decode_sm80_workspace_bytes(const GemmParams& params) {
  if (params.M == 0 || params.N == 0 || params.batch == 0 || params.K == 0 || !mma_dtype(params)) return 0;
  if (decode_n_major_layout(params)) return 0;  // its cluster adds the split's sums
  if (!decode_vector_loads(params)) return 0;  // gemv runs it, without a workspace
  const DecodePlan plan = plan_decode(params, sm_count_of(params));
  if (plan.splits == 1) return 0;
  const int64_t batch = std::min<int64_t>(params.batch, kMaxGridZ);
  return batch * plan.splits * params.M * params.N * static_cast<int64_t>(sizeof(float));
}

}  // namespace torch_gemm
