// CPU kernel: blocks of A and B are packed (converted to the accumulator type, laid out for
// unit-stride access whatever the input strides) and multiplied by a register-blocked
// micro-kernel in i-k-j order whose j-loop the compiler turns into vector FMAs.
#include "cpu/gemm_blocked.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <vector>

namespace torch_gemm::cpu {
namespace {

template <typename Acc>
struct BlockedConfig {
  static constexpr int kMr = 4;                   // rows of C held in registers by the micro-kernel
  static constexpr int kNr = 64 / sizeof(Acc);    // columns: one 64-byte row, 16 floats or 8 doubles
  static constexpr int64_t kMc = 64;              // rows of C per task: the packed A block (kMc, kKc)
  static constexpr int64_t kNc = 256;             // columns of C per task: packed B block (kKc, kNc)
  static constexpr int64_t kKc = 256;             // depth of one packed block pair, sized for L2
  static_assert(kMc % kMr == 0 && kNc % kNr == 0, "blocks are whole micro-tiles");
};

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// c[kMr][kNr] += ap[kc][kMr] · bp[kc][kNr]. acc is a fixed-size array indexed by constants only,
// so it lives in vector registers. The j-loop is the vectorized one (i-k-j order); without the
// simd pragma GCC vectorizes across the kMr rows instead, with 4-wide broadcasts, 10x slower.
template <typename Acc, int kMr, int kNr>
inline void micro_kernel(int64_t kc, const Acc* __restrict__ ap, const Acc* __restrict__ bp,
                         Acc* __restrict__ c, int64_t ldc) {
  Acc acc[kMr][kNr];
  for (int r = 0; r < kMr; ++r)
    for (int j = 0; j < kNr; ++j) acc[r][j] = c[r * ldc + j];
  for (int64_t k = 0; k < kc; ++k) {
    const Acc* b = bp + k * kNr;
    for (int r = 0; r < kMr; ++r) {
      const Acc a = ap[k * kMr + r];
#pragma omp simd
      for (int j = 0; j < kNr; ++j) acc[r][j] += a * b[j];
    }
  }
  for (int r = 0; r < kMr; ++r)
    for (int j = 0; j < kNr; ++j) c[r * ldc + j] = acc[r][j];
}

// One (mc, nc) block of C += packed A block · packed B block. Compiled for AVX-512, AVX2+FMA and
// baseline x86-64, chosen at load time (ifunc): a portable wheel still gets the wide vectors.
template <typename Acc>
inline void block_product(int64_t mc_pad, int64_t nc_pad, int64_t kc, const Acc* ap, const Acc* bp,
                          Acc* c_block) {
  using Cfg = BlockedConfig<Acc>;
  for (int64_t j = 0; j < nc_pad; j += Cfg::kNr) {      // a (kc, kNr) panel of B stays in L1
    for (int64_t i = 0; i < mc_pad; i += Cfg::kMr) {
      micro_kernel<Acc, Cfg::kMr, Cfg::kNr>(kc, ap + i * kc, bp + j * kc, c_block + i * Cfg::kNc + j,
                                            Cfg::kNc);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TORCH_GEMM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TORCH_GEMM_CPU_CLONES
#endif

TORCH_GEMM_CPU_CLONES
void block_product_f32(int64_t mc_pad, int64_t nc_pad, int64_t kc, const float* ap, const float* bp,
                       float* c_block) {
  block_product<float>(mc_pad, nc_pad, kc, ap, bp, c_block);
}

TORCH_GEMM_CPU_CLONES
void block_product_f64(int64_t mc_pad, int64_t nc_pad, int64_t kc, const double* ap,
                       const double* bp, double* c_block) {
  block_product<double>(mc_pad, nc_pad, kc, ap, bp, c_block);
}

inline void block_product_dispatch(int64_t mc_pad, int64_t nc_pad, int64_t kc, const float* ap,
                                   const float* bp, float* c) {
  block_product_f32(mc_pad, nc_pad, kc, ap, bp, c);
}
inline void block_product_dispatch(int64_t mc_pad, int64_t nc_pad, int64_t kc, const double* ap,
                                   const double* bp, double* c) {
  block_product_f64(mc_pad, nc_pad, kc, ap, bp, c);
}

template <typename T>
void gemm_blocked_typed(const GemmParams& p) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  using Cfg = BlockedConfig<Acc>;
  const T* A = static_cast<const T*>(p.a);
  const T* B = static_cast<const T*>(p.b);
  T* C = static_cast<T*>(p.c);

  const int64_t blocks_m = (p.M + Cfg::kMc - 1) / Cfg::kMc;
  const int64_t blocks_n = (p.N + Cfg::kNc - 1) / Cfg::kNc;
  // Tasks are (row block, column block) pairs, so skinny shapes (a few rows, many columns) still
  // use every thread.
  at::parallel_for(0, blocks_m * blocks_n, 1, [&](int64_t task_begin, int64_t task_end) {
    std::vector<Acc> a_pack(Cfg::kMc * Cfg::kKc);
    std::vector<Acc> b_pack(Cfg::kKc * Cfg::kNc);
    std::vector<Acc> c_block(Cfg::kMc * Cfg::kNc);
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t m0 = task / blocks_n * Cfg::kMc;
      const int64_t n0 = task % blocks_n * Cfg::kNc;
      const int64_t mc = std::min(Cfg::kMc, p.M - m0);
      const int64_t nc = std::min(Cfg::kNc, p.N - n0);
      const int64_t mc_pad = round_up(mc, Cfg::kMr);
      const int64_t nc_pad = round_up(nc, Cfg::kNr);
      std::fill(c_block.begin(), c_block.end(), Acc(0));

      for (int64_t k0 = 0; k0 < p.K; k0 += Cfg::kKc) {
        const int64_t kc = std::min(Cfg::kKc, p.K - k0);
        // A block as (mc_pad / kMr) panels of (kc, kMr); rows past M are zero.
        for (int64_t i = 0; i < mc_pad; i += Cfg::kMr) {
          Acc* panel = a_pack.data() + i * kc;
          for (int64_t k = 0; k < kc; ++k) {
            for (int r = 0; r < Cfg::kMr; ++r) {
              const int64_t m = m0 + i + r;
              panel[k * Cfg::kMr + r] =
                  m < p.M ? static_cast<Acc>(A[m * p.a_stride_m + (k0 + k) * p.a_stride_k]) : Acc(0);
            }
          }
        }
        // B block as (nc_pad / kNr) panels of (kc, kNr); columns past N are zero.
        for (int64_t j = 0; j < nc_pad; j += Cfg::kNr) {
          Acc* panel = b_pack.data() + j * kc;
          for (int64_t k = 0; k < kc; ++k) {
            const T* b_row = B + (k0 + k) * p.b_stride_k;
            for (int c = 0; c < Cfg::kNr; ++c) {
              const int64_t n = n0 + j + c;
              panel[k * Cfg::kNr + c] = n < p.N ? static_cast<Acc>(b_row[n * p.b_stride_n]) : Acc(0);
            }
          }
        }
        block_product_dispatch(mc_pad, nc_pad, kc, a_pack.data(), b_pack.data(), c_block.data());
      }

      for (int64_t i = 0; i < mc; ++i) {
        for (int64_t j = 0; j < nc; ++j) {
          C[(m0 + i) * p.c_stride_m + (n0 + j) * p.c_stride_n] =
              static_cast<T>(c_block[i * Cfg::kNc + j]);
        }
      }
    }
  });
}

}  // namespace

void gemm_blocked(const GemmParams& params) {
  if (params.M == 0 || params.N == 0) return;
  switch (params.dtype) {
    case DType::kFloat32: return gemm_blocked_typed<float>(params);
    case DType::kFloat64: return gemm_blocked_typed<double>(params);
    case DType::kFloat16: return gemm_blocked_typed<c10::Half>(params);
    case DType::kBFloat16: return gemm_blocked_typed<c10::BFloat16>(params);
  }
}

}  // namespace torch_gemm::cpu
