// The gemm ops on CUDA tensors: device guard, current stream, the dispatch table of rungs, and a
// check of every launch that reports the failing step as this op's, and only what this op caused.
// Compiled only when the CUDA kernels are.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>
#include <torch/library.h>

#include <cstdint>

#include "kernels/grid.cuh"
#include "kernels/launch.h"
#include "ops/auto_kernel.h"
#include "ops/fp32_precision.h"
#include "ops/kernel_registry.h"
#include "ops/mm_common.h"

namespace torch_gemm {
namespace {

constexpr uint32_t kSixteenBit = dtype_bit(DType::kBFloat16) | dtype_bit(DType::kFloat16);

// The ladder, in teaching order. A new rung adds one line here.
const std::array<KernelEntry<GemmLaunchFn>, 11> kCudaKernels{{
    {"naive", kAllDTypes, 0, &launch_gemm_naive, "one thread per output element, operands from global memory"},
    {"smem16", kAllDTypes, 0, &launch_gemm_smem16, "16x16 shared-memory tiles of A and B, one thread per output"},
    {"smem32", kAllDTypes, 0, &launch_gemm_smem32, "32x32 shared-memory tiles of A and B, one thread per output"},
    {"regtile", dtype_bit(DType::kFloat32), 0, &launch_gemm_regtile, "128x128x8 block, 8x8 outputs per thread in registers, float4 loads, A transposed in shared memory"},
    {"warptile", dtype_bit(DType::kFloat32), 0, &launch_gemm_warptile, "128x128x8 block of 32x64 warp tiles, double-buffered shared memory and register fragments"},
    {"multistage", dtype_bit(DType::kFloat32), 80, &launch_gemm_multistage, "warp tiles fed by a 3-4 stage cp.async ring; 128x256 tiles, or 64x64 or (up to 64 rows) 32x128 where those are few, split in K where a cost model of waves says so", &gemm_multistage_workspace_bytes},
    {"gemv", kAllDTypes, 0, &launch_gemm_gemv, "decode: a few rows of A against B streamed once, warps splitting K of each column of B, 16-byte loads, shuffle reduction"},
    {"decode_sm80", kSixteenBit | dtype_bit(DType::kFloat32), 80, &launch_gemm_decode_sm80,
     "decode on the tensor cores (mma.sync m16n8k16; float32 as tf32, m16n8k8, only where torch allows TF32): the weight streamed once as mma.sync's 16-row operand, up to 8 tokens per 8-column tile, K split across warps and blocks, 16-byte loads",
     &gemm_decode_sm80_workspace_bytes, /*float32_as_tf32=*/true},
    {"mma_sm80", kSixteenBit, 80, &launch_gemm_mma_sm80, "tensor cores through mma.sync m16n8k16, ldmatrix from swizzled shared memory, multi-stage cp.async"},
    {"wgmma_sm90", kSixteenBit | dtype_bit(DType::kFloat32), 90, &launch_gemm_wgmma_sm90,
     "Hopper wgmma (m64n256k16; float32 as tf32, m64n256k8, only where torch allows TF32) from 128B-swizzled shared memory filled by TMA on mbarriers, producer/consumer warpgroups on 128x256 tiles (64x256 where those would leave most SMs idle), persistent grid, epilogue through shared memory and TMA stores",
     &gemm_wgmma_sm90_workspace_bytes, /*float32_as_tf32=*/true, /*fuses_row_sum=*/true},
    {"wgmma_sm90_3xtf32", dtype_bit(DType::kFloat32), 90, &launch_gemm_wgmma_sm90_3xtf32,
     "float32 at float32's accuracy on the TF32 tensor cores (3xTF32): each operand split once into TF32 big and small parts, the three products big*small + small*big + big*big run as one wgmma_sm90 TF32 product over three K-long segments, each big*big k-tile's sums added in fp32; few tiles cut K into chunks, a batch of products whose fp32 partials one more kernel adds",
     &gemm_wgmma_sm90_3xtf32_workspace_bytes},
}};

// Compute capability (major*10 + minor) of the current device, asked once per device. Only
// c10/cuda is used here, not ATen/cuda/CUDAContext.h, which pulls in the cuBLAS/cuSPARSE headers
// that a bare toolkit lacks.
int current_sm() {
  const int sm = current_compute_capability();
  if (sm > 0) return sm;
  int device = 0, major = 0, minor = 0;  // the query failed: ask again, and report its error
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

// Whether this build has wgmma_sm90's sm_90a code (kernel="auto" picks it only then).
#ifdef TORCH_GEMM_WITH_SM90A
constexpr bool kWithSm90a = true;
#else
constexpr bool kWithSm90a = false;
#endif

// An error that an earlier CUDA call left in this thread's last-error slot is not this op's: the
// launchers read that slot after each <<<...>>> launch, and would report it as theirs. A
// recoverable one is taken out of the slot and named in a warning; a sticky one (the context is
// unusable, every later call fails) stops the op with a message that says it came before.
void clear_earlier_error(const char* op) {
  const cudaError_t earlier = cudaPeekAtLastError();
  if (earlier == cudaSuccess) return;
  (void)cudaGetLastError();
  const cudaError_t still = cudaPeekAtLastError();
  TORCH_CHECK(still == cudaSuccess, op, ": the CUDA context is unusable: an earlier CUDA call failed "
              "with '", cudaGetErrorString(still), "' before this op ran (not caused by ", op, ")");
  TORCH_WARN(op, ": an earlier CUDA call left the error '", cudaGetErrorString(earlier),
             "' unchecked in this thread; ", op, " cleared it and ran (the error was not its own)");
}

// Multiprocessors of the current device, queried once per device (C10_CUDA_CHECK'd), so that the
// workspace plan and the launcher's plan of one call see the same count.
int current_device_sm_count() {
  const int sms = current_sm_count();
  if (sms > 0) return sms;
  int device = 0, count = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

// Whether torch's CUDA matmuls may use TF32 now, read as its cuBLAS path reads it (NoTF32Guard
// included). From torch 2.9 the setting is fp32_precision (torch.backends.cuda.matmul's, or the
// generic one it inherits); once that has been set, the legacy allowTF32CuBLAS() throws instead of
// answering.
bool torch_allows_tf32() {
  if (at::NoTF32Guard::should_disable_tf32()) return false;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10)
  return at::globalContext().float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL) ==
         at::Float32Precision::TF32;
#elif TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 9
  return at::globalContext().float32Precision("cuda", "matmul") == "tf32";
#else
  return at::globalContext().allowTF32CuBLAS();
#endif
}

void run_cuda(const char* op, c10::string_view kernel, GemmParams& params, const at::Tensor& like) {
  const c10::cuda::CUDAGuard device_guard(like.device());
  clear_earlier_error(op);
  const int sm = current_sm();  // queried once: the auto rule and the table's min_sm both use it
  params.sm_count = current_device_sm_count();
  // TF32 exactly where torch.mm would use it: the flag cuBLAS's path reads.
  const bool allow_tf32 = torch_allows_tf32();
  const auto& entry = find_kernel(
      op, kCudaKernels, kernel,
      choose_auto_kernel(params, allow_tf32, sm, kWithSm90a,
                         fp32_precision() == Fp32Precision::kThreeTf32).kernel,
      params.dtype, like.device(), [sm] { return sm; });
  TORCH_CHECK(!entry.float32_as_tf32 || params.dtype != DType::kFloat32 || allow_tf32, op,
              ": kernel '", kernel, "' multiplies float32 in TF32, which torch does not allow now; "
              "allow it with torch.backends.cuda.matmul.fp32_precision = \"tf32\" (or "
              "torch.backends.cuda.matmul.allow_tf32 = True, or "
              "torch.set_float32_matmul_precision('high')), or pick a CUDA-core kernel");
  drop_unfused_outputs(entry, params);

  // Scratch from the caching allocator on the current stream, freed (for reuse by later work on
  // that stream) when this call returns.
  at::Tensor workspace;
  if (entry.workspace_bytes != nullptr) {
    params.workspace_bytes = entry.workspace_bytes(params);
    if (params.workspace_bytes > 0) {
      workspace = at::empty({params.workspace_bytes}, like.options().dtype(at::kByte));
      params.workspace = workspace.mutable_data_ptr();
    }
  }

  const LaunchStatus status = entry.run(params, c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(status.ok(), op, ": kernel '", entry.name, "' failed for M=", params.M, " N=",
              params.N, " K=", params.K, " batch=", params.batch, " (", to_scalar_type(params.dtype),
              "): ", status.step.empty() ? "launch" : status.step, ": ",
              cudaGetErrorString(status.error));
}

}  // namespace

std::vector<KernelInfo> cuda_kernel_infos() { return describe(kCudaKernels, "cuda"); }

TORCH_LIBRARY_IMPL(gemm, CUDA, m) { register_gemm_ops<&run_cuda>(m); }

}  // namespace torch_gemm
