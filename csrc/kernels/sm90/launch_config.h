// What launch.cu and the launch template (launch_config.cuh) share: the launch of one tile
// configuration, declared here and instantiated per configuration in instantiations/, and the
// launcher's host helpers that every configuration uses, defined once in launch.cu.
#pragma once

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/gemm_params.h"
#include "kernels/launch_status.h"
#include "kernels/sm90/heuristics.h"

namespace torch_gemm {
namespace sm90 {

// Repacks what TMA cannot read, encodes the tensor maps and launches the kernel of kConsumers
// consumer warpgroups and kMmaN-column tiles (WgmmaConfig; kPromoted: 3xTF32's) for the plan. The
// configurations launch.cu dispatches to: bf16/fp16 (2 or 1, 256 or 128), (2, 192), (2, 80),
// (2, 96), (2, 160), (1, 64); float (2 or 1, 256 or 128), (2, 192), (2, 160), (1, 64), and
// 3xTF32's (2 or 1, 128). A configuration missing from instantiations/ is an undefined symbol
// when the extension loads.
template <typename T, int kConsumers, int kMmaN, bool kPromoted = false>
LaunchStatus launch_config(const Plan& plan, const GemmParams& caller, cudaStream_t stream);

// The environment's overrides (heuristics.h), read once per process, not per launch.
const Overrides& overrides();

// A launch's tag for the flags of its partial sums (WgmmaParams::sk_tag): nonzero, and never the
// same twice in the process.
unsigned long long next_flag_tag();

// The driver's cuTensorMapEncodeTiled, or nullptr where the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

// Binds the device's primary context to the calling thread where none is current (the
// tensor-map encodes are driver calls).
LaunchStatus bind_primary_context();

// The L2 promotion of an operand's tensor map, from its base and strides.
CUtensorMapL2promotion operand_l2_promotion(const void* base, int64_t row_stride_bytes,
                                            int64_t batch, int64_t batch_stride_bytes);

// The message of a failed tensor-map encode: what it was given.
std::string describe_map(const char* which, CUresult result, const void* address,
                         const cuuint64_t (&dims)[3], const cuuint64_t (&strides)[2],
                         const cuuint32_t (&box)[3]);

}  // namespace sm90
}  // namespace torch_gemm
