// Launcher of the wgmma_sm90 rung: the plan (heuristics.h) with the device's facts and the
// environment read once, and the dispatch to its tile configuration's launch (launch_config.cuh,
// compiled once per configuration in instantiations/); the driver calls the tensor maps need.
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>

#include "kernels/device_cache.h"
#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "kernels/numeric.cuh"
#include "kernels/sm90/heuristics.h"
#include "kernels/sm90/launch_config.h"

namespace torch_gemm {
namespace sm90 {
namespace {

// A driver function, looked up once through the runtime (the extension does not link libcuda);
// nullptr where the driver lacks it.
template <typename Fn>
Fn driver_function(const char* name, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();  // reported by each caller that finds no function
    fn = nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

// "CUDA_ERROR_INVALID_CONTEXT" for 201: the driver's name of a driver call's result.
std::string driver_error_name(CUresult result) {
  static const auto name_of = driver_function<PFN_cuGetErrorName_v6000>("cuGetErrorName", 6000);
  const char* name = nullptr;
  if (name_of == nullptr || name_of(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUresult " + std::to_string(static_cast<int>(result));
  }
  return name;
}

}  // namespace

// The environment's overrides (heuristics.h), read once per process, not per launch.
const Overrides& overrides() {
  static const Overrides read = parse_overrides(
      std::getenv("TORCH_GEMM_WGMMA_SHAPE"), std::getenv("TORCH_GEMM_WGMMA_CLUSTER"),
      std::getenv("TORCH_GEMM_WGMMA_STREAM_K"), std::getenv("TORCH_GEMM_WGMMA_MAX_CLUSTERS"),
      std::getenv("TORCH_GEMM_WGMMA_STORE"), std::getenv("TORCH_GEMM_WGMMA_FLAGS"),
      std::getenv("TORCH_GEMM_WGMMA_TF32_PLAN"));
  return read;
}

// splitmix64 of a per-process random salt plus a launch count: a bijection of the count, so no
// two launches of the process share a tag, and a tag is as unlikely as any 64-bit value to be
// what reused memory holds. Never 0, a cleared flag.
unsigned long long next_flag_tag() {
  static const uint64_t salt = [] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ uint64_t{device()};
  }();
  static std::atomic<uint64_t> launches{0};
  const uint64_t count = launches.fetch_add(1, std::memory_order_relaxed) + 1;
  uint64_t z = salt + count * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z == 0 ? 1 : z;
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encode =
      driver_function<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);
  return encode;
}

// The tensor-map encodes are driver calls, and a driver call needs a context current on the
// calling thread: runtime calls bind the device's primary context to a thread lazily, driver
// calls do not. A thread whose first CUDA work is one of our products has none (autograd's device
// thread running a backward; any thread torch set the device on without a runtime call, since
// c10::cuda::SetDevice skips cudaSetDevice where the device is already the current one), and there
// cuTensorMapEncodeTiled returns CUDA_ERROR_INVALID_CONTEXT. cudaSetDevice binds the primary
// context (CUDA 12 and newer), as the runtime's first call on the thread would.
LaunchStatus bind_primary_context() {
  static const auto current_context = driver_function<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
  if (current_context == nullptr) return refuse("the driver offers no cuCtxGetCurrent");
  CUcontext context = nullptr;
  if (current_context(&context) == CUDA_SUCCESS && context != nullptr) return {};
  int device = 0;
  LaunchStatus status = current_device(&device);
  if (!status.ok()) return status;
  status = check_call(cudaSetDevice(device), [device] {
    return "cudaSetDevice(" + std::to_string(device) +
           ") (binding the primary context to this thread for the tensor-map encodes)";
  });
  if (!status.ok()) return status;
  const CUresult result = current_context(&context);
  if (result != CUDA_SUCCESS || context == nullptr) {
    return refuse("no CUDA context current on this thread after cudaSetDevice(" +
                  std::to_string(device) + "): cuCtxGetCurrent returned " + driver_error_name(result));
  }
  return {};
}

// What a TMA load of an operand fetches into L2 at least. Where every row starts on a 256-byte
// boundary, 256 bytes: a box row's 128 and the next 128 of the same row, which the next k-tile
// (or the tile's next box of columns) reads, so that a weight streamed once from memory comes in
// longer runs: forwards against a weight ran faster with it, the other products as fast. Where
// rows start elsewhere, 128: a 256-byte fetch straddles lines that belong to other boxes, and
// such products ran slower with it (benchmarks/NOTES.md, sessions 11 and 27).
constexpr int64_t kWideL2PromotionBytes = 256;

CUtensorMapL2promotion operand_l2_promotion(const void* base, int64_t row_stride_bytes,
                                            int64_t batch, int64_t batch_stride_bytes) {
  const bool rows_on_lines =
      reinterpret_cast<uintptr_t>(base) % kWideL2PromotionBytes == 0 &&
      row_stride_bytes % kWideL2PromotionBytes == 0 &&
      (batch <= 1 || batch_stride_bytes % kWideL2PromotionBytes == 0);
  return rows_on_lines ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
}

// What a tensor-map encode was given, for the message of one that failed.
std::string describe_map(const char* which, CUresult result, const void* address,
                         const cuuint64_t (&dims)[3], const cuuint64_t (&strides)[2],
                         const cuuint32_t (&box)[3]) {
  return std::string("tensor-map encode of ") + which + " (cuTensorMapEncodeTiled returned " +
         driver_error_name(result) + ") for address " +
         std::to_string(reinterpret_cast<uintptr_t>(address)) + ", dims [" +
         std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + ", " + std::to_string(dims[2]) +
         "], byte strides [" + std::to_string(strides[0]) + ", " + std::to_string(strides[1]) +
         "], box [" + std::to_string(box[0]) + ", " + std::to_string(box[1]) + ", " +
         std::to_string(box[2]) + "]";
}

}  // namespace sm90

namespace {

template <typename T>
struct WgmmaLauncher {
  static LaunchStatus run(const GemmParams& p, cudaStream_t stream) {
    if constexpr (std::is_same_v<T, double>) {
      return refuse("this rung takes bfloat16, float16 and float32 (as tf32) only");
    } else {
      if (p.M == 0 || p.N == 0 || p.batch == 0) return {};
      const sm90::Plan plan = sm90::plan_call(p, sm_count_of(p), sm90::overrides());
      if (!plan.fits_int) return refuse("extents past 32 bits");
      // 256-, 192-, 128- and 64-column tiles and 128×160 ones: 16-bit and tf32 (128: 3xTF32's
      // promoted ones too); 128×80 and 128×96: 16-bit.
      if (plan.shape.block_n == kWgmmaMidBlockN) {
        if (plan.shape.consumers != 2) return refuse("128x192 tiles take two consumers");
        return sm90::launch_config<T, 2, kWgmmaMidBlockN>(plan, p, stream);
      }
      if (is_slim_block_n(plan.shape.block_n)) {
        if (plan.shape.consumers != 2) return refuse("slim tiles take two consumers");
        if (plan.shape.block_n == kWgmmaSlimBlockN160) {
          return sm90::launch_config<T, 2, kWgmmaSlimBlockN160>(plan, p, stream);
        }
        if constexpr (std::is_same_v<T, float>) {
          return refuse("slim 128x80 and 128x96 tiles take bf16/fp16 only");
        } else {
          return plan.shape.block_n == kWgmmaSlimBlockN80
                     ? sm90::launch_config<T, 2, kWgmmaSlimBlockN80>(plan, p, stream)
                     : sm90::launch_config<T, 2, kWgmmaSlimBlockN96>(plan, p, stream);
        }
      }
      if (plan.shape.block_n == kWgmmaTinyBlockN) {
        if (plan.shape.consumers != 1) return refuse("64x64 tiles take one consumer");
        return sm90::launch_config<T, 1, kWgmmaTinyBlockN>(plan, p, stream);
      }
      if (plan.shape.block_n == kWgmmaSmallBlockN) {
        if constexpr (std::is_same_v<T, float>) {
          if (plan.problem.tf32_promoted) {
            return plan.shape.consumers == 1
                       ? sm90::launch_config<T, 1, kWgmmaSmallBlockN, true>(plan, p, stream)
                       : sm90::launch_config<T, 2, kWgmmaSmallBlockN, true>(plan, p, stream);
          }
        }
        return plan.shape.consumers == 1 ? sm90::launch_config<T, 1, kWgmmaSmallBlockN>(plan, p, stream)
                                         : sm90::launch_config<T, 2, kWgmmaSmallBlockN>(plan, p, stream);
      }
      return plan.shape.consumers == 1 ? sm90::launch_config<T, 1, kWgmmaBlockN>(plan, p, stream)
                                       : sm90::launch_config<T, 2, kWgmmaBlockN>(plan, p, stream);
    }
  }
};

// wgmma runs on compute capability 9.0 only (sm_90a code), and only in builds that compiled it.
bool device_runs_sm90a() {
#ifdef TORCH_GEMM_WITH_SM90A
  return current_compute_capability() == 90;  // 0 where the query fails: the caller refuses
#else
  return false;
#endif
}

}  // namespace

LaunchStatus launch_gemm_wgmma_sm90(const GemmParams& params, cudaStream_t stream) {
  if (!device_runs_sm90a()) {
    return {cudaErrorInvalidDeviceFunction, "device check: not a compute capability 9.0 device"};
  }
  return dispatch_dtype<WgmmaLauncher>(params, stream);
}

int64_t gemm_wgmma_sm90_workspace_bytes(const GemmParams& params) {
  if (params.M == 0 || params.N == 0 || params.batch == 0) return 0;
  if (params.dtype == DType::kFloat64) return 0;
  return sm90::plan_call(params, sm_count_of(params), sm90::overrides()).product.workspace_bytes;
}

}  // namespace torch_gemm
