// CPU kernel: blocks of A and B are packed (converted to the accumulator type, laid out for
// unit-stride access whatever the input strides) and multiplied by a register-blocked
// micro-kernel in i-k-j order whose j-loop the compiler turns into vector FMAs.
#include "cpu/gemm_blocked.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <memory>

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

// One (mc, nc) block of C += packed A block · packed B block.
template <typename Acc>
inline void block_product_impl(int64_t mc_pad, int64_t nc_pad, int64_t kc, const Acc* ap, const Acc* bp,
                               Acc* c_block) {
  using Cfg = BlockedConfig<Acc>;
  for (int64_t j = 0; j < nc_pad; j += Cfg::kNr) {      // a (kc, kNr) panel of B stays in L1
    for (int64_t i = 0; i < mc_pad; i += Cfg::kMr) {
      micro_kernel<Acc, Cfg::kMr, Cfg::kNr>(kc, ap + i * kc, bp + j * kc, c_block + i * Cfg::kNc + j,
                                            Cfg::kNc);
    }
  }
}

// The entry points of block_product_impl, compiled for AVX-512, AVX2+FMA and baseline x86-64 and
// chosen at load time (ifunc): a portable wheel still gets the wide vectors.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TORCH_GEMM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TORCH_GEMM_CPU_CLONES
#endif

TORCH_GEMM_CPU_CLONES
void block_product(int64_t mc_pad, int64_t nc_pad, int64_t kc, const float* ap, const float* bp,
                   float* c_block) {
  block_product_impl<float>(mc_pad, nc_pad, kc, ap, bp, c_block);
}

TORCH_GEMM_CPU_CLONES
void block_product(int64_t mc_pad, int64_t nc_pad, int64_t kc, const double* ap, const double* bp,
                   double* c_block) {
  block_product_impl<double>(mc_pad, nc_pad, kc, ap, bp, c_block);
}

// A thread's packing buffers, kept between calls: small products (decode shapes, the backward
// of small layers) would otherwise pay three heap allocations per task. Bounded by the block
// sizes of BlockedConfig (under 400 KB of float, 800 KB of double, per thread).
template <typename Acc>
Acc* thread_scratch(int slot, int64_t elements) {
  struct Buffer {
    std::unique_ptr<Acc[]> data;
    int64_t capacity = 0;
  };
  thread_local Buffer buffers[3];
  Buffer& buffer = buffers[slot];
  if (buffer.capacity < elements) {
    buffer.data.reset(new Acc[elements]);
    buffer.capacity = elements;
  }
  return buffer.data.get();
}

// Multiply-adds a thread should have at least before the product is split between threads:
// below it, waking the pool costs more than the work.
constexpr int64_t kMinTaskWork = int64_t{1} << 16;

template <typename T>
void gemm_blocked_typed(const GemmParams& p) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  using Cfg = BlockedConfig<Acc>;
  const T* bias = static_cast<const T*>(p.bias);

  const int64_t blocks_m = (p.M + Cfg::kMc - 1) / Cfg::kMc;
  const int64_t blocks_n = (p.N + Cfg::kNc - 1) / Cfg::kNc;
  const int64_t blocks = blocks_m * blocks_n;
  // Tasks are (batch element, row block, column block) triples, so skinny shapes (a few rows,
  // many columns) and batches of small products still use every thread.
  // Scratch sized to the problem, not to the block maxima: small products (decode shapes, the
  // backward of tiny layers) would otherwise clear 384 KB per call.
  const int64_t rows_max = std::min(Cfg::kMc, round_up(p.M, Cfg::kMr));
  const int64_t cols_max = std::min(Cfg::kNc, round_up(p.N, Cfg::kNr));
  const int64_t depth_max = std::min(Cfg::kKc, p.K);
  const int64_t task_work = std::max<int64_t>(rows_max * cols_max * std::max<int64_t>(p.K, 1), 1);
  const int64_t grain = std::max<int64_t>(1, kMinTaskWork / task_work);
  at::parallel_for(0, p.batch * blocks, grain, [&](int64_t task_begin, int64_t task_end) {
    Acc* a_pack = thread_scratch<Acc>(0, rows_max * depth_max);
    Acc* b_pack = thread_scratch<Acc>(1, depth_max * cols_max);
    Acc* c_block = thread_scratch<Acc>(2, rows_max * Cfg::kNc);  // row pitch kNc, as the micro-kernel expects
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t z = task / blocks;
      const T* A = static_cast<const T*>(p.a) + z * p.a_stride_batch;
      const T* B = static_cast<const T*>(p.b) + z * p.b_stride_batch;
      T* C = static_cast<T*>(p.c) + z * p.c_stride_batch;
      const int64_t m0 = task % blocks / blocks_n * Cfg::kMc;
      const int64_t n0 = task % blocks_n * Cfg::kNc;
      const int64_t mc = std::min(Cfg::kMc, p.M - m0);
      const int64_t nc = std::min(Cfg::kNc, p.N - n0);
      const int64_t mc_pad = round_up(mc, Cfg::kMr);
      const int64_t nc_pad = round_up(nc, Cfg::kNr);
      for (int64_t i = 0; i < mc_pad; ++i) {  // only the columns the micro-kernel reads
        std::fill(c_block + i * Cfg::kNc, c_block + i * Cfg::kNc + nc_pad, Acc(0));
      }

      for (int64_t k0 = 0; k0 < p.K; k0 += Cfg::kKc) {
        const int64_t kc = std::min(Cfg::kKc, p.K - k0);
        // A block as (mc_pad / kMr) panels of (kc, kMr); rows past M are zero. Unit strides get
        // loops without a multiply or a bound per element: for small products the packing, not
        // the micro-kernel, is most of the time.
        for (int64_t i = 0; i < mc_pad; i += Cfg::kMr) {
          Acc* panel = a_pack + i * kc;
          const int64_t rows = std::min<int64_t>(Cfg::kMr, p.M - m0 - i);
          for (int r = 0; r < Cfg::kMr; ++r) {
            if (r >= rows) {
              for (int64_t k = 0; k < kc; ++k) panel[k * Cfg::kMr + r] = Acc(0);
              continue;
            }
            const T* a_row = A + (m0 + i + r) * p.a_stride_m + k0 * p.a_stride_k;
            if (p.a_stride_k == 1) {
              for (int64_t k = 0; k < kc; ++k) panel[k * Cfg::kMr + r] = static_cast<Acc>(a_row[k]);
            } else {
              for (int64_t k = 0; k < kc; ++k) {
                panel[k * Cfg::kMr + r] = static_cast<Acc>(a_row[k * p.a_stride_k]);
              }
            }
          }
        }
        // B block as (nc_pad / kNr) panels of (kc, kNr); columns past N are zero.
        for (int64_t j = 0; j < nc_pad; j += Cfg::kNr) {
          Acc* panel = b_pack + j * kc;
          const int64_t cols = std::min<int64_t>(Cfg::kNr, p.N - n0 - j);
          for (int64_t k = 0; k < kc; ++k) {
            const T* b_row = B + (k0 + k) * p.b_stride_k + (n0 + j) * p.b_stride_n;
            Acc* dst = panel + k * Cfg::kNr;
            if (p.b_stride_n == 1 && cols == Cfg::kNr) {
              for (int c = 0; c < Cfg::kNr; ++c) dst[c] = static_cast<Acc>(b_row[c]);
            } else {
              for (int64_t c = 0; c < cols; ++c) dst[c] = static_cast<Acc>(b_row[c * p.b_stride_n]);
              for (int64_t c = cols; c < Cfg::kNr; ++c) dst[c] = Acc(0);
            }
          }
        }
        block_product(mc_pad, nc_pad, kc, a_pack, b_pack, c_block);
      }

      // The bias joins in the accumulator type, before the one rounding to T.
      for (int64_t i = 0; i < mc; ++i) {
        for (int64_t j = 0; j < nc; ++j) {
          const Acc b = bias ? static_cast<Acc>(bias[(n0 + j) * p.bias_stride]) : Acc(0);
          C[(m0 + i) * p.c_stride_m + (n0 + j) * p.c_stride_n] =
              static_cast<T>(c_block[i * Cfg::kNc + j] + b);
        }
      }
    }
  });
}

}  // namespace

void gemm_blocked(const GemmParams& params) {
  if (params.M == 0 || params.N == 0 || params.batch == 0) return;
  switch (params.dtype) {
    case DType::kFloat32: return gemm_blocked_typed<float>(params);
    case DType::kFloat64: return gemm_blocked_typed<double>(params);
    case DType::kFloat16: return gemm_blocked_typed<c10::Half>(params);
    case DType::kBFloat16: return gemm_blocked_typed<c10::BFloat16>(params);
  }
}

}  // namespace torch_gemm::cpu
