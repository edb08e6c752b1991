// Rung 7, wgmma_sm90: Hopper's warpgroup MMA fed by the tensor-memory accelerator, for bf16/fp16
// and for fp32 as tf32. Measured on an H200 (record, 3fb3caa): 710 TFLOP/s at 4096³ bf16 NN
// (torch.mm 701 in the same run, 1.013), 8192×4096×4096 1.012, 8192³ 1.050, 8192×12288×4096
// 1.014 (stream-K), 4095³ 3.14, 1000³ 1.003 (64×128 tiles), 512×4096×4096 0.90 (split K); tf32
// NN 4096³ 1.011, 8192³ 1.002.
//
// Over mma_sm80: one producer warp issues TMA copies of whole tiles into 128-byte-swizzled shared
// memory, completing on mbarriers, so no thread computes an address or a bounds test in the main
// loop (TMA zero-fills outside the matrix); two consumer warpgroups (one, on 64×256 tiles, for
// shapes with few tiles, or on 64×128 tiles for fewer still) each issue one wgmma.m64n256 (or
// m64n128) per 32 bytes of K, reading both operands straight from shared memory (tf32: A through
// registers, to be rounded to nearest), with the accumulators (128 floats a thread, 64 on 64×128
// tiles) in registers that setmaxnreg moves from producer to consumers. Pairs of blocks form a
// cluster and share B through TMA multicast. The grid is persistent (one block per SM walking
// the tiles in L2-friendly groups), and C leaves through shared memory by TMA stores that run on
// while the consumers start the next tile (16-bit C on 128×256 tiles is packed into registers
// first, and its stores are issued one box every second k-tile of the next tile). A bias is
// staged per tile by a producer warp and the accumulators start from it. Where the tiles are
// too few for the SMs and K is long, a pair of blocks splits each tile's K and adds the partial
// sums (reduce_split). Where the turns leave a last round partly idle, that round's k-tiles are
// dealt to every cluster (stream-K, TileWalk), partial sums passing through the workspace.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: the driver is reached through the runtime)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "kernels/numeric.cuh"
#include "kernels/row_sum.cuh"

// wgmma and setmaxnreg exist only in the sm_90a target; every other target compiles an empty
// kernel body, which the launcher never runs (it checks for sm_90 and TORCH_GEMM_WITH_SM90A).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TORCH_GEMM_SM90A_DEVICE 1
#endif

namespace torch_gemm {

// The tile and pipeline for operand type T (bf16/fp16, or fp32 read as tf32), kConsumers
// consumer warpgroups (2: 128-row tiles; 1: 64-row tiles, twice as many, for shapes whose 128-row
// tiles would leave most SMs idle) and kMmaN columns (256; or 128, 16-bit on 64-row tiles only,
// twice as many tiles again: see choose_shape in the launcher). Every size is in bytes of 128-byte
// swizzled rows, so the 16-bit and tf32 kernels share one shape: a k-tile is one 128-byte row of K
// (64 or 32 elements), a wgmma reads 32 bytes of it.
template <typename T, int kConsumers_ = 2, int kMmaN_ = 256>
struct WgmmaConfig {
  static constexpr bool kTf32 = std::is_same_v<T, float>;
  static constexpr int kElementBytes = sizeof(T);
  static constexpr int kSwizzleBytes = 128;        // TMA and wgmma's widest swizzle: conflict-free
  static constexpr int kBlockK = kSwizzleBytes / kElementBytes;  // 64 (16-bit) or 32 (tf32)
  static constexpr int kMmaM = 64;                 // wgmma's M per warpgroup
  static constexpr int kMmaN = kMmaN_;             // 256, wgmma's largest: B read once per k-step
  static constexpr int kMmaK = 32 / kElementBytes; // K per wgmma: 16 (16-bit) or 8 (tf32)
  static constexpr int kAccumulators = kMmaM * kMmaN / 128;  // fp32 a thread: 128 (or 64)
  static constexpr int kConsumers = kConsumers_;   // consumer warpgroups, 64 rows of C each
  static constexpr int kBlockM = kConsumers * kMmaM;  // 128 (or 64) rows of C per tile
  static constexpr int kBlockN = kMmaN;               // 256 (or 128) columns of C per tile
  static_assert(kConsumers == 1 || kConsumers == 2, "one or two consumer warpgroups");
  static_assert(kMmaN == 256 || (kMmaN == 128 && kConsumers == 1 && !kTf32),
                "128-column tiles: 16-bit, one consumer");
  static_assert(kBlockM == (kConsumers == 2 ? kWgmmaBlockM : kWgmmaNarrowBlockM) &&
                    kBlockN == (kMmaN == 256 ? kWgmmaBlockN : kWgmmaSmallBlockN),
                "launch.h tells auto the tiles");
  // k-tiles in flight, 48 KB each (40 KB with one consumer): 4 leave room for two 8 KB epilogue
  // boxes per consumer, or 4–8 with one (3 stages with a whole-tile ring of 4 boxes measured no
  // faster, benchmarks/NOTES.md). 64×128 tiles take 24 KB a k-tile: 8 in flight, on shapes whose
  // loop waits on L2.
  static constexpr int kStages = kMmaN == 256 ? 4 : 8;
  // The first tile's first k-tiles are copied from the kernel's prologue, ahead of the producer
  // loop (see the kernel): kEarlyFirst of them before the start barrier, the rest of
  // kEarlyStages right after it, multicast on one-consumer tiles (on two-consumer tiles, whose
  // prologue delays the consumers' setmaxnreg, each block copies all of B for them). Measured
  // best of 0-2 before and 0-8 in all, benchmarks/NOTES.md (session 14).
  static constexpr int kEarlyFirst = 1;
  static constexpr int kEarlyStages = kConsumers == 1 ? 4 : 2;
  static constexpr bool kEarlyMulticast = kConsumers == 1;
  static constexpr int kWarpgroupThreads = 128;
  static constexpr int kThreads = (kConsumers + 1) * kWarpgroupThreads;  // + the producer's
  // setmaxnreg: the producer needs a handful of registers, each consumer 128 accumulators plus
  // addressing; 128·40 + 256·232 = 64512 of the SM's 65536. With one consumer the kernel is
  // compiled at 232 registers for all 256 threads (59392), so the consumer's increase is a no-op.
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  // Tile rows per rasterization group (L2 reuse). The 64–66 pairs of 128×256 tiles resident at
  // once then cover 16 tile rows × ~8 tile columns, ~2048 rows of A and ~2048 columns of B, which
  // of the shapes a wave can take reads the fewest operand bytes (8: ~1024 × 4224, ~25% more);
  // measured +0.5-0.7% at 4096³ and 8192×4096×4096 against 8 (benchmarks/NOTES.md, session 13).
  static constexpr int kGroupM = 16;
  // An MN-major operand (16-bit, or tf32's A, which passes through registers: the tf32 wgmma
  // reads B K-major only) is copied as boxes of (kBlockK rows of K) × (kMNBox along M or N): one
  // 128-byte swizzled row of M or N.
  static constexpr int kMNBox = kSwizzleBytes / kElementBytes;
  static constexpr int kSwizzleAtomBytes = 8 * kSwizzleBytes;  // 8 rows: the swizzle's period
  static constexpr int kStageBytesA = kBlockM * kBlockK * kElementBytes;  // 16 KB (8: 1 consumer)
  static constexpr int kStageBytesB = kBlockN * kBlockK * kElementBytes;  // 32 KB (or 16)
  static constexpr int kMNBoxBytes = kMNBox * kBlockK * kElementBytes;    // 8 KB
  // The epilogue: C leaves through shared memory in boxes of 64 rows × 128 bytes, swizzled like
  // the operands (so the fragment stores are conflict-free), each written out by one TMA store
  // that runs while the consumers go on to the next tile. Each consumer cycles through
  // kEpilogueBoxes such buffers: as many as fit beside the stages, at most a whole 64×256 tile.
  static constexpr int kBoxCols = kSwizzleBytes / kElementBytes;  // 64 (16-bit) or 32 (fp32)
  static constexpr int kBoxesPerTile = kBlockN / kBoxCols;        // per consumer: 4 or 8 (2)
  static constexpr int kBoxBytes = kMmaM * kSwizzleBytes;         // 8 KB
  static constexpr int kSmemLimit = 227 * 1024;  // sm_90's dynamic shared memory per block
  static constexpr int kPipelineBytes = kStages * (kStageBytesA + kStageBytesB);
  // full/empty per stage, and the bias row's full/empty.
  static constexpr int kBarrierBytes = (2 * kStages + 2) * 8;
  // The tile's bias as fp32, staged in shared memory by a producer warp while the previous tile
  // runs, so that each consumer starts its accumulators at it: the bias then costs no barrier
  // between the consumers and no add at the packing (benchmarks/NOTES.md, session 9). One row
  // serves every consumer: their tiles share the columns.
  static constexpr int kBiasBytes = kBlockN * static_cast<int>(sizeof(float));
  static constexpr int kFreeBoxes =
      (kSmemLimit - kPipelineBytes - kBarrierBytes - kBiasBytes - kSwizzleAtomBytes) /
      (kConsumers * kBoxBytes);
  static constexpr int kEpilogueBoxes = kFreeBoxes < kBoxesPerTile ? kFreeBoxes : kBoxesPerTile;
  // Stages, then the epilogue boxes (each 1024-byte aligned, the swizzle atom), then the
  // 2·kStages + 2 mbarriers, then the bias row; plus slack to align the dynamic shared memory base
  // up to 1024.
  static constexpr int kEpilogueBytes = kConsumers * kEpilogueBoxes * kBoxBytes;
  static constexpr int kSmemBytes =
      kPipelineBytes + kEpilogueBytes + kBarrierBytes + kBiasBytes + kSwizzleAtomBytes;

  static_assert(kEpilogueBoxes >= 1, "the stages leave room for one epilogue box per consumer");
  static_assert(kBlockN % 32 == 0, "the bias warp stages the row a whole number of columns a lane");
  static_assert(kSmemBytes <= kSmemLimit, "fits sm_90's shared memory");
  static_assert(kBlockM % kMNBox == 0 && kBlockN % kMNBox == 0,
                "MN-major tiles are whole 64-element boxes");
  static_assert(kBlockK % kMmaK == 0, "a k-tile is whole wgmma steps");
  static_assert(kStageBytesA % kSwizzleAtomBytes == 0 && kStageBytesB % kSwizzleAtomBytes == 0 &&
                    kBoxBytes % kSwizzleAtomBytes == 0,
                "every stage and box starts on a swizzle atom");
  static_assert(kProducerRegs * kWarpgroupThreads + kConsumerRegs * kConsumers * kWarpgroupThreads
                    <= 65536, "setmaxnreg cannot hand out more registers than the SM has");
};

// What the kernel needs besides the two tensor maps: the output, the bias, the tile walk.
struct WgmmaParams {
  int M, N, K, batch;
  int tiles_m, tiles_n;
  void* c;
  int64_t c_stride_m, c_stride_n, c_stride_batch;
  const void* bias;  // (N), or null
  int64_t bias_stride;
  bool tma_store;    // C is TMA-addressable (unit column stride, 16-byte aligned rows): the
                     // epilogue goes through shared memory; else straight from registers
  bool c_transposed; // tf32 only: the launcher runs Cᵀ = Bᵀ·Aᵀ and map_c is the caller's C, whose
                     // rows are this product's columns: the boxes are filled transposed (their
                     // rounds whole pairs of boxes: store_round's static_assert)
  // mm_tiled_row_sum's slice sums of A, taken by the producer warpgroup's idle warps, tile
  // column j summing its rows over slice j; partials null where they are not this kernel's.
  RowSumView row_sum;
  // Stream-K (16-bit 128×256 tiles, unsplit: kStreamK): the walk's last sk_turns turns are not
  // dealt out whole but as k-tiles, evenly over every cluster (TileWalk), so that no cluster idles
  // through a last partial turn; 0: every turn whole. A cluster that computes a tile's k-tiles
  // but not its last ones leaves its sums in sk_partials, block b's consumer w at
  // (b·kConsumers + w) · kAccumulators · 128 floats, and sets sk_flags[b·kConsumers + w] to 1
  // (the launcher zeroes the flags); the cluster with the tile's last k-tiles adds them.
  int sk_turns = 0;
  float* sk_partials = nullptr;
  int* sk_flags = nullptr;
};

// One piece of a cluster's walk over the tiles: a turn (the tile of each block of the cluster)
// and which of its k-tiles the cluster computes.
struct WorkUnit {
  int turn = 0, k_begin = 0, k_end = 0;
  bool partial = false;       // stream-K: not the tile's last k-tiles, its sums go to sk_partials
  int contributors_from = 0;  // stream-K: clusters contributors_from .. this one - 1 left partial
                              // sums of this tile to add (none where it is this cluster)
};

// A cluster's walk: the whole turns cluster, cluster + clusters, ... before the last sk_turns
// (each over k-tiles [k_begin, k_end): all, or the block's split-K slice); then its share of the
// last sk_turns turns' k-tiles, numbered tile by tile (U of them), cluster c taking
// [c·U/clusters, (c+1)·U/clusters). That share is walked from its last tile down, so that the
// piece without its tile's last k-tiles (partial, at most one: the share's top) comes first and
// the piece with them (which adds the other clusters' partials) last: every partial a cluster
// waits for is its contributor's first piece, and none waits for a cluster that waits. The
// launcher keeps U·clusters within int.
class TileWalk {
 public:
  __device__ __forceinline__ TileWalk(int cluster, int clusters, int turns, int sk_turns,
                                      int k_tiles, int k_begin, int k_end)
      : cluster_(cluster), clusters_(clusters), turn_(cluster), whole_end_(turns - sk_turns),
        k_tiles_(k_tiles), k_begin_(k_begin), k_end_(k_end),
        units_(sk_turns * k_tiles), lo_(cluster * units_ / clusters),
        hi_((cluster + 1) * units_ / clusters) {}

  __device__ __forceinline__ bool next(WorkUnit* u) {
    if (turn_ < whole_end_) {
      u->turn = turn_, u->k_begin = k_begin_, u->k_end = k_end_;
      u->partial = false, u->contributors_from = cluster_;
      turn_ += clusters_;
      return true;
    }
    if (hi_ <= lo_) return false;
    const int tile = (hi_ - 1) / k_tiles_;
    const int begin = tile * k_tiles_;
    const int from = lo_ > begin ? lo_ : begin;
    u->turn = whole_end_ + tile, u->k_begin = from - begin, u->k_end = hi_ - begin;
    u->partial = u->k_end < k_tiles_;
    // The cluster whose share holds k-tile `begin`: the largest c with c·U/clusters <= begin.
    u->contributors_from = from > begin ? ((begin + 1) * clusters_ - 1) / units_ : cluster_;
    hi_ = from;
    return true;
  }

 private:
  int cluster_, clusters_, turn_, whole_end_, k_tiles_, k_begin_, k_end_, units_, lo_, hi_;
};

namespace sm90 {

// The PTX helpers exist only where the kernel body does (sm_90a device compilation).
#ifdef TORCH_GEMM_SM90A_DEVICE

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// ---- mbarriers: a stage is full when the TMA copies' bytes have landed (expect_tx + complete_tx),
// empty when every consumer warpgroup has arrived after its last wgmma reading it.

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}

// Makes this thread's barrier initializations visible to the TMA unit (the async proxy) and to
// the cluster's other blocks.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Blocks until the phase of parity `parity` has completed. A fresh barrier is in phase 0, so
// waiting for parity 1 returns at once: the producer's first pass over the empty stages.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// The address of the same shared-memory offset in CTA `rank` of this block's cluster.
__device__ __forceinline__ uint32_t cluster_address(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}

// Arrives on the barrier at the same shared-memory offset in CTA `rank` of this block's cluster.
// Default (CTA-scope) semantics: what the arrival orders, this warpgroup's wgmma reads of the
// stage, is already complete (wgmma.wait_group), and a .release.cluster arrival compiles to a
// MEMBAR.ALL.GPU before it, which stalled every k-tile (422 against 674 TFLOP/s at 4096³).
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t* bar, uint32_t rank) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(
                   cluster_address(smem_u32(bar), rank))
               : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// Every thread of every block of the cluster (reduce_split's exchange): the release orders this
// thread's earlier stores, at a price: it compiles to MEMBAR.ALL.GPU.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

// The same arrival, ordering nothing: where what the peers need ordered is already released (the
// barriers' initialization, by fence.mbarrier_init). At a block's start the release form cost
// ~900 cycles (its MEMBAR.ALL.GPU), ~7% of a 1024³ block (benchmarks/NOTES.md, session 12).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// 16 bytes into a peer's shared memory (an address from cluster_address).
__device__ __forceinline__ void store_cluster_v4(uint32_t remote, float x, float y, float z,
                                                 float w) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(remote), "f"(x), "f"(y),
               "f"(z), "f"(w)
               : "memory");
}

// ---- TMA: one box of a 3-D tensor map (x or k innermost, then the other, then the batch) into
// shared memory, its bytes counted on `bar`.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                         int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// The same box delivered to the same shared-memory offset, and counted on the same barrier
// offset, in every block of the cluster named by `mask`.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                   uint16_t mask, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "h"(mask), "r"(c0), "r"(c1),
      "r"(c2)
      : "memory");
}

// ---- TMA stores of C: one box from shared memory into the 3-D map (n, m, batch), clipped at the
// matrix edges; grouped per thread, so only the thread that issued them waits on them.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1,
                                          int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most kPending of this thread's store groups still read shared memory.
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Fetches a tensor map's descriptor (a __grid_constant__ parameter) ahead of its first copy.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Makes this thread's ordinary shared-memory stores visible to the TMA unit (the async proxy).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// A barrier among the 128 threads of one consumer warpgroup (ids 1, 2; 0 is __syncthreads).
__device__ __forceinline__ void warpgroup_sync(int consumer) {
  asm volatile("bar.sync %0, 128;" ::"r"(consumer + 1) : "memory");
}

// Four 8×8 16-bit matrices from the accumulator layout (lane l: row l/4, columns 2(l%4) and the
// next) to the rows whose addresses lanes 8i..8i+7 give for matrix i.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// ---- wgmma. A shared-memory matrix descriptor: start address, leading and stride byte offsets
// (16-byte units) and the 128-byte swizzle mode. For a K-major tile (rows of 64 K) the stride
// offset is the 1024 bytes between groups of 8 rows and the leading one is unused; for an MN-major
// tile (rows of 64 M or N, one per k) the stride offset is the 1024 bytes between groups of 8 k
// and the leading one the distance between 64-element boxes along M or N.
// Split in two words: the high one (stride offset, swizzle) is a constant of the tile's layout;
// the low one (start address, leading offset) moves with the tile, by the tile's offset in 16-byte
// units, which stays within the 14-bit address field (shared memory ends below 2^18 bytes).
__host__ __device__ constexpr uint64_t smem_descriptor_high(uint32_t stride_bytes) {
  constexpr uint64_t kSwizzle128B = 1;
  return static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | kSwizzle128B << 62;
}

__device__ __forceinline__ uint32_t smem_descriptor_low(const void* tile, uint32_t leading_bytes) {
  constexpr uint32_t kField = 0x3FFF;  // 14-bit fields of 16-byte units
  return ((smem_u32(tile) >> 4) & kField) | ((leading_bytes >> 4) & kField) << 16;
}

__device__ __forceinline__ uint64_t smem_descriptor(const void* tile, uint32_t leading_bytes,
                                                    uint32_t stride_bytes) {
  return smem_descriptor_high(stride_bytes) | smem_descriptor_low(tile, leading_bytes);
}

// Orders this warpgroup's register accesses before the wgmmas that follow (required before the
// first wgmma and after the accumulators were touched by other instructions).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// Waits until at most kPending committed wgmma groups of this warpgroup are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accesses to the accumulators across the asynchronous wgmmas,
// which it cannot see read and write them.
template <int kCount>
__device__ __forceinline__ void fence_accumulators(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// A wgmma's accumulators as asm operands: d[0..63] are %0..%63 (m64n128), d[0..127] %0..%127
// (m64n256); its other inputs follow them.
#define TORCH_GEMM_ACC_REGS_LOW "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TORCH_GEMM_ACC_REGS_HIGH "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define TORCH_GEMM_ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define TORCH_GEMM_ACC64(i) TORCH_GEMM_ACC8(i), TORCH_GEMM_ACC8(i + 8), TORCH_GEMM_ACC8(i + 16), TORCH_GEMM_ACC8(i + 24), TORCH_GEMM_ACC8(i + 32), TORCH_GEMM_ACC8(i + 40), TORCH_GEMM_ACC8(i + 48), TORCH_GEMM_ACC8(i + 56)

// One wgmma of SHAPE_TYPES ("m64n256k16.f32.bf16.bf16"): ACC_REGS lists the accumulators' operands
// and ACC their constraints; ACCUMULATE names the input holding `accumulate` and OPERANDS is the
// text after the accumulators (A's descriptor or registers, B's descriptor, the scales and, for
// 16-bit operands, the transposes); __VA_ARGS__ are those inputs.
#define TORCH_GEMM_WGMMA(SHAPE_TYPES, ACC_REGS, ACC, ACCUMULATE, OPERANDS, ...) \
  asm volatile("{\n"                                                                       \
               ".reg .pred accumulate;\n"                                                   \
               "setp.ne.b32 accumulate, " ACCUMULATE ", 0;\n"                               \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" ACC_REGS "}, " OPERANDS ";\n" \
               "}\n"                                                                       \
               : ACC                                                                        \
               : __VA_ARGS__)
#define TORCH_GEMM_ACC_REGS_256 TORCH_GEMM_ACC_REGS_LOW ", " TORCH_GEMM_ACC_REGS_HIGH
#define TORCH_GEMM_ACC_256 TORCH_GEMM_ACC64(0), TORCH_GEMM_ACC64(64)

// D (64×kMmaN, fp32, in registers: kMmaN / 2 a thread) = A (64×kMmaK, smem) · B (kMmaK×kMmaN,
// smem) + (accumulate ? D : 0) for one warpgroup, asynchronously (wgmma_commit / wgmma_wait), kMmaN
// 256 or 128 by the accumulators' count. kTransA/kTransB: 1 where the operand's shared tile is
// MN-major (wgmma transposes it on read; 16-bit only).
template <typename T, int kTransA, int kTransB, int kCount>
__device__ __forceinline__ void wgmma_ss(float (&d)[kCount], uint64_t desc_a, uint64_t desc_b,
                                         int accumulate) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "16-bit operands");
  static_assert(kCount == 128 || kCount == 64, "m64n256 or m64n128");
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kCount == 128 && kBf16) {
    TORCH_GEMM_WGMMA("m64n256k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_256, TORCH_GEMM_ACC_256,
                     "%132", "%128, %129, accumulate, 1, 1, %130, %131", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 128) {
    TORCH_GEMM_WGMMA("m64n256k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_256, TORCH_GEMM_ACC_256,
                     "%132", "%128, %129, accumulate, 1, 1, %130, %131", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kBf16) {
    TORCH_GEMM_WGMMA("m64n128k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_LOW, TORCH_GEMM_ACC64(0),
                     "%68", "%64, %65, accumulate, 1, 1, %66, %67", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else {
    TORCH_GEMM_WGMMA("m64n128k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_LOW, TORCH_GEMM_ACC64(0),
                     "%68", "%64, %65, accumulate, 1, 1, %66, %67", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  }
}

// The tf32 form, A from registers: D (64×256) = A (64×8, this warpgroup's fragment a, already
// rounded to tf32) · B (8×256, K-major smem) + (accumulate ? D : 0). Thread t of warp w holds
// A's rows 16w + t/4 (a[0], a[2]) and 16w + t/4 + 8 (a[1], a[3]), columns t%4 (a[0], a[1]) and
// t%4 + 4 (a[2], a[3]): mma.m16n8k8's A fragment, one per warp.
__device__ __forceinline__ void wgmma_m64n256k8_tf32(float (&d)[128], const uint32_t (&a)[4],
                                                     uint64_t desc_b, int accumulate) {
  TORCH_GEMM_WGMMA("m64n256k8.f32.tf32.tf32", TORCH_GEMM_ACC_REGS_256, TORCH_GEMM_ACC_256, "%133",
                   "{%128, %129, %130, %131}, %132, accumulate, 1, 1", "r"(a[0]), "r"(a[1]),
                   "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

#undef TORCH_GEMM_ACC_256
#undef TORCH_GEMM_ACC_REGS_256
#undef TORCH_GEMM_WGMMA
#undef TORCH_GEMM_ACC64
#undef TORCH_GEMM_ACC8
#undef TORCH_GEMM_ACC_REGS_HIGH
#undef TORCH_GEMM_ACC_REGS_LOW

#endif  // TORCH_GEMM_SM90A_DEVICE

// (z, m0, n0) of this block's tile in turn t of the persistent walk. Clusters of kClusterM
// blocks take kClusterM vertically adjacent tiles (one tile column: they share B), rank r the
// r-th; the cluster-tiles are walked batch element first, then in L2-friendly groups.
template <typename Config, int kClusterM>
__device__ __forceinline__ void tile_origin(const WgmmaParams& p, int t, uint32_t rank, int* z,
                                            int* m0, int* n0) {
  const int cluster_rows = (p.tiles_m + kClusterM - 1) / kClusterM;
  const int cluster_tiles = cluster_rows * p.tiles_n;
  *z = t / cluster_tiles;
  int row, col;  // int: the launcher checked that the tiles fit
  grouped_tile<Config::kGroupM / kClusterM>(t % cluster_tiles, cluster_rows, p.tiles_n, &row, &col);
  *m0 = (row * kClusterM + static_cast<int>(rank)) * Config::kBlockM;
  *n0 = col * Config::kBlockN;
}

#ifdef TORCH_GEMM_SM90A_DEVICE

// The accumulator layout of wgmma: warp w of the warpgroup holds rows 16w..16w+15; for each 8
// columns j, lane l holds rows l/4 and l/4 + 8, columns 8j + 2(l%4) and the one after:
// d[4j], d[4j+1] in the upper row, d[4j+2], d[4j+3] in the lower.

// Which of the consumer's 64 rows of C this thread's accumulators of rows l/4 + 8·half hold. Where
// tf32's A fragments come from an MN-major tile (kPermuted), each warp loads rows in another order:
// in wgmma's order the lanes of one fragment load read 2 chunks of 4 rows' 128-byte lines, which
// the swizzle puts on 16 banks (2-way conflicts on every load); rows 16 apart (chunks c and c + 4)
// go to 32. The products of the permuted rows land in the same registers, so the epilogue stores
// row accumulator_row(...) where wgmma's layout says row 16w + l/4 + 8·half. Both orders keep
// warps 0–1 in rows 0–31 and warps 2–3 in rows 32–63.
template <bool kPermuted>
__device__ __forceinline__ int accumulator_row(int warp, int lane, int half) {
  if constexpr (kPermuted) {
    const int g = lane / 4;
    return 32 * (warp / 2) + 4 * (2 * (warp % 2) + half) + g % 4 + 16 * (g / 4);
  } else {
    return warp * 16 + half * 8 + lane / 4;
  }
}

// Which half (wgmma's rows l/4, or l/4 + 8) a lane stores in step `step` (0, 1) of a box fill.
// With permuted rows a warp's rows 16 apart share a row of the swizzle's period, so lanes 16–31
// take the other half: each store's rows then cover all 8 rows of the period, no bank conflicts
// (in step with each other, 2-way conflicts).
template <bool kPermuted>
__device__ __forceinline__ int fill_half(int step, int lane) {
  return kPermuted ? step ^ (lane / 16) : step;
}

// d[i + 2·half], half 0 or 1, chosen by a select: indexing the registers at run time would put
// them in local memory.
__device__ __forceinline__ float pick_half(const float (&d)[128], int i, int half) {
  return half ? d[i + 2] : d[i];
}

// Two fp32 values rounded to T and packed into 32 bits, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  using Pair = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>;
  Pair pair;
  pair.x = from_acc<T>(lo);
  pair.y = from_acc<T>(hi);
  return *reinterpret_cast<uint32_t*>(&pair);
}

// Writes one consumer's 64×kMmaN accumulators to C straight from registers, edges masked: the
// path for a C that TMA cannot address. With kSplitK > 1, only the columns block `split` owns
// (reduce_split's).
template <typename Config, typename T, bool kPermuted, int kSplitK = 1>
__device__ __forceinline__ void store_accumulators(const WgmmaParams& p,
                                                   const float (&d)[Config::kAccumulators], int z,
                                                   int row0, int n0, int split = 0) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  T* c = static_cast<T*>(p.c) + z * p.c_stride_batch;
  // Two columns in one store where C's rows are contiguous and aligned for it.
  const bool pairs = p.c_stride_n == 1 && p.c_stride_m % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(c) % (2 * sizeof(T)) == 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int m = row0 + accumulator_row<kPermuted>(warp, lane, half);
    if (m >= p.M) continue;
    T* row = c + m * p.c_stride_m;
#pragma unroll
    for (int j = 0; j < Config::kMmaN / 8; ++j) {
      if constexpr (kSplitK > 1) {
        if (j / (Config::kMmaN / 8 / kSplitK) != split) continue;
      }
      const int n = n0 + j * 8 + lane % 4 * 2;
      const float v0 = d[4 * j + 2 * half];
      const float v1 = d[4 * j + 2 * half + 1];
      if (pairs && n + 1 < p.N) {
        if constexpr (std::is_same_v<T, float>) {
          *reinterpret_cast<float2*>(row + n) = make_float2(v0, v1);
        } else {
          *reinterpret_cast<uint32_t*>(row + n) = pack_pair<T>(v0, v1);
        }
      } else {
        if (n < p.N) row[n * p.c_stride_n] = from_acc<T>(v0);
        if (n + 1 < p.N) row[(n + 1) * p.c_stride_n] = from_acc<T>(v1);
      }
    }
  }
}

// One consumer's 64×kMmaN tile of 16-bit C, rounded, two values a register in the accumulator
// layout: packed[2j + h] holds columns 8j + 2(l%4) and the next, of row l/4 + 8h. In half the
// registers of the accumulators, it can wait there while the next tile's wgmmas run.
template <typename T, int kCount>
__device__ __forceinline__ void pack_tile(const float (&d)[kCount],
                                          uint32_t (&packed)[kCount / 2]) {
#pragma unroll
  for (int j = 0; j < kCount / 4; ++j) {
    packed[2 * j] = pack_pair<T>(d[4 * j], d[4 * j + 1]);
    packed[2 * j + 1] = pack_pair<T>(d[4 * j + 2], d[4 * j + 3]);
  }
}

// Epilogue boxes: 64 rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r % 8) (the
// 128-byte swizzle the TMA store undoes), holding columns [kBoxCols·box, kBoxCols·(box+1)) of a
// consumer's tile. From a packed 16-bit tile: stmatrix, 16 columns × 16 rows per instruction.
template <typename Config>
__device__ __forceinline__ void fill_box_packed(const uint32_t (&packed)[Config::kAccumulators / 2],
                                                int box, uint32_t box_addr) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  // Matrix i of an x4: rows 8(i%2).. of the warp's 16, 8-column block i/2 of the 16 columns.
  const int i = lane / 8, r = lane % 8;
  const uint32_t row = warp * 16 + (i % 2) * 8 + r;
#pragma unroll
  for (int jj = 0; jj < Config::kBoxCols / 16; ++jj) {
    const int j = box * (Config::kBoxCols / 8) + 2 * jj;  // first of the two 8-column blocks
    const uint32_t chunk = 2 * jj + i / 2;
    const uint32_t addr = box_addr + row * Config::kSwizzleBytes + ((chunk ^ r) << 4);
    stmatrix_x4(addr, packed[2 * j], packed[2 * j + 1], packed[2 * j + 2], packed[2 * j + 3]);
  }
}

// From fp32 accumulators to fp32 C: one 8-byte store per row and column pair.
template <typename Config, bool kPermuted>
__device__ __forceinline__ void fill_box_fp32(const float (&d)[128], int box, uint32_t box_addr) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  const int q = lane % 4;
#pragma unroll
  for (int jj = 0; jj < Config::kBoxCols / 8; ++jj) {
    const int j = box * (Config::kBoxCols / 8) + jj;  // 8-column block of the 256
    const uint32_t chunk = 2 * jj + q / 2;
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      const int half = fill_half<kPermuted>(step, lane);
      const uint32_t row = accumulator_row<kPermuted>(warp, lane, half);
      const uint32_t addr =
          box_addr + row * Config::kSwizzleBytes + ((chunk ^ (row % 8)) << 4) + (q % 2) * 8;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(pick_half(d, 4 * j, half)),
                   "f"(pick_half(d, 4 * j + 1, half))
                   : "memory");
    }
  }
}

// The same for a C stored transposed (c_transposed): box b holds this product's rows
// [kBoxCols·(b%2), +kBoxCols) of the consumer's 64 as its 128-byte rows' elements, and its columns
// [kMmaM·(b/2), +kMmaM) as its rows, so the TMA store writes them as the caller's C, rows
// contiguous. Warps 0–1 fill the even boxes, 2–3 the odd ones, one 4-byte store per value; for
// each store the warp's lanes cover 4 rows × 32 bytes whose chunks the swizzle spreads over all
// 32 banks (permuted rows: with fill_half's order).
template <typename Config, bool kPermuted>
__device__ __forceinline__ void fill_box_fp32_transposed(const float (&d)[128], int box,
                                                         uint32_t box_addr) {
  static_assert(Config::kTf32, "fp32 C");
  constexpr int kHalves = Config::kMmaM / Config::kBoxCols;  // 2: a box takes half the rows
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32 % 4;
  if (warp / (4 / kHalves) != box % kHalves) return;
  const int q = lane % 4;
  const int first_col = box / kHalves * Config::kMmaM;  // of the consumer's 256
#pragma unroll
  for (int jj = 0; jj < Config::kMmaM / 8; ++jj) {
    const int j = first_col / 8 + jj;  // 8-column block of the 256
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      const int half = fill_half<kPermuted>(step, lane);
      // This row of the product within the box.
      const uint32_t element = accumulator_row<kPermuted>(warp, lane, half) % Config::kBoxCols;
      const uint32_t chunk = element / 4;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint32_t row = jj * 8 + q * 2 + e;  // the product's column, the box's row
        const uint32_t addr = box_addr + row * Config::kSwizzleBytes +
                              ((chunk ^ (row % 8)) << 4) + element % 4 * 4;
        asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(pick_half(d, 4 * j + e, half))
                     : "memory");
      }
    }
  }
}

// One round of a consumer's epilogue: its ring of boxes filled (fill(box, address)) and written out
// by TMA stores, which run on while the consumer goes on. The ring is refilled only once the
// previous round's stores have read it; a round's waits, fence and barriers cost as much as its
// fills, so a tile stored at once goes a whole ring per round (kBoxesPerTile / kEpilogueBoxes
// rounds). kTransposed: the boxes are fill_box_fp32_transposed's, stored into the caller's C.
// kRing: boxes a round, the whole ring unless fewer are asked for (split-K: the boxes a block
// owns; the deferred stores of 128×256 tiles: one box a round, spread over the next tile's
// k-tiles).
template <typename Config, bool kTransposed = false, int kRing = Config::kEpilogueBoxes,
          typename Fill>
__device__ __forceinline__ void store_round(const CUtensorMap* map_c, uint32_t ring_addr,
                                            const void* ring, int consumer, bool leader, int round,
                                            int z, int row0, int n0, Fill&& fill) {
  static_assert(kRing <= Config::kEpilogueBoxes, "a round fits in the ring");
  static_assert(Config::kBoxesPerTile % kRing == 0, "a tile is whole rounds of the ring");
  if (leader) bulk_wait_read<0>();
  warpgroup_sync(consumer);  // the ring's previous stores have read it
#pragma unroll
  for (int slot = 0; slot < kRing; ++slot) {
    fill(round * kRing + slot, ring_addr + slot * Config::kBoxBytes);
  }
  fence_proxy_async();
  warpgroup_sync(consumer);  // the ring is written, and visible to the TMA unit
  if (leader) {
#pragma unroll
    for (int slot = 0; slot < kRing; ++slot) {
      const void* src = static_cast<const unsigned char*>(ring) + slot * Config::kBoxBytes;
      const int box = round * kRing + slot;
      if constexpr (kTransposed) {
        constexpr int kHalves = Config::kMmaM / Config::kBoxCols;
        static_assert(kRing % kHalves == 0, "a round fills whole columns of boxes");
        tma_store(map_c, src, row0 + box % kHalves * Config::kBoxCols,
                  n0 + box / kHalves * Config::kMmaM, z);
      } else {
        tma_store(map_c, src, n0 + box * Config::kBoxCols, row0, z);
      }
    }
    bulk_commit();
  }
}

// Split-K: the kSplitK blocks of a cluster (rank s: the s-th slice of K) each hold partial sums of
// the whole tile; block o owns columns [o, o + 1) · kBlockN / kSplitK and adds everyone's partials
// of them in rank order (the same bits whichever block finishes first). The partials pass through
// the owner's stage ring, free once every block's wgmmas are done: from rank s, a slot of 16-byte
// chunks, chunk c of consumer thread t at (c · threads + t) · 16, so that both the remote stores
// and the owner's loads run through all banks. Ends with d holding the sums in the owned columns.
template <typename Config, int kSplitK>
__device__ __forceinline__ void reduce_split(float (&d)[Config::kAccumulators],
                                             unsigned char* exchange, uint32_t split) {
  constexpr int kThreads = Config::kConsumers * Config::kWarpgroupThreads;
  constexpr int kOwned = Config::kAccumulators / kSplitK;  // sent to each owner, a thread
  constexpr int kChunks = kOwned / 4;
  constexpr uint32_t kChunkStride = kThreads * 16;
  constexpr uint32_t kSlotBytes = kChunks * kChunkStride;
  static_assert(kSplitK * kSlotBytes <= Config::kPipelineBytes, "the slots fit in the stage ring");
  const uint32_t t = threadIdx.x - Config::kWarpgroupThreads;  // of the consumers
  const uint32_t base = smem_u32(exchange) + t * 16;
  cluster_sync();  // every block's wgmmas are done: the rings hold no operand anyone still reads
#pragma unroll
  for (int owner = 0; owner < kSplitK; ++owner) {
    if (owner == static_cast<int>(split)) continue;
    const uint32_t remote = cluster_address(base + split * kSlotBytes, owner);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int i = owner * kOwned + 4 * c;
      store_cluster_v4(remote + c * kChunkStride, d[i], d[i + 1], d[i + 2], d[i + 3]);
    }
  }
  cluster_sync();  // every partial has arrived (release / acquire at cluster scope)
#pragma unroll
  for (int owner = 0; owner < kSplitK; ++owner) {
    if (owner != static_cast<int>(split)) continue;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int i = owner * kOwned + 4 * c;
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int s = 0; s < kSplitK; ++s) {
        float4 part;
        if (s == owner) {
          part = make_float4(d[i], d[i + 1], d[i + 2], d[i + 3]);
        } else {
          asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                       : "=f"(part.x), "=f"(part.y), "=f"(part.z), "=f"(part.w)
                       : "r"(base + s * kSlotBytes + c * kChunkStride)
                       : "memory");
        }
        if (s == 0) {
          sum = part;
        } else {
          sum.x += part.x, sum.y += part.y, sum.z += part.z, sum.w += part.w;
        }
      }
      d[i] = sum.x, d[i + 1] = sum.y, d[i + 2] = sum.z, d[i + 3] = sum.w;
    }
  }
}

// Stream-K: this thread's first float4 of slot `slot` of p.sk_partials. A thread's sums lie as
// float4s 128 threads apart, so that a warp's accesses are 512 contiguous bytes.
template <typename Config>
__device__ __forceinline__ float4* partial_sums(const WgmmaParams& p, int slot) {
  return reinterpret_cast<float4*>(p.sk_partials + static_cast<int64_t>(slot) *
                                                       Config::kAccumulators *
                                                       Config::kWarpgroupThreads) +
         threadIdx.x % Config::kWarpgroupThreads;
}

// A consumer's accumulators as partial sums in slot `slot` (kept in L2 for the reader on another
// SM), then the slot's flag set once the whole warpgroup's stores are done: the barrier orders
// them before the leader's fence, which makes them visible at gpu scope before the flag.
template <typename Config>
__device__ __forceinline__ void store_partial_sums(const WgmmaParams& p,
                                                   const float (&d)[Config::kAccumulators],
                                                   int slot, int consumer, bool leader) {
  float4* dst = partial_sums<Config>(p, slot);
#pragma unroll
  for (int i = 0; i < Config::kAccumulators / 4; ++i) {
    __stcg(dst + i * Config::kWarpgroupThreads,
           make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]));
  }
  warpgroup_sync(consumer);
  if (leader) {
    asm volatile(
        "fence.acq_rel.gpu;\n"
        "st.relaxed.gpu.global.b32 [%0], 1;" ::"l"(p.sk_flags + slot)
        : "memory");
  }
}

// The partial sums of slot `slot` added to the accumulators, once its flag says they are written
// (the leader's acquiring load, then the barrier, order every thread's loads after the writes).
template <typename Config>
__device__ __forceinline__ void add_partial_sums(const WgmmaParams& p,
                                                 float (&d)[Config::kAccumulators], int slot,
                                                 int consumer, bool leader) {
  if (leader) {
    int written = 0;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];"
                   : "=r"(written)
                   : "l"(p.sk_flags + slot)
                   : "memory");
    } while (written == 0);
  }
  warpgroup_sync(consumer);
  const float4* src = partial_sums<Config>(p, slot);
#pragma unroll
  for (int i = 0; i < Config::kAccumulators / 4; ++i) {
    const float4 v = __ldcg(src + i * Config::kWarpgroupThreads);
    d[4 * i] += v.x, d[4 * i + 1] += v.y, d[4 * i + 2] += v.z, d[4 * i + 3] += v.w;
  }
}

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90

// kKMajorA / kKMajorB: whether A (M, K) and B (K, N) are K-major in memory (stride 1 along K),
// which decides the boxes the producer copies and the descriptors and transposes of the wgmmas.
// kClusterM: blocks per cluster, each computing one of kClusterM tiles stacked along M. They
// share B: each block's producer copies 1/kClusterM of it and multicasts it to all of them, so
// B crosses L2 → SM once per cluster instead of once per block. kConsumers, kMmaN: WgmmaConfig's.
// kSplitK > 1 (16-bit, kClusterM = 1): a cluster of kSplitK blocks shares each tile, block s
// taking the s-th slice of K, and their partial sums meet in shared memory (reduce_split): for
// products with too few tiles to fill the SMs. The launcher then gives each cluster one tile.
// kStreamK: the walk may end in stream-K pieces (WgmmaParams::sk_turns); without it, every walk
// is whole turns.
template <typename T, bool kKMajorA, bool kKMajorB, int kClusterM, int kConsumers, int kSplitK,
          int kMmaN, bool kStreamK>
__global__ void __launch_bounds__(WgmmaConfig<T, kConsumers, kMmaN>::kThreads, 1)
gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                       const __grid_constant__ CUtensorMap map_b,
                       const __grid_constant__ CUtensorMap map_c,
                       const __grid_constant__ WgmmaParams p) {
#ifdef TORCH_GEMM_SM90A_DEVICE
  using Config = WgmmaConfig<T, kConsumers, kMmaN>;
  using namespace sm90;
  constexpr int kStages = Config::kStages, kBlockK = Config::kBlockK;
  static_assert(kClusterM == 1 || kClusterM == 2, "one block, or a pair sharing B");
  static_assert(kSplitK == 1 || (kClusterM == 1 && !Config::kTf32 && kMmaN == 256 &&
                                 Config::kBoxesPerTile % kSplitK == 0),
                "split-K: 16-bit C on 256-column tiles, owned in whole epilogue boxes, clusters "
                "of the K slices");
  constexpr int kClusterBlocks = kClusterM * kSplitK;
  static_assert(Config::kBlockN / kClusterM % Config::kMNBox == 0,
                "each block multicasts whole 64-element boxes of an N-major B");
  static_assert(!Config::kTf32 || kKMajorB, "tf32 wgmma reads B K-major only (A: registers)");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume atoms start there.
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + Config::kSwizzleAtomBytes - 1) &
      ~static_cast<uintptr_t>(Config::kSwizzleAtomBytes - 1));
  unsigned char* sA = smem;                                            // (kStages, 16 or 8 KB)
  unsigned char* sB = smem + kStages * Config::kStageBytesA;           // (kStages, 32 KB)
  unsigned char* sC = sB + kStages * Config::kStageBytesB;  // (consumer, kEpilogueBoxes, 8 KB)
  uint64_t* full = reinterpret_cast<uint64_t*>(sC + Config::kEpilogueBytes);
  uint64_t* empty = full + kStages;
  uint64_t* bias_full = empty + kStages;  // the bias row holds this tile's bias
  uint64_t* bias_empty = bias_full + 1;   // every consumer warp has started from it
  float* sBias = reinterpret_cast<float*>(bias_empty + 1);  // (kBlockN): 0 past N

  const int warpgroup = threadIdx.x / Config::kWarpgroupThreads;
  const int turns = (p.tiles_m + kClusterM - 1) / kClusterM * p.tiles_n * p.batch;
  // Rank in the cluster: the tile of a pair along M, or the slice of K.
  const uint32_t cluster_ctarank = kClusterBlocks > 1 ? cluster_rank() : 0;
  const uint32_t rank = kSplitK > 1 ? 0 : cluster_ctarank;
  const uint32_t split = kSplitK > 1 ? cluster_ctarank : 0;
  const int first_turn = static_cast<int>(blockIdx.x) / kClusterBlocks;
  const int turn_step = static_cast<int>(gridDim.x) / kClusterBlocks;
  // This block's k-tiles of each tile: all, or its slice (maybe empty: its partials are zeros).
  const int all_k_tiles = (p.K + kBlockK - 1) / kBlockK;
  const int slice_k_tiles = (all_k_tiles + kSplitK - 1) / kSplitK;
  const int k_begin = min(static_cast<int>(split) * slice_k_tiles, all_k_tiles);
  const int k_end = min(k_begin + slice_k_tiles, all_k_tiles);
  // The bias enters once, through the first slice's partials.
  const bool has_bias = p.bias != nullptr && split == 0;
  static_assert(!kStreamK || (!Config::kTf32 && kConsumers == 2 && kSplitK == 1),
                "stream-K: 16-bit two-consumer tiles, unsplit");
  // Only the stream-K kernel reads sk_turns: in the others every walk is whole turns, known so at
  // compile time, and the walk's stream-K state takes no registers.
  const int sk_turns = kStreamK ? p.sk_turns : 0;
  const auto make_walk = [&] {
    return TileWalk(first_turn, turn_step, turns, sk_turns, all_k_tiles, k_begin, k_end);
  };

  // One stage's copies (by the producer thread), counted on full[stage]: this block's A, and its
  // slice of B multicast to the cluster, or (whole_b) all of B into this block alone.
  constexpr int kSliceN = Config::kBlockN / kClusterM;  // the part of B a block multicasts
  const auto issue_stage = [&](int stage, int kt, int z, int m0, int n0, bool whole_b) {
    constexpr uint32_t kStageBytes = Config::kStageBytesA + Config::kStageBytesB;
    constexpr uint16_t kClusterMask = (1u << kClusterM) - 1;
    mbarrier_expect_tx(&full[stage], kStageBytes);
    unsigned char* a = sA + stage * Config::kStageBytesA;
    unsigned char* b = sB + stage * Config::kStageBytesB;
    const int k0 = kt * kBlockK;
    if constexpr (kKMajorA) {
      tma_load(a, &map_a, &full[stage], k0, m0, z);  // (kBlockM rows, one row of K)
    } else {
#pragma unroll
      for (int j = 0; j < Config::kBlockM / Config::kMNBox; ++j) {  // (64 K rows, 64 M) each
        tma_load(a + j * Config::kMNBoxBytes, &map_a, &full[stage], m0 + j * Config::kMNBox, k0,
                 z);
      }
    }
    const bool multicast = kClusterM > 1 && !whole_b;
#pragma unroll
    for (int r = 0; r < kClusterM; ++r) {
      if (!whole_b && r != static_cast<int>(rank)) continue;
      const int slice = r * kSliceN;
      if constexpr (kKMajorB) {
        // (kSliceN rows, one row of K): rows slice .. slice + kSliceN of the (kBlockN, K) tile.
        unsigned char* dst = b + slice * Config::kSwizzleBytes;
        if (multicast) {
          tma_load_multicast(dst, &map_b, &full[stage], kClusterMask, k0, n0 + slice, z);
        } else {
          tma_load(dst, &map_b, &full[stage], k0, n0 + slice, z);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kSliceN / Config::kMNBox; ++j) {  // (64 K rows, 64 N) each
          const int box = slice / Config::kMNBox + j;
          unsigned char* dst = b + box * Config::kMNBoxBytes;
          if (multicast) {
            tma_load_multicast(dst, &map_b, &full[stage], kClusterMask, n0 + box * Config::kMNBox,
                               k0, z);
          } else {
            tma_load(dst, &map_b, &full[stage], n0 + box * Config::kMNBox, k0, z);
          }
        }
      }
    }
  };

  // The first tile's first k-tiles leave from here, not from the producer loop, which thread 0
  // reaches only after the start barrier, setmaxnreg and the cluster barrier, in code ~60 KB
  // further on, cold in the instruction cache: it issued the first copy ~2 600 cycles into a
  // block, ~30% of a 1000³ block's time to its first k-tile (benchmarks/NOTES.md, session 14).
  // kEarlyFirst k-tiles go as soon as thread 0 has the tile's origin (it initializes their full
  // barriers itself), each block copying all of B for them: the peer's barriers may not be
  // initialized yet. Up to kEarlyStages go right after the start barrier, multicast or not.
  static_assert(Config::kEarlyFirst <= Config::kEarlyStages && Config::kEarlyStages <= kStages,
                "the early k-tiles fit in the ring");
  constexpr bool kEarlyMulticast = Config::kEarlyMulticast && kClusterM > 1;
  // The first copies wait on three things at a block's start, each from cold caches: their
  // barriers, the first tile's origin (integer divisions) and the tensor maps' descriptors. Warp 1
  // initializes the other barriers while thread 0 initializes the early ones, works out the
  // origin and has the descriptors fetched (benchmarks/NOTES.md, session 12). Both blocks of a
  // pair compute the same early k-tiles (from first_turn, turns and K), so that each stage's
  // bytes are counted alike in both: whole B or each one's multicast slice.
  int first_z = 0, first_m0 = 0, first_n0 = 0;
  int early = 0;  // thread 0: k-tiles of the first unit already issued
  // Thread 0's walk: the prologue takes its first unit, the producer loop the rest.
  TileWalk producer_walk = make_walk();
  WorkUnit first_unit;
  bool have_first = false;
  if (threadIdx.x == 0) {
    prefetch_tensormap(&map_a);
    prefetch_tensormap(&map_b);
    if (p.tma_store) prefetch_tensormap(&map_c);
    for (int s = 0; s < Config::kEarlyFirst; ++s) mbarrier_init(&full[s], 1);
    fence_mbarrier_init();
    have_first = producer_walk.next(&first_unit);
    tile_origin<Config, kClusterM>(p, first_unit.turn, rank, &first_z, &first_m0, &first_n0);
    if (have_first) early = min(Config::kEarlyFirst, first_unit.k_end - first_unit.k_begin);
    for (int s = 0; s < early; ++s) {
      issue_stage(s, first_unit.k_begin + s, first_z, first_m0, first_n0, true);
    }
  }
  if (threadIdx.x == 32) {
    for (int s = 0; s < kStages; ++s) {
      // The producer's expect_tx arrival (thread 0 initialized the first kEarlyFirst).
      if (s >= Config::kEarlyFirst) mbarrier_init(&full[s], 1);
      // One arrival per consumer warpgroup of every block the stage's multicasts reach.
      mbarrier_init(&empty[s], Config::kConsumers * kClusterM);
    }
    mbarrier_init(bias_full, 32);                       // each lane of the bias warp
    mbarrier_init(bias_empty, Config::kConsumers * 4);  // each consumer warp
    fence_mbarrier_init();
  }
  if (!has_bias) {
    for (int i = threadIdx.x; i < Config::kBlockN; i += Config::kThreads) sBias[i] = 0.0f;
  }
  // This block's threads see the initialized barriers and the zero row. A pair's peer sees the
  // barriers (released by the fence) once it has waited on the cluster barrier. Every thread
  // waits once, late: warp 0 before its first multicast (the early k-tiles' or the loop's), the
  // rest of the producer warpgroup after setmaxnreg, the consumers before their tile loop (before
  // their first remote arrival), so that the barrier's latency passes under the roles' setup.
  // Split-K blocks touch their peers' shared memory only after the cluster barriers of
  // reduce_split.
  __syncthreads();
  if constexpr (kClusterM > 1) cluster_arrive_relaxed();
  if (kEarlyMulticast && threadIdx.x < 32) cluster_wait();
  if (threadIdx.x == 0 && have_first) {
    const int total = min(Config::kEarlyStages, first_unit.k_end - first_unit.k_begin);
    for (; early < total; ++early) {
      issue_stage(early, first_unit.k_begin + early, first_z, first_m0, first_n0,
                  !kEarlyMulticast);
    }
  }
  __syncwarp();  // warp 0 reconverges: setmaxnreg and the cluster barrier need whole warps

  if (warpgroup == 0) {
    // Producer. One thread issues every copy; the others give their registers away, warp 1
    // stages the bias, and two warps sum A's rows where mm_tiled_row_sum asks for them.
    setmaxnreg_dec<Config::kProducerRegs>();
    if (kClusterM > 1 && !(kEarlyMulticast && threadIdx.x < 32)) cluster_wait();
    if (threadIdx.x == 0) {
      int stage = early;
      uint32_t phase = 0;
      if (stage == kStages) stage = 0, phase = 1;
      int z = first_z, m0 = first_m0, n0 = first_n0;
      WorkUnit unit = first_unit;
      for (bool more = have_first, first = true; more; first = false) {
        for (int kt = unit.k_begin + (first ? early : 0); kt < unit.k_end; ++kt) {
          // Every consumer this stage's copies reach is done with it.
          mbarrier_wait(&empty[stage], phase ^ 1);
          issue_stage(stage, kt, z, m0, n0, false);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
        // The next unit and its tile's origin, while this one's last copies land (past the last
        // unit, unused).
        more = producer_walk.next(&unit);
        tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
      }
      // The peer's consumers arrive on this block's empty barriers until their last k-tile, so the
      // block stays until every stage's last release has come: then no arrival reaches it after
      // it exits, and every multicast into it has landed (its consumers waited for them). This
      // replaces a cluster barrier at the exit, whose release form cost ~700 cycles a block. It
      // relies on both blocks of a pair walking the same units and k-tiles, the early ones
      // included (both follow first_turn, turn_step, sk_turns and the whole of K): a schedule
      // that differed by rank would need the barrier back.
      if constexpr (kClusterM > 1) {
        for (int s = 0; s < kStages; ++s) {
          mbarrier_wait(&empty[stage], phase ^ 1);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
      }
    } else if (has_bias && threadIdx.x / 32 == 1) {
      // Each tile's bias row, read from global memory before the previous tile's consumers have
      // let go of the row in shared memory (so the reads' latency passes under that tile).
      static_assert(kRowSumWarps <= 2, "the row-sum warps (the last ones) leave warp 1 free");
      constexpr int kPerLane = Config::kBlockN / 32;
      const int lane = threadIdx.x % 32;
      const T* bias = static_cast<const T*>(p.bias);
      uint32_t bias_phase = 0;
      TileWalk walk = make_walk();
      WorkUnit unit;
      while (walk.next(&unit)) {
        int z, m0, n0;
        tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
        float row[kPerLane];
        // A stream-K partial sum starts at zero: the bias enters once, with the tile's last
        // k-tiles.
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          const int n = n0 + i * 32 + lane;
          row[i] = n < p.N && !unit.partial ? to_acc<float>(bias[n * p.bias_stride]) : 0.0f;
        }
        mbarrier_wait(bias_empty, bias_phase ^ 1);
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) sBias[i * 32 + lane] = row[i];
        mbarrier_arrive(bias_full);  // releases this lane's stores to the consumers
        bias_phase ^= 1;
      }
    } else if (kSplitK == 1 && p.row_sum.partials != nullptr &&
               threadIdx.x / 32 >= 4 - kRowSumWarps) {
      // mm_tiled_row_sum's sums of A's rows: each tile, as it starts, sums its rows over the
      // slice of K of its tile column, read from global memory (L2) rather than from the stages
      // (the main loop keeps shared memory near its bandwidth: consumers summing from the stages
      // slowed their tiles ~1.5×, benchmarks/NOTES.md). 16-bit only (the launcher never fuses
      // float32's): compiled into the tf32 kernels, whose consumers hold two sets of A
      // fragments, it made them spill.
      if constexpr (!Config::kTf32) {
        constexpr int kRows = Config::kBlockM / kRowSumWarps;
        const int sum_warp = threadIdx.x / 32 - (4 - kRowSumWarps);
        TileWalk walk = make_walk();
        WorkUnit unit;
        while (walk.next(&unit)) {
          if (unit.partial) continue;  // once a tile: with its last k-tiles
          int z, m0, n0;
          tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
          const int slice = n0 / Config::kBlockN;
          if (slice >= p.row_sum.slices) continue;
          sum_rows<T, kRows, kRowSumFusedBatch>(p.row_sum, z, m0 + sum_warp * kRows, slice);
        }
      }
    }
    // The consumers' two barriers of reduce_split (one tile a cluster).
    if constexpr (kSplitK > 1) {
      __syncwarp();  // warp 0 reconverges first: the cluster barrier needs whole warps
      cluster_sync();
      cluster_sync();
    }
  } else {
    // Consumers: warpgroup 1 computes rows 0..63 of each tile, warpgroup 2 (if any) rows 64..127.
    setmaxnreg_inc<Config::kConsumerRegs>();
    const int consumer = warpgroup - 1;
    const bool leader = threadIdx.x % Config::kWarpgroupThreads == 0;
    // Per wgmma: a K-major tile advances 32 bytes along its 128-byte rows, an MN-major one
    // kMmaK rows of 128 bytes.
    constexpr uint32_t kStepA = kKMajorA ? Config::kMmaK * Config::kElementBytes
                                         : Config::kMmaK * Config::kSwizzleBytes;
    constexpr uint32_t kStepB = kKMajorB ? Config::kMmaK * Config::kElementBytes
                                         : Config::kMmaK * Config::kSwizzleBytes;
    // The leading byte offset: unused by swizzled K-major tiles (16, the smallest encodable), the
    // distance between 64-element boxes in MN-major ones.
    constexpr uint32_t kLeadingA = kKMajorA ? 16 : Config::kMNBoxBytes;
    constexpr uint32_t kLeadingB = kKMajorB ? 16 : Config::kMNBoxBytes;
    // A consumer's 64 rows of A: 64 rows of 128 bytes (K-major), or 64 / kMNBox boxes (MN-major).
    const uint32_t consumer_offset_a =
        kKMajorA ? consumer * Config::kMmaM * Config::kSwizzleBytes
                 : consumer * (Config::kMmaM / Config::kMNBox) * Config::kMNBoxBytes;
    const unsigned char* ring = sC + consumer * Config::kEpilogueBoxes * Config::kBoxBytes;
    const uint32_t ring_addr = smem_u32(ring);
    // 16-bit C on 128×256 tiles leaves late: a tile is packed (rounded) into 64
    // registers at its end, and its rounds of TMA stores go out during the next tile's first
    // k-tiles, while that tile's wgmmas run. The tensor cores idled ~2200 cycles a tile through
    // the stores; now ~650 (the packing). The main loop keeps shared memory near its bandwidth
    // (the wgmmas read 80 of its 128 bytes a cycle), so the stores go one box (kPendingRing)
    // every kStoreSpacing k-tiles: two boxes a k-tile over two k-tiles made those k-tiles ~850
    // cycles longer each; one box a k-tile measured +0.8-0.9% at 4096³ and 8192×4096×4096, one
    // every second k-tile +0.6-1.1% more (benchmarks/NOTES.md, session 16). fp32 C (tf32) would
    // need all 128 registers; on 64×256 tiles a block has one or two tiles, nothing to hide
    // behind (1000³ measured 7% slower deferred). Those leave at once, through the whole ring.
    constexpr bool kDeferStores = !Config::kTf32 && Config::kConsumers == 2;
    // tf32's A fragments from an MN-major tile load rows in accumulator_row's permuted order.
    constexpr bool kRowsPermuted = Config::kTf32 && !kKMajorA;
    constexpr int kRounds = Config::kBoxesPerTile / Config::kEpilogueBoxes;
    constexpr int kPendingRing = kDeferStores ? 1 : Config::kEpilogueBoxes;
    constexpr int kPendingRounds = Config::kBoxesPerTile / kPendingRing;
    constexpr int kStoreSpacing = kDeferStores ? 2 : 1;
    uint32_t packed[Config::kTf32 ? 1 : Config::kAccumulators / 2];
    bool pending = false;  // packed holds a tile not yet (all) stored
    int pending_z = 0, pending_row0 = 0, pending_n0 = 0;
    // Rounds [from, to) of the packed tile. The rounds are unrolled so that each indexes packed
    // with constants: a register array indexed at run time would live in local memory.
    const auto store_pending_rounds = [&](int from, int to) {
      if constexpr (!Config::kTf32) {
#pragma unroll
        for (int round = 0; round < kPendingRounds; ++round) {
          if (round < from || round >= to) continue;
          store_round<Config, false, kPendingRing>(
              &map_c, ring_addr, ring, consumer, leader, round, pending_z, pending_row0,
              pending_n0, [&](int box, uint32_t box_addr) {
                fill_box_packed<Config>(packed, box, box_addr);
              });
        }
      }
    };
    float d[Config::kAccumulators];
    int stage = 0;
    uint32_t phase = 0, bias_phase = 0;
    // Hands a stage back to every block whose producer writes into it.
    const auto release = [&](int released) {
      if (!leader) return;
      if constexpr (kClusterM > 1) {
#pragma unroll
        for (uint32_t r = 0; r < kClusterM; ++r) mbarrier_arrive_cluster(&empty[released], r);
      } else {
        mbarrier_arrive(&empty[released]);
      }
    };
    // tf32: A's fragments of one k-tile (kBlockK / kMmaK wgmmas × 4 registers), in two sets.
    constexpr int kTf32Steps = Config::kTf32 ? kBlockK / Config::kMmaK : 1;
    uint32_t frag_even[kTf32Steps][4] = {}, frag_odd[kTf32Steps][4] = {};
    // Both sets stay live through every k-tile (an empty asm reads them after each wait), so the
    // compiler gives them separate registers and writes neither while wgmmas may read it: it
    // cannot see that the wgmmas are asynchronous.
    const auto keep_fragments = [&] {
      if constexpr (Config::kTf32) {
#pragma unroll
        for (int kk = 0; kk < kTf32Steps; ++kk) {
          asm volatile("" ::"r"(frag_even[kk][0]), "r"(frag_even[kk][1]), "r"(frag_even[kk][2]),
                       "r"(frag_even[kk][3]), "r"(frag_odd[kk][0]), "r"(frag_odd[kk][1]),
                       "r"(frag_odd[kk][2]), "r"(frag_odd[kk][3]));
        }
      }
    };
    // One tf32 k-tile: A's fragments loaded into `frag` and rounded, then the wgmmas issued.
    const auto tf32_k_tile = [&](const unsigned char* a, const unsigned char* b,
                                 uint32_t (&frag)[kTf32Steps][4]) {
      if constexpr (Config::kTf32) {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
#pragma unroll
        for (int kk = 0; kk < kTf32Steps; ++kk) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            // Row m of the consumer's 64 (fragment i: wgmma's row l/4 + 8(i%2)), column k.
            const uint32_t m = accumulator_row<kRowsPermuted>(warp, lane, i % 2);
            const uint32_t k = kk * 8 + lane % 4 + (i / 2) * 4;
            // K-major: row m is 128 bytes of K, k in its 16-byte chunk k/4. MN-major: k is a
            // 128-byte row of 32 rows of A in box m/32, m in its chunk m%32/4. Either way the
            // chunk is XORed with the 128-byte row's index mod 8.
            uint32_t offset;
            if constexpr (kKMajorA) {
              offset = m * Config::kSwizzleBytes + (((k / 4) ^ (m % 8)) << 4) + k % 4 * 4;
            } else {
              offset = m / Config::kMNBox * Config::kMNBoxBytes + k * Config::kSwizzleBytes +
                       (((m % Config::kMNBox / 4) ^ (k % 8)) << 4) + m % 4 * 4;
            }
            float x;
            asm volatile("ld.shared.f32 %0, [%1];"
                         : "=f"(x)
                         : "r"(smem_u32(a) + offset)
                         : "memory");
            frag[kk][i] = __float_as_uint(round_to_tf32(x));
          }
        }
        fence_accumulators(d);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kTf32Steps; ++kk) {
          const uint64_t desc_b =
              smem_descriptor(b + kk * kStepB, kLeadingB, Config::kSwizzleAtomBytes);
          wgmma_m64n256k8_tf32(d, frag[kk], desc_b, 1);
        }
        wgmma_commit();
      }
    };
    // 16-bit operands: each wgmma's descriptors are stage 0's low words plus offsets. Computed
    // once, and held in registers (the empty asm) so that the compiler does not redo the address
    // arithmetic per wgmma: with it the k-loop executes ~25% fewer instructions (ncu) and the
    // large shapes ran +0.4-0.6% (benchmarks/NOTES.md, session 14).
    constexpr uint64_t kDescHigh = smem_descriptor_high(Config::kSwizzleAtomBytes);
    uint32_t desc_a0 = smem_descriptor_low(sA + consumer_offset_a, kLeadingA);
    uint32_t desc_b0 = smem_descriptor_low(sB, kLeadingB);
    asm volatile("" : "+r"(desc_a0), "+r"(desc_b0));
    // The unit's tile origin, and the next unit's: computed while the first k-tile's wgmmas run,
    // its integer divisions stall no warp between tiles (they did, ~650 cycles per tile, when each
    // tile began with them). Past the last unit the origin is unused.
    TileWalk walk = make_walk();
    WorkUnit unit, next_unit;
    bool more = walk.next(&unit), next_more = false;
    int z, m0, n0, next_z = 0, next_m0 = 0, next_n0 = 0;
    tile_origin<Config, kClusterM>(p, unit.turn, rank, &z, &m0, &n0);
    // Stream-K partial sums: this block's consumer's slot, under the cluster's index.
    const auto sk_slot = [&](int cluster) {
      return (cluster * kClusterM + static_cast<int>(rank)) * kConsumers + consumer;
    };
    // Before the first release, which may arrive on the peer's barriers.
    if constexpr (kClusterM > 1) cluster_wait();
    for (; more; more = next_more, unit = next_unit, z = next_z, m0 = next_m0, n0 = next_n0) {
      const auto prepare_next_tile = [&] {
        next_more = walk.next(&next_unit);
        tile_origin<Config, kClusterM>(p, next_unit.turn, rank, &next_z, &next_m0, &next_n0);
        // Keeps the compiler from sinking the divisions to where the results are used.
        asm volatile("" : "+r"(next_z), "+r"(next_m0), "+r"(next_n0));
        if constexpr (kStreamK) {
          asm volatile("" : "+r"(next_unit.k_begin), "+r"(next_unit.k_end),
                       "+r"(next_unit.contributors_from));
        }
      };
      // The accumulators start at the tile's bias, from the row the bias warp staged (all zeros
      // without a bias). One unconditional definition: accumulators defined on two paths made
      // ptxas serialize every wgmma (C7515, 0.99 -> 0.88 of cuBLAS, benchmarks/NOTES.md).
      if (has_bias) mbarrier_wait(bias_full, bias_phase);
      // Each row's pair loaded by ld.shared straight into its accumulators: the row read by
      // generic loads and copied into the lower row's took 96 instructions a thread, with every
      // tensor core idle (+0.2% at the large shapes, benchmarks/NOTES.md, session 14).
      const uint32_t col = smem_u32(sBias + threadIdx.x % 4 * 2);  // columns 8j + 2(l%4), +1
#pragma unroll
      for (int j = 0; j < Config::kMmaN / 8; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                       : "=f"(d[4 * j + 2 * half]), "=f"(d[4 * j + 2 * half + 1])
                       : "r"(col + 32 * j)
                       : "memory");
        }
      }
      if (has_bias) {
        __syncwarp();  // the warp's reads of the row are done before it is handed back
        if (threadIdx.x % 32 == 0) mbarrier_arrive(bias_empty);
        bias_phase ^= 1;
      }
      int previous = -1;
      for (int kt = unit.k_begin; kt < unit.k_end; ++kt) {
        mbarrier_wait(&full[stage], phase);
        if constexpr (Config::kTf32) {
          const unsigned char* a = sA + stage * Config::kStageBytesA + consumer_offset_a;
          const unsigned char* b = sB + stage * Config::kStageBytesB;
          // A passes through registers to be rounded to tf32 (B, K-major in shared memory, is
          // read as the tensor cores find it, or was rounded where it was repacked). The
          // fragments alternate between two register sets by k-tile parity, so one k-tile's
          // loads proceed while the previous k-tile's wgmmas still read the other set.
          if (kt % 2 == 0) {
            tf32_k_tile(a, b, frag_even);
          } else {
            tf32_k_tile(a, b, frag_odd);
          }
        } else {
          fence_accumulators(d);
          wgmma_fence();
          const uint32_t stage_a = desc_a0 + stage * (Config::kStageBytesA >> 4);
          const uint32_t stage_b = desc_b0 + stage * (Config::kStageBytesB >> 4);
#pragma unroll
          for (int kk = 0; kk < kBlockK / Config::kMmaK; ++kk) {
            wgmma_ss<T, kKMajorA ? 0 : 1, kKMajorB ? 0 : 1>(
                d, kDescHigh | (stage_a + kk * (kStepA >> 4)),
                kDescHigh | (stage_b + kk * (kStepB >> 4)), 1);
          }
          wgmma_commit();
        }
        if (kt == unit.k_begin) prepare_next_tile();
        if (pending && (kt - unit.k_begin) % kStoreSpacing == 0) {
          const int round = (kt - unit.k_begin) / kStoreSpacing;
          store_pending_rounds(round, round + 1);
        }
        // The previous k-tile's wgmmas have finished reading their stage (and, for tf32, their
        // fragments): hand it back. This k-tile's stay in flight while the next stage is awaited.
        wgmma_wait<1>();
        fence_accumulators(d);
        keep_fragments();
        if (previous >= 0) release(previous);
        previous = stage;
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
      if (unit.k_end == unit.k_begin) prepare_next_tile();  // a split-K block's empty slice
      wgmma_wait<0>();
      fence_accumulators(d);
      if (previous >= 0) release(previous);
      // The previous tile's rounds that its k-tiles were too few to carry.
      if (pending) {
        store_pending_rounds((unit.k_end - unit.k_begin + kStoreSpacing - 1) / kStoreSpacing,
                             kPendingRounds);
      }
      pending = false;
      if constexpr (kStreamK) {
        // Without the tile's last k-tiles: the sums go to the workspace, for the cluster with
        // them. With them, after others' k-tiles: their sums are added first.
        if (unit.partial) {
          store_partial_sums<Config>(p, d, sk_slot(first_turn), consumer, leader);
          continue;
        }
        for (int c = unit.contributors_from; c < first_turn; ++c) {
          add_partial_sums<Config>(p, d, sk_slot(c), consumer, leader);
        }
      }
      // The epilogue: from registers where TMA cannot store C; else 16-bit C packed (and, on
      // 128×256 tiles, left for the next tile's k-tiles to store), fp32 C through the ring.
      const int row0 = m0 + consumer * Config::kMmaM;
      if constexpr (kSplitK > 1) {
        // Sums of the owned columns (a 1/kSplitK share of the boxes), stored at once.
        reduce_split<Config, kSplitK>(d, sA, split);
        if (!p.tma_store) {
          store_accumulators<Config, T, kRowsPermuted, kSplitK>(p, d, z, row0, n0, split);
        } else {
          constexpr int kOwnedBoxes = Config::kBoxesPerTile / kSplitK;
          pack_tile<T>(d, packed);
          // Unrolled over the owners so that packed is indexed with constants (as in
          // store_pending_rounds).
#pragma unroll
          for (int owner = 0; owner < kSplitK; ++owner) {
            if (owner != static_cast<int>(split)) continue;
            store_round<Config, false, kOwnedBoxes>(
                &map_c, ring_addr, ring, consumer, leader, owner, z, row0, n0,
                [&](int box, uint32_t box_addr) {
                  fill_box_packed<Config>(packed, box, box_addr);
                });
          }
        }
      } else if (!p.tma_store) {
        store_accumulators<Config, T, kRowsPermuted>(p, d, z, row0, n0);
      } else if constexpr (!Config::kTf32) {
        pack_tile<T>(d, packed);
        pending_z = z, pending_row0 = row0, pending_n0 = n0;
        if constexpr (kDeferStores) {
          pending = true;
        } else {
          store_pending_rounds(0, kPendingRounds);
        }
      } else if (p.c_transposed) {
#pragma unroll
        for (int round = 0; round < kRounds; ++round) {
          store_round<Config, true>(&map_c, ring_addr, ring, consumer, leader, round, z, row0, n0,
                                    [&](int box, uint32_t box_addr) {
                                      fill_box_fp32_transposed<Config, kRowsPermuted>(
                                          d, box, box_addr);
                                    });
        }
      } else {
#pragma unroll
        for (int round = 0; round < kRounds; ++round) {
          store_round<Config>(&map_c, ring_addr, ring, consumer, leader, round, z, row0, n0,
                              [&](int box, uint32_t box_addr) {
                                fill_box_fp32<Config, kRowsPermuted>(d, box, box_addr);
                              });
        }
      }
    }
    if (pending) store_pending_rounds(0, kPendingRounds);
    // The shared memory the last stores read stays until they have read it; their writes need no
    // wait (the grid's completion includes them), which cost ~0.7 µs a block (1000³).
    if (leader) bulk_wait_read<0>();
  }
#endif
}

}  // namespace torch_gemm
