// Every schema of the gemm namespace, and the Python module stub (torch_gemm._C) that loads the
// registrations and exposes the kernel table and the plans (ops/explain.cpp).
#include <torch/extension.h>
#include <torch/library.h>

#include "ops/explain.h"
#include "ops/fp32_precision.h"
#include "ops/kernel_registry.h"

// `kernel` is a positional argument with a default rather than keyword-only (`*, str kernel`):
// Inductor lowers a custom op through FallbackKernel.create(kernel, *args, **kwargs), so an
// argument named `kernel` that arrives as a keyword collides with that parameter and torch.compile
// fails. Positional, it arrives in args. For the same reason the ops are tagged flexible_layout:
// the default layout constraint re-normalizes defaulted arguments into kwargs, and the kernels take
// any strides anyway. The Python wrappers keep `kernel=` keyword-only.
TORCH_LIBRARY(gemm, m) {
  m.def("mm_tiled(Tensor a, Tensor b, str kernel=\"auto\") -> Tensor", {at::Tag::flexible_layout});
  m.def("bmm_tiled(Tensor a, Tensor b, str kernel=\"auto\") -> Tensor", {at::Tag::flexible_layout});
  m.def("linear_tiled(Tensor x, Tensor weight, Tensor? bias=None, str kernel=\"auto\") -> Tensor",
        {at::Tag::flexible_layout});
  // (a @ b, a.sum(1)): linear_tiled's weight and bias gradients in one call (a = gradᵀ), the row
  // sums taken from the tiles of a that the product reads anyway where the kernel fuses them.
  m.def("mm_tiled_row_sum(Tensor a, Tensor b, str kernel=\"auto\") -> (Tensor, Tensor)",
        {at::Tag::flexible_layout});
  // linear_tiled's weight gradient gradᵀ·x and, where `bias`, its bias gradient (grad summed over
  // the rows), from grad (..., N) and x (..., K) as the forward saw them: the leading dimensions
  // are flattened inside the op, on the local tensors, so a DTensor whose rows are sharded along
  // any leading dimension needs no view (which DTensor may refuse or redistribute). The product
  // and the sums are mm_tiled_row_sum's. A return cannot be optional (torch.library's custom-op
  // rules refuse it; an undefined tensor would reach the fake kernel, compile and DTensor as None):
  // without `bias` the second result is an empty tensor.
  m.def("linear_tiled_weight_grad(Tensor grad, Tensor x, bool bias, str kernel=\"auto\") -> (Tensor, Tensor)",
        {at::Tag::flexible_layout});
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_gemm C++/CUDA extension: registers torch.ops.gemm.*";
  m.def(
      "kernel_table",
      [] {
        pybind11::list rows;
        for (const auto& info : torch_gemm::kernel_table()) {
          pybind11::dict row;
          row["name"] = info.name;
          row["device"] = info.device;
          row["dtypes"] = info.dtypes;
          row["min_sm"] = info.min_sm;
          row["summary"] = info.summary;
          row["tf32"] = info.float32_as_tf32;
          row["row_sum"] = info.fuses_row_sum;
          rows.append(row);
        }
        return rows;
      },
      "Every kernel this build offers: name, device, dtypes, min_sm, summary, tf32, row_sum.");
  m.def(
      "built_with_cuda",
      [] {
#ifdef TORCH_GEMM_WITH_CUDA
        return true;
#else
        return false;
#endif
      },
      "Whether the CUDA kernels were compiled into this build.");
  m.def(
      "set_fp32_precision",
      [](const std::string& mode) {
        TORCH_CHECK(mode == "ieee" || mode == "3xtf32",
                    "set_fp32_precision: mode must be 'ieee' or '3xtf32', got '", mode, "'");
        torch_gemm::set_fp32_precision(mode == "3xtf32" ? torch_gemm::Fp32Precision::kThreeTf32
                                                         : torch_gemm::Fp32Precision::kIeee);
      },
      "Process-wide: 'ieee' (default) or '3xtf32', the float32 precision kernel='auto' gives "
      "float32 products while torch does not allow TF32 (torch_gemm.set_fp32_precision).");
  m.def(
      "get_fp32_precision",
      [] {
        return std::string(torch_gemm::fp32_precision() == torch_gemm::Fp32Precision::kThreeTf32
                               ? "3xtf32" : "ieee");
      },
      "The current torch_gemm float32 precision: 'ieee' or '3xtf32'.");
  torch_gemm::bind_plans(m);
}
