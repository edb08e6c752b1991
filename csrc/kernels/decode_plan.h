// decode_sm80's shapes and its plans of a call (token tiles, warps a column, K split across
// blocks; for an N-major weight, the cluster that splits K) in plain C++: the launcher follows
// them, and kernel="auto" on sm_90 reads them (auto_kernel.cpp), in every build, the CPU-only one
// included.
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

// Whether decode_sm80 reads p's operands as it is written to (its launcher runs gemv otherwise):
// bf16/fp16/float32, A and B contiguous along K in whole, aligned 16-byte vectors.
bool decode_vector_loads(const GemmParams& p);

// Whether `plan` (p's) splits K across blocks whose number (times the batch) passes one round of
// slots: a split that evens out the rounds' tail, not one that makes up for too few blocks.
bool decode_splits_past_a_round(const GemmParams& p, const DecodePlan& plan, int64_t sms);

// The kernel for an N-major weight (B[k, n] with unit stride along n: dx = dy·W of a linear),
// bf16/fp16 up to 16 tokens: each warp streams 64 columns of B (8 lanes × 16 bytes of a row) down
// 32 rows a chunk, 4 lanes a row each taking 8 consecutive rows, and packs pairs of rows into
// mma.sync's 16-row operand; a block's 8 warps split K of the same 64 columns, and on sm_90 a
// cluster of `splits` blocks splits it again, adding the blocks' sums through distributed shared
// memory in rank order (no workspace, no second kernel).
struct DecodeNMajorConfig {
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  // Two blocks' registers an SM (at most 128 a thread): the plan's clusters make at most 1.5
  // blocks an SM, and more column blocks than SMs run two at a time.
  static constexpr int kMinBlocksPerSm = 2;
  static constexpr int kColumns = 64;    // columns of C a block: 8 lane groups × 8 elements
  static constexpr int kChunk = 32;      // K a chunk: 4 lanes × 8 rows
  static constexpr int kVectorBytes = 16;
  static constexpr int kVec = kVectorBytes / 2;  // 16-bit elements a copy
  static constexpr int kMaxRows = 16;    // tokens: one or two 8-token tiles
  static constexpr int kMaxSplits = 8;   // the portable cluster size
  // Chunks whose loads a warp issues before its mmas, as the registers allow (8 rows of B a
  // chunk: 32 registers).
  template <int kTokenTiles>
  static constexpr int kUnroll = kTokenTiles == 1 ? 2 : 1;
};

struct DecodeNMajorPlan {
  int token_tiles = 1;   // 8-token tiles: 1 or 2
  int64_t blocks_x = 0;  // blocks along N, 64 columns each
  int splits = 1;        // blocks of a cluster splitting K (gridDim.y): 1, 2, 4 or 8
  int64_t chunks_per_split = 0;
};

// Whether the N-major kernel takes p: bf16/fp16, 1 to 16 rows of A against an N-major B, both
// read as aligned 16-byte vectors (A along K, B along N), K > 0.
bool decode_n_major_layout(const GemmParams& p);

// Whether kernel="auto" on sm_90 takes the N-major kernel for p over wgmma_sm90 (`sms`
// multiprocessors): decode_n_major_layout, a long enough K and a large enough weight, at most two
// blocks a multiprocessor.
bool decode_n_major_preferred(const GemmParams& p, int64_t sms);

// The plan of p (decode_n_major_layout) on `sms` multiprocessors; `clusters`: the
// device launches clusters (sm_90), without which K is not split across blocks. forced_cluster
// (TORCH_GEMM_DECODE_CLUSTER, for tuning; 0: none) replaces the rule's cluster size, rounded down
// to a power of two up to 8 and halved until every warp keeps two chunks.
DecodeNMajorPlan plan_decode_n_major(const GemmParams& p, int64_t sms, bool clusters, int forced_cluster = 0);

// TORCH_GEMM_DECODE_CLUSTER's value (null: unset) as plan_decode_n_major's forced_cluster: its
// leading integer, 0 where that is not positive.
int parse_decode_cluster(const char* value);

}  // namespace torch_gemm
