// gemm::mm_tiled on CPU tensors.
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

at::Tensor mm_tiled_cpu(const at::Tensor& a, const at::Tensor& b, c10::string_view kernel) {
  const DType dtype = check_mm_inputs(kMmTiled, a, b);
  const auto& entry =
      find_kernel(kMmTiled, kCpuKernels, kernel, "blocked", dtype, a.device(), [] { return 0; });

  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
  entry.run(make_gemm_params(a, b, c, dtype));
  return c;
}

}  // namespace

std::vector<KernelInfo> cpu_kernel_infos() { return describe(kCpuKernels, "cpu"); }

TORCH_LIBRARY_IMPL(gemm, CPU, m) { m.impl("mm_tiled", &mm_tiled_cpu); }

}  // namespace torch_gemm
