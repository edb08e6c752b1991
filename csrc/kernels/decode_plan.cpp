// decode_sm80's plan (decode_plan.h): how many warps and blocks share K, from the shape and the
// SM count alone.
#include "kernels/decode_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace torch_gemm {
namespace {

using Cfg = DecodeSm80Config;

// The most K splits across blocks, and the fewest chunks of K a warp takes: finer splits add more
// partial sums than they spread work.
constexpr int64_t kMaxSplits = 16;
constexpr int64_t kMinChunksPerWarp = 2;
// A larger split is taken only where it fills the device's rounds by more than this.
constexpr double kEfficiencyMargin = 0.05;
// bf16/fp16 with one token tile (up to 8 rows): where all the blocks are resident at once they
// keep enough loads in flight to stream the weight unsplit, and a split's second kernel costs more
// than it spreads; except where the blocks are at most 1/kFewBlocksPerSm of the SMs and a weight
// row holds at least kFewBlocksMinRowBytes (too few loads in flight). Past one round of blocks,
// unsplit where a row holds at most kRoundsMaxRowBytes: with longer rows the last round's tail
// costs more than the second kernel. Two token tiles (more registers and token loads a warp) and
// float32 as tf32 keep the round-efficiency rule alone, which measured as well or better there
// (benchmarks/NOTES.md, session 36).
constexpr int64_t kFewBlocksPerSm = 4;
constexpr int64_t kFewBlocksMinRowBytes = 10240;
constexpr int64_t kRoundsMaxRowBytes = 16384;

// kernel="auto" on sm_90 takes the N-major kernel over wgmma's 64-row tiles (decode_n_major_preferred)
// where K has at least kNMajorMinK rows, the weight at least kNMajorMinWeight elements and the
// 64-column blocks are at most kNMajorMaxBlocksPerSm a multiprocessor: over the models grid's dx
// products at 1, 8 and 16 tokens the choice with one an SM ran 1.049x as fast as wgmma alone on an
// H100 (0.965 of torch → 1.013, one run), and on an H200 came to 0.976 of torch where wgmma's
// record has 0.946 (the products it takes: 0.994 against 0.943). From one to two an SM (11008 to
// 14336 columns: 172–224 blocks, unsplit) the kernel ran 1.07x as fast as wgmma on an H100 (1.107
// up to K = 4096, 1.031 past it, min 0.962) and 1.10–1.13x on an H200 (two runs, min 1.04),
// each against the other in one run (benchmarks/NOTES.md, sessions 39 and 40). With a shorter K
// or a smaller weight (launch-bound, 8–14 µs: 2048–5120 columns against 1024 rows, 2048–2560
// against 2048) and more blocks (N = 28672: 3.4 an SM; 0.88–1.03 of wgmma's time) wgmma's tiles
// were as fast or faster.
constexpr int64_t kNMajorMinK = 1024;
constexpr int64_t kNMajorMaxBlocksPerSm = 2;
// The N-major kernel's clusters: blocks at most this many halves a multiprocessor (1.5).
constexpr int64_t kMaxBlocksPerSmHalves = 3;
constexpr int64_t kNMajorMinWeight = int64_t{6} << 20;

// The batch elements one launch takes (gridDim.z), at least one.
int64_t launch_batch(const GemmParams& p) { return std::max<int64_t>(std::min<int64_t>(p.batch, kMaxGridZ), 1); }

double round_efficiency(int64_t blocks, int64_t slots) {
  const double rounds = static_cast<double>(blocks) / static_cast<double>(slots);
  return rounds / std::ceil(rounds);
}

// Whether a product of one pass of tokens streams its weight without a K split across blocks.
bool streams_unsplit(const GemmParams& p, const DecodePlan& plan, int64_t blocks, int64_t slots, int64_t sms) {
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) return false;
  if (plan.token_tiles != 1) return false;
  const int64_t row_bytes = p.K * dtype_size(p.dtype);
  if (blocks > slots) return row_bytes <= kRoundsMaxRowBytes;
  return blocks * kFewBlocksPerSm > sms || row_bytes < kFewBlocksMinRowBytes;
}

}  // namespace

DecodePlan plan_decode(const GemmParams& p, int64_t sms) {
  DecodePlan plan;
  plan.token_tiles = p.M <= 8 ? 1 : p.M <= 16 ? 2 : p.M <= 32 ? 4 : 8;
  // With more tokens, fewer warps share a column group's K and more column groups share (through
  // L1) the same tokens' loads, which then outweigh the weight's. float32's token vectors are
  // twice as many bytes a k: at four token tiles one warp a column group, all eight of a block
  // reading the same tokens' chunks at once, ran 1.6-2.9x faster than four (benchmarks/NOTES.md).
  if (plan.token_tiles <= 2) {
    plan.warps_per_column = 8;
  } else if (plan.token_tiles == 4) {
    plan.warps_per_column = p.dtype == DType::kFloat32 ? 1 : 4;
  } else {
    plan.warps_per_column = 2;
  }
  const int64_t groups_per_block = Cfg::kWarps / plan.warps_per_column;
  plan.blocks_x = ceil_div(ceil_div(p.N, int64_t{Cfg::kColumns}), groups_per_block);
  const int64_t chunks = ceil_div(p.K, int64_t{Cfg::chunk(dtype_size(p.dtype))});
  const int64_t batch = launch_batch(p);
  const int64_t slots = std::max<int64_t>(sms, 1) * Cfg::kMinBlocksPerSm;
  double best_efficiency = round_efficiency(plan.blocks_x * batch, slots);
  // Split K across blocks only for one pass of tokens (the decode shapes) and where the blocks
  // leave rounds unfilled, except where streams_unsplit keeps a 16-bit product of one token tile
  // whole.
  if (p.M <= int64_t{8} * plan.token_tiles && !streams_unsplit(p, plan, plan.blocks_x * batch, slots, sms)) {
    for (int64_t splits = 2; splits <= kMaxSplits; ++splits) {
      if (chunks < splits * plan.warps_per_column * kMinChunksPerWarp) break;
      const double efficiency = round_efficiency(plan.blocks_x * batch * splits, slots);
      if (efficiency > best_efficiency + kEfficiencyMargin) plan.splits = splits, best_efficiency = efficiency;
    }
  }
  plan.chunks_per_split = ceil_div(chunks, plan.splits);
  return plan;
}

bool decode_vector_loads(const GemmParams& p) {
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16 && p.dtype != DType::kFloat32) return false;
  const int64_t vec = Cfg::vec(dtype_size(p.dtype));
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % Cfg::kVectorBytes == 0; };
  const auto stride_ok = [vec](int64_t stride, int64_t extent) { return extent <= 1 || stride % vec == 0; };
  return p.K % vec == 0 && (p.a_stride_k == 1 || p.K <= 1) && (p.b_stride_k == 1 || p.K <= 1) && aligned(p.a) &&
         aligned(p.b) && stride_ok(p.a_stride_m, p.M) && stride_ok(p.b_stride_n, p.N) &&
         stride_ok(p.a_stride_batch, p.batch) && stride_ok(p.b_stride_batch, p.batch);
}

bool decode_splits_past_a_round(const GemmParams& p, const DecodePlan& plan, int64_t sms) {
  return plan.splits > 1 && plan.blocks_x * launch_batch(p) > std::max<int64_t>(sms, 1) * Cfg::kMinBlocksPerSm;
}

bool decode_n_major_layout(const GemmParams& p) {
  using NCfg = DecodeNMajorConfig;
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) return false;
  if (p.M < 1 || p.M > NCfg::kMaxRows || p.K < 1) return false;
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % NCfg::kVectorBytes == 0; };
  const auto stride_ok = [](int64_t stride, int64_t extent) { return extent <= 1 || stride % NCfg::kVec == 0; };
  // K and N whole vectors (so at least 8 each): A unit-stride along K, B along N.
  return p.K % NCfg::kVec == 0 && p.N % NCfg::kVec == 0 && p.a_stride_k == 1 && p.b_stride_n == 1 &&
         aligned(p.a) && aligned(p.b) && stride_ok(p.a_stride_m, p.M) && p.b_stride_k % NCfg::kVec == 0 &&
         stride_ok(p.a_stride_batch, p.batch) && stride_ok(p.b_stride_batch, p.batch);
}

DecodeNMajorPlan plan_decode_n_major(const GemmParams& p, int64_t sms, bool clusters, int forced_cluster) {
  using NCfg = DecodeNMajorConfig;
  DecodeNMajorPlan plan;
  plan.token_tiles = p.M <= 8 ? 1 : 2;
  plan.blocks_x = ceil_div(p.N, int64_t{NCfg::kColumns});
  const int64_t chunks = ceil_div(p.K, int64_t{NCfg::kChunk});
  const int64_t batch = launch_batch(p);
  // K split in a cluster while the blocks stay at most 1.5 a multiprocessor (kMaxBlocksPerSmHalves),
  // keeping kMinChunksPerWarp chunks for each warp of each block. The fastest cluster size per
  // product, against dx's weights at 1–16 tokens, was at most one block an SM on an H100 (N =
  // 4096 at K = 28672: 128 blocks 95.3 µs, 256 blocks 114.6) and more on an H200 (N = 5120 at K =
  // 28672: 160 blocks 90.5 µs, 80 blocks 117.8). Under auto's rule, 1.5 an SM came to 1.013 of
  // torch on the H100 (one an SM: 1.019) and 0.976 on the H200 (one an SM: 0.947), scored from
  // the times of every cluster size in one run each (benchmarks/NOTES.md, session 39).
  const auto keeps_chunks = [&](int splits) {
    return chunks >= int64_t{splits} * NCfg::kWarps * kMinChunksPerWarp;
  };
  if (clusters && forced_cluster > 0) {
    while (plan.splits * 2 <= std::min(forced_cluster, NCfg::kMaxSplits)) plan.splits *= 2;
    while (plan.splits > 1 && !keeps_chunks(plan.splits)) plan.splits /= 2;
  } else if (clusters) {
    while (plan.splits < NCfg::kMaxSplits &&
           2 * plan.blocks_x * batch * (plan.splits * 2) <= kMaxBlocksPerSmHalves * sms &&
           keeps_chunks(plan.splits * 2)) {
      plan.splits *= 2;
    }
  }
  plan.chunks_per_split = ceil_div(chunks, int64_t{plan.splits});
  return plan;
}

bool decode_n_major_preferred(const GemmParams& p, int64_t sms) {
  return decode_n_major_layout(p) && p.K >= kNMajorMinK && p.N * p.K >= kNMajorMinWeight &&
         ceil_div(p.N, int64_t{DecodeNMajorConfig::kColumns}) * launch_batch(p) <=
             kNMajorMaxBlocksPerSm * sms;
}

int parse_decode_cluster(const char* value) {
  return value == nullptr ? 0 : std::max(std::atoi(value), 0);
}

}  // namespace torch_gemm
