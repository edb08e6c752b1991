// Launcher of the wgmma_sm90 rung: how each operand reaches the TMA (in place, or repacked into
// an aligned workspace), its tensor map, and the persistent grid.
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/launch.h"
#include "kernels/repack.cuh"
#include "kernels/row_sum.cuh"
#include "kernels/wgmma_sm90.cuh"

namespace torch_gemm {
namespace {

constexpr int64_t kTmaAlignBytes = 16;       // TMA: base address and every stride
constexpr int64_t kWorkspaceAlignBytes = 256;
static_assert(kRepackChunkBytes == kTmaAlignBytes, "repacked rows are whole 16-byte chunks");
constexpr int kRepackThreads = 256;
constexpr int64_t kRepackMaxBlocks = 8192;   // grid-stride beyond

int64_t round_up(int64_t x, int64_t multiple) { return ceil_div(x, multiple) * multiple; }

// One operand seen as (batch, X, K), X being M for A and N for B, and how the kernel reads it.
struct OperandPlan {
  const void* ptr;
  int64_t extent_x, extent_k, batch;
  int64_t stride_x, stride_k, stride_batch;  // elements
  bool k_major;                // stride 1 along K (else along X)
  bool repack;                 // copied into the workspace first (ptr/strides then describe it)
  int64_t workspace_offset = 0;
  int64_t workspace_bytes = 0;
};

// Whether a stride that TMA multiplies by the element size is usable: positive and 16-byte
// aligned. A dimension of extent <= 1 is never stepped along, so any stride serves.
bool tma_stride_ok(int64_t stride, int64_t extent, int64_t element_bytes) {
  return extent <= 1 || (stride > 0 && stride * element_bytes % kTmaAlignBytes == 0);
}

bool tma_aligned(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % kTmaAlignBytes == 0; }

// k_major_only: the kernel reads this operand only K-major (tf32's B), so an MN-major one is
// transposed into the workspace.
OperandPlan plan_operand(const void* ptr, int64_t X, int64_t K, int64_t batch, int64_t stride_x,
                         int64_t stride_k, int64_t stride_batch, int64_t element_bytes,
                         bool k_major_only) {
  OperandPlan plan{ptr, X, K, batch, stride_x, stride_k, stride_batch, true, false};
  const bool aligned = tma_aligned(ptr) && tma_stride_ok(stride_batch, batch, element_bytes);
  const bool unit_k = stride_k == 1 || K <= 1;
  const bool unit_x = stride_x == 1 || X <= 1;
  if (aligned && unit_k && tma_stride_ok(stride_x, X, element_bytes)) {
    plan.k_major = true;
  } else if (aligned && unit_x && tma_stride_ok(stride_k, K, element_bytes) && !k_major_only) {
    plan.k_major = false;
  } else {
    // Repacked dense, rows padded to 16 bytes, the smaller stride kept innermost where the
    // kernel reads either order.
    const auto key = [](int64_t extent, int64_t stride) {
      return extent > 1 ? (stride < 0 ? -stride : stride) : INT64_MAX;
    };
    plan.repack = true;
    plan.k_major = k_major_only || key(K, stride_k) <= key(X, stride_x);
    const int64_t inner = plan.k_major ? K : X, outer = plan.k_major ? X : K;
    const int64_t ld = round_up(std::max<int64_t>(inner, 1), kTmaAlignBytes / element_bytes);
    plan.workspace_bytes = round_up(batch * outer * ld * element_bytes, kWorkspaceAlignBytes);
    plan.stride_x = plan.k_major ? ld : 1;
    plan.stride_k = plan.k_major ? 1 : ld;
    plan.stride_batch = outer * ld;
  }
  return plan;
}

// Where mm_tiled_row_sum's sums of A's rows are taken (RowSumView): in the product's producer
// warpgroup, tile column j summing slice j of K for its rows, where the tile columns give at least
// kMinFusedSlices slices (a tile's slice then moves at most 1/8 of the bytes of A its product
// reads, which two warps' loads keep up with); else by row_sum_slices_kernel before the product,
// in slices enough for about kRowSumBlocks blocks. Either way each slice is one contiguous piece
// of K, and the partials are added up after the product.
constexpr int64_t kMinFusedSlices = 8;
constexpr int64_t kRowSumBlocks = 2048;
constexpr int kRowSumRowsPerWarp = 64;  // row_sum_slices_kernel: 128 rows a block
constexpr int64_t kMaxSlices = 65535;   // the separate kernel's grid.y
constexpr int64_t kFinishMaxBlocks = 4096;

struct RowSumPlan {
  bool fused = false;
  int64_t piece_k = kRowSumSliceAlign, slices = 0;
  int64_t partials_offset = 0, partials_bytes = 0;
};

RowSumPlan plan_row_sum(const GemmParams& p) {
  RowSumPlan plan;
  if (p.row_sum == nullptr) return plan;
  const int64_t tiles_n = ceil_div(p.N, kWgmmaBlockN);
  const int64_t row_blocks = ceil_div(p.M, int64_t{kRowSumWarps} * kRowSumRowsPerWarp) * p.batch;
  plan.fused = tiles_n >= kMinFusedSlices && p.dtype != DType::kFloat32;  // 16-bit: see the kernel
  int64_t wanted = plan.fused ? tiles_n : ceil_div(kRowSumBlocks, std::max<int64_t>(row_blocks, 1));
  wanted = std::min({wanted, std::max<int64_t>(ceil_div(p.K, kRowSumSliceAlign), 1), kMaxSlices});
  plan.piece_k = round_up(ceil_div(std::max<int64_t>(p.K, 1), wanted), kRowSumSliceAlign);
  plan.slices = ceil_div(p.K, plan.piece_k);
  plan.partials_bytes =
      round_up(plan.slices * p.batch * p.M * int64_t{sizeof(float)}, kWorkspaceAlignBytes);
  return plan;
}

struct WgmmaPlan {
  OperandPlan a, b;
  RowSumPlan row_sum;
  int64_t workspace_bytes;
  // Stream-K's partial sums and flags (plan_stream_k), at the end of the workspace; 0 bytes: none.
  int64_t stream_k_offset = 0, stream_k_flags_offset = 0, stream_k_bytes = 0;
};

// bf16/fp16 read either tile in either order; tf32 (fp32 operands) reads B's tile K-major only
// (A passes through registers, loaded in either order).
WgmmaPlan plan_wgmma(const GemmParams& p) {
  const bool batched = p.batch > 1;
  const int64_t element_bytes = dtype_size(p.dtype);
  const bool b_k_major_only = p.dtype == DType::kFloat32;
  WgmmaPlan plan{plan_operand(p.a, p.M, p.K, p.batch, p.a_stride_m, p.a_stride_k,
                              batched ? p.a_stride_batch : 0, element_bytes, false),
                 plan_operand(p.b, p.N, p.K, p.batch, p.b_stride_n, p.b_stride_k,
                              batched ? p.b_stride_batch : 0, element_bytes, b_k_major_only),
                 plan_row_sum(p), 0};
  plan.b.workspace_offset = plan.a.workspace_bytes;
  plan.row_sum.partials_offset = plan.b.workspace_offset + plan.b.workspace_bytes;
  plan.workspace_bytes = plan.row_sum.partials_offset + plan.row_sum.partials_bytes;
  return plan;
}

// Cᵀ = Bᵀ·Aᵀ: the same product with the operands' roles and C's strides exchanged.
GemmParams transposed_problem(const GemmParams& p) {
  GemmParams t = p;
  t.M = p.N, t.N = p.M;
  t.a = p.b, t.a_stride_m = p.b_stride_n, t.a_stride_k = p.b_stride_k;
  t.b = p.a, t.b_stride_n = p.a_stride_m, t.b_stride_k = p.a_stride_k;
  t.a_stride_batch = p.b_stride_batch, t.b_stride_batch = p.a_stride_batch;
  t.c_stride_m = p.c_stride_n, t.c_stride_n = p.c_stride_m;
  return t;
}

// Whether tf32 runs the transposed product: where B is N-major (NN), which the tf32 wgmma cannot
// read, and the transposed product needs less repacking — in NN none, Bᵀ being an MN-major A (read
// through registers) and Aᵀ a K-major B — instead of transposing B into the workspace first
// (4096³ NN: ~30 µs of ~400). Where TMA can store the caller's C, the epilogue then fills its
// boxes transposed and stores them into it (WgmmaParams::c_transposed); else C leaves from
// registers. Not with a bias or row sums, which belong to C's columns and A's rows.
bool runs_transposed(const GemmParams& p) {
  if (p.dtype != DType::kFloat32 || p.bias != nullptr || p.row_sum != nullptr) return false;
  return plan_wgmma(transposed_problem(p)).workspace_bytes < plan_wgmma(p).workspace_bytes;
}

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

// A driver function, looked up once through the runtime (the extension does not link libcuda);
// nullptr where the driver lacks it.
template <typename Fn>
Fn driver_function(const char* name, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();  // reported by each caller that finds no function
    fn = nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encode =
      driver_function<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);
  return encode;
}

// "CUDA_ERROR_INVALID_CONTEXT" for 201: the driver's name of a driver call's result.
std::string driver_error_name(CUresult result) {
  static const auto name_of = driver_function<PFN_cuGetErrorName_v6000>("cuGetErrorName", 6000);
  const char* name = nullptr;
  if (name_of == nullptr || name_of(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUresult " + std::to_string(static_cast<int>(result));
  }
  return name;
}

// The tensor-map encodes are driver calls, and a driver call needs a context current on the
// calling thread: runtime calls bind the device's primary context to a thread lazily, driver
// calls do not. A thread whose first CUDA work is one of our products has none (autograd's device
// thread running a backward; any thread torch set the device on without a runtime call, since
// c10::cuda::SetDevice skips cudaSetDevice where the device is already the current one), and there
// cuTensorMapEncodeTiled returns CUDA_ERROR_INVALID_CONTEXT. cudaSetDevice binds the primary
// context (CUDA 12 and newer), as the runtime's first call on the thread would.
LaunchStatus bind_primary_context() {
  static const auto current_context = driver_function<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
  if (current_context == nullptr) return refuse("the driver offers no cuCtxGetCurrent");
  CUcontext context = nullptr;
  if (current_context(&context) == CUDA_SUCCESS && context != nullptr) return {};
  int device = 0;
  LaunchStatus status = current_device(&device);
  if (!status.ok()) return status;
  status = check_call(cudaSetDevice(device), [device] {
    return "cudaSetDevice(" + std::to_string(device) +
           ") (binding the primary context to this thread for the tensor-map encodes)";
  });
  if (!status.ok()) return status;
  const CUresult result = current_context(&context);
  if (result != CUDA_SUCCESS || context == nullptr) {
    return refuse("no CUDA context current on this thread after cudaSetDevice(" +
                  std::to_string(device) + "): cuCtxGetCurrent returned " + driver_error_name(result));
  }
  return {};
}

// What a TMA load of an operand fetches into L2 at least: 128 bytes, one box row. 256 fetched
// the next line too, which rows not starting on a line then straddle, for nothing (H200, bf16 NN,
// tuner, against cuBLAS: 1000³ 0.861 -> 0.907, 1024³ 0.855 -> 0.865, 256×4096×4096 0.912 ->
// 0.924; benchmarks/NOTES.md, session 11).
constexpr CUtensorMapL2promotion kOperandL2Promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;

// The 3-D tensor map of an operand: (K, X, batch) for a K-major one, copied in boxes of
// (kBlockK, box_rows); (X, K, batch) for an MN-major one, in boxes of (kMNBox, kBlockK). Strides
// of dimensions never stepped along (extent <= 1) are replaced by valid ones.
// What a tensor-map encode was given, for the message of one that failed.
std::string describe_map(const char* which, CUresult result, const void* address,
                         const cuuint64_t (&dims)[3], const cuuint64_t (&strides)[2],
                         const cuuint32_t (&box)[3]) {
  return std::string("tensor-map encode of ") + which + " (cuTensorMapEncodeTiled returned " +
         driver_error_name(result) + ") for address " +
         std::to_string(reinterpret_cast<uintptr_t>(address)) + ", dims [" +
         std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + ", " + std::to_string(dims[2]) +
         "], byte strides [" + std::to_string(strides[0]) + ", " + std::to_string(strides[1]) +
         "], box [" + std::to_string(box[0]) + ", " + std::to_string(box[1]) + ", " +
         std::to_string(box[2]) + "]";
}

constexpr const char* kNoEncoder =
    "tensor-map encode: the driver offers no cuTensorMapEncodeTiled (needs CUDA 12.0 or newer)";

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
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, kOperandL2Promotion,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // NONE: zeros outside
  if (result == CUDA_SUCCESS) return {};
  return refuse(describe_map(which, result, op.ptr, dims, strides, box));
}

// Whether the epilogue can hand C to TMA stores: unit column stride, base and row (and batch)
// strides 16-byte aligned.
bool tma_store_ok(const GemmParams& p) {
  const int64_t e = dtype_size(p.dtype);
  return tma_aligned(p.c) && (p.c_stride_n == 1 || p.N <= 1) &&
         tma_stride_ok(p.c_stride_m, p.M, e) && tma_stride_ok(p.c_stride_batch, p.batch, e);
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

// Stream-K (TileWalk): 0 off; 1 (the default) spreads the turns of the last, partial round over
// every cluster; 2 those and one round more (fewer pieces a tile, more k-tiles in pieces).
// TORCH_GEMM_WGMMA_STREAM_K=0|1|2, for comparison. Read once per process.
int stream_k_mode() {
  static const int mode = [] {
    const char* env = std::getenv("TORCH_GEMM_WGMMA_STREAM_K");
    return env == nullptr || env[0] < '0' || env[0] > '2' ? 1 : env[0] - '0';
  }();
  return mode;
}

// TORCH_GEMM_WGMMA_MAX_CLUSTERS=n caps the clusters (blocks, unclustered) resident at once, so
// that the tests reach stream-K and several turns a cluster on small products. Read once.
int max_clusters() {
  static const int cap = [] {
    const char* env = std::getenv("TORCH_GEMM_WGMMA_MAX_CLUSTERS");
    const int n = env == nullptr ? 0 : std::atoi(env);
    return n > 0 ? n : INT_MAX;
  }();
  return cap;
}

// How many of the last turns stream-K deals out as k-tiles, where the workspace allows it (the
// launcher planned it: plan_stream_k) and the turns leave the last round of `slots` clusters
// idle long enough (8192×12288×4096: 1536 pairs of tiles, 23 rounds of 66 and 18 more, the last
// round idle for 48 of its 66 clusters' 64 k-tiles). 0: none. Stream-K costs ~10-16 µs (H200,
// bf16: ~3.5 µs to store a partial, ~7 µs for its finisher to wait for and read it; the flags'
// memset measured nothing), ~20 k-tiles of 128×256: it pays where a cluster saves more than
// kStreamKMinSaved k-tiles (tuner, against cuBLAS, mode 1: 8192×12288×4096 0.988 -> 1.013,
// 8192×4096×14336 0.998 -> 1.019, 8192³ 1.027 -> 1.046, saving 47, 54, 62; 8192×4096×4096
// 0.995 -> 0.978, 4096³ 0.998 -> 0.954, saving 15 and 8). The walk's arithmetic (units ×
// clusters) stays within int.
constexpr int64_t kStreamKMinSaved = 32;
int stream_k_turns(const WgmmaParams& wp, int64_t turns, int64_t slots, int64_t k_tiles) {
  if (wp.sk_partials == nullptr || stream_k_mode() == 0 || turns <= slots || turns % slots == 0) {
    return 0;
  }
  const int64_t rest = turns % slots;
  const bool forced = max_clusters() != INT_MAX;  // the tests' few clusters: stream-K always
  if (!forced && k_tiles * (slots - rest) < kStreamKMinSaved * slots) return 0;
  const int64_t sk_turns = rest + (stream_k_mode() == 2 ? slots : 0);
  const int64_t units = sk_turns * k_tiles;
  if (units < slots || units * slots > INT_MAX) return 0;
  return static_cast<int>(sk_turns);
}

// One kernel of the family, with its shared memory allowed (once per device; before the occupancy
// query, too).
template <typename T, int kConsumers, int kMmaN, bool kKMajorA, bool kKMajorB, int kClusterM,
          int kSplitK, bool kStreamK>
auto allowed_kernel(LaunchStatus* status) {
  using Config = WgmmaConfig<T, kConsumers, kMmaN>;
  const auto kernel = gemm_wgmma_sm90_kernel<T, kKMajorA, kKMajorB, kClusterM, kConsumers,
                                             kSplitK, kMmaN, kStreamK>;
  static PerDeviceValue allowed;
  *status = allow_shared_memory_once(allowed, kernel, Config::kSmemBytes, [] {
    return "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " +
           std::to_string(Config::kSmemBytes) + " bytes) of gemm_wgmma_sm90_kernel";
  });
  return kernel;
}

// The persistent grid: one block per SM, or as many clusters as fit at once, but never more
// than there are turns, nor more than the number of turns per block needs. Split-K: one cluster
// of kSplitK blocks per tile, each cluster one turn (reduce_split reuses the stage ring, which a
// next tile's copies would overwrite). Stream-K runs its own instantiation of the kernel: the
// walk's state cost the whole-turn kernels registers (spills of the 16-bit 128×256 kernels
// 100/176 -> 148/260 bytes, and ~0.5% at 4096³, benchmarks/NOTES.md, session 16).
template <typename T, int kConsumers, int kMmaN, bool kKMajorA, bool kKMajorB, int kClusterM,
          int kSplitK>
LaunchStatus launch_kernel(const CUtensorMap& map_a, const CUtensorMap& map_b,
                           const CUtensorMap& map_c, const WgmmaParams& wp, int64_t sms,
                           cudaStream_t stream) {
  using Config = WgmmaConfig<T, kConsumers, kMmaN>;
  LaunchStatus status;
  const auto kernel =
      allowed_kernel<T, kConsumers, kMmaN, kKMajorA, kKMajorB, kClusterM, kSplitK, false>(&status);
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
  const int64_t turns = ceil_div(wp.tiles_m, kClusterM) * wp.tiles_n * wp.batch;
  if constexpr (kSplitK > 1) {
    config.gridDim = dim3(static_cast<unsigned>(turns * kSplitK));
    return check_call(cudaLaunchKernelEx(&config, kernel, map_a, map_b, map_c, wp),
                      launch_step("split-K"));
  }
  int slots = 0;  // clusters resident at once
  if (kClusterM > 1) {
    // A property of the kernel's configuration on the device, asked once per device (the query
    // costs more host time than the launch) with a grid of the same size for every shape, so the
    // answer kept does not depend on the first call's shape.
    static PerDeviceValue resident_clusters;
    int device = 0;
    status = current_device(&device);
    if (!status.ok()) return status;
    status = resident_clusters.get(device, &slots, [&](int* value) {
      cudaLaunchConfig_t query = config;
      query.gridDim = dim3(static_cast<unsigned>(1024 * kClusterM));
      return check_call(cudaOccupancyMaxActiveClusters(value, kernel, &query),
                        "cudaOccupancyMaxActiveClusters of gemm_wgmma_sm90_kernel");
    });
    if (!status.ok()) return status;
  } else {
    slots = static_cast<int>(sms);
  }
  slots = std::min(slots, max_clusters());
  if (slots <= 0) {
    return {cudaErrorInvalidConfiguration,
            "cudaOccupancyMaxActiveClusters of gemm_wgmma_sm90_kernel: no cluster of " +
                std::to_string(kClusterM) + " fits on the device"};
  }
  WgmmaParams run = wp;
  if constexpr (!Config::kTf32 && kConsumers == 2 && kSplitK == 1) {
    run.sk_turns = stream_k_turns(wp, turns, slots, ceil_div(wp.K, Config::kBlockK));
    if (run.sk_turns > 0) {
      // Every slot's flag starts at zero (each launch: a slot's partial is written once).
      status = check_call(
          cudaMemsetAsync(run.sk_flags, 0, sizeof(int) * slots * kClusterM * kConsumers, stream),
          "cudaMemsetAsync of the stream-K flags");
      if (!status.ok()) return status;
      const auto stream_k_kernel =
          allowed_kernel<T, kConsumers, kMmaN, kKMajorA, kKMajorB, kClusterM, kSplitK, true>(
              &status);
      if (!status.ok()) return status;
      config.gridDim = dim3(static_cast<unsigned>(slots * kClusterM));
      return check_call(cudaLaunchKernelEx(&config, stream_k_kernel, map_a, map_b, map_c, run),
                        launch_step("stream-K"));
    }
  }
  if (turns > slots) {
    // As few blocks as keep the number of turns per block: an SM left idle for the whole
    // kernel draws less power than one idle only in the last wave, and under the power cap the
    // others clock higher (8192³ bf16 on an H200: 1.02 -> 1.03 of cuBLAS with 128 of 132 SMs).
    slots = static_cast<int>(ceil_div(turns, ceil_div(turns, slots)));
  }
  config.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(turns, slots) * kClusterM));
  return check_call(cudaLaunchKernelEx(&config, kernel, map_a, map_b, map_c, run),
                    launch_step("persistent"));
}

// Whether pairs of blocks may share B through TMA multicast (kClusterM = 2): on by default, where
// there are two tile rows to pair and the product is not one wave of 128×256 tiles (run_config;
// on an H200, bf16: 646 against 621 TFLOP/s at 8192³, 628 against 603 at 8192×4096×4096 TN, even
// at 4096³). TORCH_GEMM_WGMMA_CLUSTER=1 turns them off, for comparison. Read once per process,
// not per launch.
bool clusters_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TORCH_GEMM_WGMMA_CLUSTER");
    return env == nullptr || env[0] != '1';
  }();
  return enabled;
}

// How a product is spread over the blocks: the tile (kConsumers, kMmaN), pairs sharing B, or
// kWgmmaSplitK slices of K per 128×256 tile (split-K, 16-bit only; 4 slices measured slower
// everywhere: clusters of 4 full-SM blocks do not all fit at once, and each block exchanges 3/4 of
// its sums).
constexpr int kWgmmaSplitK = 2;
struct WgmmaShape {
  int consumers = 2;
  int block_n = static_cast<int>(kWgmmaBlockN);  // or kWgmmaSmallBlockN (one consumer, 16-bit)
  bool clusters = false;
  int split_k = 1;
  int64_t sms = 1;  // the multiprocessors it was chosen for (sm_count_of)
};

template <typename T, int kConsumers, int kMmaN, bool kKMajorA, bool kKMajorB>
LaunchStatus launch_layout(const CUtensorMap& map_a, const CUtensorMap& map_b,
                          const CUtensorMap& map_c, const WgmmaParams& wp, const WgmmaShape& shape,
                          cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float> && kConsumers == 2 && kMmaN == kWgmmaBlockN) {
    if (shape.split_k == kWgmmaSplitK) {
      return launch_kernel<T, kConsumers, kMmaN, kKMajorA, kKMajorB, 1, kWgmmaSplitK>(
          map_a, map_b, map_c, wp, shape.sms, stream);
    }
  }
  return shape.clusters ? launch_kernel<T, kConsumers, kMmaN, kKMajorA, kKMajorB, 2, 1>(
                              map_a, map_b, map_c, wp, shape.sms, stream)
                        : launch_kernel<T, kConsumers, kMmaN, kKMajorA, kKMajorB, 1, 1>(
                              map_a, map_b, map_c, wp, shape.sms, stream);
}

// TORCH_GEMM_WGMMA_SHAPE=CxS[xN] forces C consumer warpgroups (1: 64-row tiles, 2: 128-row), S
// slices of K (1, or 2 with 2x2) and N columns a tile (256, or 128 with 1x1), for comparison;
// split K and 128 columns take 16-bit products without row sums. Unset, the launcher chooses.
// Read once per process.
WgmmaShape forced_shape() {
  static const WgmmaShape forced = [] {
    WgmmaShape shape{0, static_cast<int>(kWgmmaBlockN), false, 0, 1};
    const char* env = std::getenv("TORCH_GEMM_WGMMA_SHAPE");
    int consumers = 0, split_k = 0, block_n = static_cast<int>(kWgmmaBlockN);
    const int fields =
        env == nullptr ? 0 : std::sscanf(env, "%dx%dx%d", &consumers, &split_k, &block_n);
    const bool small = block_n == kWgmmaSmallBlockN && consumers == 1 && split_k == 1;
    const bool split = split_k == kWgmmaSplitK && consumers == 2 && block_n == kWgmmaBlockN;
    if (fields >= 2 && (consumers == 1 || consumers == 2) && (split_k == 1 || split) &&
        (block_n == kWgmmaBlockN || small)) {
      shape.consumers = consumers, shape.split_k = split_k, shape.block_n = block_n;
    }
    return shape;
  }();
  return forced;
}

// The tile shape, the K slices and the clusters of a product. The one-consumer 64×256 tiles where
// the 128×256 ones (over the batch) would not fill half the SMs, so that twice as many blocks work
// (1000³ bf16: 32 tiles of 128×256, 64 of 64×256, on 132 SMs); 16-bit products take 64×128
// tiles where those fit in one wave (1000³: 128 tiles; H200, bf16 NN, tuner, against cuBLAS:
// 0.741 -> 0.901, 1024³ 0.658 -> 0.925, 1000²×2048 0.685 -> 0.904, 777×555×3333 1.03 -> 1.08).
// Else split-K where the tiles would leave most SMs idle and K is long: two K slices of each
// 128×256 tile where their blocks then fill more than half the SMs and fit in one wave
// (512×4096×4096 0.746 -> 0.885). Not below kSplitMinKTiles k-tiles: the partials' exchange
// (~2 µs a block) and the first copies without multicast cost more than halving the loop saves
// (1000³ on 64×256 tiles: 0.739 unsplit, 0.700 split). The 64×256 tiles are never split: wherever
// twice their count fits in one wave so do the 64×128 tiles, which measured faster (1024²×4096
// 0.853 against 0.819 split, 256×4096×4096 0.921 against 0.844, 16×4096×4096 0.851 against
// 0.768).
WgmmaShape choose_shape(const GemmParams& p) {
  constexpr int64_t kSplitMinKTiles = 32;
  const int64_t sms = sm_count_of(p);
  const int64_t tiles_n = ceil_div(p.N, kWgmmaBlockN);
  const int64_t wide_m = ceil_div(p.M, kWgmmaBlockM), narrow_m = ceil_div(p.M, kWgmmaNarrowBlockM);
  // Tiles over the batch (fewer than C's elements: no overflow).
  const int64_t wide = wide_m * tiles_n * p.batch;
  const int64_t small = narrow_m * ceil_div(p.N, kWgmmaSmallBlockN) * p.batch;  // 64×128 tiles
  WgmmaShape shape;
  shape.sms = sms;
  shape.consumers = wide < sms / 2 ? 1 : 2;
  // 16-bit products without fused row sums (row_sum's slices follow 256-column tiles) may take
  // 64×128 tiles or split K.
  const bool can_split = p.dtype != DType::kFloat32 && p.row_sum == nullptr;
  if (can_split && shape.consumers == 1 && small <= sms) {
    // 64×128 tiles where even the 64×256 ones would leave half the SMs idle and the 64×128 ones
    // fit in one wave: twice the blocks draw operands from L2, which bounds these shapes' loops,
    // and each has half the epilogue (benchmarks/NOTES.md, session 11).
    shape.block_n = static_cast<int>(kWgmmaSmallBlockN);
  } else if (can_split && ceil_div(p.K, WgmmaConfig<__nv_bfloat16>::kBlockK) >= kSplitMinKTiles &&
             wide * kWgmmaSplitK <= sms && wide * kWgmmaSplitK * 2 > sms) {
    shape.consumers = 2, shape.split_k = kWgmmaSplitK;
  }
  const WgmmaShape forced = forced_shape();
  if (forced.consumers != 0) {
    shape.consumers = forced.consumers;
    shape.block_n = static_cast<int>(kWgmmaBlockN);
    if (can_split) shape.split_k = forced.split_k, shape.block_n = forced.block_n;
  }
  const bool two = shape.consumers == 2;
  // With clusters each block copies (and multicasts) half of B's rows. That pays where a block
  // walks several tiles; where every block has one 128×256 tile the pair's start and its
  // stages waiting on both blocks' copies cost more (H200, bf16, against cuBLAS: 2048³ 0.947
  // with, 0.981 without; 2048×2048×1024 0.91 / 0.98; 1024×4096×1024 0.92 / 0.98; 2048²×8192
  // 0.97 either way). On 64×256 tiles, whose B is 4/5 of the bytes copied, they pay even so
  // (1000³ 0.745 with, 0.72 without), and on 64×128 ones, B 2/3 (1000³ 0.901 / 0.808,
  // 1000²×2048 0.904 / 0.782, 256×4096×4096 0.921 / 0.857; where they lose, at most ~1%: 1024³
  // 0.925 / 0.918, 512×1024×1024 0.819 / 0.830, 1024²×4096 0.823 / 0.829).
  const bool one_wave_of_wide = two && wide <= sms;
  shape.clusters = shape.split_k == 1 && clusters_enabled() && (two ? wide_m : narrow_m) >= 2 &&
                   !one_wave_of_wide;
  return shape;
}

// Stream-K's workspace, where the launcher may use it (stream_k_turns): 16-bit 128×256 tiles,
// unsplit, without fused row sums, more of them than clusters can be resident. A partial sum per
// block (kBlockM × kBlockN floats; at most one block per SM) and a flag per consumer.
void plan_stream_k(const GemmParams& p, const WgmmaShape& shape, WgmmaPlan* plan) {
  const int64_t sms = shape.sms;
  const int64_t tiles = ceil_div(p.M, kWgmmaBlockM) * ceil_div(p.N, kWgmmaBlockN) * p.batch;
  if (p.dtype == DType::kFloat32 || p.row_sum != nullptr || stream_k_mode() == 0 ||
      shape.consumers != 2 || shape.block_n != kWgmmaBlockN || shape.split_k != 1 ||
      tiles <= std::min<int64_t>(sms / 2, max_clusters())) {
    return;
  }
  plan->stream_k_offset = plan->workspace_bytes;
  plan->stream_k_flags_offset =
      plan->stream_k_offset +
      round_up(sms * kWgmmaBlockM * kWgmmaBlockN * int64_t{sizeof(float)}, kWorkspaceAlignBytes);
  plan->workspace_bytes =
      plan->stream_k_flags_offset + round_up(sms * 2 * int64_t{sizeof(int)}, kWorkspaceAlignBytes);
  plan->stream_k_bytes = plan->workspace_bytes - plan->stream_k_offset;
}

// The plan of a product as the launcher runs it in `shape`: operands, row sums, stream-K.
WgmmaPlan plan_product(const GemmParams& p, const WgmmaShape& shape) {
  WgmmaPlan plan = plan_wgmma(p);
  plan_stream_k(p, shape, &plan);
  return plan;
}

template <typename T> constexpr CUtensorMapDataType kTensorMapType = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
template <> constexpr CUtensorMapDataType kTensorMapType<__nv_bfloat16> = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
template <> constexpr CUtensorMapDataType kTensorMapType<__half> = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;

template <typename T>
struct WgmmaLauncher {
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    if constexpr (std::is_same_v<T, double>) {
      return refuse("this rung takes bfloat16, float16 and float32 (as tf32) only");
    } else {
      if (p.M == 0 || p.N == 0 || p.batch == 0) return {};
      const bool transposed = runs_transposed(p);
      const GemmParams& problem = transposed ? transposed_problem(p) : p;
      const WgmmaShape shape = choose_shape(problem);
      if constexpr (!std::is_same_v<T, float>) {
        if (shape.block_n == kWgmmaSmallBlockN) {
          return run_config<1, kWgmmaSmallBlockN>(problem, p, transposed, shape, stream);
        }
      }
      return shape.consumers == 1 ? run_config<1, kWgmmaBlockN>(problem, p, transposed, shape, stream)
                                  : run_config<2, kWgmmaBlockN>(problem, p, transposed, shape, stream);
    }
  }

  // Repacks what TMA cannot read, encodes the tensor maps and launches the kernel with
  // kConsumers consumer warpgroups and kMmaN-column tiles (WgmmaConfig) for the operands' majors
  // and the cluster choice.
  // p is the product the kernel computes, caller the caller's, whose C the tensor map of C
  // follows (they differ where transposed: p is then caller's Cᵀ = Bᵀ·Aᵀ).
  template <int kConsumers, int kMmaN>
  static LaunchStatus run_config(const GemmParams& p, const GemmParams& caller, bool transposed,
                                 const WgmmaShape& shape, cudaStream_t stream) {
    using Config = WgmmaConfig<T, kConsumers, kMmaN>;
    const int64_t tiles_m = ceil_div(p.M, Config::kBlockM);
    const int64_t tiles_n = ceil_div(p.N, Config::kBlockN);
    if (p.M > INT_MAX || p.N > INT_MAX || p.K > INT_MAX || tiles_m * tiles_n * p.batch > INT_MAX) {
      return refuse("extents past 32 bits");
    }
    WgmmaPlan plan = plan_product(p, shape);
    if (plan.workspace_bytes > p.workspace_bytes) {
      return refuse("workspace of " + std::to_string(p.workspace_bytes) + " bytes, the plan needs " +
                    std::to_string(plan.workspace_bytes));
    }
    const bool batched = p.batch > 1;
    if (plan.a.repack) {
      LaunchStatus status = repack<T>(&plan.a, p.a_stride_m, p.a_stride_k,
                                      batched ? p.a_stride_batch : 0, false, p.workspace, stream);
      if (!status.ok()) return status;
    }
    if (plan.b.repack) {
      LaunchStatus status =
          repack<T>(&plan.b, p.b_stride_n, p.b_stride_k, batched ? p.b_stride_batch : 0,
                    std::is_same_v<T, float>, p.workspace, stream);
      if (!status.ok()) return status;
    }
    // C goes through TMA as the product's C where TMA can address that, else (transposed, fp32
    // only) as the caller's C, its boxes (kBoxCols × kMmaM) filled transposed.
    const bool product_store = tma_store_ok(p);
    const bool store_transposed = transposed && !product_store && tma_store_ok(caller);
    const bool tma_store = product_store || store_transposed;
    CUtensorMap map_a, map_b, map_c{};
    LaunchStatus status = bind_primary_context();
    if (!status.ok()) return status;
    status = encode_operand_map<Config>(&map_a, plan.a, Config::kBlockM, kTensorMapType<T>, "A");
    if (!status.ok()) return status;
    status = encode_operand_map<Config>(&map_b, plan.b, Config::kBlockN / (shape.clusters ? 2 : 1),
                                        kTensorMapType<T>, "B");
    if (!status.ok()) return status;
    if (tma_store) {
      status = encode_output_map<Config>(&map_c, store_transposed ? caller : p, kTensorMapType<T>);
      if (!status.ok()) return status;
    }
    WgmmaParams wp{static_cast<int>(p.M), static_cast<int>(p.N), static_cast<int>(p.K),
                   static_cast<int>(p.batch), static_cast<int>(tiles_m), static_cast<int>(tiles_n),
                   p.c, p.c_stride_m, p.c_stride_n, p.c_stride_batch, p.bias, p.bias_stride,
                   tma_store, store_transposed, RowSumView{}};
    const RowSumView sums = row_sum_view(p, plan);
    if (p.row_sum != nullptr && !plan.row_sum.fused) {
      status = launch_row_sum_slices(sums, stream);
      if (!status.ok()) return status;
    }
    if (plan.row_sum.fused) wp.row_sum = sums;
    if (plan.stream_k_bytes > 0) {
      char* workspace = static_cast<char*>(p.workspace);
      wp.sk_partials = reinterpret_cast<float*>(workspace + plan.stream_k_offset);
      wp.sk_flags = reinterpret_cast<int*>(workspace + plan.stream_k_flags_offset);
    }
    status = launch_product<kConsumers, kMmaN>(plan, map_a, map_b, map_c, wp, shape, stream);
    if (!status.ok() || p.row_sum == nullptr) return status;
    return launch_row_sum_finish(sums, static_cast<T*>(p.row_sum), stream);
  }

  // The kernel instantiated for the operands' majors (tf32's B is always K-major).
  template <int kConsumers, int kMmaN>
  static LaunchStatus launch_product(const WgmmaPlan& plan, const CUtensorMap& map_a,
                                    const CUtensorMap& map_b, const CUtensorMap& map_c,
                                    const WgmmaParams& wp, const WgmmaShape& shape,
                                    cudaStream_t stream) {
    constexpr int C = kConsumers, N = kMmaN;
    if constexpr (std::is_same_v<T, float>) {
      return plan.a.k_major
                 ? launch_layout<T, C, N, true, true>(map_a, map_b, map_c, wp, shape, stream)
                 : launch_layout<T, C, N, false, true>(map_a, map_b, map_c, wp, shape, stream);
    } else {
      if (plan.a.k_major) {
        return plan.b.k_major
                   ? launch_layout<T, C, N, true, true>(map_a, map_b, map_c, wp, shape, stream)
                   : launch_layout<T, C, N, true, false>(map_a, map_b, map_c, wp, shape, stream);
      }
      return plan.b.k_major
                 ? launch_layout<T, C, N, false, true>(map_a, map_b, map_c, wp, shape, stream)
                 : launch_layout<T, C, N, false, false>(map_a, map_b, map_c, wp, shape, stream);
    }
  }

  // A as the product reads it (after any repack), sliced as planned, partials in the workspace.
  static RowSumView row_sum_view(const GemmParams& p, const WgmmaPlan& plan) {
    RowSumView v;
    if (p.row_sum == nullptr) return v;
    v.a = plan.a.ptr;
    v.stride_m = plan.a.stride_x, v.stride_k = plan.a.stride_k;
    v.stride_batch = plan.a.stride_batch;
    v.k_major = plan.a.k_major;
    v.M = static_cast<int>(p.M), v.K = static_cast<int>(p.K), v.batch = static_cast<int>(p.batch);
    v.piece_k = static_cast<int>(plan.row_sum.piece_k);
    v.slices = static_cast<int>(plan.row_sum.slices);
    v.partials = reinterpret_cast<float*>(static_cast<char*>(p.workspace) +
                                          plan.row_sum.partials_offset);
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

// wgmma runs on compute capability 9.0 only (sm_90a code), and only in builds that compiled it.
bool device_runs_sm90a() {
#ifdef TORCH_GEMM_WITH_SM90A
  return current_compute_capability() == 90;  // 0 where the query fails: the caller refuses
#else
  return false;
#endif
}

}  // namespace

LaunchStatus launch_gemm_wgmma_sm90(const GemmParams& params, cudaStream_t stream) {
  if (!device_runs_sm90a()) {
    return {cudaErrorInvalidDeviceFunction, "device check: not a compute capability 9.0 device"};
  }
  return dispatch_dtype<WgmmaLauncher>(params, stream);
}

int64_t gemm_wgmma_sm90_workspace_bytes(const GemmParams& params) {
  if (params.M == 0 || params.N == 0 || params.batch == 0) return 0;
  if (params.dtype == DType::kFloat64) return 0;
  const GemmParams& problem = runs_transposed(params) ? transposed_problem(params) : params;
  return plan_product(problem, choose_shape(problem)).workspace_bytes;
}

}  // namespace torch_gemm
