#include "ops/mm_common.h"

#include "ops/kernel_registry.h"

namespace torch_gemm {

DType check_mm_inputs(const char* op, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.defined(), op, ": a is an undefined tensor");
  TORCH_CHECK(b.defined(), op, ": b is an undefined tensor");
  TORCH_CHECK(a.dim() == 2, op, ": a must be a 2-D tensor, got a ", a.dim(), "-D tensor of shape ",
              a.sizes());
  TORCH_CHECK(b.dim() == 2, op, ": b must be a 2-D tensor, got a ", b.dim(), "-D tensor of shape ",
              b.sizes());
  TORCH_CHECK(a.size(1) == b.size(0), op, ": inner dimensions differ: a is ", a.sizes(), " and b is ",
              b.sizes(), " (a.size(1) must equal b.size(0))");
  const DType dtype = to_gemm_dtype(op, "a", a.scalar_type());
  to_gemm_dtype(op, "b", b.scalar_type());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": a and b must have the same dtype, got ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), op, ": a and b must be on the same device, got ", a.device(),
              " and ", b.device());
  return dtype;
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

}  // namespace torch_gemm
