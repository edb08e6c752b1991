// The launch template of wgmma_sm90: for one tile configuration (dtype, consumer warpgroups,
// tile columns), the repacks its plan asks for, the tensor maps, and the kernel instantiated for
// the operands' majors, the cluster, the K slices and stream-K. instantiations/ compiles it once
// per configuration, so that the build compiles the kernel family in parallel.
#pragma once

#include <cudaTypedefs.h>  // CUtensorMap

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/launch.h"
#include "kernels/repack.cuh"
#include "kernels/row_sum.cuh"
#include "kernels/sm90/heuristics.h"
#include "kernels/sm90/kernel.cuh"
#include "kernels/sm90/launch_config.h"

namespace torch_gemm {
namespace sm90 {

// The plan counts with the kernel's own numbers.
static_assert(KernelFacts::kTmaAlignBytes == kRepackChunkBytes, "repacked rows are whole 16-byte chunks");
static_assert(KernelFacts::kKTileBytes == WgmmaConfig<__nv_bfloat16>::kSwizzleBytes &&
                  KernelFacts::kKTileBytes == WgmmaConfig<float>::kSwizzleBytes,
              "a k-tile is one swizzled row of K");
static_assert(KernelFacts::kRowSumSliceAlign == kRowSumSliceAlign &&
                  KernelFacts::kRowSumWarps == kRowSumWarps,
              "the plan slices K as the row-sum kernels do");
constexpr int64_t kTmaAlignBytes = KernelFacts::kTmaAlignBytes;
constexpr int kRepackThreads = 256;
constexpr int64_t kRepackMaxBlocks = 8192;   // grid-stride beyond
constexpr int kRowSumRowsPerWarp = static_cast<int>(KernelFacts::kRowSumRowsPerWarp);
constexpr int64_t kFinishMaxBlocks = 4096;

// Copies a planned-for-repack operand from its original strides into the workspace; round_tf32:
// fp32 rounded to tf32 on the way (B, which the tensor cores read raw; A passes through registers
// and is rounded there).
template <typename T>
LaunchStatus repack(OperandPlan* op, int64_t orig_stride_x, int64_t orig_stride_k,
                   int64_t orig_stride_batch, bool round_tf32, void* workspace,
                   cudaStream_t stream) {
  void* dst = static_cast<char*>(workspace) + op->workspace_offset;
  RepackView view{op->ptr,
                  op->batch,
                  op->k_major ? op->extent_x : op->extent_k,
                  op->k_major ? op->extent_k : op->extent_x,
                  orig_stride_batch,
                  op->k_major ? orig_stride_x : orig_stride_k,
                  op->k_major ? orig_stride_k : orig_stride_x,
                  dst,
                  op->k_major ? op->stride_x : op->stride_k,
                  round_tf32};
  const int64_t total = view.batch * view.outer * view.inner;
  if (total > 0) {
    const auto magnitude = [](int64_t stride) { return stride < 0 ? -stride : stride; };
    const bool transpose = view.inner > 1 && view.outer > 1 &&
                           magnitude(view.stride_outer) < magnitude(view.stride_inner);
    if (transpose) {
      const int64_t tiles = view.batch * ceil_div(view.outer, kTransposeTile) *
                            ceil_div(view.inner, kTransposeTile);
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, kRepackMaxBlocks)));
      transpose_operand_kernel<T>
          <<<grid, dim3(kTransposeTile, kTransposeRows), 0, stream>>>(view);
      LaunchStatus status = check_launch("transpose_operand_kernel (repack)");
      if (!status.ok()) return status;
    } else {
      const int64_t chunks = ceil_div(view.inner, kRepackChunkBytes / int64_t{sizeof(T)});
      const int64_t pieces = view.batch * view.outer * ceil_div(chunks, kRepackThreads);
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>(pieces, kRepackMaxBlocks)));
      repack_operand_kernel<T><<<grid, kRepackThreads, 0, stream>>>(view);
      LaunchStatus status = check_launch("repack_operand_kernel (repack)");
      if (!status.ok()) return status;
    }
  }
  op->ptr = dst;
  return {};
}

constexpr const char* kNoEncoder =
    "tensor-map encode: the driver offers no cuTensorMapEncodeTiled (needs CUDA 12.0 or newer)";

// The 3-D tensor map of an operand: (K, X, batch) for a K-major one, copied in boxes of
// (kBlockK, box_rows); (X, K, batch) for an MN-major one, in boxes of (kMNBox, kBlockK). Strides
// of dimensions never stepped along (extent <= 1) are replaced by valid ones.
template <typename Config>
LaunchStatus encode_operand_map(CUtensorMap* map, const OperandPlan& op, int box_rows,
                                CUtensorMapDataType type, const char* which) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return refuse(kNoEncoder);
  const int64_t e = Config::kElementBytes;
  const int64_t inner = std::max<int64_t>(op.k_major ? op.extent_k : op.extent_x, 1);
  const int64_t outer = std::max<int64_t>(op.k_major ? op.extent_x : op.extent_k, 1);
  const int64_t outer_extent = op.k_major ? op.extent_x : op.extent_k;
  int64_t outer_stride = (op.k_major ? op.stride_x : op.stride_k) * e;
  if (outer_extent <= 1) outer_stride = round_up(inner * e, kTmaAlignBytes);
  int64_t batch_stride = op.stride_batch * e;
  if (op.batch <= 1) batch_stride = round_up(outer * outer_stride, kTmaAlignBytes);
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer),
                              static_cast<cuuint64_t>(std::max<int64_t>(op.batch, 1))};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(outer_stride),
                                 static_cast<cuuint64_t>(batch_stride)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(op.k_major ? Config::kBlockK : Config::kMNBox),
                             static_cast<cuuint32_t>(op.k_major ? box_rows : Config::kBlockK), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result =
      encode(map, type, 3, const_cast<void*>(op.ptr), dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             operand_l2_promotion(op.ptr, outer_stride, op.batch, batch_stride),
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // NONE: zeros outside
  if (result == CUDA_SUCCESS) return {};
  return refuse(describe_map(which, result, op.ptr, dims, strides, box));
}

// The 3-D tensor map of C, (N, M, batch), stored in boxes of (kBoxCols, kMmaM): one epilogue box.
template <typename Config>
LaunchStatus encode_output_map(CUtensorMap* map, const GemmParams& p, CUtensorMapDataType type) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return refuse(kNoEncoder);
  const int64_t e = Config::kElementBytes;
  int64_t row_stride = p.c_stride_m * e;
  if (p.M <= 1) row_stride = round_up(p.N * e, kTmaAlignBytes);
  int64_t batch_stride = p.c_stride_batch * e;
  if (p.batch <= 1) batch_stride = round_up(p.M * row_stride, kTmaAlignBytes);
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(p.N), static_cast<cuuint64_t>(p.M),
                              static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(row_stride),
                                 static_cast<cuuint64_t>(batch_stride)};
  const cuuint32_t box[3] = {Config::kBoxCols, Config::kMmaM, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result = encode(map, type, 3, p.c, dims, strides, box, element_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result == CUDA_SUCCESS) return {};
  return refuse(describe_map("C", result, p.c, dims, strides, box));
}
// One kernel of the family, with its shared memory allowed (once per device; before the occupancy
// query, too).
template <typename T, int kConsumers, int kMmaN, bool kPromoted, bool kKMajorA, bool kKMajorB,
          int kClusterM, int kSplitK, bool kStreamK>
auto allowed_kernel(LaunchStatus* status) {
  using Config = WgmmaConfig<T, kConsumers, kMmaN, kPromoted>;
  const auto kernel = gemm_wgmma_sm90_kernel<T, kKMajorA, kKMajorB, kClusterM, kConsumers,
                                             kSplitK, kMmaN, kStreamK, kPromoted>;
  static PerDeviceValue allowed;
  *status = allow_shared_memory_once(allowed, kernel, Config::kSmemBytes, [] {
    return "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " +
           std::to_string(Config::kSmemBytes) + " bytes) of gemm_wgmma_sm90_kernel";
  });
  return kernel;
}

// The persistent grid (plan_grid): one block per SM, or as many clusters as fit at once, but
// never more than there are turns, nor more than the number of turns per block needs. Split-K:
// split_groups clusters of kSplitK blocks per tile (usually one), each cluster one turn
// (reduce_split reuses the stage ring, which a next tile's copies would overwrite). Stream-K runs
// its own instantiation of the kernel: the walk's state cost the whole-turn kernels registers,
// and spills (benchmarks/NOTES.md).
template <typename T, int kConsumers, int kMmaN, bool kPromoted, bool kKMajorA, bool kKMajorB,
          int kClusterM, int kSplitK>
LaunchStatus launch_kernel(const CUtensorMap& map_a, const CUtensorMap& map_b,
                           const CUtensorMap& map_c, const WgmmaParams& wp,
                           const Plan& plan, cudaStream_t stream) {
  using Config = WgmmaConfig<T, kConsumers, kMmaN, kPromoted>;
  LaunchStatus status;
  const auto kernel = allowed_kernel<T, kConsumers, kMmaN, kPromoted, kKMajorA, kKMajorB,
                                     kClusterM, kSplitK, false>(&status);
  if (!status.ok()) return status;
  cudaLaunchConfig_t config{};
  const auto launch_step = [&config](const char* what) {
    return [&config, what] {
      return std::string("cudaLaunchKernelEx of gemm_wgmma_sm90_kernel (") + what + ", grid " +
             std::to_string(config.gridDim.x) + ", cluster " +
             std::to_string(kClusterM * kSplitK) + ", " + std::to_string(Config::kSmemBytes) +
             " bytes of shared memory)";
    };
  };
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kClusterM * kSplitK;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.blockDim = dim3(Config::kThreads);
  config.dynamicSmemBytes = Config::kSmemBytes;
  config.stream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  if constexpr (kSplitK > 1) {
    if (wp.split_groups > 1 && overrides().zero_flags) {
      const WgmmaPlan& ops = plan.product;
      status = check_call(
          cudaMemsetAsync(wp.sk_flags, 0,
                          ops.stream_k_offset + ops.stream_k_bytes - ops.stream_k_flags_offset,
                          stream),
          "cudaMemsetAsync of the split-K groups' flags");
      if (!status.ok()) return status;
    }
    config.gridDim = dim3(static_cast<unsigned>(plan_grid(plan, 0, overrides()).blocks));
    return check_call(cudaLaunchKernelEx(&config, kernel, map_a, map_b, map_c, wp),
                      launch_step("split-K"));
  }
  int resident = 0;  // clusters resident at once
  if (kClusterM > 1) {
    // A property of the kernel's configuration on the device, asked once per device (the query
    // costs more host time than the launch) with a grid of the same size for every shape, so the
    // answer kept does not depend on the first call's shape.
    static PerDeviceValue resident_clusters;
    int device = 0;
    status = current_device(&device);
    if (!status.ok()) return status;
    status = resident_clusters.get(device, &resident, [&](int* value) {
      cudaLaunchConfig_t query = config;
      query.gridDim = dim3(static_cast<unsigned>(1024 * kClusterM));
      return check_call(cudaOccupancyMaxActiveClusters(value, kernel, &query),
                        "cudaOccupancyMaxActiveClusters of gemm_wgmma_sm90_kernel");
    });
    if (!status.ok()) return status;
  } else {
    resident = static_cast<int>(plan.shape.sms);
  }
  const Grid grid = plan_grid(plan, resident, overrides());
  if (grid.slots <= 0) {
    return {cudaErrorInvalidConfiguration,
            "cudaOccupancyMaxActiveClusters of gemm_wgmma_sm90_kernel: no cluster of " +
                std::to_string(kClusterM) + " fits on the device"};
  }
  WgmmaParams run = wp;
  // Stream-K's instantiations: 128×256 tiles (16-bit and tf32), and (every turn dealt out:
  // Shape::stream_k_all) 128×128 tiles and 64×128 one-consumer tiles, single or paired (tf32's not
  // 3xTF32's promoted ones); tf32's unpaired 64×256 one-consumer tiles (one row of them, every
  // turn dealt out).
  constexpr bool kHasStreamK =
      kSplitK == 1 && !Config::kPromoted &&
      ((kConsumers == 2 && (kMmaN == kWgmmaBlockN || kMmaN == kWgmmaSmallBlockN)) ||
       (kConsumers == 1 && kMmaN == kWgmmaSmallBlockN) ||
       (Config::kTf32 && kConsumers == 1 && kMmaN == kWgmmaBlockN && kClusterM == 1));
  if constexpr (kHasStreamK) {
    run.sk_turns = grid.sk_turns;
    if (run.sk_turns > 0) {
      if (overrides().zero_flags) {
        status = check_call(
            cudaMemsetAsync(run.sk_flags, 0,
                            sizeof(*run.sk_flags) * grid.slots * kClusterM * kConsumers, stream),
            "cudaMemsetAsync of the stream-K flags");
        if (!status.ok()) return status;
      }
      const auto stream_k_kernel = allowed_kernel<T, kConsumers, kMmaN, kPromoted, kKMajorA,
                                                  kKMajorB, kClusterM, kSplitK, true>(&status);
      if (!status.ok()) return status;
      config.gridDim = dim3(static_cast<unsigned>(grid.blocks));
      return check_call(cudaLaunchKernelEx(&config, stream_k_kernel, map_a, map_b, map_c, run),
                        launch_step("stream-K"));
    }
  }
  config.gridDim = dim3(static_cast<unsigned>(grid.blocks));
  return check_call(cudaLaunchKernelEx(&config, kernel, map_a, map_b, map_c, run),
                    launch_step("persistent"));
}

// The kernel for the plan's clusters and K slices (split-K: 128×128 tiles in 2 or 4 slices,
// 64×128 in 2, 4 or 8; 16-bit 128×256 tiles in two; tf32 64×256 in 2, 4 or 8; 128×192 and 64×64
// tiles unsplit).
template <typename T, int kConsumers, int kMmaN, bool kPromoted, bool kKMajorA, bool kKMajorB>
LaunchStatus launch_layout(const CUtensorMap& map_a, const CUtensorMap& map_b,
                           const CUtensorMap& map_c, const WgmmaParams& wp, const Plan& plan,
                           cudaStream_t stream) {
  // The most K slices this configuration is instantiated for (1: none); 3xTF32's promoted tiles
  // take the whole K.
  constexpr bool kSixteenBit = !std::is_same_v<T, float>;
  constexpr int kMaxSlices =
      kPromoted                                            ? 1
      : kConsumers == 2 && kMmaN == kWgmmaSmallBlockN      ? KernelFacts::kMaxMediumSlices
      : kConsumers == 1 && kMmaN == kWgmmaSmallBlockN      ? KernelFacts::kMaxSmallSlices
      : kSixteenBit && kConsumers == 2 && kMmaN == kWgmmaBlockN ? KernelFacts::kSplitSlices
      : !kSixteenBit && kConsumers == 1 && kMmaN == kWgmmaBlockN ? KernelFacts::kMaxNarrowSlices
                                                                 : 1;
  static_assert(KernelFacts::kMaxSmallSlices == 8 && KernelFacts::kMaxNarrowSlices == 8 &&
                    KernelFacts::kMaxMediumSlices == 4 && KernelFacts::kSplitSlices == 2,
                "the slices instantiated below");
  if constexpr (kMaxSlices >= 2) {
    if (plan.shape.split_k == 2) {
      return launch_kernel<T, kConsumers, kMmaN, kPromoted, kKMajorA, kKMajorB, 1, 2>(
          map_a, map_b, map_c, wp, plan, stream);
    }
  }
  if constexpr (kMaxSlices >= 4) {
    if (plan.shape.split_k == 4) {
      return launch_kernel<T, kConsumers, kMmaN, kPromoted, kKMajorA, kKMajorB, 1, 4>(
          map_a, map_b, map_c, wp, plan, stream);
    }
  }
  if constexpr (kMaxSlices >= 8) {
    if (plan.shape.split_k == 8) {
      return launch_kernel<T, kConsumers, kMmaN, kPromoted, kKMajorA, kKMajorB, 1, 8>(
          map_a, map_b, map_c, wp, plan, stream);
    }
  }
  return plan.shape.clusters
             ? launch_kernel<T, kConsumers, kMmaN, kPromoted, kKMajorA, kKMajorB, 2, 1>(
                   map_a, map_b, map_c, wp, plan, stream)
             : launch_kernel<T, kConsumers, kMmaN, kPromoted, kKMajorA, kKMajorB, 1, 1>(
                   map_a, map_b, map_c, wp, plan, stream);
}

// The tensor maps' element type (inline: the header is compiled in every instantiation file).
template <typename T>
inline constexpr CUtensorMapDataType kTensorMapType = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
template <>
inline constexpr CUtensorMapDataType kTensorMapType<__nv_bfloat16> =
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
template <>
inline constexpr CUtensorMapDataType kTensorMapType<__half> = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;

// launch_config's steps for one dtype. plan.problem is the product the kernel computes, caller
// the caller's, whose C the tensor map of C follows (they differ where transposed: the problem is
// then the caller's Cᵀ = Bᵀ·Aᵀ).
template <typename T>
struct ConfigLauncher {
  template <int kConsumers, int kMmaN, bool kPromoted>
  static LaunchStatus run_config(const Plan& plan, const GemmParams& caller,
                                 cudaStream_t stream) {
    using Config = WgmmaConfig<T, kConsumers, kMmaN, kPromoted>;
    if (plan.problem.tf32_promoted != kPromoted) {
      return refuse("3xTF32's inner product runs on its promoted tiles, and only it");
    }
    static_assert(Config::kBlockN == kMmaN, "the plan's tile is the kernel's");
    const GemmParams& p = plan.problem;
    WgmmaPlan ops = plan.product;
    if (ops.workspace_bytes > p.workspace_bytes) {
      return refuse("workspace of " + std::to_string(p.workspace_bytes) + " bytes, the plan needs " +
                    std::to_string(ops.workspace_bytes));
    }
    const bool batched = p.batch > 1;
    if (ops.a.repack) {
      LaunchStatus status = repack<T>(&ops.a, p.a_stride_m, p.a_stride_k,
                                      batched ? p.a_stride_batch : 0, false, p.workspace, stream);
      if (!status.ok()) return status;
    }
    if (ops.b.repack) {
      LaunchStatus status =
          repack<T>(&ops.b, p.b_stride_n, p.b_stride_k, batched ? p.b_stride_batch : 0,
                    std::is_same_v<T, float>, p.workspace, stream);
      if (!status.ok()) return status;
    }
    CUtensorMap map_a, map_b, map_c{};
    LaunchStatus status = bind_primary_context();
    if (!status.ok()) return status;
    status = encode_operand_map<Config>(&map_a, ops.a, Config::kBlockM, kTensorMapType<T>, "A");
    if (!status.ok()) return status;
    status = encode_operand_map<Config>(&map_b, ops.b, Config::kBlockN / plan.shape.cluster_m(),
                                        kTensorMapType<T>, "B");
    if (!status.ok()) return status;
    if (plan.tma_store) {
      status = encode_output_map<Config>(&map_c, plan.store_transposed ? caller : p,
                                         kTensorMapType<T>);
      if (!status.ok()) return status;
    }
    WgmmaParams wp{static_cast<int>(p.M), static_cast<int>(p.N), static_cast<int>(p.K),
                   static_cast<int>(p.batch), static_cast<int>(plan.tiles_m),
                   static_cast<int>(plan.tiles_n), p.c, p.c_stride_m, p.c_stride_n,
                   p.c_stride_batch, p.bias, p.bias_stride, plan.tma_store, plan.store_transposed,
                   RowSumView{}};
    const RowSumView sums = row_sum_view(p, ops);
    if (p.row_sum != nullptr && !ops.row_sum.fused) {
      status = launch_row_sum_slices(sums, stream);
      if (!status.ok()) return status;
    }
    if (ops.row_sum.fused) wp.row_sum = sums;
    // 3xTF32's inner product runs over three segments (plan_3xtf32): two of cross terms, then
    // big·big.
    if (p.tf32_promoted) wp.cross_k_tiles = static_cast<int>(2 * (p.K / 3) / Config::kBlockK);
    wp.split_groups = plan.shape.split_groups;
    if (ops.stream_k_bytes > 0) {
      char* workspace = static_cast<char*>(p.workspace);
      wp.sk_partials = reinterpret_cast<float*>(workspace + ops.stream_k_offset);
      wp.sk_flags = reinterpret_cast<unsigned long long*>(workspace + ops.stream_k_flags_offset);
      wp.sk_tag = next_flag_tag();
    }
    status = launch_product<kConsumers, kMmaN, kPromoted>(ops, map_a, map_b, map_c, wp, plan, stream);
    if (!status.ok() || p.row_sum == nullptr) return status;
    return launch_row_sum_finish(sums, static_cast<T*>(p.row_sum), stream);
  }

  // The kernel instantiated for the operands' majors (tf32's B is always K-major).
  template <int kConsumers, int kMmaN, bool kPromoted>
  static LaunchStatus launch_product(const WgmmaPlan& ops, const CUtensorMap& map_a,
                                     const CUtensorMap& map_b, const CUtensorMap& map_c,
                                     const WgmmaParams& wp, const Plan& plan,
                                     cudaStream_t stream) {
    constexpr int C = kConsumers, N = kMmaN;
    constexpr bool P = kPromoted;
    if constexpr (WgmmaConfig<T, C, N>::kSlim) {
      // The plan takes slim tiles only where both operands are K-major (and C from registers).
      if (!ops.a.k_major || !ops.b.k_major || plan.tma_store) {
        return refuse("slim tiles read both operands K-major and store C from registers");
      }
      return launch_layout<T, C, N, P, true, true>(map_a, map_b, map_c, wp, plan, stream);
    } else if constexpr (kPromoted) {
      // three_tf32.cu's split operands: K-major, TMA-aligned, never repacked.
      if (!ops.a.k_major || !ops.b.k_major) {
        return refuse("3xTF32's promoted tiles read both operands K-major");
      }
      return launch_layout<T, C, N, P, true, true>(map_a, map_b, map_c, wp, plan, stream);
    } else if constexpr (std::is_same_v<T, float>) {
      return ops.a.k_major
                 ? launch_layout<T, C, N, P, true, true>(map_a, map_b, map_c, wp, plan, stream)
                 : launch_layout<T, C, N, P, false, true>(map_a, map_b, map_c, wp, plan, stream);
    } else {
      if (ops.a.k_major) {
        return ops.b.k_major
                   ? launch_layout<T, C, N, P, true, true>(map_a, map_b, map_c, wp, plan, stream)
                   : launch_layout<T, C, N, P, true, false>(map_a, map_b, map_c, wp, plan, stream);
      }
      return ops.b.k_major
                 ? launch_layout<T, C, N, P, false, true>(map_a, map_b, map_c, wp, plan, stream)
                 : launch_layout<T, C, N, P, false, false>(map_a, map_b, map_c, wp, plan, stream);
    }
  }

  // A as the product reads it (after any repack), sliced as planned, partials in the workspace.
  static RowSumView row_sum_view(const GemmParams& p, const WgmmaPlan& ops) {
    RowSumView v;
    if (p.row_sum == nullptr) return v;
    v.a = ops.a.ptr;
    v.stride_m = ops.a.stride_x, v.stride_k = ops.a.stride_k;
    v.stride_batch = ops.a.stride_batch;
    v.k_major = ops.a.k_major;
    v.M = static_cast<int>(p.M), v.K = static_cast<int>(p.K), v.batch = static_cast<int>(p.batch);
    v.piece_k = static_cast<int>(ops.row_sum.piece_k);
    v.slices = static_cast<int>(ops.row_sum.slices);
    v.partials = reinterpret_cast<float*>(static_cast<char*>(p.workspace) +
                                          ops.row_sum.partials_offset);
    return v;
  }

  static LaunchStatus launch_row_sum_slices(const RowSumView& v, cudaStream_t stream) {
    if (v.slices == 0) return {};
    const int64_t row_blocks = ceil_div(v.M, kRowSumWarps * kRowSumRowsPerWarp);
    const dim3 grid(static_cast<unsigned>(row_blocks * v.batch), static_cast<unsigned>(v.slices));
    row_sum_slices_kernel<T, kRowSumRowsPerWarp>
        <<<grid, kRowSumWarps * 32, 0, stream>>>(v, static_cast<int>(row_blocks));
    return check_launch("row_sum_slices_kernel");
  }

  static LaunchStatus launch_row_sum_finish(const RowSumView& v, T* out, cudaStream_t stream) {
    const int64_t rows = static_cast<int64_t>(v.batch) * v.M;
    const dim3 grid(static_cast<unsigned>(
        std::min<int64_t>(std::max<int64_t>(ceil_div(rows, kFinishRows), 1), kFinishMaxBlocks)));
    row_sum_finish_kernel<T><<<grid, kFinishThreads, 0, stream>>>(v, out);
    return check_launch("row_sum_finish_kernel");
  }
};

template <typename T, int kConsumers, int kMmaN, bool kPromoted>
LaunchStatus launch_config(const Plan& plan, const GemmParams& caller, cudaStream_t stream) {
  return ConfigLauncher<T>::template run_config<kConsumers, kMmaN, kPromoted>(plan, caller,
                                                                              stream);
}

}  // namespace sm90
}  // namespace torch_gemm
