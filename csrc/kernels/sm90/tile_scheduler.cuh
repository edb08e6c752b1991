// The Hopper kernel's tile scheduler: which tiles, and which of their k-tiles, each cluster of a
// persistent grid computes, in L2-friendly groups, with split-K's slices of K and stream-K's
// last turns dealt out as k-tiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/grid.cuh"
#include "kernels/sm90/config.cuh"
#include "kernels/sm90/ptx.cuh"

namespace torch_gemm {
namespace sm90 {

// One piece of a cluster's walk over the tiles: a turn (the tile of each block of the cluster)
// and which of its k-tiles the cluster computes.
struct WorkUnit {
  int turn = 0, k_begin = 0, k_end = 0;
  bool partial = false;       // stream-K: not the tile's last k-tiles, its sums go to sk_partials
  int contributors_from = 0;  // stream-K: clusters contributors_from .. this one - 1 left partial
                              // sums of this tile to add (none where it is this cluster)
};

// A cluster's walk: the whole turns cluster, cluster + clusters, ... before the last sk_turns
// (each over k-tiles [k_begin, k_end): all, or the block's split-K slice); then its share of the
// last sk_turns turns' k-tiles, numbered tile by tile (U of them), cluster c taking
// [c·U/clusters, (c+1)·U/clusters). That share is walked from its last tile down, so that the
// piece without its tile's last k-tiles (partial, at most one: the share's top) comes first and
// the piece with them (which adds the other clusters' partials) last: every partial a cluster
// waits for is its contributor's first piece, and none waits for a cluster that waits. The
// launcher keeps U·clusters within int.
class TileWalk {
 public:
  __device__ __forceinline__ TileWalk(int cluster, int clusters, int turns, int sk_turns,
                                      int k_tiles, int k_begin, int k_end)
      : cluster_(cluster), clusters_(clusters), turn_(cluster), whole_end_(turns - sk_turns),
        k_tiles_(k_tiles), k_begin_(k_begin), k_end_(k_end),
        units_(sk_turns * k_tiles), lo_(cluster * units_ / clusters),
        hi_((cluster + 1) * units_ / clusters) {}

  __device__ __forceinline__ bool next(WorkUnit* u) {
    if (turn_ < whole_end_) {
      u->turn = turn_, u->k_begin = k_begin_, u->k_end = k_end_;
      u->partial = false, u->contributors_from = cluster_;
      turn_ += clusters_;
      return true;
    }
    if (hi_ <= lo_) return false;
    const int tile = (hi_ - 1) / k_tiles_;
    const int begin = tile * k_tiles_;
    const int from = lo_ > begin ? lo_ : begin;
    u->turn = whole_end_ + tile, u->k_begin = from - begin, u->k_end = hi_ - begin;
    u->partial = u->k_end < k_tiles_;
    // The cluster whose share holds k-tile `begin`: the largest c with c·U/clusters <= begin.
    u->contributors_from = from > begin ? ((begin + 1) * clusters_ - 1) / units_ : cluster_;
    hi_ = from;
    return true;
  }

 private:
  int cluster_, clusters_, turn_, whole_end_, k_tiles_, k_begin_, k_end_, units_, lo_, hi_;
};

// (z, m0, n0) of this block's tile in turn t of the persistent walk. Clusters of kClusterM
// blocks take kClusterM vertically adjacent tiles (one tile column: they share B), rank r the
// r-th; the cluster-tiles are walked batch element first, then in L2-friendly groups.
template <typename Config, int kClusterM>
__device__ __forceinline__ void tile_origin(const WgmmaParams& p, int t, uint32_t rank, int* z,
                                            int* m0, int* n0) {
  const int cluster_rows = (p.tiles_m + kClusterM - 1) / kClusterM;
  const int cluster_tiles = cluster_rows * p.tiles_n;
  *z = t / cluster_tiles;
  int row, col;  // int: the launcher checked that the tiles fit
  grouped_tile<Config::kGroupM / kClusterM>(t % cluster_tiles, cluster_rows, p.tiles_n, &row, &col);
  *m0 = (row * kClusterM + static_cast<int>(rank)) * Config::kBlockM;
  *n0 = col * Config::kBlockN;
}

#ifdef TORCH_GEMM_SM90A_DEVICE

// One block's place in the persistent grid. Clusters of kClusterM × kSplitK blocks take turns
// cluster, cluster + clusters, ... of the walk; rank is the block's tile of a pair along M, split
// its slice of K (split-K: kSplitK blocks share each tile; with WgmmaParams::split_groups, that
// many clusters, group g taking slices g · kSplitK ... of K). Both blocks of a pair follow the
// same walk, the early k-tiles included: the producer's exit relies on it (mainloop.cuh).
template <typename Config, int kClusterM, int kSplitK, bool kStreamK>
struct TileSchedule {
  static constexpr int kClusterBlocks = kClusterM * kSplitK;
  int turns;
  uint32_t rank, split;
  int group, groups;  // split-K: this cluster's group of the tile's clusters, and how many
  int first_turn, turn_step;
  // This block's k-tiles of each tile: all, or its slice (maybe empty: its partials are zeros).
  int all_k_tiles, k_begin, k_end;
  int sk_turns;

  __device__ __forceinline__ explicit TileSchedule(const WgmmaParams& p) {
    turns = (p.tiles_m + kClusterM - 1) / kClusterM * p.tiles_n * p.batch;
    const uint32_t cluster_ctarank = kClusterBlocks > 1 ? cluster_rank() : 0;
    rank = kSplitK > 1 ? 0 : cluster_ctarank;
    split = kSplitK > 1 ? cluster_ctarank : 0;
    const int cluster = static_cast<int>(blockIdx.x) / kClusterBlocks;
    groups = kSplitK > 1 ? p.split_groups : 1;
    group = groups > 1 ? cluster / turns : 0;
    first_turn = cluster - group * turns;
    turn_step = static_cast<int>(gridDim.x) / kClusterBlocks;
    all_k_tiles = (p.K + Config::kBlockK - 1) / Config::kBlockK;
    const int slices = kSplitK * groups;
    const int slice_k_tiles = (all_k_tiles + slices - 1) / slices;
    const int slice = group * kSplitK + static_cast<int>(split);
    k_begin = min(slice * slice_k_tiles, all_k_tiles);
    k_end = min(k_begin + slice_k_tiles, all_k_tiles);
    // Only the stream-K kernel reads sk_turns: in the others every walk is whole turns, known so
    // at compile time, and the walk's stream-K state takes no registers.
    sk_turns = kStreamK ? p.sk_turns : 0;
  }

  // A fresh walk of this block's units (each role that needs them walks its own).
  __device__ __forceinline__ TileWalk walk() const {
    return TileWalk(first_turn, turn_step, turns, sk_turns, all_k_tiles, k_begin, k_end);
  }

  // (z, m0, n0) of this block's tile in turn t.
  __device__ __forceinline__ void origin(const WgmmaParams& p, int t, int* z, int* m0,
                                         int* n0) const {
    tile_origin<Config, kClusterM>(p, t, rank, z, m0, n0);
  }

  // Split-K over several clusters: the slot of this block's consumer's owned sums in group `g`
  // (all but the last group leave theirs) for tile `turn`.
  __device__ __forceinline__ int group_slot(int g, int turn, int consumer) const {
    return ((g * turns + turn) * kSplitK + static_cast<int>(split)) * Config::kConsumers + consumer;
  }

  // Stream-K's partial sums: the slot of this block's consumer under cluster `cluster`'s index.
  __device__ __forceinline__ int partial_slot(int cluster, int consumer) const {
    return (cluster * kClusterM + static_cast<int>(rank)) * Config::kConsumers + consumer;
  }
};

#endif  // TORCH_GEMM_SM90A_DEVICE

}  // namespace sm90
}  // namespace torch_gemm
