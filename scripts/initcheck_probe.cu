// Minimal kernels that each write a known output with one feature of wgmma_sm90 added, the host
// copying it back, to find which feature makes compute-sanitizer's initcheck report wgmma_sm90's
// outputs as never written (benchmarks/NOTES.md, "Sanitizers on the tensor-core kernels").
//
// Variants (argv: any of a..h, default all): a <<<>>> launch; b cudaLaunchKernelEx without
// attributes; c a cluster of 2; d setmaxnreg (a producer warpgroup decreasing, two consumer
// warpgroups increasing and writing); e 227 KB of dynamic shared memory staging the output; f a
// TMA store (cp.async.bulk.tensor) from shared memory; g st.global after wgmma's fences; h all of
// c..f together, as wgmma_sm90 launches. Each prints what it ran and whether the values came back.
// Build and run: scripts/initcheck_probe.sh (each variant in its own process under initcheck).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

// Each block writes one 64×64 float box of the output; cluster variants launch two blocks.
constexpr int kBox = 64;
constexpr int kBoxElements = kBox * kBox;
constexpr int kMaxBlocks = 2;
constexpr int kWarpgroup = 128;
// The largest dynamic shared memory an sm_90 block may opt into: 227 KB, as wgmma_sm90 takes.
constexpr int kBigSmemBytes = 227 * 1024;
// setmaxnreg's split of a 384-thread block's 64K registers: 40 for the producer warpgroup, 232 for
// each consumer warpgroup (the counts CUTLASS's warp-specialized kernels use).
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

__device__ float expected(int i) { return static_cast<float>(i % 997) + 1.0f; }

__device__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// This block's box of the output, from `staged` in shared memory, by one TMA store (the thread
// that calls it), waited for before the kernel ends.
__device__ void tma_store_box(const CUtensorMap& map, const float* staged) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(&map)),
      "r"(smem_u32(staged)), "r"(0), "r"(static_cast<int>(blockIdx.x) * kBox)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// The output by plain stores: thread t of `threads` writes elements t, t + threads, ... of the
// block's box.
__device__ void store_box(float* out, int first_thread, int threads) {
  const int t = static_cast<int>(threadIdx.x) - first_thread;
  const int base = static_cast<int>(blockIdx.x) * kBoxElements;
  for (int i = t; i < kBoxElements; i += threads) out[base + i] = expected(base + i);
}

// a, b, c: one warpgroup's plain stores; only the launch differs.
__global__ void __launch_bounds__(kWarpgroup) initcheck_probe_plain(float* out) {
  store_box(out, 0, kWarpgroup);
}

// d: three warpgroups, the first giving registers up and idle, the others taking them and
// writing the output, as wgmma_sm90's producer and consumers do.
__global__ void __launch_bounds__(3 * kWarpgroup, 1) initcheck_probe_setmaxnreg(float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (threadIdx.x < kWarpgroup) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    store_box(out, kWarpgroup, 2 * kWarpgroup);
  }
#endif
}

// e: the box staged in (a corner of) 227 KB of dynamic shared memory, then copied out.
__global__ void __launch_bounds__(kWarpgroup) initcheck_probe_big_smem(float* out) {
  extern __shared__ __align__(128) float staged[];
  const int base = static_cast<int>(blockIdx.x) * kBoxElements;
  for (int i = threadIdx.x; i < kBoxElements; i += kWarpgroup) staged[i] = expected(base + i);
  __syncthreads();
  for (int i = threadIdx.x; i < kBoxElements; i += kWarpgroup) out[base + i] = staged[i];
}

// f: the box written to shared memory, handed to the TMA unit (fence.proxy.async) and stored by
// one thread's cp.async.bulk.tensor, which waits for the store to complete before the block ends.
__global__ void __launch_bounds__(kWarpgroup) initcheck_probe_tma_store(const __grid_constant__ CUtensorMap map) {
  extern __shared__ __align__(128) float staged[];
  const int base = static_cast<int>(blockIdx.x) * kBoxElements;
  for (int i = threadIdx.x; i < kBoxElements; i += kWarpgroup) staged[i] = expected(base + i);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store_box(map, staged);
  }
}

// g: a warpgroup fencing, committing and waiting on an (empty) wgmma group, as the consumers do
// around their wgmmas, before storing from registers.
__global__ void __launch_bounds__(kWarpgroup) initcheck_probe_wgmma_fences(float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
  store_box(out, 0, kWarpgroup);
}

// h: c..f together: a cluster of two 384-thread blocks with 227 KB each, the producer warpgroup
// decreasing its registers, the consumers increasing theirs, staging the box and one consumer
// thread storing it by TMA.
__global__ void __launch_bounds__(3 * kWarpgroup, 1) initcheck_probe_all(const __grid_constant__ CUtensorMap map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) float staged[];
  const int base = static_cast<int>(blockIdx.x) * kBoxElements;
  if (threadIdx.x < kWarpgroup) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    const int t = static_cast<int>(threadIdx.x) - kWarpgroup;
    for (int i = t; i < kBoxElements; i += 2 * kWarpgroup) staged[i] = expected(base + i);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == kWarpgroup) {
    tma_store_box(map, staged);
  }
#endif
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("  %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// The output as a 2-D map of kBox columns by blocks·kBox rows, one box a block.
bool encode_output_map(CUtensorMap* map, float* out, int blocks) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    std::printf("  the driver offers no cuTensorMapEncodeTiled\n");
    return false;
  }
  const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  const cuuint64_t dims[2] = {kBox, static_cast<cuuint64_t>(blocks) * kBox};
  const cuuint64_t strides[1] = {kBox * sizeof(float)};
  const cuuint32_t box[2] = {kBox, kBox}, element_strides[2] = {1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, out, dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) std::printf("  cuTensorMapEncodeTiled returned %d\n", static_cast<int>(r));
  return r == CUDA_SUCCESS;
}

// Launches through cudaLaunchKernelEx, with a cluster of `cluster` blocks unless it is 0.
template <typename Arg>
cudaError_t launch_ex(void (*kernel)(Arg), Arg arg, int blocks, int threads, int smem, int cluster) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute attribute{};
  if (cluster > 0) {
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster, attribute.val.clusterDim.y = 1, attribute.val.clusterDim.z = 1;
    config.attrs = &attribute, config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, kernel, arg);
}

// Runs one variant on a fresh allocation, copies the output back and checks every value.
bool run(char variant) {
  float* out = nullptr;
  const int blocks = (variant == 'c' || variant == 'h') ? kMaxBlocks : 1;
  const size_t bytes = static_cast<size_t>(blocks) * kBoxElements * sizeof(float);
  if (!ok(cudaMalloc(&out, bytes), "cudaMalloc")) return false;
  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  if ((variant == 'f' || variant == 'h') && !encode_output_map(&map, out, blocks)) return false;
  const int box_bytes = kBoxElements * sizeof(float);
  cudaError_t launched = cudaSuccess;
  const char* what = "";
  switch (variant) {
    case 'a':
      what = "<<<1, 128>>> launch, plain stores";
      initcheck_probe_plain<<<1, kWarpgroup>>>(out);
      launched = cudaGetLastError();
      break;
    case 'b':
      what = "cudaLaunchKernelEx without attributes, plain stores";
      launched = launch_ex(initcheck_probe_plain, out, 1, kWarpgroup, 0, 0);
      break;
    case 'c':
      what = "cudaLaunchKernelEx with a cluster of 2, plain stores";
      launched = launch_ex(initcheck_probe_plain, out, kMaxBlocks, kWarpgroup, 0, 2);
      break;
    case 'd':
      what = "setmaxnreg.dec (producer warpgroup) / .inc (2 consumer warpgroups storing)";
      initcheck_probe_setmaxnreg<<<1, 3 * kWarpgroup>>>(out);
      launched = cudaGetLastError();
      break;
    case 'e':
      what = "227 KB dynamic shared memory staging the output";
      launched = cudaFuncSetAttribute(initcheck_probe_big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      kBigSmemBytes);
      if (launched == cudaSuccess) {
        initcheck_probe_big_smem<<<1, kWarpgroup, kBigSmemBytes>>>(out);
        launched = cudaGetLastError();
      }
      break;
    case 'f':
      what = "TMA store (cp.async.bulk.tensor.2d) from shared memory";
      launched = launch_ex(initcheck_probe_tma_store, static_cast<const CUtensorMap>(map), 1,
                           kWarpgroup, box_bytes, 0);
      break;
    case 'g':
      what = "st.global after wgmma.fence / commit_group / wait_group";
      initcheck_probe_wgmma_fences<<<1, kWarpgroup>>>(out);
      launched = cudaGetLastError();
      break;
    case 'h':
      what = "all: cluster of 2, setmaxnreg, 227 KB shared memory, TMA store";
      launched = cudaFuncSetAttribute(initcheck_probe_all, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      kBigSmemBytes);
      if (launched == cudaSuccess) {
        launched = launch_ex(initcheck_probe_all, static_cast<const CUtensorMap>(map), kMaxBlocks,
                             3 * kWarpgroup, kBigSmemBytes, 2);
      }
      break;
    default:
      std::printf("variant %c: unknown (a..h)\n", variant);
      return false;
  }
  std::printf("variant %c: %s\n", variant, what);
  if (!ok(launched, "launch") || !ok(cudaDeviceSynchronize(), "kernel")) return false;
  static float host[kMaxBlocks * kBoxElements];
  if (!ok(cudaMemcpy(host, out, bytes, cudaMemcpyDeviceToHost), "copy back")) return false;
  int wrong = 0;
  for (int i = 0; i < blocks * kBoxElements; ++i) wrong += host[i] != static_cast<float>(i % 997) + 1.0f;
  std::printf("  values %s (%d of %d wrong)\n", wrong ? "WRONG" : "right", wrong, blocks * kBoxElements);
  cudaFree(out);
  return wrong == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* variants = argc > 1 ? argv[1] : "abcdefgh";
  bool all_right = true;
  for (const char* v = variants; *v; ++v) all_right = run(*v) && all_right;
  return all_right ? 0 : 1;
}
