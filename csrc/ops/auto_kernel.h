// kernel="auto" on CUDA tensors: the fastest rung for dtype, architecture and shape, as a pure
// function of them (plain C++, in every build: torch_gemm.explain reports it on the CPU too).
#pragma once

#include <string_view>

#include "kernels/gemm_params.h"

namespace torch_gemm {

// Which rule of the table chose the kernel (for explain's reason).
enum class AutoRule {
  kGemv, kDecodeSm80, kDecodeSplitRounds, kWgmmaDecode, kWgmmaBigWeight, kDecodeNMajor, kDecodeTf32, kWgmma, kWgmmaTf32, kWgmmaTf32FewRows, kWgmma3xTf32, kMmaSm80, kNoTensorCores, kFloat64,
  kMultistage, kDecode, kFewTiles, kWarptile
};

struct AutoChoice {
  std::string_view kernel;
  AutoRule rule;
};

// sm: compute capability × 10 of the device; allow_tf32: torch's flag for matmuls;
// with_sm90a: whether the build has wgmma_sm90's sm_90a code; three_tf32: float32 opted into
// 3xTF32 (torch_gemm.set_fp32_precision). p.sm_count: the device's multiprocessors
// (decode_sm80's plan on sm_90 reads them).
AutoChoice choose_auto_kernel(const GemmParams& p, bool allow_tf32, int sm, bool with_sm90a,
                              bool three_tf32 = false);

// The rule in a sentence, for torch_gemm.explain.
const char* describe_auto_choice(AutoRule rule);

}  // namespace torch_gemm
