// The Hopper kernel's compile-time shape (WgmmaConfig: tile, stages, warpgroups, registers, shared
// memory budget) and its run-time parameters (WgmmaParams), the two things every role file reads.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/row_sum.cuh"
#include "kernels/tiles.h"

namespace torch_gemm {

// The tile and pipeline for operand type T (bf16/fp16, or fp32 read as tf32), kConsumers
// consumer warpgroups (2: 128-row tiles; 1: 64-row tiles, twice as many, for shapes whose 128-row
// tiles would leave most SMs idle) and kMmaN columns (256; or 128, twice as many tiles again;
// 64; or 192 and the slim widths with two consumers, whose tile counts fall between: see
// choose_shape in heuristics.cpp; tf32 of those 192 and 160 only). kPromoted: 3xTF32's inner
// product (tf32, 128 columns; below).
// Every size is in bytes of 128-byte swizzled rows, so the 16-bit and tf32 kernels share one
// shape: a k-tile is one 128-byte row of K (64 or 32 elements), a wgmma reads 32 bytes of it.
template <typename T, int kConsumers_ = 2, int kMmaN_ = 256, bool kPromoted_ = false>
struct WgmmaConfig {
  static constexpr bool kTf32 = std::is_same_v<T, float>;
  static constexpr int kElementBytes = sizeof(T);
  static constexpr int kSwizzleBytes = 128;        // TMA and wgmma's widest swizzle: conflict-free
  static constexpr int kBlockK = kSwizzleBytes / kElementBytes;  // 64 (16-bit) or 32 (tf32)
  static constexpr int kMmaM = 64;                 // wgmma's M per warpgroup
  static constexpr int kMmaN = kMmaN_;             // 256, wgmma's largest: B read once per k-step
  static constexpr int kMmaK = 32 / kElementBytes; // K per wgmma: 16 (16-bit) or 8 (tf32)
  static constexpr int kAccumulators = kMmaM * kMmaN / 128;  // fp32 a thread: 128 (96, 64)
  static constexpr int kConsumers = kConsumers_;   // consumer warpgroups, 64 rows of C each
  static constexpr int kBlockM = kConsumers * kMmaM;  // 128 (or 64) rows of C per tile
  static constexpr int kBlockN = kMmaN;               // 256 (192, 128) columns of C per tile
  static_assert(kConsumers == 1 || kConsumers == 2, "one or two consumer warpgroups");
  // Slim tiles (tiles.h's kWgmmaSlimBlockN80, 96, 160): widths between, for tile counts
  // that fill the SMs where 128 or 192 columns leave many of them idle; their C leaves from
  // registers.
  static constexpr bool kSlim = is_slim_block_n(kMmaN);
  // 64×64 tiles (tiles.h's kWgmmaTinyBlockN): one consumer, for a few hundred rows against a
  // narrow weight.
  static constexpr bool kTiny = kMmaN == kWgmmaTinyBlockN;
  static_assert(kMmaN == 256 || kMmaN == 128 ||
                    ((kMmaN == 192 || kSlim) && kConsumers == 2 &&
                     (!kTf32 || kMmaN == 192 || kMmaN == kWgmmaSlimBlockN160)) ||
                    (kTiny && kConsumers == 1),
                "256- or 128-column tiles, 192-column or slim tiles of two consumers (tf32: 192 "
                "and 160), or 64-column tiles of one");
  // 3xTF32's inner product (wgmma_sm90_3xtf32) runs on tf32 128-column tiles of its own: both
  // operands already split into TF32 values, K-major, so that A too is read from shared memory;
  // each k-tile's products are summed on the tensor cores into a fresh set of registers and then
  // added to the accumulators in fp32 by the CUDA cores (promoted, mainloop.cuh), which takes a
  // second and third set of 64×128 sums beside them. Plain tf32 tiles of 128 (and 64) columns
  // read A through registers, as the 256-column ones do.
  static constexpr bool kPromoted = kPromoted_;
  static_assert(!kPromoted || (kTf32 && kMmaN == 128), "3xTF32's tiles are tf32, 128 columns");
  static_assert(kBlockM == (kConsumers == 2 ? kWgmmaBlockM : kWgmmaNarrowBlockM) &&
                    kBlockN == (kMmaN == 256   ? kWgmmaBlockN
                                : kMmaN == 192 ? kWgmmaMidBlockN
                                : kSlim || kTiny ? kMmaN
                                                 : kWgmmaSmallBlockN),
                "tiles.h tells auto and the plan the tiles");
  // k-tiles in flight, 48 KB each (40 KB with one consumer): 4 leave room for two 8 KB epilogue
  // boxes per consumer, or 4–8 with one (3 stages beside a whole-tile ring of boxes were no
  // faster, benchmarks/NOTES.md). 64×128 tiles take 24 KB a k-tile: 8 in flight, on shapes whose
  // loop waits on L2. 128×128 tiles take 32 KB: 6, beside a whole tile of 16-bit boxes (fp32 C,
  // tf32's and 3xTF32's, takes two rounds of the ring's 2). 128×192 tiles take 40 KB: 5, beside one box per
  // consumer, which is all their deferred stores fill at a time (Epilogue::kPendingRing). Slim
  // tiles take 26 or 28 KB: 7 (their C leaves from registers; the one box is never filled); the
  // 160-column ones 36 KB: 5, as many as fit beside that box.
  // 64×64 tiles take 16 KB: 12, as deep a ring in bytes as the 64×128 tiles' (cuBLAS runs its
  // 64×64 tiles with 13).
  static constexpr int kStages = kMmaN == 256 ? 4
                                 : kMmaN == 192 ? 5
                                 : kSlim        ? (kMmaN < 128 ? 7 : 5)
                                 : kTiny        ? 12
                                                : (kConsumers == 1 ? 8 : 6);
  // The first tile's first k-tiles are copied from the kernel's prologue, ahead of the producer
  // loop (see the kernel): kEarlyFirst of them before the start barrier, the rest of
  // kEarlyStages right after it, multicast on one-consumer tiles (on two-consumer tiles, whose
  // prologue delays the consumers' setmaxnreg, each block copies all of B for them). The counts
  // are the best of those tried (benchmarks/NOTES.md).
  static constexpr int kEarlyFirst = 1;
  static constexpr int kEarlyStages = kConsumers == 1 ? 4 : 2;
  static constexpr bool kEarlyMulticast = kConsumers == 1;
  static constexpr int kWarpgroupThreads = 128;
  static constexpr int kThreads = (kConsumers + 1) * kWarpgroupThreads;  // + the producer's
  // setmaxnreg: the producer needs a handful of registers, each consumer 128 accumulators plus
  // addressing; 128·40 + 256·232 = 64512 of the SM's 65536. With one consumer the kernel is
  // compiled at 232 registers for all 256 threads (59392), so the consumer's increase is a no-op.
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  // Tile rows per rasterization group (L2 reuse). The pairs of 128×256 tiles resident at once on
  // an H100/H200 then cover about 16 tile rows × 8 tile columns, ~2048 rows of A and ~2048 columns
  // of B: of the shapes a wave can take, the one that reads the fewest operand bytes (groups of 8
  // read about a quarter more, and ran slower: benchmarks/NOTES.md).
  static constexpr int kGroupM = 16;
  // An MN-major operand (16-bit, or tf32's A, which passes through registers: the tf32 wgmma
  // reads B K-major only) is copied as boxes of (kBlockK rows of K) × (kMNBox along M or N): one
  // 128-byte swizzled row of M or N.
  static constexpr int kMNBox = kSwizzleBytes / kElementBytes;
  static constexpr int kSwizzleAtomBytes = 8 * kSwizzleBytes;  // 8 rows: the swizzle's period
  static constexpr int kStageBytesA = kBlockM * kBlockK * kElementBytes;  // 16 KB (8: 1 consumer)
  static constexpr int kStageBytesB = kBlockN * kBlockK * kElementBytes;  // 32 KB (or 16)
  static constexpr int kMNBoxBytes = kMNBox * kBlockK * kElementBytes;    // 8 KB
  // The epilogue: C leaves through shared memory in boxes of 64 rows × 128 bytes, swizzled like
  // the operands (so the fragment stores are conflict-free), each written out by one TMA store
  // that runs while the consumers go on to the next tile. Each consumer cycles through
  // kEpilogueBoxes such buffers: as many as fit beside the stages, at most a whole 64×256 tile.
  static constexpr int kBoxCols = kSwizzleBytes / kElementBytes;  // 64 (16-bit) or 32 (fp32)
  // Whether C leaves through the boxes at all (a slim tile is not whole boxes: from registers).
  static constexpr bool kBoxedC = !kSlim && kBlockN % kBoxCols == 0;
  // A consumer's boxes: 16-bit 4, 3, 2 or 1 (256, 192, 128, 64 columns); fp32 8, 6, 4 or 2 (256,
  // 192, 128, 64).
  static constexpr int kBoxesPerTile = kBoxedC ? kBlockN / kBoxCols : 1;
  static constexpr int kBoxBytes = kMmaM * kSwizzleBytes;         // 8 KB
  static constexpr int kSmemLimit = 227 * 1024;  // sm_90's dynamic shared memory per block
  static constexpr int kPipelineBytes = kStages * (kStageBytesA + kStageBytesB);
  // full/empty per stage, and the bias row's full/empty.
  static constexpr int kBarrierBytes = (2 * kStages + 2) * 8;
  // The tile's bias as fp32, staged in shared memory by a producer warp while the previous tile
  // runs, so that each consumer starts its accumulators at it: the bias then costs no barrier
  // between the consumers and no add at the packing (benchmarks/NOTES.md, session 9). One row
  // serves every consumer: their tiles share the columns.
  static constexpr int kBiasBytes = kBlockN * static_cast<int>(sizeof(float));
  static constexpr int kFreeBoxes =
      (kSmemLimit - kPipelineBytes - kBarrierBytes - kBiasBytes - kSwizzleAtomBytes) /
      (kConsumers * kBoxBytes);
  static constexpr int kEpilogueBoxes = kFreeBoxes < kBoxesPerTile ? kFreeBoxes : kBoxesPerTile;
  // Stages, then the epilogue boxes (each 1024-byte aligned, the swizzle atom), then the
  // 2·kStages + 2 mbarriers, then the bias row; plus slack to align the dynamic shared memory base
  // up to 1024.
  static constexpr int kEpilogueBytes = kConsumers * kEpilogueBoxes * kBoxBytes;
  static constexpr int kSmemBytes =
      kPipelineBytes + kEpilogueBytes + kBarrierBytes + kBiasBytes + kSwizzleAtomBytes;

  static_assert(kEpilogueBoxes >= 1, "the stages leave room for one epilogue box per consumer");
  static_assert(kBlockN % 16 == 0, "the bias row is whole 16-byte chunks of fp32 pairs");
  static_assert(kSmemBytes <= kSmemLimit, "fits sm_90's shared memory");
  static_assert(kBlockM % kMNBox == 0 && (kBlockN % kMNBox == 0 || kSlim),
                "MN-major tiles are whole 64-element boxes (slim tiles read B K-major only)");
  static_assert(kBlockK % kMmaK == 0, "a k-tile is whole wgmma steps");
  static_assert(kStageBytesA % kSwizzleAtomBytes == 0 && kStageBytesB % kSwizzleAtomBytes == 0 &&
                    kBoxBytes % kSwizzleAtomBytes == 0,
                "every stage and box starts on a swizzle atom");
  static_assert(kProducerRegs * kWarpgroupThreads + kConsumerRegs * kConsumers * kWarpgroupThreads
                    <= 65536, "setmaxnreg cannot hand out more registers than the SM has");
};

// What the kernel needs besides the two tensor maps: the output, the bias, the tile walk.
struct WgmmaParams {
  int M, N, K, batch;
  int tiles_m, tiles_n;
  void* c;
  int64_t c_stride_m, c_stride_n, c_stride_batch;
  const void* bias;  // (N), or null
  int64_t bias_stride;
  bool tma_store;    // C is TMA-addressable (unit column stride, 16-byte aligned rows): the
                     // epilogue goes through shared memory; else straight from registers
  bool c_transposed; // tf32 only: the launcher runs Cᵀ = Bᵀ·Aᵀ and map_c is the caller's C, whose
                     // rows are this product's columns: the boxes are filled transposed (their
                     // rounds whole pairs of boxes: store_round's static_assert)
  // mm_tiled_row_sum's slice sums of A, taken by the producer warpgroup's idle warps, tile
  // column j summing its rows over slice j; partials null where they are not this kernel's.
  RowSumView row_sum;
  // Stream-K (16-bit 128×256 tiles; 128×128 ones of two tile rows with a long K; under
  // TORCH_GEMM_WGMMA_STREAM_K=3 also other 128×128 ones, one row of 64×128 ones and forced
  // 64×128 ones, paired or not; unsplit:
  // kStreamK): the walk's last sk_turns turns (every turn where the plan deals out all, its
  // Shape::stream_k_all) are not dealt out whole but as k-tiles, evenly over every
  // cluster (TileWalk), so that no cluster idles through a last partial turn; 0: every turn
  // whole. A cluster that computes a tile's k-tiles but not its last ones leaves its sums in
  // sk_partials, block b's consumer w at (b·kConsumers + w) · kAccumulators · 128 floats, and
  // sets sk_flags[b·kConsumers + w] to sk_tag; the cluster with the tile's last k-tiles waits for
  // that tag, adds them and clears the flag to 0. No memset precedes the launch: the tag is one no
  // earlier launch of the process used (the launcher's next_flag_tag), and every flag a launch
  // sets is cleared by its one reader in the same launch, so a CUDA graph's replays, which repeat
  // the captured tag over the same workspace, each start from cleared flags; memory the workspace
  // reuses holds the tag only by a 64-bit coincidence. (TORCH_GEMM_WGMMA_FLAGS=zeroed zeroes them
  // first, for initcheck, which counts the waiting loads before the store as uninitialized reads.)
  int sk_turns = 0;
  float* sk_partials = nullptr;
  unsigned long long* sk_flags = nullptr;
  unsigned long long sk_tag = 0;
  // Split-K over split_groups clusters of kSplitK blocks a tile (1: one cluster): cluster c takes
  // tile c % turns and group c / turns, its block s the slice group · kSplitK + s of K. Every
  // group but the last leaves its blocks' owned sums (after reduce_split) in sk_partials and sets
  // their flags in sk_flags to sk_tag (cleared by their reader, as stream-K's); the last group adds
  // them to its own in group order and stores the tile (reduce_groups).
  int split_groups = 1;
  // 3xTF32 (Config::kPromoted): the leading k-tiles that hold cross terms only (the first two of
  // the product's three segments, plan_3xtf32), which Consumer::run_promoted sums without
  // promoting each k-tile; the producer maps the three segments onto the split rows' two.
  int cross_k_tiles = 0;
};

}  // namespace torch_gemm
