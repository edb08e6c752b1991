// Autocast for the gemm ops: inside torch.autocast, floating inputs are cast to the autocast dtype
// exactly as for torch.mm (CastPolicy::lower_precision_fp; float64 stays float64), then the op
// runs with autocast excluded.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torch_gemm {
namespace {

template <c10::DeviceType kDevice>
at::Tensor mm_tiled_autocast(const at::Tensor& a, const at::Tensor& b, c10::string_view kernel) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  const auto to_type = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("gemm::mm_tiled", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>();
  return op.call(at::autocast::cached_cast(to_type, a, kDevice),
                 at::autocast::cached_cast(to_type, b, kDevice), kernel);
}

}  // namespace

TORCH_LIBRARY_IMPL(gemm, AutocastCUDA, m) {
  m.impl("mm_tiled", &mm_tiled_autocast<c10::DeviceType::CUDA>);
}

TORCH_LIBRARY_IMPL(gemm, AutocastCPU, m) {
  m.impl("mm_tiled", &mm_tiled_autocast<c10::DeviceType::CPU>);
}

}  // namespace torch_gemm
