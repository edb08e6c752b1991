// Rung 4, warptile: warp tiles, 2×(4×4) thread tiles (no bank conflicts), double buffering.
// Predicted ~40 TFLOP/s at 4096³ fp32; measured 41.6 on an H200 (cuBLAS 51.2, ratio 0.81).
//
// Over regtile: the next k-tile's global loads are in flight while the current one is computed
// and one barrier per k-tile replaces two; the fragments for kk + 1 are read from shared memory
// while kk is computed; every LDS.128 is a single wavefront; tiles are rasterized in groups of
// kGroupM tile rows for L2 reuse.
#pragma once

#include "kernels/launch.h"
#include "kernels/operand_tile.cuh"

namespace torch_gemm {

// Block tile (kBlockM, kBlockN) = kWarpsM × kWarpsN warp tiles of (kWarpM, kWarpN). A warp's
// lanes form a kLanesM × kLanesN grid, and each thread owns kThreadM × kThreadN outputs split
// into kRepM × kRepN sub-tiles of (kSub, kSub), kWarpM / kRepM rows and kWarpN / kRepN columns
// apart. For one k the lanes of a warp then read kLanesM adjacent float4s of sA and kLanesN
// adjacent float4s of sB, each at most 128 bytes: one wavefront per LDS.128 (the rest is
// broadcast), where regtile's contiguous 8×8 per thread strides 32 bytes and needs two.
struct WarptileConfig {
  static constexpr int kBlockM = kWarptileBlockM;  // rows of C per block (launch.h: auto needs it)
  static constexpr int kBlockN = kWarptileBlockN;  // columns of C per block
  // Depth of one k-tile. 16 would halve the barriers, but its prefetched k-tile needs 8 more
  // registers per thread and spills at the 128-register cap of kMinBlocksPerSM = 2.
  static constexpr int kBlockK = 8;
  static constexpr int kWarpM = 32;    // rows of C per warp
  static constexpr int kWarpN = 64;    // columns of C per warp
  static constexpr int kThreadM = 8;   // rows of C per thread, in registers
  static constexpr int kThreadN = 8;   // columns of C per thread
  static constexpr int kSub = HardwareConfig::kVecFloats;  // sub-tile side: one LDS.128
  static constexpr int kStages = 2;      // shared-memory buffers: compute on one, fill the other
  static constexpr int kFragStages = 2;  // register fragments: kk computed, kk + 1 loading
  static constexpr int kGroupM = 8;    // tile rows per rasterization group (L2 reuse)
  static constexpr int kMinBlocksPerSM = 2;  // caps registers at 65536 / (2·256) = 128 per thread

  static constexpr int kWarpsM = kBlockM / kWarpM;       // 4
  static constexpr int kWarpsN = kBlockN / kWarpN;       // 2
  static constexpr int kThreads = kWarpsM * kWarpsN * HardwareConfig::kWarpSize;  // 256
  static constexpr int kLanesM = kWarpM / kThreadM;      // 4
  static constexpr int kLanesN = kWarpN / kThreadN;      // 8
  static constexpr int kRepM = kThreadM / kSub;          // 2
  static constexpr int kRepN = kThreadN / kSub;          // 2
  static constexpr int kRepStrideM = kWarpM / kRepM;     // 16 rows between a thread's sub-tiles
  static constexpr int kRepStrideN = kWarpN / kRepN;     // 32 columns between them
  // Padding as in regtile: pitch ≡ 4 (mod 32) banks keeps the K-major transposing stores
  // conflict-free and the rows 16-byte aligned.
  static constexpr int kSmemPad = 4;
  static constexpr int kPitchA = kBlockM + kSmemPad;
  static constexpr int kPitchB = kBlockN + kSmemPad;

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
  static_assert(kStages == 2, "the k loop alternates between two stages (stage ^ 1)");
  static_assert(kBlockK % kFragStages == 0,
                "fragment buffers alternate with kk: a k-tile must end on the last buffer so "
                "that the next k-tile's kk = 0 fragments land in buffer 0");
};

// Which tile of C a block computes. Consecutive blocks walk down a group of kGroupM tile rows
// before moving one tile column right, so the blocks resident at once share a few row panels of
// A and column panels of B in L2, instead of all of B for one row panel of A.
template <int kGroupM>
__device__ __forceinline__ void grouped_tile(int64_t tile, int64_t tiles_m, int64_t tiles_n,
                                             int64_t* tile_m, int64_t* tile_n) {
  const int64_t tiles_per_group = kGroupM * tiles_n;
  const int64_t first_m = tile / tiles_per_group * kGroupM;
  // The last group may be short.
  const int64_t rows = tiles_m - first_m < kGroupM ? tiles_m - first_m : kGroupM;
  const int64_t in_group = tile % tiles_per_group;
  *tile_m = first_m + in_group % rows;
  *tile_n = in_group / rows;
}

template <typename Config, typename LayoutA, typename LayoutB>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSM)
gemm_warptile_kernel(GemmParams p) {
  constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN, kBlockK = Config::kBlockK;
  constexpr int kThreadM = Config::kThreadM, kThreadN = Config::kThreadN, kSub = Config::kSub;
  using LoaderA = OperandTileLoader<LayoutA, kBlockM, kBlockK, Config::kThreads, Config::kPitchA>;
  using LoaderB = OperandTileLoader<LayoutB, kBlockN, kBlockK, Config::kThreads, Config::kPitchB>;

  // A transposed as in regtile. Two stages: while the block computes on one, the next k-tile is
  // stored into the other, so one barrier per k-tile suffices.
  constexpr int kAlign = HardwareConfig::kVecBytes;
  constexpr int kStages = Config::kStages, kPitchA = Config::kPitchA, kPitchB = Config::kPitchB;
  __shared__ __align__(kAlign) float sA[kStages][kBlockK][kPitchA];  // (kStages, kBlockK, kBlockM)
  __shared__ __align__(kAlign) float sB[kStages][kBlockK][kPitchB];  // (kStages, kBlockK, kBlockN)

  const int64_t tiles_m = ceil_div(p.M, kBlockM);
  const int64_t tiles_n = ceil_div(p.N, kBlockN);
  const int64_t tile = linear_tile_index();
  if (tile >= tiles_m * tiles_n) return;  // whole block, before any barrier
  int64_t tile_m, tile_n;
  grouped_tile<Config::kGroupM>(tile, tiles_m, tiles_n, &tile_m, &tile_n);
  const int64_t m0 = tile_m * kBlockM;
  const int64_t n0 = tile_n * kBlockN;

  const int tid = threadIdx.x;
  const int warp = tid / HardwareConfig::kWarpSize;
  const int lane = tid % HardwareConfig::kWarpSize;
  // lane_n fastest: the kLanesN lanes of a row group store kLanesN adjacent float4s of C.
  const int lane_m = lane / Config::kLanesN;
  const int lane_n = lane % Config::kLanesN;
  // This thread's first row and column in the block tile.
  const int row0 = warp / Config::kWarpsN * Config::kWarpM + lane_m * kSub;
  const int col0 = warp % Config::kWarpsN * Config::kWarpN + lane_n * kSub;

  const OperandView view_a{static_cast<const float*>(p.a), p.M, p.a_stride_m, p.a_stride_k};
  const OperandView view_b{static_cast<const float*>(p.b), p.N, p.b_stride_n, p.b_stride_k};
  LoaderA load_a(view_a, m0);
  LoaderB load_b(view_b, n0);

  float rC[kThreadM][kThreadN] = {};  // (kThreadM, kThreadN)
  constexpr int kFragStages = Config::kFragStages;
  float rA[kFragStages][kThreadM];    // (kFragStages, kThreadM): fragments for kk and kk + 1
  float rB[kFragStages][kThreadN];    // (kFragStages, kThreadN)

  // Shared → registers: this thread's kThreadM values of A and kThreadN of B at depth kk.
  const auto load_fragments = [&](int stage, int kk, int buf) {
#pragma unroll
    for (int r = 0; r < Config::kRepM; ++r) {
      const float4 a =
          *reinterpret_cast<const float4*>(&sA[stage][kk][row0 + r * Config::kRepStrideM]);
      float* dst = &rA[buf][r * kSub];
      dst[0] = a.x; dst[1] = a.y; dst[2] = a.z; dst[3] = a.w;
    }
#pragma unroll
    for (int r = 0; r < Config::kRepN; ++r) {
      const float4 b =
          *reinterpret_cast<const float4*>(&sB[stage][kk][col0 + r * Config::kRepStrideN]);
      float* dst = &rB[buf][r * kSub];
      dst[0] = b.x; dst[1] = b.y; dst[2] = b.z; dst[3] = b.w;
    }
  };

  if (p.K > 0) {  // K == 0: C is zeros
    load_a.load(k_tile_limit<kBlockK>(p.K, 0));
    load_b.load(k_tile_limit<kBlockK>(p.K, 0));
    load_a.store(sA[0]);
    load_b.store(sB[0]);
    __syncthreads();  // stage 0 is complete before anyone reads it
    load_fragments(0, 0, 0);

    int stage = 0;              // the stage holding the k-tile being computed
    int64_t k_next = kBlockK;   // first k of the k-tile after it
    bool has_next;
    do {
      has_next = k_next < p.K;
      if (has_next) {
        // Issued now, consumed at the last kk: the global latency hides behind this k-tile's FMAs.
        load_a.advance();
        load_b.advance();
        const int k_limit = k_tile_limit<kBlockK>(p.K, k_next);
        load_a.load(k_limit);
        load_b.load(k_limit);
      }
#pragma unroll
      for (int kk = 0; kk < kBlockK; ++kk) {
        if (kk < kBlockK - 1) {
          load_fragments(stage, kk + 1, (kk + 1) % kFragStages);
        } else if (has_next) {
          // The other stage was last read at kk <= kBlockK - 2 of the previous k-tile, before
          // that k-tile's barrier, so it is free to overwrite.
          load_a.store(sA[stage ^ 1]);
          load_b.store(sB[stage ^ 1]);
          __syncthreads();  // the next k-tile is complete before anyone reads it
          load_fragments(stage ^ 1, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < kThreadM; ++i) {
#pragma unroll
          for (int j = 0; j < kThreadN; ++j) {
            rC[i][j] = fmaf(rA[kk % kFragStages][i], rB[kk % kFragStages][j], rC[i][j]);
          }
        }
      }
      stage ^= 1;
      k_next += kBlockK;
    } while (has_next);
  }

  const bool c_vec = c_vector_ok(p);
#pragma unroll
  for (int r = 0; r < Config::kRepM; ++r) {
#pragma unroll
    for (int i = 0; i < kSub; ++i) {
      const int64_t m = m0 + row0 + r * Config::kRepStrideM + i;
      if (m >= p.M) continue;
#pragma unroll
      for (int q = 0; q < Config::kRepN; ++q) {
        const float* c = &rC[r * kSub + i][q * kSub];
        const float out[kSub] = {c[0], c[1], c[2], c[3]};
        store_c4(p, c_vec, m, n0 + col0 + q * Config::kRepStrideN, out);
      }
    }
  }
}

}  // namespace torch_gemm
