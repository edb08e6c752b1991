// Argument checks and params building shared by every backend of the gemm ops.
#pragma once

#include <ATen/core/DimVector.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "kernels/gemm_params.h"

namespace torch_gemm {

constexpr const char* kMmTiled = "gemm::mm_tiled";
constexpr const char* kBmmTiled = "gemm::bmm_tiled";
constexpr const char* kLinearTiled = "gemm::linear_tiled";
constexpr const char* kMmTiledRowSum = "gemm::mm_tiled_row_sum";
constexpr const char* kLinearTiledWeightGrad = "gemm::linear_tiled_weight_grad";

// A tensor argument given as None (an undefined tensor): a TORCH_CHECK naming `op` and `name`.
void check_defined(const char* op, const at::Tensor& t, const char* name);

// Checks a and b for C = a @ b (2-D, matching inner dimensions, one supported dtype, one device)
// and returns their dtype. Every failure is a TORCH_CHECK naming `op` and the argument.
DType check_mm_inputs(const char* op, const at::Tensor& a, const at::Tensor& b);

// The same for a batched product: a (B, M, K) and b (B, K, N).
DType check_bmm_inputs(const char* op, const at::Tensor& a, const at::Tensor& b);

// The same for x[..., K] @ weight[N, K]ᵀ + bias[N].
DType check_linear_inputs(const char* op, const at::Tensor& x, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias);

// The same for linear's weight gradient: grad (..., N) and x (..., K) with equal leading
// dimensions (at least 1 dimension each).
DType check_weight_grad_inputs(const char* op, const at::Tensor& grad, const at::Tensor& x);

// The params of c = a @ b over the tensors' own strides and storage offsets: no copies.
GemmParams make_gemm_params(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                            DType dtype);

// The params of c[z] = a[z] @ b[z] for 3-D tensors, batch strides as given.
GemmParams make_bmm_params(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                           DType dtype);

// A linear layer as one product: x2d (M, K) times weight (N, K) read transposed through its
// strides (never copied), bias (if any) added in the epilogue, into `out`, contiguous (..., N)
// with M rows in all.
GemmParams make_linear_params(const at::Tensor& x2d, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, const at::Tensor& out,
                              DType dtype);

// x[..., K] as a 2-D (M, K) tensor: a view where the strides allow one, else a contiguous copy
// (only for leading dimensions that no single stride can walk, e.g. a permuted 4-D x).
at::Tensor flatten_leading(const at::Tensor& x);

// The rows of t[..., C]: the product of its leading sizes (1 for a 1-D t).
int64_t leading_rows(const at::Tensor& t);

// t[..., C] summed over its leading dimensions into a new (C) tensor, by torch's reduction (16-bit
// summed in fp32 and rounded once), over the dimensions as they are: no view that flattens them
// (a DTensor sharded along any of them gives a Partial sum).
at::Tensor sum_leading_dims(const at::Tensor& t);

// The shape of linear_tiled's result: x's leading dimensions, then N.
at::DimVector linear_output_shape(const at::Tensor& x, const at::Tensor& weight);

}  // namespace torch_gemm

namespace torch_gemm {

// How a backend runs one product: resolves `kernel` for params.dtype (and shape) on the device of
// `like`, allocates any workspace with like's options, launches, checks. Messages name `op`. A
// params.row_sum that the resolved kernel does not fuse comes back null (drop_unfused_outputs).
using BackendRunFn = void (*)(const char* op, c10::string_view kernel, GemmParams& params,
                              const at::Tensor& like);

// The ops over a backend: checks, the output, the params, the run. Each backend registers
// these with its own BackendRunFn, so the ops' semantics are written once.
at::Tensor mm_tiled_on(BackendRunFn run, const at::Tensor& a, const at::Tensor& b,
                       c10::string_view kernel);
at::Tensor bmm_tiled_on(BackendRunFn run, const at::Tensor& a, const at::Tensor& b,
                        c10::string_view kernel);
at::Tensor linear_tiled_on(BackendRunFn run, const at::Tensor& x, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias, c10::string_view kernel);
std::tuple<at::Tensor, at::Tensor> mm_tiled_row_sum_on(BackendRunFn run, const at::Tensor& a,
                                                       const at::Tensor& b, c10::string_view kernel);
std::tuple<at::Tensor, at::Tensor> linear_tiled_weight_grad_on(BackendRunFn run, const at::Tensor& grad,
                                                               const at::Tensor& x, bool bias,
                                                               c10::string_view kernel);

// Registers every gemm op for the dispatch key of `m` (TORCH_LIBRARY_IMPL) on backend kRun.
template <BackendRunFn kRun>
void register_gemm_ops(torch::Library& m) {
  m.impl("mm_tiled", [](const at::Tensor& a, const at::Tensor& b, c10::string_view kernel) {
    return mm_tiled_on(kRun, a, b, kernel);
  });
  m.impl("bmm_tiled", [](const at::Tensor& a, const at::Tensor& b, c10::string_view kernel) {
    return bmm_tiled_on(kRun, a, b, kernel);
  });
  m.impl("linear_tiled", [](const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, c10::string_view kernel) {
    return linear_tiled_on(kRun, x, weight, bias, kernel);
  });
  m.impl("mm_tiled_row_sum", [](const at::Tensor& a, const at::Tensor& b, c10::string_view kernel) {
    return mm_tiled_row_sum_on(kRun, a, b, kernel);
  });
  m.impl("linear_tiled_weight_grad", [](const at::Tensor& grad, const at::Tensor& x, bool bias,
                                        c10::string_view kernel) {
    return linear_tiled_weight_grad_on(kRun, grad, x, bias, kernel);
  });
}

}  // namespace torch_gemm
