// Rung 7, wgmma_sm90 (bf16/fp16, fp32 as tf32), the roles composed: over mma_sm80, TMA feeds
// warpgroup MMAs from swizzled shared memory (no operand address or bounds test in the main loop),
// and warp-specialized producer and consumers overlap copies, math and stores on a persistent grid.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/row_sum.cuh"
#include "kernels/sm90/config.cuh"
#include "kernels/sm90/epilogue.cuh"
#include "kernels/sm90/mainloop.cuh"
#include "kernels/sm90/ptx.cuh"
#include "kernels/sm90/reduction.cuh"
#include "kernels/sm90/tile_scheduler.cuh"

namespace torch_gemm {

// One producer warpgroup (a thread issuing every TMA copy, a warp staging the bias, two warps
// summing A's rows for mm_tiled_row_sum) and kConsumers consumer warpgroups (64 rows of the tile
// each), registers moved to the consumers by setmaxnreg.
// kKMajorA / kKMajorB: whether A (M, K) and B (K, N) are K-major in memory (stride 1 along K),
// which decides the boxes the producer copies and the descriptors and transposes of the wgmmas.
// kClusterM: blocks per cluster, each computing one of kClusterM tiles stacked along M. They
// share B: each block's producer copies 1/kClusterM of it and multicasts it to all of them, so
// B crosses L2 → SM once per cluster instead of once per block. kConsumers, kMmaN: WgmmaConfig's.
// kSplitK > 1 (16-bit, kClusterM = 1): a cluster of kSplitK blocks shares each tile, block s
// taking the s-th slice of K, and their partial sums meet in shared memory (reduce_split): for
// products with too few tiles to fill the SMs. The launcher then gives each cluster one tile.
// kStreamK: the walk may end in stream-K pieces (WgmmaParams::sk_turns); without it, every walk
// is whole turns.
template <typename T, bool kKMajorA, bool kKMajorB, int kClusterM, int kConsumers, int kSplitK,
          int kMmaN, bool kStreamK>
__global__ void __launch_bounds__(WgmmaConfig<T, kConsumers, kMmaN>::kThreads, 1)
gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                       const __grid_constant__ CUtensorMap map_b,
                       const __grid_constant__ CUtensorMap map_c,
                       const __grid_constant__ WgmmaParams p) {
#ifdef TORCH_GEMM_SM90A_DEVICE
  using Config = WgmmaConfig<T, kConsumers, kMmaN>;
  using namespace sm90;
  constexpr int kStages = Config::kStages, kBlockK = Config::kBlockK;
  static_assert(kClusterM == 1 || kClusterM == 2, "one block, or a pair sharing B");
  static_assert(kSplitK == 1 || (kClusterM == 1 && !Config::kTf32 && kMmaN == 256 &&
                                 Config::kBoxesPerTile % kSplitK == 0),
                "split-K: 16-bit C on 256-column tiles, owned in whole epilogue boxes, clusters "
                "of the K slices");
  constexpr int kClusterBlocks = kClusterM * kSplitK;
  static_assert(Config::kBlockN / kClusterM % Config::kMNBox == 0,
                "each block multicasts whole 64-element boxes of an N-major B");
  static_assert(!Config::kTf32 || kKMajorB, "tf32 wgmma reads B K-major only (A: registers)");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume atoms start there.
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + Config::kSwizzleAtomBytes - 1) &
      ~static_cast<uintptr_t>(Config::kSwizzleAtomBytes - 1));
  unsigned char* sA = smem;                                            // (kStages, 16 or 8 KB)
  unsigned char* sB = smem + kStages * Config::kStageBytesA;           // (kStages, 32 KB)
  unsigned char* sC = sB + kStages * Config::kStageBytesB;  // (consumer, kEpilogueBoxes, 8 KB)
  uint64_t* full = reinterpret_cast<uint64_t*>(sC + Config::kEpilogueBytes);
  uint64_t* empty = full + kStages;
  uint64_t* bias_full = empty + kStages;  // the bias row holds this tile's bias
  uint64_t* bias_empty = bias_full + 1;   // every consumer warp has started from it
  float* sBias = reinterpret_cast<float*>(bias_empty + 1);  // (kBlockN): 0 past N

  const int warpgroup = threadIdx.x / Config::kWarpgroupThreads;
  const int turns = (p.tiles_m + kClusterM - 1) / kClusterM * p.tiles_n * p.batch;
  // Rank in the cluster: the tile of a pair along M, or the slice of K.
  const uint32_t cluster_ctarank = kClusterBlocks > 1 ? cluster_rank() : 0;
  const uint32_t rank = kSplitK > 1 ? 0 : cluster_ctarank;
  const uint32_t split = kSplitK > 1 ? cluster_ctarank : 0;
  const int first_turn = static_cast<int>(blockIdx.x) / kClusterBlocks;
  const int turn_step = static_cast<int>(gridDim.x) / kClusterBlocks;
  // This block's k-tiles of each tile: all, or its slice (maybe empty: its partials are zeros).
  const int all_k_tiles = (p.K + kBlockK - 1) / kBlockK;
  const int slice_k_tiles = (all_k_tiles + kSplitK - 1) / kSplitK;
  const int k_begin = min(static_cast<int>(split) * slice_k_tiles, all_k_tiles);
  const int k_end = min(k_begin + slice_k_tiles, all_k_tiles);
  // The bias enters once, through the first slice's partials.
  const bool has_bias = p.bias != nullptr && split == 0;
  static_assert(!kStreamK || (!Config::kTf32 && kConsumers == 2 && kSplitK == 1),
                "stream-K: 16-bit two-consumer tiles, unsplit");
  // Only the stream-K kernel reads sk_turns: in the others every walk is whole turns, known so at
  // compile time, and the walk's stream-K state takes no registers.
  const int sk_turns = kStreamK ? p.sk_turns : 0;
  const auto make_walk = [&] {
    return TileWalk(first_turn, turn_step, turns, sk_turns, all_k_tiles, k_begin, k_end);
  };

  // One stage's copies (by the producer thread), counted on full[stage]: this block's A, and its
  // slice of B multicast to the cluster, or (whole_b) all of B into this block alone.
  constexpr int kSliceN = Config::kBlockN / kClusterM;  // the part of B a block multicasts
  const auto issue_stage = [&](int stage, int kt, int z, int m0, int n0, bool whole_b) {
    constexpr uint32_t kStageBytes = Config::kStageBytesA + Config::kStageBytesB;
    constexpr uint16_t kClusterMask = (1u << kClusterM) - 1;
    mbarrier_expect_tx(&full[stage], kStageBytes);
    unsigned char* a = sA + stage * Config::kStageBytesA;
    unsigned char* b = sB + stage * Config::kStageBytesB;
    const int k0 = kt * kBlockK;
    if constexpr (kKMajorA) {
      tma_load(a, &map_a, &full[stage], k0, m0, z);  // (kBlockM rows, one row of K)
    } else {
#pragma unroll
      for (int j = 0; j < Config::kBlockM / Config::kMNBox; ++j) {  // (64 K rows, 64 M) each
        tma_load(a + j * Config::kMNBoxBytes, &map_a, &full[stage], m0 + j * Config::kMNBox, k0,
                 z);
      }
    }
    const bool multicast = kClusterM > 1 && !whole_b;
#pragma unroll
    for (int r = 0; r < kClusterM; ++r) {
      if (!whole_b && r != static_cast<int>(rank)) continue;
      const int slice = r * kSliceN;
      if constexpr (kKMajorB) {
        // (kSliceN rows, one row of K): rows slice .. slice + kSliceN of the (kBlockN, K) tile.
        unsigned char* dst = b + slice * Config::kSwizzleBytes;
        if (multicast) {
          tma_load_multicast(dst, &map_b, &full[stage], kClusterMask, k0, n0 + slice, z);
        } else {
          tma_load(dst, &map_b, &full[stage], k0, n0 + slice, z);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kSliceN / Config::kMNBox; ++j) {  // (64 K rows, 64 N) each
          const int box = slice / Config::kMNBox + j;
          unsigned char* dst = b + box * Config::kMNBoxBytes;
          if (multicast) {
            tma_load_multicast(dst, &map_b, &full[stage], kClusterMask, n0 + box * Config::kMNBox,
                               k0, z);
          } else {
            tma_load(dst, &map_b, &full[stage], n0 + box * Config::kMNBox, k0, z);
          }
        }
      }
    }
  };

  // The first tile's first k-tiles leave from here, not from the producer loop, which thread 0
  // reaches only after the start barrier, setmaxnreg and the cluster barrier, in code far
  // further on, cold in the instruction cache: a small product's block would wait a large part
  // of its time for its first k-tile (benchmarks/NOTES.md). kEarlyFirst k-tiles go as soon as
  // thread 0 has the tile's origin (it initializes their full barriers itself), each block
  // copying all of B for them: the peer's barriers may not be initialized yet. Up to
  // kEarlyStages go right after the start barrier, multicast or not.
  static_assert(Config::kEarlyFirst <= Config::kEarlyStages && Config::kEarlyStages <= kStages,
                "the early k-tiles fit in the ring");
  constexpr bool kEarlyMulticast = Config::kEarlyMulticast && kClusterM > 1;
  // The first copies wait on three things at a block's start, each from cold caches: their
  // barriers, the first tile's origin (integer divisions) and the tensor maps' descriptors. Warp 1
  // initializes the other barriers while thread 0 initializes the early ones, works out the
  // origin and has the descriptors fetched. Both blocks of a pair compute the same early k-tiles
  // (from first_turn, turns and K), so that each stage's bytes are counted alike in both: whole B
  // or each one's multicast slice.
  int first_z = 0, first_m0 = 0, first_n0 = 0;
  int early = 0;  // thread 0: k-tiles of the first unit already issued
  // Thread 0's walk: the prologue takes its first unit, the producer loop the rest.
  TileWalk producer_walk = make_walk();
  WorkUnit first_unit;
  bool have_first = false;
  if (threadIdx.x == 0) {
    prefetch_tensormap(&map_a);
    prefetch_tensormap(&map_b);
    if (p.tma_store) prefetch_tensormap(&map_c);
    for (int s = 0; s < Config::kEarlyFirst; ++s) mbarrier_init(&full[s], 1);
    fence_mbarrier_init();
    have_first = producer_walk.next(&first_unit);
    tile_origin<Config, kClusterM>(p, first_unit.turn, rank, &first_z, &first_m0, &first_n0);
    if (have_first) early = min(Config::kEarlyFirst, first_unit.k_end - first_unit.k_begin);
    for (int s = 0; s < early; ++s) {
      issue_stage(s, first_unit.k_begin + s, first_z, first_m0, first_n0, true);
    }
  }
  if (threadIdx.x == 32) {
    for (int s = 0; s < kStages; ++s) {
      // The producer's expect_tx arrival (thread 0 initialized the first kEarlyFirst).
      if (s >= Config::kEarlyFirst) mbarrier_init(&full[s], 1);
      // One arrival per consumer warpgroup of every block the stage's multicasts reach.
      mbarrier_init(&empty[s], Config::kConsumers * kClusterM);
    }
    mbarrier_init(bias_full, 32);                       // each lane of the bias warp
    mbarrier_init(bias_empty, Config::kConsumers * 4);  // each consumer warp
    fence_mbarrier_init();
  }
  if (!has_bias) {
    for (int i = threadIdx.x; i < Config::kBlockN; i += Config::kThreads) sBias[i] = 0.0f;
  }
  // This block's threads see the initialized barriers and the zero row. A pair's peer sees the
  // barriers (released by the fence) once it has waited on the cluster barrier. Every thread
  // waits once, late: warp 0 before its first multicast (the early k-tiles' or the loop's), the
  // rest of the producer warpgroup after setmaxnreg, the consumers before their tile loop (before
  // their first remote arrival), so that the barrier's latency passes under the roles' setup.
  // Split-K blocks touch their peers' shared memory only after the cluster barriers of
  // reduce_split.
  __syncthreads();
  if constexpr (kClusterM > 1) cluster_arrive_relaxed();
  if (kEarlyMulticast && threadIdx.x < 32) cluster_wait();
  if (threadIdx.x == 0 && have_first) {
    const int total = min(Config::kEarlyStages, first_unit.k_end - first_unit.k_begin);
    for (; early < total; ++early) {
      issue_stage(early, first_unit.k_begin + early, first_z, first_m0, first_n0,
                  !kEarlyMulticast);
    }
  }
  __syncwarp();  // warp 0 reconverges: setmaxnreg and the cluster barrier need whole warps

  if (warpgroup == 0) {
    // Producer. One thread issues every copy; the others give their registers away, warp 1
    // stages the bias, and two warps sum A's rows where mm_tiled_row_sum asks for them.
    setmaxnreg_dec<Config::kProducerRegs>();
    if (kClusterM > 1 && !(kEarlyMulticast && threadIdx.x < 32)) cluster_wait();
    if (threadIdx.x == 0) {
      int stage = early;
      uint32_t phase = 0;
      if (stage == kStages) stage = 0, phase = 1;
      int z = first_z, m0 = first_m0, n0 = first_n0;
      WorkUnit unit = first_unit;
      for (bool more = have_first, first = true; more; first = false) {
        for (int kt = unit.k_begin + (first ? early : 0); kt < unit.k_end; ++kt) {
          // Every consumer this stage's copies reach is done with it.
          mbarrier_wait(&empty[stage], phase ^ 1);
          issue_stage(stage, kt, z, m0, n0, false);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
        // The next unit and its tile's origin, while this one's last copies land (past the last
        // unit, unused).
        more = producer_walk.next(&unit);
        tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
      }
      // The peer's consumers arrive on this block's empty barriers until their last k-tile, so the
      // block stays until every stage's last release has come: then no arrival reaches it after
      // it exits, and every multicast into it has landed (its consumers waited for them). This
      // replaces a cluster barrier at the exit, whose release form costs a block more. It relies
      // on both blocks of a pair walking the same units and k-tiles, the early ones included
      // (both follow first_turn, turn_step, sk_turns and the whole of K): a schedule that
      // differed by rank would need the barrier back.
      if constexpr (kClusterM > 1) {
        for (int s = 0; s < kStages; ++s) {
          mbarrier_wait(&empty[stage], phase ^ 1);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
      }
    } else if (has_bias && threadIdx.x / 32 == 1) {
      // Each tile's bias row, read from global memory before the previous tile's consumers have
      // let go of the row in shared memory (so the reads' latency passes under that tile).
      static_assert(kRowSumWarps <= 2, "the row-sum warps (the last ones) leave warp 1 free");
      constexpr int kPerLane = Config::kBlockN / 32;
      const int lane = threadIdx.x % 32;
      const T* bias = static_cast<const T*>(p.bias);
      uint32_t bias_phase = 0;
      TileWalk walk = make_walk();
      WorkUnit unit;
      while (walk.next(&unit)) {
        int z, m0, n0;
        tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
        float row[kPerLane];
        // A stream-K partial sum starts at zero: the bias enters once, with the tile's last
        // k-tiles.
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          const int n = n0 + i * 32 + lane;
          row[i] = n < p.N && !unit.partial ? to_acc<float>(bias[n * p.bias_stride]) : 0.0f;
        }
        mbarrier_wait(bias_empty, bias_phase ^ 1);
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) sBias[i * 32 + lane] = row[i];
        mbarrier_arrive(bias_full);  // releases this lane's stores to the consumers
        bias_phase ^= 1;
      }
    } else if (kSplitK == 1 && p.row_sum.partials != nullptr &&
               threadIdx.x / 32 >= 4 - kRowSumWarps) {
      // mm_tiled_row_sum's sums of A's rows: each tile, as it starts, sums its rows over the
      // slice of K of its tile column, read from global memory (L2) rather than from the stages
      // (the main loop keeps shared memory near its bandwidth: consumers summing from the stages
      // slowed their tiles markedly, benchmarks/NOTES.md). 16-bit only (the launcher never fuses
      // float32's): compiled into the tf32 kernels, whose consumers hold two sets of A
      // fragments, it made them spill.
      if constexpr (!Config::kTf32) {
        constexpr int kRows = Config::kBlockM / kRowSumWarps;
        const int sum_warp = threadIdx.x / 32 - (4 - kRowSumWarps);
        TileWalk walk = make_walk();
        WorkUnit unit;
        while (walk.next(&unit)) {
          if (unit.partial) continue;  // once a tile: with its last k-tiles
          int z, m0, n0;
          tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
          const int slice = n0 / Config::kBlockN;
          if (slice >= p.row_sum.slices) continue;
          sum_rows<T, kRows, kRowSumFusedBatch>(p.row_sum, z, m0 + sum_warp * kRows, slice);
        }
      }
    }
    // The consumers' two barriers of reduce_split (one tile a cluster).
    if constexpr (kSplitK > 1) {
      __syncwarp();  // warp 0 reconverges first: the cluster barrier needs whole warps
      cluster_sync();
      cluster_sync();
    }
  } else {
    // Consumers: warpgroup 1 computes rows 0..63 of each tile, warpgroup 2 (if any) rows 64..127.
    setmaxnreg_inc<Config::kConsumerRegs>();
    const int consumer = warpgroup - 1;
    const bool leader = threadIdx.x % Config::kWarpgroupThreads == 0;
    // Per wgmma: a K-major tile advances 32 bytes along its 128-byte rows, an MN-major one
    // kMmaK rows of 128 bytes.
    constexpr uint32_t kStepA = kKMajorA ? Config::kMmaK * Config::kElementBytes
                                         : Config::kMmaK * Config::kSwizzleBytes;
    constexpr uint32_t kStepB = kKMajorB ? Config::kMmaK * Config::kElementBytes
                                         : Config::kMmaK * Config::kSwizzleBytes;
    // The leading byte offset: unused by swizzled K-major tiles (16, the smallest encodable), the
    // distance between 64-element boxes in MN-major ones.
    constexpr uint32_t kLeadingA = kKMajorA ? 16 : Config::kMNBoxBytes;
    constexpr uint32_t kLeadingB = kKMajorB ? 16 : Config::kMNBoxBytes;
    // A consumer's 64 rows of A: 64 rows of 128 bytes (K-major), or 64 / kMNBox boxes (MN-major).
    const uint32_t consumer_offset_a =
        kKMajorA ? consumer * Config::kMmaM * Config::kSwizzleBytes
                 : consumer * (Config::kMmaM / Config::kMNBox) * Config::kMNBoxBytes;
    const unsigned char* ring = sC + consumer * Config::kEpilogueBoxes * Config::kBoxBytes;
    const uint32_t ring_addr = smem_u32(ring);
    // 16-bit C on 128×256 tiles leaves late: a tile is packed (rounded) into 64 registers at its
    // end, and its rounds of TMA stores go out during the next tile's first k-tiles, while that
    // tile's wgmmas run, instead of idling the tensor cores through the stores. The main loop
    // keeps shared memory near its bandwidth (the wgmmas read most of it), so the stores go one
    // box (kPendingRing) every kStoreSpacing k-tiles: more boxes a k-tile lengthened those
    // k-tiles by more than they saved (benchmarks/NOTES.md). fp32 C (tf32) would need all 128
    // registers; on 64×256 tiles a block has one or two tiles, nothing to hide behind (deferred,
    // they ran slower). Those leave at once, through the whole ring.
    constexpr bool kDeferStores = !Config::kTf32 && Config::kConsumers == 2;
    // tf32's A fragments from an MN-major tile load rows in accumulator_row's permuted order.
    constexpr bool kRowsPermuted = Config::kTf32 && !kKMajorA;
    constexpr int kRounds = Config::kBoxesPerTile / Config::kEpilogueBoxes;
    constexpr int kPendingRing = kDeferStores ? 1 : Config::kEpilogueBoxes;
    constexpr int kPendingRounds = Config::kBoxesPerTile / kPendingRing;
    constexpr int kStoreSpacing = kDeferStores ? 2 : 1;
    uint32_t packed[Config::kTf32 ? 1 : Config::kAccumulators / 2];
    bool pending = false;  // packed holds a tile not yet (all) stored
    int pending_z = 0, pending_row0 = 0, pending_n0 = 0;
    // Rounds [from, to) of the packed tile. The rounds are unrolled so that each indexes packed
    // with constants: a register array indexed at run time would live in local memory.
    const auto store_pending_rounds = [&](int from, int to) {
      if constexpr (!Config::kTf32) {
#pragma unroll
        for (int round = 0; round < kPendingRounds; ++round) {
          if (round < from || round >= to) continue;
          store_round<Config, false, kPendingRing>(
              &map_c, ring_addr, ring, consumer, leader, round, pending_z, pending_row0,
              pending_n0, [&](int box, uint32_t box_addr) {
                fill_box_packed<Config>(packed, box, box_addr);
              });
        }
      }
    };
    float d[Config::kAccumulators];
    int stage = 0;
    uint32_t phase = 0, bias_phase = 0;
    // Hands a stage back to every block whose producer writes into it.
    const auto release = [&](int released) {
      if (!leader) return;
      if constexpr (kClusterM > 1) {
#pragma unroll
        for (uint32_t r = 0; r < kClusterM; ++r) mbarrier_arrive_cluster(&empty[released], r);
      } else {
        mbarrier_arrive(&empty[released]);
      }
    };
    // tf32: A's fragments of one k-tile (kBlockK / kMmaK wgmmas × 4 registers), in two sets.
    constexpr int kTf32Steps = Config::kTf32 ? kBlockK / Config::kMmaK : 1;
    uint32_t frag_even[kTf32Steps][4] = {}, frag_odd[kTf32Steps][4] = {};
    // Both sets stay live through every k-tile (an empty asm reads them after each wait), so the
    // compiler gives them separate registers and writes neither while wgmmas may read it: it
    // cannot see that the wgmmas are asynchronous.
    const auto keep_fragments = [&] {
      if constexpr (Config::kTf32) {
#pragma unroll
        for (int kk = 0; kk < kTf32Steps; ++kk) {
          asm volatile("" ::"r"(frag_even[kk][0]), "r"(frag_even[kk][1]), "r"(frag_even[kk][2]),
                       "r"(frag_even[kk][3]), "r"(frag_odd[kk][0]), "r"(frag_odd[kk][1]),
                       "r"(frag_odd[kk][2]), "r"(frag_odd[kk][3]));
        }
      }
    };
    // One tf32 k-tile: A's fragments loaded into `frag` and rounded, then the wgmmas issued.
    const auto tf32_k_tile = [&](const unsigned char* a, const unsigned char* b,
                                 uint32_t (&frag)[kTf32Steps][4]) {
      if constexpr (Config::kTf32) {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
#pragma unroll
        for (int kk = 0; kk < kTf32Steps; ++kk) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            // Row m of the consumer's 64 (fragment i: wgmma's row l/4 + 8(i%2)), column k.
            const uint32_t m = accumulator_row<kRowsPermuted>(warp, lane, i % 2);
            const uint32_t k = kk * 8 + lane % 4 + (i / 2) * 4;
            // K-major: row m is 128 bytes of K, k in its 16-byte chunk k/4. MN-major: k is a
            // 128-byte row of 32 rows of A in box m/32, m in its chunk m%32/4. Either way the
            // chunk is XORed with the 128-byte row's index mod 8.
            uint32_t offset;
            if constexpr (kKMajorA) {
              offset = m * Config::kSwizzleBytes + (((k / 4) ^ (m % 8)) << 4) + k % 4 * 4;
            } else {
              offset = m / Config::kMNBox * Config::kMNBoxBytes + k * Config::kSwizzleBytes +
                       (((m % Config::kMNBox / 4) ^ (k % 8)) << 4) + m % 4 * 4;
            }
            float x;
            asm volatile("ld.shared.f32 %0, [%1];"
                         : "=f"(x)
                         : "r"(smem_u32(a) + offset)
                         : "memory");
            frag[kk][i] = __float_as_uint(round_to_tf32(x));
          }
        }
        fence_accumulators(d);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kTf32Steps; ++kk) {
          const uint64_t desc_b =
              smem_descriptor(b + kk * kStepB, kLeadingB, Config::kSwizzleAtomBytes);
          wgmma_m64n256k8_tf32(d, frag[kk], desc_b, 1);
        }
        wgmma_commit();
      }
    };
    // 16-bit operands: each wgmma's descriptors are stage 0's low words plus offsets. Computed
    // once, and held in registers (the empty asm) so that the compiler does not redo the address
    // arithmetic per wgmma, which made the k-loop execute markedly more instructions
    // (benchmarks/NOTES.md).
    constexpr uint64_t kDescHigh = smem_descriptor_high(Config::kSwizzleAtomBytes);
    uint32_t desc_a0 = smem_descriptor_low(sA + consumer_offset_a, kLeadingA);
    uint32_t desc_b0 = smem_descriptor_low(sB, kLeadingB);
    asm volatile("" : "+r"(desc_a0), "+r"(desc_b0));
    // The unit's tile origin, and the next unit's: computed while the first k-tile's wgmmas run,
    // so that its integer divisions stall no warp between tiles. Past the last unit the origin is
    // unused.
    TileWalk walk = make_walk();
    WorkUnit unit, next_unit;
    bool more = walk.next(&unit), next_more = false;
    int z, m0, n0, next_z = 0, next_m0 = 0, next_n0 = 0;
    tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
    // Stream-K partial sums: this block's consumer's slot, under the cluster's index.
    const auto sk_slot = [&](int cluster) {
      return (cluster * kClusterM + static_cast<int>(rank)) * kConsumers + consumer;
    };
    // Before the first release, which may arrive on the peer's barriers.
    if constexpr (kClusterM > 1) cluster_wait();
    for (; more; more = next_more, unit = next_unit, z = next_z, m0 = next_m0, n0 = next_n0) {
      const auto prepare_next_tile = [&] {
        next_more = walk.next(&next_unit);
        tile_origin<Config, kClusterM>(p, next_unit.turn, rank, &next_z, &next_m0, &next_n0);
        // Keeps the compiler from sinking the divisions to where the results are used.
        asm volatile("" : "+r"(next_z), "+r"(next_m0), "+r"(next_n0));
        if constexpr (kStreamK) {
          asm volatile("" : "+r"(next_unit.k_begin), "+r"(next_unit.k_end),
                       "+r"(next_unit.contributors_from));
        }
      };
      // The accumulators start at the tile's bias, from the row the bias warp staged (all zeros
      // without a bias). One unconditional definition: accumulators defined on two paths made
      // ptxas serialize every wgmma (its warning C7515, benchmarks/NOTES.md).
      if (has_bias) mbarrier_wait(bias_full, bias_phase);
      // Each row's pair loaded by ld.shared straight into its accumulators: generic loads copied
      // into the lower row's took many instructions a thread, with every tensor core idle.
      const uint32_t col = smem_u32(sBias + threadIdx.x % 4 * 2);  // columns 8j + 2(l%4), +1
#pragma unroll
      for (int j = 0; j < Config::kMmaN / 8; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                       : "=f"(d[4 * j + 2 * half]), "=f"(d[4 * j + 2 * half + 1])
                       : "r"(col + 32 * j)
                       : "memory");
        }
      }
      if (has_bias) {
        __syncwarp();  // the warp's reads of the row are done before it is handed back
        if (threadIdx.x % 32 == 0) mbarrier_arrive(bias_empty);
        bias_phase ^= 1;
      }
      int previous = -1;
      for (int kt = unit.k_begin; kt < unit.k_end; ++kt) {
        mbarrier_wait(&full[stage], phase);
        if constexpr (Config::kTf32) {
          const unsigned char* a = sA + stage * Config::kStageBytesA + consumer_offset_a;
          const unsigned char* b = sB + stage * Config::kStageBytesB;
          // A passes through registers to be rounded to tf32 (B, K-major in shared memory, is
          // read as the tensor cores find it, or was rounded where it was repacked). The
          // fragments alternate between two register sets by k-tile parity, so one k-tile's
          // loads proceed while the previous k-tile's wgmmas still read the other set.
          if (kt % 2 == 0) {
            tf32_k_tile(a, b, frag_even);
          } else {
            tf32_k_tile(a, b, frag_odd);
          }
        } else {
          fence_accumulators(d);
          wgmma_fence();
          const uint32_t stage_a = desc_a0 + stage * (Config::kStageBytesA >> 4);
          const uint32_t stage_b = desc_b0 + stage * (Config::kStageBytesB >> 4);
#pragma unroll
          for (int kk = 0; kk < kBlockK / Config::kMmaK; ++kk) {
            wgmma_ss<T, kKMajorA ? 0 : 1, kKMajorB ? 0 : 1>(
                d, kDescHigh | (stage_a + kk * (kStepA >> 4)),
                kDescHigh | (stage_b + kk * (kStepB >> 4)), 1);
          }
          wgmma_commit();
        }
        if (kt == unit.k_begin) prepare_next_tile();
        if (pending && (kt - unit.k_begin) % kStoreSpacing == 0) {
          const int round = (kt - unit.k_begin) / kStoreSpacing;
          store_pending_rounds(round, round + 1);
        }
        // The previous k-tile's wgmmas have finished reading their stage (and, for tf32, their
        // fragments): hand it back. This k-tile's stay in flight while the next stage is awaited.
        wgmma_wait<1>();
        fence_accumulators(d);
        keep_fragments();
        if (previous >= 0) release(previous);
        previous = stage;
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
      if (unit.k_end == unit.k_begin) prepare_next_tile();  // a split-K block's empty slice
      wgmma_wait<0>();
      fence_accumulators(d);
      if (previous >= 0) release(previous);
      // The previous tile's rounds that its k-tiles were too few to carry.
      if (pending) {
        store_pending_rounds((unit.k_end - unit.k_begin + kStoreSpacing - 1) / kStoreSpacing,
                             kPendingRounds);
      }
      pending = false;
      if constexpr (kStreamK) {
        // Without the tile's last k-tiles: the sums go to the workspace, for the cluster with
        // them. With them, after others' k-tiles: their sums are added first.
        if (unit.partial) {
          store_partial_sums<Config>(p, d, sk_slot(first_turn), consumer, leader);
          continue;
        }
        for (int c = unit.contributors_from; c < first_turn; ++c) {
          add_partial_sums<Config>(p, d, sk_slot(c), consumer, leader);
        }
      }
      // The epilogue: from registers where TMA cannot store C; else 16-bit C packed (and, on
      // 128×256 tiles, left for the next tile's k-tiles to store), fp32 C through the ring.
      const int row0 = m0 + consumer * Config::kMmaM;
      if constexpr (kSplitK > 1) {
        // Sums of the owned columns (a 1/kSplitK share of the boxes), stored at once.
        reduce_split<Config, kSplitK>(d, sA, split);
        if (!p.tma_store) {
          store_accumulators<Config, T, kRowsPermuted, kSplitK>(p, d, z, row0, n0, split);
        } else {
          constexpr int kOwnedBoxes = Config::kBoxesPerTile / kSplitK;
          pack_tile<T>(d, packed);
          // Unrolled over the owners so that packed is indexed with constants (as in
          // store_pending_rounds).
#pragma unroll
          for (int owner = 0; owner < kSplitK; ++owner) {
            if (owner != static_cast<int>(split)) continue;
            store_round<Config, false, kOwnedBoxes>(
                &map_c, ring_addr, ring, consumer, leader, owner, z, row0, n0,
                [&](int box, uint32_t box_addr) {
                  fill_box_packed<Config>(packed, box, box_addr);
                });
          }
        }
      } else if (!p.tma_store) {
        store_accumulators<Config, T, kRowsPermuted>(p, d, z, row0, n0);
      } else if constexpr (!Config::kTf32) {
        pack_tile<T>(d, packed);
        pending_z = z, pending_row0 = row0, pending_n0 = n0;
        if constexpr (kDeferStores) {
          pending = true;
        } else {
          store_pending_rounds(0, kPendingRounds);
        }
      } else if (p.c_transposed) {
#pragma unroll
        for (int round = 0; round < kRounds; ++round) {
          store_round<Config, true>(&map_c, ring_addr, ring, consumer, leader, round, z, row0, n0,
                                    [&](int box, uint32_t box_addr) {
                                      fill_box_fp32_transposed<Config, kRowsPermuted>(
                                          d, box, box_addr);
                                    });
        }
      } else {
#pragma unroll
        for (int round = 0; round < kRounds; ++round) {
          store_round<Config>(&map_c, ring_addr, ring, consumer, leader, round, z, row0, n0,
                              [&](int box, uint32_t box_addr) {
                                fill_box_fp32<Config, kRowsPermuted>(d, box, box_addr);
                              });
        }
      }
    }
    if (pending) store_pending_rounds(0, kPendingRounds);
    // The shared memory the last stores read stays until they have read it; their writes need no
    // wait (the grid's completion includes them, and waiting for them costs each block).
    if (leader) bulk_wait_read<0>();
  }
#endif
}

}  // namespace torch_gemm
