// Tuning harness for wgmma_sm90: times the library's launcher (the kernel mm_tiled runs, with its
// repacks and tile choice) against cuBLAS (cublasGemmEx, what torch.mm calls for bf16/fp16, and
// for fp32 with TF32 allowed, as tf32) on the
// same inputs, without torch, so that variants of the kernel build in parallel nvcc calls and run
// in one GPU session. The numbers are for choosing a design; the record comes from bench_mm.py.
//
//   nvcc -std=c++17 -O3 -Icsrc -I$CUBLAS/include -gencode=arch=compute_90a,code=sm_90a \
//        -DTORCH_GEMM_WITH_SM90A benchmarks/tune_wgmma.cu -L$CUBLAS/lib -lcublas -o tune_wgmma
//   ./tune_wgmma [--dtype bf16|fp16|tf32] [--layout NN|NT|TN|TT] [--reps R] [--bias] [--row-sum]
//                [M,N,K ...]
//
// --bias also times ours with a bias of N elements (the fused bias of linear_tiled), --row-sum
// ours with A's row sums (mm_tiled_row_sum), each interleaved with the others, and prints what
// it costs over ours without.
//
// ($CUBLAS: a CUDA toolkit, or the nvidia-cublas wheel's nvidia/cu13.) A variant is a copy of
// csrc/kernels/sm90/ as dir/kernels/sm90/, dir named first on the include path (-Idir): this
// file's #includes then find the copy, and the copy's own includes find the rest in csrc.
//
// A variant may define tune_wgmma_report(const GemmParams&), for what it measures inside the kernel
// (phase clocks, counters): built with -DTUNE_WGMMA_REPORT, the harness calls it once per shape.
//
// Timing: each rep flushes the L2, then times one launch of ours and one of cuBLAS, the order
// alternating between reps, so that both see the same clocks and temperatures over the run (timing
// one after the other, the second runs on a GPU the first has heated). Medians of the reps.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

// The launcher and its plan, compiled into this one translation unit.
#include "kernels/sm90/heuristics.cpp"
#include "kernels/sm90/launch.cu"
#include "tune_common.cuh"

using namespace torch_gemm;

#define CHECK_CUBLAS(expr)                                                            \
  do {                                                                                \
    cublasStatus_t st_ = (expr);                                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                               \
      std::fprintf(stderr, "%s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #expr, \
                   static_cast<int>(st_));                                            \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

template <typename T>
__global__ void max_abs_diff(const T* x, const T* ref, int64_t n, float* out) {
  float diff = 0.0f, scale = 0.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float a = static_cast<float>(x[i]), b = static_cast<float>(ref[i]);
    diff = fmaxf(diff, a == a ? fabsf(a - b) : INFINITY);  // NaN counts as infinitely wrong
    scale = fmaxf(scale, fabsf(b));
  }
  // Non-negative floats order like their bit patterns, so integer atomics take their maximum.
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(diff));
  atomicMax(reinterpret_cast<int*>(out) + 1, __float_as_int(scale));
}

struct Case {
  int64_t M, N, K;
};

// One product in one layout: A (M, K) and B (K, N), each row-major ("N") or the transpose of a
// row-major buffer ("T"), C (M, N) row-major; ours and cuBLAS's outputs, the flush buffer.
template <typename T>
struct Problem {
  Case shape;
  bool trans_a, trans_b;
  T *a, *b, *c_ours, *c_ref, *bias, *row_sum;
  void* workspace = nullptr;
  GemmParams params;

  Problem(Case s, bool ta, bool tb) : shape(s), trans_a(ta), trans_b(tb) {
    CHECK_CUDA(cudaMalloc(&a, s.M * s.K * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&b, s.K * s.N * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&c_ours, s.M * s.N * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&c_ref, s.M * s.N * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&bias, s.N * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&row_sum, s.M * sizeof(T)));
    fill_uniform<<<1024, 256>>>(a, s.M * s.K, 1);
    fill_uniform<<<1024, 256>>>(b, s.K * s.N, 2);
    fill_uniform<<<1024, 256>>>(bias, s.N, 3);
    CHECK_CUDA(cudaGetLastError());
    GemmParams& p = params;
    p.M = s.M, p.N = s.N, p.K = s.K;
    p.dtype = std::is_same_v<T, __nv_bfloat16> ? DType::kBFloat16
              : std::is_same_v<T, __half>       ? DType::kFloat16
                                                : DType::kFloat32;  // read as tf32
    p.a = a, p.b = b, p.c = c_ours;
    p.a_stride_m = ta ? 1 : s.K, p.a_stride_k = ta ? s.M : 1;
    p.b_stride_k = tb ? 1 : s.N, p.b_stride_n = tb ? s.K : 1;
    p.c_stride_m = s.N, p.c_stride_n = 1;
    // Room for the row sums' partials too, and for stream-K's (which only products without row
    // sums take).
    GemmParams with_sums = p;
    with_sums.row_sum = row_sum;
    p.workspace_bytes = std::max(gemm_wgmma_sm90_workspace_bytes(with_sums),
                                 gemm_wgmma_sm90_workspace_bytes(p));
    if (p.workspace_bytes > 0) CHECK_CUDA(cudaMalloc(&workspace, p.workspace_bytes));
    p.workspace = workspace;
  }
  ~Problem() {
    cudaFree(a), cudaFree(b), cudaFree(c_ours), cudaFree(c_ref), cudaFree(bias), cudaFree(row_sum);
    cudaFree(workspace);
  }

  // What ours adds to the product: nothing, the bias, or the row sums.
  enum Extra { kPlain, kBias, kRowSum };

  void ours(cudaStream_t s, Extra extra = kPlain) {
    GemmParams p = params;
    if (extra == kBias) p.bias = bias, p.bias_stride = 1;
    if (extra == kRowSum) p.row_sum = row_sum;
    CHECK_CUDA(launch_gemm_wgmma_sm90(p, s));
  }

  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS's first operand is B.
  void cublas(cublasHandle_t h) {
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t type = std::is_same_v<T, __nv_bfloat16> ? CUDA_R_16BF
                                : std::is_same_v<T, __half>       ? CUDA_R_16F
                                                                  : CUDA_R_32F;
    const cublasComputeType_t compute =
        std::is_same_v<T, float> ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CHECK_CUBLAS(cublasGemmEx(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(shape.N),
                              static_cast<int>(shape.M), static_cast<int>(shape.K), &one, b, type,
                              static_cast<int>(trans_b ? shape.K : shape.N), a, type,
                              static_cast<int>(trans_a ? shape.M : shape.K), &zero, c_ref, type,
                              static_cast<int>(shape.N), compute, CUBLAS_GEMM_DEFAULT));
  }

  // max |ours − cuBLAS| / max |cuBLAS|
  float rel_diff() {
    float* d;
    CHECK_CUDA(cudaMalloc(&d, 2 * sizeof(float)));
    CHECK_CUDA(cudaMemset(d, 0, 2 * sizeof(float)));
    max_abs_diff<<<1024, 256>>>(c_ours, c_ref, shape.M * shape.N, d);
    float h[2];
    CHECK_CUDA(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    cudaFree(d);
    return h[0] / (h[1] > 0 ? h[1] : 1.0f);
  }
};

template <typename T>
void run_case(Case s, const std::string& layout, int reps, bool with_bias, bool with_row_sum,
              cublasHandle_t handle, char* flush, size_t flush_bytes) {
  Problem<T> prob(s, layout[0] == 'T', layout[1] == 'T');
  cudaStream_t stream = nullptr;
  CHECK_CUBLAS(cublasSetStream(handle, stream));
  prob.ours(stream);
  prob.cublas(handle);
  CHECK_CUDA(cudaDeviceSynchronize());
  const float diff = prob.rel_diff();
  for (int i = 0; i < 3; ++i) prob.ours(stream), prob.cublas(handle);

  FlushedTimer timer(flush, flush_bytes, stream);
  using Extra = typename Problem<T>::Extra;
  std::vector<float> ours, theirs, biased, summed;
  for (int r = 0; r < reps; ++r) {
    const auto run_ours = [&] { ours.push_back(timer.time([&] { prob.ours(stream); })); };
    const auto run_theirs = [&] { theirs.push_back(timer.time([&] { prob.cublas(handle); })); };
    const auto run_extras = [&] {
      if (with_bias) biased.push_back(timer.time([&] { prob.ours(stream, Extra::kBias); }));
      if (with_row_sum) summed.push_back(timer.time([&] { prob.ours(stream, Extra::kRowSum); }));
    };
    if (r % 2 == 0) {
      run_ours(), run_theirs(), run_extras();
    } else {
      run_extras(), run_theirs(), run_ours();
    }
  }
  const float ms = median(ours), ms_ref = median(theirs);
  const double flop = 2.0 * s.M * s.N * s.K;
  std::printf("%6lld x %6lld x %6lld %s  ours %7.1f TFLOP/s  cuBLAS %7.1f  ratio %.3f  diff %.1e\n",
              static_cast<long long>(s.M), static_cast<long long>(s.N),
              static_cast<long long>(s.K), layout.c_str(), flop / ms / 1e9, flop / ms_ref / 1e9,
              ms_ref / ms, diff);
  for (const auto& [name, times] : {std::pair{"bias", &biased}, std::pair{"row sums", &summed}}) {
    if (times->empty()) continue;
    const float ms_extra = median(*times);
    std::printf("    with %s %7.1f TFLOP/s  costs %+.2f%% over ours without\n", name,
                flop / ms_extra / 1e9, 100.0 * (ms_extra / ms - 1.0));
  }
#ifdef TUNE_WGMMA_REPORT
  tune_wgmma_report(prob.params);
#endif
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  std::vector<Case> shapes;
  std::string layout = "NN", dtype = "bf16";
  int reps = 30;
  bool with_bias = false, with_row_sum = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    long long m, n, k;
    if (arg == "--layout" && i + 1 < argc) {
      layout = argv[++i];
    } else if (arg == "--dtype" && i + 1 < argc) {
      dtype = argv[++i];
    } else if (arg == "--bias") {
      with_bias = true;
    } else if (arg == "--row-sum") {
      with_row_sum = true;
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (std::sscanf(argv[i], "%lld,%lld,%lld", &m, &n, &k) == 3) {
      shapes.push_back({m, n, k});
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (layout.size() != 2 || (layout[0] != 'N' && layout[0] != 'T') ||
      (layout[1] != 'N' && layout[1] != 'T') || (dtype != "bf16" && dtype != "fp16" && dtype != "tf32")) {
    std::fprintf(stderr, "--layout NN|NT|TN|TT, --dtype bf16|fp16|tf32\n");
    return 2;
  }
  if (shapes.empty()) {
    shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 4096, 4096},
              {8192, 12288, 4096}, {8192, 4096, 14336}, {1000, 1000, 1000}};
  }
  int l2 = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const size_t flush_bytes = 2 * static_cast<size_t>(l2);
  char* flush;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  for (const Case& s : shapes) {
    if (dtype == "bf16") {
      run_case<__nv_bfloat16>(s, layout, reps, with_bias, with_row_sum, handle, flush, flush_bytes);
    } else if (dtype == "fp16") {
      run_case<__half>(s, layout, reps, with_bias, with_row_sum, handle, flush, flush_bytes);
    } else {
      run_case<float>(s, layout, reps, with_bias, with_row_sum, handle, flush, flush_bytes);
    }
  }
  cublasDestroy(handle);
  cudaFree(flush);
  return 0;
}
