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

// Whether the default tile leaves most SMs idle: fewer 128×128 tiles (over the whole batch) than
// half the SMs. 64×64 tiles, four times as many blocks, then win; from about one tile per SM the
// default tile wins again (benchmarks/NOTES.md).
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

// The layouts' instantiation for the element type T (operand_tile.cuh's dispatch).
template <typename T>
struct Sm80Launch {
  template <typename LayoutA, typename LayoutB>
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    return run_layouts<T, LayoutA, LayoutB>(p, stream);
  }
};

}  // namespace

LaunchStatus launch_gemm_mma_sm80(const GemmParams& params, cudaStream_t stream) {
  // Tensor cores for the 16-bit types only; fp32 and fp64 stay on the SIMT rungs.
  if (params.dtype != DType::kBFloat16 && params.dtype != DType::kFloat16) {
    return refuse("this rung takes bfloat16 and float16 only");
  }
  if (params.M == 0 || params.N == 0 || params.batch == 0) return {};  // empty C
  const GemmParams p = normalized_params(params);
  // Each operand's loader from classify_operand with 16-byte chunks of 16-bit elements: the
  // 16-byte cp.async or element loads.
  constexpr int64_t kChunk = Sm80Facts::kChunkElems;
  return p.dtype == DType::kBFloat16
             ? dispatch_operand_layouts<Sm80Launch<__nv_bfloat16>, Sm80OperandLayout>(p, stream, kChunk)
             : dispatch_operand_layouts<Sm80Launch<__half>, Sm80OperandLayout>(p, stream, kChunk);
}

}  // namespace torch_gemm
