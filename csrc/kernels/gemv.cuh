// Rung for decode: a few rows of A against a B read once, as matrix-vector products. With M of 1
// to 8 a product moves B and little else, so what counts is streaming B at the memory's bandwidth
// (16-byte loads, many in flight), not the tensor cores, whose 64-row tiles would be mostly empty.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/grid.cuh"
#include "kernels/numeric.cuh"

namespace torch_gemm {

struct GemvConfig {
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kVectorBytes = 16;
};

// How a lane walks its share of a column in 16-byte vectors: kUnroll vectors of B a batch, all
// issued before the first multiply; A's matching vectors loaded with them (kPreloadA: one wait
// covers both) or inside the multiply from L1; B streamed past L1 with an L2 prefetch hint
// (kStreamB, load_streamed) or loaded plainly; kColumns columns of B a warp, which share each
// vector of A it reads.
template <int kUnrollValue, bool kPreloadAValue, bool kStreamBValue, int kColumnsValue = 1>
struct GemvLoop {
  static constexpr int kUnroll = kUnrollValue;
  static constexpr bool kPreloadA = kPreloadAValue;
  static constexpr bool kStreamB = kStreamBValue;
  static constexpr int kColumns = kColumnsValue;
};

// Up to two rows (the decode of one or two tokens, where a product is B's bytes and nothing else)
// in float32, bf16 and fp16: 8 vectors a lane with A's, B streamed. Over the models grid's weights
// (every one in float32, the small ones gemv takes in bf16), with the launcher's split: 1.16×
// cuBLAS in float32 at one row (min 0.95), 1.29× at two, 1.37× and 1.56× in bf16, against 1.03×
// (min 0.79), 1.10×, 1.30× and 1.47× with A loaded inside the multiply and 4 vectors (H200, session
// 55). float32 in row groups of 4 and 8: B streamed, 8 vectors a lane, A's rows from L1 inside
// the multiply (their vectors would not fit in registers beside B's); over the grid's weights at
// 3, 4 and 8 rows 1.78×, 1.39× and 1.16× cuBLAS, where 4 plain loads ran 1.72×, 1.37×, 1.04× and
// A preloaded with 4 or 2 vectors 1.59×, 1.28×, 1.04× (H200, session 60). The rest (more 16-bit
// rows, float64): 4 vectors, plain loads.
template <typename T, int kRows>
using GemvLoopFor = std::conditional_t<
    kRows <= 2 && sizeof(T) <= 4, GemvLoop<8, true, true>,
    std::conditional_t<sizeof(T) == 4, GemvLoop<8, false, true>, GemvLoop<4, false, false>>>;

// float32's groups of 8 rows against a K of at least kGemvFourColumnsMinK: each warp takes 4
// columns, 2 vectors of each a lane, so that every vector of A read from L1 serves 4 columns
// (8 rows of A cost 128 bytes of L1 a vector of B with one column, more than L1 serves while B
// streams). Over the models grid's weights at 8 rows 1.55× cuBLAS against the one-column loop's
// 1.17×; shorter K (2048–5120) lost on some weights (to 0.75× of the one-column loop, with 4×
// fewer column groups to spread), so those keep it (H200, session 61).
using GemvFourColumnsLoop = GemvLoop<2, false, true, 4>;
constexpr int64_t kGemvFourColumnsMinK = 5632;

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

// C[m, n] for kRows rows of A at a time and Loop::kColumns columns of B per group of
// kWarpsPerColumn warps, which split K between them. Each lane walks k (in kVector 16-byte vectors
// where the launcher found A's rows and B's columns contiguous and aligned, else one element at a
// time), keeps kRows sums a column, and the sums meet by warp shuffles, then across the group's
// warps in shared memory. With 16-byte vectors, Loop (a GemvLoop) says how a lane's batches read B
// and A; a vector of A read once serves the group's kColumns columns.
template <typename T, int kRows, int kWarpsPerColumn, bool kVector, class Loop>
__global__ void __launch_bounds__(GemvConfig::kThreads)
gemm_gemv_kernel(GemmParams p) {
  using Acc = acc_t<T>;
  using Vector = GemvVector<T>;
  constexpr int kColumns = Loop::kColumns;
  constexpr int kColumnsPerBlock = GemvConfig::kWarps / kWarpsPerColumn * kColumns;
  constexpr int kVec = Vector::kVec;
  p = batch_element(p, blockIdx.z);
  const T* __restrict__ A = static_cast<const T*>(p.a);
  const T* __restrict__ B = static_cast<const T*>(p.b);
  T* __restrict__ C = static_cast<T*>(p.c);

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int part = warp % kWarpsPerColumn;  // which share of K this warp sums
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kColumnsPerBlock + warp / kWarpsPerColumn * kColumns;
  const bool column_in = n0 < p.N;  // no early exit: the block meets at a barrier below
  // The group's columns past N read column n0 again (in range where the group is) and are never stored.
  const T* b_columns[kColumns];
#pragma unroll
  for (int c = 0; c < kColumns; ++c) b_columns[c] = B + (n0 + c < p.N ? n0 + c : n0) * p.b_stride_n;
  __shared__ Acc sPartial[GemvConfig::kWarps][kColumns][kRows];

  // gridDim.y is capped at 65535, so row groups beyond one grid's reach are covered by striding.
  for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kRows; m0 < p.M;
       m0 += static_cast<int64_t>(gridDim.y) * kRows) {
    Acc rAcc[kColumns][kRows];
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) rAcc[c][r] = Acc(0);
    }
    // Rows past M read row m0 again (always in range) and are never stored.
    const T* a_rows[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) a_rows[r] = A + (m0 + r < p.M ? m0 + r : m0) * p.a_stride_m;

    if (column_in) {
      const int64_t step = int64_t{32} * kWarpsPerColumn;
      if constexpr (kVector) {
        constexpr int kUnroll = Loop::kUnroll;
        const int64_t vectors = p.K / kVec;
        for (int64_t v0 = part * 32 + lane; v0 < vectors; v0 += step * kUnroll) {
          // The raw 16-byte vectors (four 32-bit registers each), read as kVec elements only where
          // multiplied: held as Vectors, 16-bit elements would take a register each.
          uint4 rB[kUnroll][kColumns];
          uint4 rA[Loop::kPreloadA ? kUnroll : 1][kRows];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t v = v0 + u * step;
            // B is read once: all of this lane's loads of it issued before the first multiply.
            if (v < vectors) {
#pragma unroll
              for (int c = 0; c < kColumns; ++c) {
                const uint4* b_vector = reinterpret_cast<const uint4*>(b_columns[c]) + v;
                if constexpr (Loop::kStreamB) {
                  rB[u][c] = load_streamed(b_vector);
                } else {
                  rB[u][c] = *b_vector;
                }
              }
              if constexpr (Loop::kPreloadA) {
#pragma unroll
                for (int r = 0; r < kRows; ++r) rA[u][r] = __ldg(reinterpret_cast<const uint4*>(a_rows[r]) + v);
              }
            }
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t v = v0 + u * step;
            if (v >= vectors) break;
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              // A's rows are few and read by every column's warps: kept in L1 (__ldg).
              uint4 a_bits;
              if constexpr (Loop::kPreloadA) {
                a_bits = rA[u][r];
              } else {
                a_bits = __ldg(reinterpret_cast<const uint4*>(a_rows[r]) + v);
              }
              const Vector& a = *reinterpret_cast<const Vector*>(&a_bits);
#pragma unroll
              for (int c = 0; c < kColumns; ++c) {
                const Vector& b = *reinterpret_cast<const Vector*>(&rB[u][c]);
#pragma unroll
                for (int e = 0; e < kVec; ++e) {
                  rAcc[c][r] += to_acc<Acc>(a.elem[e]) * to_acc<Acc>(b.elem[e]);
                }
              }
            }
          }
        }
      } else {
        for (int64_t k = part * 32 + lane; k < p.K; k += step) {
#pragma unroll
          for (int c = 0; c < kColumns; ++c) {
            const Acc b = to_acc<Acc>(b_columns[c][k * p.b_stride_k]);
#pragma unroll
            for (int r = 0; r < kRows; ++r) rAcc[c][r] += to_acc<Acc>(a_rows[r][k * p.a_stride_k]) * b;
          }
        }
      }
    }

#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) {
          rAcc[c][r] += __shfl_xor_sync(0xffffffffu, rAcc[c][r], offset);
        }
      }
    }
    if constexpr (kWarpsPerColumn > 1) {
      if (lane == 0) {
#pragma unroll
        for (int c = 0; c < kColumns; ++c) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) sPartial[warp][c][r] = rAcc[c][r];
        }
      }
      __syncthreads();
      if (part == 0 && lane == 0) {
#pragma unroll
        for (int c = 0; c < kColumns; ++c) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            Acc sum = Acc(0);
#pragma unroll
            for (int w = 0; w < kWarpsPerColumn; ++w) sum += sPartial[warp + w][c][r];
            rAcc[c][r] = sum;
          }
        }
      }
      __syncthreads();  // sPartial is written again by the next row group
    }
    if (column_in && part == 0 && lane == 0) {
#pragma unroll
      for (int c = 0; c < kColumns; ++c) {
        const int64_t n = n0 + c;
        if (n >= p.N) break;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (m0 + r < p.M) C[(m0 + r) * p.c_stride_m + n * p.c_stride_n] = from_acc<T>(add_bias<T>(p, n, rAcc[c][r]));
        }
      }
    }
  }
}

}  // namespace torch_gemm
