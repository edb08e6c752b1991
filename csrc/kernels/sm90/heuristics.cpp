// The Hopper kernel's plan of a call (heuristics.h): the rules, and the sentences that explain
// them. Plain C++: compiled in every build, including the CPU-only one.
#include "kernels/sm90/heuristics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace torch_gemm {
namespace sm90 {
namespace {

using F = KernelFacts;

// A 128×128 tile costs about this many tenths of a 128×256 one (H100, bf16, session 22 in
// benchmarks/NOTES.md: 0.58–0.64), so that its twice as many tiles pay where they make fewer
// rounds of the resident blocks: ⌈tiles₁₂₈ / SMs⌉ · 6 < ⌈tiles₂₅₆ / SMs⌉ · 10.
constexpr int64_t kMediumTileCostTenths = 6;
// Where K is one k-tile and the 128×128 tiles would make kOneKTileNarrowRounds rounds, 64×256
// tiles take their place, as many and paired like them: a tile's time is then its start and its
// stores more than its loop, and each 64×256 tile is one consumer's. Forced on dW's products whose
// plan was those 128×128 tiles (the tokens are K; 1024 × 5120–6144 and 2048 × 2560–3072 weights at
// 1, 16 and 64 tokens, both operands MN-major, 3 rounds: the H200 grid's worst dW group, 0.878 of
// torch): faster on all 12 on an H100 (at 64 tokens 0.94–0.95 of torch against 0.85–0.87) and on
// 11 of 12 on an H200 (1.04–1.13×; the twelfth's baseline timing was disturbed), sessions 41–42 in
// benchmarks/NOTES.md. Two rounds, more than three, and K-major operands were not measured.
constexpr int64_t kOneKTileNarrowRounds = 3;
// A 128×192 tile's time in tenths of a 128×256 one's, by shared memory's traffic: three quarters
// of the product, at about 0.92 of the 128×256 tile's pace where the 128×128 tile keeps 0.8 (which
// predicts its measured 0.58–0.64). Taken where its tiles make fewer rounds than the 256- or
// 128-column ones at their costs, and at most kMidMaxRounds: a product of between about a half and
// three rounds of 128×256 tiles, which otherwise leaves many SMs idle in its last round (three
// rounds against three: 3072×3072 dW, 128×192 1.17–1.23× faster, H100, session 29).
constexpr int64_t kMidTileCostTenths = 8;  // measured 0.803 (H200, tune_plan, 120 products)
constexpr int64_t kMidMaxRounds = 3;
// Slim 128×96 and 128×80 tiles' times in hundredths of a 128×256 one's (against the 128×128
// tile's 60 and the 128×192 tile's 80), measured: one round of them against one of 128×128 tiles
// ran 0.91–1.0 of the time (H100, 28 products; benchmarks/NOTES.md, session 37). Far from their
// share of the work: B crosses from L2 once a pair along M, but A once a tile, a third more bytes
// per product than paired 128×128 tiles. Taken in place of the two-consumer tile chosen above
// where they make fewer rounds at their costs: a few hundred rows against a weight whose
// 128-column tiles fill one round of 60-75 % of the SMs and the slim ones most of it; not in one
// tile row, whose blocks run unpaired, each reading its B alone (128 rows against 11008 columns:
// 0.96–1.0 of the 128×128 tiles' time, H200).
constexpr int64_t kSlim96TileCostHundredths = 57;
constexpr int64_t kSlim80TileCostHundredths = 55;
// The wide slim 128×160 tile, measured against the 128×192 tiles it replaces (H200, bf16, the
// forwards of 512-2048 rows against 2560 and 5120 columns, same runs): one or two rounds of 128 or
// 256 of them ran 1.02-1.11x as fast as one or two of 108-224 of 128×192 from 80 k-tiles, which
// puts a tile at 73-76 (the 128×192 tile's 80), and 0.99-1.00x at 40 k-tiles, where a product is
// more its register stores and start; so from kSlim160MinKTiles only, and only in place of 128×192
// tiles: where 128×256 or 128×128 tiles were chosen (2048 × 5120, 4096 × 2560: 4 rounds of
// 128×160) they ran 0.93-0.97x. A 128×176 width (5632 columns in 256 tiles) was measured too and
// ran 0.80-0.99x of 128×192 everywhere, and is not built.
constexpr int64_t kSlim160TileCostHundredths = 75;
constexpr int64_t kSlim160MinKTiles = 80;
constexpr int64_t kSlimMinKTiles = 16;  // below, a product is mostly its (register) stores
// The slim widths the plan weighs, in the order it tries them: each one's time in hundredths of a
// 128×256 tile's, the K it needs, and whether it replaces only 128×192 tiles.
struct SlimTile {
  int64_t width, cost_hundredths, min_k_tiles;
  bool mid_only;
};
constexpr SlimTile kSlimTiles[] = {
    {kWgmmaSlimBlockN96, kSlim96TileCostHundredths, kSlimMinKTiles, false},
    {kWgmmaSlimBlockN80, kSlim80TileCostHundredths, kSlimMinKTiles, false},
    {kWgmmaSlimBlockN160, kSlim160TileCostHundredths, kSlim160MinKTiles, true}};
int64_t slim_tile_cost(int64_t block_n) {
  for (const SlimTile& t : kSlimTiles) {
    if (t.width == block_n) return t.cost_hundredths;
  }
  return 0;  // not a slim width
}
// 128×192 tiles need a K of at least this many k-tiles: measured from 4 (K = 256, faster than
// 128×256); below, a product is mostly its stores, and nothing was measured. tf32's from the
// models grid's shortest K (2048 floats), the shortest measured (session 55).
constexpr int64_t kMidMinKTiles = 4;
constexpr int64_t kTf32MidMinKTiles = 64;
// Where stream-K would deal out the last round of the 128×256 tiles, they keep the SMs busy
// already, and from this many k-tiles the narrower tiles' fewer rounds do not pay: measured
// 128×192 / 128×256 with stream-K 0.95–1.05 at 80–88 k-tiles (geomean 0.98, within noise) and
// 1.05–1.21 at 224, 128×128 0.98–1.03 and 1.09–1.21 (H200, session 26); between 88 and 224, not
// measured.
constexpr int64_t kStreamKKeepsWideMinKTiles = 128;
// Unless the 128×192 tiles' whole rounds cost less than the 128×256 tiles' share of the SMs'
// time (wide / SMs rounds) at this many tenths of it: stream-K's partial sums and its finishers'
// waits. Measured 1.13–1.42 of that share, median 1.27, on 14 products whose 128×256 tiles take
// stream-K (H100 and H200, tune_plan, session 29). So 2048 rows against 3072 columns (256 tiles
// of 128×192, 97% of two rounds) take 128×192: 0.89–0.91 of the 128×256 tiles' time at 172–224
// k-tiles; 1024 × 5120 (216, 82%) keeps 128×256: 0.99–1.05 there.
constexpr int64_t kStreamKWideCostTenths = 13;
// Pairs on one wave of two-consumer tiles: 16-bit, K of at least this many k-tiles (session 22:
// 32 and more equal or faster paired; session 9: 16 slower).
constexpr int64_t kPairOneWaveMinKTiles = 32;
// A split 64×128 tile keeps at least this many k-tiles in each slice: fewer, and a block's
// start and its partials' exchange outweigh its share of the loop. Measured on 477 forwards of 2
// to 64 tokens (H100, session 29): 8 against 16, geomean 0.973 of torch against 0.966, 55 below
// 0.92 against 81 (e.g. 2–8 tiles at 64–96 k-tiles in 8 slices, 0.95–1.01 against 4's 0.87–0.94).
constexpr int64_t kSmallSplitMinKTiles = 8;
// But one row of more than kSplitPastTwoMaxTiles such tiles splits past 2 slices only with more
// than kSplitPastTwoKTiles a slice: 20 and 24 tiles (2560 and 3072 columns against 4–64 tokens)
// with 32–48 k-tiles ran 0.908× (H100) and 0.952× (H200) as fast in 4 slices as in 2, each forced
// against torch in its process (session 41, devrun/small.py: 12 and 18 products), and about even
// (0.999×, 1.039×) with 88 k-tiles (64 not measured); 16 tiles or fewer gained from 4 slices
// (9–16 tiles 1.0–1.16× from 65 k-tiles, 8 or fewer 1.05–1.23×).
constexpr int64_t kSplitPastTwoMaxTiles = 16;
constexpr int64_t kSplitPastTwoKTiles = 16;
// 64×64 tiles, paired along M (each pair sharing its 64 rows of B), take the place of 64×128 ones
// unsplit or split in 2 where they fill more than half of the SMs in one wave, in 2 to
// kTinyMaxNarrowRows rows of 64, with K of at most kTinyMaxKTiles: a few hundred rows against a
// narrow weight (512 rows against 1024 columns: 128 tiles, cuBLAS's choice there), whose 64×128
// tiles fill the SMs only unpaired and split, adding the slices' sums. Forced on the grid's
// forwards and dx products at 128 to 2048 rows (H100, session 40, against the plan in the same
// build): 1.05–1.14× faster by rows and K at 128–512 rows (512×1024×2048 0.78 → 0.91 of torch),
// 0.92–1.03× at 1024 rows, 0.90–1.0× at 2048; fewer tiles (half the SMs or less) and two waves
// (1024×1024) 0.67–0.9×; unpaired (TORCH_GEMM_WGMMA_CLUSTER=1) slower. On an H200 (the whole grid
// with the rule unbounded in K, against the record of 6a30368: across runs, the products whose
// plan did not change moved 1.003×) the rule's products ran 0.996× (forwards 0.976×): with K up to
// 32 k-tiles 1.05× (min 0.99), 48 1.03× (min 0.95), past 128 below 1.0; the H100 gained
// 1.107× (min 1.03) up to 32 k-tiles and 1.07× unbounded. Past a short K, a 64×64 tile's
// k-tile (half a 64×128 one's math for 2/3 of its bytes) costs more of the loop's fixed time
// (0.183 µs a k-tile at 512×1024 on the H100 against cuBLAS's 0.154) than the split's sum saves.
constexpr int64_t kTinyMaxNarrowRows = 8;
constexpr int64_t kTinyMaxKTiles = 32;
// One row of 64-row tiles (at most 64 rows: the few tokens of decode or a small batch; one matrix,
// the only case measured) takes 64×64 tiles, unpaired and whole, where they are
// kTinyOneRowMinTiles to one wave and K has at most kTinyMaxKTiles: twice the tiles of 64×128,
// each streaming half the weight's columns, in place of those whole or split in 2 or 4 with the
// slices' sums added. Forced on the grid's forwards and dx products of 8 and 64 tokens with a
// weight of at most 2^24 elements (H100, session 41, each against torch in its process):
// 2048–8192 columns (32–128 tiles) with 4–64 k-tiles 0.83–0.96 → 0.91–1.06 of torch, most where
// the plan split 64×128 tiles (64×3072×2048 dx 0.80 → 0.97); 2048 columns with 88–128 k-tiles
// slower than the 64×128 tiles split in 4 (0.84–0.90 against 0.98–1.0), and fewer columns slower
// than the split 64×128 tiles. Under the rule, at 4, 16 and 64 tokens, its 94 products ran 0.999
// of torch (min 0.90), against 0.869 for the 64×128 tiles split in 2 in the same build; on an
// H200 0.973, 1.067× the better of split 2 or 4. (Run transposed instead, Cᵀ = Bᵀ·Aᵀ with the
// tokens as wgmma's N, the same products ran 0.70–0.89: slower under every split and tile
// tried.) Past 32 k-tiles the first rule (to 64, at most 3/2 a tile) lost on the H200 (15
// products 0.85–1.03 of torch against 0.87–1.07 for the 64×128 tiles split in 2) and gained
// 1.01–1.02× on the H100.
constexpr int64_t kTinyOneRowMinTiles = 32;

// The blocks of 64×64 tiles in pairs along M: with an odd number of tile rows the last pair's
// second block is past M but still a block (192 rows against 2560 columns: 120 tiles, 160 blocks,
// two rounds of the 66 resident pairs).
int64_t tiny_pair_blocks(const GemmParams& p, int64_t narrow_m) {
  return ceil_div(narrow_m, 2) * 2 * ceil_div(p.N, kWgmmaTinyBlockN) * p.batch;
}

// Two rows of 64×128 tiles split along K take 128×128 tiles split in 4 instead (two consumer
// warpgroups a block, a cluster of 4 a tile) where those are at least as many blocks, fit in one
// wave of clusters of 4, and K has at least this many k-tiles: 128 rows against 2048–3072 columns
// with K = 14336–28672 ran 1.02–1.14× faster, with K = 5120 0.97× (H100, session 38). Where the
// 64×128 tiles' pair turns split in 3 or 4 equal shares, those pairs dealt out take their place
// instead (kSmallDealtOverMediumSplitMinShares).
constexpr int64_t kMediumSplitMinKTiles = 192;
// Products whose 64×128 tiles run whole in one wave of pairs, in at least kMediumSplitTallMinRows
// rows of 128-row tiles (few tile columns against many rows), both operands K-major (a linear's
// forward), take 128×128 tiles split in 2 instead (two consumer warpgroups a block, a cluster of
// 2 a tile) where those fit one wave of clusters of 2 (about as many blocks as the 64×128 tiles),
// each slice at least kMediumSplitTallMinSliceKTiles k-tiles: the two-consumer loop
// over half of K outruns the one-consumer 64×128 loop over all of it. 2048 rows against 512
// columns and 4096 against 256 (64 tiles of 128×128), K = 4096–8192, ran 1.016–1.098× faster;
// K = 2048–3072 0.95–1.00×; 1024 rows against 1024 columns (8 tile rows) 0.92–0.995× at every K
// (forced `2x2x128` against auto, bf16 NT, H200, session 50). Where few 128×256 pairs meet a
// longer K, kWideDealt takes them instead (from kWideDealtMinKTiles). tf32 under the 16-bit rules
// takes them in any number of tile rows: 128 to 1024 rows against 1024–6144 columns (40 to 64
// tiles of 128×128), K = 2560–8192, ran 0.95–1.01 of torch against the paired 64×128 tiles'
// 0.86–0.89 (12 forwards, H200, session 59 in benchmarks/NOTES.md); below kTf32OwnDealtMinKTiles
// only, from which choose_shape puts tf32's own dealt 128×256 tiles in those pairs' place where
// its own rules deal them (measured there; elsewhere the pairs stay, not measured against these).
constexpr int64_t kMediumSplitTallMinRows = 16;
// And in two tile rows, or one of at most kMediumSplitOneRowMaxTiles tiles (K of 64 k-tiles or
// more, as every slice's 32 ask): against the paired whole 64×128 tiles, 256 rows against 3072
// and 4096 columns ran 1.00–1.06× as fast, 128 against 5120–6144 columns 1.00–1.08× (K = 4096–
// 28672; bf16 and fp16 NT, H200, 323e2f6's plan against this one in ABBA processes, session 59),
// but 128 rows against 6912–8192 columns (54–64 tiles) 0.95–0.98× at K up to 14336; with K =
// 2048–3072 0.92–0.99× (forced, same session). Where those pairs are dealt out, they stay. 16-bit
// only: tf32 has its bound above.
constexpr int64_t kMediumSplitOneRowMaxTiles = 48;
constexpr int64_t kMediumSplitTallMinSliceKTiles = 32;
// 193 to 256 rows (four rows of 64-row tiles, two of 128-row ones) with at least this many
// k-tiles, and 32 to 5/8 of a wave of 128×128 tiles, take 128×128 tiles with every turn dealt out
// as k-tiles (stream-K over the whole product): the whole tiles otherwise chosen (split or paired
// 64×128, or paired 128×128) leave a third or more of the SMs idle, or split only in two.
// Measured 1.04–1.15× faster than those at 256 rows, 172–224 k-tiles and 2048–5120 columns (32 to
// 80 tiles); slower with 16–80 k-tiles (0.59–0.98), at 192 rows with 172 (the split 64×128
// tiles 1.07–1.16× faster), against 96 tiles (6144 columns: 0.94–1.0 of paired 128×128) and 128
// (8192: 0.90–0.94), which fill the SMs; about even at 512 rows (H100 and H200, tune_plan,
// session 30). The same at 449 to 512 rows (eight rows of 64-row tiles) where the pair turns split
// in equal shares (16 in 4 or 32 in 2, on 128 blocks), and from kMediumStreamKManySharesMinKTiles
// at either where they split in 4 (3: below): 512 rows against 2048 columns with K = 11008–16384
// 1.08–1.17× faster than the dealt 128×256 pairs before, with 28672 0.99 (H100; 1.05 H200), with
// 8192 even; 512 against 1024 columns (4 shares) with K = 8192 1.06× the split 64×128 tiles, 256
// against 2048–2560 (4 and 3 shares) 1.04–1.10×; at 128 k-tiles in 2 shares or unequal ones (256
// rows against 3072–5120 columns) 0.96–0.996 (H100 and H200, session 44). 512 rows against 2560
// columns (40 pair turns: no equal shares) lost (0.85–0.98). Where the turns split in 3 shares,
// from kMediumStreamKThreeSharesMinKTiles (shares of about 29 k-tiles), and so also on one row of
// 128×128 tiles (two rows of 64-row tiles, unpaired) in 3 shares: 256 rows against 2560 columns
// and 128 against 5120, where the paired 64×128 tiles fill only part of one round (session 46);
// one row in 2 shares lost to the paired 64×128 tiles, in 4 to the dealt ones (kSmallDealt).
constexpr int64_t kMediumStreamKMinKTiles = 160;
constexpr int64_t kMediumStreamKManySharesMinKTiles = 128;
constexpr int64_t kMediumStreamKThreeSharesMinKTiles = 88;
constexpr int64_t kMediumStreamKOneRowNarrowRows = 2;
constexpr int64_t kMediumStreamKThreeShares = 3;
constexpr int64_t kMediumStreamKNarrowRows = 4;
constexpr int64_t kMediumStreamKEvenNarrowRows = 8;
constexpr int64_t kMediumStreamKMinTiles = 32;
constexpr int64_t kMediumStreamKMaxWaveEighths = 5;
// Two-consumer tiles in an odd number of tile rows pair along M with one block of the last pair
// past M: a quarter of the blocks idle at 3 rows, which costs more than sharing B saves
// (unpaired, against paired, at 320 and 384 rows: 128×128 0.98–1.58×, 128×192 1.03–1.23×,
// 128×256 1.03–1.22× at 384 rows and 0.91–1.07× at 320), and on 128×128 tiles up to 7 rows
// (1.01–1.61× at 640 rows, 1.03–1.09× at 896; wider tiles there mixed, 0.91–1.10). 16-bit only
// (tf32 not measured); not for a forced tile shape, so that tune_plan can still time both. H100,
// tune_plan, session 30; the H200 agrees at 384 rows.
constexpr int64_t kOddRowsUnpairedMax = 3;
constexpr int64_t kOddRowsUnpairedMaxMedium = 7;
// Clusters of 4 and 8 blocks (one a SM) resident at once: fewer than sms / size, the GPCs' SM
// counts not being multiples of the size (an H100: 30 and 15 of 132 SMs, benchmarks/NOTES.md). A
// split whose clusters outnumber them runs a second wave, so the plan counts on 7/8 of sms / size.
constexpr int64_t kResidentEighths = 7;

int64_t resident_split_clusters(int64_t sms, int split) {
  return split == 2 ? sms / 2 : sms / split * kResidentEighths / 8;
}

// The slices of K one-consumer tiles split in (1: none): doubling up to max_slices while the tiles
// stay within one wave of clusters of that size and each slice keeps min_k_tiles k-tiles.
int split_slices(int64_t tiles, int64_t k_tiles, int64_t sms, int64_t min_k_tiles,
                 int max_slices) {
  int split = 1;
  while (split < max_slices && tiles <= resident_split_clusters(sms, split * 2) &&
         k_tiles >= split * 2 * min_k_tiles) {
    split *= 2;
  }
  return split;
}

// Where tf32's 64×256 tiles split in a whole cluster of 8 slices still leave most SMs idle and K
// is long (kSplitGroupsMinKTiles), 2, 4 or 8 clusters share each tile (Shape::split_groups),
// doubling while the clusters fit in one wave and K holds kSplitGroupMinKTiles k-tiles for each
// of the 8 × groups slices (the kernel's slices are K's k-tiles over them, rounded up: the last
// may be shorter or empty). Few blocks cannot draw HBM's bandwidth for a long slice of B each.
// The bound was 256 k-tiles while a memset preceded the launch; without it, 2 clusters a tile
// won from 128 k-tiles (1 to 4 tiles at 32–256 rows) and were even to slower below (NOTES,
// session 46). 16-bit 64×128 tiles were slower in every case tried: their blocks' share of B is
// short already. tf32's 64×128 tiles under the 16-bit rules take them: 32–128 rows against 256
// columns with K = 5120–8192 (2 and 4 tiles, 2 clusters each) ran 0.94–1.0 of torch against
// 0.85–0.91 in one cluster (5 forwards, H200, session 59). Forced (TORCH_GEMM_WGMMA_SHAPE=1x8xNxG),
// 16-bit tiles take them too.
constexpr int64_t kSplitGroupsMinKTiles = 128;
constexpr int64_t kSplitGroupMinKTiles = 8;

int split_groups_of(int64_t tiles, int64_t k_tiles, int64_t sms) {
  static_assert(F::kMaxSmallSlices == F::kMaxNarrowSlices, "one cluster size for both splits");
  const int cluster = F::kMaxNarrowSlices;
  int groups = 1;
  if (k_tiles < kSplitGroupsMinKTiles) return groups;
  while (groups < F::kMaxSplitGroups &&
         tiles * groups * 2 <= resident_split_clusters(sms, cluster) &&
         k_tiles >= int64_t{cluster} * groups * 2 * kSplitGroupMinKTiles) {
    groups *= 2;
  }
  return groups;
}

// tf32 under its own rules (choose_shape: A read MN-major) takes no 128-column tiles: where its
// 64×256 tiles leave most SMs idle, each is split along K like the 16-bit 64×128 ones, in 2, 4 or
// 8 slices as fit in one wave of clusters with at least this many k-tiles (of 32 floats) each. Without it, 128 rows
// against 256 columns ran on 2 SMs at 0.17 of torch (H100, tf32 grid, session 31).
constexpr int64_t kNarrowSplitMinKTiles = 8;

// Stream-K's clusters: the resident ones, or fewer where each dealt turn's k-tiles then split in
// kMinShares to max_shares equal shares (the dealt turns dividing the clusters; kMaxShares but for
// tf32's kWideStreamK plans, Shape::stream_k_max_shares). Every tile is
// then cut at the same K offsets, so the pieces running at once read the same k-tiles of A's rows
// and B's columns, which L2 holds for the other tiles; shares cut at scattered offsets lose that.
// 512×2560×28672 in tf32 over every turn of 128×256 tiles ran 254 µs on 120 blocks (3 a tile) and
// 418–545 µs on 124 to 132; 2048×2560×28672's 14 last pair turns on 66 pairs 857 µs, its 16 on 64
// 757, 20 on 60 782: the scattered dealt turns cost about 1 + kScatteredExtraTenths / 10 times
// their share, and the fewer clusters are taken where their rounds (turns / clusters) cost less.
// On the 124 forwards of the models grid whose grid this changed (H100, bf16 and tf32, session
// 32): 2 to 4 shares a turn 1.016–1.09× faster by group, 1 share (whole tiles on fewer clusters)
// 0.92×, 29 and 57 shares (one or two turns dealt in slivers, each a partial sum to add) 0.67–0.80×
// (benchmarks/NOTES.md). `all`: every turn is dealt (Shape::stream_k_all), else the turns past whole
// rounds of the clusters.
constexpr int64_t kScatteredExtraTenths = 7;
constexpr int64_t kMinShares = 2;
constexpr int64_t kMaxShares = kStreamKMaxShares;

// The K (in k-tiles) kMediumStreamK's 128×128 tiles need, by the equal shares their dealt turns
// split in (0: unequal ones).
int64_t medium_stream_k_min_k_tiles(int64_t shares) {
  if (shares == kMediumStreamKThreeShares) return kMediumStreamKThreeSharesMinKTiles;
  return shares > kMinShares ? kMediumStreamKManySharesMinKTiles : kMediumStreamKMinKTiles;
}

int64_t equal_share_clusters(int64_t turns, int64_t slots, bool all, int64_t max_shares) {
  const int64_t scattered = all ? turns : turns % slots;
  if (scattered == 0 || (scattered <= slots && slots % scattered == 0)) return slots;
  // The most clusters below slots whose dealt turns divide them in kMinShares to max_shares
  // shares (every turn dealt: the largest such multiple of the turns, found directly).
  int64_t c = 0;
  if (all) {
    const int64_t shares = std::min((slots - 1) / turns, max_shares);
    c = shares >= kMinShares && turns * shares * max_shares >= slots ? turns * shares : 0;
  } else {
    for (int64_t d = slots - 1; d * max_shares >= slots && c == 0; --d) {
      const int64_t dealt = turns % d;
      if (dealt != 0 && d % dealt == 0 && d / dealt >= kMinShares && d / dealt <= max_shares) c = d;
    }
  }
  // Taken only if its rounds cost less.
  if (c == 0 || turns * slots * 10 >= (turns * 10 + kScatteredExtraTenths * scattered) * c) {
    return slots;
  }
  return c;
}

// Whether plan_grid may take fewer clusters for equal shares: not under a forced cluster count
// (TORCH_GEMM_WGMMA_MAX_CLUSTERS) nor in stream-K's one-round-more mode, which keep them all.
bool equal_shares_allowed(const Overrides& o) {
  return o.max_clusters == INT_MAX && o.stream_k != 2;
}

// tf32 products of more than 192 rows whose 128×256 tiles would leave more than half the SMs
// idle (which otherwise take 64×256 ones, split or not) take the 128×256 tiles with every turn
// dealt out as k-tiles, where the turns split in kMinShares to kMaxShares equal shares
// (equal_share_clusters) of at least this many k-tiles each: for as many multiply-adds or fewer, a
// block then reads 0.3–0.6 of the operand bytes a 64×256 tile's block reads (4 to 2 shares).
// Measured on the 123 weights of the models grid at 128 to 1024 rows (H100, session 33): the 100
// products it takes 1.17× faster (geomean; 0.99–1.69), e.g. 512×2560×14336 1.60×; 256–512 rows
// from 0.887 and 0.897 of torch to 0.934 and 0.959. At 128 rows (one row of 128-row tiles) mixed,
// 0.84–1.19; with shares of 32 k-tiles 0.95–1.06, of 16–24 0.80–0.96.
constexpr int64_t kTf32DealtMinNarrowRows = 4;
constexpr int64_t kTf32DealtMinShareKTiles = 40;
// One row of 128-row tiles (128 rows; one matrix), whose 64×256 tiles read B once a 64-row tile
// (from L2 twice where split, unpaired; into both blocks' shared memory where paired), takes them
// too in kTf32DealtOneRowMinShares to kMaxShares shares of kTf32DealtMinShareKTiles; past 192
// rows, 3 shares of one matrix need only kTf32DealtThreeSharesMinShareKTiles each (the shortest
// measured: 80 k-tiles in 3). Measured (H200, session 53,
// forced against the plan over the 79 worst tf32 forwards at 128–512 rows): at 128 rows 4 shares
// of 48–217 k-tiles 1.04–1.30×, 3 of 43–85 1.08–1.18×, 4 of 24 0.89×, 2 of 40–48 0.97–0.98×; past
// 192 rows 3 shares of 27–32 k-tiles 1.14–1.20×, 4 of 16 0.86×.
constexpr int64_t kTf32DealtOneRowNarrowRows = 2;
constexpr int64_t kTf32DealtOneRowMinShares = 3;
constexpr int64_t kTf32DealtThreeShares = 3;
constexpr int64_t kTf32DealtThreeSharesMinShareKTiles = 26;
// And in up to kTf32DealtMaxShares shares, from 128 rows, where the 64×256 tiles' blocks (split or
// not) would fill at most half the SMs, with K's kTf32DealtManySharesMinKTiles or more: 16 turns
// of 128×256 tiles (256 rows against 2048 columns, 128 against 4096, 512 against 1024), whose
// 64×256 tiles split only in two (64 blocks), in 8 shares on 128 blocks 1.07–1.76× faster than
// those at 160 to 896 k-tiles, 0.91–1.05 at 128 (H200, session 33). equal_share_clusters' cost
// rule leaves out the 8 turns of 256 rows against 1024 columns in 8 shares on 64 blocks (0.59–0.89
// of the 64×256 tiles split in 4); 12 turns at 128 rows, whose 64×256 tiles split in 4 fill 96
// SMs, keep them (in 8 shares on 96 blocks 0.73–1.16). Not measured below 128 rows.
constexpr int64_t kTf32DealtMaxShares = 8;
constexpr int64_t kTf32DealtManySharesMinKTiles = 160;
// tf32 following the 16-bit rules (choose_shape) keeps its own dealt 128×256 tiles (kWideStreamK)
// from this many k-tiles (K of 11008 and more) where the 16-bit rules would pair whole 64×128
// tiles or deal out paired 128×128 ones: there those ran slower than the 128×256 ones on most of
// the 128–512-token forwards of the H200 tf32 grid, and faster below it (session 54).
constexpr int64_t kTf32OwnDealtMinKTiles = 344;

// Which of kMediumSplitTall's row rules (above) lets a product of wide_m rows of 128-row tiles and
// `medium` 128×128 tiles take it, or kNone; the rule and its explanation both ask here.
enum class MediumSplitRows { kNone, kTall, kTf32, kTwoRows, kOneRow };
MediumSplitRows medium_split_rows(int64_t wide_m, int64_t medium, int64_t k_tiles,
                                  bool tf32_sixteen_bit_plan) {
  if (wide_m >= kMediumSplitTallMinRows) return MediumSplitRows::kTall;
  if (tf32_sixteen_bit_plan) {
    return k_tiles < kTf32OwnDealtMinKTiles ? MediumSplitRows::kTf32 : MediumSplitRows::kNone;
  }
  if (wide_m == 2) return MediumSplitRows::kTwoRows;
  return wide_m == 1 && medium <= kMediumSplitOneRowMaxTiles ? MediumSplitRows::kOneRow
                                                             : MediumSplitRows::kNone;
}
// And, with few rows, its own 64×256 tiles split along K where the 16-bit rules would take as many
// blocks of 64×128 ones: split in 2 against whole 64×128 tiles up to kTf32OwnSplitTwoMaxRows rows,
// split in 4 against 64×128 ones split in 2 up to kTf32OwnSplitFourMaxRows rows with K of
// kTf32OwnSplitFourMinKTiles or more. In one run of the H200 tf32 grid's 4–64-token forwards
// under both rule sets, tf32's own took 0.91 / 0.93 / 0.96 of the 16-bit rules' time at 4 / 8 / 16
// rows and 1.00 at 32–64 (the first pair), 0.89–0.93 at 4–16 rows and 0.97 at 32 with K of
// 11008 or more, but 1.04 with K of 8192 or less and 1.00 at 64 rows (the second); a 64×256 tile
// reads A once a k-tile for twice the columns (session 55).
constexpr int64_t kTf32OwnSplitTwoMaxRows = 16;
constexpr int64_t kTf32OwnSplitFourMaxRows = 32;
constexpr int64_t kTf32OwnSplitFourMinKTiles = 344;

// 16-bit products of an even number of 128-row tile rows (more than 192 rows: a pair's second tile
// more than half full) whose 128×256 tiles would leave half the SMs idle (so that the plan takes
// 64×128 or 128×128 tiles), with K of kWideDealtMinKTiles or more, take the 128×256 tiles in pairs
// with every turn dealt out, where the turns split in kWideDealtMinShares to kMaxShares equal
// shares on at least kWideDealtMinWaveEighths of the SMs, but not in place of 128×128 tiles that
// the plan deals out in equal shares already (kMediumStreamK). A 128×256 pair reads a half to a
// third of the operand bytes of 64×128 or 128×128 tiles for as many multiply-adds, but a dealt tile
// has a fixed cost that only a long K hides: at 256 rows, 8 shares ran 11–13 µs longer than 128×128
// tiles in 4 (the last share adding the others' 128 KB partial sums alone may be part of it;
// benchmarks/NOTES.md). Measured on the 301 grid products (bf16; fwd, dx, dw) a broader rule took
// (2 to 8 shares, 80 k-tiles or more; H100, session 35): 512 rows against 2048 columns (4 shares;
// 64×128 pairs before) 1.01–1.28× from K = 11008, 512 × 2560 (3 shares on 120 blocks; 80 blocks of
// 128×128 before) 1.08–1.24×, 256 × 5120 (3 shares; 128×128 dealt unevenly before) 1.01–1.11×; with
// K = 8192 0.86–1.03; in 2 shares (1024 × 2048) 0.94–1.12; in 5 to 8 shares (256 rows against
// 2048–3072 columns) 0.74–0.90, in 4 replacing 128×128 tiles dealt in 2 equal shares (256 × 4096)
// 0.88–0.96, and on one tile row (128 × 8192, unpaired) 0.84–0.96.
constexpr int64_t kWideDealtMinNarrowRows = 4;  // more than 192 rows
constexpr int64_t kWideDealtMinKTiles = 160;
constexpr int64_t kWideDealtMinShares = 3;
constexpr int64_t kWideDealtMinWaveEighths = 7;

// 16-bit products of 2 to 8 rows of 64-row tiles (an even number) whose 64×128 tiles the plan
// splits along K or leaves few take those tiles paired (one consumer each) with every turn dealt
// out, where the pair turns split in kMinShares to kMaxShares equal shares of at least
// kSmallDealtMinShareKTiles k-tiles each (kSmallDealtManySharesMinShareKTiles for 3 or 4), on at
// least kSmallDealtMinWaveEighths of the SMs, and the plan does not deal out 128×128 tiles instead:
// a pair reads 8 KB of operands from L2 a 64×64×64 step, as cuBLAS's few-hundred-row kernels do,
// where a split tile's block reads 12 (benchmarks/NOTES.md, session 43). A dealt tile's fixed
// cost (its partial sums' store, wait and read) is what the shorter reads must repay: shorter
// shares, more of them, or fewer than 5/8 of the SMs busy lost to the split tiles on the H100 and
// H200 sweeps of sessions 44 and 45 (benchmarks/NOTES.md), at the bounds here.
constexpr int64_t kSmallDealtMinNarrowRows = 2;
constexpr int64_t kSmallDealtMaxNarrowRows = 8;
constexpr int64_t kSmallDealtMinShareKTiles = 20;
constexpr int64_t kSmallDealtManySharesMinShareKTiles = 22;
constexpr int64_t kSmallDealtMinWaveEighths = 5;
// Where the plan splits two rows of 128×128 tiles in 4 instead (a long K: kMediumSplitMinKTiles),
// the dealt pairs take their place only in 3 or 4 shares: 128 rows against 2048 and 2560 columns
// with K of 216–448 k-tiles ran faster dealt; against 3072 (2 shares) either way (H200,
// session 46).
constexpr int64_t kSmallDealtOverMediumSplitMinShares = 3;

// Row sums are fused where the tile columns give at least this many slices of K: a tile's slice
// then moves at most 1/8 of the bytes of A its product reads, which two warps' loads keep up with.
// Otherwise row_sum_slices_kernel takes them before the product, in slices enough for about
// kRowSumBlocks blocks (at most kMaxSlices: its grid.y).
constexpr int64_t kMinFusedSlices = 8;
constexpr int64_t kRowSumBlocks = 2048;
constexpr int64_t kMaxSlices = 65535;

// Stream-K costs about as much as 20 k-tiles of 128×256 (a partial's store, its finisher's wait
// and read): it pays where each cluster of the last round would otherwise idle for more than
// this many k-tiles (benchmarks/NOTES.md).
constexpr int64_t kStreamKMinSaved = 32;

int64_t k_tile_elements(const GemmParams& p) { return F::kKTileBytes / dtype_size(p.dtype); }

bool sixteen_bit(const GemmParams& p) {
  return p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat16;
}

// Split K and 128-column tiles: 16-bit products without fused row sums (whose slices follow
// 256-column tiles).
bool can_split(const GemmParams& p) { return p.dtype != DType::kFloat32 && p.row_sum == nullptr; }

// tf32's own split: 64×256 tiles, not 3xTF32's promoted ones, without row sums.
bool tf32_can_split(const GemmParams& p) {
  return p.dtype == DType::kFloat32 && !p.tf32_promoted && p.row_sum == nullptr;
}

WgmmaPlan plan_wgmma(const GemmParams& p);

// Whether plan_wgmma reads both operands K-major (repacked or not): a linear's input and weight
// in its forward.
bool reads_both_k_major(const GemmParams& p) {
  const WgmmaPlan plan = plan_wgmma(p);
  return plan.a.k_major && plan.b.k_major;
}

// Slim tiles: 16-bit products without row sums read both K-major.
bool can_take_slim(const GemmParams& p) { return can_split(p) && reads_both_k_major(p); }

// Forced slim tiles (TORCH_GEMM_WGMMA_SHAPE=2x1x80, 2x1x96, 2x1x160): can_take_slim's, and tf32's
// (without row sums) 128×160 where both operands are read K-major.
bool takes_forced_slim(const GemmParams& p, int block_n) {
  return can_take_slim(p) || (tf32_can_split(p) && block_n == kWgmmaSlimBlockN160 &&
                              reads_both_k_major(p));
}

// The overrides as they apply to p: 1xS (64×256 tiles in S slices of K) is tf32's alone, slim
// tiles (2x1x80, 2x1x96, 2x1x160) are takes_forced_slim's, and 64×128, 128×128 (split or not) and
// 64×64 tiles (1xSx128, 2xSx128, 1x1x64) those of 16-bit and tf32 products without row sums
// (3xTF32's inner product takes the 128-column ones as its consumers); for other products they
// are ignored, as an invalid shape is. tf32 has no 128×256 tiles split in two: 2x2 runs them
// whole.
Overrides effective_overrides(const GemmParams& p, const Overrides& given) {
  Overrides o = given;
  const bool tf32 = tf32_can_split(p);
  if (o.consumers == 1 && o.block_n == kWgmmaBlockN && o.split_k > 1 && !tf32) {
    o.consumers = 0, o.split_k = 0, o.split_groups = 1;
  }
  if (o.consumers == 2 && o.block_n == kWgmmaBlockN && tf32) o.split_k = 1;
  // 3xTF32's promoted tiles are 128 columns wide: its inner product takes 1xSx128 and 2xSx128 as
  // their consumers (choose_shape).
  const bool tiles_128_or_64 =
      (o.block_n == kWgmmaSmallBlockN && !p.tf32_promoted) || o.block_n == kWgmmaTinyBlockN;
  if ((is_slim_block_n(o.block_n) && !takes_forced_slim(p, o.block_n)) ||
      (tiles_128_or_64 && !can_split(p) && !tf32)) {
    o.consumers = 0, o.split_k = 0, o.block_n = static_cast<int>(kWgmmaBlockN);
    o.split_groups = 1;
  }
  return o;
}

RowSumPlan plan_row_sum(const GemmParams& p) {
  RowSumPlan plan;
  if (p.row_sum == nullptr) return plan;
  const int64_t tiles_n = ceil_div(p.N, kWgmmaBlockN);
  const int64_t row_blocks = ceil_div(p.M, F::kRowSumWarps * F::kRowSumRowsPerWarp) * p.batch;
  plan.fused = tiles_n >= kMinFusedSlices && p.dtype != DType::kFloat32;  // 16-bit: see the kernel
  int64_t wanted = plan.fused ? tiles_n : ceil_div(kRowSumBlocks, std::max<int64_t>(row_blocks, 1));
  wanted = std::min({wanted, std::max<int64_t>(ceil_div(p.K, F::kRowSumSliceAlign), 1), kMaxSlices});
  plan.piece_k = round_up(ceil_div(std::max<int64_t>(p.K, 1), wanted), F::kRowSumSliceAlign);
  plan.slices = ceil_div(p.K, plan.piece_k);
  plan.partials_bytes =
      round_up(plan.slices * p.batch * p.M * int64_t{sizeof(float)}, F::kWorkspaceAlignBytes);
  return plan;
}

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
  if (p.tf32_promoted) {
    // 3xTF32's split rows hold two of the product's three K-segments (plan_3xtf32): the tensor
    // maps span those, and the producer maps each phase's k-tiles into them.
    plan.a.extent_k = plan.b.extent_k = 2 * (p.K / 3);
  }
  plan.b.workspace_offset = plan.a.workspace_bytes;
  plan.row_sum.partials_offset = plan.b.workspace_offset + plan.b.workspace_bytes;
  plan.workspace_bytes = plan.row_sum.partials_offset + plan.row_sum.partials_bytes;
  return plan;
}

// Partial sums of `floats` floats and `flags` flags after the rest of the workspace, each part
// aligned: stream-K's or a split tile's clusters' (the kernel reads them as sk_partials, sk_flags).
void reserve_partials(int64_t floats, int64_t flags, WgmmaPlan* plan) {
  plan->stream_k_offset = plan->workspace_bytes;
  plan->stream_k_flags_offset =
      plan->stream_k_offset + round_up(floats * int64_t{sizeof(float)}, F::kWorkspaceAlignBytes);
  plan->workspace_bytes =
      plan->stream_k_flags_offset +
      round_up(flags * int64_t{sizeof(unsigned long long)}, F::kWorkspaceAlignBytes);
  plan->stream_k_bytes = plan->workspace_bytes - plan->stream_k_offset;
}

// Stream-K's workspace, where the launch may use it (plan_grid): 128×256 tiles (16-bit or tf32,
// not 3xTF32's promoted ones), unsplit, without fused row sums, more of them than clusters can be
// resident; or every turn dealt out (Shape::stream_k_all). A partial sum per block (the tile's
// floats; at most one block per SM) and a flag per consumer.
void plan_stream_k(const GemmParams& p, const Shape& shape, const Overrides& o, WgmmaPlan* plan) {
  const int64_t sms = shape.sms;
  const int64_t tiles = ceil_div(p.M, kWgmmaBlockM) * ceil_div(p.N, kWgmmaBlockN) * p.batch;
  if (p.tf32_promoted) {
    plan->stream_k_rule = StreamKRule::kPromoted;
  } else if (p.row_sum != nullptr) {
    plan->stream_k_rule = StreamKRule::kRowSum;
  } else if (o.stream_k == 0) {
    plan->stream_k_rule = StreamKRule::kOff;
  } else if (shape.stream_k_all) {
    plan->stream_k_rule = StreamKRule::kOn;
  } else if (shape.consumers != 2 || shape.block_n != kWgmmaBlockN || shape.split_k != 1) {
    plan->stream_k_rule = StreamKRule::kNotWideUnsplit;
  } else if (tiles <= std::min<int64_t>(shape.clusters ? sms / 2 : sms, o.max_clusters)) {
    // Unpaired blocks are resident one a SM, so that up to sms tiles make one round; pairs are
    // counted as tiles against sms / 2 (fewer may be resident on other GPUs than an H100 SXM).
    plan->stream_k_rule = StreamKRule::kFewTiles;
  } else {
    plan->stream_k_rule = StreamKRule::kOn;
  }
  if (plan->stream_k_rule != StreamKRule::kOn) return;
  reserve_partials(sms * shape.block_m() * shape.block_n, sms * shape.consumers, plan);
}

// A split tile's clusters' partial sums, where Shape::split_groups > 1: every group's but the
// last's (each block's owned columns after its cluster's reduction: a tile's floats a group and
// tile) and a flag per block and consumer, in stream-K's place (a split product has no stream-K).
void plan_split_groups(const GemmParams& p, const Shape& shape, WgmmaPlan* plan) {
  if (shape.split_groups <= 1) return;
  const int64_t tiles = ceil_div(p.M, shape.block_m()) * ceil_div(p.N, shape.block_n) * p.batch;
  const int64_t partial_tiles = (shape.split_groups - 1) * tiles;
  reserve_partials(partial_tiles * shape.block_m() * shape.block_n,
                   partial_tiles * shape.split_k * shape.consumers, plan);
}

// How many of the last turns stream-K deals out as k-tiles, where the workspace allows it and
// the turns leave the last round of `slots` clusters idle long enough (kStreamKMinSaved); `all`
// (Shape::stream_k_all): every turn. 0: none. The walk's arithmetic (units × clusters) stays
// within int, and every cluster gets at least one unit.
int stream_k_turns(int64_t turns, int64_t slots, int64_t k_tiles, bool all, const Overrides& o,
                   StreamKRule* rule) {
  if (all) {
    const int64_t units = turns * k_tiles;
    if (units < slots || units * slots > INT_MAX) {
      *rule = StreamKRule::kTooManyUnits;
      return 0;
    }
    *rule = StreamKRule::kOn;
    return static_cast<int>(turns);
  }
  if (turns <= slots || turns % slots == 0) {
    *rule = StreamKRule::kWholeRounds;
    return 0;
  }
  const int64_t rest = turns % slots;
  const bool forced = o.max_clusters != INT_MAX;  // the tests' few clusters: stream-K always
  if (!forced && k_tiles * (slots - rest) < kStreamKMinSaved * slots) {
    *rule = StreamKRule::kSmallSaving;
    return 0;
  }
  const int64_t sk_turns = rest + (o.stream_k == 2 ? slots : 0);
  const int64_t units = sk_turns * k_tiles;
  if (units < slots || units * slots > INT_MAX) {
    *rule = StreamKRule::kTooManyUnits;
    return 0;
  }
  *rule = StreamKRule::kOn;
  return static_cast<int>(sk_turns);
}

}  // namespace

Overrides parse_overrides(const char* shape, const char* cluster, const char* stream_k,
                          const char* max_clusters, const char* store, const char* flags,
                          const char* tf32_plan) {
  Overrides o;
  int consumers = 0, split_k = 0, block_n = static_cast<int>(kWgmmaBlockN), groups = 1;
  const int fields = shape == nullptr ? 0
                                      : std::sscanf(shape, "%dx%dx%dx%d", &consumers, &split_k,
                                                    &block_n, &groups);
  const bool small = block_n == kWgmmaSmallBlockN &&
                     ((consumers == 1 && (split_k == 1 || split_k == 2 || split_k == 4 ||
                                          split_k == F::kMaxSmallSlices)) ||
                      (consumers == 2 && split_k == 1));
  const bool split = split_k == F::kSplitSlices && consumers == 2 && block_n == kWgmmaBlockN;
  const bool medium_split = consumers == 2 && block_n == kWgmmaSmallBlockN &&
                            (split_k == 2 || split_k == F::kMaxMediumSlices);
  const bool mid = block_n == kWgmmaMidBlockN && consumers == 2 && split_k == 1;
  const bool slim = is_slim_block_n(block_n) && consumers == 2 && split_k == 1;
  const bool tiny = block_n == kWgmmaTinyBlockN && consumers == 1 && split_k == 1;
  const bool narrow_split = block_n == kWgmmaBlockN && consumers == 1 &&
                            (split_k == 2 || split_k == 4 || split_k == F::kMaxNarrowSlices);
  // Groups of clusters: only on one-consumer tiles split in a whole cluster of 8.
  const bool grouped = consumers == 1 && split_k == F::kMaxSmallSlices && (small || narrow_split) &&
                       (groups == 2 || groups == 4 || groups == F::kMaxSplitGroups);
  if (fields >= 2 && (consumers == 1 || consumers == 2) &&
      (split_k == 1 || split || small || narrow_split || medium_split) &&
      (block_n == kWgmmaBlockN || small || medium_split || mid || slim || tiny) &&
      (fields < 4 || groups == 1 || grouped)) {
    o.consumers = consumers, o.split_k = split_k, o.block_n = block_n;
    o.split_groups = fields == 4 ? groups : 1;
  } else if (shape != nullptr && shape[0] != '\0') {
    o.shape_ignored = true;
  }
  o.clusters = cluster == nullptr || cluster[0] != '1';
  o.stream_k = stream_k == nullptr || stream_k[0] < '0' || stream_k[0] > '3' ? 1 : stream_k[0] - '0';
  const int n = max_clusters == nullptr ? 0 : std::atoi(max_clusters);
  o.max_clusters = n > 0 ? n : INT_MAX;
  o.tma_store = store == nullptr || std::strcmp(store, "registers") != 0;
  o.zero_flags = flags != nullptr && std::strcmp(flags, "zeroed") == 0;
  o.tf32_plan = tf32_plan == nullptr                      ? Overrides::Tf32Plan::kAuto
                : std::strcmp(tf32_plan, "own") == 0         ? Overrides::Tf32Plan::kOwn
                : std::strcmp(tf32_plan, "sixteen_bit") == 0 ? Overrides::Tf32Plan::kSixteenBit
                                                             : Overrides::Tf32Plan::kAuto;
  o.tf32_plan_ignored =
      tf32_plan != nullptr && tf32_plan[0] != '\0' && o.tf32_plan == Overrides::Tf32Plan::kAuto;
  return o;
}

namespace {

// The one-consumer 64×256 tiles where the 128×256 ones (over the batch) would not fill half the
// SMs, so that twice as many blocks work; 16-bit products take 64×128 tiles where those fit in
// one wave: twice the blocks again draw operands from L2, which bounds these shapes' loops, and
// each has half the epilogue; where even those leave half the SMs idle (a few hundred rows and
// fewer against a weight), each 64×128 tile is split along K in 2, 4 or 8 slices, as many as fit
// in one wave of clusters, so that more SMs stream a part of B. Where the 64×128 tiles are too
// many for one wave, 16-bit products of more than 64 rows take 128×128 tiles (two consumers of
// 64×128) where those fit in one wave (and so fill more than half of it), or where they make
// fewer rounds than the 128×256 tiles at kMediumTileCostTenths a tile: a few hundred to a few
// thousand rows against a weight. Where the two-consumer tiles chosen so make at most three
// rounds, 128×192 tiles take their place if they make fewer rounds at kMidTileCostTenths a tile:
// about a half to three rounds of 128×256 tiles (e.g. 1024 rows against 3072 columns: 96 tiles of
// 128×256, 128 of 128×192). Slim 128×96 and 128×80 tiles take the place of the two-consumer tile
// chosen where they make fewer rounds at their costs, and 128×160 ones that of 128×192 tiles, from
// kSlim160MinKTiles (1024 rows against 2560 columns: 128 of them against 112) (kSlimTiles).
// Neither narrower tile replaces 128×256 tiles whose last round stream-K deals out, with a K of
// kStreamKKeepsWideMinKTiles or more (tf32 under these rules: any K), but for 128×192 tiles whose
// whole rounds cost less than the 128×256 tiles' share at kStreamKWideCostTenths. 193 to 256 rows
// (65 to 128 in 3 equal shares, 449 to 512 in equal shares) with a long K and few tiles take
// 128×128 tiles with stream-K over every turn (kMediumStreamKMinKTiles); 2 or 4 rows of 128×256
// tiles fewer than half the SMs with a long K take them, paired, with every turn dealt out in 3 or 4
// equal shares where those fill 7/8 of the SMs (kWideDealtMinKTiles); 2 to 8 rows of 64×128
// tiles the plan would split take them paired with every turn dealt out, in equal shares of a long
// enough K on 5/8 of the SMs (kSmallDealtMinShareKTiles). 16-bit products of at most 64 rows never
// take half-empty 128-row tiles: 64×256 where the 64×128 ones would not fit in one wave.
// Two-consumer tiles in 3 tile rows (128×128 ones up to 7) run unpaired (kOddRowsUnpairedMax).
// tf32 under its own rules (no 128-column tiles) splits its 64×256 tiles along K likewise where
// they leave half the SMs idle (kNarrowSplitMinKTiles); past 192 rows (at 128 in 3 or 4 shares, and from 128
// where their blocks fill at most half the SMs and K is long) it takes 128×256 tiles with every
// turn dealt out instead, where the turns split in equal shares of a long enough K
// (kTf32DealtMinShareKTiles, kTf32DealtThreeSharesMinShareKTiles, kTf32DealtMaxShares).
// (Measurements: benchmarks/NOTES.md.)
// tf32_sixteen_bit_plan: a tf32 product under the 16-bit rules in place of its own
// (tf32_splittable's), but for the slim widths other than 160, 128×192 tiles below
// kTf32MidMinKTiles, and 128×192 and 128×160 tiles where stream-K would deal out the 128×256
// tiles' last round (tf32_keeps_wide).
Shape choose_tiles(const GemmParams& p, int64_t sms, const Overrides& o,
                   bool tf32_sixteen_bit_plan) {
  const bool tf32_splittable = tf32_can_split(p) && !tf32_sixteen_bit_plan;
  const bool sixteen_bit_rules = sixteen_bit(p) || tf32_sixteen_bit_plan;
  const int64_t tiles_n = ceil_div(p.N, kWgmmaBlockN);
  const int64_t wide_m = ceil_div(p.M, kWgmmaBlockM), narrow_m = ceil_div(p.M, kWgmmaNarrowBlockM);
  Shape shape;
  shape.sms = sms;
  // Tiles over the batch (fewer than C's elements: no overflow).
  shape.wide_tiles = wide_m * tiles_n * p.batch;
  shape.small_tiles = narrow_m * ceil_div(p.N, kWgmmaSmallBlockN) * p.batch;
  shape.medium_tiles = wide_m * ceil_div(p.N, kWgmmaSmallBlockN) * p.batch;
  shape.mid_tiles = wide_m * ceil_div(p.N, kWgmmaMidBlockN) * p.batch;
  shape.tiny_tiles = narrow_m * ceil_div(p.N, kWgmmaTinyBlockN) * p.batch;
  const int64_t wide = shape.wide_tiles, medium = shape.medium_tiles, mid = shape.mid_tiles;
  // 16-bit and tf32 products of at most 64 rows take 64-row tiles even where 128×256 ones would
  // fill half the SMs, up to one round of them: a 128-row tile would be half empty rows, its second
  // consumer's wgmmas and B's second pass through shared memory for nothing (64×256 measured
  // faster on an H100 and an H200 on one round, 16-bit: benchmarks/NOTES.md, session 27; tf32, 4
  // to 64 rows against 28672 columns, 1.03–1.30× on an H200: session 53; tf32 only past half a
  // round, where its 64×256 tiles would not be split). More 128×256 tiles than SMs keep them, and
  // stream-K over their last round (not measured against 64×256 tiles).
  const bool one_row = narrow_m == 1 && wide <= sms &&
                       (sixteen_bit_rules || (tf32_splittable && wide * 2 > sms));
  shape.consumers = wide < sms / 2 || one_row ? 1 : 2;
  shape.tile_rule = wide < sms / 2 ? TileRule::kNarrow
                    : one_row      ? TileRule::kOneRowNarrow
                                   : TileRule::kWide;
  const bool splittable = can_split(p) || tf32_sixteen_bit_plan;
  const int64_t k_tiles = ceil_div(p.K, k_tile_elements(p));
  const auto rounds = [sms](int64_t tiles) { return ceil_div(tiles, sms); };
  // Whether the blocks of a shape's tiles pair along M, sharing B (kPairs), and else why not.
  // With clusters each block copies (and multicasts) a part of B (half; an N-major 192-column tile
  // as 2 of its 64-column boxes and 1), so B crosses from L2 once a pair. That pays wherever a
  // block walks several tiles, and on 64-row tiles, whose B is most of the bytes copied. Where
  // every block has one two-consumer tile (one wave), it pays for a 16-bit loop of at least
  // kPairOneWaveMinKTiles, which L2's bandwidth bounds; with a shorter K, or tf32 (not measured),
  // the pair's start and its stages waiting on both blocks' copies cost more (benchmarks/NOTES.md,
  // sessions 9 and 22). In an odd number of few tile rows the last pair's second block would be
  // past M (kOddRowsUnpairedMax).
  const auto cluster_rule_of = [&](const Shape& s) {
    const int64_t two_consumer_tiles = wide_m * ceil_div(p.N, s.block_n) * p.batch;
    const bool one_short_wave = s.consumers == 2 && two_consumer_tiles <= sms &&
                                (!sixteen_bit_rules || k_tiles < kPairOneWaveMinKTiles);
    if (s.split_k != 1) return ClusterRule::kSplitK;
    if (!o.clusters) return ClusterRule::kOff;
    if ((s.consumers == 2 ? wide_m : narrow_m) < 2) return ClusterRule::kOneTileRow;
    if (one_short_wave) return ClusterRule::kOneWave;
    const int64_t odd_rows_max =
        s.block_n == kWgmmaSmallBlockN ? kOddRowsUnpairedMaxMedium : kOddRowsUnpairedMax;
    if (sixteen_bit_rules && o.consumers == 0 && s.consumers == 2 && wide_m % 2 == 1 &&
        wide_m <= odd_rows_max) {
      return ClusterRule::kOddRows;
    }
    return ClusterRule::kPairs;
  };
  // Turns (a cluster's tiles) of a shape's tiles, and the clusters that may be resident at once
  // (as plan_grid counts them, with sms / 2 resident pairs, as on an H100 SXM or H200).
  const auto turns_of = [&](const Shape& s, int64_t cluster) {
    return ceil_div(ceil_div(p.M, s.block_m()), cluster) * ceil_div(p.N, s.block_n) * p.batch;
  };
  const auto slots_of = [&](int64_t cluster) {
    return std::min<int64_t>(sms / cluster, o.max_clusters);
  };
  // Whether stream-K could deal out every turn of a shape's tiles, as plan_grid would: at least as
  // many k-tiles over the turns as clusters could be resident (else the launcher would fall back
  // to whole turns with the split given up), and within the walk's 32-bit arithmetic.
  const auto deals_every_turn = [&](const Shape& s) {
    Shape unsplit = s;
    unsplit.split_k = 1;
    const int64_t cluster = cluster_rule_of(unsplit) == ClusterRule::kPairs ? 2 : 1;
    const int64_t units = turns_of(unsplit, cluster) * k_tiles, slots = slots_of(cluster);
    return slots > 0 && units >= slots && units * slots <= INT_MAX;
  };
  // Whether 128×256 tiles (Shape's defaults), with a K of kStreamKKeepsWideMinKTiles or more,
  // would have their last round dealt out by stream-K (as plan_grid would): then the narrower
  // tiles below do not replace them (as the 16-bit rules have them; tf32's own take none).
  const int64_t wide_cluster = cluster_rule_of(Shape{}) == ClusterRule::kPairs ? 2 : 1;
  StreamKRule wide_stream_k = StreamKRule::kOff;
  const bool wide_dealt =
      o.stream_k != 0 && slots_of(wide_cluster) > 0 &&
      stream_k_turns(turns_of(Shape{}, wide_cluster), slots_of(wide_cluster), k_tiles, false, o,
                     &wide_stream_k) > 0;
  const bool keep_wide = k_tiles >= kStreamKKeepsWideMinKTiles && wide >= sms / 2 && wide_dealt;
  // tf32 under the 16-bit rules takes no 128×192 or 128×160 tiles wherever stream-K would deal out
  // the 128×256 tiles' last round, whatever K: the tile the 16-bit rules chose before them stays
  // (128×256, or 128×128, whose pairs tf32's own dealt 128×256 tiles then replace: choose_shape).
  // Against the 128×256 tiles tf32 took there, its 128×192 and 128×160 ones ran 0.84–0.97× as fast
  // (512 × 11008, 1024 × 5632 and 2048 × 3072 against 128×192, 2048 × 2560 against 128×160), and
  // 1.09–1.28× where the 128×256 tiles ran without stream-K (256 × 11008, 512 × 5632–6144, 1024 ×
  // 3072 at 128×192; 512 × 5120 and 1024 × 2560 at 128×160; H200, session 55). Unpaired 128×128
  // tiles (odd tile rows, clusters off) stay so too: not measured against either.
  const bool tf32_keeps_wide = tf32_sixteen_bit_plan && wide_dealt;
  bool narrower_kept_out = false;  // 128×128 or 128×192 tiles would have been taken but for it
  if (splittable && shape.consumers == 1 && shape.small_tiles <= sms) {
    shape.block_n = static_cast<int>(kWgmmaSmallBlockN);
    shape.tile_rule = TileRule::kSmall;
    int split =
        split_slices(shape.small_tiles, k_tiles, sms, kSmallSplitMinKTiles, F::kMaxSmallSlices);
    while (narrow_m == 1 && split > 2 && shape.small_tiles > kSplitPastTwoMaxTiles &&
           k_tiles <= split * kSplitPastTwoKTiles) {
      split /= 2;
      shape.split_held_back = true;
    }
    if (split > 1) shape.split_k = split, shape.tile_rule = TileRule::kSmallSplit;
    // With two tile rows the 128×128 tiles in 4 slices are as many blocks as the 64×128 ones in
    // 2 (and fewer than in 4 or 8).
    constexpr int kMediumSlices = F::kMaxMediumSlices;
    if (split == 2 && o.consumers == 0 && narrow_m == 2 && k_tiles >= kMediumSplitMinKTiles &&
        medium <= resident_split_clusters(sms, kMediumSlices)) {
      shape.consumers = 2, shape.split_k = kMediumSlices;
      shape.tile_rule = TileRule::kMediumSplit;
    } else if (split == 1 && o.consumers == 0 &&
               medium_split_rows(wide_m, medium, k_tiles, tf32_sixteen_bit_plan) !=
                   MediumSplitRows::kNone &&
               k_tiles >= 2 * kMediumSplitTallMinSliceKTiles &&
               medium <= resident_split_clusters(sms, 2) && reads_both_k_major(p)) {
      shape.consumers = 2, shape.split_k = 2;
      shape.tile_rule = TileRule::kMediumSplitTall;
    } else if (split <= 2 && o.clusters && narrow_m >= 2 && narrow_m <= kTinyMaxNarrowRows &&
               k_tiles <= kTinyMaxKTiles && shape.tiny_tiles * 2 > sms &&
               tiny_pair_blocks(p, narrow_m) <= sms) {
      shape.block_n = static_cast<int>(kWgmmaTinyBlockN), shape.split_k = 1;
      shape.tile_rule = TileRule::kTiny;
    } else if (narrow_m == 1 && p.batch == 1 && o.stream_k != 3 &&
               shape.tiny_tiles >= kTinyOneRowMinTiles && shape.tiny_tiles <= sms &&
               k_tiles <= kTinyMaxKTiles) {
      shape.block_n = static_cast<int>(kWgmmaTinyBlockN), shape.split_k = 1;
      shape.tile_rule = TileRule::kTinyOneRow;
    }
  } else if (splittable && narrow_m >= 2) {
    const bool fewer_rounds = rounds(medium) * kMediumTileCostTenths < rounds(wide) * 10;
    if (medium <= sms || (fewer_rounds && !keep_wide)) {
      shape.consumers = 2, shape.block_n = static_cast<int>(kWgmmaSmallBlockN);
      shape.tile_rule = TileRule::kMedium;
      if (k_tiles == 1 && rounds(medium) == kOneKTileNarrowRounds) {
        shape.consumers = 1, shape.block_n = static_cast<int>(kWgmmaBlockN);
        shape.tile_rule = TileRule::kOneKTileNarrow;
      }
    } else if (fewer_rounds) {
      narrower_kept_out = true;
    }
  }
  // The two-consumer tile chosen so far, its rounds' time in hundredths of a 128×256 tile's.
  const auto chosen_cost = [&] {
    return shape.tile_rule == TileRule::kMedium ? rounds(medium) * 10 * kMediumTileCostTenths
           : shape.tile_rule == TileRule::kMid  ? rounds(mid) * 10 * kMidTileCostTenths
                                                : rounds(wide) * 100;
  };
  if (splittable && !tf32_keeps_wide && shape.consumers == 2 && shape.split_k == 1 && narrow_m >= 2 &&
      k_tiles >= (tf32_sixteen_bit_plan ? kTf32MidMinKTiles : kMidMinKTiles)) {
    if (rounds(mid) <= kMidMaxRounds && rounds(mid) * kMidTileCostTenths * 10 < chosen_cost()) {
      shape.mid_beats_stream_k =
          keep_wide && rounds(mid) * kMidTileCostTenths * sms < wide * kStreamKWideCostTenths;
      if (keep_wide && !shape.mid_beats_stream_k) {
        narrower_kept_out = true;
      } else {
        shape.block_n = static_cast<int>(kWgmmaMidBlockN);
        shape.tile_rule = TileRule::kMid;
      }
    }
  }
  // tf32 under the 16-bit rules (both operands K-major) has the slim 128×160 tiles only.
  if (o.consumers == 0 && shape.consumers == 2 && shape.split_k == 1 && wide_m >= 2 &&
      k_tiles >= kSlimMinKTiles && !keep_wide && !tf32_keeps_wide &&
      (shape.tile_rule == TileRule::kWide || shape.tile_rule == TileRule::kMedium ||
       shape.tile_rule == TileRule::kMid) &&
      (can_take_slim(p) || (tf32_sixteen_bit_plan && reads_both_k_major(p)))) {
    int64_t best = chosen_cost();
    const bool mid_chosen = shape.tile_rule == TileRule::kMid;
    const int replaced_block_n = shape.block_n;
    for (const SlimTile& t : kSlimTiles) {
      if (k_tiles < t.min_k_tiles || (t.mid_only && !mid_chosen)) continue;
      if (tf32_sixteen_bit_plan && t.width != kWgmmaSlimBlockN160) continue;
      const int64_t tiles = wide_m * ceil_div(p.N, t.width) * p.batch;
      if (rounds(tiles) * t.cost_hundredths < best) {
        best = rounds(tiles) * t.cost_hundredths;
        shape.block_n = static_cast<int>(t.width);
        shape.tile_rule = TileRule::kSlim;
        shape.slim_replaced_block_n = replaced_block_n;
      }
    }
  }
  if (tf32_splittable && shape.consumers == 1) {
    const int split = split_slices(narrow_m * tiles_n * p.batch, k_tiles, sms,
                                   kNarrowSplitMinKTiles, F::kMaxNarrowSlices);
    if (split > 1) shape.split_k = split, shape.tile_rule = TileRule::kNarrowSplit;
  }
  // Whether a shape's turns, every one dealt out, split in equal shares on the clusters counted
  // here (as equal_share_clusters would cut them; plan_grid cuts them again on the clusters
  // resident at launch); 0: not.
  const auto equal_shares = [&](const Shape& s, int64_t max_shares) -> int64_t {
    const int64_t cluster = cluster_rule_of(s) == ClusterRule::kPairs ? 2 : 1;
    const int64_t turns = turns_of(s, cluster), slots = slots_of(cluster);
    if (turns <= 0 || slots <= 0) return 0;  // an empty product (auto asks about any shape)
    const int64_t clusters = equal_share_clusters(turns, slots, true, max_shares);
    return clusters % turns == 0 ? clusters / turns : 0;
  };
  // The equal shares (min_shares to kMaxShares) in which a shape with every turn dealt out splits
  // its pair turns on at least min_wave_eighths of the SMs; 0: none (or not paired).
  const auto pairs_dealt_in_equal_shares = [&](const Shape& dealt, int64_t min_shares,
                                               int64_t min_wave_eighths) -> int64_t {
    if (cluster_rule_of(dealt) != ClusterRule::kPairs) return 0;
    const int64_t shares = equal_shares(dealt, kMaxShares);
    const int64_t blocks = shares * turns_of(dealt, 2) * 2;
    const bool taken = shares >= min_shares && shares <= kMaxShares &&
                       blocks * 8 >= sms * min_wave_eighths && deals_every_turn(dealt);
    return taken ? shares : 0;
  };
  if (tf32_splittable && shape.consumers == 1 && o.consumers == 0 && o.stream_k != 0 &&
      equal_shares_allowed(o) && p.M >= kWgmmaBlockM) {
    Shape dealt = shape;  // 128×256, two consumers, unpaired (tf32's one short wave: kOneWave)
    dealt.consumers = 2, dealt.block_n = static_cast<int>(kWgmmaBlockN), dealt.split_k = 1;
    dealt.stream_k_all = true;
    dealt.tile_rule = TileRule::kWideStreamK;
    const int64_t narrow_blocks = narrow_m * tiles_n * p.batch * shape.split_k;
    const bool many = narrow_blocks * 2 <= sms && k_tiles >= kTf32DealtManySharesMinKTiles;
    // Up to 8 shares where that is allowed, else (or where that finds none) up to 4.
    const int64_t max_shares_tried[] = {kTf32DealtMaxShares, kMaxShares};
    for (int i = many ? 0 : 1; i < 2; ++i) {
      const int64_t max_shares = max_shares_tried[i];
      const int64_t shares = equal_shares(dealt, max_shares);
      const bool rows_ok = narrow_m >= kTf32DealtMinNarrowRows ||
                           (narrow_m == kTf32DealtOneRowNarrowRows && p.batch == 1 &&
                            shares >= kTf32DealtOneRowMinShares);
      const int64_t share_k_tiles =
          narrow_m >= kTf32DealtMinNarrowRows && p.batch == 1 && shares == kTf32DealtThreeShares
              ? kTf32DealtThreeSharesMinShareKTiles
              : kTf32DealtMinShareKTiles;
      const bool few_ok = rows_ok && shares >= kMinShares && shares <= kMaxShares &&
                          k_tiles >= shares * share_k_tiles;
      const bool many_ok = many && shares > kMaxShares && shares <= kTf32DealtMaxShares;
      if ((few_ok || many_ok) && deals_every_turn(dealt)) {
        dealt.stream_k_max_shares = static_cast<int>(max_shares);
        shape = dealt;
        break;
      }
    }
  }
  shape.stream_k_keeps_wide = narrower_kept_out && shape.tile_rule == TileRule::kWide;
  Shape medium_shape = shape;
  medium_shape.consumers = 2, medium_shape.block_n = static_cast<int>(kWgmmaSmallBlockN);
  medium_shape.split_k = 1;
  // The 128×128 pair turns' equal shares, counted only where the rule could take them (the plan
  // runs on every launch).
  const bool medium_candidate =
      splittable && o.stream_k != 0 && o.consumers == 0 &&
      (narrow_m == kMediumStreamKOneRowNarrowRows || narrow_m == kMediumStreamKNarrowRows ||
       narrow_m == kMediumStreamKEvenNarrowRows) &&
      medium >= kMediumStreamKMinTiles && medium * 8 <= sms * kMediumStreamKMaxWaveEighths &&
      k_tiles >= kMediumStreamKThreeSharesMinKTiles;
  const int64_t medium_shares = medium_candidate && equal_shares_allowed(o)
                                    ? equal_shares(medium_shape, kMaxShares)
                                    : 0;
  // Two rows of 128-row tiles deal out in any shares, four need equal ones, one exactly 3.
  const bool medium_shares_ok = narrow_m == kMediumStreamKNarrowRows ||
                                (narrow_m == kMediumStreamKOneRowNarrowRows
                                     ? medium_shares == kMediumStreamKThreeShares
                                     : medium_shares >= kMinShares);
  bool medium_stream_k = medium_candidate && medium_shares_ok &&
                         k_tiles >= medium_stream_k_min_k_tiles(medium_shares) &&
                         deals_every_turn(medium_shape);
  // 16-bit: paired 128×256 tiles with every turn dealt out in equal shares where as whole tiles
  // they would leave half the SMs idle and K is long (kWideDealtMinKTiles); an even number of
  // tile rows, more than 192 rows (a pair's second tile more than half full; measured at 256 and
  // 512 rows).
  if (splittable && o.consumers == 0 && o.stream_k != 0 && equal_shares_allowed(o) &&
      narrow_m >= kWideDealtMinNarrowRows && wide_m % 2 == 0 && wide < sms / 2 &&
      k_tiles >= kWideDealtMinKTiles) {
    Shape dealt = shape;
    dealt.consumers = 2, dealt.block_n = static_cast<int>(kWgmmaBlockN);
    dealt.split_k = 1, dealt.split_groups = 1, dealt.stream_k_all = true;
    dealt.tile_rule = TileRule::kWideDealt;
    const bool medium_even = medium_stream_k && medium_shares > 0;
    if (!medium_even &&
        pairs_dealt_in_equal_shares(dealt, kWideDealtMinShares, kWideDealtMinWaveEighths) > 0) {
      shape = dealt;
      medium_stream_k = false;
    }
  }
  if (medium_stream_k) {
    shape = medium_shape;
    shape.tile_rule = TileRule::kMediumStreamK;
  }
  // 16-bit: the split (or few) 64×128 tiles of 2 to 8 tile rows paired with every turn dealt out
  // in equal shares long enough (kSmallDealtMinShareKTiles); in place of the 128×128 tiles split
  // in 4 (two tile rows, kMediumSplit) only in 3 or 4 shares (kSmallDealtOverMediumSplitMinShares).
  const bool medium_split = shape.tile_rule == TileRule::kMediumSplit;
  if (splittable && o.consumers == 0 && o.stream_k != 0 && equal_shares_allowed(o) &&
      (shape.tile_rule == TileRule::kSmallSplit || shape.tile_rule == TileRule::kSmall ||
       medium_split) &&
      narrow_m % 2 == 0 && narrow_m >= kSmallDealtMinNarrowRows &&
      narrow_m <= kSmallDealtMaxNarrowRows && k_tiles >= kMinShares * kSmallDealtMinShareKTiles) {
    Shape dealt = shape;
    dealt.consumers = 1, dealt.block_n = static_cast<int>(kWgmmaSmallBlockN);
    dealt.split_k = 1, dealt.split_groups = 1, dealt.stream_k_all = true;
    dealt.tile_rule = TileRule::kSmallDealt;
    const int64_t shares = pairs_dealt_in_equal_shares(
        dealt, medium_split ? kSmallDealtOverMediumSplitMinShares : kMinShares,
        kSmallDealtMinWaveEighths);
    const int64_t share_k_tiles =
        shares > kMinShares ? kSmallDealtManySharesMinShareKTiles : kSmallDealtMinShareKTiles;
    if (shares > 0 && k_tiles >= shares * share_k_tiles) shape = dealt;
  }
  if (p.tf32_promoted) {
    // 3xTF32's inner product: the promoted tf32 tiles are 128 columns wide; one consumer where
    // the 128×128 tiles would leave more than half the SMs idle, or 64 rows fill the tile (or as
    // forced).
    shape.block_n = static_cast<int>(kWgmmaSmallBlockN);
    shape.split_k = 1;
    shape.consumers =
        o.consumers != 0 ? o.consumers : (medium < sms / 2 || p.M <= kWgmmaNarrowBlockM ? 1 : 2);
    shape.tile_rule = TileRule::kPromoted;
  } else if (o.consumers != 0) {
    shape.consumers = o.consumers;
    shape.block_n = static_cast<int>(kWgmmaBlockN);
    shape.split_k = 1, shape.stream_k_all = false;
    // effective_overrides left only the shapes the product's kernels take.
    if (can_split(p) || tf32_can_split(p)) shape.split_k = o.split_k, shape.block_n = o.block_n;
    shape.tile_rule = TileRule::kForced;
  }
  // Stream-K over every turn where TORCH_GEMM_WGMMA_STREAM_K=3 asks: on one row of 64×128
  // tiles, where with every SM streaming a share of B it measured no faster than the split tiles
  // on 64 to 86 SMs, and slower with a short K (H100, benchmarks/NOTES.md, session 27); on any
  // 64×128 tiles a forced shape asks for (1xSx128), paired where the plan pairs them: a pair
  // reads 8 KB of A and B from L2 a 64×64×64 step, against 12 KB for the split tiles' blocks
  // (cuBLAS's few-hundred-row kernels read about 8: benchmarks/NOTES.md, session 43); on
  // 128×256 tiles (e.g. forced by TORCH_GEMM_WGMMA_SHAPE=2x1), for products of few tiles and a
  // long K, which then move a third of the operand bytes that split 64×128 tiles move; and on
  // 128×128 tiles (the plan's unsplit ones, or forced by 2x1x128), whose one partial round of a
  // few hundred rows against a weight leaves a third of the SMs idle (deals_every_turn). Without
  // it, the plan itself deals out every turn of one, two or four rows of 128×128 tiles with a
  // long K (medium_stream_k, kMediumStreamKMinKTiles), and of few 128×256 pairs with a long K
  // (kWideDealtMinKTiles).
  // In tf32 (not 3xTF32's promoted tiles), one row of 64×256 one-consumer tiles, as a few rows
  // against a weight take them (fixup-bound at 1 to 64 rows: 0.73–0.91 of torch, H100, session
  // 31), and 128×256 two-consumer tiles, for few tiles and a long K.
  const bool every_turn_tiles =
      ((narrow_m == 1 || o.consumers == 1) && shape.consumers == 1 &&
       shape.block_n == kWgmmaSmallBlockN) ||
      (shape.consumers == 2 && shape.tile_rule != TileRule::kMediumSplit &&
       shape.tile_rule != TileRule::kMediumSplitTall &&
       (shape.block_n == kWgmmaBlockN || shape.block_n == kWgmmaSmallBlockN));
  const bool tf32_every_turn_tiles =
      tf32_splittable && shape.block_n == kWgmmaBlockN &&
      (shape.consumers == 2 || (narrow_m == 1 && shape.consumers == 1));
  if (medium_stream_k ||
      (o.stream_k == 3 && !p.tf32_promoted &&
       (((can_split(p) || tf32_can_split(p)) && every_turn_tiles) || tf32_every_turn_tiles) &&
       deals_every_turn(shape))) {
    shape.split_k = 1, shape.stream_k_all = true;
    if (splittable && shape.consumers == 1 && shape.tile_rule != TileRule::kForced) {
      shape.tile_rule = TileRule::kSmallStreamK;  // 64×128
    } else if (shape.tile_rule == TileRule::kNarrowSplit) {
      shape.tile_rule = TileRule::kNarrow;  // tf32's 64×256, dealt out instead of split
    }
  }
  // A tf32 tile split in a whole cluster of slices whose clusters still leave most SMs idle, with
  // a long K: more clusters share it (kSplitGroupsMinKTiles); or as forced, but never more
  // clusters than are counted on as resident (the last group's wait on the others' sums needs
  // them launched).
  if (shape.split_k == F::kMaxSmallSlices && shape.consumers == 1) {
    const int64_t tiles = narrow_m * ceil_div(p.N, shape.block_n) * p.batch;
    if (shape.tile_rule == TileRule::kForced) {
      shape.split_groups = o.split_groups;
      while (shape.split_groups > 1 &&
             tiles * shape.split_groups > resident_split_clusters(sms, F::kMaxSmallSlices)) {
        shape.split_groups /= 2;
      }
    } else if (shape.tile_rule == TileRule::kNarrowSplit ||
               (shape.tile_rule == TileRule::kSmallSplit && tf32_sixteen_bit_plan)) {
      shape.split_groups = split_groups_of(tiles, k_tiles, sms);
    }
  }
  shape.cluster_rule = cluster_rule_of(shape);
  shape.clusters = shape.cluster_rule == ClusterRule::kPairs;
  return shape;
}

}  // namespace

// tf32 products with both operands K-major (a linear's forward) follow the 16-bit rules: a tf32
// k-tile is the same 128 bytes as a 16-bit one and takes the tensor cores as long, so the tiles
// that keep the 16-bit loops fed keep these fed too (faster than tf32's own plan over most of the
// H200 tf32 forward grid, benchmarks/NOTES.md, session 54); but where those rules pair whole
// 128×128 tiles and tf32's own plan takes 128×256 ones, the latter (tf32's 128-column tiles load
// A's fragments through registers once per 128 columns, and most such forwards ran slower on
// them), and so with a long K where tf32's own plan deals 128×256 tiles out and the 16-bit rules
// would pair 128-column ones (kTf32OwnDealtMinKTiles), and with few rows where tf32's own 64×256
// tiles split in 2 or 4 would run as many blocks as the 16-bit rules' 64×128 ones, whole or split
// in 2 (kTf32OwnSplitTwoMaxRows, kTf32OwnSplitFourMaxRows). Other layouts (A read MN-major) keep
// tf32's own rules, which were measured there.
Shape choose_shape(const GemmParams& p, int64_t sms, const Overrides& given) {
  const Overrides o = effective_overrides(p, given);
  if (!tf32_can_split(p)) return choose_tiles(p, sms, o, false);
  using Tf32Plan = Overrides::Tf32Plan;
  const bool asked = o.tf32_plan != Tf32Plan::kAuto;
  const bool sixteen_bit_rules =
      asked ? o.tf32_plan == Tf32Plan::kSixteenBit : reads_both_k_major(p);
  if (!sixteen_bit_rules) {
    Shape own = choose_tiles(p, sms, o, false);
    own.tf32_rules = Tf32Rules::kOwn;
    return own;
  }
  Shape shape = choose_tiles(p, sms, o, true);
  shape.tf32_rules = Tf32Rules::kSixteenBit;
  if (asked) return shape;
  // tf32's own plan is asked for only where an exception could take it: pairs of 128-column tiles,
  // and 64×128 tiles whole or split in 2 with few rows.
  const int64_t k_tiles = ceil_div(p.K, k_tile_elements(p));
  const bool few_rows_narrow =
      !shape.clusters && shape.consumers == 1 && shape.block_n == kWgmmaSmallBlockN &&
      ((shape.split_k == 1 && p.M <= kTf32OwnSplitTwoMaxRows) ||
       (shape.split_k == 2 && p.M <= kTf32OwnSplitFourMaxRows && k_tiles >= kTf32OwnSplitFourMinKTiles));
  if (few_rows_narrow) {
    Shape own = choose_tiles(p, sms, o, false);
    if (own.tile_rule == TileRule::kNarrowSplit && own.split_groups == 1 && own.split_k == 2 * shape.split_k) {
      own.tf32_rules = Tf32Rules::kOwnSplitOverNarrow;
      return own;
    }
    return shape;
  }
  const bool medium_pairs = shape.tile_rule == TileRule::kMedium;
  const bool long_pairs =
      (shape.tile_rule == TileRule::kSmall || shape.tile_rule == TileRule::kMediumStreamK) &&
      k_tiles >= kTf32OwnDealtMinKTiles;
  if (!shape.clusters || !(medium_pairs || long_pairs)) return shape;
  Shape own = choose_tiles(p, sms, o, false);
  if (medium_pairs && own.consumers == 2 && own.block_n == kWgmmaBlockN) {
    own.tf32_rules = Tf32Rules::kOwnOverMediumPairs;
    return own;
  }
  if (long_pairs && own.tile_rule == TileRule::kWideStreamK) {
    own.tf32_rules = Tf32Rules::kOwnDealtOverPairs;
    return own;
  }
  return shape;
}

bool tma_stride_ok(int64_t stride, int64_t extent, int64_t element_bytes) {
  return extent <= 1 || (stride > 0 && stride * element_bytes % F::kTmaAlignBytes == 0);
}

bool tma_aligned(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % F::kTmaAlignBytes == 0;
}

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
    const int64_t ld = round_up(std::max<int64_t>(inner, 1), F::kTmaAlignBytes / element_bytes);
    plan.workspace_bytes = round_up(batch * outer * ld * element_bytes, F::kWorkspaceAlignBytes);
    plan.stride_x = plan.k_major ? ld : 1;
    plan.stride_k = plan.k_major ? 1 : ld;
    plan.stride_batch = outer * ld;
  }
  return plan;
}

GemmParams transposed_problem(const GemmParams& p) {
  GemmParams t = p;
  t.M = p.N, t.N = p.M;
  t.a = p.b, t.a_stride_m = p.b_stride_n, t.a_stride_k = p.b_stride_k;
  t.b = p.a, t.b_stride_n = p.a_stride_m, t.b_stride_k = p.a_stride_k;
  t.a_stride_batch = p.b_stride_batch, t.b_stride_batch = p.a_stride_batch;
  t.c_stride_m = p.c_stride_n, t.c_stride_n = p.c_stride_m;
  return t;
}

// Where B is N-major (NN), which the tf32 wgmma cannot read, the transposed product needs less
// repacking — in NN none, Bᵀ being an MN-major A (read through registers) and Aᵀ a K-major B —
// than transposing B into the workspace first. Where TMA can store the caller's C, the epilogue
// then fills its boxes transposed and stores them into it (WgmmaParams::c_transposed); else C
// leaves from registers. Not with a bias or row sums, which belong to C's columns and A's rows.
bool runs_transposed(const GemmParams& p) {
  if (p.dtype != DType::kFloat32 || p.bias != nullptr || p.row_sum != nullptr ||
      p.tf32_promoted) {
    return false;
  }
  return plan_wgmma(transposed_problem(p)).workspace_bytes < plan_wgmma(p).workspace_bytes;
}

bool tma_store_ok(const GemmParams& p) {
  const int64_t e = dtype_size(p.dtype);
  return tma_aligned(p.c) && (p.c_stride_n == 1 || p.N <= 1) &&
         tma_stride_ok(p.c_stride_m, p.M, e) && tma_stride_ok(p.c_stride_batch, p.batch, e);
}

WgmmaPlan plan_product(const GemmParams& p, const Shape& shape, const Overrides& o) {
  WgmmaPlan plan = plan_wgmma(p);
  plan_stream_k(p, shape, o, &plan);
  plan_split_groups(p, shape, &plan);
  return plan;
}

constexpr int64_t kTf32KTile = F::kKTileBytes / int64_t{sizeof(float)};  // floats a k-tile

int64_t three_tf32_segment(int64_t K) { return round_up(K, kTf32KTile); }

int64_t three_tf32_chunk_k(int64_t K, int64_t chunks) {
  return chunks > 1 ? round_up(ceil_div(K, chunks), kTf32KTile) : K;
}

int64_t three_tf32_chunks(const GemmParams& p) {
  if (p.batch != 1 || p.sm_count <= 0 || p.M <= 0 || p.N <= 0 || p.K < 2 * kThreeTf32MinChunkK) {
    return 1;
  }
  const int64_t sms = p.sm_count;
  int64_t best = 1;
  double best_cost = 0.0;
  for (int64_t chunks = 1; chunks <= kThreeTf32MaxChunks; ++chunks) {
    const int64_t chunk_k = three_tf32_chunk_k(p.K, chunks);
    if (chunks > 1 && ceil_div(p.K, chunks) < kThreeTf32MinChunkK) break;
    if (chunks > 1 && ceil_div(p.K, chunk_k) != chunks) continue;  // whole k-tiles leave one empty
    GemmParams q = p;
    q.batch = chunks, q.K = 3 * three_tf32_segment(chunk_k), q.tf32_promoted = true;
    const Shape shape = choose_shape(q, sms, Overrides{});
    const int64_t tiles =
        ceil_div(p.M, int64_t{shape.block_m()}) * ceil_div(p.N, int64_t{shape.block_n}) * chunks;
    // The time in k-tiles of a 128-row tile on every SM: rounds of tiles times a tile's k-tiles,
    // a 64-row tile's taking half as long; then the partials, written and read, and C.
    // In double: the products overflow int64 for shapes past any allocation (explain on meta).
    double cost = static_cast<double>(ceil_div(tiles, sms)) * static_cast<double>(q.K / kTf32KTile) *
                  shape.block_m() / kWgmmaBlockM;
    if (chunks > 1) {
      cost += static_cast<double>(2 * chunks + 1) * static_cast<double>(p.M) * static_cast<double>(p.N) *
              sizeof(float) / kThreeTf32PartialBytesPerKTileRound;
    }
    if (chunks == 1 || cost * kThreeTf32GainDenominator <
                           best_cost * (kThreeTf32GainDenominator - kThreeTf32GainNumerator)) {
      best = chunks, best_cost = cost;
    }
  }
  return best;
}

ThreeTf32Plan plan_3xtf32(const GemmParams& p, char* base) {
  ThreeTf32Plan plan;
  plan.chunks = three_tf32_chunks(p);
  plan.chunk_k = three_tf32_chunk_k(p.K, plan.chunks);
  plan.segment = three_tf32_segment(plan.chunk_k);
  plan.ld = std::max<int64_t>(2 * plan.segment, F::kTmaAlignBytes / int64_t{sizeof(float)});
  const int64_t row_bytes = plan.ld * int64_t{sizeof(float)};
  const int64_t products = p.batch * plan.chunks;
  plan.a_bytes = round_up(products * p.M * row_bytes, F::kWorkspaceAlignBytes);
  plan.b_bytes = round_up(products * p.N * row_bytes, F::kWorkspaceAlignBytes);
  plan.partials_bytes = plan.chunks > 1 ? round_up(plan.chunks * p.M * p.N * int64_t{sizeof(float)},
                                                   F::kWorkspaceAlignBytes)
                                        : 0;
  GemmParams& q = plan.inner;
  q = p;
  q.batch = products;
  q.K = 3 * plan.segment;
  q.a = base, q.a_stride_m = plan.ld, q.a_stride_k = 1;
  q.a_stride_batch = products > 1 ? p.M * plan.ld : 0;
  q.b = base + plan.a_bytes, q.b_stride_n = plan.ld, q.b_stride_k = 1;
  q.b_stride_batch = products > 1 ? p.N * plan.ld : 0;
  if (plan.chunks > 1) {
    // The chunks' partial products, dense; the bias joins their sum (three_tf32.cu).
    q.c = base + plan.a_bytes + plan.b_bytes;
    q.c_stride_m = p.N, q.c_stride_n = 1, q.c_stride_batch = p.M * p.N;
    q.bias = nullptr, q.bias_stride = 0;
  }
  q.row_sum = nullptr;  // not a fused kernel: the op sums A's rows itself
  q.tf32_promoted = true;
  q.workspace = base + plan.own_bytes();
  q.workspace_bytes = std::max<int64_t>(p.workspace_bytes - plan.own_bytes(), 0);
  return plan;
}

namespace {

// A transposed box spans kWgmmaNarrowBlockM (64) of the product's columns: a tile's K slices each
// own whole ones up to 4 slices of 256 columns; 8 slices own 32 columns, which leave from registers.
// A tf32 128×192 tile's ring holds one box a consumer, half a column of transposed boxes (its C
// leaves from registers), and a slim tile's C always does.
bool owns_transposed_boxes(const Shape& s) {
  return s.block_n != kWgmmaMidBlockN && !is_slim_block_n(s.block_n) &&
         s.split_k * kWgmmaNarrowBlockM <= s.block_n;
}

// Whether each block's columns of C (a split tile's: those its slice owns) are whole 128-byte
// boxes, which TMA stores; a slim tile's (80, 96 or 160 columns, in any dtype), a 16-bit 64×128
// tile's in 4 or 8 slices or 128×128 tile's in 4, and a tf32 64×128 tile's in 8, are not, and
// leave from registers (epilogue.cuh).
bool owns_whole_boxes(const Shape& s, DType dtype) {
  return !is_slim_block_n(s.block_n) &&
         s.block_n / s.split_k * dtype_size(dtype) % F::kKTileBytes == 0;
}

}  // namespace

Plan plan_call(const GemmParams& caller, int64_t sms, const Overrides& o) {
  Plan plan;
  plan.transposed = runs_transposed(caller);
  plan.problem = plan.transposed ? transposed_problem(caller) : caller;
  const GemmParams& p = plan.problem;
  plan.shape = choose_shape(p, sms, o);
  plan.product = plan_product(p, plan.shape, o);
  // C goes through TMA as the product's C where TMA can address that, else (transposed, fp32
  // only) as the caller's C, its boxes filled transposed.
  const bool product_store =
      o.tma_store && tma_store_ok(p) && owns_whole_boxes(plan.shape, p.dtype);
  plan.store_transposed = plan.transposed && !product_store && o.tma_store &&
                          tma_store_ok(caller) && owns_transposed_boxes(plan.shape);
  plan.tma_store = product_store || plan.store_transposed;
  plan.tiles_m = ceil_div(p.M, plan.shape.block_m());
  plan.tiles_n = ceil_div(p.N, plan.shape.block_n);
  plan.turns = ceil_div(plan.tiles_m, plan.shape.cluster_m()) * plan.tiles_n * p.batch;
  plan.k_tiles = ceil_div(p.K, k_tile_elements(p));
  plan.fits_int = p.M <= INT_MAX && p.N <= INT_MAX && p.K <= INT_MAX &&
                  plan.tiles_m * plan.tiles_n * p.batch <= INT_MAX;
  return plan;
}

namespace {

// Stream-K's clusters for its dealt turns, as plan_grid takes them (equal_share_clusters), where
// equal_shares_allowed.
int64_t stream_k_clusters(const Plan& plan, int64_t slots, const Overrides& o, int* sk_turns,
                          StreamKRule* rule) {
  if (!equal_shares_allowed(o)) return slots;
  const bool all = plan.shape.stream_k_all;
  const int64_t clusters =
      equal_share_clusters(plan.turns, slots, all, plan.shape.stream_k_max_shares);
  if (clusters == slots) return slots;
  StreamKRule aligned_rule = StreamKRule::kOn;
  const int turns = stream_k_turns(plan.turns, clusters, plan.k_tiles, all, o, &aligned_rule);
  if (turns <= 0) return slots;
  *sk_turns = turns, *rule = aligned_rule;
  return clusters;
}

}  // namespace

Grid plan_grid(const Plan& plan, int64_t resident, const Overrides& o) {
  Grid grid;
  grid.stream_k_rule = plan.product.stream_k_rule;
  if (plan.shape.split_k > 1) {
    grid.blocks = plan.turns * plan.shape.split_k * plan.shape.split_groups;
    return grid;
  }
  grid.slots = std::min<int64_t>(resident, o.max_clusters);
  if (grid.slots <= 0) return grid;
  const int64_t cluster_m = plan.shape.cluster_m();
  if (plan.product.stream_k_bytes > 0) {
    grid.sk_turns = stream_k_turns(plan.turns, grid.slots, plan.k_tiles, plan.shape.stream_k_all,
                                   o, &grid.stream_k_rule);
    if (grid.sk_turns > 0) {
      const int64_t clusters =
          stream_k_clusters(plan, grid.slots, o, &grid.sk_turns, &grid.stream_k_rule);
      grid.fewer_clusters = clusters < grid.slots;
      grid.blocks = clusters * cluster_m;
      return grid;
    }
  }
  int64_t slots = grid.slots;
  if (plan.turns > slots) {
    // As few blocks as keep the number of turns per block: an SM left idle for the whole
    // kernel draws less power than one idle only in the last wave, and under the power cap the
    // others clock higher.
    slots = ceil_div(plan.turns, ceil_div(plan.turns, slots));
  }
  grid.blocks = std::min(plan.turns, slots) * cluster_m;
  return grid;
}

// ---- The reasons, for torch_gemm.explain.

namespace {

std::string str(int64_t x) { return std::to_string(x); }

std::string tile_name(int64_t m, int64_t n) { return str(m) + "x" + str(n); }

// Why a tile splits in `split` slices (kSmallSplit, kNarrowSplit): the doubling stops at the cap,
// at the shortest slice, or where the tiles would outnumber one wave of clusters of that size.
std::string slices_reason(int64_t split, int64_t sms, int64_t min_k_tiles, int max_slices) {
  return str(split) + " slices: as many (up to " + str(max_slices) + ", of at least " +
         str(min_k_tiles) + " k-tiles each) as keep the tiles within one wave of clusters of " +
         "that size (" + str(resident_split_clusters(sms, split)) + " counted on as resident on " +
         str(sms) + " SMs)";
}

// Which of plan_operand's conditions decided, for the operand (X, K) at ptr with these strides.
std::string operand_reason(const OperandPlan& op, const void* ptr, int64_t X, int64_t K,
                           int64_t stride_x, int64_t stride_k, int64_t stride_batch,
                           int64_t element_bytes, bool k_major_only, const std::string& x) {
  if (!op.repack) {
    return "read in place, " + std::string(op.k_major ? "K" : x) + "-major: unit stride along " +
           (op.k_major ? "K" : x) + ", 16-byte aligned base and strides";
  }
  std::string why;
  const bool unit_x = stride_x == 1 || X <= 1;
  if (!tma_aligned(ptr)) {
    why = "its base address is not 16-byte aligned";
  } else if (!tma_stride_ok(stride_batch, op.batch, element_bytes)) {
    why = "its batch stride is not a positive multiple of 16 bytes";
  } else if (k_major_only && unit_x && tma_stride_ok(stride_k, K, element_bytes)) {
    why = "it is N-major, and tf32 wgmma reads B K-major only";
  } else {
    why = "neither K nor " + x + " has unit stride with the other stride a positive multiple of "
          "16 bytes";
  }
  return "repacked into the workspace (" + std::string(op.k_major ? "K" : x) +
         "-major, rows padded to 16 bytes) before the product: " + why +
         ", and TMA needs 16-byte aligned addresses and strides";
}

std::string stream_k_reason(StreamKRule rule, const Plan& plan, const Grid& grid) {
  // By StreamKRule; null where the sentence needs the plan's numbers.
  static constexpr const char* kFixed[] = {
      nullptr,
      "off: 3xTF32's promoted tiles run whole turns",
      "off: fused row sums take whole tiles",
      "off: TORCH_GEMM_WGMMA_STREAM_K=0",
      "off: only unsplit 128x256 tiles take stream-K, 128x128 tiles of 193 to 256 rows (65 to "
      "128 in 3 equal shares, 449 to 512 in equal shares) with a long K filling at most 5/8 of "
      "the SMs, and paired 64x128 tiles of 65 to 512 rows in equal shares of a long enough K (3 "
      "or 4 where 128x128 tiles would split in 4; and, under TORCH_GEMM_WGMMA_STREAM_K=3, "
      "128x128 tiles the plan does not split and one row of 64x128 tiles or forced ones, or "
      "tf32's 64x256, where their k-tiles outnumber the resident clusters)",
      "off: the tiles fit in one round of resident clusters",
      nullptr,
      nullptr,
      "off: the pieces would not fit the walk's 32-bit arithmetic, or are fewer than the clusters",
  };
  static_assert(sizeof(kFixed) / sizeof(kFixed[0]) == static_cast<int>(StreamKRule::kTooManyUnits) + 1,
                "a sentence per rule");
  if (kFixed[static_cast<int>(rule)] != nullptr) return kFixed[static_cast<int>(rule)];
  // The clusters the grid holds: all resident ones, or fewer that cut every dealt turn at the
  // same K offsets (stream_k_clusters).
  const int64_t clusters = grid.fewer_clusters ? grid.blocks / plan.shape.cluster_m() : grid.slots;
  const std::string unit = plan.shape.clusters ? "pairs" : "blocks";
  const std::string fewer =
      grid.fewer_clusters
          ? "; only " + str(clusters) + " of the " + str(grid.slots) + " resident " + unit +
                " take them, so that each " + (plan.shape.stream_k_all ? "" : "dealt ") +
                "turn's k-tiles split in " + str(clusters / grid.sk_turns) +
                " equal shares: every tile is cut at the same K offsets, and the pieces running "
                "at once share their operands in L2"
          : "";
  if (rule == StreamKRule::kOn && plan.shape.stream_k_all) {
    return "every one of the " + str(plan.turns) + " turns (" + str(plan.k_tiles) +
           " k-tiles each) is dealt to " + str(clusters) + " " + unit + " as k-tiles, about " +
           str(plan.turns * plan.k_tiles / clusters) + " each, partial sums meeting in the "
           "workspace in a fixed order" +
           (grid.fewer_clusters ? fewer : ", so that every resident block streams a share of B");
  }
  if (rule == StreamKRule::kOn) {
    return "the last " + str(grid.sk_turns) + " turns (" + str(plan.turns % clusters) +
           " left over after whole rounds of " + str(clusters) + " " + unit + ") are dealt to "
           "every one of them as k-tiles, partial sums meeting in the workspace, so that none "
           "idles through a last partial round" + fewer;
  }
  if (rule == StreamKRule::kWholeRounds) {
    return plan.turns <= grid.slots
               ? "off: the " + str(plan.turns) + " turns fit in one round of the " +
                     str(grid.slots) + " resident clusters"
               : "off: the turns make whole rounds of the " + str(grid.slots) +
                     " resident clusters";
  }
  const int64_t rest = plan.turns % grid.slots;
  return "off: the last round's " + str(grid.slots - rest) + " idle of " + str(grid.slots) +
         " clusters, " + str(plan.k_tiles) + " k-tiles each, would save each cluster fewer than " +
         str(kStreamKMinSaved) + " k-tiles, less than stream-K's partial sums cost";
}

}  // namespace

Reasons explain_plan(const GemmParams& caller, const Plan& plan, const Grid& grid,
                     const Overrides& given) {
  struct {
    std::string transposed, a, b, store, tile, cluster, split_k, stream_k, row_sum, grid;
  } r;
  const GemmParams& p = plan.problem;
  const Overrides o = effective_overrides(p, given);
  const Shape& s = plan.shape;
  const int64_t e = dtype_size(p.dtype);
  const bool batched = p.batch > 1;
  const int64_t sms = s.sms;
  // The 16-bit tile rules chose the tile (bf16/fp16, or tf32 following them: Tf32Rules).
  const bool sixteen_bit_rules = can_split(p) || s.tf32_rules == Tf32Rules::kSixteenBit;

  if (plan.transposed) {
    r.transposed = "runs the transposed product C^T = B^T A^T: tf32 wgmma reads B K-major only, "
                   "and the transposed operands need less repacking than the product as given";
  } else if (caller.dtype != DType::kFloat32) {
    r.transposed = "no: bf16/fp16 wgmma reads either operand in either order";
  } else if (caller.bias != nullptr || caller.row_sum != nullptr) {
    r.transposed = "no: a bias or row sums belong to C's columns and A's rows";
  } else if (caller.tf32_promoted) {
    r.transposed = "no: 3xTF32's split operands are both K-major, as the promoted tiles read them";
  } else {
    r.transposed = "no: the product as given needs no more repacking than its transpose";
  }

  r.a = operand_reason(plan.product.a, p.a, p.M, p.K, p.a_stride_m, p.a_stride_k,
                       batched ? p.a_stride_batch : 0, e, false, "M");
  r.b = operand_reason(plan.product.b, p.b, p.N, p.K, p.b_stride_n, p.b_stride_k,
                       batched ? p.b_stride_batch : 0, e, p.dtype == DType::kFloat32, "N");

  if (plan.store_transposed) {
    r.store = "TMA stores into the caller's C, boxes filled transposed in shared memory";
  } else if (plan.tma_store) {
    r.store = "TMA stores from swizzled shared-memory boxes: C has unit column stride and "
              "16-byte aligned rows";
  } else if (!o.tma_store) {
    r.store = "from registers, edges masked: forced by TORCH_GEMM_WGMMA_STORE=registers";
  } else if (is_slim_block_n(plan.shape.block_n)) {
    r.store = "from registers, edges masked: a slim tile's " + str(plan.shape.block_n) +
              " columns" +
              (dtype_size(p.dtype) == 2 ? std::string(", not whole 64-column boxes")
                                        : std::string(": slim tiles store no boxes"));
  } else if (!owns_whole_boxes(plan.shape, p.dtype)) {
    r.store = "from registers, edges masked: each of the " + str(plan.shape.split_k) +
              " K slices owns " + str(plan.shape.block_n / plan.shape.split_k) +
              " columns, not whole " + str(F::kKTileBytes / dtype_size(p.dtype)) +
              "-column boxes";
  } else if (plan.transposed && plan.shape.block_n == kWgmmaMidBlockN) {
    r.store = "from registers, edges masked: a 128x192 tile's ring holds one box a consumer, half "
              "a column of transposed fp32 boxes";
  } else if (plan.transposed && !owns_transposed_boxes(plan.shape)) {
    r.store = "from registers, edges masked: each of the transposed product's " +
              std::to_string(plan.shape.split_k) + " K slices owns " +
              std::to_string(plan.shape.block_n / plan.shape.split_k) +
              " columns, fewer than a transposed box's " + std::to_string(kWgmmaNarrowBlockM);
  } else {
    r.store = "from registers, edges masked: TMA cannot address C (no unit column stride, or rows "
              "not 16-byte aligned)";
  }

  const std::string wide = str(s.wide_tiles) + " tiles of 128x256";
  const int64_t narrow_tiles =
      ceil_div(p.M, kWgmmaNarrowBlockM) * ceil_div(p.N, kWgmmaBlockN) * p.batch;
  const std::string half = "half of the " + str(sms) + " SMs";
  // "2 rounds": how many rounds of the SMs `tiles` tiles make.
  const auto rounds_of = [sms](int64_t tiles) {
    const int64_t n = ceil_div(tiles, sms);
    return str(n) + (n == 1 ? " round" : " rounds");
  };
  // Why 128-row tiles were not taken: too few of them, or (at most 64 rows) half empty.
  const std::string no_wide = s.wide_tiles < sms / 2
                                  ? wide + " would leave more than " + half + " idle"
                                  : str(p.M) + " rows (at most 64) would leave a 128-row tile half empty";
  // How a dealt plan's pair turns are cut as launched: plan_grid cuts them again on the pairs
  // resident at launch, which may be fewer than the sms / 2 a rule counted on.
  const auto cut_of_turns = [&] {
    const int64_t clusters = grid.blocks / s.cluster_m();
    const int64_t turns = std::max<int64_t>(plan.turns, 1);
    return clusters % turns == 0 && clusters >= turns
               ? "split in " + str(clusters / turns) + " equal shares"
               : "dealt over " + str(clusters) + " pairs, unevenly";
  };
  switch (s.tile_rule) {
    case TileRule::kWide:
      r.tile = "128x256, two consumer warpgroups: the " + wide + " fill at least " + half;
      if (sixteen_bit_rules) {
        const int64_t wide_rounds = ceil_div(s.wide_tiles, sms);
        r.tile += ", in " + str(wide_rounds) + (wide_rounds == 1 ? " round" : " rounds") +
                  ", where the " +
                  str(s.medium_tiles) + " tiles of 128x128 would take " +
                  str(ceil_div(s.medium_tiles, sms)) + " at about " +
                  str(kMediumTileCostTenths) + "/10 of the time each";
        if (can_split(p)) {
          r.tile += " and the " + str(s.mid_tiles) + " of 128x192 " +
                    str(ceil_div(s.mid_tiles, sms)) + " at about " + str(kMidTileCostTenths) +
                    "/10";
        }
        if (s.stream_k_keeps_wide) {
          r.tile += "; stream-K deals out these tiles' last round, which with K's " +
                    str(plan.k_tiles) + " k-tiles (" + str(kStreamKKeepsWideMinKTiles) +
                    " or more) the narrower tiles' fewer rounds did not beat";
        }
      }
      break;
    case TileRule::kNarrow:
      r.tile = "64x256, one consumer warpgroup: " + wide + " would leave more than " + half +
               " idle, and 64-row tiles double the blocks";
      if (sixteen_bit_rules) {
        r.tile += "; the " + str(s.small_tiles) + " tiles of 64x128 would not fit in one wave";
      } else {
        r.tile += p.row_sum == nullptr ? " (tf32's own rules take no 128-column tiles)"
                  : sixteen_bit(p)     ? " (fused row sums follow 256-column tiles)"
                                       : " (row sums keep tf32 on 256-column tiles)";
      }
      break;
    case TileRule::kNarrowSplit:
      r.tile = "64x256 split in " + str(s.split_k) + " along K, one consumer warpgroup: " + wide +
               " would leave more than " + half + " idle, tf32's own rules take no 128-column "
               "tiles, and the " + str(narrow_tiles) +
               " tiles of 64x256 leave half of the SMs idle; " +
               slices_reason(s.split_k, sms, kNarrowSplitMinKTiles, F::kMaxNarrowSlices);
      break;
    case TileRule::kOneRowNarrow:
      r.tile = "64x256, one consumer warpgroup: " + no_wide +
               (sixteen_bit_rules ? ", and the " + str(s.small_tiles) +
                                        " tiles of 64x128 would not fit in one wave"
                : p.row_sum == nullptr ? std::string(" (tf32's own rules take no 128-column tiles)")
                : sixteen_bit(p)       ? std::string(" (fused row sums follow 256-column tiles)")
                                       : std::string(" (row sums keep tf32 on 256-column tiles)"));
      break;
    case TileRule::kSmallStreamK:
      r.tile = "64x128, one consumer warpgroup: " + no_wide + "; one row of " +
               str(s.small_tiles) + " tiles of 64x128, which TORCH_GEMM_WGMMA_STREAM_K=3 deals out "
               "as k-tiles instead of splitting (see stream_k)";
      break;
    case TileRule::kSmall:
      r.tile = "64x128, one consumer warpgroup: " + no_wide + ", and the " + str(s.small_tiles) +
               " tiles of 64x128 fit in one wave";
      break;
    case TileRule::kSmallSplit:
      r.tile = "64x128 split in " + str(s.split_k) + " along K: " + no_wide + ", and even the " +
               str(s.small_tiles) + " tiles of 64x128 leave half of the SMs idle; " +
               (s.split_held_back
                    ? str(s.split_k) + " slices: one row of more than " +
                          str(kSplitPastTwoMaxTiles) + " tiles splits past 2 only with more than " +
                          str(kSplitPastTwoKTiles) +
                          " k-tiles a slice, and K has " + str(plan.k_tiles)
                    : slices_reason(s.split_k, sms, kSmallSplitMinKTiles, F::kMaxSmallSlices));
      break;
    case TileRule::kTiny: {
      const int64_t narrow_m = ceil_div(p.M, kWgmmaNarrowBlockM);
      r.tile = "64x64, one consumer warpgroup: " + no_wide + "; the " + str(s.tiny_tiles) +
               " tiles of 64x64 in " + str(narrow_m) + " rows (2 to " + str(kTinyMaxNarrowRows) +
               ") fill more than half of the " + str(sms) + " SMs in one wave of " +
               str(tiny_pair_blocks(p, narrow_m)) + " paired blocks, with K's " +
               str(plan.k_tiles) + " k-tiles (at most " + str(kTinyMaxKTiles) + "), where the " +
               str(s.small_tiles) + " tiles of 64x128 would fill at most half of them whole, or " +
               "all of them only split in 2, unpaired";
      break;
    }
    case TileRule::kTinyOneRow:
      r.tile = "64x64, one consumer warpgroup: " + no_wide + "; one row of " +
               str(s.tiny_tiles) + " tiles of 64x64 (" + str(kTinyOneRowMinTiles) +
               " to one wave of " + str(sms) + ") with K's " + str(plan.k_tiles) +
               " k-tiles (at most " + str(kTinyMaxKTiles) + "), one matrix: twice the " +
               str(s.small_tiles) + " tiles of 64x128, each streaming half the columns, whole";
      break;
    case TileRule::kMediumSplit:
      r.tile = "128x128 split in " + str(s.split_k) + " along K, two consumer warpgroups: " +
               no_wide + "; the " + str(s.small_tiles) + " tiles of 64x128 leave half of the SMs " +
               "idle, and their two rows as " + str(s.medium_tiles) + " tiles of 128x128 in " +
               str(s.split_k) + " slices of K's " + str(plan.k_tiles) + " k-tiles (at least " +
               str(kMediumSplitMinKTiles) + ") make as many blocks (" +
               str(s.medium_tiles * s.split_k) + ") as the 64x128 tiles split in 2, with two " +
               "consumers each, in one wave of clusters of " + str(s.split_k) + " (" +
               str(resident_split_clusters(sms, s.split_k)) + " counted on as resident on " +
               str(sms) + " SMs); the 64x128 tiles paired and dealt out would not split their pair "
               "turns in " + str(kSmallDealtOverMediumSplitMinShares) + " or 4 equal shares long "
               "enough (see kSmallDealt)";
      break;
    case TileRule::kMediumSplitTall: {
      const int64_t wide_m = ceil_div(p.M, kWgmmaBlockM);
      const MediumSplitRows rows = medium_split_rows(wide_m, s.medium_tiles, plan.k_tiles,
                                                     s.tf32_rules == Tf32Rules::kSixteenBit);
      const std::string rows_rule =
          rows == MediumSplitRows::kTall ? "at least " + str(kMediumSplitTallMinRows)
          : rows == MediumSplitRows::kTf32
              ? "tf32: any number, with fewer than " + str(kTf32OwnDealtMinKTiles) + " k-tiles"
          : rows == MediumSplitRows::kTwoRows
              ? std::string("16-bit: two rows at any width")
              : "16-bit: one row of at most " + str(kMediumSplitOneRowMaxTiles) + " tiles";
      r.tile = "128x128 split in 2 along K, two consumer warpgroups: " + no_wide + "; the " +
               str(s.small_tiles) + " tiles of 64x128 would run whole in one wave, where " +
               str(s.medium_tiles) + " tiles of 128x128 in " + str(wide_m) + " tile rows (" +
               rows_rule + "), within the " +
               str(resident_split_clusters(sms, 2)) + " clusters of 2 counted on as resident, " +
               "run the two-consumer loop over 2 slices of K's " + str(plan.k_tiles) +
               " k-tiles (at least " + str(kMediumSplitTallMinSliceKTiles) + " each), both " +
               "operands K-major";
      break;
    }
    case TileRule::kMedium:
      r.tile = "128x128, two consumer warpgroups: the " + str(s.small_tiles) +
               " tiles of 64x128 would not fit in one wave, and the " + str(s.medium_tiles) +
               " tiles of 128x128 " +
               (s.medium_tiles <= sms
                    ? "do"
                    : "make " + str(ceil_div(s.medium_tiles, sms)) + " rounds of the " + str(sms) +
                          " SMs, at about " + str(kMediumTileCostTenths) +
                          "/10 of a 128x256 tile's time, where the " + wide + " make " +
                          str(ceil_div(s.wide_tiles, sms)));
      break;
    case TileRule::kOneKTileNarrow:
      r.tile = "64x256, one consumer warpgroup: K is one k-tile, and the " +
               str(s.medium_tiles) + " tiles of 128x128 would make " +
               str(ceil_div(s.medium_tiles, sms)) + " rounds of the " + str(sms) +
               " SMs; as many tiles of 64x256, one consumer's each, cost less a round (with one "
               "k-tile a tile's time is its start and its stores)";
      break;
    case TileRule::kWideStreamK: {
      const int64_t shares = grid.blocks / std::max<int64_t>(plan.turns, 1);
      r.tile = "128x256, two consumer warpgroups, every turn dealt out as k-tiles: as whole "
               "tiles the " + wide + " would leave more than " + half + " idle, and the " +
               str(narrow_tiles) + " of 64x256 read more operand bytes a block; the " +
               str(plan.turns) +
               " turns split in " + str(shares) + " equal shares of K's " + str(plan.k_tiles) +
               " k-tiles (" +
               (shares > kMaxShares
                    ? "up to " + str(kTf32DealtMaxShares) + " shares where the 64x256 tiles " +
                          "would fill at most half the SMs, with " +
                          str(kTf32DealtManySharesMinKTiles) + " k-tiles or more"
                : ceil_div(p.M, kWgmmaNarrowBlockM) == kTf32DealtOneRowNarrowRows
                    ? str(kTf32DealtOneRowMinShares) + " to " + str(kMaxShares) + " shares of " +
                          str(kTf32DealtMinShareKTiles) + " k-tiles or more in one row of " +
                          "128-row tiles, each reading B once for its 128 rows"
                : shares == kTf32DealtThreeShares &&
                        plan.k_tiles < shares * kTf32DealtMinShareKTiles
                    ? str(kTf32DealtThreeShares) + " shares of " +
                          str(kTf32DealtThreeSharesMinShareKTiles) + " k-tiles or more"
                    : str(kMinShares) + " to " + str(kMaxShares) + " shares of " +
                          str(kTf32DealtMinShareKTiles) + " k-tiles or more") +
               "; see stream_k)";
      break;
    }
    case TileRule::kWideDealt: {
      r.tile = "128x256, two consumer warpgroups, every turn dealt out as k-tiles: as whole "
               "tiles the " + wide + " would leave more than " + half + " idle, and 64x128 or "
               "128x128 tiles read two to three times the operand bytes for as many "
               "multiply-adds; with K's " + str(plan.k_tiles) + " k-tiles (" +
               str(kWideDealtMinKTiles) + " or more) the " + str(plan.turns) + " pair turns " +
               cut_of_turns() + " (the plan takes them where, on " + str(sms / 2) +
               " resident pairs, they split in " + str(kWideDealtMinShares) + " to " +
               str(kMaxShares) + " equal shares on at least " + str(kWideDealtMinWaveEighths) +
               "/8 of the SMs, and does not deal out 128x128 tiles in equal shares; see "
               "stream_k)";
      break;
    }
    case TileRule::kMediumStreamK:
      r.tile = "128x128, two consumer warpgroups, every turn dealt out as k-tiles: " +
               str(s.medium_tiles) + " tiles of 128x128 in " + str(ceil_div(p.M, kWgmmaBlockM)) +
               (ceil_div(p.M, kWgmmaBlockM) == 1 ? " row" : " rows") +
               " (the plan takes two rows; one, unpaired, whose turns split in 3 equal shares; "
               "four whose pair turns split in 2 to 4; " + str(kMediumStreamKMinTiles) + " to " +
               str(kMediumStreamKMaxWaveEighths) + "/8 of the " + str(sms) + " SMs) with K's " +
               str(plan.k_tiles) + " k-tiles (" + str(kMediumStreamKMinKTiles) + " or more, " +
               str(kMediumStreamKManySharesMinKTiles) + " where the turns split in 4 equal "
               "shares, " + str(kMediumStreamKThreeSharesMinKTiles) + " in 3), where whole tiles "
               "(split or paired 64x128, or paired 128x128) would leave a third or more of the "
               "SMs idle, and dealt 128x256 pairs cost more (see stream_k)";
      break;
    case TileRule::kSmallDealt: {
      r.tile = "64x128, one consumer warpgroup, paired, every turn dealt out as k-tiles: " +
               no_wide + "; the " + str(s.small_tiles) + " tiles of 64x128 in " +
               str(ceil_div(p.M, kWgmmaNarrowBlockM)) + " rows (" +
               str(kSmallDealtMinNarrowRows) + " to " + str(kSmallDealtMaxNarrowRows) +
               ", an even number) would be split or leave SMs idle, and with K's " +
               str(plan.k_tiles) + " k-tiles the " + str(plan.turns) + " pair turns " +
               cut_of_turns() + " (the plan takes them where, on " + str(sms / 2) +
               " resident pairs, they split in " + str(kMinShares) + " to " + str(kMaxShares) +
               " equal shares of " + str(kSmallDealtMinShareKTiles) + " k-tiles or more (" +
               str(kSmallDealtManySharesMinShareKTiles) + " in 3 or 4; only 3 or 4 in place of "
               "128x128 tiles split in 4) on at least " +
               str(kSmallDealtMinWaveEighths) + "/8 of the SMs): a pair reads B's tile once, "
               "8 KB of operands a 64x64x64 step against a split tile's 12 (see stream_k)";
      break;
    }
    case TileRule::kSlim: {
      const int64_t tiles = ceil_div(p.M, kWgmmaBlockM) * ceil_div(p.N, s.block_n) * p.batch;
      // The tile the plan had chosen before the slim ones, which they beat.
      const int replaced = s.slim_replaced_block_n;
      const int64_t replaced_tiles = replaced == kWgmmaSmallBlockN ? s.medium_tiles
                                     : replaced == kWgmmaMidBlockN ? s.mid_tiles
                                                                   : s.wide_tiles;
      const std::string replaced_cost =
          replaced == kWgmmaSmallBlockN ? " at " + str(kMediumTileCostTenths * 10) + "/100"
          : replaced == kWgmmaMidBlockN ? " at " + str(kMidTileCostTenths * 10) + "/100"
                                        : "";
      r.tile = "128x" + str(s.block_n) + ", two consumer warpgroups: the " + str(tiles) +
               " slim tiles make " + rounds_of(tiles) + " of the " + str(sms) + " SMs at about " +
               str(slim_tile_cost(s.block_n)) +
               "/100 of a 128x256 tile's time each: less time than the " + str(replaced_tiles) +
               " tiles of 128x" + str(replaced) + " the plan would take otherwise (" +
               rounds_of(replaced_tiles) + replaced_cost + ")";
      break;
    }
    case TileRule::kMid: {
      r.tile = "128x192, two consumer warpgroups: the " + str(s.mid_tiles) + " tiles of 128x192 make " +
               rounds_of(s.mid_tiles) + " of the " + str(sms) + " SMs at about " +
               str(kMidTileCostTenths) + "/10 of a 128x256 tile's time each, where the " + wide +
               " make " + rounds_of(s.wide_tiles) + " and the " + str(s.medium_tiles) +
               " tiles of 128x128 " + rounds_of(s.medium_tiles) + " at " +
               str(kMediumTileCostTenths) + "/10";
      if (s.mid_beats_stream_k) {
        r.tile += "; stream-K would deal out the 128x256 tiles' last round, at about " +
                  str(kStreamKWideCostTenths) + "/10 of their share of the SMs' time (" +
                  str(s.wide_tiles) + " / " + str(sms) + " rounds), more than these whole rounds";
      }
      break;
    }
    case TileRule::kForced:
      r.tile = tile_name(s.block_m(), s.block_n) + ": forced by TORCH_GEMM_WGMMA_SHAPE";
      break;
    case TileRule::kPromoted:
      r.tile = tile_name(s.block_m(), s.block_n) +
               ", 3xTF32's promoted tf32 tiles (big·big's k-tile sums added in fp32): " +
               (o.consumers != 0 ? std::string("consumers forced by TORCH_GEMM_WGMMA_SHAPE")
                : s.consumers == 1 && p.M <= kWgmmaNarrowBlockM
                    ? "one consumer: " + str(p.M) + " rows fill a 64-row tile"
                : s.consumers == 1
                    ? "the " + str(s.medium_tiles) + " tiles of 128x128 would leave more than " + half +
                          " idle, and 64-row tiles double the blocks"
                    : "the " + str(s.medium_tiles) + " tiles of 128x128 fill at least " + half);
      break;
  }

  const int64_t k_tiles = plan.k_tiles;
  if (s.split_k > 1 && s.split_groups > 1) {
    r.split_k = str(s.split_k) + " slices of K in each of " + str(s.split_groups) +
                " clusters a tile (" + str(s.split_k * s.split_groups) + " slices of K's " +
                str(k_tiles) + " k-tiles): each cluster adds its blocks' partial sums through "
                "distributed shared memory, then the last cluster adds the others' through the "
                "workspace, both in a fixed order; " +
                (s.tile_rule == TileRule::kForced
                     ? std::string("the clusters forced by TORCH_GEMM_WGMMA_SHAPE (halved while "
                                   "the tiles' clusters would outnumber those resident)")
                     : "tf32 with " + str(kSplitGroupsMinKTiles) +
                           " k-tiles or more: clusters doubled while the tiles' clusters fit in "
                           "one wave and K holds " + str(kSplitGroupMinKTiles) +
                           " k-tiles for each slice");
  } else if (s.split_k > 1) {
    r.split_k = str(s.split_k) + " slices of K (" + str(k_tiles) + " k-tiles): the " +
                str(s.split_k) + " blocks of a cluster take one each and add their partial sums "
                "through distributed shared memory, in a fixed order";
    if (s.tile_rule == TileRule::kForced && o.split_groups > 1 && s.split_k == F::kMaxSmallSlices) {
      r.split_k += "; the " + str(o.split_groups) + " clusters a tile forced by "
                   "TORCH_GEMM_WGMMA_SHAPE halved to one: the tiles' clusters alone fill the " +
                   str(resident_split_clusters(sms, F::kMaxSmallSlices)) +
                   " counted on as resident";
    }
  } else if (s.stream_k_all) {
    r.split_k = "none: stream-K spreads K over the blocks instead (see stream_k)";
  } else if (s.tile_rule == TileRule::kForced) {
    r.split_k = "none: forced by TORCH_GEMM_WGMMA_SHAPE";
  } else if (p.dtype == DType::kFloat32 && !sixteen_bit_rules) {
    r.split_k = p.tf32_promoted ? std::string("none: 3xTF32's promoted tiles take their product's whole K (where "
                                             "it cuts K, its chunks are a batch of products)")
                : p.row_sum != nullptr
                    ? std::string("none: tf32 splits no product with row sums")
                : s.consumers == 2
                    ? std::string("none: tf32's own rules split only its 64x256 tiles, where "
                                  "they leave most SMs idle")
                    : "none: the 64x256 tiles fill half of the SMs, or K's " + str(k_tiles) +
                          " k-tiles are fewer than " + str(2 * kNarrowSplitMinKTiles) +
                          ", too short to split in two";
  } else if (p.row_sum != nullptr) {
    r.split_k = "none: fused row sums follow whole tiles";
  } else if (s.tile_rule == TileRule::kTiny) {
    r.split_k = "none: the 64x64 tiles fill more than half of the SMs whole, paired";
  } else if (s.tile_rule == TileRule::kTinyOneRow) {
    r.split_k = "none: the 64x64 tiles stream the weight whole, twice the tiles of 64x128";
  } else if (s.tile_rule == TileRule::kOneKTileNarrow) {
    r.split_k = "none: K is one k-tile";
  } else if (s.tile_rule == TileRule::kSmall) {
    r.split_k = s.small_tiles > resident_split_clusters(sms, 2)
                    ? "none: the " + str(s.small_tiles) + " tiles of 64x128 fill half of the SMs"
                    : "none: K's " + str(k_tiles) + " k-tiles are fewer than " +
                          str(2 * kSmallSplitMinKTiles) + ", too short to split in two";
  } else {
    r.split_k = "none: only 64x128 tiles are split where the plan chooses (their products leave "
                "the SMs idle without it), two rows of them with a long K as 128x128 tiles in 4 "
                "slices, and 16 or more rows of them that run whole in one wave, with a long K, as "
                "128x128 tiles in 2; 128x256 tiles in two slices with TORCH_GEMM_WGMMA_SHAPE=2x2 "
                "(16-bit), 128x128 in 2 or 4 with 2x2x128 or 2x4x128";
  }

  switch (s.cluster_rule) {
    case ClusterRule::kPairs:
      r.cluster = std::string("pairs of blocks along M share B's tile: ") +
                  (s.block_n == kWgmmaMidBlockN && !plan.product.b.k_major
                       ? "N-major, it goes as three 64-column boxes, two copied by one block and "
                         "one by the other"
                   : s.block_n == kWgmmaTinyBlockN && !plan.product.b.k_major
                       ? "N-major, it is one 64-column box, copied by one block of the pair"
                       : "each copies half of it") +
                  " by TMA multicast, so B crosses from L2 once per pair";
      break;
    case ClusterRule::kSplitK:
      r.cluster = s.split_groups > 1
                      ? "each of the tile's " + str(s.split_groups) + " clusters is " +
                            str(s.split_k) + " blocks, one slice of K each"
                      : "the cluster is the tile's " + str(s.split_k) + " blocks, one slice of K each";
      break;
    case ClusterRule::kOff:
      r.cluster = "single blocks: TORCH_GEMM_WGMMA_CLUSTER=1";
      break;
    case ClusterRule::kOneTileRow:
      r.cluster = "single blocks: one tile row, nothing to pair along M";
      break;
    case ClusterRule::kOddRows:
      r.cluster = "single blocks: " + str(ceil_div(p.M, kWgmmaBlockM)) +
                  " tile rows, an odd number, would leave one block of the last pair past M, "
                  "which costs more than sharing B saves";
      break;
    case ClusterRule::kOneWave:
      if (s.tile_rule == TileRule::kWideStreamK) {
        r.cluster = "single blocks: the tiles make one short wave of tf32, where a pair's start "
                    "and its stages waiting on both blocks cost more than sharing B saves; each "
                    "turn's equal shares run on single blocks (pairs on dealt tiles not measured)";
        break;
      }
      r.cluster = "single blocks: every block has one tile (one wave) " +
                  (sixteen_bit_rules ? "and K only " + str(plan.k_tiles) +
                                           " k-tiles (fewer than " + str(kPairOneWaveMinKTiles) + ")"
                                     : std::string("of tf32")) +
                  ", where a pair's start and its stages waiting on both blocks cost more than "
                  "sharing B saves";
      break;
  }

  const StreamKRule planned = plan.product.stream_k_rule;
  r.stream_k = stream_k_reason(planned == StreamKRule::kOn ? grid.stream_k_rule : planned, plan,
                               grid);

  if (p.row_sum == nullptr) {
    r.row_sum = "none asked for";
  } else if (plan.product.row_sum.fused) {
    r.row_sum = "fused: the producer warpgroup's idle warps sum A's rows, tile column j over "
                "slice j of K (" + str(plan.product.row_sum.slices) + " slices)";
  } else {
    r.row_sum = "row_sum_slices_kernel before the product (" +
                str(plan.product.row_sum.slices) + " slices of K), the partials added after: " +
                (p.dtype == DType::kFloat32 ? std::string("tf32 kernels do not fuse them")
                                            : "fewer than " + str(kMinFusedSlices) +
                                                  " tile columns to slice K by");
  }

  if (s.split_k > 1) {
    r.grid = str(grid.blocks) + " blocks: " +
             (s.split_groups > 1 ? str(s.split_groups) + " clusters" : std::string("one cluster")) +
             " of " + str(s.split_k) + " per tile (" + str(plan.turns) + " tiles)";
  } else if (grid.slots <= 0) {
    r.grid = "none: no cluster of the kernel fits on the device";
  } else {
    const std::string unit = s.clusters ? "pairs" : "blocks";
    r.grid = str(grid.blocks) + " blocks, persistent: " + str(plan.turns) + " turns over " +
             str(grid.slots) + " resident " + unit;
    if (o.max_clusters != INT_MAX) r.grid += " (capped by TORCH_GEMM_WGMMA_MAX_CLUSTERS)";
    if (grid.fewer_clusters) {
      r.grid += "; " + str(grid.blocks / s.cluster_m()) + " of them take turns, so that "
                "stream-K cuts every tile at the same K offsets (see stream_k)";
    }
    if (grid.sk_turns == 0 && plan.turns > grid.slots &&
        grid.blocks < grid.slots * s.cluster_m()) {
      r.grid += "; as few as keep the turns per block, so that idle SMs let the others clock "
                "higher";
    }
  }
  // Which tile rules a tf32 product followed.
  const bool tf32_asked = o.tf32_plan != Overrides::Tf32Plan::kAuto;
  switch (s.tf32_rules) {
    case Tf32Rules::kSixteenBit:
      r.tile += tf32_asked ? "; tf32 under the 16-bit tile rules: TORCH_GEMM_WGMMA_TF32_PLAN="
                             "sixteen_bit"
                           : "; tf32 with both operands K-major follows the 16-bit tile rules (a "
                             "k-tile is the same 128 bytes, as long on the tensor cores)";
      break;
    case Tf32Rules::kOwn:
      r.tile += tf32_asked ? "; tf32's own tile rules: TORCH_GEMM_WGMMA_TF32_PLAN=own"
                           : "; tf32's own tile rules: A is read MN-major, through permuted register "
                             "loads (the 16-bit rules are taken where both operands are read "
                             "K-major)";
      break;
    case Tf32Rules::kOwnOverMediumPairs:
      r.tile += "; tf32's own tile rules: the 16-bit rules would pair 128x128 tiles in their "
                "place, which ran slower in tf32 (A's fragments pass through registers once per "
                "128 columns)";
      break;
    case Tf32Rules::kOwnDealtOverPairs:
      r.tile += "; tf32's own tile rules: with K's " + str(plan.k_tiles) + " k-tiles (" +
                str(kTf32OwnDealtMinKTiles) + " or more) these dealt 128x256 tiles ran faster in "
                "tf32 than the 16-bit rules' pairs of 128-column tiles";
      break;
    case Tf32Rules::kOwnSplitOverNarrow:
      r.tile += "; tf32's own tile rules: with " + str(p.M) + (p.M == 1 ? " row" : " rows") +
                " these 64x256 tiles split in " +
                str(s.split_k) + " ran faster in tf32 than the 16-bit rules' as many blocks of 64x128 " +
                "tiles" + (s.split_k == 2 ? std::string(" whole") : " split in 2, with K's " +
                str(plan.k_tiles) + " k-tiles (" + str(kTf32OwnSplitFourMinKTiles) + " or more)") +
                " (A is read once a k-tile for twice the columns)";
      break;
    case Tf32Rules::kNone:
      break;
  }
  if (s.tf32_rules != Tf32Rules::kNone && o.tf32_plan_ignored) {
    r.tile += "; TORCH_GEMM_WGMMA_TF32_PLAN names no rule set (own, sixteen_bit), so the plan chose";
  }
  // A forced shape that did not take: the plan chose instead, which a timing run would not see.
  if (given.shape_ignored) {
    r.tile += "; TORCH_GEMM_WGMMA_SHAPE names no shape the kernel takes (heuristics.h's "
              "Overrides), so the plan chose";
  } else if (given.consumers != 0 && o.consumers == 0) {
    r.tile += "; TORCH_GEMM_WGMMA_SHAPE's tiles cannot take this product (its dtype, layout or "
              "row sums), so the plan chose";
  }
  return {{"transposed", r.transposed}, {"a", r.a}, {"b", r.b}, {"store", r.store},
          {"tile", r.tile}, {"cluster", r.cluster}, {"split_k", r.split_k},
          {"stream_k", r.stream_k}, {"row_sum", r.row_sum}, {"grid", r.grid}};
}

}  // namespace sm90
}  // namespace torch_gemm
