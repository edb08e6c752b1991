// Probe: which CUDA runtime calls hand back an error that an earlier, unchecked call left in the
// thread's last-error slot? A failed cudaMalloc leaves cudaErrorMemoryAllocation there; then each
// of the calls our launchers make runs once, and what it returned and what the slot holds after
// it are printed. (benchmarks/NOTES.md, issue 25: how an earlier error reached our messages.)
//
//   nvcc -std=c++17 -arch=sm_90a -o /tmp/last_error_probe scripts/last_error_probe.cu && /tmp/last_error_probe
#include <cuda_runtime.h>

#include <cstdio>

__global__ void probe_kernel(int* out) {
  if (out != nullptr) out[threadIdx.x] = threadIdx.x;
}

namespace {

int* g_out = nullptr;

void leave_error() {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, size_t{1} << 60);  // fails: out of memory
  std::printf("  (left pending: %s)\n", cudaGetErrorName(err));
}

void report(const char* call, cudaError_t returned) {
  const cudaError_t slot = cudaPeekAtLastError();
  std::printf("%-48s returned %-28s slot after: %s\n", call, cudaGetErrorName(returned),
              cudaGetErrorName(slot));
  (void)cudaGetLastError();
}

}  // namespace

int main() {
  cudaMalloc(&g_out, 1024 * sizeof(int));
  int device = 0, sms = 0;

  leave_error();
  report("cudaGetDevice", cudaGetDevice(&device));
  leave_error();
  report("cudaDeviceGetAttribute(MultiProcessorCount)",
         cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  leave_error();
  report("cudaFuncSetAttribute(MaxDynamicSharedMemorySize)",
         cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024));

  cudaLaunchConfig_t config{};
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 2, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  config.gridDim = dim3(2), config.blockDim = dim3(32), config.attrs = &cluster, config.numAttrs = 1;
  int slots = 0;
  leave_error();
  report("cudaOccupancyMaxActiveClusters", cudaOccupancyMaxActiveClusters(&slots, probe_kernel, &config));
  leave_error();
  report("cudaLaunchKernelEx", cudaLaunchKernelEx(&config, probe_kernel, g_out));
  leave_error();
  report("cudaMemsetAsync", cudaMemsetAsync(g_out, 0, 16, nullptr));
  leave_error();
  probe_kernel<<<1, 32>>>(g_out);
  report("<<<>>> then cudaGetLastError", cudaGetLastError());
  report("cudaDeviceSynchronize", cudaDeviceSynchronize());
  return 0;
}
