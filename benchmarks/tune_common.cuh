// What the torch-free tuning harnesses (tune_fp32.cu, tune_wgmma.cu) share: a CUDA error check
// that stops the program, deterministic operands, and one launch timed after an L2 flush.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>

#include "kernels/launch_status.h"

// A runtime call's error, or a launcher's (LaunchStatus), for CHECK_CUDA.
inline cudaError_t error_of(cudaError_t err) { return err; }
inline cudaError_t error_of(const torch_gemm::LaunchStatus& status) { return status.error; }

#define CHECK_CUDA(expr)                                                              \
  do {                                                                                \
    cudaError_t err_ = error_of(expr);                                                \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr,              \
                   cudaGetErrorString(err_));                                         \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// x[i] in [-1, 1) from a hash of i and the seed: the same operands on every run.
template <typename T>
__global__ void fill_uniform(T* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    x[i] = static_cast<T>(static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f);
  }
}

// Times single launches with one pair of CUDA events: each call first overwrites `flush` (at
// least twice the L2), so the launch finds none of its operands there.
class FlushedTimer {
 public:
  FlushedTimer(void* flush, size_t flush_bytes, cudaStream_t stream)
      : flush_(flush), flush_bytes_(flush_bytes), stream_(stream) {
    CHECK_CUDA(cudaEventCreate(&start_));
    CHECK_CUDA(cudaEventCreate(&stop_));
  }
  ~FlushedTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  FlushedTimer(const FlushedTimer&) = delete;
  FlushedTimer& operator=(const FlushedTimer&) = delete;

  // Milliseconds of launch() alone.
  template <typename Launch>
  float time(Launch&& launch) {
    CHECK_CUDA(cudaMemsetAsync(flush_, ++fill_, flush_bytes_, stream_));
    CHECK_CUDA(cudaEventRecord(start_, stream_));
    launch();
    CHECK_CUDA(cudaEventRecord(stop_, stream_));
    CHECK_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  void* flush_;
  size_t flush_bytes_;
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
  int fill_ = 0;  // a new value each time, so no flush can be skipped as already done
};

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
