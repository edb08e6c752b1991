// Rung for decode: a few rows of A against a B read once, as matrix-vector products. With M of 1
// to 8 a product moves B and little else, so what counts is streaming B at the memory's bandwidth
// (16-byte loads, many in flight), not the tensor cores, whose 64-row tiles would be mostly empty.
#pragma once

#include <cstdint>

#include "kernels/grid.cuh"
#include "kernels/numeric.cuh"

namespace torch_gemm {

struct GemvConfig {
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kVectorBytes = 16;
  // Up to kStreamMaxRows rows (the decode of one or two tokens, where a product is B's bytes and
  // nothing else), each lane loads kStreamUnroll vectors of B and the matching ones of A before it
  // multiplies, B bypassing L1 (from sm_80). Over the models grid's weights (every one in float32,
  // the small ones gemv takes in bf16), with the launcher's split: 1.16× cuBLAS in float32 at one
  // row (min 0.95), 1.29× at two, 1.37× and 1.56× in bf16, against 1.03× (min 0.79), 1.10×, 1.30×
  // and 1.47× with A loaded inside the multiply and kUnroll vectors (H200, session 55). More rows
  // keep that loop: their A vectors would not fit in registers beside B's; and so does float64 (not
  // measured).
  static constexpr int kStreamMaxRows = 2;
  static constexpr int kStreamUnroll = 8;
  static constexpr int kUnroll = 4;  // vectors of B each lane loads before it multiplies
  template <typename T, int kRows>
  static constexpr bool kStreams = kRows <= kStreamMaxRows && sizeof(T) <= 4;
  template <typename T, int kRows>
  static constexpr int kUnrollFor = kStreams<T, kRows> ? kStreamUnroll : kUnroll;
};

// One 16-byte vector of B, read once: not kept in L1 (A's rows are), and L2 asked to fetch the
// whole 256-byte line ahead. Plain loads before sm_80, whose PTX lacks the prefetch size.
__device__ __forceinline__ uint4 load_streamed(const uint4* ptr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
#else
  return __ldg(ptr);
#endif
}

// The kVec elements of one 16-byte vector.
template <typename T>
struct alignas(GemvConfig::kVectorBytes) GemvVector {
  static constexpr int kVec = GemvConfig::kVectorBytes / static_cast<int>(sizeof(T));
  T elem[kVec];
};

// C[m, n] for kRows rows of A at a time and one column n of B per group of kWarpsPerColumn warps,
// which split K between them. Each lane walks k (in kVector 16-byte vectors where the launcher
// found A's rows and B's columns contiguous and aligned, else one element at a time), keeps kRows
// sums, and the sums meet by warp shuffles, then across the group's warps in shared memory. With
// at most kStreamMaxRows rows (GemvConfig::kStreams), a lane's vectors of A are loaded with B's, so
// that one wait covers both.
template <typename T, int kRows, int kWarpsPerColumn, bool kVector>
__global__ void __launch_bounds__(GemvConfig::kThreads)
gemm_gemv_kernel(GemmParams p) {
  using Acc = acc_t<T>;
  using Vector = GemvVector<T>;
  constexpr int kColumnsPerBlock = GemvConfig::kWarps / kWarpsPerColumn;
  constexpr int kVec = Vector::kVec;
  p = batch_element(p, blockIdx.z);
  const T* __restrict__ A = static_cast<const T*>(p.a);
  const T* __restrict__ B = static_cast<const T*>(p.b);
  T* __restrict__ C = static_cast<T*>(p.c);

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int part = warp % kWarpsPerColumn;  // which share of K this warp sums
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kColumnsPerBlock + warp / kWarpsPerColumn;
  const bool column_in = n < p.N;  // no early exit: the block meets at a barrier below
  __shared__ Acc sPartial[GemvConfig::kWarps][kRows];

  // gridDim.y is capped at 65535, so row groups beyond one grid's reach are covered by striding.
  for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kRows; m0 < p.M;
       m0 += static_cast<int64_t>(gridDim.y) * kRows) {
    Acc rAcc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) rAcc[r] = Acc(0);
    // Rows past M read row m0 again (always in range) and are never stored.
    const T* a_rows[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) a_rows[r] = A + (m0 + r < p.M ? m0 + r : m0) * p.a_stride_m;

    if (column_in) {
      const T* b_column = B + n * p.b_stride_n;
      const int64_t step = int64_t{32} * kWarpsPerColumn;
      if constexpr (kVector) {
        constexpr bool kStreams = GemvConfig::kStreams<T, kRows>;
        constexpr int kUnroll = GemvConfig::kUnrollFor<T, kRows>;
        const uint4* b_vectors = reinterpret_cast<const uint4*>(b_column);
        const int64_t vectors = p.K / kVec;
        for (int64_t v0 = part * 32 + lane; v0 < vectors; v0 += step * kUnroll) {
          // The raw 16-byte vectors (four 32-bit registers each), read as kVec elements only where
          // multiplied: held as Vectors, 16-bit elements would take a register each.
          uint4 rB[kUnroll];
          uint4 rA[kStreams ? kUnroll : 1][kRows];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t v = v0 + u * step;
            // B is read once: all of this lane's loads of it issued before the first multiply.
            if (v < vectors) {
              if constexpr (kStreams) {
                rB[u] = load_streamed(b_vectors + v);
#pragma unroll
                for (int r = 0; r < kRows; ++r) rA[u][r] = __ldg(reinterpret_cast<const uint4*>(a_rows[r]) + v);
              } else {
                rB[u] = b_vectors[v];
              }
            }
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t v = v0 + u * step;
            if (v >= vectors) break;
            const Vector& b = *reinterpret_cast<const Vector*>(&rB[u]);
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              // A's rows are few and read by every column's warps: kept in L1 (__ldg).
              uint4 a_bits;
              if constexpr (kStreams) {
                a_bits = rA[u][r];
              } else {
                a_bits = __ldg(reinterpret_cast<const uint4*>(a_rows[r]) + v);
              }
              const Vector& a = *reinterpret_cast<const Vector*>(&a_bits);
#pragma unroll
              for (int e = 0; e < kVec; ++e) {
                rAcc[r] += to_acc<Acc>(a.elem[e]) * to_acc<Acc>(b.elem[e]);
              }
            }
          }
        }
      } else {
        for (int64_t k = part * 32 + lane; k < p.K; k += step) {
          const Acc b = to_acc<Acc>(b_column[k * p.b_stride_k]);
#pragma unroll
          for (int r = 0; r < kRows; ++r) rAcc[r] += to_acc<Acc>(a_rows[r][k * p.a_stride_k]) * b;
        }
      }
    }

#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        rAcc[r] += __shfl_xor_sync(0xffffffffu, rAcc[r], offset);
      }
    }
    if constexpr (kWarpsPerColumn > 1) {
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) sPartial[warp][r] = rAcc[r];
      }
      __syncthreads();
      if (part == 0 && lane == 0) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          Acc sum = Acc(0);
#pragma unroll
          for (int w = 0; w < kWarpsPerColumn; ++w) sum += sPartial[warp + w][r];
          rAcc[r] = sum;
        }
      }
      __syncthreads();  // sPartial is written again by the next row group
    }
    if (column_in && part == 0 && lane == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (m0 + r < p.M) C[(m0 + r) * p.c_stride_m + n * p.c_stride_n] = from_acc<T>(add_bias<T>(p, n, rAcc[r]));
      }
    }
  }
}

}  // namespace torch_gemm
