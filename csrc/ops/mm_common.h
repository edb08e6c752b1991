// Argument checks and params building shared by every backend of gemm::mm_tiled.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/gemm_params.h"

namespace torch_gemm {

constexpr const char* kMmTiled = "gemm::mm_tiled";

// Checks a and b for C = a @ b (2-D, matching inner dimensions, one supported dtype, one device)
// and returns their dtype. Every failure is a TORCH_CHECK naming `op` and the argument.
DType check_mm_inputs(const char* op, const at::Tensor& a, const at::Tensor& b);

// The params of c = a @ b over the tensors' own strides and storage offsets: no copies.
GemmParams make_gemm_params(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                            DType dtype);

}  // namespace torch_gemm
