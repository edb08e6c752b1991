// Every schema of the gemm namespace, and the Python module stub (torch_gemm._C) that loads the
// registrations and exposes the kernel table.
#include <torch/extension.h>
#include <torch/library.h>

#include "ops/kernel_registry.h"

TORCH_LIBRARY(gemm, m) {
  m.def("mm_tiled(Tensor a, Tensor b, *, str kernel=\"auto\") -> Tensor");
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
          rows.append(row);
        }
        return rows;
      },
      "Every kernel this build offers: name, device, dtypes, min_sm, summary.");
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
}
