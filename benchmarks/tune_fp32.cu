// Tuning harness for the fp32 register-tiled rungs: times tile configurations of the multistage
// kernel (and warptile, the baseline) in one layout (--layout NN|NT|TN|TT, default NN), without
// torch, so that many configurations build in one nvcc call and run in one GPU session. The
// numbers it prints are for choosing a configuration; the record comes from bench_mm.py against
// torch.mm in the same run.
//
//   nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a benchmarks/tune_fp32.cu \
//        -o tune_fp32 && ./tune_fp32 [--layout NT] [--only SUBSTR] [--once] [M,N,K ...]
//
// For each shape: every configuration with split-K off, then the ones marked for split-K with
// 2..8 splits when the output tiles do not fill two blocks per SM. Each time is the median of
// kReps launches, each after an L2 flush; results are checked against warptile's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/multistage.cuh"
#include "kernels/warptile.cuh"
#include "tune_common.cuh"

using namespace torch_gemm;

// The split a variant is timed with: dispatch_operand_layouts (the library's choice of the load
// instantiation from the strides and alignment, so the tuner times what mm_tiled runs) passes a
// Launch only the params, which carry the workspace, and the stream.
SplitK g_split;

template <typename Config>
struct MultistageLaunch {
  template <typename LayoutA, typename LayoutB>
  static LaunchStatus run(const GemmParams& p, cudaStream_t s) {
    return run_multistage<Config, LayoutA, LayoutB>(p, g_split, static_cast<float*>(p.workspace), s);
  }
};

template <typename Config>
LaunchStatus run_config(const GemmParams& p, const SplitK& split, float* ws, cudaStream_t s) {
  g_split = split;
  GemmParams with_workspace = p;
  with_workspace.workspace = ws;
  return dispatch_operand_layouts<MultistageLaunch<Config>>(with_workspace, s);
}

struct WarptileLaunch {
  template <typename LayoutA, typename LayoutB>
  static LaunchStatus run(const GemmParams& p, cudaStream_t s) {
    using C = WarptileConfig;
    dim3 grid;
    grid_for_block_tiles<C>(p, &grid);
    gemm_warptile_kernel<C, LayoutA, LayoutB><<<grid, C::kThreads, 0, s>>>(p);
    return check_launch("gemm_warptile_kernel");
  }
};

LaunchStatus run_warptile(const GemmParams& p, cudaStream_t s) {
  return dispatch_operand_layouts<WarptileLaunch>(p, s);
}

// What kernel="multistage" launches: plan_multistage's configuration and split.
LaunchStatus run_planned(const GemmParams& p, const SplitK&, float* ws, cudaStream_t s) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const MultistagePlan plan = plan_multistage(p, sms);
  switch (plan.tile_id) {
    case MultistageTileId::kLarge:
      return run_config<MultistageLargeConfig>(p, plan.split, ws, s);
    case MultistageTileId::kSmall:
      return run_config<MultistageSmallConfig>(p, plan.split, ws, s);
    case MultistageTileId::kNarrow:
      break;
  }
  return run_config<MultistageNarrowConfig>(p, plan.split, ws, s);
}

struct Variant {
  std::string name;
  int block_m, block_n, block_k;
  bool try_split;
  std::function<LaunchStatus(const GemmParams&, const SplitK&, float*, cudaStream_t)> run;
};

template <typename Config>
Variant variant(const char* name, bool try_split) {
  return {name, Config::kBlockM, Config::kBlockN, Config::kBlockK, try_split, &run_config<Config>};
}

// Warp 64×64 with 16×8 or 8×16 per thread (128 threads per 128×128 block), warptile's 32×64 warp
// with 8×8 per thread (256 threads), and 128×256 / 256×128 blocks of 64×64 warps; "seq" keeps
// the lanes in the straightforward order instead of pairing them (WarpTiling::kPairLanes).
using T128_16x8 = WarpTiling<128, 128, 64, 64, 16, 8>;
using T128_8x8 = WarpTiling<128, 128, 32, 64, 8, 8>;
using T128_8x8_seq = WarpTiling<128, 128, 32, 64, 8, 8, false>;
using T128x256 = WarpTiling<128, 256, 64, 64, 16, 8>;
using T128x256_seq = WarpTiling<128, 256, 64, 64, 16, 8, false>;
using T128x256_8x16 = WarpTiling<128, 256, 64, 64, 8, 16>;
using T256x128 = WarpTiling<256, 128, 64, 64, 16, 8>;
using T64 = WarpTiling<64, 64, 32, 32, 8, 4>;
using T64_seq = WarpTiling<64, 64, 32, 32, 8, 4, false>;
using T32x128 = WarpTiling<32, 128, 32, 32, 8, 4>;

std::vector<Variant> variants() {
  return {
      {"multistage (planned)", 1, 1, 1, false, &run_planned},
      variant<MultistageConfig<T128x256, 16, 3, 1>>("128x256 w64x64 t16x8 k16 s3", false),
      variant<MultistageConfig<T128x256_seq, 16, 3, 1>>("128x256 w64x64 t16x8 k16 s3 seq", false),
      variant<MultistageConfig<T128x256, 8, 3, 1>>("128x256 w64x64 t16x8 k8 s3", false),
      variant<MultistageConfig<T128x256, 8, 4, 1>>("128x256 w64x64 t16x8 k8 s4", false),
      variant<MultistageConfig<T128x256_8x16, 16, 3, 1>>("128x256 w64x64 t8x16 k16 s3", false),
      variant<MultistageConfig<T256x128, 16, 3, 1>>("256x128 w64x64 t16x8 k16 s3", false),
      variant<MultistageConfig<T128_16x8, 16, 3, 2>>("128x128 w64x64 t16x8 k16 s3", true),
      variant<MultistageConfig<T128_8x8, 16, 3, 2>>("128x128 w32x64 t8x8 k16 s3", true),
      variant<MultistageConfig<T128_8x8_seq, 16, 3, 2>>("128x128 w32x64 t8x8 k16 s3 seq", false),
      variant<MultistageConfig<T128_8x8, 8, 4, 2>>("128x128 w32x64 t8x8 k8 s4", false),
      variant<MultistageConfig<T64, 8, 4, 4>>("64x64 w32x32 t8x4 k8 s4", true),
      variant<MultistageConfig<T64_seq, 8, 4, 4>>("64x64 w32x32 t8x4 k8 s4 seq", false),
      variant<MultistageConfig<T64, 16, 3, 4>>("64x64 w32x32 t8x4 k16 s3", true),
      variant<MultistageConfig<T32x128, 16, 4, 4>>("32x128 w32x32 t8x4 k16 s4", true),
  };
}

float median_ms(const std::function<void()>& launch, char* flush, size_t flush_bytes,
                cudaStream_t s) {
  constexpr int kWarmup = 2, kReps = 15;
  for (int i = 0; i < kWarmup; ++i) launch();
  FlushedTimer timer(flush, flush_bytes, s);
  std::vector<float> times;
  for (int i = 0; i < kReps; ++i) times.push_back(timer.time(launch));
  return median(times);
}

// max |x - ref| / max |ref|
float rel_diff(const float* x, const float* ref, int64_t n) {
  std::vector<float> hx(n), href(n);
  CHECK_CUDA(cudaMemcpy(hx.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(href.data(), ref, n * sizeof(float), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(static_cast<double>(hx[i]) - href[i]));
    den = std::max(den, std::fabs(static_cast<double>(href[i])));
    if (std::isnan(hx[i])) return NAN;
  }
  return static_cast<float>(num / (den > 0 ? den : 1));
}

int main(int argc, char** argv) {
  // Arguments: shapes "M,N,K"; --only SUBSTR keeps the configurations whose name contains it;
  // --once launches each kernel once, untimed (for ncu and compute-sanitizer).
  std::vector<std::array<int64_t, 3>> shapes;
  std::string only;
  bool once = false;
  std::string layout = "NN";  // NN, NT, TN or TT: A, B normal (row-major) or transposed
  for (int i = 1; i < argc; ++i) {
    long long m, n, k;
    if (std::string(argv[i]) == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (std::string(argv[i]) == "--layout" && i + 1 < argc) {
      layout = argv[++i];
    } else if (std::string(argv[i]) == "--once") {
      once = true;
    } else if (std::sscanf(argv[i], "%lld,%lld,%lld", &m, &n, &k) == 3) {
      shapes.push_back({m, n, k});
    }
  }
  if (shapes.empty()) {
    shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048}, {4095, 4095, 4095},
              {1000, 1000, 1000}, {512, 512, 512}, {64, 4096, 4096}, {16, 4096, 4096}};
  }
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, sms);

  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  const size_t flush_bytes = size_t{256} << 20;
  char* flush;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  const auto all = variants();

  for (const auto& [M, N, K] : shapes) {
    float *a, *b, *c, *ref, *ws;
    CHECK_CUDA(cudaMalloc(&a, M * K * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&b, K * N * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&c, M * N * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&ref, M * N * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&ws, 8 * M * N * sizeof(float)));
    fill_uniform<<<1024, 256, 0, s>>>(a, M * K, 1);
    fill_uniform<<<1024, 256, 0, s>>>(b, K * N, 2);
    GemmParams p;
    p.M = M, p.N = N, p.K = K;
    p.a = a, p.a_stride_m = K, p.a_stride_k = 1;
    p.b = b, p.b_stride_k = N, p.b_stride_n = 1;
    if (layout[0] == 'T') p.a_stride_m = 1, p.a_stride_k = M;
    if (layout[1] == 'T') p.b_stride_k = 1, p.b_stride_n = K;
    p.c = ref, p.c_stride_m = N, p.c_stride_n = 1;
    const double flop = 2.0 * M * N * K;
    CHECK_CUDA(run_warptile(p, s));
    const auto time = [&](const std::function<void()>& launch) {
      return once ? 1.0f : median_ms(launch, flush, flush_bytes, s);
    };
    const float base_ms = time([&] { run_warptile(p, s); });
    std::printf("\n%s %lld x %lld x %lld\n  %-34s %8.3f ms %7.2f TFLOP/s\n", layout.c_str(), (long long)M,
                (long long)N, (long long)K, "warptile", base_ms, flop / base_ms / 1e9);
    p.c = c;
    for (const auto& v : all) {
      if (v.name.find(only) == std::string::npos) continue;
      const int64_t tiles = ceil_div(M, v.block_m) * ceil_div(N, v.block_n);
      const int64_t k_tiles = ceil_div(K, v.block_k);
      std::vector<int> split_list{1};
      if (v.try_split && tiles < 2 * sms) split_list = {1, 2, 3, 4, 6, 8};
      for (int splits : split_list) {
        SplitK split{splits, ceil_div(k_tiles, splits)};
        if (splits > 1 && split.k_tiles_per_split * (splits - 1) >= k_tiles) continue;
        CHECK_CUDA(cudaMemsetAsync(c, 0xff, M * N * sizeof(float), s));  // NaN
        CHECK_CUDA(v.run(p, split, ws, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        const float err = rel_diff(c, ref, M * N);
        const float ms = time([&] { v.run(p, split, ws, s); });
        std::printf("  %-34s split %d %8.3f ms %7.2f TFLOP/s  x%.3f  diff %.1e%s\n",
                    v.name.c_str(), splits, ms, flop / ms / 1e9, base_ms / ms, err,
                    err < 1e-5f ? "" : "  MISMATCH");
      }
    }
    CHECK_CUDA(cudaFree(a));
    CHECK_CUDA(cudaFree(b));
    CHECK_CUDA(cudaFree(c));
    CHECK_CUDA(cudaFree(ref));
    CHECK_CUDA(cudaFree(ws));
  }
  return 0;
}
