// Autocast for the gemm ops: inside torch.autocast, floating inputs are cast to the autocast dtype
// exactly as for torch.mm, torch.bmm and torch.nn.functional.linear (CastPolicy::lower_precision_fp;
// float64 stays float64; mm_tiled_row_sum and linear_tiled_weight_grad as torch.mm), then the op
// runs with autocast excluded.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <tuple>

namespace torch_gemm {
namespace {

template <typename Result>
using ProductFn = Result(const at::Tensor&, const at::Tensor&, c10::string_view);
using LinearFn = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                            c10::string_view);
using WeightGradFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, bool,
                                                        c10::string_view);

template <typename Fn>
c10::TypedOperatorHandle<Fn> typed_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Fn>();
}

// mm_tiled, bmm_tiled and mm_tiled_row_sum: two operands and a kernel name.
template <typename Result, c10::DeviceType kDevice, const char* kOpName>
Result product_autocast(const at::Tensor& a, const at::Tensor& b, c10::string_view kernel) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  const auto to_type = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  static const auto op = typed_op<ProductFn<Result>>(kOpName);
  return op.call(at::autocast::cached_cast(to_type, a, kDevice),
                 at::autocast::cached_cast(to_type, b, kDevice), kernel);
}

template <c10::DeviceType kDevice>
at::Tensor linear_autocast(const at::Tensor& x, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias, c10::string_view kernel) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  const auto to_type = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  static const auto op = typed_op<LinearFn>("gemm::linear_tiled");
  std::optional<at::Tensor> cast_bias;
  if (bias.has_value() && bias->defined()) {
    cast_bias = at::autocast::cached_cast(to_type, *bias, kDevice);
  }
  return op.call(at::autocast::cached_cast(to_type, x, kDevice),
                 at::autocast::cached_cast(to_type, weight, kDevice), cast_bias, kernel);
}

template <c10::DeviceType kDevice>
std::tuple<at::Tensor, at::Tensor> weight_grad_autocast(const at::Tensor& grad, const at::Tensor& x,
                                                        bool bias, c10::string_view kernel) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  const auto to_type = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  static const auto op = typed_op<WeightGradFn>("gemm::linear_tiled_weight_grad");
  return op.call(at::autocast::cached_cast(to_type, grad, kDevice),
                 at::autocast::cached_cast(to_type, x, kDevice), bias, kernel);
}

constexpr char kMmName[] = "gemm::mm_tiled";
constexpr char kBmmName[] = "gemm::bmm_tiled";
constexpr char kMmRowSumName[] = "gemm::mm_tiled_row_sum";

template <c10::DeviceType kDevice>
void register_autocast(torch::Library& m) {
  m.impl("mm_tiled", &product_autocast<at::Tensor, kDevice, kMmName>);
  m.impl("bmm_tiled", &product_autocast<at::Tensor, kDevice, kBmmName>);
  m.impl("linear_tiled", &linear_autocast<kDevice>);
  m.impl("mm_tiled_row_sum",
         &product_autocast<std::tuple<at::Tensor, at::Tensor>, kDevice, kMmRowSumName>);
  m.impl("linear_tiled_weight_grad", &weight_grad_autocast<kDevice>);
}

}  // namespace

TORCH_LIBRARY_IMPL(gemm, AutocastCUDA, m) { register_autocast<c10::DeviceType::CUDA>(m); }

TORCH_LIBRARY_IMPL(gemm, AutocastCPU, m) { register_autocast<c10::DeviceType::CPU>(m); }

}  // namespace torch_gemm
