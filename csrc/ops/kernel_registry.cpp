#include "ops/kernel_registry.h"

#include <c10/util/StringUtil.h>

#include <algorithm>

namespace torch_gemm {

DType to_gemm_dtype(const char* op, const char* arg, c10::ScalarType scalar_type) {
  switch (scalar_type) {
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    default:
      TORCH_CHECK(false, op, ": ", arg, " has unsupported dtype ", scalar_type,
                  "; supported dtypes are Float, Double, Half and BFloat16");
  }
}

c10::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat64: return c10::ScalarType::Double;
    case DType::kFloat16: return c10::ScalarType::Half;
    case DType::kBFloat16: return c10::ScalarType::BFloat16;
    case DType::kFloat32: break;
  }
  return c10::ScalarType::Float;
}

std::vector<std::string> dtype_name_list(uint32_t dtypes) {
  std::vector<std::string> names;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    if (dtypes & dtype_bit(dtype)) names.emplace_back(c10::toString(to_scalar_type(dtype)));
  }
  return names;
}

std::string dtype_names(uint32_t dtypes) { return c10::Join(", ", dtype_name_list(dtypes)); }

std::string_view canonical_kernel_name(std::string_view requested) {
  if (requested == "smem") return "smem32";
  return requested;
}

std::vector<KernelInfo> kernel_table() {
  std::vector<KernelInfo> rows = cpu_kernel_infos();
  for (auto& row : cuda_kernel_infos()) rows.push_back(std::move(row));
  return rows;
}

std::string names_for_device(const std::string& device, std::optional<DType> dtype) {
  std::vector<std::string> names{"auto"};
  const std::string wanted = dtype ? c10::toString(to_scalar_type(*dtype)) : "";
  for (const auto& row : kernel_table()) {
    const bool takes_dtype =
        !dtype || std::find(row.dtypes.begin(), row.dtypes.end(), wanted) != row.dtypes.end();
    if (row.device == device && takes_dtype) names.push_back(row.name);
  }
  return c10::Join(", ", names);
}

#ifdef TORCH_GEMM_WITH_CUDA
constexpr const char* kBuildNote = "";
#else
constexpr const char* kBuildNote = " (this build of torch_gemm has no CUDA kernels)";
#endif

void fail_unknown_kernel(const char* op, std::string_view requested, std::string_view name,
                         const std::string& device) {
  std::vector<std::string> elsewhere;
  for (const auto& row : kernel_table()) {
    if (row.name == name && row.device != device) elsewhere.push_back(row.device);
  }
  if (!elsewhere.empty()) {
    TORCH_CHECK(false, op, ": kernel '", requested, "' is not available for ", device,
                " tensors (it runs on ", c10::Join(", ", elsewhere), "); kernels for ", device, ": ",
                names_for_device(device));
  }
  TORCH_CHECK(false, op, ": unknown kernel '", requested, "'; kernels for ", device, ": ",
              names_for_device(device), kBuildNote);
}

#ifndef TORCH_GEMM_WITH_CUDA
std::vector<KernelInfo> cuda_kernel_infos() { return {}; }
#endif

}  // namespace torch_gemm
