// Rung 3, regtile: 8×8 outputs per thread in registers, float4 loads, sA transposed (128×128×8):
// each element a thread reads from shared memory feeds 8 FMAs (one in the smem rung), and a
// thread's 8 values of A, like its 8 of B, are two LDS.128.
#pragma once

#include "kernels/operand_tile.cuh"

namespace torch_gemm {

// ---------------------------------------------------------------------------------------------
// The regtile kernel.
// ---------------------------------------------------------------------------------------------

struct RegtileConfig {
  static constexpr int kBlockM = 128;  // rows of C per block
  static constexpr int kBlockN = 128;  // columns of C per block
  static constexpr int kBlockK = 8;    // depth of one k-tile
  static constexpr int kThreadM = 8;   // rows of C per thread, held in registers
  static constexpr int kThreadN = 8;   // columns of C per thread
  static constexpr int kThreadsM = kBlockM / kThreadM;  // 16
  static constexpr int kThreadsN = kBlockN / kThreadN;  // 16
  static constexpr int kThreads = kThreadsM * kThreadsN;  // 256
  static constexpr int kMinBlocksPerSM = 2;  // caps registers at 65536 / (2·256) = 128 per thread
  static constexpr int kVec = HardwareConfig::kVecFloats;  // floats per LDS.128
  // Pad smem rows by 4 floats: pitch ≡ 4 (mod 32) banks makes the K-major transposing stores
  // conflict-free and keeps rows 16-byte aligned.
  static constexpr int kSmemPad = 4;
  static constexpr int kPitchA = kBlockM + kSmemPad;
  static constexpr int kPitchB = kBlockN + kSmemPad;

  static_assert(kBlockM % kThreadM == 0 && kBlockN % kThreadN == 0,
                "threads must tile the block exactly");
  static_assert(kThreadM % kVec == 0 && kThreadN % kVec == 0,
                "a thread's fragment must be whole LDS.128s");
  static_assert(kThreads % HardwareConfig::kWarpSize == 0, "whole warps");
};

template <typename Config, typename LayoutA, typename LayoutB>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSM)
gemm_regtile_kernel(GemmParams p) {
  constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN, kBlockK = Config::kBlockK;
  constexpr int kThreadM = Config::kThreadM, kThreadN = Config::kThreadN, kVec = Config::kVec;
  using LoaderA = OperandTileLoader<LayoutA, kBlockM, kBlockK, Config::kThreads, Config::kPitchA>;
  using LoaderB = OperandTileLoader<LayoutB, kBlockN, kBlockK, Config::kThreads, Config::kPitchB>;

  // A is stored transposed, so a thread's 8 rows of A for one k are 8 consecutive floats (two
  // LDS.128) exactly like its 8 columns of B.
  constexpr int kAlign = HardwareConfig::kVecBytes;
  __shared__ __align__(kAlign) float sA[kBlockK][Config::kPitchA];  // (kBlockK, kBlockM)
  __shared__ __align__(kAlign) float sB[kBlockK][Config::kPitchB];  // (kBlockK, kBlockN)

  p = batch_element(p, blockIdx.z);
  const OperandView view_a{static_cast<const float*>(p.a), p.M, p.a_stride_m, p.a_stride_k};
  const OperandView view_b{static_cast<const float*>(p.b), p.N, p.b_stride_n, p.b_stride_k};

  const int tid = threadIdx.x;
  // tx fastest: a half-warp's stores to a row of C cover 16 × 32 = 512 contiguous bytes.
  const int tx = tid % Config::kThreadsN;
  const int ty = tid / Config::kThreadsN;

  const int64_t tiles_n = ceil_div(p.N, kBlockN);
  const int64_t tile = linear_tile_index();
  if (tile >= ceil_div(p.M, kBlockM) * tiles_n) return;  // whole block, before any barrier

  const int64_t m0 = tile / tiles_n * kBlockM;
  const int64_t n0 = tile % tiles_n * kBlockN;
  LoaderA load_a(view_a, m0);
  LoaderB load_b(view_b, n0);

  float rC[kThreadM][kThreadN] = {};  // (kThreadM, kThreadN)

  for (int64_t k0 = 0; k0 < p.K; k0 += kBlockK) {
    const int k_limit = k_tile_limit<kBlockK>(p.K, k0);
    load_a.load(k_limit);
    load_b.load(k_limit);
    load_a.store(sA);
    load_b.store(sB);
    load_a.advance();
    load_b.advance();
    __syncthreads();  // the tiles are complete before anyone reads them

#pragma unroll
    for (int kk = 0; kk < kBlockK; ++kk) {
      // Per warp, sA is read at 2 distinct addresses (broadcast), sB at 16 float4s 32 bytes
      // apart: 4 wavefronts instead of 2. The warptile rung removes that 2-way conflict.
      float rA[kThreadM];  // (kThreadM)
      float rB[kThreadN];  // (kThreadN)
#pragma unroll
      for (int v = 0; v < kThreadM; v += kVec) {
        const float4 a = *reinterpret_cast<const float4*>(&sA[kk][ty * kThreadM + v]);
        rA[v] = a.x; rA[v + 1] = a.y; rA[v + 2] = a.z; rA[v + 3] = a.w;
      }
#pragma unroll
      for (int v = 0; v < kThreadN; v += kVec) {
        const float4 b = *reinterpret_cast<const float4*>(&sB[kk][tx * kThreadN + v]);
        rB[v] = b.x; rB[v + 1] = b.y; rB[v + 2] = b.z; rB[v + 3] = b.w;
      }
#pragma unroll
      for (int i = 0; i < kThreadM; ++i) {
#pragma unroll
        for (int j = 0; j < kThreadN; ++j) rC[i][j] = fmaf(rA[i], rB[j], rC[i][j]);
      }
    }
    __syncthreads();  // everyone is done reading before the next k-tile overwrites the tiles
  }

  const OutputView c = output_of(p);
  const bool c_vec = vector_store_ok(c);
#pragma unroll
  for (int i = 0; i < kThreadM; ++i) {
    const int64_t m = m0 + ty * kThreadM + i;
    if (m >= p.M) continue;
#pragma unroll
    for (int v = 0; v < kThreadN; v += kVec) {
      const float out[kVec] = {rC[i][v], rC[i][v + 1], rC[i][v + 2], rC[i][v + 3]};
      store_row4(c, c_vec, m, n0 + tx * kThreadN + v, out);
    }
  }
}

}  // namespace torch_gemm
