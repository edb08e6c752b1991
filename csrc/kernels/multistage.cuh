// Rung 5, multistage: over warptile, cp.async fills a ring of kStages shared-memory stages without
// passing through registers, which then hold a larger thread tile (16×8: 6 LDS.128 per 128 FFMA)
// while kStages - 1 k-tiles are in flight; split-K, summed in a fixed order, where tiles are few or
// the last wave of them would be part empty.
#pragma once

#include <algorithm>
#include <type_traits>

#include "kernels/async_copy.cuh"
#include "kernels/multistage_plan.h"
#include "kernels/thread_tile.cuh"

namespace torch_gemm {

// Tiling: a WarpTiling. kStages shared-memory stages of (kBlockK, kBlockM) of A and
// (kBlockK, kBlockN) of B, each row padded to a pitch of 4 (mod 32) banks: the K-major
// transposing copies stay conflict-free and every row stays 16-byte aligned.
template <typename Tiling, int kBlockK_, int kStages_, int kMinBlocksPerSM_>
struct MultistageConfig : Tiling {
  static constexpr int kBlockK = kBlockK_;  // depth of one k-tile
  static constexpr int kStages = kStages_;  // k-tiles resident in shared memory
  static constexpr int kMinBlocksPerSM = kMinBlocksPerSM_;  // register cap 65536 / (this · threads)
  static constexpr int kGroupM = 8;  // tile rows per rasterization group (L2 reuse)
  static constexpr int kSmemPad = HardwareConfig::kVecFloats;
  static constexpr int kPitchA = Tiling::kBlockM + kSmemPad;
  static constexpr int kPitchB = Tiling::kBlockN + kSmemPad;
  static constexpr int kStageFloatsA = kBlockK * kPitchA;
  static constexpr int kStageFloatsB = kBlockK * kPitchB;
  static constexpr int kSmemBytes =
      kStages * (kStageFloatsA + kStageFloatsB) * static_cast<int>(sizeof(float));

  static_assert(kStages >= 2, "one stage computed while at least one is filled");
  static_assert(kBlockK % ThreadTile<Tiling>::kFragBuffers == 0,
                "fragment buffers alternate with kk: a k-tile must end on the last buffer so that "
                "the next k-tile's kk = 0 fragments land in buffer 0");
  static_assert(kPitchA % HardwareConfig::kSmemBanks == HardwareConfig::kVecFloats &&
                    kPitchB % HardwareConfig::kSmemBanks == HardwareConfig::kVecFloats,
                "pitch 4 (mod 32): conflict-free transposing copies, 16-byte aligned rows");
};

// The three configurations the rung launches, chosen by measurement (benchmarks/NOTES.md):
// - large: 128×256 blocks of 2×4 warps of 64×64, 16×8 outputs per thread, k-tiles of 16 in 3
//   stages (75 KB), one block per SM at 255 registers: the fastest wherever the tiles fill the SMs.
//   Its lanes stay in the straightforward order: pairing them (see WarpTiling) halves its
//   shared-load wavefronts but ran slower.
// - small: 64×64 blocks of 2×2 warps of 32×32, 8×4 per thread, 4 stages of 8, up to 4 blocks per
//   SM, lanes paired (faster than the straightforward order here): for shapes with few output
//   tiles, usually with split-K.
// - narrow: 32×128 blocks of 1×4 warps of 32×32, 8×4 per thread, 4 stages of 16 (43 KB), up to 4
//   blocks per SM, lanes paired: for up to 64 rows, where the other tiles' rows would be mostly
//   empty; split in K, since its blocks are few.
using MultistageLargeConfig =
    MultistageConfig<WarpTiling<128, 256, 64, 64, 16, 8, /*kPairLanes=*/false>, 16, 3, 1>;
using MultistageSmallConfig =
    MultistageConfig<WarpTiling<64, 64, 32, 32, 8, 4, /*kPairLanes=*/true>, 8, 4, 4>;
using MultistageNarrowConfig =
    MultistageConfig<WarpTiling<32, 128, 32, 32, 8, 4, /*kPairLanes=*/true>, 16, 4, 4>;

// The planner (multistage_plan.h, host code) knows these tiles by their numbers.
template <typename Config>
constexpr bool config_is_tile(const MultistageTile& tile) {
  return Config::kBlockM == tile.block_m && Config::kBlockN == tile.block_n &&
         Config::kBlockK == tile.block_k && Config::kMinBlocksPerSM == tile.blocks_per_sm;
}
static_assert(config_is_tile<MultistageLargeConfig>(kMultistageLargeTile) &&
                  config_is_tile<MultistageSmallConfig>(kMultistageSmallTile) &&
                  config_is_tile<MultistageNarrowConfig>(kMultistageNarrowTile),
              "multistage_plan.h's tiles must be the configurations launched");

// The copy layout of an operand: MN-major float4 layouts copy 16 bytes per vector; every other
// one copies 4-byte elements, a K-major operand transposed on the way into sX[k][x]. A K-major
// operand always takes the scalar walk, whose warp copies 8 consecutive k of 4 rows (4 whole
// sectors per instruction): the float4 walk's 4 consecutive k of 16 rows (16 sectors each read
// a quarter at a time) was slower.
template <typename Layout>
using AsyncCopyLayout =
    std::conditional_t<Layout::kMajor == Major::kK, OperandLayout<Major::kK, 1>, Layout>;

// The tile walked by OperandTileMap, copied by cp.async straight into shared memory. Elements
// outside the matrix are zero-filled.
template <typename Layout, int kBlockX, int kBlockK, int kThreads, int kPitch>
struct AsyncOperandLoader
    : OperandTileMap<AsyncCopyLayout<Layout>, kBlockX, kBlockK, kThreads, kPitch> {
  using Map = OperandTileMap<AsyncCopyLayout<Layout>, kBlockX, kBlockK, kThreads, kPitch>;
  // One cp.async per vector: 16 bytes (MN-major float4) or 4 (every other layout).
  static constexpr int kCopyBytes = Map::kVec * static_cast<int>(sizeof(float));

  const float* base_;  // a valid address for the copies predicated off (they read nothing)

  __device__ __forceinline__ AsyncOperandLoader(const OperandView& op, int64_t x0)
      : Map(op, x0), base_(op.ptr) {}

  // Issues this thread's copies of the current k-tile into sX (kBlockK, kPitch); k_limit = valid
  // k in it (1..kBlockK). Every k-tile but a K-edge one is whole in k, and every block but an
  // edge one whole in x, so most copies need no test (and no select of a safe address) at all.
  __device__ __forceinline__ void copy(float (*sX)[kPitch], int k_limit) const {
    if (k_limit < kBlockK) {
      copy_tile<kTestK>(sX, k_limit);
    } else if (this->x_left_ > kLastXOffset) {
      copy_tile<kTestNone>(sX, k_limit);
    } else {
      copy_tile<kTestX>(sX, k_limit);
    }
  }

 private:
  enum Test { kTestNone, kTestX, kTestK };  // which bounds the copies check

  static constexpr int last_x_offset() {
    int last = 0;
    for (int j = 0; j < Map::kLoads; ++j) last = Map::x_offset(j) > last ? Map::x_offset(j) : last;
    return last;
  }
  static constexpr int kLastXOffset = last_x_offset();  // beyond it x_left_ covers every load

  template <Test kTest>
  __device__ __forceinline__ void copy_tile(float (*sX)[kPitch], int k_limit) const {
#pragma unroll
    for (int j = 0; j < Map::kLoads; ++j) {
      float* dst = &sX[Map::smem_k(j)][Map::smem_x(j)];
      if constexpr (kTest == kTestNone) {
        cp_async<kCopyBytes>(dst, this->element(j));
      } else {
        const bool valid = kTest == kTestX ? this->x_in_bounds(j) : this->in_bounds(j, k_limit);
        cp_async_zfill<kCopyBytes>(dst, valid ? this->element(j) : base_, valid);
      }
    }
  }
};

// One block per (kBlockM, kBlockN) tile of C and per split of K or batch element (blockIdx.z:
// split-K only runs unbatched). Split s computes k-tiles [s·k_tiles_per_split,
// (s + 1)·k_tiles_per_split) and writes C itself without split-K, else slice s of the (splits,
// M, N) workspace that gemm_splitk_reduce_kernel sums.
template <typename Config, typename LayoutA, typename LayoutB>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSM)
gemm_multistage_kernel(GemmParams p, SplitK split, float* workspace) {
  constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN, kBlockK = Config::kBlockK;
  constexpr int kStages = Config::kStages;
  using LoaderA = AsyncOperandLoader<LayoutA, kBlockM, kBlockK, Config::kThreads, Config::kPitchA>;
  using LoaderB = AsyncOperandLoader<LayoutB, kBlockN, kBlockK, Config::kThreads, Config::kPitchB>;
  using Tile = ThreadTile<Config>;

  // float4 elements: the stages must be 16-byte aligned for the 16-byte copies and LDS.128.
  extern __shared__ float4 smem[];
  auto* sA = reinterpret_cast<float (*)[kBlockK][Config::kPitchA]>(smem);  // (kStages, kBlockK, kPitchA)
  auto* sB = reinterpret_cast<float (*)[kBlockK][Config::kPitchB]>(
      reinterpret_cast<float*>(smem) + kStages * Config::kStageFloatsA);    // (kStages, kBlockK, kPitchB)

  const int split_index = blockIdx.z % split.splits;
  p = batch_element(p, blockIdx.z / split.splits);
  int64_t m0, n0;
  if (!grouped_block_origin<Config>(p, &m0, &n0)) return;  // whole block, before any barrier

  // This split's k-tiles; the launcher leaves none empty, but an empty one writes zeros.
  const int64_t k_tiles = ceil_div(p.K, kBlockK);
  const int64_t kt_begin = split_index * split.k_tiles_per_split;
  const int64_t kt_count = k_tiles - kt_begin < split.k_tiles_per_split
                               ? k_tiles - kt_begin
                               : split.k_tiles_per_split;

  const OperandView view_a{static_cast<const float*>(p.a), p.M, p.a_stride_m, p.a_stride_k};
  const OperandView view_b{static_cast<const float*>(p.b), p.N, p.b_stride_n, p.b_stride_k};
  LoaderA load_a(view_a, m0);
  LoaderB load_b(view_b, n0);
  load_a.advance(kt_begin);
  load_b.advance(kt_begin);
  Tile tt;

  // Issues the copies of the next k-tile (relative index `issued`) into `stage`, or none past
  // the split's last k-tile; either way one group is committed, so that the group count, and
  // with it cp_async_wait's meaning, is the same for every k-tile.
  int64_t issued = 0;
  const auto issue_next = [&](int stage) {
    if (issued < kt_count) {
      const int k_limit = k_tile_limit<kBlockK>(p.K, (kt_begin + issued) * kBlockK);
      load_a.copy(sA[stage], k_limit);
      load_b.copy(sB[stage], k_limit);
      load_a.advance();
      load_b.advance();
    }
    cp_async_commit();
    ++issued;
  };

  if (kt_count > 0) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue_next(s);
    cp_async_wait<kStages - 2>();  // k-tile 0 has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's
    tt.load_fragments(sA[0][0], sB[0][0], 0);

    int read_stage = 0;              // stage of the k-tile being computed
    int write_stage = kStages - 1;   // stage the next copies go to: the one computed last time
    for (int64_t t = 0; t < kt_count; ++t) {
#pragma unroll
      for (int kk = 0; kk < kBlockK; ++kk) {
        constexpr int kBufs = Tile::kFragBuffers;
        if (kk == 0) {
          // write_stage was last read at the previous k-tile's kk <= kBlockK - 2, before its
          // barrier, which every thread has passed: free to overwrite.
          issue_next(write_stage);
          write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        }
        if (kk < kBlockK - 1) {
          tt.load_fragments(sA[read_stage][kk + 1], sB[read_stage][kk + 1], (kk + 1) % kBufs);
        } else if (t + 1 < kt_count) {
          // Groups committed so far: kStages - 1 + t + 1; with at most kStages - 2 pending,
          // k-tile t + 1 is complete.
          cp_async_wait<kStages - 2>();
          __syncthreads();
          read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
          tt.load_fragments(sA[read_stage][0], sB[read_stage][0], 0);
        }
        tt.fma(kk % kBufs);
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)

  tt.store(split.splits > 1 ? OutputView{workspace + split_index * p.M * p.N, p.M, p.N, p.N, 1}
                            : output_of(p),
           m0, n0);
}

// C = the sum over s of the split-K workspace's slices (splits, M, N), in order s = 0, 1, ...:
// the same bits on every run. Each thread sums kVec consecutive columns of one row.
template <int kVec>
__global__ void gemm_splitk_reduce_kernel(const float* __restrict__ workspace, int splits,
                                     OutputView c) {
  const int64_t slice = c.M * c.N;
  const int64_t groups_per_row = ceil_div(c.N, kVec);
  const int64_t groups = c.M * groups_per_row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += step) {
    const int64_t m = g / groups_per_row;
    const int64_t n = g % groups_per_row * kVec;
    float sum[HardwareConfig::kVecFloats] = {};
    for (int s = 0; s < splits; ++s) {
      const float* src = workspace + s * slice + m * c.N + n;
      if constexpr (kVec == HardwareConfig::kVecFloats) {
        const float4 v = *reinterpret_cast<const float4*>(src);
        sum[0] += v.x;
        sum[1] += v.y;
        sum[2] += v.z;
        sum[3] += v.w;
      } else {
        sum[0] += *src;
      }
    }
    if constexpr (kVec == HardwareConfig::kVecFloats) {
      store_row4(c, true, m, n, sum);
    } else {
      c.ptr[m * c.stride_m + n * c.stride_n] = sum[0] + bias_of(c, n);
    }
  }
}

// Launches the multistage kernel for one configuration and operand layouts, then, with split-K,
// the reduction; `workspace` must hold splitk_workspace_bytes(p, split).
template <typename Config, typename LayoutA, typename LayoutB>
LaunchStatus run_multistage(const GemmParams& p, const SplitK& split, float* workspace,
                            cudaStream_t stream) {
  constexpr int kStaticSmemLimit = 48 * 1024;  // above it, dynamic smem needs an opt-in
  const auto kernel = gemm_multistage_kernel<Config, LayoutA, LayoutB>;
  if (Config::kSmemBytes > kStaticSmemLimit) {
    static PerDeviceValue allowed;
    LaunchStatus status = allow_shared_memory_once(
        allowed, kernel, Config::kSmemBytes,
        "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) of gemm_multistage_kernel");
    if (!status.ok()) return status;
  }
  dim3 grid;
  if (!grid_for_block_tiles<Config>(p, &grid)) return refuse("grid: more tiles than a grid holds");
  if (split.splits <= 1) {
    const SplitK whole{1, ceil_div(p.K, Config::kBlockK)};
    kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(p, whole, nullptr);
    return check_launch("gemm_multistage_kernel");
  }
  if (workspace == nullptr || p.batch != 1) {
    return refuse("split-K needs a workspace and a single product");
  }
  grid.z = static_cast<unsigned>(split.splits);
  kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(p, split, workspace);
  LaunchStatus status = check_launch("gemm_multistage_kernel (split-K)");
  if (!status.ok()) return status;

  const OutputView c = output_of(p);
  constexpr int kReduceThreads = 256;
  constexpr int64_t kReduceMaxBlocks = 4096;  // grid-stride beyond
  const bool vec = p.N % HardwareConfig::kVecFloats == 0 && vector_store_ok(c);
  const int64_t groups = p.M * ceil_div(p.N, vec ? HardwareConfig::kVecFloats : 1);
  const dim3 reduce_grid(static_cast<unsigned>(
      std::min<int64_t>(ceil_div(groups, kReduceThreads), kReduceMaxBlocks)));
  if (vec) {
    gemm_splitk_reduce_kernel<HardwareConfig::kVecFloats>
        <<<reduce_grid, kReduceThreads, 0, stream>>>(workspace, split.splits, c);
  } else {
    gemm_splitk_reduce_kernel<1><<<reduce_grid, kReduceThreads, 0, stream>>>(workspace, split.splits, c);
  }
  return check_launch("gemm_splitk_reduce_kernel");
}

}  // namespace torch_gemm
