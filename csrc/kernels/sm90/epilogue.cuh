// The Hopper kernel's epilogue: the bias (staged per tile by a producer warp, the accumulators'
// starting value), and C's way out: from registers where TMA cannot address C, else through
// swizzled shared-memory boxes and TMA stores that run on while the consumers start the next tile.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/numeric.cuh"
#include "kernels/sm90/config.cuh"
#include "kernels/sm90/mainloop.cuh"
#include "kernels/sm90/ptx.cuh"
#include "kernels/sm90/tile_scheduler.cuh"

namespace torch_gemm {
namespace sm90 {

#ifdef TORCH_GEMM_SM90A_DEVICE

// Which half (wgmma's rows l/4, or l/4 + 8) a lane stores in step `step` (0, 1) of a box fill.
// With permuted rows a warp's rows 16 apart share a row of the swizzle's period, so lanes 16–31
// take the other half: each store's rows then cover all 8 rows of the period, no bank conflicts
// (in step with each other, 2-way conflicts).
template <bool kPermuted>
__device__ __forceinline__ int fill_half(int step, int lane) {
  return kPermuted ? step ^ (lane / 16) : step;
}

// d[i + 2·half], half 0 or 1, chosen by a select: indexing the registers at run time would put
// them in local memory.
template <int kCount>
__device__ __forceinline__ float pick_half(const float (&d)[kCount], int i, int half) {
  return half ? d[i + 2] : d[i];
}

// Two fp32 values rounded to T and packed into 32 bits, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  using Pair = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>;
  Pair pair;
  pair.x = from_acc<T>(lo);
  pair.y = from_acc<T>(hi);
  return *reinterpret_cast<uint32_t*>(&pair);
}

// Writes one consumer's 64×kMmaN accumulators to C straight from registers, edges masked: the
// path for a C that TMA cannot address. With kSplitK > 1, only the columns block `split` owns
// (reduce_split's).
template <typename Config, typename T, bool kPermuted, int kSplitK = 1>
__device__ __forceinline__ void store_accumulators(const WgmmaParams& p,
                                                   const float (&d)[Config::kAccumulators], int z,
                                                   int row0, int n0, int split = 0) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  T* c = static_cast<T*>(p.c) + z * p.c_stride_batch;
  // Two columns in one store where C's rows are contiguous and aligned for it.
  const bool pairs = p.c_stride_n == 1 && p.c_stride_m % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(c) % (2 * sizeof(T)) == 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int m = row0 + accumulator_row<kPermuted>(warp, lane, half);
    if (m >= p.M) continue;
    T* row = c + m * p.c_stride_m;
#pragma unroll
    for (int j = 0; j < Config::kMmaN / 8; ++j) {
      if constexpr (kSplitK > 1) {
        if (j / (Config::kMmaN / 8 / kSplitK) != split) continue;
      }
      const int n = n0 + j * 8 + lane % 4 * 2;
      const float v0 = d[4 * j + 2 * half];
      const float v1 = d[4 * j + 2 * half + 1];
      if (pairs && n + 1 < p.N) {
        if constexpr (std::is_same_v<T, float>) {
          *reinterpret_cast<float2*>(row + n) = make_float2(v0, v1);
        } else {
          *reinterpret_cast<uint32_t*>(row + n) = pack_pair<T>(v0, v1);
        }
      } else {
        if (n < p.N) row[n * p.c_stride_n] = from_acc<T>(v0);
        if (n + 1 < p.N) row[(n + 1) * p.c_stride_n] = from_acc<T>(v1);
      }
    }
  }
}

// One consumer's 64×kMmaN tile of 16-bit C, rounded, two values a register in the accumulator
// layout: packed[2j + h] holds columns 8j + 2(l%4) and the next, of row l/4 + 8h. In half the
// registers of the accumulators, it can wait there while the next tile's wgmmas run.
template <typename T, int kCount>
__device__ __forceinline__ void pack_tile(const float (&d)[kCount],
                                          uint32_t (&packed)[kCount / 2]) {
#pragma unroll
  for (int j = 0; j < kCount / 4; ++j) {
    packed[2 * j] = pack_pair<T>(d[4 * j], d[4 * j + 1]);
    packed[2 * j + 1] = pack_pair<T>(d[4 * j + 2], d[4 * j + 3]);
  }
}

// Epilogue boxes: 64 rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r % 8) (the
// 128-byte swizzle the TMA store undoes), holding columns [kBoxCols·box, kBoxCols·(box+1)) of a
// consumer's tile. From a packed 16-bit tile: stmatrix, 16 columns × 16 rows per instruction.
template <typename Config>
__device__ __forceinline__ void fill_box_packed(const uint32_t (&packed)[Config::kAccumulators / 2],
                                                int box, uint32_t box_addr) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  // Matrix i of an x4: rows 8(i%2).. of the warp's 16, 8-column block i/2 of the 16 columns.
  const int i = lane / 8, r = lane % 8;
  const uint32_t row = warp * 16 + (i % 2) * 8 + r;
#pragma unroll
  for (int jj = 0; jj < Config::kBoxCols / 16; ++jj) {
    const int j = box * (Config::kBoxCols / 8) + 2 * jj;  // first of the two 8-column blocks
    const uint32_t chunk = 2 * jj + i / 2;
    const uint32_t addr = box_addr + row * Config::kSwizzleBytes + ((chunk ^ r) << 4);
    stmatrix_x4(addr, packed[2 * j], packed[2 * j + 1], packed[2 * j + 2], packed[2 * j + 3]);
  }
}

// From fp32 accumulators to fp32 C: one 8-byte store per row and column pair.
template <typename Config, bool kPermuted>
__device__ __forceinline__ void fill_box_fp32(const float (&d)[Config::kAccumulators], int box,
                                              uint32_t box_addr) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  const int q = lane % 4;
#pragma unroll
  for (int jj = 0; jj < Config::kBoxCols / 8; ++jj) {
    const int j = box * (Config::kBoxCols / 8) + jj;  // 8-column block of the kMmaN
    const uint32_t chunk = 2 * jj + q / 2;
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      const int half = fill_half<kPermuted>(step, lane);
      const uint32_t row = accumulator_row<kPermuted>(warp, lane, half);
      const uint32_t addr =
          box_addr + row * Config::kSwizzleBytes + ((chunk ^ (row % 8)) << 4) + (q % 2) * 8;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(pick_half(d, 4 * j, half)),
                   "f"(pick_half(d, 4 * j + 1, half))
                   : "memory");
    }
  }
}

// The same for a C stored transposed (c_transposed): box b holds this product's rows
// [kBoxCols·(b%2), +kBoxCols) of the consumer's 64 as its 128-byte rows' elements, and its columns
// [kMmaM·(b/2), +kMmaM) as its rows, so the TMA store writes them as the caller's C, rows
// contiguous. Warps 0–1 fill the even boxes, 2–3 the odd ones, one 4-byte store per value; for
// each store the warp's lanes cover 4 rows × 32 bytes whose chunks the swizzle spreads over all
// 32 banks (permuted rows: with fill_half's order).
template <typename Config, bool kPermuted>
__device__ __forceinline__ void fill_box_fp32_transposed(const float (&d)[Config::kAccumulators],
                                                         int box, uint32_t box_addr) {
  static_assert(Config::kTf32, "fp32 C");
  constexpr int kHalves = Config::kMmaM / Config::kBoxCols;  // 2: a box takes half the rows
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  if (warp / (4 / kHalves) != box % kHalves) return;
  const int q = lane % 4;
  const int first_col = box / kHalves * Config::kMmaM;  // of the consumer's kMmaN
#pragma unroll
  for (int jj = 0; jj < Config::kMmaM / 8; ++jj) {
    const int j = first_col / 8 + jj;  // 8-column block of the kMmaN
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      const int half = fill_half<kPermuted>(step, lane);
      // This row of the product within the box.
      const uint32_t element = accumulator_row<kPermuted>(warp, lane, half) % Config::kBoxCols;
      const uint32_t chunk = element / 4;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint32_t row = jj * 8 + q * 2 + e;  // the product's column, the box's row
        const uint32_t addr = box_addr + row * Config::kSwizzleBytes +
                              ((chunk ^ (row % 8)) << 4) + element % 4 * 4;
        asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(pick_half(d, 4 * j + e, half))
                     : "memory");
      }
    }
  }
}

// One round of a consumer's epilogue: its ring of boxes filled (fill(box, address)) and written out
// by TMA stores, which run on while the consumer goes on. The ring is refilled only once the
// previous round's stores have read it; a round's waits, fence and barriers cost as much as its
// fills, so a tile stored at once goes a whole ring per round (kBoxesPerTile / kEpilogueBoxes
// rounds). kTransposed: the boxes are fill_box_fp32_transposed's, stored into the caller's C.
// kRing: boxes a round, the whole ring unless fewer are asked for (split-K: the boxes a block
// owns; the deferred stores of two-consumer tiles: one box a round, spread over the next tile's
// k-tiles).
template <typename Config, bool kTransposed = false, int kRing = Config::kEpilogueBoxes,
          typename Fill>
__device__ __forceinline__ void store_round(const CUtensorMap* map_c, uint32_t ring_addr,
                                            const void* ring, int consumer, bool leader, int round,
                                            int z, int row0, int n0, Fill&& fill) {
  static_assert(kRing <= Config::kEpilogueBoxes, "a round fits in the ring");
  static_assert(Config::kBoxesPerTile % kRing == 0, "a tile is whole rounds of the ring");
  if (leader) bulk_wait_read<0>();
  warpgroup_sync(consumer);  // the ring's previous stores have read it
#pragma unroll
  for (int slot = 0; slot < kRing; ++slot) {
    fill(round * kRing + slot, ring_addr + slot * Config::kBoxBytes);
  }
  fence_proxy_async();
  warpgroup_sync(consumer);  // the ring is written, and visible to the TMA unit
  if (leader) {
#pragma unroll
    for (int slot = 0; slot < kRing; ++slot) {
      const void* src = static_cast<const unsigned char*>(ring) + slot * Config::kBoxBytes;
      const int box = round * kRing + slot;
      if constexpr (kTransposed) {
        constexpr int kHalves = Config::kMmaM / Config::kBoxCols;
        static_assert(kRing % kHalves == 0, "a round fills whole columns of boxes");
        tma_store(map_c, src, row0 + box % kHalves * Config::kBoxCols,
                  n0 + box / kHalves * Config::kMmaM, z);
      } else {
        tma_store(map_c, src, n0 + box * Config::kBoxCols, row0, z);
      }
    }
    bulk_commit();
  }
}

// The tile's bias as fp32 in a shared-memory row (kBlockN, 0 past N), staged by a producer warp
// while the previous tile runs, so that the consumers start their accumulators at it: the bias
// costs no barrier between the consumers and no add at the packing. `full`: the row holds this
// tile's bias; `empty`: every consumer warp has started from it.
template <typename T, typename Config>
struct BiasRow {
  float* row;
  uint64_t* full;
  uint64_t* empty;

  // Without a bias the row stays zero (every thread of the block, before the roles start).
  __device__ __forceinline__ void zero() const {
    for (int i = threadIdx.x; i < Config::kBlockN; i += Config::kThreads) row[i] = 0.0f;
  }

  // The bias warp: each tile's bias row, read from global memory before the previous tile's
  // consumers have let go of the row in shared memory (so the reads' latency passes under that
  // tile).
  template <typename Schedule>
  __device__ __forceinline__ void produce(const WgmmaParams& p, const Schedule& schedule) const {
    constexpr int kPerLane = (Config::kBlockN + 31) / 32;  // a slim tile's last round is part
    const int lane = threadIdx.x % 32;
    const T* bias = static_cast<const T*>(p.bias);
    uint32_t bias_phase = 0;
    TileWalk walk = schedule.walk();
    WorkUnit unit;
    while (walk.next(&unit)) {
      int z, m0, n0;
      schedule.origin(p, unit.turn, &z, &m0, &n0);
      float values[kPerLane];
      // A stream-K partial sum starts at zero: the bias enters once, with the tile's last
      // k-tiles.
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int n = n0 + i * 32 + lane;
        values[i] = n < p.N && !unit.partial ? to_acc<float>(bias[n * p.bias_stride]) : 0.0f;
      }
      mbarrier_wait(empty, bias_phase ^ 1);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        if (Config::kBlockN % 32 == 0 || i * 32 + lane < Config::kBlockN) {
          row[i * 32 + lane] = values[i];
        }
      }
      mbarrier_arrive(full);  // releases this lane's stores to the consumers
      bias_phase ^= 1;
    }
  }

  // A consumer: its accumulators start at the row (all zeros without a bias). One unconditional
  // definition: accumulators defined on two paths made ptxas serialize every wgmma (its warning
  // C7515, benchmarks/NOTES.md). Each row's pair is loaded by ld.shared straight into its
  // accumulators; generic loads copied into the lower row's took many instructions a thread with
  // every tensor core idle.
  __device__ __forceinline__ void start(float (&d)[Config::kAccumulators], bool has_bias,
                                        uint32_t& bias_phase) const {
    if (has_bias) mbarrier_wait(full, bias_phase);
    const uint32_t col = smem_u32(row + threadIdx.x % 4 * 2);  // columns 8j + 2(l%4), +1
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
      if (threadIdx.x % 32 == 0) mbarrier_arrive(empty);
      bias_phase ^= 1;
    }
  }
};

// One consumer warpgroup's epilogue: C from registers where TMA cannot store it; else 16-bit C
// packed (and, on two-consumer tiles, left for the next tile's k-tiles to store), fp32 C through
// the ring of boxes; split-K's owned columns at once. kPermuted: accumulator_row's order.
template <typename T, typename Config, bool kPermuted, int kSplitK>
class Epilogue {
 public:
  __device__ __forceinline__ Epilogue(const CUtensorMap* map_c, unsigned char* sC, int consumer,
                                      bool leader)
      : map_c_(map_c), ring_(sC + consumer * Config::kEpilogueBoxes * Config::kBoxBytes),
        ring_addr_(smem_u32(ring_)), consumer_(consumer), leader_(leader) {}

  // After the wgmmas of k-tile k_index of the next tile are issued: the pending tile's round that
  // falls due there.
  __device__ __forceinline__ void store_due_round(int k_index) {
    if (pending_ && k_index % kStoreSpacing == 0) {
      const int round = k_index / kStoreSpacing;
      store_pending_rounds(round, round + 1);
    }
  }

  // The pending tile's rounds that the next tile's k_tiles were too few to carry.
  __device__ __forceinline__ void finish_pending(int k_tiles) {
    if (pending_) {
      store_pending_rounds((k_tiles + kStoreSpacing - 1) / kStoreSpacing, kPendingRounds);
    }
    pending_ = false;
  }

  // The consumer's rows [row0, row0 + 64) of the tile at (z, n0): d holds its sums (split-K: of
  // the columns block `split` owns, after reduce_split).
  __device__ __forceinline__ void store(const WgmmaParams& p, const float (&d)[Config::kAccumulators],
                                        int z, int row0, int n0, uint32_t split) {
    if constexpr (!Config::kBoxedC) {
      // A slim tile is not whole boxes: from registers (the plan never asks for TMA stores).
      store_accumulators<Config, T, kPermuted>(p, d, z, row0, n0);
    } else if constexpr (kSplitK > 1 && Config::kBoxesPerTile % kSplitK != 0) {
      // Owned columns narrower than a box (a 16-bit 64×128 tile split in 4 or 8, 128×128 in 4; a
      // tf32 64×128 tile split in 8): from registers, 32 or 16 columns a block, whose stores are a
      // small part of its time (the plan says so: heuristics.cpp's owns_whole_boxes).
      store_accumulators<Config, T, kPermuted, kSplitK>(p, d, z, row0, n0, split);
    } else if constexpr (kSplitK > 1 && Config::kTf32) {
      // fp32 C of a split tile (64×256, 64×128 or 128×128): the owned boxes (kBlockN / kSplitK
      // columns), through the ring at once. Unrolled over the owners so that d is indexed with
      // constants. A transposed C's boxes span 64 of the product's columns: owned columns
      // narrower than that leave from registers.
      constexpr int kOwnedBoxes = Config::kBoxesPerTile / kSplitK;
      constexpr int kHalves = Config::kMmaM / Config::kBoxCols;
      if (!p.tma_store || (p.c_transposed && kOwnedBoxes % kHalves != 0)) {
        store_accumulators<Config, T, kPermuted, kSplitK>(p, d, z, row0, n0, split);
      } else if (p.c_transposed) {
        if constexpr (kOwnedBoxes % kHalves == 0) {
#pragma unroll
          for (int owner = 0; owner < kSplitK; ++owner) {
            if (owner != static_cast<int>(split)) continue;
            store_round<Config, true, kOwnedBoxes>(
                map_c_, ring_addr_, ring_, consumer_, leader_, owner, z, row0, n0,
                [&](int box, uint32_t box_addr) {
                  fill_box_fp32_transposed<Config, kPermuted>(d, box, box_addr);
                });
          }
        }
      } else {
#pragma unroll
        for (int owner = 0; owner < kSplitK; ++owner) {
          if (owner != static_cast<int>(split)) continue;
          store_round<Config, false, kOwnedBoxes>(
              map_c_, ring_addr_, ring_, consumer_, leader_, owner, z, row0, n0,
              [&](int box, uint32_t box_addr) { fill_box_fp32<Config, kPermuted>(d, box, box_addr); });
        }
      }
    } else if constexpr (kSplitK > 1) {
      // Sums of the owned columns (a 1/kSplitK share of the boxes), stored at once.
      if (!p.tma_store) {
        store_accumulators<Config, T, kPermuted, kSplitK>(p, d, z, row0, n0, split);
      } else {
        constexpr int kOwnedBoxes = Config::kBoxesPerTile / kSplitK;
        pack_tile<T>(d, packed_);
        // Unrolled over the owners so that packed_ is indexed with constants (as in
        // store_pending_rounds).
#pragma unroll
        for (int owner = 0; owner < kSplitK; ++owner) {
          if (owner != static_cast<int>(split)) continue;
          store_round<Config, false, kOwnedBoxes>(
              map_c_, ring_addr_, ring_, consumer_, leader_, owner, z, row0, n0,
              [&](int box, uint32_t box_addr) {
                fill_box_packed<Config>(packed_, box, box_addr);
              });
        }
      }
    } else if (!p.tma_store) {
      store_accumulators<Config, T, kPermuted>(p, d, z, row0, n0);
    } else if constexpr (!Config::kTf32) {
      pack_tile<T>(d, packed_);
      pending_z_ = z, pending_row0_ = row0, pending_n0_ = n0;
      if constexpr (kDeferStores) {
        pending_ = true;
      } else {
        store_pending_rounds(0, kPendingRounds);
      }
    } else if (p.c_transposed) {
      if constexpr (kTransposedRounds) {
#pragma unroll
        for (int round = 0; round < kRounds; ++round) {
          store_round<Config, true>(map_c_, ring_addr_, ring_, consumer_, leader_, round, z, row0,
                                    n0, [&](int box, uint32_t box_addr) {
                                      fill_box_fp32_transposed<Config, kPermuted>(d, box,
                                                                                  box_addr);
                                    });
        }
      } else {
        // A ring of one box cannot hold a transposed box's two halves (tf32 128×192): the plan
        // stores such tiles from registers (heuristics.cpp's owns_transposed_boxes).
        store_accumulators<Config, T, kPermuted>(p, d, z, row0, n0);
      }
    } else {
#pragma unroll
      for (int round = 0; round < kRounds; ++round) {
        store_round<Config>(map_c_, ring_addr_, ring_, consumer_, leader_, round, z, row0, n0,
                            [&](int box, uint32_t box_addr) {
                              fill_box_fp32<Config, kPermuted>(d, box, box_addr);
                            });
      }
    }
  }

  // After the last tile: its pending stores, and a wait until every store has read the shared
  // memory it stores from; their writes need no wait (the grid's completion includes them, and
  // waiting for them costs each block).
  __device__ __forceinline__ void finish() {
    if (pending_) store_pending_rounds(0, kPendingRounds);
    if (leader_) bulk_wait_read<0>();
  }

 private:
  // 16-bit C on two-consumer tiles (128×256, 128×192, 128×128) leaves late: a tile is packed
  // (rounded) into half its accumulators' registers at its end, and its rounds of TMA stores go
  // out during the next tile's first k-tiles, while that tile's wgmmas run, instead of idling the
  // tensor cores through the stores. The main loop keeps shared memory near its bandwidth (the
  // wgmmas read most of it), so the stores go one box (kPendingRing) every kStoreSpacing k-tiles:
  // more boxes a k-tile lengthened those k-tiles by more than they saved (benchmarks/NOTES.md).
  // fp32 C (tf32) would need all 128 registers; on 64×256 tiles a block has one or two tiles,
  // nothing to hide behind (deferred, they ran slower). Those leave at once, through the whole
  // ring.
  static constexpr bool kDeferStores = !Config::kTf32 && Config::kConsumers == 2;
  static constexpr int kRounds = Config::kBoxesPerTile / Config::kEpilogueBoxes;
  // Whether a round of the ring holds whole columns of transposed boxes (fp32 C: two a column).
  static constexpr bool kTransposedRounds =
      Config::kEpilogueBoxes % (Config::kMmaM / Config::kBoxCols) == 0;
  static constexpr int kPendingRing = kDeferStores ? 1 : Config::kEpilogueBoxes;
  static constexpr int kPendingRounds = Config::kBoxesPerTile / kPendingRing;
  static constexpr int kStoreSpacing = kDeferStores ? 2 : 1;

  // Rounds [from, to) of the packed tile. The rounds are unrolled so that each indexes packed_
  // with constants: a register array indexed at run time would live in local memory.
  __device__ __forceinline__ void store_pending_rounds(int from, int to) {
    if constexpr (!Config::kTf32) {
#pragma unroll
      for (int round = 0; round < kPendingRounds; ++round) {
        if (round < from || round >= to) continue;
        store_round<Config, false, kPendingRing>(
            map_c_, ring_addr_, ring_, consumer_, leader_, round, pending_z_, pending_row0_,
            pending_n0_, [&](int box, uint32_t box_addr) {
              fill_box_packed<Config>(packed_, box, box_addr);
            });
      }
    }
  }

  const CUtensorMap* map_c_;
  const unsigned char* ring_;  // (kEpilogueBoxes, kBoxBytes): this consumer's boxes
  uint32_t ring_addr_;
  int consumer_;
  bool leader_;
  uint32_t packed_[Config::kTf32 ? 1 : Config::kAccumulators / 2];
  bool pending_ = false;  // packed_ holds a tile not yet (all) stored
  int pending_z_ = 0, pending_row0_ = 0, pending_n0_ = 0;
};

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90
}  // namespace torch_gemm
