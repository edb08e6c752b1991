// The CPU kernel of gemm::mm_tiled: cache-blocked, packed, vectorized, parallel over blocks of C.
#pragma once

#include "kernels/gemm_params.h"

namespace torch_gemm::cpu {

// C = A·B (+ bias) for every batch element, the four dtypes of GemmParams, fp32 accumulation for
// the 16-bit types. Parallel over at::parallel_for's threads; any strides.
void gemm_blocked(const GemmParams& params);

}  // namespace torch_gemm::cpu
