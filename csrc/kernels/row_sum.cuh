// A's rows summed over K for gemm::mm_tiled_row_sum (linear's db beside dW = gradᵀ·x): slices of K
// summed into fp32 partials (by wgmma_sm90's idle producer warps, overlapping the product, or by
// row_sum_slices_kernel), then added in a fixed order (deterministic) and rounded once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/numeric.cuh"

namespace torch_gemm {

// Slices of K start on multiples of this many elements, so that 16-byte loads along K stay
// aligned.
constexpr int kRowSumSliceAlign = 64;
// Warps that sum one block of rows: the producer warpgroup's warps 2 and 3 (warp 0 issues the
// copies, warp 1 stages the bias), and the blocks of row_sum_slices_kernel.
constexpr int kRowSumWarps = 2;

// A (batch, M, K) as the product reads it: its rows or its columns contiguous (k_major says
// which) and 16-byte aligned, as TMA needs them, so 16-byte chunks along the contiguous dimension
// load whole. K is cut into `slices` contiguous pieces of piece_k elements (the last shorter);
// partials (slices, batch, M) receive the pieces' sums.
struct RowSumView {
  const void* a = nullptr;
  int64_t stride_m = 0, stride_k = 0, stride_batch = 0;  // elements
  bool k_major = true;
  int M = 0, K = 0, batch = 0;
  int piece_k = kRowSumSliceAlign;  // a multiple of kRowSumSliceAlign
  int slices = 0;                   // ceil(K / piece_k)
  float* partials = nullptr;

  // Slice j's part of K: [slice_begin(j), slice_end(j)).
  __host__ __device__ int slice_begin(int slice) const { return slice * piece_k; }
  __host__ __device__ int slice_end(int slice) const {
    const int64_t end = static_cast<int64_t>(slice_begin(slice)) + piece_k;
    return static_cast<int>(end < K ? end : K);
  }

  // Slice j's partial of batch element z: M floats.
  __host__ __device__ float* partial(int slice, int z) const {
    return partials + (static_cast<int64_t>(slice) * batch + z) * M;
  }
};

// Chunks of 16 bytes a lane loads in one batch before adding any (left alone, the compiler kept
// two in flight): row_sum_slices_kernel's warps take four; the producer warps of wgmma_sm90, under
// its setmaxnreg cap of 40 registers, two (four spilled more).
constexpr int kRowSumBatch = 4;
constexpr int kRowSumFusedBatch = 2;

template <typename T>
__device__ __forceinline__ uint4 load_chunk(const T* src) {
  return __ldg(reinterpret_cast<const uint4*>(src));
}

// A loaded chunk added element by element into sum[0..16 / sizeof(T)) (sum[0] alone where
// kInto1), in fp32.
template <typename T, bool kInto1, int kSums>
__device__ __forceinline__ void add_chunk(const uint4& raw, float (&sum)[kSums]) {
  constexpr int kVec = 16 / sizeof(T);
  const T* elems = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int e = 0; e < kVec; ++e) sum[kInto1 ? 0 : e] += to_acc<float>(elems[e]);
}

// A loaded chunk's elements added up, in fp32.
template <typename T>
__device__ __forceinline__ float chunk_total(const uint4& raw) {
  float sum[1] = {0.0f};
  add_chunk<T, true>(raw, sum);
  return sum[0];
}

// The chunks at src + i·step for i in [0, count) added element by element into sum, kBatch loads
// at a time.
template <typename T, int kBatch, int kSums>
__device__ __forceinline__ void add_chunks(const T* src, int64_t step, int count,
                                           float (&sum)[kSums]) {
  int i = 0;
  for (; i + kBatch <= count; i += kBatch) {
    uint4 raw[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) raw[b] = load_chunk(src + (i + b) * step);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) add_chunk<T, false>(raw[b], sum);
  }
  for (; i < count; ++i) add_chunk<T, false>(load_chunk(src + i * step), sum);
}

// This warp's rows [r0, r0 + kRows) of batch element z summed over slice `slice` into the
// slice's partial (rows past M skipped), kBatch loads in flight a lane. Each lane keeps a few
// fp32 sums, and the lanes that share a row add up through shuffles at the end, in a fixed order.
template <typename T, int kRows, int kBatch>
__device__ __forceinline__ void sum_rows(const RowSumView& v, int z, int r0, int slice) {
  constexpr int kVec = 16 / sizeof(T);  // elements in a 16-byte chunk
  static_assert(kRows % (4 * kBatch) == 0, "a warp's rows are whole batches of four rows");
  const int lane = threadIdx.x % 32;
  const int k_begin = v.slice_begin(slice), k_end = v.slice_end(slice);
  float* out = v.partial(slice, z);
  const T* a = static_cast<const T*>(v.a) + z * v.stride_batch;
  if (!v.k_major) {
    // Columns contiguous: lane l owns the chunk of kVec rows l % kChunks and every kPhases-th k
    // from l / kChunks, so the kChunks lanes of a phase read one contiguous run of the column.
    constexpr int kChunks = kRows / kVec;
    constexpr int kPhases = 32 / kChunks;
    static_assert(kChunks * kPhases == 32, "a warp covers its rows in whole chunks");
    const int m = r0 + lane % kChunks * kVec;
    float sum[kVec] = {};
    if (m < v.M) {
      const T* column = a + m;
      if (m + kVec <= v.M) {
        const int k_first = k_begin + lane / kChunks;
        const int count = k_first < k_end ? (k_end - k_first + kPhases - 1) / kPhases : 0;
        add_chunks<T, kBatch>(column + static_cast<int64_t>(k_first) * v.stride_k,
                             kPhases * v.stride_k, count, sum);
      } else {
        // The chunk crossing M: element by element (with M = 1 the only element, whatever the
        // stride along M, which then is never stepped along).
        for (int k = k_begin + lane / kChunks; k < k_end; k += kPhases) {
          const T* src = column + static_cast<int64_t>(k) * v.stride_k;
          for (int e = 0; e < kVec && m + e < v.M; ++e) sum[e] += to_acc<float>(src[e]);
        }
      }
    }
#pragma unroll
    for (int width = kChunks; width < 32; width *= 2) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum[e] += __shfl_xor_sync(0xffffffffu, sum[e], width);
    }
    if (lane < kChunks) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (m + e < v.M) out[m + e] = sum[e];
      }
    }
  } else {
    // Rows contiguous: eight lanes a row, each taking every eighth chunk of it, so a warp covers
    // four rows at a time; a lane works on kBatch such rows at once (rows 4 apart), their
    // loads in flight together.
    const T* first_row = a + static_cast<int64_t>(r0 + lane / 8) * v.stride_m;
    const int64_t row_step = 4 * v.stride_m;
    const int k_whole = k_begin + (k_end - k_begin) / kVec * kVec;  // whole chunks end here
    for (int i = 0; i < kRows / 4; i += kBatch) {
      float sum[kBatch] = {};
      const T* rows = first_row + i * row_step;
      const int m = r0 + 4 * i + lane / 8;  // the first of the lane's rows
      for (int k = k_begin + lane % 8 * kVec; k < k_whole; k += 8 * kVec) {
        uint4 raw[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          raw[b] = m + 4 * b < v.M ? load_chunk(rows + b * row_step + k) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) sum[b] += chunk_total<T>(raw[b]);
      }
      // The last partial chunk (with K = 1 the only element, whatever the stride along K).
      if (lane % 8 == 0) {
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          if (m + 4 * b >= v.M) continue;
          for (int k = k_whole; k < k_end; ++k) sum[b] += to_acc<float>(rows[b * row_step + k]);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
#pragma unroll
        for (int width = 1; width < 8; width *= 2) {
          sum[b] += __shfl_xor_sync(0xffffffffu, sum[b], width);
        }
        if (lane % 8 == 0 && m + 4 * b < v.M) out[m + 4 * b] = sum[b];
      }
    }
  }
}

// The slice sums on their own, where the product's tiles are too few columns to carry them:
// block (x, y) sums row block x % row_blocks of batch element x / row_blocks over slice y (one
// contiguous piece of K), its kRowSumWarps warps kRows rows each.
template <typename T, int kRows>
__global__ void __launch_bounds__(kRowSumWarps * 32)
row_sum_slices_kernel(const RowSumView v, int row_blocks) {
  const int z = static_cast<int>(blockIdx.x) / row_blocks;
  const int block = static_cast<int>(blockIdx.x) % row_blocks;
  const int warp = threadIdx.x / 32;
  sum_rows<T, kRows, kRowSumBatch>(v, z, (block * kRowSumWarps + warp) * kRows,
                                   static_cast<int>(blockIdx.y));
}

// row_sum_finish_kernel's block: kFinishRows rows, their slices split among kFinishGroups
// groups of threads (each group's slices g, g + kFinishGroups, ...), so that each thread has
// only a few loads to wait on (one thread a row waited on every slice's load in turn).
constexpr int kFinishRows = 32;
constexpr int kFinishGroups = 8;
constexpr int kFinishThreads = kFinishRows * kFinishGroups;

// out[z·M + m] = the slices' partials of row m added up and rounded once to T, in a fixed order
// (each group's slices in turn, then the groups in turn), so equal inputs give equal sums.
template <typename T>
__global__ void __launch_bounds__(kFinishThreads) row_sum_finish_kernel(const RowSumView v, T* out) {
  __shared__ float group_sums[kFinishGroups][kFinishRows];
  const int64_t rows = static_cast<int64_t>(v.batch) * v.M;
  const int r = threadIdx.x % kFinishRows, g = threadIdx.x / kFinishRows;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kFinishRows; first < rows;
       first += static_cast<int64_t>(gridDim.x) * kFinishRows) {
    const int64_t i = first + r;
    float sum = 0.0f;
    if (i < rows) {
#pragma unroll 4
      for (int j = g; j < v.slices; j += kFinishGroups) sum += v.partials[j * rows + i];
    }
    group_sums[g][r] = sum;
    __syncthreads();
    if (g == 0 && i < rows) {
      float total = 0.0f;
#pragma unroll
      for (int group = 0; group < kFinishGroups; ++group) total += group_sums[group][r];
      out[i] = from_acc<T>(total);
    }
    __syncthreads();  // group_sums is read before the next rows overwrite it
  }
}

}  // namespace torch_gemm
