// How the multistage rung (multistage.cuh) tiles and splits a float32 product: its three tiles as
// numbers, split-K's slices and workspace, and plan_multistage's cost model. Host code only, so
// that torch_gemm.explain shows the launcher's plan in every build.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>

#include "kernels/gemm_params.h"

namespace torch_gemm {

// A tile the rung launches (multistage.cuh checks its configurations against these).
struct MultistageTile {
  int block_m, block_n;   // C's tile
  int block_k;            // depth of one k-tile
  int blocks_per_sm;      // resident on one SM
  int saturating_blocks;  // a round of fewer blocks an SM takes as long as one of this many
};
// The small tile's part-filled rounds are charged as full ones, as the model was first fitted; the
// narrow tile's lone blocks run at about a third of the SM's pace (4 warps cannot hide the loads'
// latency), so a round of 1 to 3 blocks an SM costs as much as one of 3 (benchmarks/NOTES.md, session 62).
// blocks_per_sm is sm_90's, where the model was fitted: the narrow tile's 43 KB of shared memory
// leave room for 3 blocks on sm_80 and 2 on sm_86/89, where its plans are unmeasured.
inline constexpr MultistageTile kMultistageLargeTile{128, 256, 16, 1, 1};
inline constexpr MultistageTile kMultistageSmallTile{64, 64, 8, 4, 4};
inline constexpr MultistageTile kMultistageNarrowTile{32, 128, 16, 4, 3};

// The tiles by name: what a plan holds and TORCH_GEMM_MULTISTAGE_PLAN names.
enum class MultistageTileId { kLarge, kSmall, kNarrow };
inline const MultistageTile& multistage_tile(MultistageTileId id) {
  return id == MultistageTileId::kLarge ? kMultistageLargeTile
         : id == MultistageTileId::kSmall ? kMultistageSmallTile
                                          : kMultistageNarrowTile;
}
inline std::string multistage_tile_name(MultistageTileId id) {
  const MultistageTile& tile = multistage_tile(id);
  return std::to_string(tile.block_m) + "x" + std::to_string(tile.block_n);
}

// How a multistage launch splits K: `splits` slices of k_tiles_per_split k-tiles each.
struct SplitK {
  int splits = 1;
  int64_t k_tiles_per_split = 0;
};

// Bytes of fp32 workspace a split needs: one (M, N) slice per split, none without split-K.
inline int64_t splitk_workspace_bytes(const GemmParams& p, const SplitK& split) {
  return split.splits > 1 ? split.splits * p.M * p.N * static_cast<int64_t>(sizeof(float)) : 0;
}

// The model's rates and plan_multistage's limits (benchmarks/NOTES.md, sessions 61 and 62).
struct MultistageCostModel {
  static constexpr double kLargeFmasPerSmNs = 151.5;  // the large tile's rate on one SM
  static constexpr double kSmallRateOfLarge = 0.75;   // the small tile's, 4 blocks sharing an SM
  static constexpr double kNarrowRateOfLarge = 0.79;  // the narrow tile's, 3 or 4 blocks sharing an SM
  static constexpr double kWorkspaceBytesPerNs = 3000.0;  // split-K traffic, the whole GPU
  static constexpr double kTieMargin = 0.02;
  static constexpr int64_t kNarrowMaxRows = 64;  // the narrow tile weighed up to this M (as measured)
  static constexpr int64_t kMaxSplits = 8;
  // The narrow tile's blocks are few: past kMaxSplits it is weighed split in steps of
  // kNarrowSplitStep up to kNarrowMaxSplits (12 and 16 measured).
  static constexpr int64_t kNarrowMaxSplits = 16;
  static constexpr int64_t kNarrowSplitStep = 4;
  static constexpr int64_t kMinKTilesPerSplit = 8;
  static constexpr int64_t kMaxWorkspaceBytes = int64_t{256} << 20;
};

// A plan: the tile, K's split, and what the model says of it.
struct MultistagePlan {
  MultistageTileId tile_id = MultistageTileId::kLarge;
  SplitK split;
  int64_t waves = 0;        // rounds of blocks_per_sm blocks on every SM
  double modeled_ns = 0.0;  // the cost model's time
  const MultistageTile& tile() const { return multistage_tile(tile_id); }
};

// What plan_multistage weighed: the large tile split 1 to kMaxSplits ways, the small one, the narrow
// one split 1 to kMaxSplits ways and then in steps up to kNarrowMaxSplits.
struct MultistageCandidates {
  using Model = MultistageCostModel;
  MultistagePlan plans[2 * Model::kMaxSplits + 1 + (Model::kNarrowMaxSplits - Model::kMaxSplits) / Model::kNarrowSplitStep];
  int count = 0;
};

// A plan forced by TORCH_GEMM_MULTISTAGE_PLAN (benchmarks/tune_multistage.py times each plan this
// way): "128x256", "64x64" or "32x128", then ":<splits>" to split K (1 to kMaxForcedSplits; a batch or
// a K of fewer k-tiles than splits takes what it can).
struct MultistageForced {
  static constexpr int kMaxForcedSplits = 64;
  MultistageTileId tile_id = MultistageTileId::kLarge;
  int splits = 1;
};

// Parses a TORCH_GEMM_MULTISTAGE_PLAN value: false, with `error` saying why, where it is not one.
inline bool parse_multistage_plan(const char* value, MultistageForced* forced, std::string* error) {
  const auto after = [&](const char* prefix) {
    return std::strncmp(value, prefix, std::strlen(prefix)) == 0 ? value + std::strlen(prefix) : nullptr;
  };
  const char* rest = nullptr;
  for (const MultistageTileId id : {MultistageTileId::kLarge, MultistageTileId::kSmall, MultistageTileId::kNarrow}) {
    rest = after(multistage_tile_name(id).c_str());
    if (rest != nullptr && (*rest == '\0' || *rest == ':')) {
      forced->tile_id = id;
      break;
    }
    rest = nullptr;
  }
  if (rest == nullptr) {
    *error = std::string("TORCH_GEMM_MULTISTAGE_PLAN must be 128x256, 64x64 or 32x128, optionally :<splits>, got '") +
             value + "'";
    return false;
  }
  forced->splits = 1;
  if (*rest == '\0') return true;
  // Digits only (no sign, space or leading zero), read until past the limit.
  int splits = 0;
  const char* digit = rest + 1;
  for (; *digit >= '0' && *digit <= '9' && splits <= MultistageForced::kMaxForcedSplits; ++digit) {
    splits = splits * 10 + (*digit - '0');
  }
  if (digit == rest + 1 || *digit != '\0' || rest[1] == '0' || splits > MultistageForced::kMaxForcedSplits) {
    *error = std::string("TORCH_GEMM_MULTISTAGE_PLAN's splits must be :1 to :") +
             std::to_string(MultistageForced::kMaxForcedSplits) + ", got '" + value + "'";
    return false;
  }
  forced->splits = splits;
  return true;
}

// A TORCH_GEMM_MULTISTAGE_PLAN value as the launcher and explain read it: unset (null or empty)
// leaves `forced` empty; false, with `error` saying why, where it is not a plan.
inline bool read_multistage_plan(const char* value, std::optional<MultistageForced>* forced, std::string* error) {
  forced->reset();
  if (value == nullptr || *value == '\0') return true;
  MultistageForced parsed;
  if (!parse_multistage_plan(value, &parsed, error)) return false;
  *forced = parsed;
  return true;
}

// Which tile and how many K splits a product gets on a GPU of `sms` SMs: the plan of least modeled
// time, where a plan's time is its rounds of resident blocks × the k-tiles of a split × a k-tile's
// time at the tile's rate (a part-filled last round counted as saturating_blocks blocks an SM where
// it has fewer), plus, with split-K, the workspace's traffic (each split writes an (M, N) slice, the
// reduction reads them all and writes C). The candidates:
// - the large tile split 1 to kMaxSplits times in K (one block an SM: the split that fills the
//   last wave best, 2048 × 2560 × 28672 has 160 tiles on 132 SMs, 4 splits make 4.85 waves of a
//   quarter of the work where 1 makes 2 waves of all of it);
// - where the large tiles are fewer than two waves, the small tile (4 blocks an SM), split in K
//   until about 4 blocks an SM exist (1000³: 256 tiles, 2 splits);
// - there too, up to kNarrowMaxRows rows, the narrow 32×128 tile split 1 to kMaxSplits times, then
//   12 and 16: the other tiles' 64 or 128 rows would be mostly empty, and its blocks are few
//   (16 rows against a 4096-wide weight on 132 SMs: 32 narrow tiles split 12 ways).
// A split keeps at least kMinKTilesPerSplit k-tiles and a workspace of at most
// kMaxWorkspaceBytes, splits only an unbatched product, and is taken over fewer splits only where
// it is more than kTieMargin faster. The rates were fitted to the models grid's float32 forwards at
// 16 to 2048 rows against every plan forced (benchmarks/tune_multistage.py). `weighed`, where
// given, receives every candidate; `forced`, where given, is the plan returned (modeled alike).
inline MultistagePlan plan_multistage(const GemmParams& p, int sms,
                                      MultistageCandidates* weighed = nullptr,
                                      const MultistageForced* forced = nullptr) {
  using Model = MultistageCostModel;
  const int64_t resident = std::max<int64_t>(sms, 1);

  // The split of `k_tiles` into about `wanted` slices of at least `min_per_split` k-tiles, none of
  // them empty (rounding the slice up may leave fewer slices than wanted).
  const auto split_of = [&](int64_t k_tiles, int64_t wanted, int64_t min_per_split = Model::kMinKTilesPerSplit) {
    SplitK split;
    if (wanted > 1 && p.batch == 1 && ceil_div(k_tiles, wanted) >= min_per_split) {
      split.k_tiles_per_split = ceil_div(k_tiles, wanted);
      split.splits = static_cast<int>(ceil_div(k_tiles, split.k_tiles_per_split));
    }
    return split;
  };
  const auto tiles_of = [&](const MultistageTile& tile) {
    return ceil_div(p.M, tile.block_m) * ceil_div(p.N, tile.block_n) * p.batch;
  };
  // The plan of tile `id` split as `split`, its waves and modeled ns.
  const auto modeled = [&](MultistageTileId id, const SplitK& split) {
    MultistagePlan plan;
    plan.tile_id = id;
    plan.split = split;
    const MultistageTile& tile = plan.tile();
    const int64_t blocks = tiles_of(tile) * split.splits;
    const int64_t round = resident * tile.blocks_per_sm;
    plan.waves = ceil_div(blocks, round);
    const int64_t last = blocks % round;  // blocks of a part-filled last round
    const int64_t charged_blocks = blocks / round * tile.blocks_per_sm +
                                   (last > 0 ? std::max<int64_t>(ceil_div(last, resident), tile.saturating_blocks) : 0);
    const int64_t k_tiles_per_block = split.splits > 1 ? split.k_tiles_per_split : ceil_div(p.K, tile.block_k);
    const double fmas_per_sm = static_cast<double>(charged_blocks) * static_cast<double>(k_tiles_per_block) *
                               tile.block_m * tile.block_n * tile.block_k;
    const double rate = Model::kLargeFmasPerSmNs * (id == MultistageTileId::kLarge   ? 1.0
                                                    : id == MultistageTileId::kSmall ? Model::kSmallRateOfLarge
                                                                                     : Model::kNarrowRateOfLarge);
    plan.modeled_ns = fmas_per_sm / rate;
    if (split.splits > 1) {
      const double mn = static_cast<double>(p.M) * static_cast<double>(p.N) * sizeof(float);
      plan.modeled_ns += (2.0 * split.splits + 1.0) * mn / Model::kWorkspaceBytesPerNs;
    }
    return plan;
  };

  MultistageCandidates local;
  MultistageCandidates& candidates = weighed != nullptr ? *weighed : local;
  candidates.count = 0;
  // The tile split 1 to kMaxSplits ways, then in steps of kNarrowSplitStep to `most`, each split
  // within the workspace bound.
  const auto weigh_splits = [&](MultistageTileId id, int64_t most) {
    const int64_t k_tiles = ceil_div(p.K, multistage_tile(id).block_k);
    for (int64_t wanted = 1; wanted <= most; wanted += wanted < Model::kMaxSplits ? 1 : Model::kNarrowSplitStep) {
      const SplitK split = split_of(k_tiles, wanted);
      if (wanted > 1 &&
          (split.splits <= 1 || splitk_workspace_bytes(p, split) > Model::kMaxWorkspaceBytes)) {
        continue;
      }
      candidates.plans[candidates.count++] = modeled(id, split);
    }
  };
  weigh_splits(MultistageTileId::kLarge, Model::kMaxSplits);
  if (tiles_of(kMultistageLargeTile) < 2 * resident) {
    const MultistageTile& small = kMultistageSmallTile;
    const int64_t small_tiles = tiles_of(small);
    const int64_t small_k_tiles = ceil_div(p.K, small.block_k);
    const int64_t wanted =
        std::min({small.blocks_per_sm * resident / std::max<int64_t>(small_tiles, 1),
                  Model::kMaxSplits, small_k_tiles / Model::kMinKTilesPerSplit});
    SplitK split = split_of(small_k_tiles, wanted);
    if (splitk_workspace_bytes(p, split) > Model::kMaxWorkspaceBytes) split = SplitK{};
    candidates.plans[candidates.count++] = modeled(MultistageTileId::kSmall, split);
    if (p.M <= Model::kNarrowMaxRows) weigh_splits(MultistageTileId::kNarrow, Model::kNarrowMaxSplits);
  }
  if (forced != nullptr) {  // any slice of at least one k-tile, as many as K has
    const int64_t k_tiles = ceil_div(p.K, multistage_tile(forced->tile_id).block_k);
    return modeled(forced->tile_id, split_of(k_tiles, std::min<int64_t>(forced->splits, k_tiles), 1));
  }
  int chosen = 0;
  for (int i = 1; i < candidates.count; ++i) {
    if (candidates.plans[i].modeled_ns < candidates.plans[chosen].modeled_ns) chosen = i;
  }
  const double least = candidates.plans[chosen].modeled_ns;
  // The fewest splits within the margin of the least; the earlier weighed first among equals
  // (the large tile, then the small, then the narrow).
  for (int i = 0; i < candidates.count; ++i) {
    const MultistagePlan& plan = candidates.plans[i];
    if (plan.modeled_ns <= least * (1.0 + Model::kTieMargin) &&
        plan.split.splits < candidates.plans[chosen].split.splits) {
      chosen = i;
    }
  }
  return candidates.plans[chosen];
}

// The launcher plans each launch of the batch on its own (launch_fp32_tiled cuts it into launches
// of at most kMaxGridZ products): `full` launches of kMaxGridZ and one of `rest` (0: none). A last
// launch of one product may split K where the others do not.
struct MultistageLaunches {
  int64_t full, rest;
};
inline MultistageLaunches multistage_launches(int64_t batch) {
  return batch <= kMaxGridZ ? MultistageLaunches{0, batch}
                            : MultistageLaunches{batch / kMaxGridZ, batch % kMaxGridZ};
}

// Bytes of workspace a call needs: the largest of its launches' plans'.
inline int64_t multistage_workspace_bytes(const GemmParams& p, int sms,
                                          const MultistageForced* forced = nullptr) {
  if (p.M == 0 || p.N == 0) return 0;
  const MultistageLaunches launches = multistage_launches(p.batch);
  int64_t bytes = 0;
  for (const int64_t batch : {launches.full > 0 ? kMaxGridZ : int64_t{0}, launches.rest}) {
    if (batch == 0) continue;
    GemmParams planned = p;
    planned.batch = batch;
    bytes = std::max(bytes, splitk_workspace_bytes(planned, plan_multistage(planned, sms, nullptr, forced).split));
  }
  return bytes;
}

}  // namespace torch_gemm
