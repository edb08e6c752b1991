// Rung 4, warptile: over regtile, warp tiles of 2×(4×4) thread tiles (every LDS.128 one wavefront),
// the next k-tile's loads and the next fragments in flight while the current ones are computed
// (one barrier per k-tile), tiles rasterized in groups of kGroupM tile rows for L2 reuse.
#pragma once

#include "kernels/launch.h"
#include "kernels/thread_tile.cuh"

namespace torch_gemm {

// 128×128 blocks of 4×2 warp tiles of 32×64, 8×8 outputs per thread as 2×2 sub-tiles of 4×4.
// Lanes in the straightforward order (lane_n fastest), the faster here; multistage pairs them
// (WarpTiling::kPairLanes).
struct WarptileConfig : WarpTiling<kWarptileBlockM, kWarptileBlockN, 32, 64, 8, 8, false> {
  // Depth of one k-tile. 16 would halve the barriers, but its prefetched k-tile needs 8 more
  // registers per thread and spills at the 128-register cap of kMinBlocksPerSM = 2.
  static constexpr int kBlockK = 8;
  static constexpr int kStages = 2;    // shared-memory buffers: compute on one, fill the other
  static constexpr int kGroupM = 8;    // tile rows per rasterization group (L2 reuse)
  static constexpr int kMinBlocksPerSM = 2;  // caps registers at 65536 / (2·256) = 128 per thread
  // Padding as in regtile: pitch ≡ 4 (mod 32) banks keeps the K-major transposing stores
  // conflict-free and the rows 16-byte aligned.
  static constexpr int kSmemPad = 4;
  static constexpr int kPitchA = kBlockM + kSmemPad;
  static constexpr int kPitchB = kBlockN + kSmemPad;

  static_assert(kStages == 2, "the k loop alternates between two stages (stage ^ 1)");
  static_assert(kBlockK % ThreadTile<WarpTiling>::kFragBuffers == 0,
                "fragment buffers alternate with kk: a k-tile must end on the last buffer so "
                "that the next k-tile's kk = 0 fragments land in buffer 0");
};

template <typename Config, typename LayoutA, typename LayoutB>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSM)
gemm_warptile_kernel(GemmParams p) {
  constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN, kBlockK = Config::kBlockK;
  using LoaderA = OperandTileLoader<LayoutA, kBlockM, kBlockK, Config::kThreads, Config::kPitchA>;
  using LoaderB = OperandTileLoader<LayoutB, kBlockN, kBlockK, Config::kThreads, Config::kPitchB>;
  using Tile = ThreadTile<Config>;

  // A transposed as in regtile. Two stages: while the block computes on one, the next k-tile is
  // stored into the other, so one barrier per k-tile suffices.
  constexpr int kAlign = HardwareConfig::kVecBytes;
  constexpr int kStages = Config::kStages, kPitchA = Config::kPitchA, kPitchB = Config::kPitchB;
  __shared__ __align__(kAlign) float sA[kStages][kBlockK][kPitchA];  // (kStages, kBlockK, kBlockM)
  __shared__ __align__(kAlign) float sB[kStages][kBlockK][kPitchB];  // (kStages, kBlockK, kBlockN)

  p = batch_element(p, blockIdx.z);
  int64_t m0, n0;
  if (!grouped_block_origin<Config>(p, &m0, &n0)) return;  // whole block, before any barrier

  const OperandView view_a{static_cast<const float*>(p.a), p.M, p.a_stride_m, p.a_stride_k};
  const OperandView view_b{static_cast<const float*>(p.b), p.N, p.b_stride_n, p.b_stride_k};
  LoaderA load_a(view_a, m0);
  LoaderB load_b(view_b, n0);
  Tile tt;

  if (p.K > 0) {  // K == 0: C is zeros
    load_a.load(k_tile_limit<kBlockK>(p.K, 0));
    load_b.load(k_tile_limit<kBlockK>(p.K, 0));
    load_a.store(sA[0]);
    load_b.store(sB[0]);
    __syncthreads();  // stage 0 is complete before anyone reads it
    tt.load_fragments(sA[0][0], sB[0][0], 0);

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
        constexpr int kBufs = Tile::kFragBuffers;
        if (kk < kBlockK - 1) {
          tt.load_fragments(sA[stage][kk + 1], sB[stage][kk + 1], (kk + 1) % kBufs);
        } else if (has_next) {
          // The other stage was last read at kk <= kBlockK - 2 of the previous k-tile, before
          // that k-tile's barrier, so it is free to overwrite.
          load_a.store(sA[stage ^ 1]);
          load_b.store(sB[stage ^ 1]);
          __syncthreads();  // the next k-tile is complete before anyone reads it
          tt.load_fragments(sA[stage ^ 1][0], sB[stage ^ 1][0], 0);
        }
        tt.fma(kk % kBufs);
      }
      stage ^= 1;
      k_next += kBlockK;
    } while (has_next);
  }

  tt.store(output_of(p), m0, n0);
}

}  // namespace torch_gemm
