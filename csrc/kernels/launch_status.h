// What a launcher returns: the CUDA error of the step that failed and which step, with its values,
// so that a failure reads from the op's message alone; each failing call's error is taken from the
// last-error slot where it is reported, never left for the next caller. No torch headers here.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <type_traits>
#include <utility>

namespace torch_gemm {

struct LaunchStatus {
  cudaError_t error = cudaSuccess;
  std::string step;  // empty on success

  LaunchStatus() = default;
  LaunchStatus(cudaError_t err, std::string what) : error(err), step(std::move(what)) {}
  bool ok() const { return error == cudaSuccess; }
};

// The status of a runtime call that returns its own error: on failure the error is also cleared
// from the thread's last-error slot, where the runtime records it too. `step` names the call: a
// string, or a callable that builds one, called only on failure (no string work per launch).
template <typename Step>
LaunchStatus check_call(cudaError_t err, Step&& step) {
  if (err == cudaSuccess) return {};
  (void)cudaGetLastError();
  if constexpr (std::is_invocable_v<Step>) {
    return {err, std::string(step())};
  } else {
    return {err, std::string(step)};
  }
}

// The status of the <<<...>>> launch just made: such a launch reports only through the
// last-error slot. The torch boundary clears that slot before calling a launcher, so what is
// read here is this launch's (or, for a sticky error, the context's).
inline LaunchStatus check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return {};
  return {err, std::string("launch of ") + kernel};
}

// A launcher's refusal of parameters it cannot run, before any CUDA call.
inline LaunchStatus refuse(const std::string& why) { return {cudaErrorInvalidValue, why}; }

}  // namespace torch_gemm
