// Rung for decode on the tensor cores: up to 64 rows of A (tokens) against a linear's weight
// streamed once, bf16/fp16 through mma.sync m16n8k16 and float32 as tf32 through m16n8k8. The
// product is computed transposed, Cᵀ = W·Aᵀ, so the weight fills mma.sync's 16-row operand and
// the few tokens its 8-column one: no tile rows are wasted on absent tokens.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/decode_plan.h"
#include "kernels/grid.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/numeric.cuh"

namespace torch_gemm {

// Each warp owns 16 columns of C (rows n of the weight, B's columns) and a share of K; a block's
// kWarpsPerColumn warps split K of the same columns and meet in shared memory, and gridDim.y
// splits K again, each split writing fp32 partial sums to the workspace for decode_sm80_reduce,
// which adds them in a fixed order: deterministic.
//
// Lane (g = lane / 4, c = lane % 4) loads 16 bytes at k0 + c·kVec of weight rows g and g + 8 and
// of token g of each token tile, and feeds them to two mmas as they are. For 16-bit, mma's k
// pairs (2c, 2c+1) and (2c+8, 2c+9) of step s are the elements 4s..4s+3 of that vector; for tf32,
// its k (c, c+4) of step s are the elements 2s, 2s+1. The order of k inside a chunk does not
// change the sum, and both operands agree on it, so no shuffle or ldmatrix is needed. The
// launcher runs this only where both operands are contiguous along K in whole, aligned 16-byte
// vectors.
template <typename T>
__device__ __forceinline__ void decode_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, float>) {
    mma_m16n8k8_tf32(d, a, b);
  } else {
    mma_m16n8k16<T>(d, a, b);
  }
}

// float32's vectors rounded to tf32 as cuBLAS rounds them (round_to_tf32), once per load; 16-bit
// vectors as they are.
template <typename T>
__device__ __forceinline__ uint4 mma_operand(uint4 v) {
  if constexpr (std::is_same_v<T, float>) {
    v.x = __float_as_uint(round_to_tf32(__uint_as_float(v.x)));
    v.y = __float_as_uint(round_to_tf32(__uint_as_float(v.y)));
    v.z = __float_as_uint(round_to_tf32(__uint_as_float(v.z)));
    v.w = __float_as_uint(round_to_tf32(__uint_as_float(v.w)));
  }
  return v;
}

template <typename T, int kTokenTiles, int kWarpsPerColumn>
__global__ void __launch_bounds__(DecodeSm80Config::kThreads, DecodeSm80Config::kMinBlocksPerSm)
decode_sm80_kernel(GemmParams p, int64_t chunks_per_split) {
  using Cfg = DecodeSm80Config;
  constexpr int kGroups = Cfg::kWarps / kWarpsPerColumn;  // column groups of 16 per block
  constexpr int kTokensPerPass = kTokenTiles * Cfg::kTokens;
  constexpr int kVec = Cfg::vec(sizeof(T)), kChunk = Cfg::chunk(sizeof(T));
  p = batch_element(p, blockIdx.z);
  const T* __restrict__ A = static_cast<const T*>(p.a);
  const T* __restrict__ W = static_cast<const T*>(p.b);  // B[k, n] = W[n, k], b_stride_k == 1

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, c = lane % 4;
  const int part = warp % kWarpsPerColumn;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGroups + warp / kWarpsPerColumn) * Cfg::kColumns;
  // Rows of W past N read row N - 1 (in range) and are never stored.
  const int64_t n_lo = n0 + g < p.N ? n0 + g : p.N - 1;
  const int64_t n_hi = n0 + g + 8 < p.N ? n0 + g + 8 : p.N - 1;
  const T* w_lo = W + n_lo * p.b_stride_n;
  const T* w_hi = W + n_hi * p.b_stride_n;

  // This warp's chunks of K: the split's range, dealt out in turn to the block's warps.
  const int64_t chunks = ceil_div(p.K, int64_t{kChunk});
  const int64_t split_first = static_cast<int64_t>(blockIdx.y) * chunks_per_split;
  const int64_t split_end = split_first + chunks_per_split < chunks ? split_first + chunks_per_split : chunks;

  __shared__ float sPartial[Cfg::kWarps][kTokenTiles][4][32];
  constexpr int kUnroll = Cfg::template kUnroll<kTokenTiles>;
  float* partials = static_cast<float*>(p.workspace);

  for (int64_t m0 = 0; m0 < p.M; m0 += kTokensPerPass) {
    const T* a_rows[kTokenTiles];
#pragma unroll
    for (int t = 0; t < kTokenTiles; ++t) {
      const int64_t m = m0 + t * Cfg::kTokens + g;
      a_rows[t] = A + (m < p.M ? m : p.M - 1) * p.a_stride_m;  // tokens past M: read, never stored
    }
    float rAcc[kTokenTiles][4];
#pragma unroll
    for (int t = 0; t < kTokenTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) rAcc[t][i] = 0.0f;
    }

    constexpr int64_t kStep = int64_t{kWarpsPerColumn} * kUnroll;  // chunks per step of a warp
    for (int64_t chunk0 = split_first + part; chunk0 < split_end; chunk0 += kStep) {
      // The weight is read once: every load of this step is issued before the first mma.
      uint4 rW[kUnroll][2];
      uint4 rA[kUnroll][kTokenTiles];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t chunk = chunk0 + int64_t{u} * kWarpsPerColumn;
        const int64_t k = chunk * kChunk + c * kVec;
        const bool in = chunk < split_end && k < p.K;  // K is a multiple of kVec: whole vectors
        rW[u][0] = in ? __ldcs(reinterpret_cast<const uint4*>(w_lo + k)) : make_uint4(0, 0, 0, 0);
        rW[u][1] = in ? __ldcs(reinterpret_cast<const uint4*>(w_hi + k)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int t = 0; t < kTokenTiles; ++t) {
          // A's rows are few and read by every column group: kept in the caches (__ldg).
          rA[u][t] = in ? __ldg(reinterpret_cast<const uint4*>(a_rows[t] + k)) : make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint4 w_lo_vec = mma_operand<T>(rW[u][0]), w_hi_vec = mma_operand<T>(rW[u][1]);
        const uint32_t a0[4] = {w_lo_vec.x, w_hi_vec.x, w_lo_vec.y, w_hi_vec.y};  // first half of the vector
        const uint32_t a1[4] = {w_lo_vec.z, w_hi_vec.z, w_lo_vec.w, w_hi_vec.w};  // second half
#pragma unroll
        for (int t = 0; t < kTokenTiles; ++t) {
          const uint4 a_vec = mma_operand<T>(rA[u][t]);
          decode_mma<T>(rAcc[t], a0, {a_vec.x, a_vec.y});
          decode_mma<T>(rAcc[t], a1, {a_vec.z, a_vec.w});
        }
      }
    }

    if constexpr (kWarpsPerColumn > 1) {
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) sPartial[warp][t][i][lane] = rAcc[t][i];
      }
      __syncthreads();
      if (part == 0) {
        // The block's warps summed in one fixed order: deterministic.
#pragma unroll
        for (int t = 0; t < kTokenTiles; ++t) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarpsPerColumn; ++w) sum += sPartial[warp + w][t][i][lane];
            rAcc[t][i] = sum;
          }
        }
      }
      __syncthreads();  // sPartial is written again by the next pass over the tokens
    }

    if (part == 0) {
      // rAcc[t] = {Cᵀ[g][2c], Cᵀ[g][2c+1], Cᵀ[g+8][2c], Cᵀ[g+8][2c+1]} of token tile t.
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t n = n0 + g + (i >= 2 ? 8 : 0);
          const int64_t m = m0 + t * Cfg::kTokens + 2 * c + (i & 1);
          if (n >= p.N || m >= p.M) continue;
          if (partials == nullptr) {
            T* C = static_cast<T*>(p.c);
            C[m * p.c_stride_m + n * p.c_stride_n] = from_acc<T>(add_bias<T>(p, n, rAcc[t][i]));
          } else {
            // Workspace (batch, split, M, N), summed by decode_sm80_reduce in split order.
            const int64_t slot = (static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * p.M + m;
            partials[slot * p.N + n] = rAcc[t][i];
          }
        }
      }
    }
  }
}

// C = the splits' partial sums added in split order (+ bias), rounded once to T.
template <typename T>
__global__ void __launch_bounds__(DecodeSm80Config::kThreads)
decode_sm80_reduce(GemmParams p, int splits) {
  const int64_t outputs = p.M * p.N;
  const int64_t z = blockIdx.y;
  const GemmParams q = batch_element(p, z);
  const float* partials = static_cast<const float*>(p.workspace) + z * splits * outputs;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partials[s * outputs + i];
    const int64_t m = i / p.N, n = i % p.N;
    static_cast<T*>(q.c)[m * q.c_stride_m + n * q.c_stride_n] = from_acc<T>(add_bias<T>(q, n, sum));
  }
}

}  // namespace torch_gemm
