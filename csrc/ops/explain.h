// Python bindings of the plans (kernel="auto"'s rule, wgmma_sm90's heuristics) for
// torch_gemm.explain and the CPU tests, registered on the torch_gemm._C module.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_gemm {

// Adds sm90_plan, auto_kernel and built_with_sm90a to the module.
void bind_plans(pybind11::module_& m);

}  // namespace torch_gemm
