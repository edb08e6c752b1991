// wgmma_sm90_3xtf32: float32 products at float32's accuracy on the TF32 tensor cores. One pass
// splits each operand element x once into big = tf32(x) and small = tf32(x − big); the product
// A_big·B_big + A_big·B_small + A_small·B_big then runs as one TF32 product over three K-segments
// on wgmma_sm90's promoted tiles: the cross terms summed on the tensor cores, big·big's k-tile sums
// added in fp32 (GemmParams::tf32_promoted). Few tiles cut K into chunks run as a batch, whose
// partial products one more pass adds up (sm90::ThreeTf32Plan).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/gemm_params.h"
#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "kernels/numeric.cuh"
#include "kernels/sm90/heuristics.h"

namespace torch_gemm {
namespace {

using sm90::KernelFacts;
using sm90::ThreeTf32Plan;
using sm90::plan_3xtf32;

// One operand as (batch, X, K), X being M for A and N for B, split into dense K-major rows of two
// segments of `segment` floats (K rounded up to a k-tile, zeros past K), X·ld floats a batch
// element: A's rows (big, small), B's (small, big). The product reads them as three phases
// (sm90::Producer::source_k_tiles): big·small, small·big, then big·big. The cross terms come first
// and fill the first two thirds of the product's K, which the promoted tiles sum on the tensor
// cores apart from d (WgmmaParams::cross_k_tiles): their truncation is then against their own
// small sum. An Inf or NaN keeps its big part (and a small part of 0), so that big·big carries it
// as torch.mm's product would; the cross sums it reaches are left out, and an overflow of finite
// operands' cross sums is kept apart (Consumer::add_finite).
struct SplitOperand {
  const float* src;
  int64_t stride_x, stride_k, stride_batch;
  float* dst;
  int64_t ld, segment, dst_stride_batch;
  int64_t extent_x, K;
  // K's extent in batch element last_batch: shorter where the batch is K's chunks (plan_3xtf32),
  // the last chunk ending at the caller's K; K itself in the others.
  int64_t last_batch, K_last;
  bool big_first;  // A's order; B's is (small, big)

  __device__ __forceinline__ int64_t k_extent(int64_t z) const { return z == last_batch ? K_last : K; }
};

// tf32(x), rounded to nearest; where that rounds a finite x past float's range (|x| within half a
// tf32 step of FLT_MAX) the truncation instead, so that big stays finite and x − big exact.
__device__ __forceinline__ float tf32_big(float x) {
  const float rounded = round_to_tf32(x);
  if (isinf(rounded) && isfinite(x)) return __uint_as_float(__float_as_uint(x) & 0xffffe000u);
  return rounded;
}

// Four consecutive elements of a row, split, stored as one 16-byte vector into each segment.
__device__ __forceinline__ void store_split(const SplitOperand& s, float* row, int64_t k,
                                            const float4& v) {
  const float x[4] = {v.x, v.y, v.z, v.w};
  float big[4], small[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    big[j] = tf32_big(x[j]);
    small[j] = isfinite(x[j]) ? round_to_tf32(x[j] - big[j]) : 0.0f;
  }
  const float4 big4 = make_float4(big[0], big[1], big[2], big[3]);
  const float4 small4 = make_float4(small[0], small[1], small[2], small[3]);
  *reinterpret_cast<float4*>(row + k) = s.big_first ? big4 : small4;
  *reinterpret_cast<float4*>(row + s.segment + k) = s.big_first ? small4 : big4;
}

// A K-major operand (unit K stride): rows of up to kSplitThreads threads (the launcher's
// row_threads), each taking up to kQuadsPerThread groups of four elements, row_threads apart so
// that a warp's loads and stores are contiguous. kVector: the source rows are 16-byte aligned,
// read as vectors.
constexpr int kSplitThreads = 256;
constexpr int kQuadsPerThread = 4;  // loads in flight before the stores

template <bool kVector>
__global__ void __launch_bounds__(kSplitThreads)
    torch_gemm_split_3xtf32_rows_kernel(SplitOperand s, int64_t first_batch) {
  const int64_t z = first_batch + blockIdx.z;
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (x >= s.extent_x) return;
  const float* src = s.src + z * s.stride_batch + x * s.stride_x;
  float* row = s.dst + z * s.dst_stride_batch + x * s.ld;
  const int64_t K = s.k_extent(z);
  const int64_t quads = s.segment / 4;
  const int64_t chunk = static_cast<int64_t>(blockDim.x) * kQuadsPerThread;
  for (int64_t q0 = static_cast<int64_t>(blockIdx.y) * chunk + threadIdx.x; q0 < quads;
       q0 += static_cast<int64_t>(gridDim.y) * chunk) {
    float4 v[kQuadsPerThread];
#pragma unroll
    for (int i = 0; i < kQuadsPerThread; ++i) {
      const int64_t k = 4 * (q0 + static_cast<int64_t>(i) * blockDim.x);
      if (kVector && k + 3 < K) {
        v[i] = *reinterpret_cast<const float4*>(src + k);
      } else {
        v[i].x = k < K ? src[k] : 0.0f;
        v[i].y = k + 1 < K ? src[k + 1] : 0.0f;
        v[i].z = k + 2 < K ? src[k + 2] : 0.0f;
        v[i].w = k + 3 < K ? src[k + 3] : 0.0f;
      }
    }
#pragma unroll
    for (int i = 0; i < kQuadsPerThread; ++i) {
      const int64_t q = q0 + static_cast<int64_t>(i) * blockDim.x;
      if (q < quads) store_split(s, row, 4 * q, v[i]);
    }
  }
}

// Any other operand (an X-major one, unit X stride, above all): tiles of kTileK × kTileX through
// shared memory, each thread's kTileK · kTileX / kSplitThreads loads issued before any store
// (bytes in flight: the copy is bound by DRAM's latency), read with the warp's lanes along X and
// written as 16-byte vectors along K, eight lanes a 128-byte row. The padding makes both
// conflict-free: lane (row r, quad q) reads column r at rows 4q.., banks 4q + r + j.
constexpr int kTileK = 64, kTileX = 64;
constexpr int kQuadsPerLine = 8;  // a 128-byte line of a segment's row

__global__ void __launch_bounds__(kSplitThreads, 4)
    torch_gemm_split_3xtf32_tiles_kernel(SplitOperand s, int64_t first_batch) {
  __shared__ float tile[kTileK][kTileX + 1];
  const int64_t z = first_batch + blockIdx.z;
  const int64_t x0 = static_cast<int64_t>(blockIdx.x) * kTileX;
  const float* src = s.src + z * s.stride_batch;
  float* dst = s.dst + z * s.dst_stride_batch;
  const int64_t K = s.k_extent(z);
  constexpr int kLines = kTileK / (4 * kQuadsPerLine);  // 128-byte lines of K a row of the tile
  static_assert(kSplitThreads % kTileX == 0 && kTileK % (kSplitThreads / kTileX) == 0 &&
                    kLines * kTileX * kQuadsPerLine % kSplitThreads == 0,
                "every thread takes as many elements");
  for (int64_t k0 = static_cast<int64_t>(blockIdx.y) * kTileK; k0 < s.segment;
       k0 += static_cast<int64_t>(gridDim.y) * kTileK) {
    __syncthreads();  // the previous k0's reads of the tile are done
    {
      // This thread's column of the tile, every kRowsAtOnce-th row.
      constexpr int kRowsAtOnce = kSplitThreads / kTileX;
      const int xl = static_cast<int>(threadIdx.x) % kTileX;
      const int kl0 = static_cast<int>(threadIdx.x) / kTileX;
      const bool x_in = x0 + xl < s.extent_x;
      const float* from = src + (x0 + xl) * s.stride_x + (k0 + kl0) * s.stride_k;
      const int64_t step = kRowsAtOnce * s.stride_k;
#pragma unroll
      for (int e = 0; e < kTileK / kRowsAtOnce; ++e) {
        const bool in = x_in && k0 + kl0 + e * kRowsAtOnce < K;
        tile[kl0 + e * kRowsAtOnce][xl] = in ? from[e * step] : 0.0f;
      }
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < kLines * kTileX * kQuadsPerLine / kSplitThreads; ++e) {
      const int i = static_cast<int>(threadIdx.x) + e * kSplitThreads;
      const int ql = i % kQuadsPerLine, xl = i / kQuadsPerLine % kTileX;
      const int kq = 4 * (i / (kQuadsPerLine * kTileX) * kQuadsPerLine + ql);  // k within the tile
      const int64_t x = x0 + xl, k = k0 + kq;
      if (x >= s.extent_x || k >= s.segment) continue;
      const float4 v = make_float4(tile[kq][xl], tile[kq + 1][xl], tile[kq + 2][xl],
                                   tile[kq + 3][xl]);
      store_split(s, dst + x * s.ld, k, v);
    }
  }
}

LaunchStatus launch_split(const SplitOperand& s, int64_t batch, cudaStream_t stream) {
  if (s.extent_x == 0 || s.segment == 0) return {};
  const auto aligned = [](int64_t stride) { return stride % 4 == 0; };
  const bool k_unit = s.stride_k == 1 || s.K <= 1;
  const char* const kernel_name = k_unit ? "torch_gemm_split_3xtf32_rows_kernel"
                                         : "torch_gemm_split_3xtf32_tiles_kernel";
  const bool vector = k_unit && reinterpret_cast<uintptr_t>(s.src) % 16 == 0 &&
                      (aligned(s.stride_x) || s.extent_x <= 1) && aligned(s.stride_batch);
  for (int64_t first = 0; first < batch; first += kMaxGridZ) {
    const unsigned chunk_z = static_cast<unsigned>(std::min<int64_t>(batch - first, kMaxGridZ));
    if (k_unit) {
      // A row's quads on threadIdx.x (up to kSplitThreads, a power of two), rows on threadIdx.y.
      const int64_t quads = s.segment / 4;
      int row_threads = 8;  // a segment is whole k-tiles: 8 quads or more
      while (row_threads < kSplitThreads && row_threads < quads) row_threads *= 2;
      const dim3 block(row_threads, kSplitThreads / row_threads);
      const dim3 grid(static_cast<unsigned>(ceil_div(s.extent_x, block.y)),
                      grid_y_for(ceil_div(quads, int64_t{row_threads} * kQuadsPerThread)), chunk_z);
      if (vector) {
        torch_gemm_split_3xtf32_rows_kernel<true><<<grid, block, 0, stream>>>(s, first);
      } else {
        torch_gemm_split_3xtf32_rows_kernel<false><<<grid, block, 0, stream>>>(s, first);
      }
    } else {
      const dim3 grid(static_cast<unsigned>(ceil_div(s.extent_x, kTileX)),
                      grid_y_for(ceil_div(s.segment, kTileK)), chunk_z);
      torch_gemm_split_3xtf32_tiles_kernel<<<grid, kSplitThreads, 0, stream>>>(s, first);
    }
    const LaunchStatus status = check_launch(kernel_name);
    if (!status.ok()) return status;
  }
  return {};
}

// K's chunks (plan_3xtf32): C = bias + the chunks' partial products (chunks × M × N, dense), added
// in chunk order in fp32, as the product's own epilogue starts its sums at the bias. A thread
// takes four consecutive columns of a row: one 16-byte load a chunk where N is a multiple of 4
// (the rows of the partials are then 16-byte aligned), four loads otherwise.
struct ChunkSum {
  const float* partials;
  int64_t chunks, M, N;
  const float* bias;
  int64_t bias_stride;
  float* c;
  int64_t c_stride_m, c_stride_n;
};

constexpr int kSumThreads = 256;

template <bool kVector>
__global__ void __launch_bounds__(kSumThreads) torch_gemm_sum_3xtf32_chunks_kernel(ChunkSum s) {
  const int64_t quads_per_row = ceil_div(s.N, int64_t{4});
  const int64_t quads = s.M * quads_per_row, plane = s.M * s.N;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kSumThreads + threadIdx.x; i < quads;
       i += static_cast<int64_t>(gridDim.x) * kSumThreads) {
    const int64_t m = i / quads_per_row, n0 = 4 * (i - m * quads_per_row);
    float sum[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sum[j] = s.bias != nullptr && n0 + j < s.N ? s.bias[(n0 + j) * s.bias_stride] : 0.0f;
    }
    const float* partial = s.partials + m * s.N + n0;
    for (int64_t chunk = 0; chunk < s.chunks; ++chunk, partial += plane) {
      if (kVector) {
        const float4 v = *reinterpret_cast<const float4*>(partial);
        sum[0] += v.x, sum[1] += v.y, sum[2] += v.z, sum[3] += v.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (n0 + j < s.N) sum[j] += partial[j];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (n0 + j < s.N) s.c[m * s.c_stride_m + (n0 + j) * s.c_stride_n] = sum[j];
    }
  }
}

LaunchStatus launch_chunk_sum(const ChunkSum& s, int sm_count, cudaStream_t stream) {
  const int64_t quads = s.M * ceil_div(s.N, int64_t{4});
  // Enough blocks for every SM's threads several times over; the loop takes the rest.
  const int64_t blocks = std::min<int64_t>(ceil_div(quads, int64_t{kSumThreads}),
                                           int64_t{std::max(sm_count, 1)} * 16);
  const dim3 grid(static_cast<unsigned>(blocks));
  if (s.N % 4 == 0) {
    torch_gemm_sum_3xtf32_chunks_kernel<true><<<grid, kSumThreads, 0, stream>>>(s);
  } else {
    torch_gemm_sum_3xtf32_chunks_kernel<false><<<grid, kSumThreads, 0, stream>>>(s);
  }
  return check_launch("torch_gemm_sum_3xtf32_chunks_kernel");
}

}  // namespace

int64_t gemm_wgmma_sm90_3xtf32_workspace_bytes(const GemmParams& params) {
  if (params.dtype != DType::kFloat32 || params.M == 0 || params.N == 0 || params.batch == 0) return 0;
  // Sizing only: any aligned address stands for the workspace.
  char* const aligned = reinterpret_cast<char*>(KernelFacts::kWorkspaceAlignBytes);
  const ThreeTf32Plan plan = plan_3xtf32(params, aligned);
  return plan.own_bytes() + gemm_wgmma_sm90_workspace_bytes(plan.inner);
}

LaunchStatus launch_gemm_wgmma_sm90_3xtf32(const GemmParams& params, cudaStream_t stream) {
  if (params.dtype != DType::kFloat32) {
    return refuse("this rung takes float32 only (bf16/fp16 run on wgmma_sm90 directly)");
  }
  if (params.M == 0 || params.N == 0 || params.batch == 0) return {};
  if (params.workspace == nullptr) return refuse("no workspace for the split operands");
  const ThreeTf32Plan plan = plan_3xtf32(params, static_cast<char*>(params.workspace));
  if (plan.inner.K > INT_MAX) {
    return refuse("3·K (K, or its chunks, rounded up to a k-tile) past 32 bits");
  }
  // The split operands' and the partials' part; wgmma_sm90's launcher checks its own, after them.
  if (params.workspace_bytes < plan.own_bytes()) {
    return refuse("workspace of " + std::to_string(params.workspace_bytes) + " bytes, the split needs " +
                  std::to_string(plan.own_bytes()));
  }
  const GemmParams& q = plan.inner;
  // The split's batch: the caller's products, or K's chunks (chunk z starts at z·chunk_k).
  const bool chunked = plan.chunks > 1, batched = params.batch > 1;
  const int64_t a_stride_batch = chunked   ? plan.chunk_k * params.a_stride_k
                                 : batched ? params.a_stride_batch
                                           : 0;
  const int64_t b_stride_batch = chunked   ? plan.chunk_k * params.b_stride_k
                                 : batched ? params.b_stride_batch
                                           : 0;
  const int64_t K = chunked ? plan.chunk_k : params.K;
  const int64_t K_last = chunked ? params.K - (plan.chunks - 1) * plan.chunk_k : params.K;
  const SplitOperand a{static_cast<const float*>(params.a), params.a_stride_m, params.a_stride_k,
                       a_stride_batch, static_cast<float*>(const_cast<void*>(q.a)), plan.ld,
                       plan.segment, q.a_stride_batch, params.M, K, q.batch - 1, K_last,
                       /*big_first=*/true};
  const SplitOperand b{static_cast<const float*>(params.b), params.b_stride_n, params.b_stride_k,
                       b_stride_batch, static_cast<float*>(const_cast<void*>(q.b)), plan.ld,
                       plan.segment, q.b_stride_batch, params.N, K, q.batch - 1, K_last,
                       /*big_first=*/false};
  LaunchStatus status = launch_split(a, q.batch, stream);
  if (!status.ok()) return status;
  status = launch_split(b, q.batch, stream);
  if (!status.ok()) return status;
  status = launch_gemm_wgmma_sm90(q, stream);
  if (!status.ok() || !chunked) return status;
  const ChunkSum sum{static_cast<const float*>(q.c), plan.chunks, params.M, params.N,
                     static_cast<const float*>(params.bias), params.bias_stride,
                     static_cast<float*>(params.c), params.c_stride_m, params.c_stride_n};
  return launch_chunk_sum(sum, params.sm_count, stream);
}

}  // namespace torch_gemm
