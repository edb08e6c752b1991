// Hopper's PTX, one thin wrapper an instruction: mbarriers, clusters and distributed shared
// memory, TMA copies and stores, wgmma and its fences, setmaxnreg. The role files (mainloop,
// epilogue, reduction) are written in these words.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: the driver is reached through the runtime)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

// wgmma and setmaxnreg exist only in the sm_90a target; every other target compiles an empty
// kernel body, which the launcher never runs (it checks for sm_90 and TORCH_GEMM_WITH_SM90A).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TORCH_GEMM_SM90A_DEVICE 1
#endif

namespace torch_gemm {
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
// MEMBAR.ALL.GPU before it, which would stall every k-tile.
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
// barriers' initialization, by fence.mbarrier_init). At a block's start the release form's
// MEMBAR.ALL.GPU costs a noticeable part of a small product's block (benchmarks/NOTES.md).
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

// Stream-K's flags in global memory, between blocks on different SMs: the release makes this
// thread's earlier writes (and, after a barrier, its warpgroup's) visible at gpu scope before the
// flag, set to the launch's tag (WgmmaParams::sk_tag); the acquire orders the reader's later loads
// after the writes the flag covers; the reader then clears it for the next launch.
__device__ __forceinline__ void store_flag_release(unsigned long long* flag,
                                                   unsigned long long tag) {
  asm volatile(
      "fence.acq_rel.gpu;\n"
      "st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(flag), "l"(tag)
      : "memory");
}

__device__ __forceinline__ unsigned long long load_flag_acquire(const unsigned long long* flag) {
  unsigned long long value;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(value) : "l"(flag) : "memory");
  return value;
}

__device__ __forceinline__ void clear_flag(unsigned long long* flag) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], 0;" ::"l"(flag) : "memory");
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

// A wgmma's accumulators as asm operands: d[0..63] are %0..%63 (m64n128), d[0..95] %0..%95
// (m64n192), d[0..127] %0..%127 (m64n256); its other inputs follow them. LOW, MID and the rest of
// HIGH are consecutive runs of operand names.
#define TORCH_GEMM_ACC_REGS_LOW "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TORCH_GEMM_ACC_REGS_MID "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define TORCH_GEMM_ACC_REGS_HIGH TORCH_GEMM_ACC_REGS_MID ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
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
#define TORCH_GEMM_ACC_REGS_192 TORCH_GEMM_ACC_REGS_LOW ", " TORCH_GEMM_ACC_REGS_MID
#define TORCH_GEMM_ACC_192 TORCH_GEMM_ACC64(0), TORCH_GEMM_ACC8(64), TORCH_GEMM_ACC8(72), TORCH_GEMM_ACC8(80), TORCH_GEMM_ACC8(88)
// Slim tiles: m64n80 (d[0..39]) and m64n96 (d[0..47]).
#define TORCH_GEMM_ACC_REGS_80 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39"
#define TORCH_GEMM_ACC_REGS_96 TORCH_GEMM_ACC_REGS_80 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define TORCH_GEMM_ACC_80 TORCH_GEMM_ACC8(0), TORCH_GEMM_ACC8(8), TORCH_GEMM_ACC8(16), TORCH_GEMM_ACC8(24), TORCH_GEMM_ACC8(32)
#define TORCH_GEMM_ACC_96 TORCH_GEMM_ACC_80, TORCH_GEMM_ACC8(40)
// The wide slim tile: m64n160 (d[0..79]).
#define TORCH_GEMM_ACC_REGS_160 TORCH_GEMM_ACC_REGS_LOW ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define TORCH_GEMM_ACC_160 TORCH_GEMM_ACC64(0), TORCH_GEMM_ACC8(64), TORCH_GEMM_ACC8(72)
// 64×64 tiles: m64n64 (d[0..31]).
#define TORCH_GEMM_ACC_REGS_64 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TORCH_GEMM_ACC_64 TORCH_GEMM_ACC8(0), TORCH_GEMM_ACC8(8), TORCH_GEMM_ACC8(16), TORCH_GEMM_ACC8(24)

// D (64×kMmaN, fp32, in registers: kMmaN / 2 a thread) = A (64×kMmaK, smem) · B (kMmaK×kMmaN,
// smem) + (accumulate ? D : 0) for one warpgroup, asynchronously (wgmma_commit / wgmma_wait), kMmaN
// 256, 192, 160, 128, 96, 80 or 64 by the accumulators' count. kTransA/kTransB: 1 where the
// operand's shared tile is MN-major (wgmma transposes it on read; 16-bit only). T = float: tf32,
// m64n128 only (3xTF32's promoted tiles), both tiles K-major and already TF32 values (the tensor
// cores drop the low bits of what they read).
template <typename T, int kTransA, int kTransB, int kCount>
__device__ __forceinline__ void wgmma_ss(float (&d)[kCount], uint64_t desc_a, uint64_t desc_b,
                                         int accumulate) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half> ||
                    std::is_same_v<T, float>,
                "16-bit or tf32 operands");
  static_assert(kCount == 128 || kCount == 96 || kCount == 80 || kCount == 64 || kCount == 48 ||
                    kCount == 40 || kCount == 32,
                "m64n256, m64n192, m64n160, m64n128, m64n96, m64n80 or m64n64");
  static_assert(!std::is_same_v<T, float> || (kCount == 64 && kTransA == 0 && kTransB == 0),
                "tf32 from shared memory: m64n128, K-major tiles");
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (std::is_same_v<T, float>) {
    TORCH_GEMM_WGMMA("m64n128k8.f32.tf32.tf32", TORCH_GEMM_ACC_REGS_LOW, TORCH_GEMM_ACC64(0),
                     "%66", "%64, %65, accumulate, 1, 1", "l"(desc_a), "l"(desc_b),
                     "r"(accumulate));
  } else if constexpr (kCount == 128 && kBf16) {
    TORCH_GEMM_WGMMA("m64n256k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_256, TORCH_GEMM_ACC_256,
                     "%132", "%128, %129, accumulate, 1, 1, %130, %131", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 128) {
    TORCH_GEMM_WGMMA("m64n256k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_256, TORCH_GEMM_ACC_256,
                     "%132", "%128, %129, accumulate, 1, 1, %130, %131", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 96 && kBf16) {
    TORCH_GEMM_WGMMA("m64n192k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_192, TORCH_GEMM_ACC_192,
                     "%100", "%96, %97, accumulate, 1, 1, %98, %99", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 96) {
    TORCH_GEMM_WGMMA("m64n192k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_192, TORCH_GEMM_ACC_192,
                     "%100", "%96, %97, accumulate, 1, 1, %98, %99", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 80 && kBf16) {
    TORCH_GEMM_WGMMA("m64n160k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_160, TORCH_GEMM_ACC_160,
                     "%84", "%80, %81, accumulate, 1, 1, %82, %83", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 80) {
    TORCH_GEMM_WGMMA("m64n160k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_160, TORCH_GEMM_ACC_160,
                     "%84", "%80, %81, accumulate, 1, 1, %82, %83", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 48 && kBf16) {
    TORCH_GEMM_WGMMA("m64n96k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_96, TORCH_GEMM_ACC_96,
                     "%52", "%48, %49, accumulate, 1, 1, %50, %51", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 48) {
    TORCH_GEMM_WGMMA("m64n96k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_96, TORCH_GEMM_ACC_96,
                     "%52", "%48, %49, accumulate, 1, 1, %50, %51", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 40 && kBf16) {
    TORCH_GEMM_WGMMA("m64n80k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_80, TORCH_GEMM_ACC_80,
                     "%44", "%40, %41, accumulate, 1, 1, %42, %43", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 40) {
    TORCH_GEMM_WGMMA("m64n80k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_80, TORCH_GEMM_ACC_80,
                     "%44", "%40, %41, accumulate, 1, 1, %42, %43", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 32 && kBf16) {
    TORCH_GEMM_WGMMA("m64n64k16.f32.bf16.bf16", TORCH_GEMM_ACC_REGS_64, TORCH_GEMM_ACC_64,
                     "%36", "%32, %33, accumulate, 1, 1, %34, %35", "l"(desc_a), "l"(desc_b),
                     "n"(kTransA), "n"(kTransB), "r"(accumulate));
  } else if constexpr (kCount == 32) {
    TORCH_GEMM_WGMMA("m64n64k16.f32.f16.f16", TORCH_GEMM_ACC_REGS_64, TORCH_GEMM_ACC_64,
                     "%36", "%32, %33, accumulate, 1, 1, %34, %35", "l"(desc_a), "l"(desc_b),
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

// The tf32 form, A from registers: D (64×kMmaN) = A (64×8, this warpgroup's fragment a, already
// rounded to tf32) · B (8×kMmaN, K-major smem) + (accumulate ? D : 0), kMmaN 256, 192, 160, 128 or
// 64 by the accumulators' count. Thread t of warp w holds A's rows 16w + t/4 (a[0], a[2]) and
// 16w + t/4 + 8 (a[1], a[3]), columns t%4 (a[0], a[1]) and t%4 + 4 (a[2], a[3]): mma.m16n8k8's A
// fragment, one per warp.
template <int kCount>
__device__ __forceinline__ void wgmma_tf32_register_a(float (&d)[kCount], const uint32_t (&a)[4],
                                                      uint64_t desc_b, int accumulate) {
  static_assert(kCount == 128 || kCount == 96 || kCount == 80 || kCount == 64 || kCount == 32,
                "m64n256, m64n192, m64n160, m64n128 or m64n64");
  if constexpr (kCount == 128) {
    TORCH_GEMM_WGMMA("m64n256k8.f32.tf32.tf32", TORCH_GEMM_ACC_REGS_256, TORCH_GEMM_ACC_256,
                     "%133", "{%128, %129, %130, %131}, %132, accumulate, 1, 1", "r"(a[0]),
                     "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else if constexpr (kCount == 96) {
    TORCH_GEMM_WGMMA("m64n192k8.f32.tf32.tf32", TORCH_GEMM_ACC_REGS_192, TORCH_GEMM_ACC_192,
                     "%101", "{%96, %97, %98, %99}, %100, accumulate, 1, 1", "r"(a[0]), "r"(a[1]),
                     "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else if constexpr (kCount == 80) {
    TORCH_GEMM_WGMMA("m64n160k8.f32.tf32.tf32", TORCH_GEMM_ACC_REGS_160, TORCH_GEMM_ACC_160,
                     "%85", "{%80, %81, %82, %83}, %84, accumulate, 1, 1", "r"(a[0]), "r"(a[1]),
                     "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else if constexpr (kCount == 64) {
    TORCH_GEMM_WGMMA("m64n128k8.f32.tf32.tf32", TORCH_GEMM_ACC_REGS_LOW, TORCH_GEMM_ACC64(0),
                     "%69", "{%64, %65, %66, %67}, %68, accumulate, 1, 1", "r"(a[0]), "r"(a[1]),
                     "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  } else {
    TORCH_GEMM_WGMMA("m64n64k8.f32.tf32.tf32", TORCH_GEMM_ACC_REGS_64, TORCH_GEMM_ACC_64, "%37",
                     "{%32, %33, %34, %35}, %36, accumulate, 1, 1", "r"(a[0]), "r"(a[1]),
                     "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
  }
}

#undef TORCH_GEMM_ACC_256
#undef TORCH_GEMM_ACC_192
#undef TORCH_GEMM_ACC_REGS_192
#undef TORCH_GEMM_ACC_96
#undef TORCH_GEMM_ACC_160
#undef TORCH_GEMM_ACC_REGS_160
#undef TORCH_GEMM_ACC_80
#undef TORCH_GEMM_ACC_REGS_96
#undef TORCH_GEMM_ACC_REGS_80
#undef TORCH_GEMM_ACC_64
#undef TORCH_GEMM_ACC_REGS_64
#undef TORCH_GEMM_ACC_REGS_MID
#undef TORCH_GEMM_ACC_REGS_256
#undef TORCH_GEMM_WGMMA
#undef TORCH_GEMM_ACC64
#undef TORCH_GEMM_ACC8
#undef TORCH_GEMM_ACC_REGS_HIGH
#undef TORCH_GEMM_ACC_REGS_LOW

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90
}  // namespace torch_gemm
