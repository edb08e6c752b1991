// The float32 precision setting (fp32_precision.h): one atomic, read by every op call's auto rule.
#include "ops/fp32_precision.h"

#include <atomic>

namespace torch_gemm {
namespace {

std::atomic<Fp32Precision> g_precision{Fp32Precision::kIeee};

}  // namespace

Fp32Precision fp32_precision() { return g_precision.load(std::memory_order_relaxed); }

void set_fp32_precision(Fp32Precision precision) {
  g_precision.store(precision, std::memory_order_relaxed);
}

}  // namespace torch_gemm
