#include "ops/mm_common.h"

#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>

#include <algorithm>
#include <numeric>

#include "ops/kernel_registry.h"

namespace torch_gemm {
namespace {

// The checks every op makes of two (defined) operands: a supported dtype, the same dtype, the
// same device. Returns the dtype.
DType check_operand_pair(const char* op, const at::Tensor& a, const char* a_name,
                         const at::Tensor& b, const char* b_name) {
  const DType dtype = to_gemm_dtype(op, a_name, a.scalar_type());
  to_gemm_dtype(op, b_name, b.scalar_type());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": ", a_name, " and ", b_name,
              " must have the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), op, ": ", a_name, " and ", b_name,
              " must be on the same device, got ", a.device(), " and ", b.device());
  return dtype;
}

// Defined, and of `dim` dimensions.
void check_dim(const char* op, const at::Tensor& t, const char* name, int64_t dim) {
  check_defined(op, t, name);
  TORCH_CHECK(t.dim() == dim, op, ": ", name, " must be a ", dim, "-D tensor, got a ", t.dim(),
              "-D tensor of shape ", t.sizes());
}

// t[..., C] as the (rows, C) operand of a product, with no view built (each would be a trip through
// the dispatcher): the strides a reshape to (rows, C) gives (at::detail::computeStride, so the
// kernels and the auto rule see what flatten_leading would hand them), or, where no stride walks
// the leading dimensions (a permuted tensor), those of a contiguous copy, which `tensor` holds.
struct RowsOperand {
  at::Tensor tensor;  // t, or its contiguous (rows, C) copy
  int64_t stride_row = 0;
  int64_t stride_col = 0;
};

RowsOperand rows_operand(const at::Tensor& t, int64_t rows) {
  if (t.dim() == 2) return {t, t.stride(0), t.stride(1)};
  const at::DimVector shape{rows, t.size(-1)};
  if (const auto strides = at::detail::computeStride(t.sizes(), t.strides(), shape)) {
    return {t, (*strides)[0], (*strides)[1]};
  }
  at::Tensor copy = t.reshape(shape);
  return {copy, copy.stride(0), copy.stride(1)};
}

}  // namespace

void check_defined(const char* op, const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
}

int64_t leading_rows(const at::Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return rows;
}

at::Tensor sum_leading_dims(const at::Tensor& t) {
  if (t.dim() == 1) return t.clone();  // one row: at::sum over no dimensions would reduce them all
  at::DimVector leading(t.dim() - 1);
  std::iota(leading.begin(), leading.end(), 0);
  return t.sum(leading);
}

DType check_mm_inputs(const char* op, const at::Tensor& a, const at::Tensor& b) {
  check_dim(op, a, "a", 2);
  check_dim(op, b, "b", 2);
  TORCH_CHECK(a.size(1) == b.size(0), op, ": inner dimensions differ: a is ", a.sizes(), " and b is ",
              b.sizes(), " (a.size(1) must equal b.size(0))");
  return check_operand_pair(op, a, "a", b, "b");
}

DType check_bmm_inputs(const char* op, const at::Tensor& a, const at::Tensor& b) {
  check_dim(op, a, "a", 3);
  check_dim(op, b, "b", 3);
  TORCH_CHECK(a.size(0) == b.size(0), op, ": batch sizes differ: a is ", a.sizes(), " and b is ",
              b.sizes(), " (a.size(0) must equal b.size(0))");
  TORCH_CHECK(a.size(2) == b.size(1), op, ": inner dimensions differ: a is ", a.sizes(),
              " and b is ", b.sizes(), " (a.size(2) must equal b.size(1))");
  return check_operand_pair(op, a, "a", b, "b");
}

DType check_linear_inputs(const char* op, const at::Tensor& x, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias) {
  check_defined(op, x, "x");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-D tensor");
  check_dim(op, weight, "weight", 2);
  TORCH_CHECK(x.size(-1) == weight.size(1), op, ": x's last dimension must equal weight.size(1) (",
              "weight is (out_features, in_features)), got x of shape ", x.sizes(),
              " and weight of shape ", weight.sizes());
  const DType dtype = check_operand_pair(op, x, "x", weight, "weight");
  if (bias.has_value() && bias->defined()) {
    check_operand_pair(op, x, "x", *bias, "bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0), op,
                ": bias must be a 1-D tensor of weight.size(0) = ", weight.size(0),
                " elements, got shape ", bias->sizes());
  }
  return dtype;
}

DType check_weight_grad_inputs(const char* op, const at::Tensor& grad, const at::Tensor& x) {
  check_defined(op, grad, "grad");
  check_defined(op, x, "x");
  TORCH_CHECK(grad.dim() >= 1, op, ": grad must have at least 1 dimension, got a 0-D tensor");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-D tensor");
  TORCH_CHECK(grad.dim() == x.dim() &&
                  std::equal(grad.sizes().begin(), grad.sizes().end() - 1, x.sizes().begin()),
              op, ": grad and x must have the same leading dimensions (all but the last), got grad of "
              "shape ", grad.sizes(), " and x of shape ", x.sizes());
  return check_operand_pair(op, grad, "grad", x, "x");
}

GemmParams make_gemm_params(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                            DType dtype) {
  GemmParams p;
  p.M = a.size(0);
  p.N = b.size(1);
  p.K = a.size(1);
  p.dtype = dtype;
  p.a = a.const_data_ptr();
  p.a_stride_m = a.stride(0);
  p.a_stride_k = a.stride(1);
  p.b = b.const_data_ptr();
  p.b_stride_k = b.stride(0);
  p.b_stride_n = b.stride(1);
  p.c = c.mutable_data_ptr();
  p.c_stride_m = c.stride(0);
  p.c_stride_n = c.stride(1);
  return p;
}

GemmParams make_bmm_params(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                           DType dtype) {
  GemmParams p = make_gemm_params(a.select(0, 0), b.select(0, 0), c.select(0, 0), dtype);
  p.batch = a.size(0);
  p.a_stride_batch = a.stride(0);
  p.b_stride_batch = b.stride(0);
  p.c_stride_batch = c.stride(0);
  return p;
}

GemmParams make_linear_params(const at::Tensor& x2d, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, const at::Tensor& out,
                              DType dtype) {
  // Filled from the sizes and strides directly: views (weight.t(), out as 2-D) would cost a trip
  // through the dispatcher each.
  GemmParams p;
  p.M = x2d.size(0);
  p.N = weight.size(0);
  p.K = x2d.size(1);
  p.dtype = dtype;
  p.a = x2d.const_data_ptr();
  p.a_stride_m = x2d.stride(0);
  p.a_stride_k = x2d.stride(1);
  p.b = weight.const_data_ptr();  // B = weightᵀ: B[k, n] = weight[n, k]
  p.b_stride_k = weight.stride(1);
  p.b_stride_n = weight.stride(0);
  p.c = out.mutable_data_ptr();
  p.c_stride_m = p.N;
  p.c_stride_n = 1;
  if (bias.has_value() && bias->defined()) {
    p.bias = bias->const_data_ptr();
    p.bias_stride = bias->stride(0);
  }
  return p;
}

at::Tensor flatten_leading(const at::Tensor& x) {
  if (x.dim() == 2) return x;
  // The product of the leading sizes, not -1: with K == 0 the -1 would be ambiguous.
  return x.reshape({leading_rows(x), x.size(-1)});
}

at::DimVector linear_output_shape(const at::Tensor& x, const at::Tensor& weight) {
  at::DimVector shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(weight.size(0));
  return shape;
}

at::Tensor mm_tiled_on(BackendRunFn run, const at::Tensor& a, const at::Tensor& b,
                       c10::string_view kernel) {
  const DType dtype = check_mm_inputs(kMmTiled, a, b);
  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
  GemmParams params = make_gemm_params(a, b, c, dtype);
  run(kMmTiled, kernel, params, a);
  return c;
}

at::Tensor bmm_tiled_on(BackendRunFn run, const at::Tensor& a, const at::Tensor& b,
                        c10::string_view kernel) {
  const DType dtype = check_bmm_inputs(kBmmTiled, a, b);
  at::Tensor c = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  GemmParams params;
  if (a.size(0) > 0) {
    params = make_bmm_params(a, b, c, dtype);
  } else {
    // No element 0 to take pointers from: a batch of zero products, still run so that the
    // kernel name is checked as for any other call.
    params.M = a.size(1), params.N = b.size(2), params.K = a.size(2);
    params.dtype = dtype;
    params.batch = 0;
  }
  run(kBmmTiled, kernel, params, a);
  return c;
}

at::Tensor linear_tiled_on(BackendRunFn run, const at::Tensor& x, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias, c10::string_view kernel) {
  const DType dtype = check_linear_inputs(kLinearTiled, x, weight, bias);
  const at::Tensor x2d = flatten_leading(x);
  // Allocated in its final shape, contiguous: its rows are the product's rows.
  at::Tensor out = at::empty(linear_output_shape(x, weight), x.options());
  GemmParams params = make_linear_params(x2d, weight, bias, out, dtype);
  run(kLinearTiled, kernel, params, x);
  return out;
}

std::tuple<at::Tensor, at::Tensor> mm_tiled_row_sum_on(BackendRunFn run, const at::Tensor& a,
                                                       const at::Tensor& b, c10::string_view kernel) {
  const DType dtype = check_mm_inputs(kMmTiledRowSum, a, b);
  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
  at::Tensor row_sum = at::empty({a.size(0)}, a.options());
  GemmParams params = make_gemm_params(a, b, c, dtype);
  // With N = 0 no tile runs, so no kernel reads a (GemmParams::row_sum).
  if (params.N > 0) params.row_sum = row_sum.mutable_data_ptr();
  run(kMmTiledRowSum, kernel, params, a);
  // Not fused: torch's reduction, which for 16-bit a also sums in fp32 and rounds once.
  if (params.row_sum == nullptr) at::sum_out(row_sum, a, /*dim=*/1);
  return {c, row_sum};
}

std::tuple<at::Tensor, at::Tensor> linear_tiled_weight_grad_on(BackendRunFn run, const at::Tensor& grad,
                                                               const at::Tensor& x, bool bias,
                                                               c10::string_view kernel) {
  const DType dtype = check_weight_grad_inputs(kLinearTiledWeightGrad, grad, x);
  const int64_t rows = leading_rows(grad);
  const RowsOperand g = rows_operand(grad, rows);
  const RowsOperand xs = rows_operand(x, rows);
  at::Tensor grad_weight = at::empty({grad.size(-1), x.size(-1)}, grad.options());
  at::Tensor grad_bias = at::empty({bias ? grad.size(-1) : 0}, grad.options());  // or the sum below
  // mm_tiled_row_sum(gradᵀ, x) over the rows: A = grad's rows read transposed through their
  // strides, B = x's rows, the row sums of A the bias gradient.
  GemmParams params;
  params.M = grad.size(-1);
  params.N = x.size(-1);
  params.K = rows;
  params.dtype = dtype;
  params.a = g.tensor.const_data_ptr();
  params.a_stride_m = g.stride_col;
  params.a_stride_k = g.stride_row;
  params.b = xs.tensor.const_data_ptr();
  params.b_stride_k = xs.stride_row;
  params.b_stride_n = xs.stride_col;
  params.c = grad_weight.mutable_data_ptr();
  params.c_stride_m = grad_weight.stride(0);
  params.c_stride_n = grad_weight.stride(1);
  // With N = 0 no tile runs, so no kernel reads grad (GemmParams::row_sum).
  if (bias && params.N > 0) params.row_sum = grad_bias.mutable_data_ptr();
  run(kLinearTiledWeightGrad, kernel, params, grad);
  if (bias && params.row_sum == nullptr) grad_bias = sum_leading_dims(grad);
  return {grad_weight, grad_bias};
}

}  // namespace torch_gemm
