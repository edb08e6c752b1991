// Rung 6, mma_sm80: multistage's cp.async ring feeding bf16/fp16 tensor cores (mma.sync m16n8k16,
// fp32 accumulators) through ldmatrix from XOR-swizzled stages: the tensor cores' throughput for
// every GPU from sm_80, each operand staged in its own major order, no transposing copy.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/async_copy.cuh"
#include "kernels/grid.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/numeric.cuh"
#include "kernels/thread_tile.cuh"

namespace torch_gemm {

// The facts of the sm_80 tensor-core path that the tile constraints below are stated in.
struct Sm80Facts {
  static constexpr int kWarpSize = 32;
  static constexpr int kMmaM = 16;  // mma.sync.m16n8k16: rows of A and C per instruction
  static constexpr int kMmaN = 8;   // columns of B and C per instruction
  static constexpr int kMmaK = 16;  // depth per instruction
  static constexpr int kElemBytes = 2;                          // bf16 and fp16
  static constexpr int kChunkBytes = 16;                        // one cp.async, one ldmatrix row
  static constexpr int kChunkElems = kChunkBytes / kElemBytes;  // 8
  static constexpr int kLineChunks = 8;  // 16-byte chunks per 128 bytes: one pass over the 32 banks
  static constexpr int kPackElems = 2;     // 16-bit elements per 32-bit register
  static constexpr int kLdsmMatrices = 4;  // ldmatrix.x4: four 8x8 matrices
  static constexpr int kLdsmRows = 8;      // rows (lanes giving addresses) per 8x8 matrix
  static constexpr int kFragBuffers = 2;   // fragments of depth kk + 1 load while kk computes
};

// Block tile (kBlockM, kBlockN, kBlockK) computed by kWarpsM × kWarpsN warps of (kWarpM, kWarpN),
// each a grid of (kMmaTilesM, kMmaTilesN) m16n8 accumulator tiles; kStages k-tiles resident.
template <int kBlockM_, int kBlockN_, int kBlockK_, int kWarpsM_, int kWarpsN_, int kStages_,
          int kMinBlocksPerSM_>
struct MmaSm80Config {
  using F = Sm80Facts;
  static constexpr int kBlockM = kBlockM_;  // rows of C per block
  static constexpr int kBlockN = kBlockN_;  // columns of C per block
  static constexpr int kBlockK = kBlockK_;  // depth of one k-tile
  static constexpr int kWarpsM = kWarpsM_;
  static constexpr int kWarpsN = kWarpsN_;
  static constexpr int kStages = kStages_;  // k-tiles resident in shared memory
  static constexpr int kMinBlocksPerSM = kMinBlocksPerSM_;  // register cap 65536 / (this · threads)
  static constexpr int kGroupM = 8;  // tile rows per rasterization group (L2 reuse)

  static constexpr int kThreads = kWarpsM * kWarpsN * F::kWarpSize;
  static constexpr int kWarpM = kBlockM / kWarpsM;
  static constexpr int kWarpN = kBlockN / kWarpsN;
  static constexpr int kMmaTilesM = kWarpM / F::kMmaM;  // m16 tiles per warp
  static constexpr int kMmaTilesN = kWarpN / F::kMmaN;  // n8 tiles per warp
  static constexpr int kKSteps = kBlockK / F::kMmaK;    // mma depths per k-tile
  static constexpr int kStageBytesA = kBlockM * kBlockK * F::kElemBytes;
  static constexpr int kStageBytesB = kBlockN * kBlockK * F::kElemBytes;
  static constexpr int kSmemBytes = kStages * (kStageBytesA + kStageBytesB);

  static_assert(kBlockM % kWarpsM == 0 && kBlockN % kWarpsN == 0,
                "warp tiles must tile the block exactly");
  static_assert(kWarpM % (2 * F::kLdsmRows) == 0 && kWarpN % (2 * F::kLdsmRows) == 0,
                "one ldmatrix.x4 loads 16 rows of A (an m16 tile) or 16 columns of B (two n8 "
                "tiles): warp tiles must be whole such blocks");
  static_assert(kBlockK % (F::kFragBuffers * F::kMmaK) == 0,
                "fragment buffers alternate with kk: a k-tile must end on the last buffer so that "
                "the next k-tile's kk = 0 fragments land in buffer 0");
  static_assert(kStages >= 3,
                "register-staged (scalar) operands store a k-tile one k-tile after loading it, two "
                "k-tiles ahead of its reads: at least 3 stages");
  static_assert(kBlockM % F::kChunkElems == 0 && kBlockN % F::kChunkElems == 0 &&
                    kBlockK % F::kChunkElems == 0,
                "every smem row must be whole 16-byte chunks (cp.async, ldmatrix rows)");
};

// 128×128×32 blocks of 2×2 warps of 64×64 (32 mma per 8 ldmatrix.x4 per k16 step), 4 stages of
// 16 KB: two blocks per SM by registers (255 each) and shared memory (128 KB). Of the variants
// measured (3, 5 or 6 stages, 128×256 and 256×128 blocks of 8 such warps, 64-deep k-tiles), each
// was slower on large products (benchmarks/NOTES.md).
using MmaSm80DefaultConfig = MmaSm80Config<128, 128, 32, 2, 2, 4, 2>;
// For shapes with few 128×128 tiles: 64×64×32 blocks of 2×2 warps of 32×32, 4 stages of 8 KB,
// four times as many blocks, up to 4 per SM.
using MmaSm80SmallConfig = MmaSm80Config<64, 64, 32, 2, 2, 4, 4>;
// When an operand is register-staged: 2×4 warps of 64×32, so that each thread stages 8 registers
// per operand instead of 16 and nothing spills (160-210 registers, one block per SM).
using MmaSm80ScalarConfig = MmaSm80Config<128, 128, 32, 2, 4, 4, 1>;

// How an operand reaches shared memory: its major order (which smem layout and whether ldmatrix
// transposes) and whether it takes 16-byte cp.async or register-staged element loads.
template <Major kMajor_, bool kAsync_>
struct Sm80OperandLayout {
  static constexpr Major kMajor = kMajor_;
  // true: 16-byte cp.async, valid when the contiguous stride is 1, the other stride (and the
  //       batch stride) a multiple of 8 elements, the base 16-byte aligned and the contiguous
  //       extent a multiple of 8 (a chunk is wholly inside the matrix or wholly outside).
  // false: 2-byte loads through both strides (any strides, 0 included), staged in registers.
  static constexpr bool kAsync = kAsync_;
};

// One operand's (kBlockX, kBlockK) tile of one stage (X = M for A, N for B), stored in the
// operand's own major order: kRows rows of kRowElems contiguous elements, rows being x for a
// K-major operand and k for an MN-major one.
//
// Swizzle: the 16-byte chunk at linear index i = row · kRowChunks + chunk is stored at
// i XOR (line mod 8), line being the 128-byte line of 8 chunks that the row falls in (the row
// itself when rows are 128 bytes or more). An 8x8 ldmatrix matrix reads one chunk from each of 8
// consecutive rows at the same column; unswizzled those share 4 banks (8-way conflict for rows of
// 128 bytes or more, 4-way for 64-byte rows). The XOR sends them to 8 distinct 16-byte bank
// groups: conflict-free, without padding. The XOR only permutes chunks within a 128-byte line, so
// the 8 consecutive chunks a quarter-warp's cp.async writes stay in distinct bank groups as well.
template <Major kMajor, int kBlockX_, int kBlockK_>
struct SwizzledTile {
  using F = Sm80Facts;
  static constexpr bool kKMajor = kMajor == Major::kK;
  static constexpr int kBlockX = kBlockX_;
  static constexpr int kBlockK = kBlockK_;
  static constexpr int kRows = kKMajor ? kBlockX : kBlockK;
  static constexpr int kRowElems = kKMajor ? kBlockK : kBlockX;
  static constexpr int kRowChunks = kRowElems / F::kChunkElems;
  static constexpr int kRowsPerLine =
      kRowChunks >= F::kLineChunks ? 1 : F::kLineChunks / kRowChunks;
  static constexpr int kRowBytes = kRowElems * F::kElemBytes;
  static constexpr int kBytes = kRows * kRowBytes;
  static constexpr int kPeriodRows = F::kLineChunks * kRowsPerLine;  // rows of one XOR pattern

  static_assert((kRowChunks & (kRowChunks - 1)) == 0,
                "a power-of-two row of chunks: the XOR of a line's 3 low bits stays inside the "
                "row (rows of 8+ chunks) or the 128-byte line (shorter rows)");

  // Byte offset of element (row, col) of the tile: col a multiple of 2 at most for 4-byte
  // accesses, of 8 for 16-byte ones.
  __device__ __forceinline__ static uint32_t offset(int row, int col) {
    const int chunk = row * kRowChunks + col / F::kChunkElems;
    const int swizzled = chunk ^ (row / kRowsPerLine % F::kLineChunks);
    return static_cast<uint32_t>(swizzled * F::kChunkBytes + col % F::kChunkElems * F::kElemBytes);
  }

  // The same for element (x, k) of the operand.
  __device__ __forceinline__ static uint32_t offset_xk(int x, int k) {
    return kKMajor ? offset(x, k) : offset(k, x);
  }

  // The offset of element (x + dx, k + dk) from `base`, the offset of (x, k), without redoing the
  // swizzle: a step along a row (k for K-major, x for MN-major) is an XOR of its bytes and a step
  // across rows an add. Valid when the row step is a multiple of the swizzle period (8 lines, so
  // the XOR pattern is the same) and the column step's chunk bits are zero in (x, k)'s column (it
  // adds without carry, so adding and XOR agree, and XOR commutes with the swizzle's XOR).
  __device__ __forceinline__ static uint32_t step_xk(uint32_t base, int dx, int dk) {
    const int d_row = kKMajor ? dx : dk;
    const int d_col = kKMajor ? dk : dx;
    return (base ^ static_cast<uint32_t>(d_col * F::kElemBytes)) +
           static_cast<uint32_t>(d_row * kRowBytes);
  }
};

// What a block needs to know about one operand (K, X) in global memory.
template <typename T>
struct Sm80OperandView {
  const T* ptr;
  int64_t extent_x;  // M for A, N for B
  int64_t stride_x;  // elements between consecutive x
  int64_t stride_k;  // elements between consecutive k
};

// The common part of the two loaders: which part of a tile a thread copies. The tile is kRows
// rows of kRowVecs vectors of kVecElems elements; vector v = threadIdx.x + j · kThreads (load j)
// sits at row v / kRowVecs and column v % kRowVecs, so consecutive threads walk along a row, the
// dimension contiguous in shared memory (and, for async operands, in global memory too).
template <typename T, typename Layout, typename Tile, int kThreads, int kVecElems>
struct TileWalk {
  static constexpr bool kKMajor = Layout::kMajor == Major::kK;
  static constexpr int kRowVecs = Tile::kRowElems / kVecElems;
  static constexpr int kLoads = Tile::kRows * kRowVecs / kThreads;  // vectors per thread per tile
  static constexpr int kRowStep = kThreads / kRowVecs;  // tile rows between a thread's loads

  static_assert(Tile::kRowElems % kVecElems == 0, "a row must be whole vectors");
  static_assert(kThreads % kRowVecs == 0,
                "a pass must cover whole rows, so a thread's column is the same for every load");
  static_assert(Tile::kRows % kRowStep == 0,
                "the passes must tile the rows exactly: every element loaded once");

  const T* src_;         // this thread's first element of load 0 in the current k-tile
  int64_t row_stride_;   // elements between consecutive tile rows in global memory
  int64_t col_stride_;   // elements between consecutive tile columns in global memory
  int64_t tile_step_;    // elements between consecutive k-tiles: kBlockK · stride_k
  int row_;              // this thread's tile row of load 0
  int col_;              // this thread's tile column (element), the same for every load
  int x_left_;           // valid x in the block's tile (1..kBlockX)

  __device__ __forceinline__ TileWalk(const Sm80OperandView<T>& op, int64_t x0) {
    row_ = static_cast<int>(threadIdx.x) / kRowVecs;
    col_ = static_cast<int>(threadIdx.x) % kRowVecs * kVecElems;
    row_stride_ = kKMajor ? op.stride_x : op.stride_k;
    col_stride_ = kKMajor ? op.stride_k : op.stride_x;
    const int x = kKMajor ? row_ : col_;
    const int k = kKMajor ? col_ : row_;
    src_ = op.ptr + (x0 + x) * op.stride_x + k * op.stride_k;
    tile_step_ = Tile::kBlockK * op.stride_k;
    x_left_ = clamp_to_tile<Tile::kBlockX>(op.extent_x - x0);
  }

  __device__ __forceinline__ void advance() { src_ += tile_step_; }

  // Valid tile rows and tile columns of the current k-tile, k_limit being its valid k.
  __device__ __forceinline__ int rows_limit(int k_limit) const {
    return kKMajor ? x_left_ : k_limit;
  }
  __device__ __forceinline__ int cols_limit(int k_limit) const {
    return kKMajor ? k_limit : x_left_;
  }
  __device__ __forceinline__ int row(int load) const { return row_ + load * kRowStep; }
  __device__ __forceinline__ const T* src(int load) const {
    return src_ + static_cast<int64_t>(load * kRowStep) * row_stride_;
  }
};

// 16-byte cp.async straight into the swizzled stage; chunks outside the matrix are zero-filled
// (a chunk is wholly inside or outside: see Sm80OperandLayout::kAsync).
template <typename T, typename Layout, typename Tile, int kThreads>
struct AsyncTileLoader : TileWalk<T, Layout, Tile, kThreads, Sm80Facts::kChunkElems> {
  using Walk = TileWalk<T, Layout, Tile, kThreads, Sm80Facts::kChunkElems>;
  const T* base_;  // a valid address for the zero-filling copies (they read nothing)

  __device__ __forceinline__ AsyncTileLoader(const Sm80OperandView<T>& op, int64_t x0)
      : Walk(op, x0), base_(op.ptr) {}

  // Issues this thread's copies of the current k-tile into `stage`; k_limit = valid k in it.
  __device__ __forceinline__ void issue(char* stage, int k_limit) const {
    const int rows = this->rows_limit(k_limit);
    const bool col_ok = this->col_ < this->cols_limit(k_limit);
#pragma unroll
    for (int j = 0; j < Walk::kLoads; ++j) {
      const bool valid = col_ok && this->row(j) < rows;
      cp_async_zfill<Sm80Facts::kChunkBytes>(stage + Tile::offset(this->row(j), this->col_),
                                             valid ? this->src(j) : base_, valid);
    }
  }
  __device__ __forceinline__ void finish(char*) const {}  // cp.async writes the stage itself
};

// Element loads through both strides, two consecutive columns per load packed into one 32-bit
// register, stored to the stage one k-tile later (a whole k-tile of compute hides the latency).
template <typename T, typename Layout, typename Tile, int kThreads>
struct ScalarTileLoader : TileWalk<T, Layout, Tile, kThreads, Sm80Facts::kPackElems> {
  using Walk = TileWalk<T, Layout, Tile, kThreads, Sm80Facts::kPackElems>;
  static constexpr int kHalfBits = 16;  // the second element's shift in its register
  uint32_t staged_[Walk::kLoads];  // the k-tile in flight, two 16-bit elements per register

  using Walk::Walk;

  __device__ __forceinline__ void issue(char*, int k_limit) {
    const int rows = this->rows_limit(k_limit);
    const int cols = this->cols_limit(k_limit);
#pragma unroll
    for (int j = 0; j < Walk::kLoads; ++j) {
      const bool row_ok = this->row(j) < rows;
      const unsigned short* src = reinterpret_cast<const unsigned short*>(this->src(j));
      const uint32_t lo = row_ok && this->col_ < cols ? __ldg(src) : 0u;
      const uint32_t hi = row_ok && this->col_ + 1 < cols ? __ldg(src + this->col_stride_) : 0u;
      staged_[j] = lo | hi << kHalfBits;
    }
  }

  __device__ __forceinline__ void finish(char* stage) const {
#pragma unroll
    for (int j = 0; j < Walk::kLoads; ++j) {
      *reinterpret_cast<uint32_t*>(stage + Tile::offset(this->row(j), this->col_)) = staged_[j];
    }
  }
};

template <typename T, typename Layout, typename Tile, int kThreads>
using Sm80TileLoader =
    std::conditional_t<Layout::kAsync, AsyncTileLoader<T, Layout, Tile, kThreads>,
                       ScalarTileLoader<T, Layout, Tile, kThreads>>;

// ldmatrix.x4 (.trans when kTrans) from the shared address `addr` of this lane's row: r0..r3
// receive matrices 0..3 (lanes 8i..8i+7 address the rows of matrix i).
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1,
                                            uint32_t& r2, uint32_t& r3) {
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
  }
}

// Two floats rounded once to T and packed (lo at the lower address) for a 32-bit store.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// One warp's (kWarpM, kWarpN) tile of C in m16n8 accumulators and the fragments that feed it.
template <typename T, typename Config, typename TileA, typename TileB>
struct WarpMma {
  using F = Sm80Facts;
  static constexpr int kTilesM = Config::kMmaTilesM;
  static constexpr int kTilesN = Config::kMmaTilesN;
  static constexpr int kAccRegs = 4;  // fp32 accumulators per lane per m16n8 tile
  static constexpr int kBRegs = 2;    // 32-bit registers per lane of a k16n8 B fragment

  float rC[kTilesM][kTilesN][kAccRegs];                      // (kTilesM, kTilesN, 4)
  uint32_t rA[F::kFragBuffers][kTilesM][F::kLdsmMatrices];  // (buffers, kTilesM, 4)
  uint32_t rB[F::kFragBuffers][kTilesN][kBRegs];            // (buffers, kTilesN, 2)
  int warp_m0;  // the warp's first row in the block tile
  int warp_n0;  // and first column

  __device__ __forceinline__ WarpMma() {
    const int warp = static_cast<int>(threadIdx.x) / F::kWarpSize;
    warp_m0 = warp / Config::kWarpsN * Config::kWarpM;
    warp_n0 = warp % Config::kWarpsN * Config::kWarpN;
    a_base_ = ldsm_offset<TileA, true>(warp_m0, 0);
    b_base_ = ldsm_offset<TileB, false>(warp_n0, 0);
#pragma unroll
    for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) {
#pragma unroll
        for (int r = 0; r < kAccRegs; ++r) rC[i][j][r] = 0.0f;
      }
    }
  }

  // Byte offset in a stage of this lane's ldmatrix.x4 row for the (16 x, 16 k) block at (x, k).
  // Lane l addresses row l % 8 of matrix l / 8. For A the matrices go x first, (x lo, k lo),
  // (x hi, k lo), (x lo, k hi), (x hi, k hi): the mma's a0..a3. For B they go k first, so that
  // {b0, b1} of the n8 tile at x and of the one at x + 8 each land in a register pair, as the
  // mma takes them (no moves). With .trans (MN-major tiles, rows of k) every lane receives the
  // same elements as without it from a K-major tile.
  template <typename Tile, bool kXFirst>
  __device__ __forceinline__ static uint32_t ldsm_offset(int x, int k) {
    const int lane = static_cast<int>(threadIdx.x) % F::kWarpSize;
    const int matrix = lane / F::kLdsmRows;
    const int in_matrix = lane % F::kLdsmRows;
    const int x_half = (kXFirst ? matrix & 1 : matrix >> 1) * F::kLdsmRows;
    const int k_half = (kXFirst ? matrix >> 1 : matrix & 1) * F::kLdsmRows;
    return Tile::kKMajor ? Tile::offset_xk(x + x_half + in_matrix, k + k_half)
                         : Tile::offset_xk(x + x_half, k + k_half + in_matrix);
  }

  // Every other block (x + 16 b, 16 kk) of the warp is a step_xk from its block (x, 0): the
  // x steps are multiples of 16 rows (K-major) or of 16 columns below the warp tile's
  // power-of-two width (MN-major), the k steps multiples of 16 columns above the lane's k half
  // (K-major) or of 16 rows (MN-major).
  template <typename Tile, int kWarpX>
  static constexpr bool steps_valid() {
    return (kWarpX & (kWarpX - 1)) == 0 && 2 * F::kLdsmRows % Tile::kPeriodRows == 0;
  }
  static_assert(steps_valid<TileA, Config::kWarpM>() && steps_valid<TileB, Config::kWarpN>(),
                "ldmatrix addresses as steps from one swizzled base: power-of-two warp tiles and "
                "a swizzle period dividing 16 rows (rows of at least 64 bytes)");

  uint32_t a_base_;  // this lane's ldmatrix row offset in a stage of A for the warp's block 0
  uint32_t b_base_;  // and of B

  // Shared → registers: the fragments of depth kk of the stages at shared addresses sA, sB.
  __device__ __forceinline__ void load_fragments(uint32_t sA, uint32_t sB, int kk, int buf) {
    const int k = kk * F::kMmaK;
#pragma unroll
    for (int i = 0; i < kTilesM; ++i) {
      uint32_t(&a)[F::kLdsmMatrices] = rA[buf][i];
      ldmatrix_x4<!TileA::kKMajor>(sA + TileA::step_xk(a_base_, i * F::kMmaM, k), a[0], a[1],
                                   a[2], a[3]);
    }
#pragma unroll
    for (int j = 0; j < kTilesN; j += 2) {
      uint32_t(&b)[kBRegs] = rB[buf][j];
      uint32_t(&b_next)[kBRegs] = rB[buf][j + 1];
      ldmatrix_x4<!TileB::kKMajor>(sB + TileB::step_xk(b_base_, j * F::kMmaN, k), b[0], b[1],
                                   b_next[0], b_next[1]);
    }
  }

  // The warp tile's mma for one depth. Serpentine order over n: consecutive mma share an
  // operand register set.
  __device__ __forceinline__ void mma(int buf) {
#pragma unroll
    for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
      for (int jj = 0; jj < kTilesN; ++jj) {
        const int j = i % 2 == 0 ? jj : kTilesN - 1 - jj;
        mma_m16n8k16<T>(rC[i][j], rA[buf][i], rB[buf][j]);
      }
    }
  }

  // Accumulators (+ bias[n]) → C, rounded once to T; edges masked. Lane l holds columns
  // 2 (l % 4) + {0, 1} of rows l / 4 and l / 4 + 8 of each m16n8 tile.
  __device__ __forceinline__ void store(const GemmParams& p, int64_t m0, int64_t n0) const {
    constexpr int kLanesPerRow = 4;  // lanes sharing an accumulator row
    constexpr int kRowHalf = 8;      // rows between a lane's accumulator pairs
    const int lane = static_cast<int>(threadIdx.x) % F::kWarpSize;
    const int64_t row0 = m0 + warp_m0 + lane / kLanesPerRow;
    const int64_t col0 = n0 + warp_n0 + lane % kLanesPerRow * F::kPackElems;
    T* const c = static_cast<T*>(p.c);
    // A pair of columns is one aligned 32-bit store when rows are contiguous and every row
    // starts 4-byte aligned (pairs start at even columns).
    const bool pair_store = p.c_stride_n == 1 && p.c_stride_m % 2 == 0 &&
                            reinterpret_cast<uintptr_t>(c) % sizeof(uint32_t) == 0;

    float bias[kTilesN][F::kPackElems];  // (kTilesN, 2): this lane's columns
    const T* const bias_ptr = static_cast<const T*>(p.bias);
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
#pragma unroll
      for (int e = 0; e < F::kPackElems; ++e) {
        const int64_t n = col0 + j * F::kMmaN + e;
        bias[j][e] = bias_ptr != nullptr && n < p.N ? to_acc<float>(bias_ptr[n * p.bias_stride])
                                                    : 0.0f;
      }
    }

#pragma unroll
    for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
      for (int h = 0; h < kAccRegs / F::kPackElems; ++h) {
        const int64_t m = row0 + i * F::kMmaM + h * kRowHalf;
        if (m >= p.M) continue;
        T* const row = c + m * p.c_stride_m;
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) {
          const int64_t n = col0 + j * F::kMmaN;
          const float lo = rC[i][j][F::kPackElems * h] + bias[j][0];
          const float hi = rC[i][j][F::kPackElems * h + 1] + bias[j][1];
          if (pair_store && n + 1 < p.N) {
            *reinterpret_cast<uint32_t*>(row + n) = pack_pair<T>(lo, hi);
          } else {
            if (n < p.N) row[n * p.c_stride_n] = from_acc<T>(lo);
            if (n + 1 < p.N) row[(n + 1) * p.c_stride_n] = from_acc<T>(hi);
          }
        }
      }
    }
  }
};

// K-major tiles are read with ldmatrix, MN-major ones with ldmatrix.trans, which hands every lane
// the same fragment. Operands that cannot take 16-byte cp.async (odd leading dimension, unaligned
// base, other strides) are loaded element by element through registers into the same swizzled
// layout. One rounding to the output type, after the bias; no atomics, no split-K: deterministic.
// One block per (kBlockM, kBlockN) tile of C (gridDim.x, then y; grouped for L2 reuse) and per
// batch element (blockIdx.z). A k-tile's stage is written kStages - 1 k-tiles ahead of its reads:
// cp.async operands copy straight in, register-staged operands load at one k-tile and store at
// the next. One barrier per k-tile.
template <typename T, typename Config, typename LayoutA, typename LayoutB>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSM)
gemm_mma_sm80_kernel(GemmParams p) {
  constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN, kBlockK = Config::kBlockK;
  constexpr int kStages = Config::kStages, kKSteps = Config::kKSteps;
  using TileA = SwizzledTile<LayoutA::kMajor, kBlockM, kBlockK>;
  using TileB = SwizzledTile<LayoutB::kMajor, kBlockN, kBlockK>;
  using LoaderA = Sm80TileLoader<T, LayoutA, TileA, Config::kThreads>;
  using LoaderB = Sm80TileLoader<T, LayoutB, TileB, Config::kThreads>;
  static_assert(TileA::kBytes == Config::kStageBytesA && TileB::kBytes == Config::kStageBytesB,
                "stage sizes");

  p = batch_element(p, blockIdx.z);
  int64_t m0, n0;
  if (!grouped_block_origin<Config>(p, &m0, &n0)) return;  // whole block, before any barrier

  // 128-byte aligned: the swizzle assumes chunk 0 of a stage starts a 128-byte bank line.
  extern __shared__ __align__(128) char mma_sm80_smem[];
  char* const sA = mma_sm80_smem;                           // (kStages, TileA::kBytes)
  char* const sB = mma_sm80_smem + kStages * TileA::kBytes;  // (kStages, TileB::kBytes)
  const uint32_t sA_shared = static_cast<uint32_t>(__cvta_generic_to_shared(sA));
  const uint32_t sB_shared = static_cast<uint32_t>(__cvta_generic_to_shared(sB));

  const Sm80OperandView<T> view_a{static_cast<const T*>(p.a), p.M, p.a_stride_m, p.a_stride_k};
  const Sm80OperandView<T> view_b{static_cast<const T*>(p.b), p.N, p.b_stride_n, p.b_stride_k};
  LoaderA load_a(view_a, m0);
  LoaderB load_b(view_b, n0);
  WarpMma<T, Config, TileA, TileB> warp;

  const int64_t k_tiles = ceil_div(p.K, kBlockK);
  // Issues k-tile `tile` into its stage, or nothing past the last one; either way one group is
  // committed, so that the group count, and with it cp_async_wait's meaning, is the same for
  // every k-tile. Tiles are issued in order (the loaders advance by one k-tile each).
  const auto issue = [&](int64_t tile) {
    if (tile < k_tiles) {
      const int stage = static_cast<int>(tile % kStages);
      const int k_limit = k_tile_limit<kBlockK>(p.K, tile * kBlockK);
      load_a.issue(sA + stage * TileA::kBytes, k_limit);
      load_b.issue(sB + stage * TileB::kBytes, k_limit);
      load_a.advance();
      load_b.advance();
    }
    cp_async_commit();
  };
  // Register-staged operands: the loads of k-tile `tile` → its stage (nothing for cp.async).
  const auto finish = [&](int64_t tile) {
    if (tile < k_tiles) {
      const int stage = static_cast<int>(tile % kStages);
      load_a.finish(sA + stage * TileA::kBytes);
      load_b.finish(sB + stage * TileB::kBytes);
    }
  };

  if (k_tiles > 0) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      issue(s);
      if (s < kStages - 2) finish(s);  // k-tile kStages - 2 is finished in the first k-tile
    }
    cp_async_wait<kStages - 2>();  // k-tile 0 has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's, and the register-staged stores
    warp.load_fragments(sA_shared, sB_shared, 0, 0);

    for (int64_t t = 0; t < k_tiles; ++t) {
      const int read_stage = static_cast<int>(t % kStages);
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        if (kk == 0) {
          // k-tile t + kStages - 2 goes to the stage of k-tile t - 2 and t + kStages - 1 to that
          // of t - 1: their last fragment loads came before the barrier of k-tile t - 1, which
          // every thread has passed.
          finish(t + kStages - 2);
          issue(t + kStages - 1);
        }
        if (kk + 1 < kKSteps) {
          warp.load_fragments(sA_shared + read_stage * TileA::kBytes,
                              sB_shared + read_stage * TileB::kBytes, kk + 1,
                              (kk + 1) % Sm80Facts::kFragBuffers);
        } else if (t + 1 < k_tiles) {
          const int next_stage = static_cast<int>((t + 1) % kStages);
          warp.load_fragments(sA_shared + next_stage * TileA::kBytes,
                              sB_shared + next_stage * TileB::kBytes, 0, 0);
        }
        warp.mma(kk % Sm80Facts::kFragBuffers);
        if (kk == kKSteps - 2 && t + 1 < k_tiles) {
          // Groups committed: kStages - 1 + t + 1; with at most kStages - 2 pending, k-tile t + 1
          // has landed (this thread's copies), and after the barrier everyone's. Placed after
          // this depth's mma so that the tensor cores stay busy while warps gather; the last
          // depth's fragments were loaded before it.
          cp_async_wait<kStages - 2>();
          __syncthreads();
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)

  warp.store(p, m0, n0);
}

// Launches the kernel for one configuration, element type and operand layouts: dynamic shared
// memory opt-in, tiles on gridDim.x (y past 2^31 - 1), the batch on gridDim.z in chunks.
template <typename T, typename Config, typename LayoutA, typename LayoutB>
LaunchStatus run_mma_sm80(const GemmParams& p, cudaStream_t stream) {
  const auto kernel = gemm_mma_sm80_kernel<T, Config, LayoutA, LayoutB>;
  static PerDeviceValue allowed;
  LaunchStatus status = allow_shared_memory_once(
      allowed, kernel, Config::kSmemBytes,
      "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) of gemm_mma_sm80_kernel");
  if (!status.ok()) return status;
  dim3 grid;
  if (!grid_for_block_tiles<Config>(p, &grid)) return refuse("grid: more tiles than a grid holds");
  return for_each_batch_chunk(p, kMaxGridZ, [&](const GemmParams& chunk) {
    grid.z = static_cast<unsigned>(chunk.batch);
    kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(chunk);
    return check_launch("gemm_mma_sm80_kernel");
  });
}

}  // namespace torch_gemm
