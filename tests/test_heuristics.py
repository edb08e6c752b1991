"""wgmma_sm90's plan (csrc/kernels/sm90/heuristics.h) and kernel="auto"'s rule (csrc/ops/auto_kernel.h),
checked on the CPU against the rules as docs/kernels.md states them, and torch_gemm.explain on CPU
and meta tensors. No GPU: the plans are pure functions of shapes and device facts."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import torch_gemm
from torch_gemm import _C

from gemm_testing import HAS_FP32_PRECISION, torch_tf32_setting

explain = getattr(torch_gemm, "explain", torch_gemm.ops.explain)

SMS = 132  # an H100 SXM's or an H200's multiprocessors
BF16, FP16, FP32 = "bfloat16", "float16", "float32"


def plan(M, N, K, **kwargs):
    """sm90_plan on SMS multiprocessors; float32 under tf32's own tile rules unless tf32_plan says
    otherwise (None: the plan's choice), which most tf32 tests below are about."""
    kwargs.setdefault("sm_count", SMS)
    if kwargs.get("dtype") == FP32:
        kwargs.setdefault("tf32_plan", "own")
    return _C.sm90_plan(M, N, K, **kwargs)


def assert_override_did_not_take(forced: dict, chosen: dict) -> None:
    """A TORCH_GEMM_WGMMA_SHAPE that did not take: the plan's own choice, and explain says so."""
    note = "; TORCH_GEMM_WGMMA_SHAPE"
    assert note in forced["why"]["tile"], forced["why"]["tile"]
    why = {**forced["why"], "tile": forced["why"]["tile"].split(note)[0]}
    assert {**forced, "why": why} == chosen


def assert_supported(p: dict, dtype: str, row_sum: bool = False) -> None:
    """The plan is one of the kernels the launcher instantiates (launch_layout, run_config)."""
    sixteen_bit = dtype != FP32
    tile, split, cluster = tuple(p["tile"]), p["split_k"], p["cluster"]
    slim = {(128, 80), (128, 96), (128, 160)}
    # tf32 (without row sums) shares the 128- and 64-column tiles, 128x192 and slim 128x160 (forced).
    narrow_tiles = {(64, 128), (128, 128), (64, 64)}
    sixteen_bit_tiles = narrow_tiles | {(128, 192)} | slim
    tf32_tiles = set() if row_sum else narrow_tiles | {(128, 192), (128, 160)}
    assert tile in {(128, 256), (64, 256)} | (sixteen_bit_tiles if sixteen_bit else tf32_tiles), p
    assert p["consumers"] == tile[0] // 64
    assert split in (1, 2, 4, 8) and cluster in (1, 2)
    groups = p["split_groups"]
    assert groups in (1, 2, 4, 8)
    if groups > 1:  # several clusters of a whole cluster's 8 slices a one-consumer tile
        assert split == 8 and p["consumers"] == 1 and not p["stream_k"], p
        assert p["workspace_bytes"] >= (groups - 1) * p["tiles"] * tile[0] * tile[1] * 4, p
    if split > 1:
        assert cluster == 1, p
        assert not row_sum, p
        assert tile == (64, 128) or (tile == (128, 128) and split in (2, 4)) or (
            tile == ((128, 256) if sixteen_bit else (64, 256)) and split in ((2,) if sixteen_bit else (2, 4, 8))), p
        # Owned columns that are not whole 128-byte boxes leave from registers.
        if tile[1] // split * (2 if sixteen_bit else 4) % 128 != 0:
            assert p["store"] == "registers", p
        # A transposed C's boxes span 64 of the product's columns: whole ones a slice, or registers.
        if p["store"] == "tma_transposed":
            assert split * 64 <= tile[1], p
    if tile == (128, 192):
        assert split == 1, p
        # tf32's ring holds one box a consumer, half a column of transposed boxes.
        assert sixteen_bit or p["store"] != "tma_transposed", p
    if tile == (64, 64):  # unsplit, whole turns, no row sums
        assert split == 1 and not p["stream_k"] and not row_sum, p
    if tile in slim:  # both operands K-major, C from registers, whole K, no row sums
        assert split == 1 and not p["stream_k"] and not row_sum, p
        assert p["a"]["k_major"] and p["b"]["k_major"] and p["store"] == "registers", p
    if p["stream_k"]:
        assert split == 1 and p["stream_k_turns"] > 0, p
        assert p["stream_k_turns"] <= p["turns"]
        # 128x256 tiles; or, every turn dealt out, 128x128 tiles or 64x128 tiles (one row of them,
        # or forced ones, single or paired), tf32 one row of unpaired 64x256 tiles.
        every_turn = p["stream_k_turns"] == p["turns"]
        assert tile == (128, 256) or (tile in {(128, 128), (64, 128)} and every_turn) or (
            not sixteen_bit and tile == (64, 256) and p["M"] <= 64 and cluster == 1 and every_turn), p
    if row_sum:
        assert tile[1] == 256 and split == 1, p
    if dtype == FP32:
        assert p["b"]["k_major"], "tf32 wgmma reads B K-major only"
    assert p["store"] in ("tma", "tma_transposed", "registers")
    assert p["store"] != "tma_transposed" or p["transposed"]
    tiles = math.ceil(p["M"] / tile[0]) * math.ceil(p["N"] / tile[1]) * p["batch"]
    assert p["tiles"] == tiles
    assert p["turns"] == math.ceil(math.ceil(p["M"] / tile[0]) / cluster) * math.ceil(p["N"] / tile[1]) * p["batch"]
    assert 0 < p["grid"] and p["grid"] % (cluster * split) == 0
    if split == 1:
        # stream-K over every turn: a block a resident slot, turns or not
        assert p["grid"] <= p["resident"] * cluster
        assert p["grid"] <= p["turns"] * cluster or p["stream_k_turns"] == p["turns"]
    else:
        assert p["grid"] == p["turns"] * split * groups
    assert set(p["why"]) == {"transposed", "a", "b", "store", "tile", "cluster", "split_k", "stream_k",
                             "row_sum", "grid"}
    assert all(isinstance(v, str) and v for v in p["why"].values())


def assert_stream_k_grid(p: dict, max_shares: int = 4) -> None:
    """A stream-K grid holds every resident cluster, or fewer that the dealt turns divide (each
    dealt turn's k-tiles in 2 to 4 equal shares, up to 8 for tf32's 128x256 tiles dealt out where
    its 64x256 ones would be few: every tile cut at the same K offsets)."""
    clusters, resident, dealt = p["grid"] // p["cluster"], p["resident"], p["stream_k_turns"]
    assert p["stream_k"] and 0 < clusters <= resident, p
    if clusters < resident:
        assert clusters % dealt == 0 and 2 <= clusters // dealt <= max_shares, p
        assert "same K offsets" in p["why"]["stream_k"] and "same K offsets" in p["why"]["grid"], p


# ---- The rules, one at a time.

@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_few_tiles_take_64x128_tiles(dtype):
    # 1000³: 32 tiles of 128×256 would leave most of 132 SMs idle; its 128 tiles of 64×128 fit in one wave.
    p = plan(1000, 1000, 1000, dtype=dtype)
    assert tuple(p["tile"]) == (64, 128) and p["split_k"] == 1 and not p["stream_k"]
    assert "64x128" in p["why"]["tile"]


# Resident clusters counted on for 132 SMs: 66 pairs, 28 of 4, 14 of 8 (7/8 of 132 / size); at
# least 8 k-tiles a slice.
@pytest.mark.parametrize("M, N, K, split", [
    (32, 4096, 8192, 2),    # 32 tiles of 64x128: more than 28 clusters of 4
    (64, 4096, 14336, 2),
    (128, 4096, 2496, 2),   # 64 tiles, 39 k-tiles (paired and dealt out from 40)
    (16, 2048, 8192, 4),    # 16 tiles: more than 14 clusters of 8
    (16, 1024, 1024, 2),    # 16 k-tiles: 8 a slice at most
    (64, 1024, 2048, 4),    # 8 tiles, 32 k-tiles
    (64, 1024, 8192, 8),    # 8 tiles: at most 8 slices (a cluster)
    (64, 2560, 5632, 4),    # 20 tiles, 88 k-tiles
    (64, 2560, 2560, 2),    # 20 tiles in one row, 40 k-tiles: past 2 only with more than 16 a slice
    (64, 3072, 4160, 4),    # 24 tiles in one row, 65 k-tiles
    (64, 1536, 1984, 2),    # 12 tiles, 31 k-tiles
    (64, 5120, 5120, 2),    # 40 tiles
])
def test_few_64x128_tiles_split_k(M, N, K, split):
    p = plan(M, N, K)
    assert tuple(p["tile"]) == (64, 128) and p["split_k"] == split and p["cluster"] == 1
    assert p["grid"] == p["tiles"] * split <= SMS
    assert f"{split} slices of K" in p["why"]["split_k"]
    assert_supported(p, BF16)


def test_one_row_of_many_tiles_splits_past_two_only_with_a_long_k():
    # 24 tiles of 64x128 in one row would fit one wave of clusters of 4, but 64 k-tiles are 16 a
    # slice: 2 slices, and explain says why; 65 k-tiles take 4; two rows (48 tiles) are not held.
    p = plan(64, 3072, 4096)
    assert p["split_k"] == 2 and "splits past 2 only with more than 16 k-tiles" in p["why"]["tile"]
    assert "2 slices: one row" in p["why"]["tile"]
    assert plan(64, 3072, 4160)["split_k"] == 4
    assert "splits past 2" not in plan(64, 2560, 5632)["why"]["tile"]
    # On twice the SMs 20 tiles would take 8 slices; 100 k-tiles hold them at 4 (25 a slice), and
    # explain names the 4.
    p = plan(64, 2560, 6400, sm_count=2 * SMS)
    assert p["split_k"] == 4 and "4 slices: one row of more than 16 tiles" in p["why"]["tile"], p["why"]


# Where tf32's 64x256 tiles, even split in a whole cluster of 8 slices, leave most SMs idle and K
# has 128 k-tiles or more, 2, 4 or 8 clusters share each tile: doubling while the tiles' clusters
# fit in the 14 resident on 132 SMs and K holds 8 k-tiles (of 32 floats) for each of the
# 8 x groups slices. Not 16-bit tiles (measured slower), nor a shorter K.
@pytest.mark.parametrize("M, N, K, groups", [
    (64, 256, 8192, 4),      # one tile, 256 k-tiles: 32 slices of 8
    (128, 256, 8192, 4),     # 2 tiles: 8 clusters (16 would not fit)
    (128, 512, 8192, 2),     # 4 tiles
    (40, 200, 8200, 4),      # 257 k-tiles, an edge tile in M and N
    (32, 256, 16384, 8),     # 512 k-tiles: 64 slices of 8
    (3, 1024, 9000, 2),      # 4 tiles, 282 k-tiles
    (32, 256, 4096, 2),      # 128 k-tiles: 16 slices of 8
    (64, 256, 6144, 2),      # 192 k-tiles: 4 groups would leave 6 k-tiles a slice
    (256, 256, 5120, 2),     # 4 tiles, 160 k-tiles
])
def test_few_long_tf32_split_tiles_take_several_clusters(M, N, K, groups):
    p = plan(M, N, K, dtype=FP32)
    assert tuple(p["tile"]) == (64, 256) and p["split_k"] == 8 and p["split_groups"] == groups, p
    assert p["grid"] == p["tiles"] * 8 * groups <= SMS
    k_tiles = math.ceil(K / 32)
    assert p["tiles"] * groups <= 14 and k_tiles >= 8 * groups * 8
    assert p["tiles"] * groups * 2 > 14 or k_tiles < 8 * groups * 2 * 8 or groups == 8
    assert f"8 slices of K in each of {groups} clusters" in p["why"]["split_k"]
    assert f"{groups} clusters" in p["why"]["grid"] and f"{groups} clusters" in p["why"]["cluster"]
    assert p["resident"] is None and p["workspace_bytes"] >= (groups - 1) * p["tiles"] * 64 * 256 * 4
    assert_supported(p, FP32)


@pytest.mark.parametrize("M, N, K, dtype", [
    (32, 256, 4064, FP32),    # 127 k-tiles: short of 128
    (64, 256, 3072, FP32),    # 96
    (64, 2048, 8192, FP32),   # 8 tiles: 16 clusters would not fit in 14
    (200, 1001, 2050, FP32),  # split in 4, not a whole cluster (65 k-tiles)
    (64, 256, 8192, BF16),    # 16-bit tiles: never by the plan
    (64, 128, 16384, FP16),
])
def test_split_tiles_in_one_cluster(M, N, K, dtype):
    p = plan(M, N, K, dtype=dtype)
    assert p["split_groups"] == 1 and p["workspace_bytes"] == plan(M, N, K, dtype=dtype, stream_k="0")["workspace_bytes"]
    assert_supported(p, dtype)


def test_split_groups_follow_the_overrides():
    p = plan(100, 300, 3000, shape="1x8x128x2")   # 2x3 tiles in 2 clusters of 8 each: 96 blocks
    assert p["split_k"] == 8 and p["split_groups"] == 2 and p["grid"] == 6 * 16
    assert "forced" in p["why"]["split_k"] and "2 clusters" in p["why"]["cluster"]
    # 4 clusters of 6 tiles would outnumber the 14 resident: halved
    assert plan(100, 300, 3000, shape="1x8x128x4")["split_groups"] == 2
    p = plan(130, 1000, 577, shape="1x8x128x2")   # 24 tiles: one cluster each already outnumbers 14
    assert p["split_groups"] == 1 and "halved to one" in p["why"]["split_k"]
    assert plan(60, 100, 3000, shape="1x8x128x8")["split_groups"] == 8
    p = plan(100, 300, 3000, dtype=FP32, shape="1x8x256x2")
    assert tuple(p["tile"]) == (64, 256) and p["split_k"] == 8 and p["split_groups"] == 2
    assert plan(64, 256, 8192, dtype=FP32, shape="1x8x256x1")["split_groups"] == 1  # as forced
    # invalid: groups of fewer slices than a cluster, of 3, of two-consumer tiles; ignored whole
    for shape in ("1x4x128x2", "1x8x128x3", "2x2x256x2", "1x8x128x16"):
        assert_override_did_not_take(plan(100, 300, 3000, shape=shape), plan(100, 300, 3000))
    assert_override_did_not_take(plan(100, 300, 3000, dtype=BF16, shape="1x8x256x2"),  # tf32's
                                 plan(100, 300, 3000, dtype=BF16))


# TORCH_GEMM_WGMMA_STREAM_K=3: one row of 64x128 tiles (M <= 64), split or not, dealt out whole as
# k-tiles to one block a SM (the plan's own choice measured no faster: benchmarks/NOTES.md).
@pytest.mark.parametrize("M, N, K", [
    (32, 4096, 4096),   # 32 tiles: split in 2
    (1, 4096, 28672),
    (16, 2048, 8192),   # 16 tiles in 4
    (1, 11008, 8192),   # 86 tiles unsplit
    (8, 1000, 9001),    # 8 tiles in 8: 141 k-tiles
])
@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_stream_k_over_every_turn_of_one_row_of_64x128_tiles(M, N, K, dtype):
    assert not plan(M, N, K, dtype=dtype)["stream_k"]
    p = plan(M, N, K, dtype=dtype, stream_k="3")
    assert tuple(p["tile"]) == (64, 128) and p["split_k"] == 1 and p["cluster"] == 1
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"]
    assert_stream_k_grid(p)
    assert "every one of" in p["why"]["stream_k"] and "STREAM_K=3" in p["why"]["tile"]
    assert "stream-K spreads K" in p["why"]["split_k"]
    assert_supported(p, dtype)


# TORCH_GEMM_WGMMA_STREAM_K=3 with forced 64x128 tiles (1xSx128) of several tile rows: paired where
# the plan pairs them (a pair reads B's tile once), every turn dealt out, in 2 equal shares where
# the pairs hold twice the turns; a forced split gives way; single blocks under
# TORCH_GEMM_WGMMA_CLUSTER=1. Without a forced shape the plan's own split tiles of several rows
# stay whole (test_streaming_every_tile_follows_the_overrides).
@pytest.mark.parametrize("M, N, K, shares", [
    (512, 1024, 8192, 2),     # 32 pair turns on 66 pairs: 64 of them, 2 shares a turn
    (256, 2048, 4096, 2),
    (300, 1000, 4099, 2),     # 5 tile rows: the last pair's second block past M
    (512, 2560, 5120, None),  # 80 pair turns: every resident pair, shares at scattered offsets
])
@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_stream_k_over_every_turn_of_forced_64x128_tiles(M, N, K, shares, dtype):
    p = plan(M, N, K, dtype=dtype, shape="1x1x128", stream_k="3", max_active_clusters=66)
    assert tuple(p["tile"]) == (64, 128) and p["split_k"] == 1 and p["cluster"] == 2, p
    assert p["stream_k_turns"] == p["turns"] == math.ceil(math.ceil(M / 64) / 2) * math.ceil(N / 128)
    assert_stream_k_grid(p)
    if shares:
        assert p["grid"] == 2 * shares * p["turns"], p
    assert "forced" in p["why"]["tile"] and "every one of" in p["why"]["stream_k"]
    assert_supported(p, dtype)
    split = plan(M, N, K, dtype=dtype, shape="1x2x128", stream_k="3", max_active_clusters=66)
    assert split["split_k"] == 1 and split["cluster"] == 2 and split["stream_k_turns"] == split["turns"]
    single = plan(M, N, K, dtype=dtype, shape="1x1x128", stream_k="3", cluster="1")
    assert single["cluster"] == 1 and single["stream_k_turns"] == single["turns"]
    assert_supported(single, dtype)
    assert not plan(M, N, K, dtype=dtype, shape="1x1x128", max_active_clusters=66)["stream_k"]


def test_streaming_every_tile_follows_the_overrides():
    p = plan(32, 4096, 4096, dtype=FP32, stream_k="3")  # tf32: its one row of 64x256 tiles
    assert tuple(p["tile"]) == (64, 256) and p["stream_k_turns"] == p["turns"]
    assert not plan(32, 4096, 4096, row_sum=True, stream_k="3")["stream_k"]  # row sums: 256 columns
    # TORCH_GEMM_WGMMA_STREAM_K=3: wherever the plan (or a forced shape) takes one row of 64x128
    # one-consumer tiles, if the k-tiles outnumber the blocks; not on other tiles.
    p = plan(64, 1024, 4096, stream_k="3")
    assert tuple(p["tile"]) == (64, 128) and p["split_k"] == 1 and p["stream_k_turns"] == 8
    p = plan(50, 300, 1000, shape="1x4x128", stream_k="3", max_clusters="3")
    assert p["split_k"] == 1 and p["stream_k_turns"] == 3 and p["grid"] == 3 and "forced" in p["why"]["tile"]
    assert not plan(50, 300, 64, shape="1x1x128", stream_k="3")["stream_k"]  # 3 tiles of 1 k-tile < 132 blocks
    assert not plan(100, 4096, 2496, stream_k="3")["stream_k"]   # two rows of 64x128 tiles
    p = plan(128, 3072, 28672, stream_k="3")  # the plan's 128x128 tiles split in 4: kept
    assert (tuple(p["tile"]), p["split_k"]) == ((128, 128), 4) and not p["stream_k"]
    assert not plan(64, 4096, 4096, shape="1x1", stream_k="3")["stream_k"]  # 64x256
    # one tile of 128 k-tiles: fewer units than SMs, so the plan keeps its split in 8
    p = plan(64, 128, 8192, stream_k="3")
    assert p["split_k"] == 8 and not p["stream_k"]


# TORCH_GEMM_WGMMA_STREAM_K=3 on 128x256 tiles: every turn dealt out, a few tiles with a long K over
# every resident pair, or many tiles (several turns a pair); the split a forced shape asked for
# gives way.
@pytest.mark.parametrize("M, N, K, shape, pairs", [
    (256, 2048, 28672, "2x1", True),     # 16 tiles, 8 pair turns of 448 k-tiles
    (512, 2560, 14336, "2x1", True),
    (4096, 4096, 4096, None, True),      # the plan's own 128x256 tiles, 256 turns
    (256, 2048, 1024, "2x1", False),     # 16 k-tiles: one short wave, single blocks
    (256, 2048, 28672, "2x2", True),
])
def test_stream_k_over_every_turn_of_128x256_tiles(M, N, K, shape, pairs):
    kwargs = dict(shape=shape) if shape else {}
    p = plan(M, N, K, stream_k="3", max_active_clusters=66, **kwargs)
    assert tuple(p["tile"]) == (128, 256) and p["split_k"] == 1 and p["cluster"] == (2 if pairs else 1)
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"]
    assert_stream_k_grid(p)
    assert "every one of" in p["why"]["stream_k"]
    assert_supported(p, BF16)


# TORCH_GEMM_WGMMA_STREAM_K=3 on 128x128 tiles: the plan's, or forced (one partial round of a few
# hundred rows against a weight, 80 tiles on 132 SMs, where the plan takes slim 128x80 tiles);
# every turn dealt out, paired where the plan pairs them.
@pytest.mark.parametrize("M, N, K, shape, pairs", [
    (512, 2560, 8192, "2x1x128", True),  # 40 pair turns of 128 k-tiles on 66 pairs
    (256, 8192, 2048, None, True),
    (2048, 2048, 2048, "2x1x128", True),  # 128 pair turns: several a pair
    (256, 2048, 1024, "2x1x128", False),  # 16 k-tiles: one short wave, single blocks
])
def test_stream_k_over_every_turn_of_128x128_tiles(M, N, K, shape, pairs):
    kwargs = dict(shape=shape) if shape else {}
    assert not plan(M, N, K, max_active_clusters=66, **kwargs)["stream_k"]
    p = plan(M, N, K, stream_k="3", max_active_clusters=66, **kwargs)
    assert tuple(p["tile"]) == (128, 128) and p["split_k"] == 1 and p["cluster"] == (2 if pairs else 1)
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"]
    assert_stream_k_grid(p)
    assert "every one of" in p["why"]["stream_k"]
    assert_supported(p, BF16)


# 193 to 256 rows (65 to 128 where the turns split in 3 shares, 449 to 512 where the pair
# turns split in equal shares) with a long K (160 k-tiles, 128 where the turns split in 4 shares,
# 88 in 3) and 32 to 5/8 of a wave of 128x128 tiles: the plan itself deals out every turn of them;
# not with a shorter K, other rows, 512 rows without equal shares, one row in 2 shares, fewer or
# more tiles, TORCH_GEMM_WGMMA_STREAM_K=0 or a forced shape.
@pytest.mark.parametrize("M, N, K", [(256, 2048, 14336), (256, 2560, 28672), (193, 4096, 10240),
                                     (256, 2560, 8192), (512, 2048, 11008), (512, 1024, 8192),
                                     (500, 1000, 8300), (256, 2560, 5632), (128, 5120, 5632),
                                     (100, 5000, 5700), (128, 5120, 28672)])
def test_few_128x128_tiles_with_a_long_k_take_stream_k_over_every_turn(M, N, K):
    p = plan(M, N, K, max_active_clusters=66)
    pairs = M > 128
    assert tuple(p["tile"]) == (128, 128) and p["split_k"] == 1
    assert p["cluster"] == (2 if pairs else 1)
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"]
    assert_stream_k_grid(p)
    assert "every turn dealt out" in p["why"]["tile"] and "every one of" in p["why"]["stream_k"]
    assert_supported(p, BF16)
    off = plan(M, N, K, stream_k="0", max_active_clusters=66)
    assert not off["stream_k"] and "every turn dealt out" not in off["why"]["tile"]
    forced = plan(M, N, K, shape="2x1x128", max_active_clusters=66)
    assert tuple(forced["tile"]) == (128, 128) and not forced["stream_k"]


# 16-bit products of two or more tile rows whose 128x256 tiles would leave half the SMs idle, with
# K of 160 k-tiles or more: paired 128x256 tiles with every turn dealt out in 3 or 4 equal shares,
# in every layout (64x128 pairs, 128x128 pairs and 128x128 tiles dealt unevenly before).
@pytest.mark.parametrize("M, N, K, shares", [
    (1024, 1024, 11008, 4), (512, 2560, 14336, 3), (256, 5120, 28672, 3), (500, 2500, 10300, 3),
])
@pytest.mark.parametrize("layout", ["NT", "NN", "TN"])
def test_few_wide_tiles_with_a_long_k_take_128x256_tiles_dealt_out(M, N, K, shares, layout):
    a_strides = [K, 1] if layout[0] == "N" else [1, M]
    b_strides = [1, K] if layout[1] == "T" else [N, 1]
    p = plan(M, N, K, max_active_clusters=66, a_strides=a_strides, b_strides=b_strides)
    assert tuple(p["tile"]) == (128, 256) and p["cluster"] == 2 and p["split_k"] == 1, p
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"]
    assert p["grid"] == 2 * p["turns"] * shares, p
    assert "every turn dealt out" in p["why"]["tile"] and f"{shares} equal shares" in p["why"]["tile"]
    assert_stream_k_grid(p)
    assert_supported(p, BF16)


# Not with K under 160 k-tiles, in 2 shares, on fewer than 7/8 of the SMs, where the grid's cost
# rule keeps every resident pair (8 turns: 4 shares would take 64 blocks) or the plan deals out
# 128x128 tiles in equal shares, on one tile row, on 129 to 192 rows (a pair's second tile half
# empty) or an odd number of tile rows, with row sums, nor under forced shapes, clusters or
# stream-K off.
@pytest.mark.parametrize("why, M, N, K, kwargs", [
    ("short K", 1024, 1024, 8192, {}),
    ("128x128 dealt in equal shares at 512 rows", 512, 2048, 11008, {}),
    ("2 shares", 1024, 2048, 28672, {}),
    ("3 shares on 108 blocks", 512, 2304, 14336, {}),
    ("8 turns", 256, 2048, 28672, {}),
    ("128x128 dealt in equal shares", 256, 4096, 28672, {}),
    ("one tile row", 128, 8192, 28672, {}),
    ("192 rows", 192, 5120, 11008, {}),
    ("five tile rows", 640, 1792, 14336, {}),
    ("row sums", 512, 2560, 14336, {"row_sum": True}),
    ("forced shape", 512, 2560, 14336, {"shape": "2x1x128"}),
    ("forced clusters", 512, 2560, 14336, {"max_clusters": "100"}),
    ("stream-K off", 512, 2560, 14336, {"stream_k": "0"}),
])
def test_128x256_tiles_dealt_out_not_taken(why, M, N, K, kwargs):
    p = plan(M, N, K, max_active_clusters=66, **kwargs)
    assert not (tuple(p["tile"]) == (128, 256) and p["stream_k_turns"] == p["turns"]), (why, p)
    assert "64x128 or 128x128 tiles read" not in p["why"]["tile"], (why, p)


@pytest.mark.parametrize("why, M, N, K", [
    ("short K", 256, 2048, 5120),      # 80 k-tiles
    ("3 shares, 87 k-tiles", 256, 2560, 5568),
    ("one tile row", 128, 2048, 14336),
    ("one tile row, 80 k-tiles", 128, 5120, 5120),
    ("one tile row, 87 k-tiles", 128, 5120, 5568),
    ("one tile row in 2 shares", 128, 6144, 28672),
    ("one tile row in 4 shares", 128, 4096, 28672),
    ("192 rows", 192, 2048, 11008),     # split 64x128 tiles faster there
    ("three tile rows", 384, 2048, 14336),
    ("few tiles", 256, 1024, 14336),    # 16 tiles
    ("512 rows, short K", 512, 1024, 6144),  # 96 k-tiles
    ("2 shares, 128 k-tiles", 512, 2048, 8192),
    ("2 shares at 256 rows, 128 k-tiles", 256, 4096, 8192),
    ("unequal shares, 128 k-tiles", 256, 5120, 8192),
    ("512 rows, no equal shares", 512, 2560, 11008),  # 40 pair turns
    ("six tile rows", 768, 1024, 14336),
    ("three quarters of a wave", 256, 6144, 14336),  # 96 tiles: paired 128x128 fill the SMs
    ("a whole wave", 256, 8192, 11008),
    ("more than one wave", 256, 14336, 14336),
])
def test_stream_k_over_128x128_tiles_not_taken(why, M, N, K):
    p = plan(M, N, K, max_active_clusters=66)
    assert not (tuple(p["tile"]) == (128, 128) and p["stream_k"]), (why, p)
    assert "128x128, two consumer warpgroups, every turn" not in p["why"]["tile"], why


# 16-bit products of 2 to 8 rows of 64-row tiles (an even number) whose 64x128 tiles the plan
# would split: those tiles paired with every turn dealt out where the pair turns split in 2 equal
# shares of 20 k-tiles or more, or 3 to 4 of 22 or more, on 5/8 of the SMs or more (16 turns in 4
# shares, 20 in 3, 24 and 32 in 2; at 128 rows with a long K also in place of the 128x128 tiles split
# in 4, where the turns split in 3 or 4 shares), every layout; edge tiles and a ragged K; batched.
@pytest.mark.parametrize("batch, M, N, K, turns, grid", [
    (1, 512, 512, 8192, 16, 128), (1, 256, 1024, 8192, 16, 128), (1, 250, 1000, 8200, 16, 128),
    (2, 256, 512, 8192, 16, 128), (1, 256, 1024, 14336, 16, 128), (1, 512, 512, 5632, 16, 128),
    (1, 128, 2048, 5632, 16, 128), (1, 128, 2560, 5632, 20, 120), (1, 128, 3072, 3072, 24, 96),
    (1, 100, 3000, 3100, 24, 96), (1, 384, 1024, 8192, 24, 96), (1, 512, 1024, 2560, 32, 128),
    (1, 256, 2048, 4096, 32, 128), (1, 128, 4096, 28672, 32, 128), (1, 128, 2048, 14336, 16, 128),
    (1, 128, 2560, 28672, 20, 120),
])
@pytest.mark.parametrize("layout", ["NT", "NN", "TN"])
@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_few_split_64x128_tiles_take_them_paired_and_dealt_out(batch, M, N, K, turns, grid, layout,
                                                                dtype):
    a_strides = [K, 1] if layout[0] == "N" else [1, M]
    b_strides = [1, K] if layout[1] == "T" else [N, 1]
    p = plan(M, N, K, batch=batch, dtype=dtype, max_active_clusters=66, a_strides=a_strides,
             b_strides=b_strides)
    assert tuple(p["tile"]) == (64, 128) and p["cluster"] == 2 and p["split_k"] == 1, p
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"] == turns and p["grid"] == grid, p
    shares = grid // (2 * turns)
    assert "paired, every turn dealt out" in p["why"]["tile"]
    assert f"{shares} equal shares" in p["why"]["tile"], p["why"]["tile"]
    assert "stream-K spreads K" in p["why"]["split_k"]
    assert_stream_k_grid(p)
    assert_supported(p, dtype)


# Not with shares under 20 k-tiles (2 of 19), or under 22 in 3 or 4 (4 of 20, 3 of 13), 8 pair
# turns (in 4 shares on 64 blocks: under 5/8 of the SMs), an odd number of tile rows, one tile row
# or more than eight, where the plan deals out 128x128 tiles, in tf32, with row sums, nor under
# forced shapes, clusters or stream-K off.
@pytest.mark.parametrize("why, M, N, K, kwargs", [
    ("4 shares of 20 k-tiles", 512, 512, 5120, {}),
    ("4 shares of 20 k-tiles, two tile rows", 128, 2048, 5120, {}),
    ("3 shares of 13 k-tiles", 128, 2560, 2560, {}),
    ("2 shares of 19 k-tiles", 512, 1024, 2432, {}),
    ("8 turns", 512, 256, 8192, {}),
    ("80 blocks: under 5/8 of the SMs", 128, 1280, 8192, {}),
    ("five tile rows", 320, 1024, 8192, {}),
    ("one tile row", 64, 4096, 8192, {}),
    ("ten tile rows", 640, 512, 8192, {}),
    ("128x128 dealt", 512, 1024, 8192, {}),
    ("tf32", 512, 512, 8192, {"dtype": FP32}),
    ("row sums", 512, 512, 8192, {"row_sum": True}),
    ("forced shape", 512, 512, 8192, {"shape": "1x2x128"}),
    ("forced clusters", 512, 512, 8192, {"max_clusters": "100"}),
    ("stream-K off", 512, 512, 8192, {"stream_k": "0"}),
])
def test_few_split_64x128_tiles_dealt_out_not_taken(why, M, N, K, kwargs):
    p = plan(M, N, K, max_active_clusters=66, **kwargs)
    assert "paired, every turn dealt out" not in p["why"]["tile"], (why, p)
    assert not (tuple(p["tile"]) == (64, 128) and p["stream_k"]), (why, p)


# tf32 under TORCH_GEMM_WGMMA_STREAM_K=3: one row of 64x256 tiles (a few rows against a weight)
# dealt out over every SM as k-tiles; not by default, not on more rows, nor on 3xTF32's tiles.
@pytest.mark.parametrize("M, N, K", [(16, 4096, 4096), (1, 4096, 14336), (64, 5632, 2048),
                                     (33, 1000, 3001)])
def test_tf32_one_row_takes_stream_k_over_every_turn_on_request(M, N, K):
    assert not plan(M, N, K, dtype=FP32, max_active_clusters=66)["stream_k"]
    p = plan(M, N, K, dtype=FP32, stream_k="3", max_active_clusters=66)
    assert tuple(p["tile"]) == (64, 256) and p["cluster"] == 1 and p["split_k"] == 1
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"]
    assert_stream_k_grid(p)
    assert "every one of" in p["why"]["stream_k"] and p["why"]["tile"].startswith("64x256")
    assert "split in" not in p["why"]["tile"]
    assert p["workspace_bytes"] >= SMS * 64 * 256 * 4
    assert_supported(p, FP32)


def test_tf32_stream_k_not_on_two_rows():
    assert not plan(100, 4096, 4096, dtype=FP32, stream_k="3", max_active_clusters=66)["stream_k"]


# tf32's 128x256 tiles take stream-K over a partial last round as the 16-bit ones do (80 pair
# turns of 896 k-tiles: on 64 of the 66 resident pairs, whose last 16 turns split 4 ways each);
# every turn under TORCH_GEMM_WGMMA_STREAM_K=3 with the shape forced (32 single blocks' turns, 4
# blocks a turn: 128 of 132); never 3xTF32's promoted tiles.
def test_tf32_128x256_tiles_take_stream_k():
    p = plan(2048, 2560, 28672, dtype=FP32, max_active_clusters=66)
    assert tuple(p["tile"]) == (128, 256) and p["cluster"] == 2 and p["stream_k_turns"] == 16, p
    assert p["grid"] == 128 and "the last 16 turns" in p["why"]["stream_k"]
    assert_stream_k_grid(p)
    assert p["workspace_bytes"] >= 132 * 128 * 256 * 4
    assert_supported(p, FP32)
    assert not plan(2048, 2560, 28672, dtype=FP32, stream_k="0", max_active_clusters=66)["stream_k"]
    p = plan(512, 2048, 28672, dtype=FP32, shape="2x1", stream_k="3", max_active_clusters=66)
    assert tuple(p["tile"]) == (128, 256) and p["stream_k_turns"] == p["turns"] == 32, p
    assert p["grid"] == 128 and "every one of" in p["why"]["stream_k"]
    assert_supported(p, FP32)
    p = plan(2048, 2560, 28672, dtype=FP32, three_tf32=True, max_active_clusters=66)
    assert not p["stream_k"] and "3xTF32" in p["why"]["stream_k"]


# tf32 products of more than 192 rows whose 64x256 tiles leave half the SMs idle take 128x256
# tiles with every turn dealt out, where the turns split in 2 to 4 equal shares of 40 k-tiles or
# more, or (one matrix) 3 of 26 or more: 512x2560 (40 turns on 120 blocks, 3 shares), 256x5632
# (44 on all 132), 1024x2048 (64 on 128), 500x2500 (edges), 512x2560x2560 and 256x5632x3072 (3
# shares of 26 and 32 k-tiles). At 128 rows of one matrix (one row of 128-row tiles) in 3 or 4
# shares of 40 k-tiles or more:
# 128x5120 (20 turns on 80 blocks), 128x11008 (43 on 129), 128x8192x5120 (32 on 128, shares of
# 40). In up to 8 shares from 128 rows where the 64x256 tiles' blocks fill at most half the SMs,
# the shares take more blocks and K has 160 k-tiles or more: 16 turns on 128 blocks (256x2048,
# whose 64x256 tiles split in 2 on 64; 128x4096; 512x1024; 1000x500).
@pytest.mark.parametrize("M, N, K, blocks", [
    (512, 2560, 14336, 120),
    (256, 5632, 8192, 132),
    (1024, 2048, 8192, 128),
    (500, 2500, 5000, 120),
    (512, 2560, 2560, 120),
    (256, 5632, 3072, 132),
    (128, 5120, 28672, 80),
    (128, 11008, 4096, 129),
    (128, 8192, 5120, 128),
    (256, 2048, 14336, 128),
    (128, 4096, 5120, 128),
    (512, 1024, 8192, 128),
    (1000, 500, 8000, 128),
])
def test_tf32_few_tiles_take_128x256_tiles_in_equal_shares(M, N, K, blocks):
    p = plan(M, N, K, dtype=FP32, max_active_clusters=66)
    assert tuple(p["tile"]) == (128, 256) and p["cluster"] == 1 and p["split_k"] == 1, p
    assert p["stream_k"] and p["stream_k_turns"] == p["turns"] and p["grid"] == blocks, p
    shares = blocks // p["turns"]
    assert f"split in {shares} equal shares" in p["why"]["tile"]
    if M == 128 and shares <= 4:
        assert "3 to 4 shares of 40 k-tiles or more in one row of 128-row tiles" in p["why"]["tile"]
    if shares == 3 and p["K"] < 3 * 40 * 32:
        assert "3 shares of 26 k-tiles or more" in p["why"]["tile"]
    assert_stream_k_grid(p, max_shares=8)
    assert p["workspace_bytes"] >= SMS * 128 * 256 * 4
    assert_supported(p, FP32)
    # The same product transposed (B N-major): tf32 runs it as C^T = B^T A^T, whose own tiles decide.
    assert_supported(plan(M, N, K, dtype=FP32, b_strides=[N, 1], max_active_clusters=66), FP32)


# Not at 128 rows (one row of 128-row tiles) in 2 shares or in shares of fewer than 40 k-tiles, nor
# past 192 rows in 2 or 4 shares of fewer than 40 k-tiles or 3 of fewer than 24; in more shares
# not with fewer than 160 k-tiles, nor where the grid's cost rule keeps every resident block (8
# turns in 8 shares would take 64 blocks, as 16 tiles of 64x256 in 4 slices do), nor below 128
# rows, nor where the 64x256 tiles fill more than half the SMs (12 turns at 128 rows: 24 tiles in
# 4 slices, 96 blocks); nor in 16-bit, under forced clusters, shapes or stream-K off, nor for
# 3xTF32's promoted tiles.
@pytest.mark.parametrize("why, M, N, K, kwargs", [
    ("one tile row in 2 shares", 128, 13824, 3072, {}),         # 54 turns
    ("one tile row, shares of 32 k-tiles", 128, 8192, 4096, {}),  # 32 turns in 4 shares
    ("shares of 32 k-tiles", 512, 2048, 4096, {}),   # 32 turns in 4 shares (128 blocks)
    ("4 shares of 24 k-tiles", 512, 2048, 3072, {}),
    ("3 shares of 21 k-tiles", 512, 2560, 2048, {}),  # 40 turns on 120 blocks
    ("3 shares of 25 k-tiles", 512, 2560, 2400, {}),
    ("3 shares of 32 k-tiles at 128 rows", 128, 11008, 3072, {}),  # 43 turns
    ("192 rows", 192, 5120, 28672, {}),
    ("one row of 128-row tiles, a batch", 128, 5120, 28672, {"batch": 2}),
    ("3 shares of 26 k-tiles, a batch", 256, 2560, 2560, {"batch": 2}),  # 40 turns
    ("8 shares, 128 k-tiles", 256, 2048, 4096, {}),
    ("8 shares on 64 blocks", 256, 1024, 8192, {}),
    ("under 128 rows", 100, 4096, 8192, {}),
    ("64x256 tiles on 96 blocks", 128, 3072, 8192, {}),
    ("16-bit", 512, 2560, 8192, {"dtype": BF16}),
    ("forced clusters", 512, 2560, 14336, {"max_clusters": "100"}),
    ("forced shape", 512, 2560, 14336, {"shape": "1x1"}),
    ("stream-K off", 512, 2560, 14336, {"stream_k": "0"}),
    ("3xTF32", 512, 2560, 14336, {"three_tf32": True}),
])
def test_tf32_dealt_tiles_not_taken(why, M, N, K, kwargs):
    kwargs = {"dtype": FP32, **kwargs}
    p = plan(M, N, K, max_active_clusters=66, **kwargs)
    assert "every turn dealt out" not in p["why"]["tile"], (why, p)
    assert not (tuple(p["tile"]) == (128, 256) and p["stream_k_turns"] == p["turns"]), (why, p)
    if kwargs["dtype"] == FP32 and not kwargs.get("three_tf32"):
        assert tuple(p["tile"]) == (64, 256), (why, p)  # tf32's tiles where 128x256 would be few


# One short wave of unpaired 128x256 tiles (tf32's, one a SM resident) reserves no stream-K
# workspace: 1280x2560 is 100 tiles on 132 SMs, one round; a forced few clusters keep it.
def test_one_round_of_unpaired_tiles_reserves_no_stream_k_workspace():
    p = plan(1280, 2560, 2560, dtype=FP32, max_active_clusters=66)
    assert tuple(p["tile"]) == (128, 256) and p["cluster"] == 1 and not p["stream_k"], p
    assert p["workspace_bytes"] < SMS * 128 * 256 * 4 and "one round" in p["why"]["stream_k"], p
    p = plan(1280, 2560, 2560, dtype=FP32, max_active_clusters=66, max_clusters="40")
    assert p["stream_k"] and p["workspace_bytes"] >= SMS * 128 * 256 * 4, p  # forced few clusters


# Two-consumer tiles in 3 tile rows (128x128 ones up to 7) run unpaired: a pair would have a
# block past M. Even rows, 9 rows, 128x192 tiles in 5 rows, tf32 and forced shapes keep their
# pairs.
@pytest.mark.parametrize("M, N, K, tile, paired", [
    (384, 5120, 5120, (128, 128), False),
    (384, 14336, 4096, (128, 192), False),
    (384, 28672, 4096, (128, 256), False),
    (896, 2048, 2048, (128, 128), False),
    (512, 8192, 4096, (128, 256), True),
    (1100, 5632, 1000, (128, 128), True),  # 9 rows
    (640, 4096, 4096, (128, 192), True),
])
def test_odd_tile_rows_run_unpaired(M, N, K, tile, paired):
    p = plan(M, N, K, max_active_clusters=66)
    assert tuple(p["tile"]) == tile and p["consumers"] == 2
    assert (p["cluster"] == 2) == paired, p["why"]["cluster"]
    assert paired or "odd number" in p["why"]["cluster"]
    assert_supported(p, BF16)


def test_odd_tile_rows_of_tf32_or_a_forced_shape_keep_pairs():
    assert plan(384, 28672, 4096, dtype=FP32, max_active_clusters=66)["cluster"] == 2
    assert plan(384, 5120, 5120, shape="2x1x128", max_active_clusters=66)["cluster"] == 2


# tf32's tile rules (Tf32Rules): with both operands K-major (a linear's forward) the 16-bit ones,
# counted in the same 128-byte k-tiles; tf32's own 128x256 tiles where those would pair whole
# 128x128 tiles in their place; an MN-major operand keeps tf32's own rules; 3xTF32's and row
# sums' plans are neither; TORCH_GEMM_WGMMA_TF32_PLAN picks one for every layout.
def test_tf32_follows_the_sixteen_bit_rules_with_both_operands_k_major():
    def tile(M, N, K, **kw):
        p = plan(M, N, K, dtype=FP32, tf32_plan=kw.pop("tf32_plan", None), **kw)
        assert_supported(p, FP32, row_sum=kw.get("row_sum", False))
        return (tuple(p["tile"]), p["split_k"], p["cluster"], p["stream_k"]), p["why"]["tile"]
    for M, N, K in [(128, 2048, 4096), (128, 256, 4096), (16, 4096, 4096), (512, 1024, 1024),
                    (128, 3072, 12288), (4096, 4096, 4096)]:
        chosen, why = tile(M, N, K)
        sixteen_bit = plan(M, N, 2 * K, dtype=BF16)  # the same k-tiles
        assert chosen == (tuple(sixteen_bit["tile"]), sixteen_bit["split_k"], sixteen_bit["cluster"],
                          sixteen_bit["stream_k"]), (M, N, K)
        assert "follows the 16-bit tile rules" in why
        assert tile(M, N, K, tf32_plan="sixteen_bit")[0] == chosen
    assert tile(128, 2048, 4096)[0] == ((64, 128), 1, 2, True)  # 64x128 pairs dealt out
    # An MN-major A: tf32's own 64x256 tiles split in 4, as TORCH_GEMM_WGMMA_TF32_PLAN=own asks.
    chosen, why = tile(128, 2048, 4096, a_k_major=False)
    assert chosen == ((64, 256), 4, 1, False) and "A is read MN-major" in why
    assert tile(128, 2048, 4096, tf32_plan="own")[0] == chosen
    assert tile(128, 2048, 4096, a_k_major=False, tf32_plan="sixteen_bit")[0] == ((64, 128), 1, 2, True)
    # 128x128 pairs would replace tf32's own dealt (and paired) 128x256 tiles: those stay.
    for M, N, K in [(256, 8192, 4096), (1024, 5632, 2560)]:
        chosen, why = tile(M, N, K)
        assert chosen[0] == (128, 256) and "would pair 128x128 tiles" in why, (M, N, K)
        assert chosen == tile(M, N, K, tf32_plan="own")[0]
        assert tile(M, N, K, tf32_plan="sixteen_bit")[0][:3] == ((128, 128), 1, 2)
    # From 344 k-tiles, tf32's own dealt 128x256 tiles where the 16-bit rules would pair 64x128
    # tiles or deal out 128x128 pairs; below, those.
    for M, N in [(128, 6144), (512, 2048)]:
        chosen, why = tile(M, N, 11008)
        assert chosen == ((128, 256), 1, 1, True) and "344 or more" in why, (M, N)
        assert chosen == tile(M, N, 11008, tf32_plan="own")[0]
        below = tile(M, N, 8192)
        assert below[0][0] in {(64, 128), (128, 128)} and "follows the 16-bit" in below[1], (M, N)
    # With few rows, tf32's own 64x256 tiles split in 2 (up to 16 rows) where the 16-bit rules take
    # as many blocks of whole 64x128 tiles, and split in 4 (up to 32 rows, from 344 k-tiles) where
    # they split 64x128 tiles in 2; past those bounds, the 16-bit rules' tiles.
    for M, N, K, own_split in [(4, 11008, 4096, 2), (16, 13824, 2048, 2), (8, 4096, 28672, 4),
                               (32, 5120, 11008, 4)]:
        chosen, why = tile(M, N, K)
        assert chosen == ((64, 256), own_split, 1, False) and "as many blocks of 64x128" in why, (M, N, K)
        assert chosen == tile(M, N, K, tf32_plan="own")[0]
        assert tile(M, N, K, tf32_plan="sixteen_bit")[0] == ((64, 128), own_split // 2, 1, False)
    for M, N, K in [(32, 11008, 4096), (16, 4096, 8192), (64, 4096, 28672)]:
        chosen, why = tile(M, N, K)
        assert chosen[0] == (64, 128) and "follows the 16-bit tile rules" in why, (M, N, K)
    # 128x192 and slim 128x160 tiles as the 16-bit rules take them, but not in place of 128x256
    # tiles whose last round stream-K deals out.
    for M, N, K, width in [(512, 6144, 8192, 192), (256, 11008, 2048, 192), (1024, 2560, 8192, 160),
                           (512, 5120, 5120, 160)]:
        chosen, why = tile(M, N, K)
        assert chosen[:2] == ((128, width), 1) and "follows the 16-bit tile rules" in why, (M, N, K)
    for M, N, K in [(1024, 5632, 3072), (512, 11008, 2048), (2048, 2560, 2560)]:
        assert tile(M, N, K)[0] == ((128, 256), 1, 2, True), (M, N, K)
        assert tuple(plan(M, N, 2 * K, dtype=BF16)["tile"]) in {(128, 192), (128, 160)}, (M, N, K)
    # A B repacked K-major (N-major with a bias: not run transposed) reads K-major: the 16-bit rules.
    chosen, why = tile(512, 2048, 3072, b_k_major=False, bias=True)
    assert chosen[:2] == ((128, 128), 2) and "follows the 16-bit tile rules" in why
    # A value of TORCH_GEMM_WGMMA_TF32_PLAN that names no rule set: the plan's choice, said so.
    p = plan(128, 2048, 4096, dtype=FP32, tf32_plan="sixteen")
    assert tuple(p["tile"]) == (64, 128) and "names no rule set" in p["why"]["tile"]
    # Row sums and 3xTF32's inner product: neither rule set's note.
    assert "tile rules" not in tile(128, 2048, 4096, row_sum=True)[1]
    p = plan(4096, 4096, 4096, dtype=FP32, three_tf32=True, tf32_plan=None)
    assert tuple(p["tile"]) == (128, 128) and "tile rules" not in p["why"]["tile"]
    # 3xTF32's promoted tiles take 1xSx128 and 2xSx128 as their consumers.
    for shape, tile_ in (("1x1x128", (64, 128)), ("1x2x128", (64, 128)), ("2x1x128", (128, 128))):
        p = plan(4096, 4096, 4096, dtype=FP32, three_tf32=True, shape=shape)
        assert tuple(p["tile"]) == tile_ and "forced by TORCH_GEMM_WGMMA_SHAPE" in p["why"]["tile"], shape
        assert "cannot take" not in p["why"]["tile"], shape


# tf32 under the 16-bit rules: the whole 64x128 tiles of one wave of pairs become 128x128 tiles
# split in 2 in any number of tile rows (bf16 from 16 rows), below the K from which tf32's own
# dealt 128x256 tiles replace the pairs; its 64x128 tiles split in 8 take more clusters a tile
# with a long K, as tf32's own 64x256 ones do (bf16 never).
@pytest.mark.parametrize("M, N, K", [(128, 6144, 6144), (256, 4096, 4096), (512, 2048, 2560),
                                     (1024, 1024, 3072)])
def test_tf32_splits_128x128_tiles_in_any_tile_rows(M, N, K):
    p = plan(M, N, K, dtype=FP32, tf32_plan=None)
    assert (tuple(p["tile"]), p["split_k"], p["consumers"]) == ((128, 128), 2, 2), p["why"]["tile"]
    assert "(tf32: any number, with fewer than 344 k-tiles)" in p["why"]["tile"]
    assert_supported(p, FP32)
    long_k = plan(M, N, 11008, dtype=FP32, tf32_plan=None)  # 344 k-tiles: not split in 2 (tf32's own dealt tiles)
    assert tuple(long_k["tile"]) != (128, 128) or long_k["split_k"] != 2
    assert tuple(plan(128, 6144, 11008, dtype=FP32, tf32_plan=None)["tile"]) == (128, 256)
    # 16 tile rows or more take the split at any K, and explain names that rule.
    tall = plan(2176, 256, 11008, dtype=FP32, tf32_plan=None)
    assert (tuple(tall["tile"]), tall["split_k"]) == ((128, 128), 2)
    assert "17 tile rows (at least 16)" in tall["why"]["tile"], tall["why"]["tile"]


# 16-bit: the same 128x128 tiles split in 2 in two tile rows, or one of at most 48 tiles, from 64
# k-tiles; 4 to 8 tile rows and wider single rows keep the paired 64x128 tiles, as a shorter K does.
@pytest.mark.parametrize("M, N, K, split", [
    (128, 5120, 5120, True), (128, 6144, 28672, True), (256, 3072, 8192, True), (256, 4096, 4096, True),
    (128, 6912, 8192, False), (128, 8192, 4096, False), (256, 4096, 3072, False), (512, 2048, 8192, False),
    (1024, 1024, 8192, False),
])
def test_sixteen_bit_splits_128x128_tiles_in_one_or_two_tile_rows(M, N, K, split):
    for dtype in (BF16, "float16"):
        p = plan(M, N, K, dtype=dtype)
        chosen = (tuple(p["tile"]), p["split_k"])
        assert chosen == (((128, 128), 2) if split else ((64, 128), 1)), (dtype, p["why"]["tile"])
        rows_rule = "(16-bit: two rows at any width)" if M > 128 else "(16-bit: one row of at most 48 tiles)"
        assert not split or rows_rule in p["why"]["tile"], p["why"]["tile"]
        assert_supported(p, dtype)


@pytest.mark.parametrize("M, N, K, groups", [(32, 256, 5120, 2), (128, 256, 8192, 2), (8, 256, 8192, 4),
                                             (16, 512, 4096, 2), (32, 256, 2048, 1)])
def test_tf32_split_64x128_tiles_take_more_clusters_with_a_long_k(M, N, K, groups):
    p = plan(M, N, K, dtype=FP32, tf32_plan=None)
    assert (tuple(p["tile"]), p["split_k"], p["split_groups"]) == ((64, 128), 8, groups), p["why"]
    assert_supported(p, FP32)
    assert plan(M, N, 2 * K, dtype=BF16)["split_groups"] == 1


# At most 64 rows (16-bit and tf32): 64-row tiles, 64x256 where the 64x128 ones would not fit in
# one wave, rather than half-empty 128x256 ones; not for 3xTF32's promoted tiles, nor past 64 rows.
@pytest.mark.parametrize("M", [1, 16, 64])
@pytest.mark.parametrize("N, K", [(28672, 4096), (28672, 8192)])
@pytest.mark.parametrize("dtype", [BF16, FP32])
def test_at_most_64_rows_take_64_row_tiles(M, N, K, dtype):
    p = plan(M, N, K, dtype=dtype)
    assert tuple(p["tile"]) == (64, 256) and p["consumers"] == 1 and "half empty" in p["why"]["tile"]
    assert p["split_k"] == 1 and p["cluster"] == 1, p
    if dtype == FP32:
        assert "no 128-column tiles" in p["why"]["tile"] and "row sums" not in p["why"]["tile"]
    assert_supported(p, dtype)
    assert tuple(plan(65, N, K, dtype=dtype)["tile"]) == (128, 256)


# tf32 at exactly half a round of 128x256 tiles (66 on 132 SMs) keeps them: there its 64x256 tiles
# would be split in 2 (not measured).
def test_tf32_half_a_round_of_tiles_keeps_128_row_tiles():
    p = plan(64, 66 * 256, 4096, dtype=FP32)
    assert tuple(p["tile"]) == (128, 256) and p["consumers"] == 2 and p["split_k"] == 1, p
    assert tuple(plan(64, 67 * 256, 4096, dtype=FP32)["tile"]) == (64, 256)


def test_at_most_64_rows_keep_128x256_tiles_beyond_one_round():
    # 16 rows against 50257 columns (a vocabulary): 197 tiles of 128x256, more than the SMs, keep
    # them and stream-K's last round; 64x256 tiles there were not measured.
    p = plan(16, 50257, 4096, max_active_clusters=66)
    assert tuple(p["tile"]) == (128, 256) and p["consumers"] == 2


@pytest.mark.parametrize("why, M, N, K", [
    ("half the SMs busy", 256, 4096, 3072),  # 128 tiles of 64x128; 48 k-tiles: too short to split
    ("short K", 64, 1536, 960),               # 15 k-tiles: fewer than 8 a slice in two
])
def test_64x128_tiles_unsplit(why, M, N, K):
    p = plan(M, N, K)
    assert tuple(p["tile"]) == (64, 128) and p["split_k"] == 1, why


def test_short_k_splits_less():
    # 64×1024×2048: 32 k-tiles allow 4 slices of 8, not the 8 slices the 8 tiles would take.
    assert plan(64, 1024, 2048)["split_k"] == 4


def test_few_tiles_in_tf32_take_64x256_tiles():
    # 1000×1000×1000: 32 tiles of 128x256 leave most SMs idle; the 64 of 64x256 fill half a wave
    # of pairs of blocks, so each is split in two (32 k-tiles: slices of 16).
    p = plan(1000, 1000, 1000, dtype=FP32)
    assert tuple(p["tile"]) == (64, 256) and p["split_k"] == 2 and p["cluster"] == 1
    assert_supported(p, FP32)


# tf32 has no 128-column tiles: its 64x256 tiles split along K in 2, 4 or 8 where they leave half
# the SMs idle, as many slices as one wave of clusters takes (66 pairs, 28 of 4, 14 of 8 on 132
# SMs) with 8 k-tiles (of 32 floats) or more each.
@pytest.mark.parametrize("M, N, K, split", [
    (128, 256, 8192, 8),     # 2 tiles, 256 k-tiles (4 clusters of 8 a tile)
    (256, 1024, 4096, 4),    # 16 tiles
    (512, 1024, 4096, 2),    # 32 tiles
    (64, 2048, 8192, 8),     # 8 tiles
    (16, 4096, 4096, 4),     # 16 tiles, 128 k-tiles (14 clusters of 8 hold fewer)
    (128, 256, 500, 2),      # 16 k-tiles: two slices of 8
    (128, 256, 400, 1),      # 13 k-tiles: too short to split
    (1000, 1000, 1000, 2),
])
def test_few_tf32_tiles_split_k(M, N, K, split):
    p = plan(M, N, K, dtype=FP32)
    assert tuple(p["tile"]) == (64, 256) and p["split_k"] == split, p
    if split > 1:
        assert p["cluster"] == 1 and f"{split} slices of K" in p["why"]["split_k"]
        assert "split in" in p["why"]["tile"]
        assert p["grid"] == p["turns"] * split * p["split_groups"]
    else:
        assert "too short to split" in p["why"]["split_k"]
    assert_supported(p, FP32)


def test_tf32_split_transposed_in_8_stores_from_registers():
    # An N-major B: the transposed product 256x128 has 4 tiles, split in 8; each slice owns 32
    # columns, fewer than a transposed box's 64.
    p = plan(128, 256, 8192, dtype=FP32, b_strides=[256, 1])
    assert p["transposed"] and p["split_k"] == 8 and p["store"] == "registers"
    assert "K slices owns 32 columns" in p["why"]["store"]
    p = plan(256, 1024, 4096, dtype=FP32, b_strides=[1024, 1])
    assert p["transposed"] and p["split_k"] == 4 and p["store"] == "tma_transposed"


def test_tf32_split_not_on_many_tiles_nor_3xtf32_nor_forced_unsplit():
    assert plan(4096, 4096, 4096, dtype=FP32)["split_k"] == 1  # 128x256 tiles fill the SMs
    assert plan(256, 1024, 4096, dtype=FP32, shape="1x1")["split_k"] == 1
    p = plan(256, 1024, 4096, dtype=FP32, shape="1x8")
    assert p["split_k"] == 8 and "forced" in p["why"]["tile"]
    assert_override_did_not_take(plan(256, 1024, 4096, dtype=BF16, shape="1x8"),  # tf32's
                                 plan(256, 1024, 4096, dtype=BF16))
    # tf32 takes the 128-, 64- and 192-column tiles too (not 2x2: whole 128×256 tiles).
    p = plan(256, 1024, 4096, dtype=FP32, shape="1x4x128")
    assert (tuple(p["tile"]), p["split_k"]) == ((64, 128), 4) and "forced" in p["why"]["tile"]
    assert tuple(plan(256, 1024, 4096, dtype=FP32, shape="1x1x64")["tile"]) == (64, 64)
    p = plan(256, 1024, 4096, dtype=FP32, shape="2x2")
    assert (tuple(p["tile"]), p["split_k"]) == ((128, 256), 1)
    assert tuple(plan(256, 1024, 4096, dtype=FP32, shape="2x1x192")["tile"]) == (128, 192)


def test_128x128_where_64x128_tiles_would_not_fit_in_a_wave():
    # 256×8192×2048: 64 tiles of 128×256 (fewer than 66), 256 of 64×128 (more than 132), 128 of
    # 128×128: one wave, paired along M (32 k-tiles).
    p = plan(256, 8192, 2048)
    assert tuple(p["tile"]) == (128, 128) and p["split_k"] == 1 and p["consumers"] == 2
    assert p["cluster"] == 2 and p["why"]["tile"].endswith("tiles of 128x128 do")


def test_128x128_where_they_make_fewer_rounds():
    # 1152×5632×2048: 198 tiles of 128×256 take 2 rounds of 132 SMs; 396 of 128×128 take 3, at
    # about 6/10 of the time each (and 270 of 128×192 three at 8/10). 2048×5632: 3 rounds against
    # 6: 128×256.
    p = plan(1152, 5632, 2048)
    assert tuple(p["tile"]) == (128, 128) and "3 rounds" in p["why"]["tile"]
    assert tuple(plan(2048, 5632, 2048)["tile"]) == (128, 256)


@pytest.mark.parametrize("M, N, K, why", [
    (1024, 2560, 4096, "80 tiles of 128x256 in one round, 112 of 128x192 in one"),
    (512, 5120, 4096, "80 tiles of 128x256, 108 of 128x192"),
    (1024, 5632, 2048, "176 of 128x256 and 352 of 128x128 in 2 and 3 rounds, 240 of 128x192 in 2"),
    (2048, 2560, 512, "160 of 128x256 in 2 rounds, 224 of 128x192 in 2"),
    (1024, 5120, 2560, "160 of 128x256 in 2 rounds, too short a K (40 k-tiles) for stream-K"),
    (1024, 5120, 4608, "160 of 128x256 in 2 rounds, stream-K on the last, but only 72 k-tiles"),
    (3072, 3072, 2048, "288 of 128x256 in 3 rounds, 384 of 128x192 in 3"),
    (2048, 3072, 11008, "192 of 128x256 in 2 rounds with stream-K on the last, 256 of 128x192 "
                        "filling 97% of 2: at 13/10 of their share the 128x256 tiles cost more"),
])
def test_128x192_where_they_make_fewer_rounds(M, N, K, why):
    p = plan(M, N, K)
    assert tuple(p["tile"]) == (128, 192) and p["split_k"] == 1 and p["consumers"] == 2, why
    assert p["why"]["tile"].startswith("128x192") and p["cluster"] == 2
    assert_supported(p, BF16)
    # An N-major B (dx's weight) pairs too: the pair multicasts its three 64-column boxes, 2 and 1.
    q = plan(M, N, K, b_k_major=False)
    assert tuple(q["tile"]) == (128, 192) and q["cluster"] == 2
    assert "three 64-column boxes" in q["why"]["cluster"]
    assert_supported(q, BF16)


@pytest.mark.parametrize("M, N, K, kwargs", [
    (1024, 5120, 14336, {}),          # 2 rounds of 128x256, the last dealt out by stream-K (nor 128x128)
    (1024, 5120, 14336, {"cluster": "1"}),  # the same unpaired: 160 turns over 132 blocks
    (64, 20000, 4096, {}),            # 64 rows: a 128-row tile would be half empty
    (2048, 2560, 64, {}),             # one k-tile (dW of 64 tokens): not measured
    (4096, 4096, 4096, {}),           # 4 rounds of 128x256 against 6 of 128x192
    (3072, 4096, 2048, {}),           # 3 rounds against 4 (more than kMidMaxRounds)
    (8192, 2560, 4096, {}),           # 5 against 7
    (1024, 4096, 14336, {}),          # one round of 128 tiles against 2
    (1024, 2560, 8192, {"dtype": FP32}),
    (1024, 2560, 8192, {"row_sum": True}),
])
def test_128x192_not_where_other_tiles_do_as_well(M, N, K, kwargs):
    assert tuple(plan(M, N, K, **kwargs)["tile"]) != (128, 192)


def test_128x256_with_stream_k_over_fewer_rounds_of_narrower_tiles():
    # 1024×5120×14336: 80 pairs of 128×256 on 66, stream-K taking the last 14 turns; 128×128 tiles
    # would make 3 rounds against 2 at 6/10 a tile, but lost to it by 9–21% (H200, session 26).
    p = plan(1024, 5120, 14336, max_active_clusters=66)
    assert tuple(p["tile"]) == (128, 256) and p["stream_k"]
    assert "stream-K deals out these tiles' last round" in p["why"]["tile"]
    assert "stream-K" not in plan(8192, 8192, 8192)["why"]["tile"]
    # Stream-K off: the rounds decide again.
    assert tuple(plan(1024, 5120, 14336, stream_k="0")["tile"]) != (128, 256)


def test_128x192_over_stream_k_where_their_rounds_are_nearly_full():
    # 2048×3072×11008: 192 tiles of 128x256 (stream-K over the last of 2 rounds) against 256 of
    # 128x192, 97% of two rounds: 2·8/10 < 192/132 · 13/10 (measured 0.89–0.91 of the time, H100).
    p = plan(2048, 3072, 11008, max_active_clusters=66)
    assert tuple(p["tile"]) == (128, 192) and not p["stream_k"]
    assert "more than these whole rounds" in p["why"]["tile"]


def test_128x128_needs_more_than_64_rows_and_16_bit():
    # 64 rows: a 128-row tile would be half empty; tf32 and fused row sums have no 128-column tile.
    assert tuple(plan(64, 40000, 4096)["tile"]) != (128, 128)
    assert tuple(plan(256, 8192, 1024, dtype=FP32)["tile"]) == (64, 256)
    assert tuple(plan(256, 8192, 1024, row_sum=True)["tile"]) == (64, 256)


def test_large_square_takes_paired_128x256_tiles():
    p = plan(4096, 4096, 4096)
    assert tuple(p["tile"]) == (128, 256) and p["consumers"] == 2
    assert p["cluster"] == 2 and p["split_k"] == 1
    assert p["store"] == "tma" and not p["a"]["repack"] and not p["b"]["repack"]


def test_one_wave_of_wide_tiles_runs_paired():
    # 1024×4096×14336: 128 tiles of 128×256, one each for 132 SMs: pairs halve B's crossings from
    # L2, which bounds the long loop.
    p = plan(1024, 4096, 14336)
    assert tuple(p["tile"]) == (128, 256) and p["cluster"] == 2


def test_one_wave_with_short_k_or_tf32_runs_unpaired():
    # 2048×2048×1024: 128 tiles of 128×256 with 16 k-tiles: a pair's start costs more than it saves.
    p = plan(2048, 2048, 1024)
    assert tuple(p["tile"]) == (128, 256) and p["cluster"] == 1 and "16 k-tiles" in p["why"]["cluster"]
    p = plan(1024, 4096, 14336, dtype=FP32)
    assert p["cluster"] == 1 and "tf32" in p["why"]["cluster"]


def test_few_tiles_and_long_k_take_128x128_tiles_not_split_k():
    # 512×4096×4096: 64 tiles of 128×256; 128 of 128×128 fill 128 of 132 SMs in one wave.
    p = plan(512, 4096, 4096)
    assert tuple(p["tile"]) == (128, 128) and p["split_k"] == 1 and p["cluster"] == 2
    assert p["grid"] == 128


@pytest.mark.parametrize("why, kwargs", [
    ("128x256 tiles", dict(M=4096, N=4096, K=4096)),
    ("tf32", dict(M=512, N=4096, K=4096, dtype=FP32)),
    ("row sums", dict(M=512, N=4096, K=4096, row_sum=True)),
])
def test_split_k_only_where_it_pays(why, kwargs):
    M, N, K = kwargs.pop("M"), kwargs.pop("N"), kwargs.pop("K")
    assert plan(M, N, K, **kwargs)["split_k"] == 1, why


def test_stream_k_deals_a_mostly_idle_last_round():
    # 8192×12288×4096: 1536 pairs' turns over 66 resident pairs leave 18 for a last round.
    p = plan(8192, 12288, 4096, max_active_clusters=66)
    assert p["stream_k"] and p["stream_k_turns"] == 18 and p["grid"] == 132
    assert p["workspace_bytes"] > 0


# Stream-K's grid: fewer clusters than resident where each dealt turn then splits in 2 to 4 equal
# shares and their rounds cost less than the scattered shares' (at 1.7 times their share); every
# resident cluster where that does not pay, where it would take whole tiles (1 share) or slivers,
# under a forced cluster count, or in the one-round-more mode.
@pytest.mark.parametrize("M, N, K, kwargs, clusters, dealt", [
    (2048, 2560, 8192, {}, 64, 16),                                  # 80 pair turns: 64 + 16
    (512, 2560, 14336, dict(shape="2x1", stream_k="3"), 60, 20),     # every turn: 3 pairs a turn
    (256, 2048, 14336, {}, 64, 16),                                  # 128x128: 4 pairs a turn
    (8192, 12288, 4096, {}, 66, 18),                                 # none of 2 to 4 shares
    (256, 4608, 28672, {}, 66, 36),                                  # 36 pairs: 1 share a turn
    (512, 2560, 14336, {}, 60, 20),                                  # 16-bit 128x256 dealt, 3 a turn
    (1024, 11008, 6144, {}, 66, 40),                                 # 57 pairs: 57 shares of 1 turn
    (2048, 2560, 8192, dict(max_clusters="66"), 66, 14),             # forced
    (2048, 2560, 8192, dict(stream_k="2"), 66, 80),                  # one round more
])
def test_stream_k_cuts_every_tile_at_the_same_offsets(M, N, K, kwargs, clusters, dealt):
    p = plan(M, N, K, max_active_clusters=66, **kwargs)
    assert p["grid"] == 2 * clusters and p["stream_k_turns"] == dealt, p
    assert_stream_k_grid(p)


def test_stream_k_not_where_the_last_round_is_nearly_full():
    # 4096³: 256 turns over 66: 58 in the last round, 8 clusters idle for 64 k-tiles: too little saved.
    p = plan(4096, 4096, 4096, max_active_clusters=66)
    assert not p["stream_k"] and "off" in p["why"]["stream_k"]


def test_stream_k_mode_two_takes_one_round_more():
    p = plan(8192, 12288, 4096, max_active_clusters=66, stream_k="2")
    assert p["stream_k_turns"] == 18 + 66


# ---- The environment's overrides, passed in explicitly.

@pytest.mark.parametrize("shape, tile, split", [
    ("1x1x128", (64, 128), 1), ("1x1", (64, 256), 1), ("2x1", (128, 256), 1), ("2x2", (128, 256), 2),
    ("2x2x256", (128, 256), 2), ("1x2x128", (64, 128), 2), ("1x4x128", (64, 128), 4),
    ("1x8x128", (64, 128), 8), ("2x1x128", (128, 128), 1), ("2x1x192", (128, 192), 1),
    ("2x1x80", (128, 80), 1), ("2x1x96", (128, 96), 1), ("2x1x160", (128, 160), 1),
    ("2x2x128", (128, 128), 2), ("2x4x128", (128, 128), 4), ("1x1x64", (64, 64), 1),
])
def test_forced_shape_is_respected(shape, tile, split):
    for M, N, K in [(4096, 4096, 4096), (1000, 1000, 1000), (512, 4096, 4096)]:
        p = plan(M, N, K, shape=shape)
        assert (tuple(p["tile"]), p["split_k"]) == (tile, split), (M, N, K)
        assert "TORCH_GEMM_WGMMA_SHAPE" in p["why"]["tile"]


@pytest.mark.parametrize("shape", ["3x1", "1x2", "2x8x128", "1x2x64", "2x1x64", "x", "", "2", "1x3x128", "1x16x128",
                                   "2x4", "1x1x192", "2x2x192", "1x1x80", "2x2x96", "2x1x112"])
def test_invalid_forced_shape_is_ignored(shape):
    for M, N, K in [(4096, 4096, 4096), (1000, 1000, 1000), (512, 4096, 4096)]:
        p, q = plan(M, N, K, shape=shape), plan(M, N, K)
        assert (p["tile"], p["split_k"], p["cluster"]) == (q["tile"], q["split_k"], q["cluster"])


def test_forced_shape_keeps_row_sums_on_256_columns():
    # tf32 takes the forced 128-, 64- and 192-column tiles; row sums none of them.
    assert tuple(plan(4096, 4096, 4096, dtype=FP32, shape="1x1x128")["tile"]) == (64, 128)
    p = plan(4096, 4096, 4096, row_sum=True, shape="2x2")
    assert tuple(p["tile"]) == (128, 256) and p["split_k"] == 1
    assert tuple(plan(4096, 4096, 4096, dtype=FP32, shape="2x1x192")["tile"]) == (128, 192)
    assert tuple(plan(4096, 4096, 4096, row_sum=True, shape="2x1x192")["tile"]) == (128, 256)
    assert tuple(plan(4096, 4096, 4096, dtype=FP32, shape="1x1x64")["tile"]) == (64, 64)
    assert tuple(plan(4096, 4096, 4096, row_sum=True, shape="1x1x64")["tile"]) == (128, 256)
    assert tuple(plan(4096, 4096, 4096, dtype=FP32, row_sum=True, shape="1x1x64")["tile"]) == (128, 256)
    for shape in ("2x2x128", "2x4x128"):  # 128x128 split tiles: without row sums only
        p = plan(4096, 4096, 4096, dtype=FP32, shape=shape)
        assert tuple(p["tile"]) == (128, 128) and p["split_k"] == int(shape[2])
        p = plan(4096, 4096, 4096, row_sum=True, shape=shape)
        assert tuple(p["tile"]) == (128, 256) and p["split_k"] == 1


# 128 rows against a weight of up to 28 tile columns with a long K: 128x128 tiles split in 4 (a
# cluster of 4, two consumers) in place of 64x128 ones split in 2; not with a short K, more tiles
# than one wave of clusters of 4 holds, one 64-row tile row or more than two, fewer blocks, where
# the 64x128 tiles' pair turns split in 3 or 4 equal shares (paired and dealt out instead), or
# tf32.
@pytest.mark.parametrize("M, N, K, tile, split", [
    (128, 3072, 28672, (128, 128), 4), (128, 3072, 14336, (128, 128), 4),
    (100, 3000, 12289, (128, 128), 4),
    (128, 2048, 28672, (64, 128), 1),    # 16 pair turns in 4 shares: dealt out
    (100, 2500, 12289, (64, 128), 1),    # 20 pair turns in 3 shares: dealt out
    (128, 2048, 5120, (64, 128), 2),     # a short K
    (128, 4096, 28672, (64, 128), 1),    # 32 tiles of 128x128 in 4: more clusters than a wave (the
                                         # 64x128 tiles paired and dealt out instead)
    (64, 2048, 28672, (64, 128), 4),     # one row of 64x128 tiles
    (256, 2048, 28672, (128, 128), 1),   # four rows
    (128, 1024, 28672, (64, 128), 4),    # 64x128 in 4: more blocks than 128x128 in 4
])
def test_medium_split_by_the_plan(M, N, K, tile, split):
    p = plan(M, N, K)
    assert (tuple(p["tile"]), p["split_k"]) == (tile, split), p["why"]["tile"]
    if tile == (64, 128) and split == 1:  # dealt out, not whole
        assert p["stream_k"] and p["stream_k_turns"] == p["turns"] and p["cluster"] == 2, p["why"]
    assert_supported(p, BF16)
    if tile == (128, 128) and split == 4:
        assert p["consumers"] == 2 and p["grid"] == 4 * -(-N // 128) and p["store"] == "registers"
        assert "split in 4" in p["why"]["tile"] and "as the 64x128 tiles split in 2" in p["why"]["tile"]
    assert plan(M, N, K, dtype=FP32)["tile"][1] != 128


@pytest.mark.parametrize("batch, M, N, K, taken", [
    (1, 2048, 512, 4096, True), (1, 2048, 512, 8192, True), (1, 4096, 256, 4096, True),
    (1, 4096, 256, 8192, True),
    (1, 2000, 500, 4100, True),    # edge tiles: 16 rows of 128-row tiles, 64 tiles of 128x128
    (1, 2048, 384, 8192, True),    # 48 tiles of 128x128, as many blocks as the 64x128 pairs' 96
    (2, 2048, 256, 4096, True),    # batched: 64 tiles of 128x128 over the batch
    (1, 2048, 512, 3072, False),   # 24 k-tiles a slice
    (1, 1024, 1024, 8192, False),  # 8 tile rows
    (1, 2100, 512, 8192, False),   # 68 tiles of 128x128: more than the 66 clusters of 2
    (1, 2048, 256, 8192, False),   # the 64x128 tiles split in 2 (64 of them), not whole
    (1, 2048, 1024, 8192, False),  # 256 tiles of 64x128: more than a wave
    (1, 2048, 512, 10240, False),  # 128x256 pairs dealt out (kWideDealt) from 160 k-tiles
])
def test_medium_split_tall_by_the_plan(batch, M, N, K, taken):
    """Up to a wave of 128x128 tiles in many tile rows against few columns, with a long K and both
    operands K-major: split in 2 with two consumers each, in place of the paired 64x128 tiles over
    the whole K."""
    p = plan(M, N, K, batch=batch)
    assert_supported(p, BF16)
    if taken:
        assert (tuple(p["tile"]), p["split_k"], p["consumers"], p["stream_k"]) == ((128, 128), 2, 2, False), p["why"]
        assert p["grid"] == 2 * p["tiles"] and "split in 2 along K" in p["why"]["tile"], p["why"]
        forced = plan(M, N, K, batch=batch, shape="2x2x128")  # the option measured: the same plan
        assert {k: v for k, v in p.items() if k != "why"} == {k: v for k, v in forced.items() if k != "why"}
        assert plan(M, N, K, batch=batch, dtype=FP16)["split_k"] == 2
        for kwargs in [dict(row_sum=True), dict(a_k_major=False), dict(b_k_major=False)]:
            assert plan(M, N, K, batch=batch, **kwargs)["split_k"] == 1, kwargs  # as measured: NT only
        assert plan(M, N, K, batch=batch, dtype=FP32)["tile"][1] != 128
    else:
        assert not (tuple(p["tile"]) == (128, 128) and p["split_k"] == 2), p["why"]["tile"]


# Without equal shares to deal (stream-K off, clusters forced) or under a forced shape, 128 rows
# with a long K keep the plan's 128x128 tiles split in 4 (or the shape forced).
@pytest.mark.parametrize("kwargs", [{"stream_k": "0"}, {"max_clusters": "100"}])
def test_medium_split_kept_without_the_dealt_pairs(kwargs):
    p = plan(128, 2048, 28672, **kwargs)
    assert (tuple(p["tile"]), p["split_k"]) == ((128, 128), 4) and not p["stream_k"], p["why"]
    forced = plan(128, 2048, 28672, shape="1x2x128")
    assert (tuple(forced["tile"]), forced["split_k"]) == ((64, 128), 2) and not forced["stream_k"]


# 64x64 tiles, paired, where they fill more than half of the SMs in one wave in 2 to 8 rows of 64,
# K has at most 32 k-tiles and the plan would split 64x128 tiles in 2 or leave them whole: a few
# hundred rows against a narrow weight, forward (B K-major) and dx (N-major); not with a longer K,
# where they fill half the SMs or less, make two waves, span more than 8 rows, without pairs, or
# for tf32 or row sums. And in one row of 64 (at most 64 rows), unpaired and whole, where they are
# 32 to one wave and K has at most 32 k-tiles; not with fewer columns (the split 64x128 tiles), a
# longer K, more tiles than SMs, tf32, row sums, or under TORCH_GEMM_WGMMA_STREAM_K=3 (its 64x128
# tiles dealt out).
@pytest.mark.parametrize("M, N, K, kind", [
    (512, 1024, 2048, "pairs"), (256, 2048, 2048, "pairs"), (128, 4096, 1024, "pairs"),
    (200, 1504, 1999, "pairs"),
    (256, 2048, 256, "pairs"),          # 64x128 tiles too short a K to split: paired, whole
    (512, 1024, 2049, None),            # 33 k-tiles
    (128, 4096, 28672, None),           # 448 k-tiles
    (512, 512, 2048, None),             # 64 tiles: half the SMs
    (1024, 1024, 2048, None),           # 256 tiles: two waves
    (192, 2560, 2048, None),            # 120 tiles, but 160 blocks in pairs (3 rows): two rounds
    (1024, 512, 2048, None),            # 16 rows of 64
    (64, 2048, 2048, "one row"), (8, 3072, 2048, "one row"), (1, 8192, 2048, "one row"),
    (33, 2001, 2000, "one row"),
    (64, 4096, 256, "one row"),         # 4 k-tiles: the 64x128 tiles whole, half the blocks
    (64, 1024, 2048, None),             # one row of 16 tiles
    (64, 4096, 2112, None),             # one row, 33 k-tiles
    (64, 8512, 2048, None),             # one row of 133 tiles: more than one wave
])
def test_tiny_tiles_by_the_plan(M, N, K, kind):
    pairs = kind == "pairs"
    for b_k_major in (True, False):
        p = plan(M, N, K, b_k_major=b_k_major)
        assert_supported(p, BF16)
        if kind is None:
            assert tuple(p["tile"]) != (64, 64), p["why"]["tile"]
            continue
        assert tuple(p["tile"]) == (64, 64) and p["split_k"] == 1, p["why"]["tile"]
        assert p["cluster"] == (2 if pairs else 1), p["why"]["cluster"]
        if pairs:
            assert "tiles of 64x64" in p["why"]["tile"] and p["store"] == "tma"
        else:
            assert "one row of" in p["why"]["tile"] and "whole" in p["why"]["split_k"]
            assert p["grid"] == -(-N // 64)
    if kind is not None:
        # One row: measured on one matrix only (a batch of them keeps the split 64x128 tiles).
        others = [dict(cluster="1"), dict(sm_count=2 * SMS)] if pairs else [dict(stream_k="3"), dict(batch=2)]
        for kwargs in [dict(dtype=FP32), dict(row_sum=True)] + others:
            assert tuple(plan(M, N, K, **kwargs)["tile"]) != (64, 64), kwargs


# 64x256 tiles, paired, where K is one k-tile and 128x128 tiles would make 3 rounds (dW at a few
# tokens, K being the tokens), in every layout; not with a second k-tile, where the 128x128 tiles
# make 1, 2 or more than 3 rounds, for tf32, or under a forced shape.
@pytest.mark.parametrize("M, N, K, narrow", [
    (1024, 5120, 64, True), (1024, 6144, 16, True), (2048, 2560, 1, True), (2048, 3072, 64, True),
    (1000, 5001, 37, True),
    (1024, 5120, 65, False),            # two k-tiles
    (1024, 4096, 64, False),            # 256 tiles of 128x128: 2 rounds
    (1024, 1024, 64, False),            # 64 tiles: one round
    (2048, 4096, 64, False),            # 512 tiles: 4 rounds (128x256 tiles, 2 rounds)
])
def test_one_k_tile_narrow_tiles_by_the_plan(M, N, K, narrow):
    for a_k_major, b_k_major in [(False, False), (True, True), (True, False)]:
        p = plan(M, N, K, a_k_major=a_k_major, b_k_major=b_k_major)
        assert_supported(p, BF16)
        if not narrow:
            assert tuple(p["tile"]) != (64, 256), p["why"]["tile"]
            continue
        assert tuple(p["tile"]) == (64, 256) and p["consumers"] == 1 and p["cluster"] == 2, p["why"]
        assert p["split_k"] == 1 and "K is one k-tile" in p["why"]["tile"], p["why"]
        assert p["tiles"] == plan(M, N, 65)["tiles"]  # as many as the 128x128 tiles
    if narrow:
        for kwargs in [dict(dtype=FP32), dict(shape="2x1x128")]:
            assert tuple(plan(M, N, K, **kwargs)["tile"]) != (64, 256), kwargs


# Slim tiles where their rounds cost less than the two-consumer tiles' (a few hundred rows against
# a weight of 2560-6144 columns; 128x160 ones at 512-2048 rows against 2560 or 5120 columns from 80
# k-tiles, where 128x192 tiles leave a part-empty tile column), paired along M; not in one tile
# row, with a short K, row sums, tf32, an MN-major operand, or where the other tiles fill their
# round (1024 x 3072, 1024 x 6144); 128x160 ones only in place of 128x192 ones, not of 128x256
# tiles with stream-K (2048 x 5120, 2560 x 5120).
SLIM_WIDTHS = (80, 96, 160)


@pytest.mark.parametrize("M, N, K, width, rounds", [
    (512, 2560, 8192, 80, 1), (256, 5120, 5120, 80, 1), (512, 3072, 8192, 96, 1),
    (256, 6144, 14336, 96, 1), (1024, 2560, 8192, 160, 1), (512, 5120, 11008, 160, 1),
    (2048, 2560, 5632, 160, 2), (1024, 5120, 5120, 160, 2),
    (128, 11008, 4096, None, 0), (512, 2560, 960, None, 0), (512, 4096, 4096, None, 0),
    (4096, 4096, 4096, None, 0), (1024, 3072, 8192, None, 0), (1024, 6144, 8192, None, 0),
    (1024, 2560, 4096, None, 0), (2048, 5120, 5120, None, 0), (1024, 5632, 8192, None, 0),
    (2560, 5120, 5120, None, 0), (1280, 10240, 7168, None, 0),
])
def test_slim_tiles_by_the_plan(M, N, K, width, rounds):
    p = plan(M, N, K)
    if width is None:
        assert p["tile"][1] not in SLIM_WIDTHS, p["why"]["tile"]
        return
    assert tuple(p["tile"]) == (128, width) and p["cluster"] == 2 and p["store"] == "registers"
    assert f"slim tiles make {rounds} round" in p["why"]["tile"], p["why"]["tile"]
    # The tile they beat is the one the plan had chosen: here 128x128 for 80 and 96, 128x192 for 160.
    replaced = 192 if width == 160 else 128
    assert f"tiles of 128x{replaced} the plan would take otherwise" in p["why"]["tile"], p["why"]["tile"]
    assert_supported(p, BF16)
    for kwargs in [dict(dtype=FP32), dict(row_sum=True), dict(a_k_major=False), dict(b_k_major=False)]:
        assert plan(M, N, K, **kwargs)["tile"][1] not in SLIM_WIDTHS, kwargs


@pytest.mark.parametrize("shape", ["2x1x80", "2x1x96", "2x1x160"])
def test_forced_slim_tiles_only_where_both_operands_are_k_major(shape):
    # Slim tiles read A and B K-major and store C from registers; elsewhere the override is
    # ignored, as an invalid one is (tf32, row sums, an MN-major operand).
    p = plan(512, 2560, 4096, shape=shape)
    assert tuple(p["tile"]) == (128, int(shape.split("x")[2])) and p["store"] == "registers"
    assert "not whole 64-column boxes" in p["why"]["store"]
    ignored = [dict(row_sum=True), dict(a_k_major=False), dict(b_k_major=False),
               dict(dtype=FP32, a_k_major=False), dict(dtype=FP32, row_sum=True)]
    # tf32 takes the forced 128x160 tiles (both operands read K-major), not 128x80 or 128x96.
    p = plan(512, 2560, 4096, shape=shape, dtype=FP32)
    if shape == "2x1x160":
        assert tuple(p["tile"]) == (128, 160) and p["store"] == "registers", p
    else:
        ignored.append(dict(dtype=FP32))
    for kwargs in ignored:
        p, q = plan(512, 2560, 4096, shape=shape, **kwargs), plan(512, 2560, 4096, **kwargs)
        assert (p["tile"], p["split_k"], p["cluster"]) == (q["tile"], q["split_k"], q["cluster"]), kwargs


def test_clusters_off():
    p = plan(4096, 4096, 4096, cluster="1")
    assert p["cluster"] == 1 and "TORCH_GEMM_WGMMA_CLUSTER" in p["why"]["cluster"]


def test_stream_k_off():
    assert not plan(8192, 12288, 4096, stream_k="0")["stream_k"]


def test_store_forced_to_registers():
    # TORCH_GEMM_WGMMA_STORE=registers (scripts/sanitize.sh sets it under initcheck): C leaves from
    # registers where TMA would store it, the transposed tf32 product's C included; other values
    # leave the plan's choice.
    assert plan(4096, 4096, 4096)["store"] == "tma"
    p = plan(4096, 4096, 4096, store="registers")
    assert p["store"] == "registers" and "TORCH_GEMM_WGMMA_STORE" in p["why"]["store"]
    assert plan(1800, 3840, 320, dtype="float32", b_k_major=False)["store"] == "tma_transposed"
    p = plan(1800, 3840, 320, dtype="float32", b_k_major=False, store="registers")
    assert p["transposed"] and p["store"] == "registers"
    assert plan(4096, 4096, 4096, store="tma")["store"] == "tma"


def test_max_clusters_caps_the_grid_and_forces_stream_k():
    # As tests/test_mm.py's stream-K test runs it: 3 clusters resident, small products on 128×256 tiles.
    p = plan(1900, 2600, 300, max_clusters="3", shape="2x1")
    assert p["resident"] == 3 and p["stream_k"] and p["grid"] == 3 * p["cluster"]


# ---- Operands, C's store, the transposed tf32 product.

def test_misaligned_operand_is_repacked():
    p = plan(4096, 4096, 4096, a_address=2)
    assert p["a"]["repack"] and not p["b"]["repack"] and "aligned" in p["why"]["a"]
    assert p["workspace_bytes"] >= 4096 * 4096 * 2


def test_odd_leading_dimension_is_repacked_and_c_leaves_from_registers():
    p = plan(4095, 4095, 4095)
    assert p["a"]["repack"] and p["b"]["repack"] and p["store"] == "registers"


@pytest.mark.parametrize("a_k_major, b_k_major", itertools.product([True, False], repeat=2))
def test_16_bit_reads_every_layout_in_place(a_k_major, b_k_major):
    p = plan(4096, 4096, 4096, a_k_major=a_k_major, b_k_major=b_k_major)
    assert (p["a"]["k_major"], p["b"]["k_major"]) == (a_k_major, b_k_major)
    assert not p["a"]["repack"] and not p["b"]["repack"] and not p["transposed"]


def test_tf32_nn_runs_transposed_and_stores_transposed():
    p = plan(4096, 4096, 4096, dtype=FP32, b_k_major=False)
    assert p["transposed"] and p["store"] == "tma_transposed"
    assert not p["a"]["repack"] and not p["b"]["repack"] and p["b"]["k_major"]


def test_tf32_with_bias_does_not_transpose_but_repacks_b():
    p = plan(4096, 4096, 4096, dtype=FP32, b_k_major=False, bias=True)
    assert not p["transposed"] and p["b"]["repack"] and p["b"]["k_major"]


@pytest.mark.parametrize("N, fused", [(4096, True), (1024, False)])
def test_row_sums_fused_where_tile_columns_slice_k(N, fused):
    p = plan(4096, N, 4096, row_sum=True)
    assert p["row_sum"] == ("fused" if fused else "separate")


def test_empty_product_runs_nothing():
    for M, N, K, batch in [(0, 8, 8, 1), (8, 0, 8, 1), (8, 8, 8, 0)]:
        p = plan(M, N, K, batch=batch)
        assert not p["runs"] and p["why"]["runs"]


def test_extents_past_32_bits_are_refused():
    assert plan(2**31, 256, 64)["refused"] == "extents past 32 bits"


# ---- Every plan is one the launcher supports.

SHAPES = [(1, 1, 1), (16, 4096, 4096), (100, 100, 100), (256, 4096, 4096), (512, 4096, 4096),
          (1000, 1000, 1000), (1023, 1025, 1027), (2048, 2048, 2048), (4095, 4095, 4095),
          (4096, 4096, 4096), (8192, 12288, 4096), (8192, 4096, 14336), (777, 555, 3333), (64, 64, 65536),
          (128, 2048, 28672)]


@pytest.mark.parametrize("M, N, K", SHAPES)
@pytest.mark.parametrize("dtype", [BF16, FP16, FP32])
@pytest.mark.parametrize("sm_count", [132, 114, 78, 8])
def test_every_plan_is_supported(M, N, K, dtype, sm_count):
    layouts = itertools.product([True, False], repeat=2)
    extras = [dict(), dict(bias=True), dict(row_sum=True), dict(batch=3)]
    if dtype == FP32:
        extras.append(dict(three_tf32=True))
    overrides = [dict(), dict(shape="1x1x128"), dict(shape="2x2"), dict(shape="2x1x192"), dict(cluster="1"),
                 dict(stream_k="2"), dict(stream_k="3"), dict(max_clusters="5"), dict(stream_k="0", cluster="1"),
                 dict(shape="2x1x192", cluster="1"), dict(shape="2x1x80"), dict(shape="2x1x96", cluster="1"),
                 dict(shape="2x1x160"), dict(shape="2x1x160", cluster="1"),
                 dict(shape="2x2x128"), dict(shape="2x4x128"), dict(shape="1x1x64"),
                 dict(shape="1x1x64", cluster="1"), dict(tf32_plan="sixteen_bit"),
                 dict(tf32_plan="sixteen_bit", stream_k="3"), dict(shape="1x8x128x2"),
                 dict(tf32_plan=None), dict(tf32_plan=None, stream_k="3")]
    for (a_k, b_k), extra, override in itertools.product(layouts, extras, overrides):
        p = plan(M, N, K, dtype=dtype, sm_count=sm_count, a_k_major=a_k, b_k_major=b_k, **extra, **override)
        assert p["refused"] is None
        assert_supported(p, dtype, row_sum=extra.get("row_sum", False))


# ---- kernel="auto".

@pytest.mark.parametrize("M, N, K, dtype, sm, allow_tf32, b_stride_k, expected", [
    (4096, 4096, 4096, BF16, 90, True, 1, "wgmma_sm90"),
    (16, 4096, 4096, FP16, 90, True, 1, "decode_sm80"),   # a few tokens against a linear's weight
    (4, 1024, 4096, BF16, 80, True, 1, "decode_sm80"),
    (17, 4096, 4096, BF16, 90, True, 1, "wgmma_sm90"),
    (16, 4096, 4096, FP16, 75, True, 1, "smem32"),        # no mma.sync before sm_80
    (16, 4096, 4096, FP16, 90, True, 4096, "decode_sm80"), # N-major B (dx): its own kernel,
    (1, 8192, 2048, BF16, 90, True, 8192, "decode_sm80"),  # 128 blocks of 64 columns: one an SM
    (16, 8448, 1024, BF16, 90, True, 8448, "decode_sm80"), # 132 blocks, the shortest K
    (16, 5120, 1024, BF16, 90, True, 5120, "wgmma_sm90"),  # a weight under 6·2^20 elements
    (16, 16960, 1024, BF16, 90, True, 16960, "wgmma_sm90"),  # 265 blocks: more than 2 an SM
    (16, 4096, 1016, BF16, 90, True, 4096, "wgmma_sm90"),  # too short a K
    (17, 4096, 4096, BF16, 90, True, 4096, "wgmma_sm90"),  # past 16 rows
    (16, 4100, 4096, BF16, 90, True, 4100, "wgmma_sm90"),  # rows not whole 16-byte vectors
    (16, 4096, 4096, BF16, 80, True, 4096, "mma_sm80"),    # clusters split K on sm_90 only
    (1, 4096, 4096, BF16, 90, True, 1, "decode_sm80"),    # one token, a large weight
    (1, 2048, 2048, BF16, 90, True, 1, "gemv"),           # one token, a small weight: one launch
    (2, 1024, 4096, BF16, 90, True, 1, "gemv"),
    (8, 512, 2048, FP16, 90, True, 1, "gemv"),
    (4, 2048, 2048, BF16, 90, True, 1, "decode_sm80"),    # 128 blocks stream the weight unsplit
    (4, 256, 8192, BF16, 90, True, 1, "wgmma_sm90"),      # 16 blocks, a long K: decode_sm80 would split it
    (8, 512, 4096, BF16, 90, True, 1, "decode_sm80"),     # 32 blocks, a short K: no split
    (16, 512, 4096, BF16, 90, True, 1, "wgmma_sm90"),     # two token tiles: split by the rounds
    (4, 2048, 2048, BF16, 80, True, 1, "decode_sm80"),    # no wgmma: decode_sm80
    (8, 28672, 4096, BF16, 90, True, 1, "decode_sm80"),   # 1792 blocks fill 264 slots without a split
    (8, 28672, 8192, BF16, 90, True, 1, "wgmma_sm90"),    # a weight of 2^27.8: wgmma's 112 tiles stream it
    (16, 8192, 8192, FP16, 90, True, 1, "wgmma_sm90"),    # 2^26 elements at 16 rows: 128 split tiles
    (8, 8192, 8192, BF16, 90, True, 1, "decode_sm80"),    # 2^26 elements at 8 rows: decode_sm80
    (4, 6144, 28672, BF16, 90, True, 1, "decode_sm80"),   # 2^27.4, but wgmma's 96 slices fill too few SMs
    (16, 5120, 5120, FP16, 90, True, 1, "wgmma_sm90"),
    (8, 5120, 5120, FP16, 90, True, 1, "decode_sm80"),    # 320 blocks of 10 KB rows: no split
    (1, 4096, 4096, BF16, 75, True, 1, "gemv"),           # no mma.sync: one row on gemv
    (1, 28672, 4096, BF16, 90, True, 28672, "wgmma_sm90"), # N-major, 448 blocks: wgmma
    (2, 4096, 4096, FP32, 80, False, 1, "gemv"),
    (4096, 4096, 4096, BF16, 80, True, 1, "mma_sm80"),
    (4096, 4096, 4096, BF16, 75, True, 1, "smem32"),
    (4096, 4096, 4096, FP32, 90, True, 1, "wgmma_sm90"),
    (4096, 100, 4096, FP32, 90, True, 1, "multistage"),   # N under one 128-row tile
    (64, 14336, 4096, FP32, 90, True, 1, "wgmma_sm90"),   # tf32, 56 tiles of 64x256 against a weight
    (33, 4096, 4096, FP32, 90, True, 1, "wgmma_sm90"),    # 16 of them
    (32, 4096, 4096, FP32, 90, True, 1, "wgmma_sm90"),    # tf32 decode: up to 16 rows, then
    (17, 4096, 4096, FP32, 90, True, 1, "wgmma_sm90"),    # 64x256 tiles split in 4
    (16, 1024, 4096, FP32, 90, True, 1, "decode_sm80"),
    (16, 2560, 2560, FP32, 90, True, 1, "wgmma_sm90"),    # from 9 rows: at most 1024 columns
    (16, 4096, 4096, FP32, 90, True, 1, "wgmma_sm90"),
    (9, 3072, 3072, FP32, 90, True, 1, "wgmma_sm90"),
    (3, 4096, 4096, FP32, 90, True, 1, "decode_sm80"),
    (16, 1024, 8192, FP32, 90, True, 1, "decode_sm80"),
    (16, 4096, 11008, FP32, 90, True, 1, "wgmma_sm90"),   # a longer K: split 64x256 tiles
    (16, 5120, 4096, FP32, 90, True, 1, "wgmma_sm90"),
    (8, 5120, 4096, FP32, 90, True, 1, "decode_sm80"),    # up to 8 rows: at most 8192
    (8, 8192, 8192, FP32, 90, True, 1, "decode_sm80"),
    (8, 11008, 4096, FP32, 90, True, 1, "wgmma_sm90"),
    (8, 4096, 14336, FP32, 90, True, 1, "wgmma_sm90"),
    (16, 14336, 4096, FP32, 90, True, 1, "wgmma_sm90"),   # 56 column tiles fill the SMs
    (32, 2048, 256, FP32, 90, True, 1, "decode_sm80"),    # too short a K for wgmma to split
    (4, 16384, 256, FP32, 90, True, 1, "wgmma_sm90"),     # past the decode's bounds: no gemv
    (4, 28672, 8192, FP32, 90, True, 1, "wgmma_sm90"),
    (2, 28672, 8192, FP32, 90, True, 1, "gemv"),
    (2, 4096, 4096, FP32, 90, True, 1, "gemv"),           # two rows: gemv, in float32
    (4, 1024, 4096, FP32, 90, True, 1, "gemv"),           # small weights: gemv's one launch
    (8, 512, 2048, FP32, 90, True, 1, "gemv"),
    (8, 1024, 4096, FP32, 90, True, 1, "decode_sm80"),
    (16, 1024, 4096, FP32, 90, True, 4096, "multistage"), # B's columns not contiguous
    (16, 1024, 4096, FP32, 80, True, 1, "multistage"),    # tf32 decode measured on sm_90 only
    (8, 1024, 4096, FP32, 80, True, 1, "gemv"),           # ... gemv's float32 rows instead
    (8, 1024, 4096, FP32, 90, False, 1, "gemv"),          # TF32 off: up to 8 rows on gemv
    (9, 1024, 4096, FP32, 90, False, 1, "multistage"),
    (8, 1024, 4096, FP32, 90, False, 4096, "multistage"), # B's columns not contiguous
    (8, 1024, 4096, "float64", 90, False, 1, "smem32"),   # float64: two rows
    (8, 255, 4096, FP32, 90, False, 1, "multistage"),     # fewer columns than measured: two rows
    (2, 255, 4096, FP32, 90, False, 1, "gemv"),
    (8, 1024, 4096, FP32, 75, False, 1, "smem16"),        # before sm_80: two rows
    (3, 1024, 4096, FP32, 75, False, 1, "smem16"),
    (64, 2048, 256, FP32, 90, True, 1, "multistage"),     # 8, too short a K to split: the CUDA cores
    (64, 2048, 2048, FP32, 90, True, 1, "wgmma_sm90"),    # 8 tiles split in 8
    (96, 2048, 4096, FP32, 90, True, 1, "wgmma_sm90"),    # 16 tiles of 64x256 split in 4
    (64, 28672, 4096, FP32, 90, True, 1, "wgmma_sm90"),   # 112 tiles: the plan's 64x256 ones
    (64, 14336, 4096, FP32, 90, True, 4096, "multistage"),  # B's columns not contiguous
    (64, 14336, 4096, FP32, 90, False, 1, "multistage"),  # TF32 off
    (4096, 4096, 4096, FP32, 90, False, 1, "multistage"),
    (4096, 4096, 4096, FP32, 86, True, 1, "multistage"),
    (16, 4096, 4096, FP32, 75, False, 1, "smem16"),        # sm_75: gemv for two rows only
    (512, 512, 512, FP32, 75, False, 1, "smem32"),
    (4096, 4096, 4096, FP32, 75, False, 1, "warptile"),
    (4096, 4096, 4096, "float64", 90, True, 1, "smem32"),
])
def test_auto_rule(M, N, K, dtype, sm, allow_tf32, b_stride_k, expected):
    choice = _C.auto_kernel(M, N, K, dtype=dtype, sm=sm, allow_tf32=allow_tf32, b_stride_k=b_stride_k)
    assert choice["kernel"] == expected and choice["reason"]


def test_auto_leaves_wgmma_where_its_tiles_pass_32_bits():
    """Extents within 32 bits whose tiles are not (C of 2^46 elements): the planner refuses them,
    so auto does not take wgmma_sm90."""
    assert _C.sm90_plan(2**31 - 1, 32768, 64, sm_count=132)["refused"] is not None
    assert _C.auto_kernel(2**31 - 1, 32768, 64, dtype=BF16, sm=90)["kernel"] != "wgmma_sm90"
    assert _C.auto_kernel(2**20, 32768, 64, dtype=BF16, sm=90)["kernel"] == "wgmma_sm90"


def test_auto_decode_on_sm90_follows_decode_sm80s_split():
    # Up to 8 bf16/fp16 rows K splits across blocks only where the blocks of 16 columns are at
    # most a quarter of the SMs against rows of 10 KB or more (512 columns, K = 8192: 32 blocks; 528:
    # 33, a quarter of 132 SMs but not of 128), or past the 264 slots of one round against rows of
    # more than 16 KB (5120 columns, K = 11008); there auto takes wgmma, but for up to 4 rows
    # past one round (below). 9-16 rows split by the rounds alone (5120 columns: 320 blocks).
    def kernel(M, N, K, sm_count=132):
        return _C.auto_kernel(M, N, K, dtype=BF16, sm=90, sm_count=sm_count)["kernel"]
    assert kernel(8, 4096, 4096) == "decode_sm80"
    assert kernel(8, 5120, 5120) == "decode_sm80"
    assert kernel(8, 5120, 8192) == "decode_sm80"
    assert kernel(8, 5120, 11008) == "wgmma_sm90"
    assert kernel(8, 512, 4096) == "decode_sm80"
    assert kernel(8, 512, 8192) == "wgmma_sm90"
    assert kernel(8, 512, 5120) == "wgmma_sm90"   # rows of 10240 bytes: split
    assert kernel(8, 512, 5112) == "decode_sm80"  # one vector less: whole
    assert kernel(8, 5120, 8200) == "wgmma_sm90"  # past one round, rows over 16 KB: split
    assert kernel(8, 528, 8192) == "wgmma_sm90"
    assert kernel(8, 528, 8192, sm_count=128) == "decode_sm80"
    assert kernel(16, 5120, 5120) == "wgmma_sm90"
    assert kernel(16, 2048, 8192) == "wgmma_sm90"
    assert "second kernel" in _C.auto_kernel(8, 512, 8192, dtype=BF16, sm=90, sm_count=132)["reason"]
    # Up to 4 rows, one weight read in aligned vectors, where that split (at most 4) evens out the
    # rounds of more blocks than one round holds and wgmma's plan would split its tiles too (320
    # and 384 blocks of long rows: 4 and 2 splits), decode_sm80 keeps it.
    def rounds(M, N, K, **kw):
        choice = _C.auto_kernel(M, N, K, dtype=BF16, sm=90, sm_count=kw.pop("sm_count", 132), **kw)
        return choice["kernel"] == "decode_sm80" and "even out the rounds" in choice["reason"]
    for M in (1, 2, 4):
        assert rounds(M, 5120, 11008) and rounds(M, 6144, 28672)
    assert _C.sm90_plan(1, 5120, 11008, sm_count=132)["split_k"] > 1
    assert not rounds(5, 6144, 28672) and kernel(5, 6144, 28672) == "wgmma_sm90"   # 5 rows
    assert not rounds(4, 512, 8192) and kernel(4, 512, 8192) == "wgmma_sm90"   # a split for few blocks
    assert not rounds(1, 4608, 36864) and kernel(1, 4608, 36864) == "wgmma_sm90"  # 10 splits
    assert _C.sm90_plan(1, 10240, 10240, sm_count=132)["split_k"] == 1
    assert not rounds(1, 10240, 10240) and kernel(1, 10240, 10240) == "wgmma_sm90"  # wgmma unsplit
    assert kernel(4, 4096, 28672) == "decode_sm80" and not rounds(4, 4096, 28672)  # one round
    assert not rounds(4, 4096, 28672, sm_count=114)  # 6 splits on 114 SMs
    assert not rounds(4, 5120, 11008, batch=2)
    assert not rounds(4, 5120, 11008, a_strides=[11009, 1])  # rows off the 16-byte vectors
    assert not rounds(4, 5120, 11008, a_address=2)
    with pytest.raises(ValueError, match="sm_count"):
        _C.auto_kernel(8, 8, 8, dtype=BF16, sm=90, sm_count=0)


def test_auto_streams_big_weights_on_wgmma():
    # A few bf16/fp16 rows against one big weight go to wgmma where its 64-row tiles and K slices
    # fill 5/6 of the SMs: from 2^27 elements up to 8 rows, from 2^26 up to 16 (kWgmmaOverDecode).
    def choice(M, N, K, **kw):
        return _C.auto_kernel(M, N, K, dtype=kw.pop("dtype", BF16), sm=kw.pop("sm", 90),
                              sm_count=kw.pop("sm_count", 132), **kw)

    def big(M, N, K, **kw):
        c = choice(M, N, K, **kw)
        return c["kernel"] == "wgmma_sm90" and "big weight" in c["reason"]
    for M in (1, 2, 4, 8):
        assert big(M, 28672, 8192) and big(M, 8192, 28672) and big(M, 28672, 5120, dtype=FP16)
        assert not big(M, 28672, 4096) and not big(M, 8192, 8192)       # under 2^27
        assert not big(M, 6144, 28672) and not big(M, 5120, 28672)      # 96 and 80 of 132 SMs
    for M in (9, 12, 16):
        assert big(M, 8192, 8192) and big(M, 28672, 2560)              # from 2^26 past 8 rows
        assert not big(M, 8192, 6144) and not big(M, 28672, 2048)       # under 2^26
        assert not big(M, 4096, 28672)                                  # 64 slices of 132 SMs
    assert big(16, 8192, 8192) and not big(17, 8192, 8192)              # past 16 rows: no decode
    assert not big(4, 28672, 8192, batch=2)                             # batches unmeasured
    assert big(8, 6144, 28672, sm_count=114)                            # 96 slices fill 5/6 of 114
    assert choice(4, 28672, 8192, sm=80)["kernel"] == "decode_sm80"     # no wgmma before sm_90
    # Only as measured: 128-row tiles past 33792 columns (a vocabulary), a weight wgmma would copy
    # (K not whole vectors, or a misaligned base), row sums (their plan does not split).
    assert _C.sm90_plan(1, 128256, 4096, sm_count=132)["consumers"] == 2
    assert not big(1, 128256, 4096) and not big(8, 50000, 2048)
    assert not big(4, 28672, 8190) and not big(4, 28672, 8192, b_address=2)
    assert not big(16, 8192, 8192, row_sum=True) and big(16, 8192, 8192, bias=True)
    x = torch.empty(16, 8192, dtype=torch.bfloat16, device="meta")
    w = torch.empty(8192, 8192, dtype=torch.bfloat16, device="meta")  # a linear's (out, in) weight
    assert torch_gemm.explain(x, w.t(), sm=90, sm_count=132)["kernel"] == "wgmma_sm90"
    assert torch_gemm.explain(x, w.t(), sm=90, sm_count=132, row_sum=True)["kernel"] == "decode_sm80"
    # decode_sm80's split that evens out the rounds comes first where both would take the product.
    assert choice(1, 7168, 20480)["kernel"] == "decode_sm80"
    assert "even out the rounds" in choice(1, 7168, 20480)["reason"]


# auto consults wgmma_sm90's plan for any shape, empty ones included (M, N or K of 0, no batch), on
# any SM count; so does sm90_plan. Neither may fault on them (an empty product has no turns to
# share out).
@pytest.mark.parametrize("dtype, allow_tf32, three_tf32", [
    (BF16, True, False), (FP16, True, False), (FP32, True, False), (FP32, False, True), (FP32, False, False),
])
@pytest.mark.parametrize("sm_count", [1, 2, 132])
def test_auto_and_the_plan_take_empty_shapes(dtype, allow_tf32, three_tf32, sm_count):
    for M, N, K in [(0, 33, 97), (31, 0, 64), (97, 7, 0), (0, 0, 0), (256, 0, 8192), (0, 1024, 8192),
                    (512, 512, 8192), (1, 1, 1)]:
        for batch in (0, 1, 2):
            choice = _C.auto_kernel(M, N, K, dtype=dtype, sm=90, sm_count=sm_count, allow_tf32=allow_tf32,
                                    three_tf32=three_tf32, batch=batch)
            assert choice["kernel"] and choice["reason"], (M, N, K, batch)
            p = plan(M, N, K, batch=batch, dtype=dtype, sm_count=sm_count)
            assert isinstance(p, dict), (M, N, K, batch)


def test_auto_rule_without_sm90a_code():
    assert _C.auto_kernel(4096, 4096, 4096, dtype=BF16, sm=90, sm90a=False)["kernel"] == "mma_sm80"


# ---- torch_gemm.explain on CPU and meta tensors.

KEYS = {"kernel", "reason", "device", "sm", "sm_count", "dtype", "op", "M", "N", "K", "batch", "plan"}


def test_explain_cpu_tensors_is_the_cpu_kernel():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    answer = explain(a, b)
    assert set(answer) == KEYS and answer["kernel"] == "blocked" and answer["plan"] is None
    assert (answer["M"], answer["N"], answer["K"], answer["device"]) == (64, 16, 32, "cpu")


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_explain_for_a_hopper_gpu(device, dtype):
    a = torch.empty(4096, 1024, dtype=dtype, device=device)
    w = torch.empty(2048, 1024, dtype=dtype, device=device)
    answer = explain(a, w.t(), sm=90, sm_count=132)
    assert set(answer) == KEYS and answer["kernel"] == "wgmma_sm90" and answer["device"] == "cuda"
    p = answer["plan"]
    assert_supported(p, str(dtype).removeprefix("torch."))
    expected = plan(4096, 2048, 1024, dtype=str(dtype).removeprefix("torch."), b_k_major=True)
    assert {k: v for k, v in p.items() if k != "why"} == {k: v for k, v in expected.items() if k != "why"}


def test_explain_meta_tensors_without_a_device_runs_no_kernel():
    a = torch.empty(8, 8, device="meta")
    answer = explain(a, a)
    assert set(answer) == KEYS and answer["kernel"] is None and "sm=" in answer["reason"]


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_explain_linear_bmm_and_row_sums(device):
    x = torch.empty(1000, 512, dtype=torch.bfloat16, device=device)
    w = torch.empty(768, 512, dtype=torch.bfloat16, device=device)
    bias = torch.empty(768, dtype=torch.bfloat16, device=device)
    linear = explain(x, w.t(), bias=bias, sm=90, sm_count=132)
    assert linear["op"] == "linear_tiled" and linear["kernel"] == "wgmma_sm90"
    assert_supported(linear["plan"], BF16)
    summed = explain(x, w.t(), row_sum=True, sm=90, sm_count=132)
    assert summed["op"] == "mm_tiled_row_sum" and summed["plan"]["row_sum"] in ("fused", "separate")
    q, k = torch.empty(8, 256, 64, device=device, dtype=torch.float16), torch.empty(8, 256, 64, device=device, dtype=torch.float16)
    batched = explain(q, k.transpose(1, 2), sm=90, sm_count=132)
    assert batched["op"] == "bmm_tiled" and batched["batch"] == 8 and batched["plan"]["batch"] == 8
    assert_supported(batched["plan"], FP16)


@pytest.mark.skipif(not torch_gemm._C.built_with_cuda(), reason="this build has no CUDA kernels to list")
def test_explain_knows_the_cuda_table():
    """explain's copy of the CUDA rungs (for builds without them) says what the build's table
    says: dtypes, lowest compute capability, float32 as TF32."""
    rows = {r["name"]: r for r in torch_gemm.kernel_table() if r["device"] == "cuda"}
    copy = torch_gemm.ops._CUDA_KERNELS
    assert set(copy) == set(rows)
    for name, (dtypes, min_sm, tf32) in copy.items():
        assert (set(dtypes), min_sm, tf32) == (set(rows[name]["dtypes"]), rows[name]["min_sm"], rows[name]["tf32"]), name


def test_explain_takes_what_the_kernel_takes():
    """Every named CUDA kernel, every dtype it takes, on a GPU it runs on: explain answers with it."""
    for name, (dtypes, min_sm, _) in torch_gemm.ops._CUDA_KERNELS.items():
        sm = 90 if min_sm == 90 else 80
        for label in dtypes:
            a = torch.empty(256, 256, device="meta", dtype=torch_gemm.ops.DTYPE_BY_NAME[label])
            assert explain(a, a, kernel=name, sm=sm, sm_count=132, allow_tf32=True)["kernel"] == name


def test_available_kernels_wants_a_dtype():
    with pytest.raises(TypeError, match="available_kernels: dtype must be a torch.dtype or None, got 'float32'"):
        torch_gemm.available_kernels("cpu", "float32")


@pytest.mark.skipif(not HAS_FP32_PRECISION, reason="this torch has no fp32_precision setting")
@pytest.mark.parametrize("how, tf32", [
    ("allow_tf32", True), ("deny_tf32", False), ("precision_high", True),
    ("matmul_tf32", True), ("matmul_ieee", False), ("generic_tf32", True),
])
def test_explain_reads_tf32_as_torch_sets_it(how, tf32):
    """explain and available_kernels follow TF32 however torch's setting was made, its newer
    fp32_precision included (after which torch's legacy allow_tf32 flag raises when read)."""
    a = torch.empty(4096, 4096, device="meta")
    before = _torch_precision_state()
    with torch_tf32_setting(how):
        assert explain(a, a, sm=90, sm_count=132)["kernel"] == ("wgmma_sm90" if tf32 else "multistage")
        assert torch_gemm.available_kernels("cpu", torch.float32) == ["auto", "blocked"]
        assert explain(torch.randn(3, 4), torch.randn(4, 5))["kernel"] == "blocked"
    assert _torch_precision_state() == before  # nothing leaks into later tests


def _torch_precision_state():
    return (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
            torch.backends.fp32_precision, torch.backends.cuda.matmul.fp32_precision,
            torch.backends.mkldnn.matmul.fp32_precision)


def test_explain_other_gpus_and_dtypes():
    a = torch.empty(4096, 4096, device="meta")
    assert explain(a, a, sm=80, sm_count=108)["kernel"] == "multistage"
    assert explain(a, a, sm=90, sm_count=132, allow_tf32=True)["kernel"] == "wgmma_sm90"
    assert explain(a, a, sm=90, sm_count=132, allow_tf32=False)["kernel"] == "multistage"
    h = a.to(torch.float16)
    assert explain(h, h, sm=80, sm_count=108)["kernel"] == "mma_sm80"
    assert explain(h, h, sm=90, sm_count=132, kernel="smem32")["kernel"] == "smem32"
    assert explain(h, h, sm=90, sm_count=132, kernel="smem")["kernel"] == "smem32"


def test_explain_shows_multistage_plan():
    """float32 with TF32 off on a 132-SM Hopper: multistage, with the tile and split its launcher
    plans (multistage_plan.h's cost model) and what the model weighed."""
    a, b = torch.empty(300, 2000, device="meta"), torch.empty(2000, 2500, device="meta")
    answer = explain(a, b, sm=90, sm_count=132, allow_tf32=False)
    assert answer["kernel"] == "multistage"
    p = answer["plan"]
    # 30 large tiles and 125 k-tiles: 4 slices of 32 make 120 blocks, one wave
    assert (p["tile"], p["split_k"], p["waves"], p["k_tiles_per_split"]) == ((128, 256), 4, 1, 32)
    assert p["workspace_bytes"] == 4 * 300 * 2500 * 4 and p["tiles"] == 30
    assert min(c["modeled_us"] for c in p["candidates"]) * 1.02 >= p["modeled_us"]
    assert {(c["tile"], c["split_k"]) for c in p["candidates"]} >= {((128, 256), 1), ((64, 64), 2)}
    assert "K split 4 ways" in p["why"][0]
    plan = _C.multistage_plan
    assert (plan(4096, 4096, 4096, sm_count=132)["tile"], plan(4096, 4096, 4096, sm_count=132)["split_k"]) == ((128, 256), 1)
    # 16 rows: the narrow tile (32 tiles, split 12 ways); past 64 rows it is not weighed.
    assert (plan(16, 4096, 4096, sm_count=132)["tile"], plan(16, 4096, 4096, sm_count=132)["split_k"]) == ((32, 128), 12)
    assert {c["split_k"] for c in plan(16, 4096, 4096, sm_count=132)["candidates"] if c["tile"] == (32, 128)} == {
        1, 2, 3, 4, 5, 6, 7, 8, 12, 16}
    assert (32, 128) in {c["tile"] for c in plan(64, 4096, 4096, sm_count=132)["candidates"]}
    assert (32, 128) not in {c["tile"] for c in plan(65, 4096, 4096, sm_count=132)["candidates"]}
    assert "32x128" in plan(16, 4096, 4096, sm_count=132)["why"][0]
    assert plan(2048, 2560, 28672, sm_count=132)["split_k"] == 4  # 160 tiles: 4.85 waves of a quarter
    batched = plan(256, 5120, 28672, sm_count=132, batch=2)
    assert batched["split_k"] == 1 and batched["workspace_bytes"] == 0 and "batch" in batched["why"][-1]
    assert batched["launches"] == 1 and batched["last_launch"] is None
    # A batch of 65536 runs as a launch of 65535 products and one of one, planned alone: that one
    # splits K and sizes the workspace.
    chunked = plan(64, 64, 128, sm_count=132, batch=65536)
    assert (chunked["launches"], chunked["split_k"], chunked["tiles"]) == (2, 1, 65536)
    assert chunked["last_launch"]["split_k"] == 2 and chunked["workspace_bytes"] == 2 * 64 * 64 * 4
    for M, N, K, batch in [(0, 0, 0, 1), (0, 5, 7, 1), (5, 0, 7, 1), (0, 5, 100000, 1), (5, 7, 3, 0)]:
        empty = plan(M, N, K, sm_count=132, batch=batch)
        assert (empty["split_k"], empty["workspace_bytes"], empty["launches"], empty["tiles"]) == (1, 0, 0, 0)
        assert empty["k_tiles_per_split"] == 0 and empty["candidates"] == [] and "empty" in empty["why"][0]
    for M, N, K in [(5, 7, 0), (1, 1, 1)]:
        assert plan(M, N, K, sm_count=132)["split_k"] == 1 and plan(M, N, K, sm_count=132)["launches"] == 1
    bmm = explain(torch.empty(3, 64, 128, device="meta"), torch.empty(3, 128, 96, device="meta"),
                  sm=80, sm_count=108)
    assert bmm["kernel"] == "multistage" and bmm["plan"]["split_k"] == 1 and bmm["plan"]["tiles"] == 6


def test_explain_reads_the_forced_multistage_plan(monkeypatch):
    """TORCH_GEMM_MULTISTAGE_PLAN, as the launcher reads it: the tile and split it names (as far as
    K's k-tiles and a batch allow), modeled alike; a value that is not a plan is refused."""
    a, b = torch.empty(300, 2000, device="meta"), torch.empty(2000, 2500, device="meta")
    monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", "64x64:5")
    p = explain(a, b, sm=90, sm_count=132, allow_tf32=False)["plan"]
    assert (p["tile"], p["split_k"], p["k_tiles_per_split"]) == ((64, 64), 5, 50) and "forced" in p["why"][0]
    assert p["workspace_bytes"] == 5 * 300 * 2500 * 4
    monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", "128x256")
    assert explain(a, b, sm=90, sm_count=132, allow_tf32=False)["plan"]["split_k"] == 1
    monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", "32x128:3")  # forced past the rows it is weighed for
    narrow = explain(a, b, sm=90, sm_count=132, allow_tf32=False)["plan"]
    assert (narrow["tile"], narrow["split_k"], narrow["k_tiles_per_split"]) == ((32, 128), 3, 42)
    assert narrow["tiles"] == 10 * 20 and narrow["blocks_per_sm"] == 4
    monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", "128x256:64")  # 125 k-tiles: 63 slices of 2
    many = explain(a, b, sm=90, sm_count=132, allow_tf32=False)["plan"]
    assert many["split_k"] == 63 and "not 64" in many["why"][1]
    batched = explain(torch.empty(2, 300, 2000, device="meta"), torch.empty(2, 2000, 2500, device="meta"),
                      sm=90, sm_count=132, allow_tf32=False)["plan"]
    assert batched["split_k"] == 1  # a batch is not split
    for bad in ("256x128", "32x1280", "32x128:0", "64x64:0", "64x64:65", "64x64:", "128x256:2x", "64x64;2", "64x64:+3", "64x64: 3",
                "64x64:03", "64x64:99999999999999999999", "128x2560"):
        monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", bad)
        with pytest.raises(ValueError, match="multistage_plan: plan: TORCH_GEMM_MULTISTAGE_PLAN"):
            explain(a, b, sm=90, sm_count=132, allow_tf32=False)
    monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", "")  # empty: unset, as the launcher reads it
    assert explain(a, b, sm=90, sm_count=132, allow_tf32=False)["plan"]["split_k"] == 4


# ---- Bad arguments name the function and the argument.

@pytest.mark.parametrize("kwargs, words", [
    (dict(sm_count=0), ["sm90_plan", "sm_count"]),
    (dict(sm_count=132, dtype="int8"), ["sm90_plan", "dtype"]),
    (dict(sm_count=132, dtype="float64"), ["sm90_plan", "float32"]),
    (dict(sm_count=132, a_strides=[1, 2, 3, 4]), ["sm90_plan", "a_strides"]),
    (dict(sm_count=132, max_active_clusters=0), ["sm90_plan", "max_active_clusters"]),
    (dict(sm_count=132, batch=-1), ["sm90_plan", "batch"]),
    (dict(sm_count=132, bias=True, row_sum=True), ["sm90_plan", "bias"]),
])
def test_sm90_plan_bad_arguments(kwargs, words):
    with pytest.raises(ValueError) as error:
        _C.sm90_plan(64, 64, 64, **kwargs)
    assert all(w in str(error.value) for w in words), str(error.value)


@pytest.mark.parametrize("args, kwargs, words", [
    ((-1, 8, 8), dict(sm_count=132), ["multistage_plan", "M must be >= 0"]),
    ((8, 8, -8), dict(sm_count=132), ["multistage_plan", "K must be >= 0"]),
    ((2**41, 8, 8), dict(sm_count=132), ["multistage_plan", "M must be at most 2^40"]),
    ((2**30, 2**30, 8), dict(sm_count=132), ["multistage_plan", "M·N·batch must be at most 2^54"]),
    ((8, 8, 2**41), dict(sm_count=132), ["multistage_plan", "K must be at most 2^40"]),
    ((2**20, 2**20, 8), dict(sm_count=132, batch=2**20), ["multistage_plan", "M·N·batch", "batch = 1048576"]),
    ((8, 8, 8), dict(sm_count=0), ["multistage_plan", "sm_count"]),
    ((8, 8, 8), dict(sm_count=2**31), ["multistage_plan", "sm_count must be in [1, 2^31 - 1]"]),
    ((8, 8, 8), dict(sm_count=132, batch=-1), ["multistage_plan", "batch"]),
    ((8, 8, 8), dict(sm_count=132, batch=2**41), ["multistage_plan", "batch must be at most 2^40"]),
])
def test_multistage_plan_bad_arguments(args, kwargs, words):
    with pytest.raises(ValueError) as error:
        _C.multistage_plan(*args, **kwargs)
    assert all(w in str(error.value) for w in words), str(error.value)


def test_auto_kernel_bad_arguments():
    with pytest.raises(ValueError, match="auto_kernel.*sm"):
        _C.auto_kernel(8, 8, 8, dtype=BF16, sm=0)
    with pytest.raises(ValueError, match="auto_kernel.*M"):
        _C.auto_kernel(-1, 8, 8, dtype=BF16, sm=90)


def test_explain_bad_arguments():
    a = torch.empty(64, 64, device="meta", dtype=torch.bfloat16)
    cases = [
        (TypeError, "torch_gemm.explain: a must be a tensor", lambda: explain([1], a)),
        (RuntimeError, "torch_gemm.explain: a must be a 2-D tensor", lambda: explain(a[0], a)),
        (RuntimeError, "torch_gemm.explain: inner dimensions differ", lambda: explain(a, a[:3])),
        (ValueError, "sm_count", lambda: explain(a, a, sm=90)),
        (ValueError, "torch_gemm.explain: sm_count must be a positive int", lambda: explain(a, a, sm=90, sm_count=0)),
        (ValueError, "torch_gemm.explain: sm must be a positive int", lambda: explain(a, a, sm=True, sm_count=4)),
        (TypeError, "torch_gemm.explain: kernel must be a str", lambda: explain(a, a, kernel=3)),
        (ValueError, "unknown kernel 'nope'", lambda: explain(a, a, kernel="nope", sm=90, sm_count=132)),
        (ValueError, "kernel 'wgmma_sm90' runs on compute capability 9.0 only",
         lambda: explain(a, a, kernel="wgmma_sm90", sm=80, sm_count=108)),
        (ValueError, "does not support dtype Double",
         lambda: explain(a.double(), a.double(), kernel="wgmma_sm90", sm=90, sm_count=132)),
        (ValueError, "not available for cpu tensors", lambda: explain(torch.ones(4, 4), torch.ones(4, 4), kernel="wgmma_sm90")),
        (ValueError, "unknown kernel 'bogus'", lambda: explain(torch.ones(4, 4), torch.ones(4, 4), kernel="bogus")),
        # What the op refuses, explain refuses: a dtype the kernel does not take, a GPU below it, TF32
        # while it is not allowed.
        (ValueError, "kernel 'mma_sm80' does not support dtype Double",
         lambda: explain(a.double(), a.double(), kernel="mma_sm80", sm=90, sm_count=132)),
        (ValueError, "kernel 'mma_sm80' needs compute capability 8.0 or higher, not 7.5",
         lambda: explain(a, a, kernel="mma_sm80", sm=75, sm_count=40)),
        (ValueError, "kernel 'multistage' does not support dtype BFloat16",
         lambda: explain(a, a, kernel="multistage", sm=90, sm_count=132)),
        (ValueError, "kernel 'decode_sm80' multiplies float32 in TF32, which is not allowed",
         lambda: explain(a.float(), a.float(), kernel="decode_sm80", sm=90, sm_count=132, allow_tf32=False)),
        (ValueError, "kernel 'wgmma_sm90_3xtf32' does not support dtype BFloat16",
         lambda: explain(a, a, kernel="wgmma_sm90_3xtf32", sm=90, sm_count=132)),
        (RuntimeError, "torch_gemm.explain: bias must be a 1-D tensor", lambda: explain(a, a, bias=a, sm=90, sm_count=132)),
        (ValueError, "row_sum", lambda: explain(a, a, bias=a[0], row_sum=True)),
    ]
    for error, words, call in cases:
        with pytest.raises(error) as raised:
            call()
        assert words in str(raised.value), (words, str(raised.value))


# ---- decode_sm80 against an N-major weight (dx): its layout, cluster and auto's choice.

def n_major(M, N, K, **kw):
    return _C.decode_n_major_plan(M, N, K, dtype=kw.pop("dtype", BF16), **kw)


@pytest.mark.parametrize("M, N, K, blocks, cluster, token_tiles", [
    (16, 4096, 28672, 64, 2, 2),   # 64 blocks: a cluster of 2 (128) keeps them within 1.5 an SM (198)
    (1, 2048, 4096, 32, 4, 1),     # 32: 4 (128; 8 would make 256)
    (8, 5120, 8192, 80, 2, 1),     # 80: 2 (160)
    (8, 6144, 8192, 96, 2, 1),     # 96: 2 (192)
    (8, 6400, 8192, 100, 1, 1),    # 100: 2 would make 200
    (9, 8192, 28672, 128, 1, 2),
    (4, 520, 1000, 9, 2, 1),       # 9 blocks, 32 chunks: 2 keeps two chunks a warp, 4 would not
    (4, 520, 8192, 9, 8, 1),       # 256 chunks: the most, 8
])
def test_n_major_plan(M, N, K, blocks, cluster, token_tiles):
    p = n_major(M, N, K)
    assert (p["blocks"], p["cluster"], p["token_tiles"]) == (blocks, cluster, token_tiles)
    assert p["chunks_per_split"] == -(-(-(-K // 32)) // cluster)
    assert n_major(M, N, K, clusters=False)["cluster"] == 1  # no clusters (before sm_90): unsplit


def test_n_major_plan_forced_cluster():
    assert n_major(8, 2048, 4096, cluster="8")["cluster"] == 8
    assert n_major(8, 2048, 4096, cluster="3")["cluster"] == 2   # a power of two
    assert n_major(8, 2048, 4096, cluster="64")["cluster"] == 8  # the portable cluster size
    assert n_major(8, 2048, 1000, cluster="8")["cluster"] == 2   # two chunks a warp
    assert n_major(8, 2048, 4096, cluster="8", clusters=False)["cluster"] == 1


@pytest.mark.parametrize("why, kw", [
    ("17 rows", dict(M=17)),
    ("float32", dict(dtype="float32")),
    ("N not whole vectors", dict(N=100)),
    ("K not whole vectors", dict(K=1004)),
    ("A column-major", dict(a_strides=[1, 8])),
    ("B K-major", dict(b_strides=[1, 4096])),
    ("B's rows 2 bytes off", dict(b_address=258)),
    ("A's rows not whole vectors apart", dict(a_strides=[4100, 1])),
])
def test_n_major_layout_refused(why, kw):
    shape = dict(M=8, N=2048, K=4096)
    shape.update({k: kw.pop(k) for k in ("M", "N", "K") if k in kw})
    assert n_major(shape["M"], shape["N"], shape["K"], **kw) is None, why
    if "b_strides" not in kw:  # (a K-major B is the other decode kernel's)
        choice = _C.auto_kernel(shape["M"], shape["N"], shape["K"], dtype=kw.get("dtype", BF16), sm=90,
                                b_stride_k=shape["N"], a_strides=kw.get("a_strides"),
                                b_address=kw.get("b_address", 0))
        assert choice["kernel"] != "decode_sm80", why


def test_n_major_preferred_by_auto():
    assert n_major(16, 4096, 4096)["preferred"]
    assert not n_major(16, 4096, 1016)["preferred"]          # too short a K
    assert not n_major(16, 5120, 1024)["preferred"]          # 5·2^20 elements: too small a weight
    assert n_major(16, 3072, 2048)["preferred"]              # 6·2^20
    assert n_major(16, 14336, 4096)["preferred"]             # 224 blocks: 1.7 on 132 SMs
    assert not n_major(16, 16960, 4096)["preferred"]         # 265 blocks: more than 2 an SM
    assert n_major(16, 16960, 4096, sm_count=144)["preferred"]
    assert not n_major(16, 28672, 4096)["preferred"]         # 448 blocks
    assert not n_major(4, 2048, 4096, batch=9)["preferred"]  # 288 blocks over the batch
    assert n_major(4, 2048, 4096, batch=8)["preferred"]      # 256


# A TORCH_GEMM_WGMMA_SHAPE that names no shape the kernel takes, or one whose tiles cannot take
# the product, leaves the plan to choose, and explain says so (a timing run under it would
# otherwise measure the plan's own choice unawares).
def test_a_forced_shape_that_does_not_take_is_named():
    ignored = "TORCH_GEMM_WGMMA_SHAPE names no shape the kernel takes"
    dropped = "TORCH_GEMM_WGMMA_SHAPE's tiles cannot take this product"
    p = plan(4, 2560, 2048, shape="1x2x64")  # 64-column tiles split: not a shape
    assert ignored in p["why"]["tile"] and p["tile"] == plan(4, 2560, 2048)["tile"], p["why"]
    assert ignored in plan(300, 300, 300, shape="3x1")["why"]["tile"]
    p = plan(200, 264, 72, shape="2x1x80", a_strides=[1, 200])  # slim tiles need both K-major
    assert dropped in p["why"]["tile"] and p["tile"][1] not in (80, 96), p["why"]
    for kwargs in ({}, {"shape": "1x1x64"}, {"shape": ""}):
        why = plan(300, 1088, 2039, **kwargs)["why"]["tile"]
        assert ignored not in why and dropped not in why, (kwargs, why)
