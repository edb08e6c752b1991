// Grid arithmetic shared by the launchers: grids within the hardware's limits, grouped
// rasterization for L2 reuse, the SM count, and batches cut into launches.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/device_cache.h"
#include "kernels/gemm_params.h"
#include "kernels/launch_status.h"

namespace torch_gemm {

constexpr int64_t kMaxGridY = 65535;  // hardware limit on gridDim.y; kernels stride past it

inline unsigned grid_y_for(int64_t tiles) {
  return static_cast<unsigned>(std::min(tiles, kMaxGridY));
}

constexpr int64_t kMaxGridX = 2147483647;  // hardware limit on gridDim.x

// A grid of at least `tiles` blocks for linear_tile_index: all on gridDim.x (no 65535 cap on the
// M tiles), spilling into gridDim.y only past 2^31 - 1 tiles. Loop-free kernels keep the int64
// state of a tile loop out of registers. False past 2^31·65535 tiles (a C of exabytes).
inline bool grid_for_tiles(int64_t tiles, dim3* grid) {
  const int64_t x = std::min(tiles, kMaxGridX);
  const int64_t y = ceil_div(tiles, x);
  if (y > kMaxGridY) return false;
  *grid = dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
  return true;
}

// Which tile of C a block (or a persistent block's turn) computes. Consecutive blocks walk down a group of kGroupM tile rows
// before moving one tile column right, so the blocks resident at once share a few row panels of
// A and column panels of B in L2, instead of all of B for one row panel of A. Index: int64_t, or
// int where the launcher has checked that the tile count fits (int division is several times
// cheaper, and a persistent kernel divides once per tile).
template <int kGroupM, typename Index>
__device__ __forceinline__ void grouped_tile(Index tile, Index tiles_m, Index tiles_n, Index* tile_m,
                                             Index* tile_n) {
  const Index tiles_per_group = kGroupM * tiles_n;
  const Index first_m = tile / tiles_per_group * kGroupM;
  // The last group may be short.
  const Index rows = tiles_m - first_m < kGroupM ? tiles_m - first_m : kGroupM;
  const Index in_group = tile % tiles_per_group;
  *tile_m = first_m + in_group % rows;
  *tile_n = in_group / rows;
}

// Multiprocessors of the current device, asked of the runtime once per device and kept; 0 where
// the query fails, its error taken from the last-error slot (a caller that needs the count
// reports the failure: the torch boundary does, before any launcher plans with it).
inline int current_sm_count() {
  static PerDeviceValue cached;
  int device = 0, sms = 0;
  if (!current_device(&device).ok()) return 0;
  const LaunchStatus status = cached.get(device, &sms, [device](int* value) {
    return check_call(cudaDeviceGetAttribute(value, cudaDevAttrMultiProcessorCount, device),
                      "cudaDeviceGetAttribute(MultiProcessorCount)");
  });
  return status.ok() ? sms : 0;
}

// The multiprocessors a launcher plans for: the count the torch boundary put in the params, so
// that the workspace it sized and the launch agree; else the current device's (at least 1).
inline int64_t sm_count_of(const GemmParams& p) {
  return p.sm_count > 0 ? p.sm_count : std::max(current_sm_count(), 1);
}

// The params of batch element `index`: A, B and C moved by the batch strides; bias, shared by the
// batch, stays. Kernels call it first with blockIdx.z (or the batch part of it).
__host__ __device__ inline GemmParams batch_element(GemmParams p, int64_t index) {
  const int64_t bytes = dtype_size(p.dtype);
  p.a = static_cast<const char*>(p.a) + index * p.a_stride_batch * bytes;
  p.b = static_cast<const char*>(p.b) + index * p.b_stride_batch * bytes;
  p.c = static_cast<char*>(p.c) + index * p.c_stride_batch * bytes;
  return p;
}

// Calls launch(chunk) for consecutive chunks of the batch, each at most max_per_launch elements
// (a launcher with blockIdx.z = batch element passes kMaxGridZ): chunk.batch is the chunk's size
// and its pointers start at its first element. Stops at the first error.
template <typename Launch>
LaunchStatus for_each_batch_chunk(const GemmParams& p, int64_t max_per_launch, Launch&& launch) {
  for (int64_t first = 0; first < p.batch; first += max_per_launch) {
    GemmParams chunk = batch_element(p, first);
    chunk.batch = std::min(max_per_launch, p.batch - first);
    LaunchStatus status = launch(chunk);
    if (!status.ok()) return status;
  }
  return {};
}

}  // namespace torch_gemm
