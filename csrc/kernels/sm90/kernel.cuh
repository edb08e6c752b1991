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
// share B: each block's producer copies a part of it (half its rows; of an N-major B whole
// 64-column boxes, of a 192-column tile 2 and 1) and multicasts it to all of them, so B crosses
// L2 → SM once per cluster instead of once per block. kConsumers, kMmaN, kPromoted:
// WgmmaConfig's. kSplitK > 1 (kClusterM = 1; 2 or 4 on 128×128 tiles, 2, 4 or 8 on 64×128;
// 16-bit: 2 on 128×256; tf32: 2, 4 or 8 on 64×256): a cluster of kSplitK blocks shares each
// tile, block s taking the s-th slice of K, and their partial sums meet in shared memory
// (reduce_split): for products with too few tiles to fill the SMs. The launcher then gives each
// cluster one tile; where even that leaves most SMs idle, WgmmaParams::split_groups
// clusters share the tile, and their sums meet in the workspace (reduce_groups).
// kStreamK: the walk may end in stream-K pieces (WgmmaParams::sk_turns; every turn where the plan
// deals out all, Shape::stream_k_all); without it, every walk is whole turns.
template <typename T, bool kKMajorA, bool kKMajorB, int kClusterM, int kConsumers, int kSplitK,
          int kMmaN, bool kStreamK, bool kPromoted = false>
__global__ void __launch_bounds__(WgmmaConfig<T, kConsumers, kMmaN, kPromoted>::kThreads, 1)
gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                       const __grid_constant__ CUtensorMap map_b,
                       const __grid_constant__ CUtensorMap map_c,
                       const __grid_constant__ WgmmaParams p) {
#ifdef TORCH_GEMM_SM90A_DEVICE
  using Config = WgmmaConfig<T, kConsumers, kMmaN, kPromoted>;
  using namespace sm90;
  constexpr int kStages = Config::kStages;
  static_assert(kClusterM == 1 || kClusterM == 2, "one block, or a pair sharing B");
  static_assert(kSplitK == 1 ||
                    (kClusterM == 1 && !Config::kPromoted &&
                     (kMmaN == 256 ? Config::kBoxesPerTile % kSplitK == 0 &&
                                         (!Config::kTf32 || kConsumers == 1)
                                   : kMmaN == 128 && kMmaN / 8 % kSplitK == 0)),
                "split-K: clusters of the K slices, each owning whole epilogue boxes (128×256, "
                "tf32's 64×256) or whole 8-column groups (64×128 and 128×128)");
  static_assert(kKMajorB || Config::kBlockN % Config::kMNBox == 0,
                "an N-major B is whole 64-element boxes, each multicast by one block of a pair");
  static_assert(!Config::kTf32 || kKMajorB, "tf32 wgmma reads B K-major only (A: registers)");
  static_assert(!Config::kPromoted || (kKMajorA && kSplitK == 1),
                "3xTF32's promoted tiles read A from shared memory, K-major, and whole K");

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
  const TileSchedule<Config, kClusterM, kSplitK, kStreamK> schedule(p);
  // The bias enters once, through the first slice's partials.
  const bool has_bias = p.bias != nullptr && schedule.split == 0 && schedule.group == 0;
  static_assert(!kStreamK || (!Config::kPromoted && kSplitK == 1 &&
                              (kConsumers == 2 || kClusterM == 1 || !Config::kTf32 ||
                               kMmaN <= 128)),
                "stream-K: unsplit tiles, not 3xTF32's promoted ones; tf32's one-consumer 64×256 "
                "tiles unpaired (one row of them)");
  const Producer<Config, kKMajorA, kKMajorB, kClusterM> producer{
      sA, sB, full, empty, &map_a, &map_b, schedule.rank, p.cross_k_tiles / 2};
  const BiasRow<T, Config> bias{sBias, bias_full, bias_empty};

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
  TileWalk producer_walk = schedule.walk();
  WorkUnit first_unit;
  bool have_first = false;
  if (threadIdx.x == 0) {
    prefetch_tensormap(&map_a);
    prefetch_tensormap(&map_b);
    if (p.tma_store) prefetch_tensormap(&map_c);
    for (int s = 0; s < Config::kEarlyFirst; ++s) mbarrier_init(&full[s], 1);
    fence_mbarrier_init();
    have_first = producer_walk.next(&first_unit);
    schedule.origin(p, first_unit.turn, &first_z, &first_m0, &first_n0);
    if (have_first) early = min(Config::kEarlyFirst, first_unit.k_end - first_unit.k_begin);
    for (int s = 0; s < early; ++s) {
      producer.issue_stage(s, first_unit.k_begin + s, first_z, first_m0, first_n0, true);
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
  if (!has_bias) bias.zero();
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
      producer.issue_stage(early, first_unit.k_begin + early, first_z, first_m0, first_n0,
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
      producer.run(p, schedule, producer_walk, first_unit, have_first, early, first_z, first_m0,
                   first_n0);
    } else if (has_bias && threadIdx.x / 32 == 1) {
      static_assert(kRowSumWarps <= 2, "the row-sum warps (the last ones) leave warp 1 free");
      bias.produce(p, schedule);
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
        TileWalk walk = schedule.walk();
        WorkUnit unit;
        while (walk.next(&unit)) {
          if (unit.partial) continue;  // once a tile: with its last k-tiles
          int z, m0, n0;
          schedule.origin(p, unit.turn, &z, &m0, &n0);
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
    Epilogue<T, Config, kRowsPermuted<Config, kKMajorA>, kSplitK> epilogue(&map_c, sC, consumer,
                                                                          leader);
    float d[Config::kAccumulators];
    uint32_t bias_phase = 0;
    Consumer<T, Config, kKMajorA, kKMajorB, kClusterM> mainloop(sA, sB, full, empty, consumer,
                                                                leader, p.cross_k_tiles);
    // The unit's tile origin, and the next unit's: computed while the first k-tile's wgmmas run,
    // so that its integer divisions stall no warp between tiles. Past the last unit the origin is
    // unused.
    TileWalk walk = schedule.walk();
    WorkUnit unit, next_unit;
    bool more = walk.next(&unit), next_more = false;
    int z, m0, n0, next_z = 0, next_m0 = 0, next_n0 = 0;
    schedule.origin(p, unit.turn, &z, &m0, &n0);
    // Before the first release, which may arrive on the peer's barriers.
    if constexpr (kClusterM > 1) cluster_wait();
    for (; more; more = next_more, unit = next_unit, z = next_z, m0 = next_m0, n0 = next_n0) {
      const auto prepare_next_tile = [&] {
        next_more = walk.next(&next_unit);
        schedule.origin(p, next_unit.turn, &next_z, &next_m0, &next_n0);
        // Keeps the compiler from sinking the divisions to where the results are used.
        asm volatile("" : "+r"(next_z), "+r"(next_m0), "+r"(next_n0));
        if constexpr (kStreamK) {
          asm volatile("" : "+r"(next_unit.k_begin), "+r"(next_unit.k_end),
                       "+r"(next_unit.contributors_from));
        }
      };
      bias.start(d, has_bias, bias_phase);
      // The previous tile's deferred stores go out between this tile's k-tiles.
      mainloop.run(d, unit, prepare_next_tile,
                   [&](int k_index) { epilogue.store_due_round(k_index); });
      epilogue.finish_pending(unit.k_end - unit.k_begin);
      if constexpr (kStreamK) {
        // Without the tile's last k-tiles: the sums go to the workspace, for the cluster with
        // them. With them, after others' k-tiles: their sums are added first.
        if (unit.partial) {
          store_partial_sums<Config>(p, d, schedule.partial_slot(schedule.first_turn, consumer),
                                     consumer, leader);
          continue;
        }
        for (int c = unit.contributors_from; c < schedule.first_turn; ++c) {
          add_partial_sums<Config>(p, d, schedule.partial_slot(c, consumer), consumer, leader);
        }
      }
      const int row0 = m0 + consumer * Config::kMmaM;
      if constexpr (kSplitK > 1) {
        reduce_split<Config, kSplitK>(d, sA, schedule.split);
        if (schedule.groups > 1 &&
            !reduce_groups<Config, kSplitK>(p, d, schedule, unit.turn, consumer, leader)) {
          continue;  // another cluster stores the tile
        }
      }
      epilogue.store(p, d, z, row0, n0, schedule.split);
    }
    epilogue.finish();
  }
#endif
}

}  // namespace torch_gemm
