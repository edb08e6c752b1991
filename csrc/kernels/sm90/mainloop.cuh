// The Hopper kernel's mainloop: one producer thread copies A's and B's k-tiles into a ring of
// shared-memory stages by TMA (multicasting B to a cluster's pair), and each consumer warpgroup
// multiplies them with wgmma; every stage passes between them on a full and an empty mbarrier.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>

#include "kernels/numeric.cuh"
#include "kernels/sm90/config.cuh"
#include "kernels/sm90/ptx.cuh"
#include "kernels/sm90/tile_scheduler.cuh"

namespace torch_gemm {
namespace sm90 {

// tf32's A fragments from an MN-major tile load rows in accumulator_row's permuted order.
template <typename Config, bool kKMajorA>
constexpr bool kRowsPermuted = Config::kTf32 && !kKMajorA;

#ifdef TORCH_GEMM_SM90A_DEVICE

// The accumulator layout of wgmma: warp w of the warpgroup holds rows 16w..16w+15; for each 8
// columns j, lane l holds rows l/4 and l/4 + 8, columns 8j + 2(l%4) and the one after:
// d[4j], d[4j+1] in the upper row, d[4j+2], d[4j+3] in the lower.

// Which of the consumer's 64 rows of C this thread's accumulators of rows l/4 + 8·half hold. Where
// tf32's A fragments come from an MN-major tile (kPermuted), each warp loads rows in another order:
// in wgmma's order the lanes of one fragment load read 2 chunks of 4 rows' 128-byte lines, which
// the swizzle puts on 16 banks (2-way conflicts on every load); rows 16 apart (chunks c and c + 4)
// go to 32. The products of the permuted rows land in the same registers, so the epilogue stores
// row accumulator_row(...) where wgmma's layout says row 16w + l/4 + 8·half. Both orders keep
// warps 0–1 in rows 0–31 and warps 2–3 in rows 32–63.
template <bool kPermuted>
__device__ __forceinline__ int accumulator_row(int warp, int lane, int half) {
  if constexpr (kPermuted) {
    const int g = lane / 4;
    return 32 * (warp / 2) + 4 * (2 * (warp % 2) + half) + g % 4 + 16 * (g / 4);
  } else {
    return warp * 16 + half * 8 + lane / 4;
  }
}

// The producer side: the copies of one stage, and the producer thread's loop over its walk.
// kKMajorA / kKMajorB: whether A (M, K) and B (K, N) are K-major in memory, which decides the
// boxes copied. kClusterM = 2: the pair's blocks compute vertically adjacent tiles and share B,
// each copying a part of it (half; of an N-major 192-column tile 2 boxes and 1) and multicasting
// that to both.
template <typename Config, bool kKMajorA, bool kKMajorB, int kClusterM>
struct Producer {
  unsigned char* sA;  // (kStages, kStageBytesA)
  unsigned char* sB;  // (kStages, kStageBytesB)
  uint64_t* full;     // (kStages): the stage's bytes have landed
  uint64_t* empty;    // (kStages): every consumer the stage reaches is done with it
  const CUtensorMap* map_a;
  const CUtensorMap* map_b;
  uint32_t rank;      // the block's tile of the pair
  // 3xTF32 (Config::kPromoted): k-tiles of a segment of its split operands (plan_3xtf32), A's
  // rows (big, small) and B's (small, big), which the product's three phases read as (big, small),
  // (small, big) and (big, big).
  int segment_k_tiles;

  // The k-tile of A's and B's rows that the product's k-tile kt reads.
  __device__ __forceinline__ void source_k_tiles(int kt, int* kt_a, int* kt_b) const {
    if constexpr (Config::kPromoted) {
      const int phase = kt / segment_k_tiles, within = kt - phase * segment_k_tiles;
      *kt_a = phase == 1 ? segment_k_tiles + within : within;
      *kt_b = phase == 0 ? within : segment_k_tiles + within;
    } else {
      *kt_a = *kt_b = kt;
    }
  }

  // A K-major B's rows a block multicasts.
  static constexpr int kSliceN = Config::kBlockN / kClusterM;
  // An N-major B goes as 64-column boxes, rank r multicasting boxes [r·kRankBoxes, ...): of a
  // 192-column tile, 2 and 1, since half of it is not whole boxes.
  static constexpr int kBoxesB = Config::kBlockN / Config::kMNBox;
  static constexpr int kRankBoxes = (kBoxesB + kClusterM - 1) / kClusterM;

  // One stage's copies, counted on full[stage]: this block's A, and its slice of B multicast to
  // the cluster, or (whole_b) all of B into this block alone.
  __device__ __forceinline__ void issue_stage(int stage, int kt, int z, int m0, int n0,
                                              bool whole_b) const {
    constexpr uint32_t kStageBytes = Config::kStageBytesA + Config::kStageBytesB;
    constexpr uint16_t kClusterMask = (1u << kClusterM) - 1;
    mbarrier_expect_tx(&full[stage], kStageBytes);
    unsigned char* a = sA + stage * Config::kStageBytesA;
    unsigned char* b = sB + stage * Config::kStageBytesB;
    int kt_a, kt_b;
    source_k_tiles(kt, &kt_a, &kt_b);
    const int k0 = kt_a * Config::kBlockK;
    if constexpr (kKMajorA) {
      tma_load(a, map_a, &full[stage], k0, m0, z);  // (kBlockM rows, one row of K)
    } else {
#pragma unroll
      for (int j = 0; j < Config::kBlockM / Config::kMNBox; ++j) {  // (64 K rows, 64 M) each
        tma_load(a + j * Config::kMNBoxBytes, map_a, &full[stage], m0 + j * Config::kMNBox, k0,
                 z);
      }
    }
    const int k0_b = kt_b * Config::kBlockK;
    const bool multicast = kClusterM > 1 && !whole_b;
#pragma unroll
    for (int r = 0; r < kClusterM; ++r) {
      if (!whole_b && r != static_cast<int>(rank)) continue;
      if constexpr (kKMajorB) {
        const int slice = r * kSliceN;
        // (kSliceN rows, one row of K): rows slice .. slice + kSliceN of the (kBlockN, K) tile.
        unsigned char* dst = b + slice * Config::kSwizzleBytes;
        if (multicast) {
          tma_load_multicast(dst, map_b, &full[stage], kClusterMask, k0_b, n0 + slice, z);
        } else {
          tma_load(dst, map_b, &full[stage], k0_b, n0 + slice, z);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kRankBoxes; ++j) {  // (64 K rows, 64 N) each
          const int box = r * kRankBoxes + j;
          if (box >= kBoxesB) break;
          unsigned char* dst = b + box * Config::kMNBoxBytes;
          if (multicast) {
            tma_load_multicast(dst, map_b, &full[stage], kClusterMask, n0 + box * Config::kMNBox,
                               k0_b, z);
          } else {
            tma_load(dst, map_b, &full[stage], n0 + box * Config::kMNBox, k0_b, z);
          }
        }
      }
    }
  }

  // The producer thread's loop: every k-tile of every unit of its walk, each into the next stage
  // once the consumers have released it. The first unit (its origin first_z, first_m0, first_n0)
  // comes from the kernel's prologue, which has issued its first `early` k-tiles.
  template <typename Schedule>
  __device__ __forceinline__ void run(const WgmmaParams& p, const Schedule& schedule,
                                      TileWalk& walk, const WorkUnit& first_unit, bool have_first,
                                      int early, int first_z, int first_m0, int first_n0) const {
    constexpr int kStages = Config::kStages;
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
      more = walk.next(&unit);
      schedule.origin(p, unit.turn, &z, &m0, &n0);
    }
    // The peer's consumers arrive on this block's empty barriers until their last k-tile, so the
    // block stays until every stage's last release has come: then no arrival reaches it after
    // it exits, and every multicast into it has landed (its consumers waited for them). This
    // replaces a cluster barrier at the exit, whose release form costs a block more. It relies on
    // both blocks of a pair walking the same units and k-tiles, the early ones included (both
    // follow first_turn, turn_step, sk_turns and the whole of K): a schedule that differed by
    // rank would need the barrier back.
    if constexpr (kClusterM > 1) {
      for (int s = 0; s < kStages; ++s) {
        mbarrier_wait(&empty[stage], phase ^ 1);
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
  }
};

// One consumer warpgroup's side of the ring: it waits for each k-tile's stage, issues the
// k-tile's wgmmas into the accumulators d (64 rows × kMmaN columns of the tile, kMmaN / 2 floats
// a thread) and hands the stage back once those wgmmas have read it.
template <typename T, typename Config, bool kKMajorA, bool kKMajorB, int kClusterM>
class Consumer {
 public:
  static constexpr int kStages = Config::kStages, kBlockK = Config::kBlockK;
  static constexpr bool kPermuted = kRowsPermuted<Config, kKMajorA>;

  __device__ __forceinline__ Consumer(unsigned char* sA, unsigned char* sB, uint64_t* full,
                                      uint64_t* empty, int consumer, bool leader,
                                      int cross_k_tiles = 0)
      : sA_(sA), sB_(sB), full_(full), empty_(empty), leader_(leader),
        cross_k_tiles_(cross_k_tiles),
        consumer_offset_a_(kKMajorA
                               ? consumer * Config::kMmaM * Config::kSwizzleBytes
                               : consumer * (Config::kMmaM / Config::kMNBox) * Config::kMNBoxBytes) {
    // 16-bit operands: each wgmma's descriptors are stage 0's low words plus offsets. Computed
    // once, and held in registers (the empty asm) so that the compiler does not redo the address
    // arithmetic per wgmma, which made the k-loop execute markedly more instructions
    // (benchmarks/NOTES.md).
    desc_a0_ = smem_descriptor_low(sA_ + consumer_offset_a_, kLeadingA);
    desc_b0_ = smem_descriptor_low(sB_, kLeadingB);
    asm volatile("" : "+r"(desc_a0_), "+r"(desc_b0_));
  }

  // The unit's k-tiles into d, in order. prepare_next() runs once, under the first k-tile's
  // wgmmas (at once for a split-K block's empty slice); each_k_tile(i) after k-tile i's wgmmas
  // are issued (the epilogue's deferred stores). Returns with d complete and every stage the unit
  // read released.
  template <typename PrepareNext, typename EachKTile>
  __device__ __forceinline__ void run(float (&d)[Config::kAccumulators], const WorkUnit& unit,
                                      PrepareNext&& prepare_next, EachKTile&& each_k_tile) {
    if constexpr (Config::kPromoted) {
      run_promoted(d, unit, prepare_next, each_k_tile);
    } else {
      run_accumulating(d, unit, prepare_next, each_k_tile);
    }
  }

 private:
  // Every k-tile's wgmmas accumulate into d.
  template <typename PrepareNext, typename EachKTile>
  __device__ __forceinline__ void run_accumulating(float (&d)[Config::kAccumulators],
                                                   const WorkUnit& unit,
                                                   PrepareNext&& prepare_next,
                                                   EachKTile&& each_k_tile) {
    int previous = -1;
    for (int kt = unit.k_begin; kt < unit.k_end; ++kt) {
      mbarrier_wait(&full_[stage_], phase_);
      if constexpr (Config::kTf32) {
        const unsigned char* a = sA_ + stage_ * Config::kStageBytesA + consumer_offset_a_;
        const unsigned char* b = sB_ + stage_ * Config::kStageBytesB;
        // A passes through registers to be rounded to tf32 (B, K-major in shared memory, is
        // read as the tensor cores find it, or was rounded where it was repacked). The
        // fragments alternate between two register sets by k-tile parity, so one k-tile's
        // loads proceed while the previous k-tile's wgmmas still read the other set.
        if (kt % 2 == 0) {
          tf32_k_tile(d, a, b, frag_even_);
        } else {
          tf32_k_tile(d, a, b, frag_odd_);
        }
      } else {
        fence_accumulators(d);
        wgmma_fence();
        const uint32_t stage_a = desc_a0_ + stage_ * (Config::kStageBytesA >> 4);
        const uint32_t stage_b = desc_b0_ + stage_ * (Config::kStageBytesB >> 4);
#pragma unroll
        for (int kk = 0; kk < kBlockK / Config::kMmaK; ++kk) {
          wgmma_ss<T, kKMajorA ? 0 : 1, kKMajorB ? 0 : 1>(
              d, kDescHigh | (stage_a + kk * (kStepA >> 4)),
              kDescHigh | (stage_b + kk * (kStepB >> 4)), 1);
        }
        wgmma_commit();
      }
      if (kt == unit.k_begin) prepare_next();
      each_k_tile(kt - unit.k_begin);
      // The previous k-tile's wgmmas have finished reading their stage (and, for tf32, their
      // fragments): hand it back. This k-tile's stay in flight while the next stage is awaited.
      wgmma_wait<1>();
      fence_accumulators(d);
      keep_fragments();
      if (previous >= 0) release(previous);
      previous = stage_;
      if (++stage_ == kStages) stage_ = 0, phase_ ^= 1;
    }
    if (unit.k_end == unit.k_begin) prepare_next();  // a split-K block's empty slice
    wgmma_wait<0>();
    fence_accumulators(d);
    if (previous >= 0) release(previous);
  }

  // 3xTF32's inner product (Config::kPromoted): each k-tile's wgmmas sum into a fresh set of
  // registers, which the CUDA cores then add up in fp32, rounding to nearest. The tensor cores
  // add with truncation against the running sum, an error near 2^-23·|sum| per wgmma that, with
  // d as the running sum, grows with K (3xTF32 accumulating into d: 18× SGEMM's error at K = 256,
  // 140× at 4096, benchmarks/NOTES.md); here it is against one k-tile's sum, four wgmmas long.
  // The k-tiles' sums go into `group` and every kPromoteGroup of them into d: added to d one by
  // one, 3K/32 roundings of the whole sum made the error grow as √K past SGEMM's (1.6× at
  // K = 4096, 3.1× at 65536). Each k-tile's wgmmas are waited for before the add (as DeepGEMM
  // promotes FP8): reading a set while a later k-tile's wgmmas run, under wait_group 1, made ptxas
  // serialize every wgmma (its warning C7514). On 128-row tiles the other consumer warpgroup's
  // wgmmas run meanwhile; on 64-row ones nothing does. Both consumers wait for the same stages,
  // though, so their waits and adds tend to coincide and leave the tensor cores idle; the k-tiles
  // of cross terms alone (WgmmaParams::cross_k_tiles), 2/3 of K, therefore run first and
  // pipelined like run_accumulating's, summed straight into `group` (from zero, not into d, which
  // may hold a bias), then added to d once (add_finite): their truncation is against the cross
  // terms' own sum, about 2^-11 of the result's. (Run last instead, the product was slower:
  // benchmarks/NOTES.md, session 58.)
  static constexpr int kPromoteGroup = 8;

  template <typename PrepareNext, typename EachKTile>
  __device__ __forceinline__ void run_promoted(float (&d)[Config::kAccumulators],
                                               const WorkUnit& unit, PrepareNext&& prepare_next,
                                               EachKTile&& each_k_tile) {
    float sums[Config::kAccumulators], group[Config::kAccumulators];
#pragma unroll
    for (int i = 0; i < Config::kAccumulators; ++i) sums[i] = 0.0f, group[i] = 0.0f;
    CrossOverflow overflow{};
    int kt = unit.k_begin;
    const int cross_end = min(unit.k_end, cross_k_tiles_);
    if (kt < cross_end) {
      int previous = -1;
      for (; kt < cross_end; ++kt) {
        mbarrier_wait(&full_[stage_], phase_);
        fence_accumulators(group);
        wgmma_fence();
        const uint32_t stage_a = desc_a0_ + stage_ * (Config::kStageBytesA >> 4);
        const uint32_t stage_b = desc_b0_ + stage_ * (Config::kStageBytesB >> 4);
#pragma unroll
        for (int kk = 0; kk < kBlockK / Config::kMmaK; ++kk) {
          wgmma_ss<T, 0, 0>(group, kDescHigh | (stage_a + kk * (kStepA >> 4)),
                            kDescHigh | (stage_b + kk * (kStepB >> 4)), 1);
        }
        wgmma_commit();
        if (kt == unit.k_begin) prepare_next();
        each_k_tile(kt - unit.k_begin);
        wgmma_wait<1>();
        fence_accumulators(group);
        if (previous >= 0) release(previous);
        previous = stage_;
        if (++stage_ == kStages) stage_ = 0, phase_ ^= 1;
      }
      wgmma_wait<0>();
      fence_accumulators(group);
      release(previous);
      add_finite(d, group, overflow);
#pragma unroll
      for (int i = 0; i < Config::kAccumulators; ++i) group[i] = 0.0f;
    }
    int grouped = 0;
    for (; kt < unit.k_end; ++kt) {
      mbarrier_wait(&full_[stage_], phase_);
      fence_accumulators(sums);
      wgmma_fence();
      const uint32_t stage_a = desc_a0_ + stage_ * (Config::kStageBytesA >> 4);
      const uint32_t stage_b = desc_b0_ + stage_ * (Config::kStageBytesB >> 4);
#pragma unroll
      for (int kk = 0; kk < kBlockK / Config::kMmaK; ++kk) {
        wgmma_ss<T, 0, 0>(sums, kDescHigh | (stage_a + kk * (kStepA >> 4)),
                          kDescHigh | (stage_b + kk * (kStepB >> 4)), kk > 0);
      }
      wgmma_commit();
      if (kt == unit.k_begin) prepare_next();
      each_k_tile(kt - unit.k_begin);
      wgmma_wait<0>();
      fence_accumulators(sums);
      release(stage_);
      add_promoted(group, sums);
      if (++grouped == kPromoteGroup) {
        add_promoted(d, group);
#pragma unroll
        for (int i = 0; i < Config::kAccumulators; ++i) group[i] = 0.0f;
        grouped = 0;
      }
      if (++stage_ == kStages) stage_ = 0, phase_ ^= 1;
    }
    add_promoted(d, group);
    overflow.restore(d);
    if (unit.k_end == unit.k_begin) prepare_next();
  }

  __device__ __forceinline__ static void add_promoted(float (&d)[Config::kAccumulators],
                                                      const float (&sums)[Config::kAccumulators]) {
#pragma unroll
    for (int i = 0; i < Config::kAccumulators; ++i) d[i] += sums[i];
  }

  // The cross sums that were not finite, two bits each (zero-initialized): `up` for +Inf, `down`
  // for -Inf, both for NaN. Unrolled loops' constant indices keep the words in registers.
  struct CrossOverflow {
    static constexpr int kWords = (Config::kAccumulators + 31) / 32;
    uint32_t up[kWords], down[kWords];

    // d's value where its cross sum was not finite but its big·big sum (and bias) are: that of the
    // cross sum, an overflow of finite operands' cross terms, which torch.mm's sum overflows too
    // (their big·big terms near 2^125 may cancel).
    __device__ __forceinline__ void restore(float (&d)[Config::kAccumulators]) const {
#pragma unroll
      for (int i = 0; i < Config::kAccumulators; ++i) {
        const bool is_up = (up[i / 32] >> (i % 32)) & 1u, is_down = (down[i / 32] >> (i % 32)) & 1u;
        if ((is_up || is_down) && isfinite(d[i])) {
          d[i] = is_up && is_down ? CUDART_NAN_F : (is_up ? CUDART_INF_F : -CUDART_INF_F);
        }
      }
    }
  };

  // The cross terms' sum, where finite. The split keeps an Inf's or NaN's big part (A's segment of
  // big parts serves both big·small and big·big), so a cross sum it reaches may be NaN or an Inf
  // of either sign where torch.mm's is an Inf; such a sum is left out of d, and big·big carries
  // the Inf or NaN into d as torch.mm's product would. Where big·big's sum is finite, so were the
  // operands it summed, and the cross sum overflowed; it is kept in `overflow` for restore.
  __device__ __forceinline__ static void add_finite(float (&d)[Config::kAccumulators],
                                                    const float (&cross)[Config::kAccumulators],
                                                    CrossOverflow& overflow) {
#pragma unroll
    for (int i = 0; i < Config::kAccumulators; ++i) {
      const float c = cross[i];
      const bool finite = isfinite(c);
      d[i] += finite ? c : 0.0f;
      overflow.up[i / 32] |= static_cast<uint32_t>(!finite && !(c < 0.0f)) << (i % 32);
      overflow.down[i / 32] |= static_cast<uint32_t>(!finite && !(c > 0.0f)) << (i % 32);
    }
  }

  // Per wgmma: a K-major tile advances 32 bytes along its 128-byte rows, an MN-major one
  // kMmaK rows of 128 bytes.
  static constexpr uint32_t kStepA = kKMajorA ? Config::kMmaK * Config::kElementBytes
                                              : Config::kMmaK * Config::kSwizzleBytes;
  static constexpr uint32_t kStepB = kKMajorB ? Config::kMmaK * Config::kElementBytes
                                              : Config::kMmaK * Config::kSwizzleBytes;
  // The leading byte offset: unused by swizzled K-major tiles (16, the smallest encodable), the
  // distance between 64-element boxes in MN-major ones.
  static constexpr uint32_t kLeadingA = kKMajorA ? 16 : Config::kMNBoxBytes;
  static constexpr uint32_t kLeadingB = kKMajorB ? 16 : Config::kMNBoxBytes;
  static constexpr uint64_t kDescHigh = smem_descriptor_high(Config::kSwizzleAtomBytes);
  // tf32: A's fragments of one k-tile (kBlockK / kMmaK wgmmas × 4 registers), in two sets.
  static constexpr int kTf32Steps =
      Config::kTf32 && !Config::kPromoted ? kBlockK / Config::kMmaK : 1;

  // Hands a stage back to every block whose producer writes into it.
  __device__ __forceinline__ void release(int released) const {
    if (!leader_) return;
    if constexpr (kClusterM > 1) {
#pragma unroll
      for (uint32_t r = 0; r < kClusterM; ++r) mbarrier_arrive_cluster(&empty_[released], r);
    } else {
      mbarrier_arrive(&empty_[released]);
    }
  }

  // Both fragment sets stay live through every k-tile (an empty asm reads them after each wait),
  // so the compiler gives them separate registers and writes neither while wgmmas may read it:
  // it cannot see that the wgmmas are asynchronous.
  __device__ __forceinline__ void keep_fragments() const {
    if constexpr (Config::kTf32) {
#pragma unroll
      for (int kk = 0; kk < kTf32Steps; ++kk) {
        asm volatile("" ::"r"(frag_even_[kk][0]), "r"(frag_even_[kk][1]), "r"(frag_even_[kk][2]),
                     "r"(frag_even_[kk][3]), "r"(frag_odd_[kk][0]), "r"(frag_odd_[kk][1]),
                     "r"(frag_odd_[kk][2]), "r"(frag_odd_[kk][3]));
      }
    }
  }

  // One tf32 k-tile: A's fragments loaded into `frag` and rounded, then the wgmmas issued.
  __device__ __forceinline__ void tf32_k_tile(float (&d)[Config::kAccumulators],
                                              const unsigned char* a, const unsigned char* b,
                                              uint32_t (&frag)[kTf32Steps][4]) {
    if constexpr (Config::kTf32) {
      const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
#pragma unroll
      for (int kk = 0; kk < kTf32Steps; ++kk) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          // Row m of the consumer's 64 (fragment i: wgmma's row l/4 + 8(i%2)), column k.
          const uint32_t m = accumulator_row<kPermuted>(warp, lane, i % 2);
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
        wgmma_tf32_register_a(d, frag[kk], desc_b, 1);
      }
      wgmma_commit();
    }
  }

  unsigned char* sA_;
  unsigned char* sB_;
  uint64_t* full_;
  uint64_t* empty_;
  bool leader_;
  int cross_k_tiles_;  // WgmmaParams::cross_k_tiles
  // This consumer's 64 rows of A: 64 rows of 128 bytes (K-major), or 64 / kMNBox boxes (MN-major).
  uint32_t consumer_offset_a_;
  uint32_t desc_a0_ = 0, desc_b0_ = 0;
  int stage_ = 0;
  uint32_t phase_ = 0;
  uint32_t frag_even_[kTf32Steps][4] = {}, frag_odd_[kTf32Steps][4] = {};
};

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90
}  // namespace torch_gemm
