// The Hopper kernel's plan of a call (operands, C's store, tile, cluster, split-K, stream-K, grid)
// as pure functions of the product, the device's facts and the environment's overrides: plain C++
// in every build, so that torch_gemm.explain and tests/test_heuristics.py run on the CPU.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm_params.h"
#include "kernels/tiles.h"

namespace torch_gemm {
namespace sm90 {

// The kernel's numbers that the plan counts with; launch_config.cuh checks each against the
// kernel's own.
struct KernelFacts {
  static constexpr int64_t kTmaAlignBytes = 16;         // TMA: base address and every stride
  static constexpr int64_t kWorkspaceAlignBytes = 256;  // each part of the workspace
  static constexpr int64_t kKTileBytes = 128;  // a k-tile is one 128-byte swizzled row of K
  static constexpr int kSplitSlices = 2;       // K slices of a split 128×256 tile
  static constexpr int kMaxSmallSlices = 8;    // of a split 64×128 tile: 2, 4 or 8 (a cluster)
  static constexpr int kMaxMediumSlices = 4;   // of a split 128×128 tile: 2 or 4
  static constexpr int kMaxNarrowSlices = 8;   // of a split tf32 64×256 tile: 2, 4 or 8
  // Clusters of 8 such slices sharing one tile (Shape::split_groups): 2, 4 or 8, their sums met
  // in the workspace (reduction.cuh's reduce_groups).
  static constexpr int kMaxSplitGroups = 8;
  static constexpr int64_t kRowSumSliceAlign = 64;   // row_sum.cuh's kRowSumSliceAlign
  static constexpr int64_t kRowSumWarps = 2;         // row_sum.cuh's kRowSumWarps
  static constexpr int64_t kRowSumRowsPerWarp = 64;  // row_sum_slices_kernel: 128 rows a block
};

// The environment's overrides, for comparisons and tests. The launcher reads the variables once
// per process and passes them in, so that the plan depends on its arguments alone.
struct Overrides {
  // TORCH_GEMM_WGMMA_SHAPE=CxS[xN]: C consumer warpgroups (1: 64-row tiles, 2: 128-row), S slices
  // of K (1; 2 with 2x2; 2, 4 or 8 with 1xSx128, 2 or 4 with 2xSx128, and for tf32 with 1xS) and
  // N columns a tile (256; 128: 1xSx128 and 2xSx128; 192: 2x1x192; 80, 96, 160: 2x1x80, 2x1x96,
  // 2x1x160; 64: 1x1x64); split K and 128, 192, 160 or 64 columns take 16-bit and tf32 products
  // without row sums (3xTF32's takes 1xSx128 and 2xSx128 as its consumers; tf32's 160 columns
  // with both operands read K-major), 2x2 and 80 or 96 columns 16-bit ones, 1xS tf32 ones.
  // consumers 0: unset, the plan chooses. CxSxNxG: G clusters (2, 4 or 8) of the S = 8 slices
  // share each one-consumer tile (split_groups; 1xSx128, or 1xSx256 tf32).
  int consumers = 0, split_k = 0, block_n = static_cast<int>(kWgmmaBlockN);
  int split_groups = 1;
  // TORCH_GEMM_WGMMA_SHAPE set to none of the shapes above: the plan chooses, and explain says so.
  bool shape_ignored = false;
  bool clusters = true;    // TORCH_GEMM_WGMMA_CLUSTER=1: no pairs sharing B
  // TORCH_GEMM_WGMMA_STREAM_K=0|1|2|3: off; the last partial round; and one more; 3: every turn
  // of 128×256 or 128×128 tiles or of one row of 64×128 one-consumer tiles (M <= 64; tf32 under
  // its own rules: of 64×256 ones), or of any forced ones (1xSx128), dealt out as k-tiles wherever
  // the units are at least as many as the SMs (Shape::stream_k_all), in place of any split; other
  // tiles as 1.
  int stream_k = 1;
  int max_clusters = INT_MAX;  // TORCH_GEMM_WGMMA_MAX_CLUSTERS=n: at most n clusters resident
  // TORCH_GEMM_WGMMA_STORE=registers: C leaves from registers even where TMA could store it
  // (scripts/sanitize_cases.py's TOOL_ENV sets it under initcheck, which does not see TMA stores
  // as writes).
  bool tma_store = true;
  // TORCH_GEMM_WGMMA_FLAGS=zeroed: the launcher zeroes stream-K's and split groups' flags before
  // the launch (a memset on the stream), where otherwise their launch tag needs none
  // (WgmmaParams::sk_tag); sanitize_cases.py's TOOL_ENV sets it under initcheck.
  bool zero_flags = false;
  // TORCH_GEMM_WGMMA_TF32_PLAN=own|sixteen_bit: the tile rules of tf32 products (not 3xTF32's,
  // without row sums): tf32's own (64×256 split, 128×256 dealt), or the 16-bit products' (64×128
  // split and dealt, 128×128 split and dealt, 64×64, 128×192, slim 128×160 with both operands
  // read K-major) for every layout;
  // unset, the plan's choice between them (Tf32Rules). For comparing them on a GPU.
  enum class Tf32Plan { kAuto, kOwn, kSixteenBit };
  Tf32Plan tf32_plan = Tf32Plan::kAuto;
  bool tf32_plan_ignored = false;  // set to neither: the plan chooses, and explain says so
};

// The overrides from the variables' values (null: unset). A value out of range is ignored.
Overrides parse_overrides(const char* shape, const char* cluster, const char* stream_k,
                          const char* max_clusters, const char* store,
                          const char* flags = nullptr, const char* tf32_plan = nullptr);

// Which rule set the tile and the clusters (for explain's reasons).
enum class TileRule {
  kWide, kNarrow, kNarrowSplit, kOneRowNarrow, kSmall, kSmallSplit, kMediumSplit, kMediumSplitTall,
  kSmallStreamK, kMedium, kMediumStreamK, kWideStreamK, kWideDealt, kSmallDealt, kMid, kSlim, kTiny,
  kTinyOneRow, kOneKTileNarrow, kForced, kPromoted
};
enum class ClusterRule { kPairs, kSplitK, kOff, kOneTileRow, kOneWave, kOddRows };
// Which tile rules a tf32 product followed (for explain): none (16-bit, 3xTF32's, row sums); the
// 16-bit products' (both operands read K-major, in place or repacked, or as
// TORCH_GEMM_WGMMA_TF32_PLAN asks); tf32's own (A read MN-major, through its permuted register
// loads, or as asked); tf32's own where the 16-bit rules' whole
// 128×128 pairs would replace its 128×256 tiles, or, with a long K, their 64×128 pairs or dealt
// 128×128 pairs its dealt 128×256 tiles, or, with few rows, their 64×128 tiles (whole or split in
// 2) as many blocks of its split 64×256 tiles.
enum class Tf32Rules { kNone, kSixteenBit, kOwn, kOwnOverMediumPairs, kOwnDealtOverPairs, kOwnSplitOverNarrow };

// The most equal shares stream-K's grid cuts each dealt turn in, on fewer clusters than resident
// (heuristics.cpp's equal_share_clusters), but for tf32's kWideStreamK tiles.
constexpr int kStreamKMaxShares = 4;

// How a product is spread over the blocks: the tile (consumers × 64 rows, block_n columns),
// pairs of blocks sharing B (clusters), or split_k slices of K per 128×256 (16-bit), 128×128,
// 64×128 or (tf32) 64×256 tile.
struct Shape {
  int consumers = 2;
  // or kWgmmaSmallBlockN, kWgmmaTinyBlockN, kWgmmaMidBlockN or a slim width (80, 96: 16-bit; 160)
  int block_n = static_cast<int>(kWgmmaBlockN);
  bool clusters = false;
  int split_k = 1;
  // Clusters of split_k blocks sharing each split tile (1; 2, 4 or 8 where split_k is 8 and the
  // tiles are few): the tile's K in split_k × split_groups slices, each cluster's sums added
  // through distributed shared memory and then the clusters' through the workspace.
  int split_groups = 1;
  int64_t sms = 1;  // the multiprocessors it was chosen for
  TileRule tile_rule = TileRule::kWide;
  ClusterRule cluster_rule = ClusterRule::kPairs;
  int64_t wide_tiles = 0;    // 128×256 tiles over the batch
  int64_t small_tiles = 0;   // 64×128 tiles over the batch
  int64_t medium_tiles = 0;  // 128×128 tiles over the batch
  int64_t mid_tiles = 0;     // 128×192 tiles over the batch
  int64_t tiny_tiles = 0;    // 64×64 tiles over the batch
  // One row of 64×128 tiles split in fewer slices than one wave of clusters would take, down to 2
  // (heuristics.cpp's kSplitPastTwoMaxTiles).
  bool split_held_back = false;
  // 128×256 tiles kept where 128×128 or 128×192 ones would have been taken for their fewer
  // rounds: stream-K deals out the 128×256 tiles' last round and K is long (heuristics.cpp's
  // kStreamKKeepsWideMinKTiles).
  bool stream_k_keeps_wide = false;
  // 128×192 tiles taken although stream-K would deal out the 128×256 tiles' last round with such
  // a K: their whole rounds cost less than the 128×256 tiles' share with stream-K's costs
  // (heuristics.cpp's kStreamKWideCostTenths).
  bool mid_beats_stream_k = false;
  // Slim tiles (TileRule::kSlim): the width of the two-consumer tile they replaced (256, 128 or
  // 192), which explain names as the one they beat.
  int slim_replaced_block_n = 0;
  // Every turn dealt out to the blocks as k-tiles (stream-K over the whole product): 128×256 or
  // 128×128 tiles, or one row of 64×128 one-consumer tiles (M <= 64; in tf32, 64×256) or forced
  // ones (1xSx128, paired where the plan pairs them), under TORCH_GEMM_WGMMA_STREAM_K=3; and by
  // the plan itself, 128×128 tiles of two tile rows (one or four in equal shares) with a long K
  // (TileRule::kMediumStreamK) and tf32's 128×256 tiles in 2 to 8 equal shares where they would
  // leave half the SMs idle (TileRule::kWideStreamK), and, under the 16-bit rules (bf16/fp16, and
  // tf32 following them), 128×256 pairs where few meet a long K (TileRule::kWideDealt) and 64×128
  // pairs of 2 to 8 tile rows the plan would split, in equal shares of a long enough K
  // (TileRule::kSmallDealt).
  bool stream_k_all = false;
  // The most equal shares plan_grid may cut every dealt turn in, on fewer clusters than resident
  // (heuristics.cpp's equal_share_clusters): 4, or 8 for tf32's kWideStreamK tiles where the
  // 64×256 tiles would fill at most half the SMs.
  int stream_k_max_shares = kStreamKMaxShares;
  Tf32Rules tf32_rules = Tf32Rules::kNone;

  int block_m() const { return consumers * static_cast<int>(kWgmmaNarrowBlockM); }
  int cluster_m() const { return clusters ? 2 : 1; }
};

// The tile, K slices and clusters of a product on `sms` multiprocessors.
Shape choose_shape(const GemmParams& p, int64_t sms, const Overrides& given);

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
bool tma_stride_ok(int64_t stride, int64_t extent, int64_t element_bytes);
bool tma_aligned(const void* ptr);

// k_major_only: the kernel reads this operand only K-major (tf32's B), so an MN-major one is
// transposed into the workspace.
OperandPlan plan_operand(const void* ptr, int64_t X, int64_t K, int64_t batch, int64_t stride_x,
                         int64_t stride_k, int64_t stride_batch, int64_t element_bytes,
                         bool k_major_only);

// Where mm_tiled_row_sum's sums of A's rows are taken: fused into the product's producer
// warpgroup, or by row_sum_slices_kernel before it; K cut into `slices` pieces of piece_k.
struct RowSumPlan {
  bool fused = false;
  int64_t piece_k = KernelFacts::kRowSumSliceAlign, slices = 0;
  int64_t partials_offset = 0, partials_bytes = 0;
};

enum class StreamKRule {
  kOn, kPromoted, kRowSum, kOff, kNotWideUnsplit, kFewTiles,  // planning the workspace
  kWholeRounds, kSmallSaving, kTooManyUnits                  // at launch, given the clusters
};

// Operands, row sums, and the partial sums and flags (0 bytes: none) of stream-K or of a split
// tile's clusters (Shape::split_groups), in one workspace.
struct WgmmaPlan {
  OperandPlan a, b;
  RowSumPlan row_sum;
  int64_t workspace_bytes;
  int64_t stream_k_offset = 0, stream_k_flags_offset = 0, stream_k_bytes = 0;
  StreamKRule stream_k_rule = StreamKRule::kOn;
};

// Cᵀ = Bᵀ·Aᵀ: the same product with the operands' roles and C's strides exchanged.
GemmParams transposed_problem(const GemmParams& p);

// Whether tf32 runs the transposed product (B N-major, which the tf32 wgmma cannot read, costs
// less repacking transposed).
bool runs_transposed(const GemmParams& p);

// Whether the epilogue can hand C to TMA stores: unit column stride, base and row (and batch)
// strides 16-byte aligned.
bool tma_store_ok(const GemmParams& p);

// The workspace plan of a product as the launcher runs it in `shape`.
WgmmaPlan plan_product(const GemmParams& p, const Shape& shape, const Overrides& o);

// wgmma_sm90_3xtf32's layout: the split operands' place in the workspace (dense K-major rows of
// two segments, each K rounded up to a k-tile and zero past K: A's big and small parts, B's small
// and big, ld floats a row) and the TF32 product over three segments (GemmParams::tf32_promoted:
// big·small, small·big, big·big, K = 3·segment) that wgmma_sm90 runs, reading A's first and B's
// second segment twice; its own workspace after them. `base`: the workspace (any
// kWorkspaceAlignBytes-aligned address when only sizing).
int64_t three_tf32_segment(int64_t K);  // K rounded up to a tf32 k-tile
// Where one product's promoted tiles would leave SMs idle (they take no split of K inside the
// kernel), K is cut into `chunks` of chunk_k (a whole number of k-tiles; the last one shorter),
// run as a batch of products into fp32 partials in the workspace (chunks × M × N, dense), which
// one more kernel adds up, with the bias, into C. An Inf or NaN operand reaches C as in one
// product; a chunk's finite sum that overflows meets the other chunks' as an Inf, so with an
// opposite Inf or overflow in another chunk it gives NaN where one long sum may give an Inf (as
// any split of K may). A caller's batch of products is not cut
// (chunks 1). three_tf32_chunks: the count whose estimated time is least (tiles.h).
int64_t three_tf32_chunks(const GemmParams& p);
int64_t three_tf32_chunk_k(int64_t K, int64_t chunks);  // chunk z starts at z·chunk_k
struct ThreeTf32Plan {
  int64_t segment = 0, ld = 0, a_bytes = 0, b_bytes = 0;
  int64_t chunks = 1, chunk_k = 0, partials_bytes = 0;
  GemmParams inner;
  // The workspace this plan lays out before the inner product's own (inner.workspace).
  int64_t own_bytes() const { return a_bytes + b_bytes + partials_bytes; }
};
ThreeTf32Plan plan_3xtf32(const GemmParams& caller, char* base);

// Everything the launcher decides before it knows how many clusters fit at once.
struct Plan {
  bool transposed = false;  // runs_transposed: problem is the caller's Cᵀ = Bᵀ·Aᵀ
  GemmParams problem;       // the product the kernel computes
  Shape shape;
  WgmmaPlan product;
  bool tma_store = false;         // C leaves by TMA stores (else from registers)
  bool store_transposed = false;  // ... into the caller's C, boxes filled transposed (tf32)
  int64_t tiles_m = 0, tiles_n = 0;
  int64_t turns = 0;    // clusters' worth of tiles: each cluster computes one a turn
  int64_t k_tiles = 0;  // of the whole of K
  bool fits_int = true;  // extents and tiles within int (else the launcher refuses)
};

// The plan of a call with the caller's params (M, N and batch > 0) on `sms` multiprocessors.
Plan plan_call(const GemmParams& caller, int64_t sms, const Overrides& o);

// The persistent grid of a planned call, given `resident`: the kernel's clusters that fit at
// once (the SMs for single blocks; cudaOccupancyMaxActiveClusters for pairs). Split-K does not
// use it: split_groups clusters of kSplitK blocks per tile.
struct Grid {
  int64_t slots = 0;   // clusters resident at once, after the cap; <= 0: none fits
  int64_t blocks = 0;  // gridDim.x
  int sk_turns = 0;    // the last turns stream-K deals out as k-tiles (0: every turn whole)
  StreamKRule stream_k_rule = StreamKRule::kOn;
  // Stream-K on fewer clusters than resident (blocks / cluster_m of them), so that it cuts every
  // tile at the same K offsets (stream_k_clusters).
  bool fewer_clusters = false;
};
Grid plan_grid(const Plan& plan, int64_t resident, const Overrides& o);

// Each decision of a plan in a sentence, for torch_gemm.explain (built only when asked): pairs
// (decision, sentence) for transposed, a, b, store, tile, cluster, split_k, stream_k, row_sum, grid.
using Reasons = std::vector<std::pair<std::string, std::string>>;
Reasons explain_plan(const GemmParams& caller, const Plan& plan, const Grid& grid,
                     const Overrides& o);

}  // namespace sm90
}  // namespace torch_gemm
