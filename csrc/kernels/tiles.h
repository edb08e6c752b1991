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
// ones would not fill half the SMs; 64×128 (kWgmmaSmallBlockN) where even those would not;
// 128×192 (kWgmmaMidBlockN; tf32 only where forced) where its tiles make fewer rounds of the SMs
// than the 256- or 128-column ones. sm90/heuristics.h has the rules.
constexpr int64_t kWgmmaBlockM = 128;
constexpr int64_t kWgmmaNarrowBlockM = 64;
constexpr int64_t kWgmmaBlockN = 256;
constexpr int64_t kWgmmaSmallBlockN = 128;
constexpr int64_t kWgmmaMidBlockN = 192;
// Slim 128×80 and 128×96 tiles (16-bit, two consumers, both operands K-major, C stored from
// registers): cuBLAS's width for a few hundred rows against a weight, where 128-column tiles make
// one round of about 60-75 % of the SMs and these fill it (512 rows against 2560 columns: 80
// tiles of 128×128, 128 of 128×80).
constexpr int64_t kWgmmaSlimBlockN80 = 80;
constexpr int64_t kWgmmaSlimBlockN96 = 96;
// And 128×160 (the same path: C from registers, both operands K-major): a width that divides
// 2560- and 5120-column weights into whole tiles where 128×192 tiles leave a part-empty tile
// column and idle SMs (1024 rows against 2560 or 5120 columns: 112 or 216 tiles of 128×192 on 132
// SMs, 128 or 256 of 128×160); tf32 too, where forced.
constexpr int64_t kWgmmaSlimBlockN160 = 160;
// 64×64 tiles (one consumer, unsplit, paired along M; tf32 too): cuBLAS's tile for a few hundred
// rows against a narrow weight (512 rows against 1024 columns: 128 tiles, each pair sharing its
// 64 rows of B), where the 64×128 tiles fill the SMs only split along K, unpaired; and, unpaired,
// for one row of 64 (a few tokens) against 32 to one wave of them (1985 to 8448 columns on 132
// SMs).
constexpr int64_t kWgmmaTinyBlockN = 64;
constexpr bool is_slim_block_n(int64_t n) {
  return n == kWgmmaSlimBlockN80 || n == kWgmmaSlimBlockN96 || n == kWgmmaSlimBlockN160;
}

// Rows of A at or below which kernel="auto" takes gemv where B's columns are contiguous: for the
// 16-bit types one (from two rows on, wgmma's tiles were mostly faster), for float64 two, for
// float32 from sm_80 eight against at least kGemvFloat32MinColumns columns (else two; on sm_90
// with TF32 allowed the tf32 decode rules come first): there the CUDA cores' alternative is
// multistage, whose 64-row tiles multiplied the empty rows too (3-8 rows: gemv 1.16-1.78x cuBLAS,
// multistage 0.49-0.65x, gemv faster on every weight of the models grid, 256 to 28672 columns;
// multistage's 32-row tile, split up to 16 ways since session 62, ran 1.12x cuBLAS at 16 rows
// against gemv's 1.55x at 8: not measured at 3-8 rows);
// at 12 and 16 rows gemv's groups of 8 read the weight twice and lost to multistage on 38 and 76 of
// 124 weights (H200; benchmarks/NOTES.md, sessions 18 and 60). Fewer columns were not measured:
// there gemv's blocks are few against a long K, which multistage splits across the SMs.
constexpr int64_t kGemvMaxRows16Bit = 1;
constexpr int64_t kGemvMaxRowsWide = 2;
constexpr int64_t kGemvMaxRowsFloat32 = 8;
constexpr int64_t kGemvFloat32MinColumns = 256;
// Rows of A (tokens) up to which kernel="auto" takes decode_sm80 for bf16/fp16 against a B with
// contiguous columns, from sm_80: its token tiles hold 8 and 16 tokens at the weight's pace,
// where wgmma's 64-row tiles and gemv's CUDA-core sums fell behind (benchmarks/NOTES.md).
constexpr int64_t kDecodeMaxRows = 16;
// kernel="auto" on sm_90 keeps decode_sm80 where its plan splits K to even out the rounds of more
// blocks than one round of slots, up to these rows and splits, where wgmma's plan would split its
// 64x128 tiles too (long rows against 5120-6144 columns): the bounds measured, 2 and 4 splits
// against wgmma's tiles split in 2 (benchmarks/NOTES.md, session 51).
constexpr int64_t kDecodeSplitRoundsMaxRows = 4;
constexpr int64_t kDecodeSplitRoundsMaxSplits = 4;
// Except on small weights, where one launch counts for more than the tensor cores: gemv keeps up
// to `rows` rows of a weight of at most `elements` (N·K) elements. Measured against decode_sm80
// when it split K across blocks there (a second kernel); since session 36 it streams most of these
// weights unsplit, against which the bounds are not yet measured (benchmarks/NOTES.md).
struct GemvOverDecode {
  int64_t rows, elements;
};
constexpr GemvOverDecode kGemvOverDecode[] = {{1, (int64_t{1} << 24) - 1}, {2, int64_t{1} << 22}, {8, int64_t{1} << 20}};
// Except on big weights, where wgmma's one-row 64-row tiles stream the weight faster than
// decode_sm80's 16-column warps: wgmma takes up to `rows` rows (of one weight) of at least
// `elements` (N·K) elements where its plan's tiles and slices fill at least
// kWgmmaOverDecodeFillSixths sixths of the SMs (rows ascending: the first bound past M applies).
// Measured on an H200 over the models grid's weights (at most 28672 columns) at 1, 2, 4, 8 and 16
// rows, 3-7 and 9-15 taken as the counts that run decode_sm80's same token tiles: at 16 rows from
// 2^26 elements wgmma was 1.02-1.25x decode_sm80's pace; at 1-8 rows only the weights of 2^27
// elements and more that its tiles filled gained (1.01-1.12x), others of 2^26-2^27 lost
// 0.9-0.99x (benchmarks/NOTES.md, session 56).
struct WgmmaOverDecode {
  int64_t rows, elements;
};
constexpr WgmmaOverDecode kWgmmaOverDecode[] = {{8, int64_t{1} << 27}, {16, int64_t{1} << 26}};
constexpr int64_t kWgmmaOverDecodeFillSixths = 5;
// float32 as tf32 (where torch allows TF32) on decode_sm80's m16n8k8 tiles, measured on sm_90
// only, up to `rows` rows against weights of at most `max_n` columns and `max_k` inputs
// (kTf32DecodeBounds): there it streamed the weight at 0.95-1.19x torch's pace; against larger
// weights, and past 16 rows, wgmma's 64x256 tiles split along K ran faster (16 rows against
// 13824x4096: 0.80 against 1.09; 32 rows of 6144x6144: 0.79 against 0.96). gemv keeps two rows
// (any weight, in float32) and the small weights of kGemvOverDecodeTf32 (benchmarks/NOTES.md,
// session 32). From 9 rows (decode_sm80's 16-row token tile) only up to 1024 columns: at 16 rows
// against 2048-3072 columns wgmma's 64x128 tiles split in 4 ran 1.01-1.27x torch where
// decode_sm80 ran 0.92-1.14x (session 57; against 4096 columns wgmma was 0.97-0.99x and
// decode_sm80 0.90-1.07x, about even).
struct Tf32DecodeBound {
  int64_t rows, max_n, max_k;
};
constexpr Tf32DecodeBound kTf32DecodeBounds[] = {{8, 8192, 8192}, {16, 1024, 8192}};
// Past those bounds, decode_sm80 still takes up to this many rows where wgmma's plan would not
// take them either (too short a K to split few column tiles): the CUDA cores were slower still
// (0.26-0.6 of torch at 33-64 rows, sessions 25 and 31).
constexpr int64_t kDecodeMaxRowsTf32 = 32;
constexpr GemvOverDecode kGemvOverDecodeTf32[] = {{kGemvMaxRowsWide, std::numeric_limits<int64_t>::max()},
                                                  {4, int64_t{1} << 23}, {8, int64_t{1} << 20}};

// 3xTF32's chunks of K (sm90::three_tf32_chunks): its promoted tiles take a product's whole K, one
// tile an SM, so few tiles leave SMs idle (the H200 models sweep at 218b298: 0.68-0.78 of cuBLAS
// at 33 tiles or fewer, where auto took the CUDA cores, 1.23 from 34 to 66 tiles, 1.90 past 264;
// benchmarks/NOTES.md, session 58). Up to kThreeTf32MaxChunks chunks of at least
// kThreeTf32MinChunkK, the count of least estimated time: rounds of tiles times their k-tiles,
// plus the partials' bytes at kThreeTf32PartialBytesPerKTileRound (an H200's ~3 TB/s over the
// ~0.4 us its SMs take for one k-tile of a 128x128 tile each at 3xTF32's rate); each more chunk
// kept only where it saves a twentieth. Estimates, measured only as a whole: the H200 models sweep's
// 512-token forwards 1.334 -> 1.463 of torch, min 0.677 -> 0.837 (session 59).
constexpr int64_t kThreeTf32MaxChunks = 8;
constexpr int64_t kThreeTf32MinChunkK = 1024;
constexpr double kThreeTf32PartialBytesPerKTileRound = 1.2e6;
constexpr int64_t kThreeTf32GainNumerator = 1, kThreeTf32GainDenominator = 20;

}  // namespace torch_gemm
