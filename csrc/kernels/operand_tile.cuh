// Operand tiles for the fp32 register-tiled rungs (regtile, warptile): how an operand (K, X) is
// staged into shared memory whatever its strides and alignment, the C store, and the host-side
// choice of the load instantiation. Written for regtile; warptile reuses it unchanged.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/gemm_params.h"
#include "kernels/grid.cuh"

namespace torch_gemm {

// The hardware facts that the tile constraints below are stated in.
struct HardwareConfig {
  static constexpr int kWarpSize = 32;
  static constexpr int kSmemBanks = 32;    // 4-byte shared-memory banks
  static constexpr int kVecFloats = 4;     // floats per 128-bit access (float4, LDS.128)
  static constexpr int kVecBytes = 16;     // alignment a 128-bit access needs
  static constexpr int kSectorFloats = 8;  // floats per 32-byte memory sector
};

// ---------------------------------------------------------------------------------------------
// Operand layouts. A (M, K) and B (K, N) are both seen as a (K, X) operand, X being M for A and
// N for B, and both are staged in shared memory the same way: (kBlockK, kBlockX), X fastest. So
// one loader serves both, and the compute loop reads A and B alike with 128-bit loads.
// ---------------------------------------------------------------------------------------------

// Which dimension of an operand is contiguous in memory (stride 1), in CUTLASS's words.
// kMN: A transposed (stride_m == 1) or B row-major (stride_n == 1); the global rows are rows of
//      the shared tile, so they are copied straight across.
// kK:  A row-major (stride_k == 1) or B transposed (stride_k == 1); the loader transposes.
// For the scalar instantiation it only says which dimension consecutive threads walk along (the
// one with the smaller stride, for coalescing); both strides are then used as given.
enum class Major { kMN, kK };

template <Major kMajor_, int kVec_>
struct OperandLayout {
  static constexpr Major kMajor = kMajor_;
  // 4: float4 loads, valid when the contiguous stride is 1, the other stride a multiple of 4, the
  //    base 16-byte aligned (every vector then starts on a 16-byte boundary) and the contiguous
  //    extent a multiple of 4 (every vector is wholly inside the matrix or wholly outside; for
  //    contiguous tensors this follows from the stride condition). classify_operand checks all.
  // 1: scalar loads through both strides: any strides, including 0 (broadcast views).
  static constexpr int kVec = kVec_;
  static_assert(kVec == 1 || kVec == HardwareConfig::kVecFloats, "loads are scalar or float4");
};

// What a block needs to know about one operand in global memory.
struct OperandView {
  const float* ptr;
  int64_t extent_x;  // M for A, N for B
  int64_t stride_x;  // elements between consecutive x
  int64_t stride_k;  // elements between consecutive k
};

// min(remaining, kExtent) as an int: how many of a tile's kExtent indices are inside the matrix.
template <int kExtent>
__device__ __forceinline__ int clamp_to_tile(int64_t remaining) {
  return remaining < kExtent ? static_cast<int>(remaining) : kExtent;
}

template <int kVec>
__device__ __forceinline__ void load_vector(const float* src, float (&dst)[kVec]) {
  if constexpr (kVec == HardwareConfig::kVecFloats) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(src));
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  } else {
    dst[0] = __ldg(src);
  }
}

// How a block's threads share the copy of a (kBlockK, kBlockX) operand tile from global memory
// into a shared-memory tile of row pitch kPitch floats, sX[k][x]; elements outside the matrix
// become zeros. Both the register-staged loader (regtile, warptile) and the cp.async one
// (multistage) walk the tile this way.
//
// In memory the tile is kStrided rows of kContig contiguous elements. One pass of the block
// covers kRowsPerPass rows × kSpan contiguous elements, consecutive threads along the span:
//  - kMN: the span is the whole tile width, so a warp reads 32 consecutive vectors of one row
//    (fully coalesced) and writes them to one smem row (conflict-free).
//  - kK: the span is one 32-byte sector (8 floats), so a warp reads whole sectors of 32/kSpanVecs
//    rows. Each 4-byte store of the transposing scatter writes sX[k][x] for k in two values 4
//    apart (float4) or 8 consecutive (scalar) and x in 16 or 4 consecutive rows: with a pitch of
//    4 (mod 32) banks the bank is 4·k + x (mod 32), distinct across the warp: conflict-free.
template <typename Layout, int kBlockX, int kBlockK, int kThreads, int kPitch>
struct OperandTileMap {
  static constexpr bool kMNMajor = Layout::kMajor == Major::kMN;
  static constexpr int kVec = Layout::kVec;
  static constexpr bool kFloat4 = kVec == HardwareConfig::kVecFloats;
  static constexpr int kSectorFloats = HardwareConfig::kSectorFloats;
  static constexpr int kContig = kMNMajor ? kBlockX : kBlockK;   // tile extent, contiguous dim
  static constexpr int kStrided = kMNMajor ? kBlockK : kBlockX;  // tile extent, the other dim
  static constexpr int kSpan = kMNMajor ? kBlockX : kSectorFloats;
  static constexpr int kSpanVecs = kSpan / kVec;
  static constexpr int kRowsPerPass = kThreads / kSpanVecs;
  static constexpr int kPassesPerSpan = kStrided / kRowsPerPass;
  static constexpr int kSpans = kContig / kSpan;
  static constexpr int kLoads = kPassesPerSpan * kSpans;  // vectors per thread per tile

  static_assert(kContig % kSpan == 0, "the tile's contiguous extent must be whole spans");
  static_assert(kSpan % kVec == 0, "a span must be whole vectors");
  static_assert(kThreads % kSpanVecs == 0,
                "a pass must cover whole spans, so a thread's offset within its span is fixed");
  static_assert(kStrided % kRowsPerPass == 0,
                "the passes must tile the strided extent exactly: every element loaded once");
  static_assert(kMNMajor || kPitch % HardwareConfig::kSmemBanks == HardwareConfig::kVecFloats,
                "the transposing scatter is conflict-free only for a pitch of 4 (mod 32) banks");
  static_assert(kPitch % HardwareConfig::kVecFloats == 0,
                "smem rows must stay 16-byte aligned for 128-bit accesses");

  // This thread's offsets in the tile for load 0 (functions of threadIdx.x, recomputed rather
  // than kept in registers), and the compile-time offsets that load j adds to them.
  __device__ __forceinline__ static int contig_t() { return threadIdx.x % kSpanVecs * kVec; }
  __device__ __forceinline__ static int strided_t() { return threadIdx.x / kSpanVecs; }
  __device__ __forceinline__ static int x_t() { return kMNMajor ? contig_t() : strided_t(); }
  __device__ __forceinline__ static int k_t() { return kMNMajor ? strided_t() : contig_t(); }
  __host__ __device__ static constexpr int contig_offset(int load) {
    return load / kPassesPerSpan * kSpan;
  }
  __host__ __device__ static constexpr int strided_offset(int load) {
    return load % kPassesPerSpan * kRowsPerPass;
  }
  __host__ __device__ static constexpr int x_offset(int load) {
    return kMNMajor ? contig_offset(load) : strided_offset(load);
  }
  __host__ __device__ static constexpr int k_offset(int load) {
    return kMNMajor ? strided_offset(load) : contig_offset(load);
  }
  // The smem coordinates (k, x) of the first element of this thread's vector `load` (a kMN
  // vector runs along x, a kK one along k).
  __device__ __forceinline__ static int smem_k(int load) { return k_t() + k_offset(load); }
  __device__ __forceinline__ static int smem_x(int load) { return x_t() + x_offset(load); }

  const float* ptr_;         // this thread's element 0 of load 0 in the current k-tile
  int64_t stride_x_;         // the operand's strides, as given
  int64_t stride_k_;
  int x_left_;               // valid x counted from this thread's x of load 0 (may be <= 0)

  // The block's tile starts at x0 (m0 for A, n0 for B) and at k = 0.
  __device__ __forceinline__ OperandTileMap(const OperandView& op, int64_t x0) {
    ptr_ = op.ptr + (x0 + x_t()) * op.stride_x + static_cast<int64_t>(k_t()) * op.stride_k;
    stride_x_ = op.stride_x;
    stride_k_ = op.stride_k;
    x_left_ = clamp_to_tile<kBlockX>(op.extent_x - x0) - x_t();
  }

  // On k_tiles k-tiles (a split-K slice starts past the earlier ones).
  __device__ __forceinline__ void advance(int64_t k_tiles = 1) {
    ptr_ += k_tiles * kBlockK * stride_k_;
  }

  // Whether vector `load` is inside the matrix in x, and whether it is inside in x and k of the
  // current k-tile, k_limit being the valid k in it (1..kBlockK). A vector is wholly inside or
  // wholly outside (see OperandLayout::kVec).
  __device__ __forceinline__ bool x_in_bounds(int load) const { return x_offset(load) < x_left_; }
  __device__ __forceinline__ bool in_bounds(int load, int k_limit) const {
    return x_in_bounds(load) && k_offset(load) < k_limit - k_t();
  }
  // Global address of this thread's vector `load` in the current k-tile.
  __device__ __forceinline__ const float* element(int load) const {
    return ptr_ + x_offset(load) * x_step(stride_x_) + k_offset(load) * k_step(stride_k_);
  }

  // The operand's strides with the unit stride of a float4 layout made a compile-time constant.
  __device__ __forceinline__ static int64_t x_step(int64_t stride_x) {
    return kFloat4 && kMNMajor ? 1 : stride_x;
  }
  __device__ __forceinline__ static int64_t k_step(int64_t stride_k) {
    return kFloat4 && !kMNMajor ? 1 : stride_k;
  }
};

// The tile walked by OperandTileMap, staged through registers: load() issues the global loads of
// one k-tile, store() writes them to shared memory later, so a rung can overlap the global
// latency with compute.
template <typename Layout, int kBlockX, int kBlockK, int kThreads, int kPitch>
struct OperandTileLoader : OperandTileMap<Layout, kBlockX, kBlockK, kThreads, kPitch> {
  using Map = OperandTileMap<Layout, kBlockX, kBlockK, kThreads, kPitch>;
  using Map::kFloat4;
  using Map::kLoads;
  using Map::kMNMajor;
  using Map::kVec;
  using Map::Map;

  float r_[kLoads][kVec];    // the tile in flight between global and shared memory

  // Global → registers for the k-tile the loader points at; k_limit = valid k in it (1..kBlockK).
  // A vector is wholly inside or wholly outside the matrix (see OperandLayout::kVec), so one
  // test per vector decides between loading it and zeros.
  __device__ __forceinline__ void load(int k_limit) {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      if (this->in_bounds(j, k_limit)) {
        load_vector<kVec>(this->element(j), r_[j]);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) r_[j][i] = 0.0f;
      }
    }
  }

  // Registers → shared tile sX (kBlockK, kPitch).
  __device__ __forceinline__ void store(float (*sX)[kPitch]) const {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int k = Map::smem_k(j), x = Map::smem_x(j);
      if constexpr (kMNMajor) {
        if constexpr (kFloat4) {
          *reinterpret_cast<float4*>(&sX[k][x]) =
              make_float4(r_[j][0], r_[j][1], r_[j][2], r_[j][3]);
        } else {
          sX[k][x] = r_[j][0];
        }
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) sX[k + i][x] = r_[j][i];
      }
    }
  }
};

// One block per tile of C, tiles numbered along gridDim.x first (see grid_for_tiles); the last
// row of the grid may overhang the tile count.
__device__ __forceinline__ int64_t linear_tile_index() {
  return static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
}

// Valid k in the k-tile starting at k0 (k0 < K).
template <int kBlockK>
__device__ __forceinline__ int k_tile_limit(int64_t K, int64_t k0) {
  return clamp_to_tile<kBlockK>(K - k0);
}

// Where a block writes its tile of C: C itself, or one split's slice of a split-K workspace
// (which carries no bias: the reduction adds it once).
struct OutputView {
  float* ptr;
  int64_t M, N;
  int64_t stride_m, stride_n;
  const float* bias = nullptr;  // (N), added to every row; null for none
  int64_t bias_stride = 0;
};

__host__ __device__ inline OutputView output_of(const GemmParams& p) {
  return {static_cast<float*>(p.c), p.M,          p.N, p.c_stride_m, p.c_stride_n,
          static_cast<const float*>(p.bias), p.bias_stride};
}

// The bias of column n (n < N), or 0 without one.
__device__ __forceinline__ float bias_of(const OutputView& c, int64_t n) {
  return c.bias == nullptr ? 0.0f : c.bias[n * c.bias_stride];
}

// Whether the output takes 128-bit stores: unit column stride, row stride a multiple of 4 floats
// and a 16-byte-aligned base, so every 4-column group starting at a multiple of 4 is aligned.
__host__ __device__ inline bool vector_store_ok(const OutputView& c) {
  return c.stride_n == 1 && c.stride_m % HardwareConfig::kVecFloats == 0 &&
         reinterpret_cast<uintptr_t>(c.ptr) % HardwareConfig::kVecBytes == 0;
}

// Writes v (+ the bias) to C[m, n .. n+3] (n a multiple of 4), skipping columns >= N.
__device__ __forceinline__ void store_row4(const OutputView& c, bool vec, int64_t m, int64_t n,
                                           const float (&v)[HardwareConfig::kVecFloats]) {
  constexpr int kVec = HardwareConfig::kVecFloats;
  float* row = c.ptr + m * c.stride_m;
  if (vec && n + kVec <= c.N) {
    float4 out = make_float4(v[0], v[1], v[2], v[3]);
    if (c.bias != nullptr) {
      out.x += bias_of(c, n);
      out.y += bias_of(c, n + 1);
      out.z += bias_of(c, n + 2);
      out.w += bias_of(c, n + 3);
    }
    *reinterpret_cast<float4*>(row + n) = out;
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if (n + i < c.N) row[(n + i) * c.stride_n] = v[i] + bias_of(c, n + i);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: picking the instantiation from the params.
// ---------------------------------------------------------------------------------------------

enum class OperandKind { kMNVec, kMNScalar, kKVec, kKScalar };

// The layout that loads an operand (K, X) fastest, with vectors of kVec elements (16 bytes: 4
// floats, 8 halves). A dimension of extent <= 1 is only ever indexed at 0, so its stride cannot
// matter: treat it as 0 (torch gives size-1 dims any stride). Every batch element's base must be
// aligned too: stride_batch is that of a batch of more than one (0 otherwise).
inline OperandKind classify_operand(const void* ptr, int64_t extent_x, int64_t extent_k,
                                    int64_t stride_x, int64_t stride_k, int64_t stride_batch,
                                    int64_t kVec = HardwareConfig::kVecFloats) {
  if (extent_x <= 1) stride_x = 0;
  if (extent_k <= 1) stride_k = 0;
  const bool aligned = reinterpret_cast<uintptr_t>(ptr) % HardwareConfig::kVecBytes == 0 &&
                       stride_batch % kVec == 0;
  if (aligned && stride_x == 1 && stride_k % kVec == 0 && extent_x % kVec == 0) {
    return OperandKind::kMNVec;
  }
  if (aligned && stride_k == 1 && stride_x % kVec == 0 && extent_k % kVec == 0) {
    return OperandKind::kKVec;
  }
  // Scalar loads: consecutive threads walk the dimension with the smaller stride (ignoring
  // dimensions of extent 1, which have no neighbours to coalesce with).
  const auto key = [](int64_t extent, int64_t stride) {
    return extent > 1 ? (stride < 0 ? -stride : stride) : INT64_MAX;
  };
  return key(extent_k, stride_k) < key(extent_x, stride_x) ? OperandKind::kKScalar
                                                            : OperandKind::kMNScalar;
}

// The fp32 rungs' layouts by (major, float4 loads or not); other rungs pass their own family
// (mma_sm80: 16-byte cp.async or element loads).
template <Major kMajor, bool kVec>
using Fp32Layout = OperandLayout<kMajor, kVec ? HardwareConfig::kVecFloats : 1>;

template <typename Launch, template <Major, bool> class Layout, typename LayoutA>
LaunchStatus dispatch_layout_b(OperandKind kind_b, const GemmParams& p, cudaStream_t stream) {
  switch (kind_b) {
    case OperandKind::kMNVec: return Launch::template run<LayoutA, Layout<Major::kMN, true>>(p, stream);
    case OperandKind::kMNScalar: return Launch::template run<LayoutA, Layout<Major::kMN, false>>(p, stream);
    case OperandKind::kKVec: return Launch::template run<LayoutA, Layout<Major::kK, true>>(p, stream);
    case OperandKind::kKScalar: return Launch::template run<LayoutA, Layout<Major::kK, false>>(p, stream);
  }
  return refuse("unknown operand layout");
}

// Runs Launch::run<LayoutA, LayoutB>(p, stream) with the layouts of the family Layout that fit
// A's and B's strides and alignment for vectors of kVec elements (16 bytes): all four
// NN/NT/TN/TT layouts without copies, anything else through element loads.
template <typename Launch, template <Major, bool> class Layout = Fp32Layout>
LaunchStatus dispatch_operand_layouts(const GemmParams& p, cudaStream_t stream,
                                      int64_t kVec = HardwareConfig::kVecFloats) {
  const bool batched = p.batch > 1;
  const OperandKind kind_a = classify_operand(p.a, p.M, p.K, p.a_stride_m, p.a_stride_k,
                                              batched ? p.a_stride_batch : 0, kVec);
  const OperandKind kind_b = classify_operand(p.b, p.N, p.K, p.b_stride_n, p.b_stride_k,
                                              batched ? p.b_stride_batch : 0, kVec);
  switch (kind_a) {
    case OperandKind::kMNVec:
      return dispatch_layout_b<Launch, Layout, Layout<Major::kMN, true>>(kind_b, p, stream);
    case OperandKind::kMNScalar:
      return dispatch_layout_b<Launch, Layout, Layout<Major::kMN, false>>(kind_b, p, stream);
    case OperandKind::kKVec:
      return dispatch_layout_b<Launch, Layout, Layout<Major::kK, true>>(kind_b, p, stream);
    case OperandKind::kKScalar:
      return dispatch_layout_b<Launch, Layout, Layout<Major::kK, false>>(kind_b, p, stream);
  }
  return refuse("unknown operand layout");
}

// What every fp32 register-tiled launcher does before its kernel: refuse other dtypes, skip an
// empty C, cut the batch into launches of at most kMaxGridZ and pick the operand layouts
// (Launch::run<LayoutA, LayoutB> launches the kernel for one chunk of the batch).
template <typename Launch>
LaunchStatus launch_fp32_tiled(const GemmParams& p, cudaStream_t stream) {
  if (p.dtype != DType::kFloat32) return refuse("this rung takes float32 only");
  if (p.M == 0 || p.N == 0) return {};  // empty C: nothing to write
  return for_each_batch_chunk(p, kMaxGridZ, [&](const GemmParams& chunk) {
    return dispatch_operand_layouts<Launch>(chunk, stream);
  });
}

// The grid of a kernel with one block per (Config::kBlockM, Config::kBlockN) tile of C and per
// batch element (blockIdx.z).
template <typename Config>
bool grid_for_block_tiles(const GemmParams& p, dim3* grid) {
  if (!grid_for_tiles(ceil_div(p.M, Config::kBlockM) * ceil_div(p.N, Config::kBlockN), grid)) {
    return false;
  }
  grid->z = static_cast<unsigned>(p.batch);
  return true;
}

}  // namespace torch_gemm
