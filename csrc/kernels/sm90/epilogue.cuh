// The Hopper kernel's epilogue: C's way out, from registers where TMA cannot address C, else
// through swizzled shared-memory boxes and TMA stores that run on while the consumers start the
// next tile.
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
__device__ __forceinline__ float pick_half(const float (&d)[128], int i, int half) {
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
__device__ __forceinline__ void fill_box_fp32(const float (&d)[128], int box, uint32_t box_addr) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  const int q = lane % 4;
#pragma unroll
  for (int jj = 0; jj < Config::kBoxCols / 8; ++jj) {
    const int j = box * (Config::kBoxCols / 8) + jj;  // 8-column block of the 256
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
__device__ __forceinline__ void fill_box_fp32_transposed(const float (&d)[128], int box,
                                                         uint32_t box_addr) {
  static_assert(Config::kTf32, "fp32 C");
  constexpr int kHalves = Config::kMmaM / Config::kBoxCols;  // 2: a box takes half the rows
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  if (warp / (4 / kHalves) != box % kHalves) return;
  const int q = lane % 4;
  const int first_col = box / kHalves * Config::kMmaM;  // of the consumer's 256
#pragma unroll
  for (int jj = 0; jj < Config::kMmaM / 8; ++jj) {
    const int j = first_col / 8 + jj;  // 8-column block of the 256
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
// owns; the deferred stores of 128×256 tiles: one box a round, spread over the next tile's
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

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90
}  // namespace torch_gemm
