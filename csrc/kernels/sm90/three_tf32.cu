// wgmma_sm90_3xtf32: float32 products at float32's accuracy on the TF32 tensor cores. One pass
// splits each operand element x once into big = tf32(x) and small = tf32(x − big); the product
// A_big·B_big + A_big·B_small + A_small·B_big then runs as one TF32 product over 3·K on wgmma_sm90's
// promoted tiles: the cross terms summed on the tensor cores, big·big's k-tile sums added in fp32
// (GemmParams::tf32_promoted).
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

constexpr int kSplitTile = 32;       // a block splits a 32×32 tile of an operand
constexpr int kSplitRowsAtOnce = 8;  // threads along the tile's rows (each takes 4)

// One operand as (batch, X, K), X being M for A and N for B, split into a dense K-major copy of
// three K-long segments a row, X·ld floats a batch element. Segment order: A's (big where x is
// finite else 0, small, big), B's (small, big where finite else 0, big), so that the product over
// 3·K is big·small + small·big + big·big, and an Inf or NaN enters through big·big only (a cross
// term of Inf and a zero small part would be NaN where torch.mm gives Inf). The small cross terms
// come first and fill the first 2·K of the product's K, which the promoted tiles sum on the tensor
// cores apart from d (WgmmaParams::cross_k_tiles): their truncation is then against their own
// small sum.
struct SplitOperand {
  const float* src;
  int64_t stride_x, stride_k, stride_batch;
  float* dst;
  int64_t ld, dst_stride_batch;
  int64_t extent_x, K;
  bool a_order;
};

// tf32(x), rounded to nearest; where that rounds a finite x past float's range (|x| within half a
// tf32 step of FLT_MAX) the truncation instead, so that big stays finite and x − big exact.
__device__ __forceinline__ float tf32_big(float x) {
  const float rounded = round_to_tf32(x);
  if (isinf(rounded) && isfinite(x)) return __uint_as_float(__float_as_uint(x) & 0xffffe000u);
  return rounded;
}

__global__ void __launch_bounds__(kSplitTile * kSplitRowsAtOnce)
    torch_gemm_split_3xtf32_kernel(SplitOperand s, int64_t first_batch) {
  __shared__ float tile[kSplitTile][kSplitTile + 1];  // [x][k], padded: conflict-free columns
  const int64_t z = first_batch + blockIdx.z;
  const int64_t x0 = static_cast<int64_t>(blockIdx.x) * kSplitTile;
  const float* src = s.src + z * s.stride_batch;
  float* dst = s.dst + z * s.dst_stride_batch;
  // Lanes run along the operand's unit stride, so that a warp's loads are coalesced either way.
  const bool k_unit = s.stride_k == 1 || s.K <= 1;
  // X's tiles on grid x (up to 2^31 − 1 blocks), K's on grid y, stepping past its 65535.
  for (int64_t k0 = static_cast<int64_t>(blockIdx.y) * kSplitTile; k0 < s.K;
       k0 += static_cast<int64_t>(gridDim.y) * kSplitTile) {
    __syncthreads();  // the previous k0's reads of the tile are done
    for (int i = threadIdx.y; i < kSplitTile; i += kSplitRowsAtOnce) {
      const int xl = k_unit ? i : threadIdx.x, kl = k_unit ? threadIdx.x : i;
      const int64_t x = x0 + xl, k = k0 + kl;
      tile[xl][kl] = x < s.extent_x && k < s.K ? src[x * s.stride_x + k * s.stride_k] : 0.0f;
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kSplitTile; i += kSplitRowsAtOnce) {
      const int64_t x = x0 + i, k = k0 + threadIdx.x;
      if (x >= s.extent_x || k >= s.K) continue;
      const float v = tile[i][threadIdx.x];
      const bool finite = isfinite(v);
      const float big = tf32_big(v);
      const float small = finite ? round_to_tf32(v - big) : 0.0f;
      const float big_finite = finite ? big : 0.0f;
      float* out = dst + x * s.ld + k;
      out[0] = s.a_order ? big_finite : small;
      out[s.K] = s.a_order ? small : big_finite;
      out[2 * s.K] = big;
    }
  }
}

LaunchStatus launch_split(const SplitOperand& s, int64_t batch, cudaStream_t stream) {
  if (s.extent_x == 0 || s.K == 0) return {};
  const dim3 block(kSplitTile, kSplitRowsAtOnce);
  for (int64_t first = 0; first < batch; first += kMaxGridZ) {
    const dim3 grid(static_cast<unsigned>(ceil_div(s.extent_x, kSplitTile)),
                    grid_y_for(ceil_div(s.K, kSplitTile)),
                    static_cast<unsigned>(std::min<int64_t>(batch - first, kMaxGridZ)));
    torch_gemm_split_3xtf32_kernel<<<grid, block, 0, stream>>>(s, first);
    const LaunchStatus status = check_launch("torch_gemm_split_3xtf32_kernel");
    if (!status.ok()) return status;
  }
  return {};
}

}  // namespace

int64_t gemm_wgmma_sm90_3xtf32_workspace_bytes(const GemmParams& params) {
  if (params.dtype != DType::kFloat32 || params.M == 0 || params.N == 0 || params.batch == 0) return 0;
  // Sizing only: any aligned address stands for the workspace.
  char* const aligned = reinterpret_cast<char*>(KernelFacts::kWorkspaceAlignBytes);
  const ThreeTf32Plan plan = plan_3xtf32(params, aligned);
  return plan.a_bytes + plan.b_bytes + gemm_wgmma_sm90_workspace_bytes(plan.inner);
}

LaunchStatus launch_gemm_wgmma_sm90_3xtf32(const GemmParams& params, cudaStream_t stream) {
  if (params.dtype != DType::kFloat32) {
    return refuse("this rung takes float32 only (bf16/fp16 run on wgmma_sm90 directly)");
  }
  if (params.M == 0 || params.N == 0 || params.batch == 0) return {};
  if (3 * params.K > INT_MAX) return refuse("3·K past 32 bits");
  if (params.workspace == nullptr) return refuse("no workspace for the split operands");
  const ThreeTf32Plan plan = plan_3xtf32(params, static_cast<char*>(params.workspace));
  // The split operands' part; wgmma_sm90's launcher checks its own, after them.
  if (params.workspace_bytes < plan.a_bytes + plan.b_bytes) {
    return refuse("workspace of " + std::to_string(params.workspace_bytes) + " bytes, the split needs " +
                  std::to_string(plan.a_bytes + plan.b_bytes));
  }
  const GemmParams& q = plan.inner;
  const bool batched = params.batch > 1;
  const SplitOperand a{static_cast<const float*>(params.a), params.a_stride_m, params.a_stride_k,
                       batched ? params.a_stride_batch : 0, static_cast<float*>(const_cast<void*>(q.a)),
                       plan.ld, q.a_stride_batch, params.M, params.K, /*a_order=*/true};
  const SplitOperand b{static_cast<const float*>(params.b), params.b_stride_n, params.b_stride_k,
                       batched ? params.b_stride_batch : 0, static_cast<float*>(const_cast<void*>(q.b)),
                       plan.ld, q.b_stride_batch, params.N, params.K, /*a_order=*/false};
  LaunchStatus status = launch_split(a, params.batch, stream);
  if (!status.ok()) return status;
  status = launch_split(b, params.batch, stream);
  if (!status.ok()) return status;
  return launch_gemm_wgmma_sm90(q, stream);
}

}  // namespace torch_gemm
