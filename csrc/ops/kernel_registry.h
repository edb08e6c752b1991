// The kernels each backend offers, and how a `kernel=` argument is resolved to one of them.
// Every error names the op and says what was asked for and what is available.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/gemm_params.h"

namespace torch_gemm {

constexpr uint32_t dtype_bit(DType dtype) { return 1u << static_cast<int>(dtype); }
constexpr uint32_t kAllDTypes = dtype_bit(DType::kFloat32) | dtype_bit(DType::kFloat64) |
                                dtype_bit(DType::kFloat16) | dtype_bit(DType::kBFloat16);

// One row of a backend's dispatch table. Fn is the backend's entry point type.
template <typename Fn>
struct KernelEntry {
  const char* name;
  uint32_t dtypes;  // bit set of DType it is instantiated for
  int min_sm;       // lowest compute capability (major*10 + minor) it runs on; 0 on the CPU
  Fn run;
  const char* summary;
  // Bytes of scratch memory a call needs (GemmParams::workspace); null for kernels that need none.
  int64_t (*workspace_bytes)(const GemmParams&) = nullptr;
  // Multiplies float32 operands as TF32 on the tensor cores: allowed only where torch allows
  // TF32 for matmuls (torch.backends.cuda.matmul.allow_tf32, float32 matmul precision "high").
  bool float32_as_tf32 = false;
  // Writes GemmParams::row_sum (gemm::mm_tiled_row_sum) where it is set; for other kernels the
  // op sums a's rows itself.
  bool fuses_row_sum = false;
};

// What Python sees of a table row (torch_gemm.kernel_table()).
struct KernelInfo {
  std::string name;
  std::string device;  // "cpu" or "cuda"
  std::vector<std::string> dtypes;
  int min_sm;
  std::string summary;
  bool float32_as_tf32;
  bool fuses_row_sum;
};

std::vector<KernelInfo> kernel_table();

// Maps the dtypes the kernels take onto DType; anything else is a TORCH_CHECK naming the op.
DType to_gemm_dtype(const char* op, const char* arg, c10::ScalarType scalar_type);
c10::ScalarType to_scalar_type(DType dtype);

// Names accepted in place of a table name ("smem" is the 32×32 tile).
std::string_view canonical_kernel_name(std::string_view requested);

// {"Float", "Double", ...} for a dtype bit set, and the same joined with ", ".
std::vector<std::string> dtype_name_list(uint32_t dtypes);
std::string dtype_names(uint32_t dtypes);

// Table rows as KernelInfo, for kernel_table() and for error messages.
template <typename Fn, size_t N>
std::vector<KernelInfo> describe(const std::array<KernelEntry<Fn>, N>& table, const char* device) {
  std::vector<KernelInfo> rows;
  for (const auto& entry : table) {
    rows.push_back({entry.name, device, dtype_name_list(entry.dtypes), entry.min_sm, entry.summary,
                    entry.float32_as_tf32, entry.fuses_row_sum});
  }
  return rows;
}

// The rows each backend contributes to kernel_table(); the CUDA one is empty in a CPU-only build.
std::vector<KernelInfo> cpu_kernel_infos();
std::vector<KernelInfo> cuda_kernel_infos();

// Lists the names a device offers, optionally only those taking `dtype`, for messages:
// "auto, naive, smem16, smem32".
std::string names_for_device(const std::string& device, std::optional<DType> dtype = std::nullopt);

// Throws the message for a kernel name that `device` does not offer.
// `name` is `requested` with aliases resolved.
[[noreturn]] void fail_unknown_kernel(const char* op, std::string_view requested, std::string_view name,
                                      const std::string& device);

// Finds the kernel the user asked for in a backend's table: `requested` as given, "auto"
// replaced by `auto_choice`, aliases by their table names. Checks that it takes this dtype and,
// for rows with a minimum architecture, that device_sm() (major*10 + minor, queried only then)
// meets it. Messages quote the name as the user wrote it.
template <typename Fn, size_t N, typename SmFn>
const KernelEntry<Fn>& find_kernel(const char* op, const std::array<KernelEntry<Fn>, N>& table,
                                   std::string_view requested, std::string_view auto_choice,
                                   DType dtype, const c10::Device& device, SmFn&& device_sm) {
  const std::string_view name = requested == "auto" ? auto_choice : canonical_kernel_name(requested);
  // Built only for a message: the lookup itself runs on every call.
  const auto device_type = [&device] { return c10::DeviceTypeName(device.type(), /*lower_case=*/true); };
  for (const auto& entry : table) {
    if (name != entry.name) continue;
    TORCH_CHECK(entry.dtypes & dtype_bit(dtype), op, ": kernel '", requested, "' does not support dtype ",
                to_scalar_type(dtype), " (it takes ", dtype_names(entry.dtypes), "); kernels for ",
                device_type(), " that do: ", names_for_device(device_type(), dtype));
    if (entry.min_sm > 0) {
      const int sm = device_sm();
      TORCH_CHECK(sm >= entry.min_sm, op, ": kernel '", requested, "' needs compute capability ",
                  entry.min_sm / 10, ".", entry.min_sm % 10, " or newer, but ", device, " has ",
                  sm / 10, ".", sm % 10);
    }
    return entry;
  }
  fail_unknown_kernel(op, requested, name, device_type());
}

// Clears what params asks of `entry` that it does not compute (a GemmParams::row_sum it does not
// fuse), so that after the launch params says what was written and the op computes the rest.
template <typename Fn>
void drop_unfused_outputs(const KernelEntry<Fn>& entry, GemmParams& params) {
  if (!entry.fuses_row_sum) params.row_sum = nullptr;
}

}  // namespace torch_gemm
