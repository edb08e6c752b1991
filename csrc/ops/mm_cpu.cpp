// The gemm ops on CPU tensors.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "cpu/gemm_blocked.h"
#include "ops/kernel_registry.h"
#include "ops/mm_common.h"

namespace torch_gemm {
namespace {

using CpuGemmFn = void (*)(const GemmParams&);

const std::array<KernelEntry<CpuGemmFn>, 1> kCpuKernels{{
    {"blocked", kAllDTypes, 0, &cpu::gemm_blocked,
     "cache-blocked, packed, vectorized i-k-j micro-kernel, parallel over blocks of C"},
}};

void run_cpu(const char* op, c10::string_view kernel, GemmParams& params, const at::Tensor& like) {
  const auto& entry =
      find_kernel(op, kCpuKernels, kernel, "blocked", params.dtype, like.device(), [] { return 0; });
  drop_unfused_outputs(entry, params);
  entry.run(params);
}

}  // namespace

std::vector<KernelInfo> cpu_kernel_infos() { return describe(kCpuKernels, "cpu"); }

TORCH_LIBRARY_IMPL(gemm, CPU, m) { register_gemm_ops<&run_cpu>(m); }

}  // namespace torch_gemm
