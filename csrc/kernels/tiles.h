// The tiles and row limits of the CUDA rungs that host-side rules count against the SMs
// (kernel="auto", the sm90 plan), in plain C++: the CPU-only build compiles those rules too, so
// that torch_gemm.explain and their tests run without CUDA.
#pragma once

#include <cstdint>
#include <limits>

namespace torch_gemm {

// warptile's block tile, (kBlockM, kBlockN): kernel="auto" counts its tiles against the SMs.
constexpr int64_t kWarptileBlockM = 128;
constexpr int64_t kWarptileBlockN = 128;

// wgmma_sm90's block tiles (kernel="auto" runs tf32 on them where M and N fill 128 rows): 128×256
// with two consumer warpgroups; 64-row tiles (kWgmmaNarrowBlockM, one consumer) where the 128-row
// ones would not fill half the SMs; 64×128 (kWgmmaSmallBlockN, 16-bit) where even those would
// not; 128×192 (kWgmmaMidBlockN, 16-bit) where its tiles make fewer rounds of the SMs than the
// 256- or 128-column ones. sm90/heuristics.h has the rules.
constexpr int64_t kWgmmaBlockM = 128;
constexpr int64_t kWgmmaNarrowBlockM = 64;
constexpr int64_t kWgmmaBlockN = 256;
constexpr int64_t kWgmmaSmallBlockN = 128;
constexpr int64_t kWgmmaMidBlockN = 192;

// Rows of A at or below which kernel="auto" takes gemv where B's columns are contiguous: for the
// 16-bit types one (from two rows on, wgmma's tiles were mostly faster), for float32 and float64
// two (benchmarks/NOTES.md).
constexpr int64_t kGemvMaxRows16Bit = 1;
constexpr int64_t kGemvMaxRowsWide = 2;
// Rows of A (tokens) up to which kernel="auto" takes decode_sm80 for bf16/fp16 against a B with
// contiguous columns, from sm_80: its token tiles hold 8 and 16 tokens at the weight's pace,
// where wgmma's 64-row tiles and gemv's CUDA-core sums fell behind (benchmarks/NOTES.md).
constexpr int64_t kDecodeMaxRows = 16;
// Except on small weights, where one launch counts for more than the tensor cores: gemv keeps up
// to `rows` rows of a weight of at most `elements` (N·K) elements; decode_sm80 would split K
// across blocks and add a second kernel.
struct GemvOverDecode {
  int64_t rows, elements;
};
constexpr GemvOverDecode kGemvOverDecode[] = {{1, (int64_t{1} << 24) - 1}, {2, int64_t{1} << 22}, {8, int64_t{1} << 20}};
// float32 as tf32 (where torch allows TF32) up to kDecodeMaxRowsTf32 rows on decode_sm80's m16n8k8
// tiles, measured on sm_90 only: there it streamed weights at 0.8-1.24x torch's pace where
// wgmma's 64-row tiles ran at 0.3-0.8x, except against weights of more than
// kTf32DecodeMaxColumnTiles 256-column tiles, where wgmma's tiles fill the SMs and ran as fast or
// faster; past 32 rows its eight token tiles fell far behind. gemv keeps two rows (any weight, in
// float32) and the small weights of kGemvOverDecodeTf32.
constexpr int64_t kDecodeMaxRowsTf32 = 32;
constexpr int64_t kTf32DecodeMaxColumnTiles = 48;
constexpr GemvOverDecode kGemvOverDecodeTf32[] = {{kGemvMaxRowsWide, std::numeric_limits<int64_t>::max()},
                                                  {4, int64_t{1} << 23}, {8, int64_t{1} << 20}};

}  // namespace torch_gemm
