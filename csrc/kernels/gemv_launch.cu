// Launcher of the gemv rung: how many rows of A a block takes, how many warps share a column of B
// (by the waves and batches of loads where a lane streams them, else the split whose blocks fill
// the device's rounds best), and whether 16-byte vectors can be used.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/device_cache.h"
#include "kernels/gemv.cuh"
#include "kernels/grid.cuh"
#include "kernels/launch.h"

namespace torch_gemm {
namespace {

// Warps a column of B is shared between at most, and (but for streamed rows, whose split counts
// its batches: streamed_cost) the fewest 16-byte loads (or elements) of it each lane makes: a
// finer split of K would cost more in reductions than it spreads.
constexpr int kMaxWarpsPerColumn = 8;
constexpr int64_t kMinLoadsPerLane = 2;
// A larger split is taken only where it fills the rounds by more than this (of the whole).
constexpr double kEfficiencyMargin = 0.02;

// Whether A's rows and B's columns are contiguous runs of whole 16-byte vectors (start, stride,
// K), so each lane can load kVec elements at once.
template <typename T>
bool vector_loads_ok(const GemmParams& p) {
  constexpr int64_t kVec = GemvVector<T>::kVec;
  const auto aligned = [](const void* ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % GemvConfig::kVectorBytes == 0;
  };
  const auto stride_ok = [](int64_t stride, int64_t extent) { return extent <= 1 || stride % kVec == 0; };
  return p.K % kVec == 0 && (p.a_stride_k == 1 || p.K <= 1) && (p.b_stride_k == 1 || p.K <= 1) &&
         aligned(p.a) && aligned(p.b) && stride_ok(p.a_stride_m, p.M) && stride_ok(p.b_stride_n, p.N) &&
         stride_ok(p.a_stride_batch, p.batch) && stride_ok(p.b_stride_batch, p.batch);
}

template <typename T, int kRows, int kWarpsPerColumn, bool kVector, class Loop>
LaunchStatus launch_shape(const GemmParams& p, cudaStream_t stream) {
  constexpr int64_t kColumnsPerBlock = GemvConfig::kWarps / kWarpsPerColumn * Loop::kColumns;
  const int64_t blocks_x = ceil_div(p.N, kColumnsPerBlock);
  if (blocks_x > kMaxGridX) return refuse("N past the grid's reach");
  return for_each_batch_chunk(p, kMaxGridZ, [&](const GemmParams& chunk) {
    const dim3 grid(static_cast<unsigned>(blocks_x),
                    grid_y_for(ceil_div(p.M, kRows)), static_cast<unsigned>(chunk.batch));
    gemm_gemv_kernel<T, kRows, kWarpsPerColumn, kVector, Loop><<<grid, GemvConfig::kThreads, 0, stream>>>(chunk);
    return check_launch("gemm_gemv_kernel");
  });
}

// Blocks of one instantiation resident on a multiprocessor of the current device, asked once per
// device.
template <typename T, int kRows, int kWarpsPerColumn, bool kVector, class Loop>
LaunchStatus resident_blocks(int* blocks) {
  static PerDeviceValue cached;
  int device = 0;
  LaunchStatus status = current_device(&device);
  if (!status.ok()) return status;
  return cached.get(device, blocks, [](int* value) {
    return check_call(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                          value, gemm_gemv_kernel<T, kRows, kWarpsPerColumn, kVector, Loop>, GemvConfig::kThreads, 0),
                      "cudaOccupancyMaxActiveBlocksPerMultiprocessor of gemm_gemv_kernel");
  });
}

// How well `blocks` equal blocks fill the rounds of `resident` at a time: the last round's empty
// slots are time lost (wave quantization), and so are the slots of a first round never filled.
double round_efficiency(int64_t blocks, int64_t resident) {
  const double rounds = static_cast<double>(blocks) / static_cast<double>(resident);
  return rounds / std::ceil(rounds);
}

// Warps per column where a lane streams its loads of B (GemvLoop::kStreamB, 16-byte vectors):
// the split whose waves of resident blocks times each warp's batches of `unroll` loads is
// least, the larger split where two tie. A lane waits about one memory latency a batch, and a
// wave's warps wait together, so that count is the time's; a batch part empty costs a whole one.
// Over the models grid's weights (float32 at one and two rows, the bf16 ones gemv takes) its
// split's time was within 1 % of the best split's on the geomean (1.16× cuBLAS in float32 at one
// row, min 0.95), where the most warps that leave each lane a whole batch ran 1.12× (min 0.91):
// that split took 4 warps a column for many columns of a K that leaves a lane 10 vectors (N of
// 11008–28672, K of 5120 in float32), where this one keeps them whole (H200, session 55). float32's
// groups of 4 and 8 rows (B streamed, A read as they multiply) take the same split, measured with
// it alone (session 60).
int64_t streamed_cost(int64_t slices, int64_t vectors_per_column, int warps, int unroll, int64_t resident_blocks) {
  const int64_t blocks = ceil_div(slices * warps, int64_t{GemvConfig::kWarps});
  const int64_t waves = ceil_div(blocks, std::max<int64_t>(resident_blocks, 1));
  const int64_t batches = ceil_div(vectors_per_column, int64_t{32} * warps * unroll);
  return waves * std::max<int64_t>(batches, 1);
}

template <typename T, int kRows, bool kVector, class Loop = GemvLoopFor<T, kRows>>
struct SplitChoice {
  // The split of K (warps per column): where B is streamed (GemvLoop::kStreamB) by streamed_cost;
  // else the split that fills the device's rounds best, the smaller one where two fill them as
  // well (fewer partial sums).
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    // (column group, row group) pairs
    const int64_t slices = ceil_div(p.N, int64_t{Loop::kColumns}) * ceil_div(p.M, int64_t{kRows}) * p.batch;
    const int64_t sms = sm_count_of(p);
    int per_sm[4] = {0, 0, 0, 0};
    LaunchStatus status = resident_blocks<T, kRows, 1, kVector, Loop>(&per_sm[0]);
    if (status.ok()) status = resident_blocks<T, kRows, 2, kVector, Loop>(&per_sm[1]);
    if (status.ok()) status = resident_blocks<T, kRows, 4, kVector, Loop>(&per_sm[2]);
    if (status.ok()) status = resident_blocks<T, kRows, 8, kVector, Loop>(&per_sm[3]);
    if (!status.ok()) return status;
    int best = 0;
    if constexpr (kVector && Loop::kStreamB) {
      const int64_t vectors = p.K / GemvVector<T>::kVec;
      int64_t best_cost = 0;
      for (int i = 0, warps = 1; warps <= kMaxWarpsPerColumn; ++i, warps *= 2) {
        if (warps > 1 && vectors < int64_t{32} * warps) break;  // a warp without a vector
        const int64_t cost = streamed_cost(slices, vectors, warps, Loop::kUnroll, sms * per_sm[i]);
        if (i == 0 || cost <= best_cost) best = i, best_cost = cost;
      }
    } else {
      const int64_t loads_per_column = kVector ? p.K / GemvVector<T>::kVec : p.K;
      double best_efficiency = 0.0;
      for (int i = 0, warps = 1; warps <= kMaxWarpsPerColumn; ++i, warps *= 2) {
        if (warps > 1 && loads_per_column < int64_t{32} * warps * kMinLoadsPerLane) break;
        const int64_t blocks = ceil_div(slices * warps, int64_t{GemvConfig::kWarps});
        const double efficiency = round_efficiency(blocks, sms * std::max(per_sm[i], 1));
        if (efficiency > best_efficiency + kEfficiencyMargin) best = i, best_efficiency = efficiency;
      }
    }
    switch (best) {
      case 0: return launch_shape<T, kRows, 1, kVector, Loop>(p, stream);
      case 1: return launch_shape<T, kRows, 2, kVector, Loop>(p, stream);
      case 2: return launch_shape<T, kRows, 4, kVector, Loop>(p, stream);
      default: return launch_shape<T, kRows, kMaxWarpsPerColumn, kVector, Loop>(p, stream);
    }
  }
};

template <typename T, bool kVector>
LaunchStatus launch_rows(const GemmParams& p, cudaStream_t stream) {
  if (p.M <= 1) return SplitChoice<T, 1, kVector>::run(p, stream);
  if (p.M <= 2) return SplitChoice<T, 2, kVector>::run(p, stream);
  if (p.M <= 4) return SplitChoice<T, 4, kVector>::run(p, stream);
  if constexpr (std::is_same_v<T, float> && kVector) {
    if (p.K >= kGemvFourColumnsMinK) return SplitChoice<T, 8, kVector, GemvFourColumnsLoop>::run(p, stream);
  }
  return SplitChoice<T, 8, kVector>::run(p, stream);
}

template <typename T>
struct GemvLauncher {
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    if (p.M == 0 || p.N == 0 || p.batch == 0) return {};
    return vector_loads_ok<T>(p) ? launch_rows<T, true>(p, stream) : launch_rows<T, false>(p, stream);
  }
};

}  // namespace

LaunchStatus launch_gemm_gemv(const GemmParams& params, cudaStream_t stream) {
  return dispatch_dtype<GemvLauncher>(params, stream);
}

}  // namespace torch_gemm
