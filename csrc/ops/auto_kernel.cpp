// kernel="auto"'s rule (auto_kernel.h), from the measurements in benchmarks/NOTES.md.
#include "ops/auto_kernel.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/decode_plan.h"
#include "kernels/sm90/heuristics.h"
#include "kernels/tiles.h"

namespace torch_gemm {
namespace {

constexpr int kMultistageMinSm = 80;  // cp.async
constexpr int kMmaMinSm = 80;         // mma.sync for bf16/fp16
constexpr int kWgmmaSm = 90;          // wgmma, TMA: sm_90a code runs on 9.0 only
constexpr int64_t kDecodeRows = 32;   // min(M, N) at or below which smem16 wins before sm_80
constexpr int64_t kMinWarptileTiles = 48;
// 3xTF32 needs more of its 128x128 tiles than SMs / kThreeTf32SmsPerTile, counting each of K's
// chunks (sm90::three_tf32_chunks) as a product of its own: with fewer, its split pass and idle SMs
// cost more than multistage's product on the CUDA cores (32 tiles on 132 SMs were slower than
// multistage, 64 and more faster, on an H100, before K was cut into chunks: benchmarks/NOTES.md,
// session 25).
constexpr int64_t kThreeTf32SmsPerTile = 4;
// tf32 with fewer than 128 rows, past the tf32 decode's bounds, against a weight (B K-major, a
// linear's forward): wgmma_sm90 where B spans at least kTf32FewRowsMinColumnTiles of its
// 256-column tiles: there it streamed the weight faster than the CUDA cores multiply (on 64-row
// tiles, and on the 128-row tiles the plan took from 66 column tiles on before session 53's 64×256
// one-row tiles), and with 8 or 4 column
// tiles it did not (benchmarks/NOTES.md, sessions 25 and 31); and where its plan splits K (few
// 64×256 tiles), spreading the weight over more SMs than the unsplit tiles measured on (not yet
// measured against the CUDA cores).
constexpr int64_t kTf32FewRowsMinColumnTiles = 16;

// Whether decode_sm80 takes a few float32 rows (as tf32) against this weight (kTf32DecodeBounds).
bool tf32_decode_takes(int64_t M, int64_t N, int64_t K) {
  for (const Tf32DecodeBound& bound : kTf32DecodeBounds) {
    if (M <= bound.rows && N <= bound.max_n && K <= bound.max_k) return true;
  }
  return false;
}

// Whether wgmma_sm90 takes a tf32 product of fewer than 128 rows against a weight: where tf32's own
// tile rules (those measured against the CUDA cores here; the plan may then take the 16-bit ones)
// have enough 256-column tiles (kTf32FewRowsMinColumnTiles) or split them along K.
bool wgmma_takes_tf32_few_rows(const GemmParams& p) {
  if (p.M >= kWgmmaBlockM) return false;
  sm90::Overrides own;
  own.tf32_plan = sm90::Overrides::Tf32Plan::kOwn;
  const sm90::Shape shape = sm90::choose_shape(p, p.sm_count, own);
  return shape.wide_tiles >= kTf32FewRowsMinColumnTiles || shape.split_k > 1;
}

// Whether decode_sm80's split (p's plan `decode`, which splits K) takes p in place of wgmma_sm90's
// split tiles: a few rows against one weight (batches unmeasured) whose blocks pass one round,
// read as decode_sm80 reads them (else its launcher would run gemv), within the splits measured,
// and where wgmma's plan splits K as well (where it does not, unmeasured).
bool decode_split_over_wgmma(const GemmParams& p, const DecodePlan& decode) {
  return p.M <= kDecodeSplitRoundsMaxRows && p.batch <= 1 && decode.splits <= kDecodeSplitRoundsMaxSplits &&
         decode_splits_past_a_round(p, decode, p.sm_count) && decode_vector_loads(p) &&
         sm90::choose_shape(p, p.sm_count, sm90::Overrides{}).split_k > 1;
}

// Whether wgmma_sm90 takes a few bf16/fp16 rows against a big weight (kWgmmaOverDecode) in place
// of decode_sm80, as measured: one weight (batches unmeasured), read in place in aligned 16-byte
// vectors (else wgmma would copy it whole, where decode_sm80's launcher streams it through gemv),
// no row sums (their plan does not split), and wgmma's plan on one-consumer 64-row tiles (past
// 33792 columns it takes half-empty 128-row ones, not measured here) whose tiles and K slices fill
// kWgmmaOverDecodeFillSixths of the SMs.
bool wgmma_streams_big_weight(const GemmParams& p) {
  if (p.batch > 1 || p.row_sum != nullptr || !decode_vector_loads(p)) return false;
  for (const WgmmaOverDecode& big : kWgmmaOverDecode) {  // by rows, ascending
    if (p.M > big.rows) continue;
    if (p.N * p.K < big.elements) return false;
    const sm90::Shape shape = sm90::choose_shape(p, p.sm_count, sm90::Overrides{});
    const int64_t tiles = ceil_div(p.M, int64_t{shape.block_m()}) * ceil_div(p.N, int64_t{shape.block_n});
    const int64_t slices = tiles * shape.split_k * shape.split_groups;
    return shape.consumers == 1 && slices * 6 >= p.sm_count * kWgmmaOverDecodeFillSixths;
  }
  return false;
}

// Whether a few rows against a small weight stay on gemv (one launch) by `table`'s (rows, N·K)
// bounds rather than take decode_sm80.
template <std::size_t kBounds>
bool small_enough_for_gemv(const GemvOverDecode (&table)[kBounds], int64_t M, int64_t N, int64_t K) {
  for (const GemvOverDecode& small : table) {
    if (M <= small.rows && N * K <= small.elements) return true;
  }
  return false;
}

}  // namespace

// Decode (a few rows against a linear's weight): bf16/fp16 up to 16 rows from sm_80 on
// decode_sm80, whose mma.sync tiles take 8 tokens each at the weight's pace, but small weights
// with few rows on gemv (one launch, no K split across blocks), and on sm_90 wgmma against big
// weights its tiles fill the SMs with (wgmma_streams_big_weight) and wherever
// decode_sm80 would split K across blocks (its sums then need a second kernel, where wgmma's split
// 64x128 tiles add theirs inside a cluster), except for a few rows where the split evens out
// the rounds of more blocks than one round holds (decode_split_over_wgmma); on sm_90 against an
// N-major weight (dx) up to 16 rows decode_sm80's N-major kernel where K is long enough, the
// weight large enough and its 64-column blocks at most two an SM (decode_n_major_preferred);
// fp64 up to two rows, fp32 up to 8 against 256 columns or more from sm_80 (else two; on sm_90
// with TF32 allowed the tf32 decode below comes first), and
// one bf16/fp16 row before sm_80, on gemv, which streams B once where a tile would be mostly
// empty rows; float32 with TF32 allowed on sm_90 up to 16 rows against weights of moderate size
// on decode_sm80's tf32 tiles (kTf32DecodeBounds; gemv for two rows and small weights:
// kGemvOverDecodeTf32), wgmma's split tiles past them. bf16/fp16: the tensor cores,
// wgmma on sm_90 at every shape (its launcher takes smaller tiles or splits K where its tiles are
// few, and it beat mma_sm80 at every measured shape), mma.sync on other GPUs from sm_80. fp32 where torch allows
// TF32: wgmma in tf32 on sm_90 wherever M and N each fill a 128-row tile (there is no mma.sync
// tf32 rung to fall back to, and the CUDA cores are several times slower), and with fewer rows,
// past the tf32 decode, against a weight of enough 256-column tiles (kTf32FewRowsMinColumnTiles)
// or whose tiles the plan splits along K;
// with TF32 off but
// 3xTF32 opted into, the same shapes on wgmma_sm90_3xtf32 (float32's accuracy) where its 128x128
// tiles, times K's chunks, outnumber a quarter of the SMs (fewer, and its split pass and idle SMs
// cost more than the CUDA cores' product: kThreeTf32SmsPerTile); otherwise the CUDA
// cores: multistage from sm_80 (its launcher picks tile and split-K by shape, and it beat the
// older rungs everywhere); before it smem16 for decode shapes, smem32 for few tiles, else
// warptile. fp64 (and 16-bit before sm_80): the 32x32 tile.
AutoChoice choose_auto_kernel(const GemmParams& p, bool allow_tf32, int sm, bool with_sm90a,
                              bool three_tf32) {
  const DType dtype = p.dtype;
  const int64_t M = p.M, N = p.N, K = p.K;
  const bool sixteen_bit = dtype == DType::kBFloat16 || dtype == DType::kFloat16;
  const bool weight_rows = p.b_stride_k == 1 || K <= 1;  // B's columns contiguous, as a linear's weight
  // wgmma_sm90 runs on 9.0 in builds with its sm_90a code, and its launcher refuses extents beyond
  // 32 bits, or more tiles than that (counted here at the smallest, 64x64): such shapes take the
  // rungs below.
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  const bool wgmma = with_sm90a && sm == kWgmmaSm && std::max({M, N, K}) <= kIntMax &&
                     static_cast<double>(ceil_div(M, kWgmmaNarrowBlockM)) *
                             static_cast<double>(ceil_div(N, kWgmmaTinyBlockN)) * static_cast<double>(p.batch) <=
                         static_cast<double>(kIntMax);
  if (sixteen_bit && weight_rows && M <= kDecodeMaxRows && sm >= kMmaMinSm) {
    if (small_enough_for_gemv(kGemvOverDecode, M, N, K)) return {"gemv", AutoRule::kGemv};
    const DecodePlan decode = plan_decode(p, p.sm_count);
    if (!wgmma) return {"decode_sm80", AutoRule::kDecodeSm80};
    if (decode_split_over_wgmma(p, decode)) return {"decode_sm80", AutoRule::kDecodeSplitRounds};
    if (wgmma_streams_big_weight(p)) return {"wgmma_sm90", AutoRule::kWgmmaBigWeight};
    if (decode.splits == 1) return {"decode_sm80", AutoRule::kDecodeSm80};
    return {"wgmma_sm90", AutoRule::kWgmmaDecode};
  }
  if (wgmma && decode_n_major_preferred(p, p.sm_count)) return {"decode_sm80", AutoRule::kDecodeNMajor};
  if (wgmma && dtype == DType::kFloat32 && allow_tf32 && weight_rows) {
    const bool decode = tf32_decode_takes(M, N, K);
    if ((decode || M <= kGemvMaxRowsWide) && small_enough_for_gemv(kGemvOverDecodeTf32, M, N, K)) {
      return {"gemv", AutoRule::kGemv};
    }
    if (decode) return {"decode_sm80", AutoRule::kDecodeTf32};
    // Past the bounds, wgmma's split tiles; where its plan would not take the product either
    // (a K too short to split), decode_sm80 up to kDecodeMaxRowsTf32 rows, not the CUDA cores.
    if (M <= kDecodeMaxRowsTf32) {
      return wgmma_takes_tf32_few_rows(p) ? AutoChoice{"wgmma_sm90", AutoRule::kWgmmaTf32FewRows}
                                          : AutoChoice{"decode_sm80", AutoRule::kDecodeTf32};
    }
  }
  const bool float32_rows = dtype == DType::kFloat32 && sm >= kMultistageMinSm && N >= kGemvFloat32MinColumns;
  const int64_t gemv_rows = sixteen_bit ? kGemvMaxRows16Bit : float32_rows ? kGemvMaxRowsFloat32 : kGemvMaxRowsWide;
  if (M <= gemv_rows && weight_rows) return {"gemv", AutoRule::kGemv};
  if (wgmma && sixteen_bit) return {"wgmma_sm90", AutoRule::kWgmma};
  if (wgmma && dtype == DType::kFloat32 && allow_tf32 && std::min(M, N) >= kWgmmaBlockM) {
    return {"wgmma_sm90", AutoRule::kWgmmaTf32};
  }
  if (wgmma && dtype == DType::kFloat32 && (allow_tf32 || three_tf32)) {
    if (allow_tf32 && weight_rows && wgmma_takes_tf32_few_rows(p)) {
      return {"wgmma_sm90", AutoRule::kWgmmaTf32FewRows};
    }
    if (!allow_tf32 && std::min(M, N) >= kWgmmaBlockM &&
        3 * sm90::three_tf32_segment(K) <= std::numeric_limits<int32_t>::max() &&
        sm90::choose_shape(p, p.sm_count, sm90::Overrides{}).medium_tiles *
                sm90::three_tf32_chunks(p) * kThreeTf32SmsPerTile >
            p.sm_count) {
      return {"wgmma_sm90_3xtf32", AutoRule::kWgmma3xTf32};
    }
  }
  if (sixteen_bit) {
    return sm >= kMmaMinSm ? AutoChoice{"mma_sm80", AutoRule::kMmaSm80}
                           : AutoChoice{"smem32", AutoRule::kNoTensorCores};
  }
  if (dtype != DType::kFloat32) return {"smem32", AutoRule::kFloat64};
  if (sm >= kMultistageMinSm) return {"multistage", AutoRule::kMultistage};
  if (std::min(M, N) <= kDecodeRows) return {"smem16", AutoRule::kDecode};
  const int64_t tiles = ceil_div(M, kWarptileBlockM) * ceil_div(N, kWarptileBlockN);
  return tiles < kMinWarptileTiles ? AutoChoice{"smem32", AutoRule::kFewTiles}
                                   : AutoChoice{"warptile", AutoRule::kWarptile};
}

const char* describe_auto_choice(AutoRule rule) {
  // By AutoRule.
  static constexpr const char* kReasons[] = {
      "decode: a few rows of A against a B with contiguous columns (for bf16/fp16 a small one, "
      "see kGemvOverDecode); gemv streams B once at the memory's bandwidth in one launch, where a "
      "tile would be mostly empty rows",
      "decode: up to 16 bf16/fp16 rows of A against a B with contiguous columns, from compute "
      "capability 8.0: decode_sm80 streams B once through mma.sync, 16 of its columns by up to 8 "
      "rows a tile (on compute capability 9.0 where its plan does not split K across blocks)",
      "decode on compute capability 9.0: up to 4 bf16/fp16 rows against one weight read in aligned "
      "16-byte vectors whose 16-column blocks outnumber one round of decode_sm80's slots (2 an SM) "
      "and whose long rows its plan splits K for, in at most 4, to even out the rounds: "
      "decode_sm80 streams B with that split (the sums added in a second kernel), where "
      "wgmma_sm90's plan would split its 64x128 tiles too and leave SMs idle",
      "decode on compute capability 9.0: up to 16 bf16/fp16 rows where decode_sm80 would split K "
      "across blocks and add the sums in a second kernel (but for the few rows of the rule "
      "above); wgmma_sm90's 64x128 tiles split K inside a cluster instead",
      "decode on compute capability 9.0 against a big weight: up to 8 bf16/fp16 rows of one weight "
      "of at least 2^27 elements, or up to 16 rows of one of at least 2^26, read in aligned 16-byte "
      "vectors, without row sums, whose 64-row tiles and K slices under wgmma's plan fill at least "
      "5/6 of the SMs: wgmma_sm90 streams the weight faster than decode_sm80's 16-column warps "
      "(see kWgmmaOverDecode)",
      "decode against an N-major B (dx = dy·W of a linear) on compute capability 9.0: up to 16 "
      "bf16/fp16 rows, K of at least 1024 and a weight of at least 6·2^20 elements, at most two "
      "64-column blocks a multiprocessor: "
      "decode_sm80 streams B's rows once through mma.sync, K split across a block's warps and a "
      "cluster's blocks, where wgmma's 64-row tiles would be mostly empty rows",
      "decode in tf32 on compute capability 9.0: float32 with TF32 allowed, 3 to 16 rows of A "
      "against a B with contiguous columns of at most 8192 columns and 8192 rows (1024 columns "
      "from 9 rows on; gemv keeps two rows and small weights), and up to 32 rows where wgmma's "
      "plan would not take the product (too short a K to split few tiles): decode_sm80 streams "
      "B once through mma.sync m16n8k8 in tf32, where wgmma's 64-row tiles would be mostly "
      "empty rows",
      "bf16/fp16 on compute capability 9.0: Hopper's wgmma at every shape (its plan takes smaller "
      "tiles, split-K or stream-K where 128x256 tiles are few)",
      "float32 with TF32 allowed on compute capability 9.0, M and N at least 128: wgmma in tf32",
      "float32 with TF32 allowed on compute capability 9.0, fewer than 128 rows of A against a B "
      "with contiguous columns (a linear's weight) of at least 16 256-column tiles, or whose "
      "64x256 tiles the plan splits along K, past what the tf32 decode takes: wgmma in tf32, "
      "which streams B faster than the CUDA cores multiply",
      "float32 with TF32 off and torch_gemm's float32 precision set to '3xtf32', on compute "
      "capability 9.0, M and N at least 128 and more 128x128 tiles (times the chunks it cuts K "
      "into where its tiles are few) than a quarter of the SMs: each operand split once into TF32 "
      "big and small parts, big·big + big·small + small·big on wgmma's TF32 tensor cores",
      "bf16/fp16 from compute capability 8.0 (without wgmma): the tensor cores through mma.sync",
      "bf16/fp16 before compute capability 8.0 (no mma.sync): the 32x32 shared-memory tile",
      "float64: the 32x32 shared-memory tile",
      "float32 on the CUDA cores from compute capability 8.0 (TF32 not allowed, no wgmma, or M or "
      "N under 128 and the shape not one for wgmma's 64-row tiles, or under 3xTF32 too few "
      "128x128 tiles): multistage's cp.async ring",
      "float32 before compute capability 8.0, min(M, N) <= 32: smem16",
      "float32 before compute capability 8.0, fewer than 48 tiles of 128x128: smem32",
      "float32 before compute capability 8.0, enough 128x128 tiles to fill the GPU: warptile",
  };
  static_assert(sizeof(kReasons) / sizeof(kReasons[0]) == static_cast<int>(AutoRule::kWarptile) + 1,
                "a reason per rule");
  return kReasons[static_cast<int>(rule)];
}

}  // namespace torch_gemm
