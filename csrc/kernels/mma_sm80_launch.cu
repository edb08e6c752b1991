// Launcher of the mma_sm80 rung: the element type from params.dtype (bf16, fp16), for each operand
// its major order and whether it takes 16-byte cp.async (from its strides and alignment), and the
// block tile from the loaders and the number of tiles.
#include "kernels/launch.h"
#include "kernels/mma_sm80.cuh"

namespace torch_gemm {
namespace {

enum class Sm80OperandKind { kMNAsync, kKAsync, kMNScalar, kKScalar };

// The loader that fits an operand (K, X) of 16-bit elements (strides already normalized: see
// normalized_params). 16-byte copies need the contiguous stride 1, the other stride and the batch
// stride multiples of a chunk (every row and every batch element then starts 16-byte aligned, as
// the base does) and the contiguous extent a multiple of a chunk (a chunk is wholly inside or
// wholly outside the matrix).
Sm80OperandKind classify_sm80_operand(const void* ptr, int64_t extent_x, int64_t extent_k,
                                      int64_t stride_x, int64_t stride_k, int64_t batch,
                                      int64_t stride_batch) {
  constexpr int64_t kChunk = Sm80Facts::kChunkElems;
  const bool aligned = reinterpret_cast<uintptr_t>(ptr) % Sm80Facts::kChunkBytes == 0 &&
                       (batch <= 1 || stride_batch % kChunk == 0);
  if (aligned && stride_x == 1 && stride_k % kChunk == 0 && extent_x % kChunk == 0) {
    return Sm80OperandKind::kMNAsync;
  }
  if (aligned && stride_k == 1 && stride_x % kChunk == 0 && extent_k % kChunk == 0) {
    return Sm80OperandKind::kKAsync;
  }
  // Element loads: consecutive threads walk the dimension with the smaller stride (ignoring
  // dimensions of extent 1, which have no neighbours to coalesce with), the stage's rows.
  const auto key = [](int64_t extent, int64_t stride) {
    return extent > 1 ? (stride < 0 ? -stride : stride) : INT64_MAX;
  };
  return key(extent_k, stride_k) < key(extent_x, stride_x) ? Sm80OperandKind::kKScalar
                                                            : Sm80OperandKind::kMNScalar;
}

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

int current_sm_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 1;
  return sms;
}

// Whether the default tile leaves most SMs idle: fewer 128×128 tiles (over the whole batch) than
// half the SMs. 64×64 tiles, four times as many blocks, then win (H200, bf16 NN): 1000³ 113
// against 78 TFLOP/s, 128×4096×4096 97 against 65; at 128 tiles (512×4096×4096) the default
// tile still wins, 256 against 247.
bool few_default_tiles(const GemmParams& p) {
  using Default = MmaSm80DefaultConfig;
  constexpr int64_t kSMsPerTile = 2;
  const int64_t limit = current_sm_count() / kSMsPerTile;
  const int64_t tiles = ceil_div(p.M, Default::kBlockM) * ceil_div(p.N, Default::kBlockN);
  // Both factors below the limit first, so that the product cannot overflow.
  return tiles < limit && p.batch < limit && tiles * p.batch < limit;
}

// 16-byte copies for both operands: the default tile, or the small one for few tiles. Any
// register-staged operand: the scalar configuration.
template <typename T, typename LayoutA, typename LayoutB>
cudaError_t run_layouts(const GemmParams& p, cudaStream_t stream) {
  if constexpr (LayoutA::kAsync && LayoutB::kAsync) {
    return few_default_tiles(p)
               ? run_mma_sm80<T, MmaSm80SmallConfig, LayoutA, LayoutB>(p, stream)
               : run_mma_sm80<T, MmaSm80DefaultConfig, LayoutA, LayoutB>(p, stream);
  } else {
    return run_mma_sm80<T, MmaSm80ScalarConfig, LayoutA, LayoutB>(p, stream);
  }
}

template <typename T, typename LayoutA>
cudaError_t dispatch_layout_b(Sm80OperandKind kind_b, const GemmParams& p, cudaStream_t stream) {
  switch (kind_b) {
    case Sm80OperandKind::kMNAsync: return run_layouts<T, LayoutA, MNAsync>(p, stream);
    case Sm80OperandKind::kKAsync: return run_layouts<T, LayoutA, KAsync>(p, stream);
    case Sm80OperandKind::kMNScalar: return run_layouts<T, LayoutA, MNScalar>(p, stream);
    case Sm80OperandKind::kKScalar: return run_layouts<T, LayoutA, KScalar>(p, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t dispatch_layouts(const GemmParams& p, cudaStream_t stream) {
  const Sm80OperandKind kind_a = classify_sm80_operand(p.a, p.M, p.K, p.a_stride_m, p.a_stride_k,
                                                       p.batch, p.a_stride_batch);
  const Sm80OperandKind kind_b = classify_sm80_operand(p.b, p.N, p.K, p.b_stride_n, p.b_stride_k,
                                                       p.batch, p.b_stride_batch);
  switch (kind_a) {
    case Sm80OperandKind::kMNAsync: return dispatch_layout_b<T, MNAsync>(kind_b, p, stream);
    case Sm80OperandKind::kKAsync: return dispatch_layout_b<T, KAsync>(kind_b, p, stream);
    case Sm80OperandKind::kMNScalar: return dispatch_layout_b<T, MNScalar>(kind_b, p, stream);
    case Sm80OperandKind::kKScalar: return dispatch_layout_b<T, KScalar>(kind_b, p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_gemm_mma_sm80(const GemmParams& params, cudaStream_t stream) {
  // Tensor cores for the 16-bit types only; fp32 and fp64 stay on the SIMT rungs.
  if (params.dtype != DType::kBFloat16 && params.dtype != DType::kFloat16) {
    return cudaErrorInvalidValue;
  }
  if (params.M == 0 || params.N == 0 || params.batch == 0) return cudaSuccess;  // empty C
  const GemmParams p = normalized_params(params);
  return p.dtype == DType::kBFloat16 ? dispatch_layouts<__nv_bfloat16>(p, stream)
                                     : dispatch_layouts<__half>(p, stream);
}

}  // namespace torch_gemm
