// decode_sm80's shape and its plan of a call (token tiles, warps a column, K split across blocks)
// in plain C++: the launcher follows it, and kernel="auto" on sm_90 reads whether it splits K
// (auto_kernel.cpp), in every build, the CPU-only one included.
#pragma once

#include <cstdint>

#include "kernels/gemm_params.h"

namespace torch_gemm {

struct DecodeSm80Config {
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kMinBlocksPerSm = 2;  // the plan's split assumes this residency
  static constexpr int kColumns = 16;        // output columns (weight rows) per warp: mma's M
  static constexpr int kTokens = 8;          // tokens per token tile: mma's N
  static constexpr int kVectorBytes = 16;    // one copy of a lane
  // Elements per 16-byte copy (8 bf16/fp16, 4 float32 as tf32), and K per step of a warp: its 4
  // lanes of a weight row each copy one vector.
  static constexpr int vec(int64_t element_bytes) { return kVectorBytes / static_cast<int>(element_bytes); }
  static constexpr int chunk(int64_t element_bytes) { return 4 * vec(element_bytes); }
  // Chunks whose loads a warp issues before its mmas, as many as the registers allow. (A cp.async
  // ring and L2 prefetches of the next step both measured slower: benchmarks/NOTES.md.)
  template <int kTokenTiles>
  static constexpr int kUnroll = kTokenTiles <= 2 ? 4 : kTokenTiles == 4 ? 2 : 1;
};

struct DecodePlan {
  int token_tiles = 1;         // 8-token tiles per pass: 1, 2, 4 or 8
  int warps_per_column = 8;    // warps of a block splitting K of one 16-column group
  int64_t blocks_x = 0;        // blocks along N
  int64_t splits = 1;          // K splits across blocks (gridDim.y), summed by a second kernel
  int64_t chunks_per_split = 0;
};

// The plan of p on `sms` multiprocessors.
DecodePlan plan_decode(const GemmParams& p, int64_t sms);

}  // namespace torch_gemm
