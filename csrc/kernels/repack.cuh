// Copies an operand that TMA cannot address (a stride not a multiple of 16 bytes, a misaligned
// base, no unit stride), or in a major order the kernel cannot read (tf32 wgmma: K-major only),
// into a dense workspace of 16-byte-padded rows, which wgmma_sm90 then reads like any other.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/grid.cuh"
#include "kernels/numeric.cuh"

namespace torch_gemm {

// One operand (batch, outer, inner) → dst[z][o][i] at dst + (z·outer + o)·ld + i.
struct RepackView {
  const void* src;
  int64_t batch, outer, inner;
  int64_t stride_batch, stride_outer, stride_inner;
  void* dst;
  int64_t ld;         // padded inner extent of dst rows
  bool round_tf32;    // float32 copied rounded to tf32 (nearest), as the tf32 kernel reads it
};

// The destination rows are padded to a whole number of these (TMA's stride alignment), so that
// the copy writes them in 16-byte stores.
constexpr int kRepackChunkBytes = 16;

// One element as the workspace stores it: unchanged, or a float32 rounded to tf32.
template <typename T>
__device__ __forceinline__ T repacked(T x, bool round_tf32) {
  if constexpr (std::is_same_v<T, float>) {
    if (round_tf32) return round_to_tf32(x);
  }
  return x;
}

// Keeps the major order (the source's inner stride is the smaller): each thread writes one 16-byte
// chunk of a destination row in one store, from kVec reads that the warp's lanes make
// consecutive; a block covers blockDim.x chunks of one row (grid-stride over such pieces), so a
// row's (z, o) is divided out once per block, not per element (a 64-bit division per element
// held the copy far below the memory's bandwidth). The last chunk of a row fills its
// padding up to ld with zeros (ld is a whole number of chunks).
template <typename T>
__global__ void repack_operand_kernel(RepackView v) {
  constexpr int kVec = kRepackChunkBytes / sizeof(T);
  struct alignas(kRepackChunkBytes) Chunk {
    T x[kVec];
  };
  const T* src = static_cast<const T*>(v.src);
  T* dst = static_cast<T*>(v.dst);
  const int64_t chunks = (v.inner + kVec - 1) / kVec;                // per row
  const int64_t pieces = (chunks + blockDim.x - 1) / blockDim.x;     // per row
  const int64_t total = v.batch * v.outer * pieces;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    const int64_t row = b / pieces;  // z·outer + o
    const int64_t c = b % pieces * blockDim.x + threadIdx.x;
    if (c >= chunks) continue;
    const T* src_row = src + row / v.outer * v.stride_batch + row % v.outer * v.stride_outer;
    Chunk chunk;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const int64_t i = c * kVec + e;
      chunk.x[e] =
          i < v.inner ? repacked(src_row[i * v.stride_inner], v.round_tf32) : from_acc<T>(0.0f);
    }
    reinterpret_cast<Chunk*>(dst + row * v.ld)[c] = chunk;
  }
}

// Changes the major order (the source's outer stride is the smaller): 32×32 tiles through shared
// memory, read along the source's outer index and written along the destination's inner one, so
// both sides stay coalesced. Grid-stride over tiles; blocks of (kTransposeTile, kTransposeRows).
constexpr int kTransposeTile = 32;
constexpr int kTransposeRows = 8;

template <typename T>
__global__ void transpose_operand_kernel(RepackView v) {
  __shared__ T tile[kTransposeTile][kTransposeTile + 1];  // +1: columns fall in distinct banks
  const T* src = static_cast<const T*>(v.src);
  T* dst = static_cast<T*>(v.dst);
  const int64_t tiles_o = (v.outer + kTransposeTile - 1) / kTransposeTile;
  const int64_t tiles_i = (v.inner + kTransposeTile - 1) / kTransposeTile;
  const int64_t tiles = v.batch * tiles_o * tiles_i;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t o0 = t % tiles_o * kTransposeTile;
    const int64_t i0 = t / tiles_o % tiles_i * kTransposeTile;
    const int64_t z = t / (tiles_o * tiles_i);
    __syncthreads();  // the previous tile's reads of `tile` are done
#pragma unroll
    for (int r = threadIdx.y; r < kTransposeTile; r += kTransposeRows) {
      const int64_t o = o0 + threadIdx.x, i = i0 + r;
      if (o < v.outer && i < v.inner) {
        tile[r][threadIdx.x] = src[z * v.stride_batch + o * v.stride_outer + i * v.stride_inner];
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = threadIdx.y; r < kTransposeTile; r += kTransposeRows) {
      const int64_t o = o0 + r, i = i0 + threadIdx.x;
      if (o < v.outer && i < v.inner) {
        dst[(z * v.outer + o) * v.ld + i] = repacked(tile[threadIdx.x][r], v.round_tf32);
      }
    }
  }
}

}  // namespace torch_gemm
