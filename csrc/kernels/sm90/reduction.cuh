// The Hopper kernel's reductions of partial sums: split-K's cluster of blocks adding each other's
// through distributed shared memory (and a tile's several clusters theirs through a global
// workspace), and stream-K's pieces of a tile meeting in the workspace, each added in a fixed
// order so that the result does not depend on timing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sm90/config.cuh"
#include "kernels/sm90/ptx.cuh"

namespace torch_gemm {
namespace sm90 {

#ifdef TORCH_GEMM_SM90A_DEVICE

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

// This thread's first float4 of slot `slot` of p.sk_partials, slots of kCount floats a thread
// (stream-K: every accumulator; split groups: a block's owned ones). A thread's sums lie as
// float4s 128 threads apart, so that a warp's accesses are 512 contiguous bytes.
template <typename Config, int kCount>
__device__ __forceinline__ float4* partial_sums(const WgmmaParams& p, int slot) {
  return reinterpret_cast<float4*>(p.sk_partials + static_cast<int64_t>(slot) * kCount *
                                                       Config::kWarpgroupThreads) +
         threadIdx.x % Config::kWarpgroupThreads;
}

// A consumer's accumulators d[first, first + kCount) as partial sums in slot `slot` (kept in L2
// for the reader on another SM), then the slot's flag set once the whole warpgroup's stores are
// done: the barrier orders them before the leader's fence, which makes them visible at gpu scope
// before the flag. `first` is a constant where inlined (d stays in registers).
template <typename Config, int kCount = Config::kAccumulators>
__device__ __forceinline__ void store_partial_sums(const WgmmaParams& p,
                                                   const float (&d)[Config::kAccumulators],
                                                   int slot, int consumer, bool leader,
                                                   int first = 0) {
  float4* dst = partial_sums<Config, kCount>(p, slot);
#pragma unroll
  for (int i = 0; i < kCount / 4; ++i) {
    const int j = first + 4 * i;
    __stcg(dst + i * Config::kWarpgroupThreads, make_float4(d[j], d[j + 1], d[j + 2], d[j + 3]));
  }
  warpgroup_sync(consumer);
  if (leader) store_flag_release(p.sk_flags + slot, p.sk_tag);
}

// The partial sums of slot `slot` added to d[first, first + kCount), once its flag holds this
// launch's tag (the leader's acquiring load, then the barrier, order every thread's loads after the
// writes). The leader clears the flag: its one reader is done with it, and the next launch over
// this workspace (a graph's replay, with the same tag) must not see it set.
template <typename Config, int kCount = Config::kAccumulators>
__device__ __forceinline__ void add_partial_sums(const WgmmaParams& p,
                                                 float (&d)[Config::kAccumulators], int slot,
                                                 int consumer, bool leader, int first = 0) {
  if (leader) {
    while (load_flag_acquire(p.sk_flags + slot) != p.sk_tag) {
    }
    clear_flag(p.sk_flags + slot);
  }
  warpgroup_sync(consumer);
  const float4* src = partial_sums<Config, kCount>(p, slot);
#pragma unroll
  for (int i = 0; i < kCount / 4; ++i) {
    const int j = first + 4 * i;
    const float4 v = __ldcg(src + i * Config::kWarpgroupThreads);
    d[j] += v.x, d[j + 1] += v.y, d[j + 2] += v.z, d[j + 3] += v.w;
  }
}

// Split-K over several clusters a tile (WgmmaParams::split_groups), after reduce_split: block
// `split` of each cluster holds the sums of the columns it owns over its cluster's slices of K.
// Every group but the last leaves them in its slot (Schedule::group_slot) and returns false; the
// last adds the others' to its own in group order (the same bits whichever cluster finishes
// first) and returns true: it stores the tile. The last group's clusters are the grid's last blocks, so
// each waits only on clusters launched before it, which wait on nothing.
template <typename Config, int kSplitK, typename Schedule>
__device__ __forceinline__ bool reduce_groups(const WgmmaParams& p,
                                              float (&d)[Config::kAccumulators],
                                              const Schedule& schedule, int turn, int consumer,
                                              bool leader) {
  constexpr int kOwned = Config::kAccumulators / kSplitK;
  static_assert(kOwned % 4 == 0, "owned sums move as float4s");
  const bool last = schedule.group == schedule.groups - 1;
#pragma unroll
  for (int owner = 0; owner < kSplitK; ++owner) {
    if (owner != static_cast<int>(schedule.split)) continue;
    if (!last) {
      store_partial_sums<Config, kOwned>(p, d, schedule.group_slot(schedule.group, turn, consumer),
                                         consumer, leader, owner * kOwned);
    } else {
      for (int g = 0; g < schedule.groups - 1; ++g) {
        add_partial_sums<Config, kOwned>(p, d, schedule.group_slot(g, turn, consumer), consumer,
                                         leader, owner * kOwned);
      }
    }
  }
  return last;
}

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90
}  // namespace torch_gemm
