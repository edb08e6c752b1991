// Facts that hold for the process's life on one device (its SM count, a kernel's shared-memory
// allowance, how many of a kernel's clusters fit at once), asked of the runtime on the first call
// on each device and read without a runtime call after that: launches cost the host less.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "kernels/launch_status.h"

namespace torch_gemm {

constexpr int kMaxCachedDevices = 64;

// One positive int per device, 0 until known. A failed computation is not kept: the next call on
// that device asks again. Devices past kMaxCachedDevices are asked every time.
class PerDeviceValue {
 public:
  // *value on `device`, from compute(int* value) -> LaunchStatus where it is not yet known.
  template <typename Compute>
  LaunchStatus get(int device, int* value, Compute&& compute) {
    const bool cached = device >= 0 && device < kMaxCachedDevices;
    if (cached) {
      const int known = values_[device].load(std::memory_order_acquire);
      if (known > 0) {
        *value = known;
        return {};
      }
    }
    LaunchStatus status = compute(value);
    if (cached && status.ok() && *value > 0) values_[device].store(*value, std::memory_order_release);
    return status;
  }

 private:
  std::atomic<int> values_[kMaxCachedDevices] = {};
};

// The current device (its failure named and cleared from the last-error slot).
inline LaunchStatus current_device(int* device) {
  return check_call(cudaGetDevice(device), "cudaGetDevice");
}

// Compute capability (major * 10 + minor) of the current device, asked once per device; 0 where a
// query fails (its error cleared; the caller reports the refusal).
inline int current_compute_capability() {
  static PerDeviceValue cached;
  int device = 0, sm = 0;
  if (!current_device(&device).ok()) return 0;
  const LaunchStatus status = cached.get(device, &sm, [device](int* value) {
    int major = 0, minor = 0;
    LaunchStatus query =
        check_call(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                   "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
    if (query.ok()) {
      query = check_call(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
                         "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
    }
    *value = major * 10 + minor;
    return query;
  });
  return status.ok() ? sm : 0;
}

// Sets `kernel`'s dynamic shared-memory allowance to `bytes` once per device: the attribute
// belongs to the kernel in the device's context, so it holds for every later launch there.
template <typename Kernel, typename Step>
LaunchStatus allow_shared_memory_once(PerDeviceValue& allowed, Kernel kernel, int bytes, Step&& step) {
  int device = 0;
  LaunchStatus status = current_device(&device);
  if (!status.ok()) return status;
  int done = 0;
  return allowed.get(device, &done, [&](int* value) {
    *value = 1;
    return check_call(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), step);
  });
}

}  // namespace torch_gemm
