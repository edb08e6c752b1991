// The warp-tiled thread tile shared by the warptile and multistage rungs: how a block's tile of C
// splits into warp tiles and thread tiles, the fragments a thread reads from shared memory for
// one k, its FMAs, and the store of its outputs. The rungs differ only in how shared memory fills.
#pragma once

#include "kernels/operand_tile.cuh"

namespace torch_gemm {

// Block tile (kBlockM, kBlockN) = kWarpsM × kWarpsN warp tiles of (kWarpM, kWarpN). A warp's
// lanes form a kLanesM × kLanesN grid, and each thread owns kThreadM × kThreadN outputs split
// into kRepM × kRepN sub-tiles of (kSub, kSub), kWarpM / kRepM rows and kWarpN / kRepN columns
// apart. For one k the lanes of a warp then read kLanesM adjacent float4s of sA and kLanesN
// adjacent float4s of sB, each at most 128 bytes: one wavefront per LDS.128 (the rest is
// broadcast), where regtile's contiguous 8×8 per thread strides 32 bytes and needs two.
//
// kPairLanes orders the lanes so that lane bit 0 walks M and bit 1 walks N. Shared memory returns
// 128 bytes (one register of 32 lanes) per cycle, so an LDS.128 takes 4 cycles unless lanes n and
// n^1, or n and n^2, read the same address, when it packs into 2. With lane_n fastest (the
// straightforward order) the A reads are shared by 8 consecutive lanes but no two neighbours
// share a B read: 4 cycles per B fragment. Paired, A is shared by n and n^2, B by n and n^1:
// 2 cycles each.
template <int kBlockM_, int kBlockN_, int kWarpM_, int kWarpN_, int kThreadM_, int kThreadN_,
          bool kPairLanes_ = true>
struct WarpTiling {
  static constexpr int kBlockM = kBlockM_;    // rows of C per block
  static constexpr int kBlockN = kBlockN_;    // columns of C per block
  static constexpr int kWarpM = kWarpM_;      // rows of C per warp
  static constexpr int kWarpN = kWarpN_;      // columns of C per warp
  static constexpr int kThreadM = kThreadM_;  // rows of C per thread, in registers
  static constexpr int kThreadN = kThreadN_;  // columns of C per thread
  static constexpr int kSub = HardwareConfig::kVecFloats;  // sub-tile side: one LDS.128
  static constexpr bool kPairLanes = kPairLanes_;

  static constexpr int kWarpsM = kBlockM / kWarpM;
  static constexpr int kWarpsN = kBlockN / kWarpN;
  static constexpr int kThreads = kWarpsM * kWarpsN * HardwareConfig::kWarpSize;
  static constexpr int kLanesM = kWarpM / kThreadM;
  static constexpr int kLanesN = kWarpN / kThreadN;
  static constexpr int kRepM = kThreadM / kSub;
  static constexpr int kRepN = kThreadN / kSub;
  static constexpr int kRepStrideM = kWarpM / kRepM;  // rows between a thread's sub-tiles
  static constexpr int kRepStrideN = kWarpN / kRepN;  // columns between them

  static_assert(kBlockM % kWarpM == 0 && kBlockN % kWarpN == 0,
                "warp tiles must tile the block exactly");
  static_assert(kLanesM * kLanesN == HardwareConfig::kWarpSize,
                "a warp's 32 lanes must tile its warp tile exactly");
  static_assert(kThreadM % kSub == 0 && kThreadN % kSub == 0,
                "a thread tile must be whole (kSub, kSub) sub-tiles");
  static_assert(kRepStrideM == kLanesM * kSub && kRepStrideN == kLanesN * kSub,
                "the lanes' sub-tiles must sit side by side: one LDS.128 reads adjacent float4s");
  static_assert(kLanesM * kSub <= HardwareConfig::kSmemBanks &&
                    kLanesN * kSub <= HardwareConfig::kSmemBanks,
                "a warp's distinct float4s of one row must fit one 128-byte wavefront");
  static_assert(!kPairLanes || (kLanesM % 2 == 0 && kLanesN % 2 == 0),
                "paired lanes need an even number of lanes along M and along N");

  // This lane's (row, column) in the warp's kLanesM × kLanesN grid of lanes.
  __device__ __forceinline__ static int lane_m(int lane) {
    return kPairLanes ? (lane & 1) | (lane >> 2) / (kLanesN / 2) * 2 : lane / kLanesN;
  }
  __device__ __forceinline__ static int lane_n(int lane) {
    return kPairLanes ? (lane >> 1 & 1) | (lane >> 2) % (kLanesN / 2) * 2 : lane % kLanesN;
  }
};

// One thread's outputs and the fragments that feed them. Fragments are double buffered: while
// the FMAs of depth kk run on one buffer, the LDS.128s for kk + 1 fill the other.
template <typename Tiling>
struct ThreadTile {
  static constexpr int kThreadM = Tiling::kThreadM, kThreadN = Tiling::kThreadN;
  static constexpr int kSub = Tiling::kSub;
  static constexpr int kFragBuffers = 2;

  float rC[kThreadM][kThreadN];     // (kThreadM, kThreadN)
  float rA[kFragBuffers][kThreadM]; // (kFragBuffers, kThreadM)
  float rB[kFragBuffers][kThreadN]; // (kFragBuffers, kThreadN)
  int row0;  // this thread's first row in the block tile
  int col0;  // and first column

  __device__ __forceinline__ ThreadTile() {
    const int warp = threadIdx.x / HardwareConfig::kWarpSize;
    const int lane = threadIdx.x % HardwareConfig::kWarpSize;
    row0 = warp / Tiling::kWarpsN * Tiling::kWarpM + Tiling::lane_m(lane) * kSub;
    col0 = warp % Tiling::kWarpsN * Tiling::kWarpN + Tiling::lane_n(lane) * kSub;
#pragma unroll
    for (int i = 0; i < kThreadM; ++i) {
#pragma unroll
      for (int j = 0; j < kThreadN; ++j) rC[i][j] = 0.0f;
    }
  }

  // Shared → registers: this thread's kThreadM values of A and kThreadN of B at one depth k;
  // sA_k and sB_k point at that k's row of the (k, m) and (k, n) shared tiles.
  __device__ __forceinline__ void load_fragments(const float* sA_k, const float* sB_k, int buf) {
#pragma unroll
    for (int r = 0; r < Tiling::kRepM; ++r) {
      const float4 a = *reinterpret_cast<const float4*>(sA_k + row0 + r * Tiling::kRepStrideM);
      float* dst = &rA[buf][r * kSub];
      dst[0] = a.x; dst[1] = a.y; dst[2] = a.z; dst[3] = a.w;
    }
#pragma unroll
    for (int r = 0; r < Tiling::kRepN; ++r) {
      const float4 b = *reinterpret_cast<const float4*>(sB_k + col0 + r * Tiling::kRepStrideN);
      float* dst = &rB[buf][r * kSub];
      dst[0] = b.x; dst[1] = b.y; dst[2] = b.z; dst[3] = b.w;
    }
  }

  // The outer product of one depth's fragments into the accumulators.
  __device__ __forceinline__ void fma(int buf) {
#pragma unroll
    for (int i = 0; i < kThreadM; ++i) {
#pragma unroll
      for (int j = 0; j < kThreadN; ++j) rC[i][j] = fmaf(rA[buf][i], rB[buf][j], rC[i][j]);
    }
  }

  // Registers → the output, for the block tile at (m0, n0), edges masked.
  __device__ __forceinline__ void store(const OutputView& c, int64_t m0, int64_t n0) const {
    const bool vec = vector_store_ok(c);
#pragma unroll
    for (int r = 0; r < Tiling::kRepM; ++r) {
#pragma unroll
      for (int i = 0; i < kSub; ++i) {
        const int64_t m = m0 + row0 + r * Tiling::kRepStrideM + i;
        if (m >= c.M) continue;
#pragma unroll
        for (int q = 0; q < Tiling::kRepN; ++q) {
          const float* v = &rC[r * kSub + i][q * kSub];
          const float out[kSub] = {v[0], v[1], v[2], v[3]};
          store_row4(c, vec, m, n0 + col0 + q * Tiling::kRepStrideN, out);
        }
      }
    }
  }
};

// The origin (m0, n0) of this block's tile of C, tiles numbered by linear_tile_index and placed
// by grouped_tile; false for a block past the last tile (the grid's last row may overhang), which
// must return before any barrier.
template <typename Config>
__device__ __forceinline__ bool grouped_block_origin(const GemmParams& p, int64_t* m0,
                                                     int64_t* n0) {
  const int64_t tiles_m = ceil_div(p.M, Config::kBlockM);
  const int64_t tiles_n = ceil_div(p.N, Config::kBlockN);
  const int64_t tile = linear_tile_index();
  if (tile >= tiles_m * tiles_n) return false;
  int64_t tile_m, tile_n;
  grouped_tile<Config::kGroupM>(tile, tiles_m, tiles_n, &tile_m, &tile_n);
  *m0 = tile_m * Config::kBlockM;
  *n0 = tile_n * Config::kBlockN;
  return true;
}

}  // namespace torch_gemm
