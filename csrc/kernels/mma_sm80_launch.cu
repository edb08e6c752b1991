// Launcher of the mma_sm80 rung: the element type from params.dtype (bf16, fp16), for each operand
// its major order and whether it takes 16-byte cp.async (from its strides and alignment), and the
// block tile from the loaders and the number of tiles.
#include "kernels/launch.h"
#include "kernels/mma_sm80.cuh"
#include "kernels/operand_tile.cuh"

namespace torch_gemm {
namespace {

// The params with the stride of every dimension of extent <= 1 set to 0: such a dimension is only
// indexed at 0, so its stride cannot matter (torch gives size-1 dimensions any stride), and 0
// lets a row or column vector take the 16-byte path.
GemmParams normalized_params(GemmParams p) {
  const auto norm = [](int64_t extent, int64_t* stride) {
    if (extent <= 1) *stride = 0;
  };
  norm(p.M, &p.a_stride_m);
  norm(p.K, &p.a_stride_k);
  norm(p.K, &p.b_stride_k);
  norm(p.N, &p.b_stride_n);
  norm(p.M, &p.c_stride_m);
  norm(p.N, &p.c_stride_n);
  norm(p.N, &p.bias_stride);
  norm(p.batch, &p.a_stride_batch);
  norm(p.batch, &p.b_stride_batch);
  norm(p.batch, &p.c_stride_batch);
  return p;
}

using MNAsync = Sm80OperandLayout<Major::kMN, true>;
using KAsync = Sm80OperandLayout<Major::kK, true>;
using MNScalar = Sm80OperandLayout<Major::kMN, false>;
using KScalar = Sm80OperandLayout<Major::kK, false>;

// Whether the default tile leaves most SMs idle: fewer 128×128 tiles (over the whole batch) than
// half the SMs. 64×64 tiles, four times as many blocks, then win (H200, bf16 NN): 1000³ 113
// against 78 TFLOP/s, 128×4096×4096 97 against 65; at 128 tiles (512×4096×4096) the default
// tile still wins, 256 against 247.
bool few_default_tiles(const GemmParams& p) {
  using Default = MmaSm80DefaultConfig;
  constexpr int64_t kSMsPerTile = 2;
  const int64_t limit = sm_count_of(p) / kSMsPerTile;
  const int64_t tiles = ceil_div(p.M, Default::kBlockM) * ceil_div(p.N, Default::kBlockN);
  // Both factors below the limit first, so that the product cannot overflow.
  return tiles < limit && p.batch < limit && tiles * p.batch < limit;
}

// 16-byte copies for both operands: the default tile, or the small one for few tiles. Any
// register-staged operand: the scalar configuration.
template <typename T, typename LayoutA, typename LayoutB>
LaunchStatus run_layouts(const GemmParams& p, cudaStream_t stream) {
  if constexpr (LayoutA::kAsync && LayoutB::kAsync) {
    return few_default_tiles(p)
               ? run_mma_sm80<T, MmaSm80SmallConfig, LayoutA, LayoutB>(p, stream)
               : run_mma_sm80<T, MmaSm80DefaultConfig, LayoutA, LayoutB>(p, stream);
  } else {
    return run_mma_sm80<T, MmaSm80ScalarConfig, LayoutA, LayoutB>(p, stream);
  }
}

template <typename T, typename LayoutA>
LaunchStatus dispatch_sm80_layout_b(OperandKind kind_b, const GemmParams& p, cudaStream_t stream) {
  switch (kind_b) {
    case OperandKind::kMNVec: return run_layouts<T, LayoutA, MNAsync>(p, stream);
    case OperandKind::kKVec: return run_layouts<T, LayoutA, KAsync>(p, stream);
    case OperandKind::kMNScalar: return run_layouts<T, LayoutA, MNScalar>(p, stream);
    case OperandKind::kKScalar: return run_layouts<T, LayoutA, KScalar>(p, stream);
  }
  return refuse("unknown operand layout");
}

// Each operand's loader from classify_operand with 16-byte chunks of 16-bit elements: the
// 16-byte cp.async (kMNVec, kKVec) or element loads.
template <typename T>
LaunchStatus dispatch_layouts(const GemmParams& p, cudaStream_t stream) {
  constexpr int64_t kChunk = Sm80Facts::kChunkElems;
  const bool batched = p.batch > 1;
  const OperandKind kind_a = classify_operand(p.a, p.M, p.K, p.a_stride_m, p.a_stride_k,
                                              batched ? p.a_stride_batch : 0, kChunk);
  const OperandKind kind_b = classify_operand(p.b, p.N, p.K, p.b_stride_n, p.b_stride_k,
                                              batched ? p.b_stride_batch : 0, kChunk);
  switch (kind_a) {
    case OperandKind::kMNVec: return dispatch_sm80_layout_b<T, MNAsync>(kind_b, p, stream);
    case OperandKind::kKVec: return dispatch_sm80_layout_b<T, KAsync>(kind_b, p, stream);
    case OperandKind::kMNScalar: return dispatch_sm80_layout_b<T, MNScalar>(kind_b, p, stream);
    case OperandKind::kKScalar: return dispatch_sm80_layout_b<T, KScalar>(kind_b, p, stream);
  }
  return refuse("unknown operand layout");
}

}  // namespace

LaunchStatus launch_gemm_mma_sm80(const GemmParams& params, cudaStream_t stream) {
  // Tensor cores for the 16-bit types only; fp32 and fp64 stay on the SIMT rungs.
  if (params.dtype != DType::kBFloat16 && params.dtype != DType::kFloat16) {
    return refuse("this rung takes bfloat16 and float16 only");
  }
  if (params.M == 0 || params.N == 0 || params.batch == 0) return {};  // empty C
  const GemmParams p = normalized_params(params);
  return p.dtype == DType::kBFloat16 ? dispatch_layouts<__nv_bfloat16>(p, stream)
                                     : dispatch_layouts<__half>(p, stream);
}

}  // namespace torch_gemm
