// The plans behind kernel="auto", wgmma_sm90, multistage and decode_sm80 against an N-major weight
// as Python functions of the torch_gemm._C module (torch_gemm.explain calls them): pure functions
// of shapes and device facts, in every build.
#include "ops/explain.h"

#include <torch/extension.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/decode_plan.h"
#include "kernels/multistage_plan.h"
#include "kernels/sm90/heuristics.h"
#include "ops/auto_kernel.h"

namespace torch_gemm {
namespace {

namespace py = pybind11;

// A pointer with the address `address`: the plans only test pointers for alignment and null.
const void* at_address(int64_t address) { return reinterpret_cast<const void*>(address); }
// Where a pointer only needs to be non-null (a bias, row sums) or 16-byte aligned (C, which the
// ops allocate).
constexpr int64_t kAlignedAddress = 256;

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw py::value_error(std::string("torch_gemm._C.") + fn + ": " + what);
}

DType parse_dtype(const char* fn, const std::string& name) {
  if (name == "bfloat16") return DType::kBFloat16;
  if (name == "float16") return DType::kFloat16;
  if (name == "float32") return DType::kFloat32;
  if (name == "float64") return DType::kFloat64;
  fail(fn, "dtype must be 'bfloat16', 'float16', 'float32' or 'float64', got '" + name + "'");
}

void check_extent(const char* fn, const char* arg, int64_t value) {
  if (value < 0) fail(fn, std::string(arg) + " must be >= 0, got " + std::to_string(value));
}

// An operand's (outer, inner, batch) strides in elements from a tensor's stride() (2 or 3
// entries, the batch's first), or dense in the given major order.
struct Strides {
  int64_t first, second, batch;
};
Strides operand_strides(const char* fn, const char* arg,
                        const std::optional<std::vector<int64_t>>& given, int64_t rows,
                        int64_t cols, int64_t batch, bool rows_contiguous) {
  if (!given.has_value()) {
    return rows_contiguous ? Strides{1, rows, rows * cols} : Strides{cols, 1, rows * cols};
  }
  const std::vector<int64_t>& s = *given;
  if (s.size() == 2) return {s[0], s[1], batch > 1 ? rows * cols : 0};
  if (s.size() == 3) return {s[1], s[2], s[0]};
  fail(fn, std::string(arg) + " must hold 2 strides (or 3, the batch's first), as tensor.stride() "
           "gives them, got " + std::to_string(s.size()));
}

// p's A and B: their strides and where they start.
void set_operands(GemmParams* p, const Strides& a, const Strides& b, int64_t a_address,
                  int64_t b_address) {
  p->a = at_address(a_address), p->a_stride_m = a.first, p->a_stride_k = a.second;
  p->a_stride_batch = a.batch;
  p->b = at_address(b_address), p->b_stride_k = b.first, p->b_stride_n = b.second;
  p->b_stride_batch = b.batch;
}

// p's bias or row sums, as linear_tiled and mm_tiled_row_sum pass them (wgmma's plan depends on
// them): present or not, never both.
void set_epilogue_extras(const char* fn, GemmParams* p, bool bias, bool row_sum) {
  if (row_sum && bias) fail(fn, "no op takes both a bias and row sums");
  if (bias) p->bias = at_address(kAlignedAddress), p->bias_stride = 1;
  if (row_sum && p->N > 0) p->row_sum = const_cast<void*>(at_address(kAlignedAddress));
}

py::dict describe_operand(const sm90::OperandPlan& op) {
  py::dict d;
  d["k_major"] = op.k_major;
  d["repack"] = op.repack;
  return d;
}

py::dict sm90_plan(int64_t M, int64_t N, int64_t K, int64_t sm_count, int64_t batch,
                   const std::string& dtype_name, bool a_k_major, bool b_k_major,
                   const std::optional<std::vector<int64_t>>& a_strides,
                   const std::optional<std::vector<int64_t>>& b_strides, int64_t a_address,
                   int64_t b_address, bool bias, bool row_sum,
                   std::optional<int64_t> max_active_clusters, const char* shape,
                   const char* cluster, const char* stream_k, const char* max_clusters,
                   const char* store, const char* tf32_plan, bool three_tf32) {
  const char* fn = "sm90_plan";
  check_extent(fn, "M", M);
  check_extent(fn, "N", N);
  check_extent(fn, "K", K);
  check_extent(fn, "batch", batch);
  if (sm_count <= 0 || sm_count > INT_MAX) {
    fail(fn, "sm_count must be the device's number of multiprocessors (> 0), got " +
                 std::to_string(sm_count));
  }
  if (max_active_clusters.has_value() && *max_active_clusters <= 0) {
    fail(fn, "max_active_clusters must be > 0 (or None: sm_count // 2), got " +
                 std::to_string(*max_active_clusters));
  }
  const DType dtype = parse_dtype(fn, dtype_name);
  if (dtype == DType::kFloat64) fail(fn, "wgmma_sm90 takes bfloat16, float16 and float32 (as tf32)");
  if (three_tf32 && dtype != DType::kFloat32) fail(fn, "three_tf32 takes float32 only");

  GemmParams p;
  p.M = M, p.N = N, p.K = K, p.batch = batch, p.dtype = dtype;
  const Strides a = operand_strides(fn, "a_strides", a_strides, M, K, batch, !a_k_major);
  const Strides b = operand_strides(fn, "b_strides", b_strides, K, N, batch, b_k_major);
  set_operands(&p, a, b, a_address, b_address);
  // C as the ops allocate it: contiguous, aligned.
  p.c = const_cast<void*>(at_address(kAlignedAddress));
  p.c_stride_m = N, p.c_stride_n = 1, p.c_stride_batch = M * N;
  set_epilogue_extras(fn, &p, bias, row_sum);
  p.sm_count = static_cast<int>(sm_count);
  // wgmma_sm90_3xtf32: the product over its split operands, laid out as its launcher lays them
  // (K's chunks, if it cuts K, a batch of products).
  int64_t chunks = 1, split_bytes = 0;
  if (three_tf32) {
    const sm90::ThreeTf32Plan three = sm90::plan_3xtf32(p, reinterpret_cast<char*>(kAlignedAddress));
    p = three.inner;
    chunks = three.chunks;
    split_bytes = three.own_bytes();
  }

  const sm90::Overrides o =
      sm90::parse_overrides(shape, cluster, stream_k, max_clusters, store, nullptr, tf32_plan);
  py::dict d;
  d["runs"] = M > 0 && N > 0 && batch > 0;
  if (!(M > 0 && N > 0 && batch > 0)) {
    d["refused"] = py::none();
    py::dict why;
    why["runs"] = "M, N or batch is 0: C is empty and no kernel runs";
    d["why"] = why;
    return d;
  }
  const sm90::Plan plan = sm90::plan_call(p, sm_count, o);
  // Pairs resident: as given, else half the SMs (at least one: a one-SM count still launches).
  const int64_t resident =
      plan.shape.clusters ? max_active_clusters.value_or(std::max<int64_t>(1, sm_count / 2))
                          : sm_count;
  const sm90::Grid grid = sm90::plan_grid(plan, resident, o);
  const sm90::Reasons why = sm90::explain_plan(p, plan, grid, o);

  d["refused"] = plan.fits_int ? py::object(py::none()) : py::object(py::str("extents past 32 bits"));
  d["transposed"] = plan.transposed;
  d["M"] = plan.problem.M, d["N"] = plan.problem.N, d["K"] = plan.problem.K;
  d["batch"] = p.batch;  // 3xTF32's: the caller's products times K's chunks
  d["tile"] = py::make_tuple(plan.shape.block_m(), plan.shape.block_n);
  d["consumers"] = plan.shape.consumers;
  d["cluster"] = plan.shape.cluster_m();
  d["split_k"] = plan.shape.split_k;
  d["split_groups"] = plan.shape.split_groups;
  d["stream_k"] = grid.sk_turns > 0;
  d["stream_k_turns"] = grid.sk_turns;
  d["a"] = describe_operand(plan.product.a);
  d["b"] = describe_operand(plan.product.b);
  d["store"] = plan.store_transposed ? "tma_transposed" : plan.tma_store ? "tma" : "registers";
  d["row_sum"] = p.row_sum == nullptr ? py::object(py::none())
                 : py::object(py::str(plan.product.row_sum.fused ? "fused" : "separate"));
  d["tiles"] = plan.tiles_m * plan.tiles_n * p.batch;
  d["chunks"] = chunks;
  d["turns"] = plan.turns;
  d["resident"] = plan.shape.split_k > 1 ? py::object(py::none()) : py::object(py::int_(grid.slots));
  d["grid"] = grid.blocks;
  // 3xTF32's: the split operands and K's chunks' partial sums, then the product's own.
  d["workspace_bytes"] = split_bytes + plan.product.workspace_bytes;
  py::dict reasons;
  for (const auto& [decision, sentence] : why) reasons[py::str(decision)] = sentence;
  d["why"] = reasons;
  return d;
}

py::dict auto_kernel(int64_t M, int64_t N, int64_t K, const std::string& dtype_name, int64_t sm,
                     int64_t sm_count, int64_t b_stride_k, bool allow_tf32, bool sm90a,
                     bool three_tf32, int64_t batch,
                     const std::optional<std::vector<int64_t>>& a_strides,
                     const std::optional<std::vector<int64_t>>& b_strides, int64_t a_address,
                     int64_t b_address, bool bias, bool row_sum) {
  const char* fn = "auto_kernel";
  check_extent(fn, "M", M);
  check_extent(fn, "N", N);
  check_extent(fn, "K", K);
  check_extent(fn, "batch", batch);
  if (sm <= 0 || sm > 1000) {
    fail(fn, "sm must be a compute capability times 10 (e.g. 90 for 9.0), got " +
                 std::to_string(sm));
  }
  if (sm_count <= 0) fail(fn, "sm_count must be > 0, got " + std::to_string(sm_count));
  GemmParams p;
  p.M = M, p.N = N, p.K = K, p.dtype = parse_dtype(fn, dtype_name);
  p.batch = batch;
  // The operands as given (tensor.stride(), data_ptr()); by default A dense row-major and B dense,
  // K-major where b_stride_k is 1, else N-major (as dx reads a linear's weight), both aligned.
  const Strides a = operand_strides(fn, "a_strides", a_strides, M, K, batch, false);
  const Strides b = b_strides.has_value() || b_stride_k == 1
                        ? operand_strides(fn, "b_strides", b_strides, K, N, batch, true)
                        : Strides{b_stride_k, 1, batch > 1 ? K * b_stride_k : 0};
  set_operands(&p, a, b, a_address, b_address);
  set_epilogue_extras(fn, &p, bias, row_sum);  // some rules ask wgmma's plan
  p.sm_count = static_cast<int>(sm_count);
  const AutoChoice choice =
      choose_auto_kernel(p, allow_tf32, static_cast<int>(sm), sm90a, three_tf32);
  py::dict d;
  d["kernel"] = std::string(choice.kernel);
  d["reason"] = describe_auto_choice(choice.rule);
  return d;
}

// decode_sm80's plan against an N-major B (decode_plan.h), or None where the layout is not its.
py::object decode_n_major_plan(int64_t M, int64_t N, int64_t K, const std::string& dtype_name,
                               int64_t sm_count, int64_t batch, bool clusters, const char* cluster,
                               const std::optional<std::vector<int64_t>>& a_strides,
                               const std::optional<std::vector<int64_t>>& b_strides,
                               int64_t a_address, int64_t b_address) {
  const char* fn = "decode_n_major_plan";
  check_extent(fn, "M", M);
  check_extent(fn, "N", N);
  check_extent(fn, "K", K);
  check_extent(fn, "batch", batch);
  if (sm_count <= 0 || sm_count > INT_MAX) fail(fn, "sm_count must be > 0, got " + std::to_string(sm_count));
  GemmParams p;
  p.M = M, p.N = N, p.K = K, p.batch = batch, p.dtype = parse_dtype(fn, dtype_name);
  const Strides a = operand_strides(fn, "a_strides", a_strides, M, K, batch, false);
  const Strides b = operand_strides(fn, "b_strides", b_strides, K, N, batch, false);
  set_operands(&p, a, b, a_address, b_address);
  if (!decode_n_major_layout(p)) return py::none();
  const DecodeNMajorPlan plan = plan_decode_n_major(p, sm_count, clusters, parse_decode_cluster(cluster));
  py::dict d;
  d["token_tiles"] = plan.token_tiles;
  d["blocks"] = plan.blocks_x;
  d["cluster"] = plan.splits;
  d["chunks_per_split"] = plan.chunks_per_split;
  d["preferred"] = decode_n_major_preferred(p, sm_count);
  return d;
}

// A plan's tile and split as explain shows them.
py::dict describe_multistage(const MultistagePlan& plan) {
  py::dict d;
  d["tile"] = py::make_tuple(plan.tile().block_m, plan.tile().block_n);
  d["split_k"] = plan.split.splits;
  d["waves"] = plan.waves;
  d["modeled_us"] = plan.modeled_ns * 1e-3;
  return d;
}

// What plan_multistage weighed and chose, in a sentence.
std::string why_multistage(const MultistagePlan& plan, const MultistageCandidates& weighed) {
  using Model = MultistageCostModel;
  const auto weighed_tile = [&](MultistageTileId id) {
    return std::any_of(weighed.plans, weighed.plans + weighed.count,
                       [id](const MultistagePlan& c) { return c.tile_id == id; });
  };
  const std::string large = multistage_tile_name(MultistageTileId::kLarge);
  const auto most_splits_of = [&](MultistageTileId id) {
    int most = 1;
    for (int i = 0; i < weighed.count; ++i) {
      if (weighed.plans[i].tile_id == id) most = std::max(most, weighed.plans[i].split.splits);
    }
    return most;
  };
  const int most_splits = most_splits_of(MultistageTileId::kLarge);
  std::string others;
  if (weighed_tile(MultistageTileId::kSmall)) {
    others = ", and (the " + large + " tiles make under two waves) the " +
             multistage_tile_name(MultistageTileId::kSmall) + " tile";
  }
  if (weighed_tile(MultistageTileId::kNarrow)) {
    const int narrow_splits = most_splits_of(MultistageTileId::kNarrow);
    others += " and, with at most " + std::to_string(Model::kNarrowMaxRows) + " rows, the " +
              multistage_tile_name(MultistageTileId::kNarrow) + " tile " +
              (narrow_splits > 1 ? "split up to " + std::to_string(narrow_splits) + " ways" : std::string("with K whole"));
  }
  return "the least modeled time of " + std::to_string(weighed.count) + " plan(s): the " + large + " tile " +
         (most_splits > 1 ? "split 1 to " + std::to_string(most_splits) + " ways in K"
                          : std::string("with K whole (no split keeps ") +
                                std::to_string(Model::kMinKTilesPerSplit) + " k-tiles a slice, or a batch)") +
         others + "; the fewest splits within " + std::to_string(static_cast<int>(Model::kTieMargin * 100)) +
         " % of it: " + multistage_tile_name(plan.tile_id) + " tiles, " +
         (plan.split.splits > 1 ? "K split " + std::to_string(plan.split.splits) + " ways, "
                                : std::string("K whole, ")) +
         std::to_string(plan.waves) + " wave(s) of " + std::to_string(plan.tile().blocks_per_sm) +
         " block(s) an SM";
}

// multistage's plan (multistage_plan.h) of a float32 product, or a batch of them, on a GPU of
// sm_count multiprocessors, as its launcher makes it: one plan a launch of at most kMaxGridZ
// products (the first's, and the last's where it differs).
py::dict multistage_plan(int64_t M, int64_t N, int64_t K, int64_t sm_count, int64_t batch,
                         const std::optional<std::string>& forced_value) {
  const char* fn = "multistage_plan";
  // Extents a float32 C and its operands could have: the plan's counts of bytes stay in int64,
  // split 64 ways too (a forced plan's most).
  constexpr int64_t kMaxExtent = int64_t{1} << 40, kMaxOutputs = int64_t{1} << 54;
  for (const auto& [arg, value] :
       {std::pair<const char*, int64_t>{"M", M}, {"N", N}, {"K", K}, {"batch", batch}}) {
    check_extent(fn, arg, value);
    if (value > kMaxExtent) fail(fn, std::string(arg) + " must be at most 2^40, got " + std::to_string(value));
  }
  if (M > 0 && N > 0 && batch > 0 && (N > kMaxOutputs / M || batch > kMaxOutputs / (M * N))) {
    fail(fn, "M·N·batch must be at most 2^54, got M = " + std::to_string(M) + ", N = " +
                 std::to_string(N) + ", batch = " + std::to_string(batch));
  }
  if (sm_count <= 0 || sm_count > INT_MAX) {
    fail(fn, "sm_count must be in [1, 2^31 - 1], got " + std::to_string(sm_count));
  }
  const int sms = static_cast<int>(sm_count);
  std::optional<MultistageForced> forced;
  std::string error;
  if (!read_multistage_plan(forced_value ? forced_value->c_str() : nullptr, &forced, &error)) {
    fail(fn, "plan: " + error);
  }
  const MultistageForced* forcing = forced ? &*forced : nullptr;
  GemmParams p;
  p.M = M, p.N = N, p.K = K, p.batch = batch, p.dtype = DType::kFloat32;
  const MultistageLaunches launches = multistage_launches(batch);
  GemmParams first = p;
  first.batch = launches.full > 0 ? kMaxGridZ : launches.rest;
  MultistageCandidates weighed;
  const MultistagePlan plan = plan_multistage(first, sms, &weighed, forcing);
  const MultistageTile& tile = plan.tile();
  const bool empty = M == 0 || N == 0 || batch == 0;  // the launcher launches nothing
  py::dict d = describe_multistage(plan);
  d["block_k"] = tile.block_k;
  d["blocks_per_sm"] = tile.blocks_per_sm;
  d["tiles"] = ceil_div(M, tile.block_m) * ceil_div(N, tile.block_n) * batch;
  d["k_tiles_per_split"] =
      empty ? 0 : plan.split.splits > 1 ? plan.split.k_tiles_per_split : ceil_div(K, tile.block_k);
  d["workspace_bytes"] = multistage_workspace_bytes(p, sms, forcing);
  d["launches"] = empty ? 0 : launches.full + (launches.rest > 0 ? 1 : 0);
  py::list candidates;
  for (int i = 0; i < weighed.count && !empty; ++i) candidates.append(describe_multistage(weighed.plans[i]));
  d["candidates"] = candidates;
  d["last_launch"] = py::none();
  py::list why;
  if (empty) {
    why.append("C is empty: nothing is launched");
  } else {
    why.append(forcing != nullptr ? "forced by TORCH_GEMM_MULTISTAGE_PLAN=" + *forced_value
                                  : why_multistage(plan, weighed));
    if (forcing != nullptr && first.batch == 1 && plan.split.splits != forcing->splits) {
      why.append("K split " + std::to_string(plan.split.splits) + " ways, not " +
                 std::to_string(forcing->splits) + ": " + std::to_string(ceil_div(K, tile.block_k)) +
                 " k-tiles of " + std::to_string(tile.block_k) + " make no more whole slices");
    }
    if (first.batch > 1) why.append("K is not split: a launch of a batch of products");
    if (launches.full > 0 && launches.rest > 0) {
      GemmParams last = p;
      last.batch = launches.rest;
      const MultistagePlan last_plan = plan_multistage(last, sms, nullptr, forcing);
      d["last_launch"] = describe_multistage(last_plan);
      why.append(std::to_string(launches.full) + " launch(es) of " + std::to_string(kMaxGridZ) +
                 " products (a grid's z), then one of " + std::to_string(launches.rest) +
                 ", planned alone ('last_launch')");
    }
  }
  d["why"] = why;
  return d;
}

}  // namespace

void bind_plans(pybind11::module_& m) {
  using namespace pybind11::literals;
  m.def("sm90_plan", &sm90_plan, "M"_a, "N"_a, "K"_a, py::kw_only(), "sm_count"_a, "batch"_a = 1,
        "dtype"_a = "bfloat16", "a_k_major"_a = true, "b_k_major"_a = true,
        "a_strides"_a = py::none(), "b_strides"_a = py::none(), "a_address"_a = 0,
        "b_address"_a = 0, "bias"_a = false, "row_sum"_a = false,
        "max_active_clusters"_a = py::none(), "shape"_a = py::none(), "cluster"_a = py::none(),
        "stream_k"_a = py::none(), "max_clusters"_a = py::none(), "store"_a = py::none(),
        "tf32_plan"_a = py::none(), "three_tf32"_a = false,
        "wgmma_sm90's plan of a product on a GPU of sm_count multiprocessors: how each operand "
        "reaches the TMA, C's store, the tile, cluster, split-K, stream-K and grid, and why "
        "(the dict's 'why'). a_strides / b_strides: the operands' tensor.stride() (default: dense, "
        "K-major or not as a_k_major / b_k_major say); a_address / b_address: their data_ptr(), for "
        "alignment; max_active_clusters: pairs of blocks resident at once (default sm_count // 2); "
        "shape, cluster, stream_k, max_clusters, store, tf32_plan: the values of "
        "TORCH_GEMM_WGMMA_SHAPE, _CLUSTER, _STREAM_K, _MAX_CLUSTERS, _STORE and _TF32_PLAN (None: "
        "unset); three_tf32: the plan of wgmma_sm90_3xtf32's "
        "inner product (float32 split into TF32 parts, over three K-long segments, on its promoted tiles; "
        "'chunks': the pieces it cuts K into, each a product of the batch, 1 if none).");
  m.def("auto_kernel", &auto_kernel, "M"_a, "N"_a, "K"_a, py::kw_only(), "dtype"_a, "sm"_a,
        "sm_count"_a = 132, "b_stride_k"_a = 1, "allow_tf32"_a = true, "sm90a"_a = true,
        "three_tf32"_a = false, "batch"_a = 1, "a_strides"_a = py::none(), "b_strides"_a = py::none(),
        "a_address"_a = 0, "b_address"_a = 0, "bias"_a = false, "row_sum"_a = false,
        "The kernel kernel='auto' takes for CUDA tensors, and why: {'kernel', 'reason'}. sm: the "
        "compute capability times 10; sm_count: its multiprocessors (default an H100's or H200's "
        "132); b_stride_k: B's stride along K (1: contiguous columns, a linear's weight; "
        "otherwise B is taken as N-major with unit column stride, as dx reads that weight); sm90a: whether the build has wgmma_sm90's sm_90a code; three_tf32: float32 "
        "precision '3xtf32' (torch_gemm.set_fp32_precision); batch: bmm's products, which "
        "3xTF32's count of tiles includes; a_strides / b_strides: the operands' tensor.stride() "
        "(b_strides replaces b_stride_k), a_address / b_address: their data_ptr(), for the decode "
        "rules' 16-byte loads; bias, row_sum: linear_tiled's bias or mm_tiled_row_sum's sums, as "
        "wgmma's plan, which auto consults, takes them.");
  m.def("multistage_plan", &multistage_plan, "M"_a, "N"_a, "K"_a, py::kw_only(), "sm_count"_a,
        "batch"_a = 1, "plan"_a = py::none(),
        "multistage's plan of a float32 product (a batch of them) on a GPU of sm_count "
        "multiprocessors, as its launcher makes it: {'tile', 'split_k', 'waves' (rounds of "
        "'blocks_per_sm' blocks on every SM), 'modeled_us' (the cost model's time), 'block_k', "
        "'blocks_per_sm', 'tiles', 'k_tiles_per_split', 'workspace_bytes', 'launches' (of at most "
        "65535 products each), 'candidates' (every plan weighed: tile, split_k, waves, modeled_us), "
        "'last_launch' (the last launch's plan where the batch takes several, else None), 'why'}. "
        "Past one launch the fields are the first launch's. plan: TORCH_GEMM_MULTISTAGE_PLAN's "
        "value, read as the launcher reads it (None: unset).");
  m.def("decode_n_major_plan", &decode_n_major_plan, "M"_a, "N"_a, "K"_a, py::kw_only(), "dtype"_a,
        "sm_count"_a = 132, "batch"_a = 1, "clusters"_a = true, "cluster"_a = py::none(),
        "a_strides"_a = py::none(), "b_strides"_a = py::none(), "a_address"_a = 0, "b_address"_a = 0,
        "decode_sm80's plan of a product against an N-major B (default: dense, A row-major, B "
        "N-major), or None where its 16-byte loads cannot take the layout: {'token_tiles', "
        "'blocks' (of 64 columns), 'cluster' (blocks splitting K), 'chunks_per_split' (of 32 rows), "
        "'preferred' (whether kernel='auto' takes it on sm_90)}. clusters: the device launches "
        "clusters (sm_90); cluster: TORCH_GEMM_DECODE_CLUSTER's value, read as the launcher reads "
        "it (None: unset).");
  m.def(
      "built_with_sm90a",
      [] {
#ifdef TORCH_GEMM_WITH_SM90A
        return true;
#else
        return false;
#endif
      },
      "Whether wgmma_sm90's sm_90a code was compiled into this build.");
}

}  // namespace torch_gemm
