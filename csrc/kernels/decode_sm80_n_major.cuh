// decode_sm80 against an N-major weight (B[k, n] with unit stride along n, as dx = dy·W reads a
// linear's (out, in) weight): the weight streamed once in 16-byte rows of 8 columns, repacked in
// registers into mma.sync's 16-row operand; K split by a block's warps and, on sm_90, by a
// cluster's blocks, whose sums meet in distributed shared memory in a fixed order.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/decode_plan.h"
#include "kernels/grid.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/numeric.cuh"

namespace torch_gemm {

// Cᵀ = Bᵀ·Aᵀ as in decode_sm80_kernel, Bᵀ the 16-row operand. A block owns 64 columns of C: lane
// (g = lane / 4, c = lane % 4) copies columns n0 + 8g .. n0 + 8g + 7 of the 8 rows k + 8c .. k +
// 8c + 7 of each 32-row chunk at k (for each row the 8 lanes of one c read 128 contiguous bytes),
// and 8 tokens' A at the same 8 k. mma step s (of 2 a chunk) takes the rows 4s .. 4s + 3 of the
// lane's 8 as its k pairs (2c, 2c+1) and (2c+8, 2c+9): A's elements 4s .. 4s + 3 are its token
// operand as loaded, and column quad j (of 4) pairs two rows' elements j and j + 4 (mma rows g
// and g + 8) with a byte permute. The order of k inside a chunk does not change the sum, and both
// operands agree on it.
template <typename T, int kTokenTiles>
__global__ void __launch_bounds__(DecodeNMajorConfig::kThreads, DecodeNMajorConfig::kMinBlocksPerSm)
decode_sm80_n_major_kernel(GemmParams p, int64_t chunks_per_split) {
  using Cfg = DecodeNMajorConfig;
  constexpr int kUnroll = Cfg::template kUnroll<kTokenTiles>;
  constexpr int kRows = Cfg::kChunk / 4;                        // rows of B a lane copies a chunk
  constexpr int kSums = kTokenTiles * 4 * 4 * 32;               // a block's sums: [t][j][i][lane]
  constexpr int kSumsPerThread = kSums / Cfg::kThreads;
  p = batch_element(p, blockIdx.z);
  const T* __restrict__ A = static_cast<const T*>(p.a);
  const T* __restrict__ B = static_cast<const T*>(p.b);  // B[k, n] at k·b_stride_k + n

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * Cfg::kColumns;
  // N is a multiple of 8 (the launcher's condition): a lane's 8 columns are in range or not.
  const bool n_in = n0 + 8 * g < p.N;
  const T* b_lane = B + (n_in ? n0 + 8 * g : 0);
  const T* a_rows[kTokenTiles];
#pragma unroll
  for (int t = 0; t < kTokenTiles; ++t) {
    const int64_t m = t * 8 + g;
    a_rows[t] = A + (m < p.M ? m : p.M - 1) * p.a_stride_m;  // tokens past M: read, never stored
  }

  const int64_t chunks = ceil_div(p.K, int64_t{Cfg::kChunk});
  const int64_t split_first = static_cast<int64_t>(blockIdx.y) * chunks_per_split;
  const int64_t split_end = split_first + chunks_per_split < chunks ? split_first + chunks_per_split : chunks;

  float rAcc[kTokenTiles][4][4];
#pragma unroll
  for (int t = 0; t < kTokenTiles; ++t) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) rAcc[t][j][i] = 0.0f;
    }
  }

  // Element e of a 16-byte vector's 8 from row x (the lower k, low half) and row y.
  const auto pair = [](const uint4& x, const uint4& y, int e) {
    const uint32_t* xw = reinterpret_cast<const uint32_t*>(&x);
    const uint32_t* yw = reinterpret_cast<const uint32_t*>(&y);
    return __byte_perm(xw[e / 2], yw[e / 2], e % 2 == 0 ? 0x5410 : 0x7632);
  };

  constexpr int64_t kStep = int64_t{Cfg::kWarps} * kUnroll;  // chunks per step of a warp
  for (int64_t chunk0 = split_first + warp; chunk0 < split_end; chunk0 += kStep) {
    // The weight is read once: every load of this step is issued before the first mma.
    uint4 rB[kUnroll][kRows];
    uint4 rA[kUnroll][kTokenTiles];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t chunk = chunk0 + int64_t{u} * Cfg::kWarps;
      const int64_t k = chunk * Cfg::kChunk + c * kRows;
      // K is a multiple of 8: a lane's 8 rows (and A's 8 elements) are all in range or none.
      const bool in = chunk < split_end && k < p.K;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        rB[u][r] = in && n_in ? __ldcs(reinterpret_cast<const uint4*>(b_lane + (k + r) * p.b_stride_k))
                              : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t) {
        // A's rows are few and read by every block: kept in the caches (__ldg).
        rA[u][t] = in ? __ldg(reinterpret_cast<const uint4*>(a_rows[t] + k)) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t b_frag[4] = {pair(rB[u][4 * s], rB[u][4 * s + 1], j),
                                      pair(rB[u][4 * s], rB[u][4 * s + 1], j + 4),
                                      pair(rB[u][4 * s + 2], rB[u][4 * s + 3], j),
                                      pair(rB[u][4 * s + 2], rB[u][4 * s + 3], j + 4)};
#pragma unroll
          for (int t = 0; t < kTokenTiles; ++t) {
            const uint32_t* aw = reinterpret_cast<const uint32_t*>(&rA[u][t]);
            mma_m16n8k16<T>(rAcc[t][j], b_frag, {aw[2 * s], aw[2 * s + 1]});
          }
        }
      }
    }
  }

  // The block's 8 warps summed in one fixed order, each thread kSumsPerThread of the sums.
  __shared__ float sPartial[Cfg::kWarps][kSums];
  __shared__ float sSum[kSums];
#pragma unroll
  for (int t = 0; t < kTokenTiles; ++t) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) sPartial[warp][((t * 4 + j) * 4 + i) * 32 + lane] = rAcc[t][j][i];
    }
  }
  __syncthreads();
  // Sum e = ((t·4 + j)·4 + i)·32 + lane: Cᵀ row g + 8·(i / 2) of column quad j, token 2c + i % 2.
  const auto store = [&](int e, float sum) {
    const int t = e / 512, j = e / 128 % 4, i = e / 32 % 4, l = e % 32;
    const int64_t n = n0 + 8 * (l / 4) + j + (i >= 2 ? 4 : 0);
    const int64_t m = t * 8 + 2 * (l % 4) + (i & 1);
    if (n >= p.N || m >= p.M) return;
    T* C = static_cast<T*>(p.c);
    C[m * p.c_stride_m + n * p.c_stride_n] = from_acc<T>(add_bias<T>(p, n, sum));
  };
#pragma unroll
  for (int q = 0; q < kSumsPerThread; ++q) {
    const int e = q * Cfg::kThreads + static_cast<int>(threadIdx.x);
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < Cfg::kWarps; ++w) sum += sPartial[w][e];
    if (gridDim.y == 1) {
      store(e, sum);
    } else {
      sSum[e] = sum;
    }
  }
  if (gridDim.y == 1) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The cluster's blocks (gridDim.y of them, one slice of K each): rank r adds the r-th share of
  // every block's sums, in rank order, and stores it. The second sync keeps every block's sSum
  // alive until the others have read it.
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int splits = static_cast<int>(gridDim.y);
  const int share = kSums / splits, rank = static_cast<int>(cluster.block_rank());
  for (int e = rank * share + static_cast<int>(threadIdx.x); e < (rank + 1) * share; e += Cfg::kThreads) {
    float sum = 0.0f;
    for (int r = 0; r < splits; ++r) sum += cluster.map_shared_rank(sSum, r)[e];
    store(e, sum);
  }
  cluster.sync();
#else
  __trap();  // the launcher splits K across blocks only where clusters launch (sm_90)
#endif
}

}  // namespace torch_gemm
