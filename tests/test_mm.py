"""Correctness of gemm::mm_tiled: every kernel × dtype × shape × layout against float64."""

import os
import subprocess
import sys

import pytest
import torch

import torch_gemm
from gemm_testing import (
    LAYOUTS,
    assert_close_to_reference,
    generator,
    kernel_dtype_params,
    make_operands,
    poisoned_outputs,
    randn,
    requires_cuda,
    skip_unless_wgmma,
    tf32_allowed,
    torch_tf32_setting,
    HAS_FP32_PRECISION,
)

SIZES = [0, 1, 2, 7, 16, 31, 33, 64, 97, 128, 257, 1000, 1025]


def _shapes():
    """Every size in every position of (M, N, K), against partners that are themselves odd,
    plus products of the large sizes."""
    shapes = set()
    for v in SIZES:
        shapes.add((v, 33, 97))
        shapes.add((31, v, 64))
        shapes.add((97, 7, v))
        shapes.add((v, v, v) if v <= 257 else (v, 16, v))
    shapes |= {(1000, 1025, 257), (1025, 1000, 128), (257, 1025, 1000), (2, 1, 1025), (1, 1025, 2)}
    return sorted(shapes)


SHAPES = _shapes()


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
@pytest.mark.parametrize("layout", LAYOUTS)
def test_mm_tiled_matches_float64(device, kernel, dtype, layout):
    for M, N, K in SHAPES:
        gen = generator(device, kernel, str(dtype), layout, M, N, K)
        a, b = make_operands(M, N, K, layout, dtype, device, gen)
        with poisoned_outputs():
            out = torch_gemm.mm_tiled(a, b, kernel=kernel)
        assert_close_to_reference(out, a, b)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_k_zero_gives_zeros(device, kernel, dtype):
    a = torch.empty(37, 0, dtype=dtype, device=device)
    b = torch.empty(0, 41, dtype=dtype, device=device)
    with poisoned_outputs():
        out = torch_gemm.mm_tiled(a, b, kernel=kernel)
    assert out.shape == (37, 41) and torch.equal(out, torch.zeros_like(out))


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
@pytest.mark.parametrize("M, N, K", [(29, 31, 45), (64, 128, 32)], ids=["odd", "multiples_of_4"])
def test_expanded_stride_zero_operands(device, kernel, dtype, M, N, K):
    """Stride-0 views; with sizes that are multiples of 4 the vectorized paths see them too."""
    gen = generator(device, "expand", kernel, str(dtype), M)
    row = torch.randn(1, K, generator=gen, device=device).to(dtype)
    col = torch.randn(K, 1, generator=gen, device=device).to(dtype)
    a = row.expand(M, K)   # stride (0, 1): every row the same
    b = col.expand(K, N)   # stride (1, 0): every column the same
    out = torch_gemm.mm_tiled(a, b, kernel=kernel)
    assert_close_to_reference(out, a, b)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_deterministic(device, kernel, dtype):
    gen = generator(device, "determinism", kernel, str(dtype))
    a, b = make_operands(257, 129, 1000, "contiguous", dtype, device, gen)
    first = torch_gemm.mm_tiled(a, b, kernel=kernel)
    second = torch_gemm.mm_tiled(a, b, kernel=kernel)
    assert torch.equal(first, second)


def test_smem_alias_is_the_32_tile():
    a, b = torch.randn(9, 5), torch.randn(5, 3)
    if torch.cuda.is_available():
        a, b = a.cuda(), b.cuda()
        assert torch.equal(torch_gemm.mm_tiled(a, b, kernel="smem"), torch_gemm.mm_tiled(a, b, kernel="smem32"))
    else:
        with pytest.raises(RuntimeError, match="kernel 'smem'"):
            torch_gemm.mm_tiled(a, b, kernel="smem")


def multistage_plan(M, N, K):
    """multistage's plan of a float32 (M, N, K) on the current GPU, as its launcher makes it."""
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return torch_gemm._C.multistage_plan(M, N, K, sm_count=sms)


# Few output tiles and a long K: multistage splits K into slices (the last one shorter where K
# does not divide evenly) and sums them in a second kernel.
SPLIT_K_SHAPES = [(64, 64, 2049), (33, 200, 1537), (1, 1, 4097), (130, 70, 1000), (7, 300, 3001)]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_multistage_split_k(layout):
    for M, N, K in SPLIT_K_SHAPES:
        assert multistage_plan(M, N, K)["split_k"] > 1, (M, N, K)
        gen = generator("cuda", "split_k", layout, M, N, K)
        a, b = make_operands(M, N, K, layout, torch.float32, "cuda", gen)
        with poisoned_outputs():
            out = torch_gemm.mm_tiled(a, b, kernel="multistage")
        assert_close_to_reference(out, a, b)
        assert torch.equal(out, torch_gemm.mm_tiled(a, b, kernel="multistage"))  # fixed-order sum


@requires_cuda
def test_multistage_plan_fills_the_gpu():
    """The large tile unsplit where its tiles make several waves, the narrow one split in K for
    few rows, the large one split where its tiles would leave most of a wave empty."""
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    big = multistage_plan(4096, 4096, 4096)
    assert (big["tile"], big["split_k"]) == ((128, 256), 1)
    if sms >= 32:  # 16 rows of 4096 columns: 32 narrow tiles, split in K
        skinny = multistage_plan(16, 4096, 4096)
        assert skinny["tile"] == (32, 128) and skinny["split_k"] > 1
    assert multistage_plan(1000, 1000, 7)["split_k"] == 1  # too little K to split
    tiles = max(sms // 3, 1)  # large tiles of one 128-row band: a third of a wave, 3 splits fill it
    third = multistage_plan(128, 256 * tiles, 8192)
    assert third["tile"] == (128, 256) and third["split_k"] > 1, third


# The narrow 32x128 tile (up to 64 rows), unsplit and split in K: rows that end inside a tile (1,
# 17, 33, 63) and fill it (32, 64), columns inside one tile and past several, K inside a k-tile,
# every layout, with a bias; against float64 and run twice for the same bits. Where the GPU's SM
# count plans a shape on another tile, the narrow one is forced (split 4 ways, as K allows).
NARROW_SHAPES = [(1, 1, 4097), (17, 1000, 3001), (32, 129, 100), (33, 200, 1537), (63, 4097, 2049), (64, 50, 17)]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_multistage_narrow_tile(layout, monkeypatch):
    for M, N, K in NARROW_SHAPES:
        monkeypatch.delenv("TORCH_GEMM_MULTISTAGE_PLAN", raising=False)
        if multistage_plan(M, N, K)["tile"] != (32, 128):
            monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", "32x128:4")
        gen = generator("cuda", "narrow", layout, M, N, K)
        a, b = make_operands(M, N, K, layout, torch.float32, "cuda", gen)
        assert torch_gemm.explain(a, b, kernel="multistage")["plan"]["tile"] == (32, 128), (M, N, K)
        bias = randn((N,), torch.float32, "cuda", gen)
        with tf32_allowed(False), poisoned_outputs():
            out = torch_gemm.mm_tiled(a, b, kernel="multistage")
            fused = torch_gemm.linear_tiled(a, b.t(), bias, kernel="multistage")
        assert_close_to_reference(out, a, b)
        assert_close_to_reference(fused, a, b, bias)
        assert torch.equal(out, torch_gemm.mm_tiled(a, b, kernel="multistage"))  # fixed-order sum


# Every plan the tuning harness forces (TORCH_GEMM_MULTISTAGE_PLAN, read at each call) runs right:
# each tile, unsplit and split (an odd count of slices of a ragged K), every layout.
@requires_cuda
@pytest.mark.parametrize("forced", ["128x256", "128x256:3", "64x64", "64x64:5", "32x128", "32x128:5"])
def test_multistage_forced_plans(forced, monkeypatch):
    M, N, K = 200, 300, 1001
    monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", forced)
    for layout in LAYOUTS:
        gen = generator("cuda", "forced", forced, layout)
        a, b = make_operands(M, N, K, layout, torch.float32, "cuda", gen)
        plan = torch_gemm.explain(a, b, kernel="multistage")["plan"]
        tile, _, splits = forced.partition(":")
        assert ("x".join(map(str, plan["tile"])), plan["split_k"]) == (tile, int(splits or 1)), plan
        with poisoned_outputs():
            out = torch_gemm.mm_tiled(a, b, kernel="multistage")
        assert_close_to_reference(out, a, b)
    monkeypatch.setenv("TORCH_GEMM_MULTISTAGE_PLAN", "32x32")
    with pytest.raises(RuntimeError, match="TORCH_GEMM_MULTISTAGE_PLAN must be 128x256, 64x64 or 32x128"):
        torch_gemm.mm_tiled(a, b, kernel="multistage")


# The large tile split in K (plan_multistage's choice where its tiles leave a wave part empty):
# edge tiles in M and N, a K that ends inside a k-tile, every layout, a bias through the
# reduction; against float64 and run twice for the same bits. The shapes are tried in turn for
# one the GPU's SM count plans that way.
LARGE_SPLIT_SHAPES = [(300, 2500, 2000), (255, 2300, 3001), (250, 3000, 4099), (129, 256 * 45 - 3, 3001)]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_multistage_large_tile_split_k(layout):
    planned = [s for s in LARGE_SPLIT_SHAPES
               if (lambda p: p["tile"] == (128, 256) and p["split_k"] > 1)(multistage_plan(*s))]
    if not planned:
        pytest.skip("no shape of the list is planned as a split large tile on this GPU")
    M, N, K = planned[0]
    gen = generator("cuda", "large_split_k", layout, M, N, K)
    a, b = make_operands(M, N, K, layout, torch.float32, "cuda", gen)
    with tf32_allowed(False), poisoned_outputs():
        out = torch_gemm.mm_tiled(a, b, kernel="multistage")
        assert_close_to_reference(out, a, b)
        assert torch.equal(out, torch_gemm.mm_tiled(a, b, kernel="multistage"))  # fixed-order sum
        bias = randn((N,), torch.float32, "cuda", gen)
        assert_close_to_reference(torch_gemm.linear_tiled(a, b.t(), bias, kernel="multistage"), a, b, bias)


@requires_cuda
def test_float32_uses_tf32_only_where_torch_allows_it():
    """A TF32 kernel refuses float32 while torch does not allow TF32, and auto then stays IEEE
    (< 1e-5); with TF32 allowed, auto takes the TF32 kernel where its tiles fill the GPU."""
    major, minor = torch.cuda.get_device_capability()
    tf32_kernels = [r["name"] for r in torch_gemm.kernel_table()
                    if r["device"] == "cuda" and r["tf32"] and r["min_sm"] <= major * 10 + minor]
    if not tf32_kernels:
        pytest.skip("no TF32 kernel runs on this GPU")
    a, b = make_operands(1024, 2048, 512, "contiguous", torch.float32, "cuda", generator("cuda", "tf32-rule"))
    with tf32_allowed(False):
        with pytest.raises(RuntimeError, match=f"kernel '{tf32_kernels[0]}' multiplies float32 in TF32"):
            torch_gemm.mm_tiled(a, b, kernel=tf32_kernels[0])
        assert_close_to_reference(torch_gemm.mm_tiled(a, b), a, b)
    with tf32_allowed(True):
        out = torch_gemm.mm_tiled(a, b)
        assert_close_to_reference(out, a, b)
        # Both sides fill a 128-row tile: auto picked a TF32 kernel (deterministic).
        chosen = torch_gemm.explain(a, b)["kernel"]
        assert chosen in tf32_kernels
        assert torch.equal(out, torch_gemm.mm_tiled(a, b, kernel=chosen))


@requires_cuda
@pytest.mark.skipif(not HAS_FP32_PRECISION, reason="this torch has no fp32_precision setting")
@pytest.mark.parametrize("how, tf32", [("matmul_tf32", True), ("generic_tf32", True), ("matmul_ieee", False)])
def test_float32_follows_torchs_fp32_precision(how, tf32):
    """Set through torch's newer fp32_precision (after which its legacy allow_tf32 raises when
    read), TF32 is allowed or refused as torch.mm would take it, and the op does not fail."""
    major, minor = torch.cuda.get_device_capability()
    tf32_kernels = [r["name"] for r in torch_gemm.kernel_table()
                    if r["device"] == "cuda" and r["tf32"] and r["min_sm"] <= major * 10 + minor]
    a, b = make_operands(1024, 2048, 512, "contiguous", torch.float32, "cuda", generator("cuda", "tf32-api", how))
    with torch_tf32_setting(how):
        out = torch_gemm.mm_tiled(a, b)
        assert_close_to_reference(out, a, b)
        if tf32_kernels and tf32:
            assert torch_gemm.explain(a, b)["kernel"] in tf32_kernels
            assert torch.equal(torch_gemm.mm_tiled(a, b, kernel=tf32_kernels[0]), torch_gemm.mm_tiled(a, b, kernel=tf32_kernels[0]))
        elif tf32_kernels:
            assert torch_gemm.explain(a, b)["kernel"] not in tf32_kernels
            with pytest.raises(RuntimeError, match="fp32_precision"):
                torch_gemm.mm_tiled(a, b, kernel=tf32_kernels[0])


def check_wgmma_product(tag: str, dtype, layout: str, batch: int, M: int, N: int, K: int):
    """mm_tiled (batch 1) or bmm_tiled with kernel="wgmma_sm90" on fresh operands, each matrix
    checked against the float64 reference; returns the output and a call that runs it again."""
    gen = generator("cuda", tag, str(dtype), layout, batch, M, N, K)
    a, b = make_operands(M, N, K, layout, dtype, "cuda", gen, batch=(batch,) if batch > 1 else ())
    op = torch_gemm.bmm_tiled if batch > 1 else torch_gemm.mm_tiled
    with poisoned_outputs():
        out = op(a, b, kernel="wgmma_sm90")
    if batch > 1:
        for i in range(batch):
            assert_close_to_reference(out[i], a[i], b[i])
    else:
        assert_close_to_reference(out, a, b)
    return out, lambda: op(a, b, kernel="wgmma_sm90")


def check_wgmma_linear_bias(tag: str, dtype, layout: str, M: int, N: int, K: int):
    """linear_tiled with a bias, kernel="wgmma_sm90", against the float64 reference."""
    gen = generator("cuda", tag, str(dtype), layout, M, N, K)
    x, w_t = make_operands(M, N, K, layout, dtype, "cuda", gen)  # weight (N, K) = w_t.T
    bias = randn((N,), dtype, "cuda", gen)
    with poisoned_outputs():
        out = torch_gemm.linear_tiled(x, w_t.t(), bias, kernel="wgmma_sm90")
    assert_close_to_reference(out, x, w_t, bias)


# wgmma_sm90 takes 64-row tiles (one consumer warpgroup) where its 128×256 tiles would not fill
# half the SMs, 128×256 otherwise: shapes on both sides of that line (on a 132-SM H100/H200: 81,
# 72 and 90 tiles of 128×256, the 72 with C rows 16-byte aligned for the TMA-store epilogue; then
# 12 and 12, which 16-bit products take as 64×64 tiles, float32 as 64×256), single and batched,
# in every layout and dtype, and linear_tiled with a bias.
WGMMA_TILE_SHAPES = [(1, 1100, 2100, 200), (1, 1024, 2304, 200), (3, 700, 1100, 96),
                     (1, 300, 1000, 130), (2, 200, 700, 300)]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_wgmma_both_tile_heights(dtype, layout):
    skip_unless_wgmma()
    with tf32_allowed(dtype == torch.float32):
        for shape in WGMMA_TILE_SHAPES:
            check_wgmma_product("wgmma_tiles", dtype, layout, *shape)
        for M, N, K in [(1024, 2304, 200), (300, 1000, 130)]:  # the bias in both epilogues
            check_wgmma_linear_bias("wgmma_tiles_bias", dtype, layout, M, N, K)


# wgmma_sm90 takes 64×128 tiles (16-bit) where its 64×256 tiles would leave half the SMs idle and
# the 64×128 ones fit in one wave. On a 132-SM H100/H200: 1000³ (128 tiles, pairs sharing B, C
# rows 16-byte aligned: TMA stores, edge tiles in M and N); C rows of 1001 elements (stored from
# registers); batched; one tile (no pair); K of 1 and a prime K.
WGMMA_SMALL_SHAPES = [(1, 1000, 1000, 1000), (1, 1000, 1001, 67), (2, 200, 300, 300),
                      (1, 64, 100, 1), (1, 130, 250, 127)]


# wgmma_sm90 takes 64×64 tiles (16-bit, one consumer), paired along M, where they fill more than
# half the SMs in one wave in 2 to 8 rows of 64 and the 64×128 ones would run split in 2 or
# whole, with K of at most 32 k-tiles. On a 132-SM H100/H200: 128 tiles (512×1024); an edge tile
# in M (3 rows, the last pair with a block past M) and C rows of 2001 elements (stored from
# registers); batched; 5 tile rows and a prime K; a K of 4 k-tiles, too short to split the 64×128
# tiles.
WGMMA_TINY_SHAPES = [(1, 512, 1024, 2048), (1, 190, 2001, 1031), (2, 256, 1000, 2048),
                     (1, 300, 1100, 2039), (1, 256, 2048, 256)]


# wgmma_sm90 takes 128×128 tiles (two consumers of 64×128, 16-bit), paired along M, where the
# 64×128 tiles are too many for one wave and the 128×128 ones fit in it or make fewer rounds than
# 128×256 tiles (and slim tiles would not fit in that one wave). On a 132-SM H100/H200: 104–128
# tiles in one wave, an edge tile in N (1616 columns); C rows of 2001 elements (not 16-byte
# aligned: stored from registers); batched; a prime K; 396 tiles in 3 rounds with 9 tile rows (a
# pair with one tile past M).
WGMMA_MEDIUM_SHAPES = [(1, 1024, 1616, 2100), (1, 1000, 2001, 2500), (3, 512, 1152, 2048),
                       (1, 700, 2200, 4099), (1, 1100, 5632, 1000)]


# wgmma_sm90 takes slim 128×80 or 128×96 tiles (16-bit, both operands K-major, C stored from
# registers) where they fill one wave that 128×128 tiles leave a third idle, and 128×160 ones where
# 128×192 tiles leave a part-empty tile column. On a 132-SM H100/H200: 112 tiles of 128×80 with an
# edge tile in N (1104 columns: 64 in the last); batched, 132 of 128×96; a prime K, 6 tile rows
# (the last 60 rows), 114 of 128×96; C rows of 2563 elements (not 16-byte aligned), 132 of 128×80
# (the last 3 columns); 128 of 128×160 with edge tiles in M and N (1000 rows, 2555 columns: 155 in
# the last), 81 k-tiles. Other layouts take the plan's other tiles.
WGMMA_SLIM_SHAPES = [(1, 1024, 1104, 2100), (3, 512, 1024, 2048), (1, 700, 1800, 4099),
                     (1, 512, 2563, 2048), (1, 1000, 2555, 5128)]


# wgmma_sm90 takes 128×192 tiles (two consumers of 64×192, 16-bit) where the two-consumer tiles it
# would take otherwise make at most three rounds and these make fewer: paired along M (K long
# enough to pair one wave), an N-major B (NN, TN) multicast as 64-column boxes, 2 by one block, 1
# by the other. On a 132-SM H100/H200: 112 tiles in one wave, paired; an edge tile in N of 8
# columns (2504); C rows of 2501 elements (stored from registers); batched; a prime K with 9 tile
# rows (a pair with one tile past M); 224 tiles in 2 rounds.
WGMMA_MID_SHAPES = [(1, 1024, 2560, 2048), (1, 1000, 2504, 1100), (1, 1000, 2501, 577),
                    (2, 512, 2560, 1024), (1, 1100, 2300, 4099), (1, 2048, 2560, 512)]


# wgmma_sm90 splits each 64×128 tile along K in 2, 4 or 8 slices (a cluster) where even those tiles
# leave half the SMs idle: few rows against a weight (and K too long for 64×64 tiles in one row).
# On a 132-SM H100/H200: 32 and 64 tiles in 2 slices (TMA stores of whole boxes); 16 tiles in 4
# (owned columns narrower than an epilogue box: stored from registers), one with C rows of 2001
# elements and a last slice shorter (55 k-tiles); 8 tiles in 4 with a prime K (33 k-tiles: slices
# of 9, the last 6); 8 tiles in 8, one with C rows of 1001 elements; batched; two tile rows, the
# second ragged (47 k-tiles in 2).
WGMMA_SMALL_SPLIT_SHAPES = [(1, 32, 4096, 8192), (1, 64, 8192, 4160), (1, 16, 2048, 4096),
                            (1, 50, 2001, 3500), (1, 64, 1000, 2053), (1, 20, 1000, 8200),
                            (1, 30, 1001, 9001), (3, 40, 1024, 8192), (1, 100, 2048, 3000)]


# wgmma_sm90 takes 64×64 tiles, unpaired and whole, in one tile row (at most 64 rows) where they
# are 32 to one wave of tiles and K at most 32 k-tiles, one matrix. On a 132-SM H100/H200: 32
# tiles; an edge tile in N with C rows of 2001 elements (stored from registers) and a ragged last
# k-tile; one row with a K not a multiple of the k-tile; 16 rows, 16 k-tiles.
WGMMA_TINY_ONE_ROW_SHAPES = [(1, 64, 2048, 2048), (1, 33, 2001, 2000), (1, 1, 4096, 1000),
                             (1, 16, 2048, 1024)]


# wgmma_sm90 takes 64×256 tiles, paired, where K is one k-tile and 128×128 tiles would make 3
# rounds (dW at a few tokens: the tokens are K). On a 132-SM H100/H200: 320 and 384 tiles; a
# K of 1; an edge tile in M and N with C rows of 5001 elements (stored from registers) and a
# ragged k-tile; batched.
WGMMA_ONE_K_TILE_NARROW_SHAPES = [(1, 1024, 5120, 64), (1, 2048, 3072, 1), (1, 1000, 5001, 37),
                                  (2, 1024, 2560, 64)]


# wgmma_sm90 splits 128×128 tiles along K in 4 (two consumers, a cluster of 4) where two rows of
# 64×128 tiles would split in 2 and K is long (192 k-tiles or more), as many blocks in one wave of
# clusters of 4, unless the 64×128 tiles' pair turns split in 3 or 4 equal shares (dealt out
# instead). On a 132-SM H100/H200: 24 tiles (192 k-tiles: slices of 48); edge tiles in M and N
# with a K not a multiple of the k-tile (193 k-tiles: the last slice 46) and C rows of 3001
# elements (stored from registers); batched (12 tiles a batch element).
WGMMA_MEDIUM_SPLIT_SHAPES = [(1, 128, 3072, 12288), (1, 100, 3001, 12289), (2, 128, 1536, 12288)]

# wgmma_sm90 splits 128×128 tiles along K in 2 (two consumers, a cluster of 2) where 16 or more
# rows of them against few columns would run whole as 64×128 pairs in one wave, K gives each
# slice 32 k-tiles or more, and both operands are K-major (other layouts take the pairs). On a
# 132-SM H100/H200: 64 tiles (slices of 32 k-tiles); edge tiles in M and N with a K not a multiple
# of the k-tile (65 k-tiles: slices of 33 and 32) and C rows of 500 elements; batched (32 tiles a
# batch element).
WGMMA_MEDIUM_SPLIT_TALL_SHAPES = [(1, 2048, 512, 4096), (1, 2000, 500, 4100), (2, 2048, 256, 4096)]


# wgmma_sm90 deals every turn of 128×128 tiles out as k-tiles where 193 to 256 rows (two tile
# rows; one, 65 to 128 rows, unpaired, where the turns split in 3 equal shares; 449 to 512,
# four, where the pair turns split in equal shares; 32 tiles to 5/8 of a wave) meet a long K (160
# k-tiles or more, 128 where the turns split in 4 shares, 88 in 3). On a 132-SM H100/H200: 16 pair
# turns; edge tiles in M and N with a K not a multiple of the k-tile (162 k-tiles, the last ragged)
# and C rows of 4001 elements (stored from registers); an edge tile in N; batched; four tile rows,
# 32 pair turns in 2 shares and, with edges and a ragged K, 16 in 4 (130 k-tiles); one tile row of
# 40 turns in 3 shares, with edges and a ragged K (90 k-tiles).
WGMMA_MEDIUM_STREAM_K_SHAPES = [(1, 256, 2048, 10240), (1, 200, 4001, 10307), (1, 250, 2500, 10240),
                                (2, 256, 1024, 10240), (1, 512, 2048, 10240), (1, 500, 1000, 8300),
                                (1, 100, 5000, 5700)]


# wgmma_sm90 pairs the 64×128 tiles of 2 to 8 tile rows that it would split, with every turn dealt
# out in equal shares of 20 k-tiles or more. On a 132-SM H100/H200: 16 pair turns in 4 shares;
# edge tiles in M and N with a ragged K (129 k-tiles); batched; two tile rows, the second partial,
# 24 turns in 2 shares of a ragged 49 k-tiles (96 blocks).
WGMMA_SMALL_DEALT_SHAPES = [(1, 512, 512, 8192), (1, 250, 1000, 8200), (2, 256, 512, 8192),
                            (1, 100, 3000, 3100)]


# wgmma_sm90 runs two-consumer tiles unpaired in an odd number of tile rows (3; 128×128 up to 7),
# where a pair would have a block past M. On a 132-SM H100/H200: 3 rows of 128×128 and of 128×192
# tiles (a ragged last row, an edge tile in N); 5 and 7 rows of 128×128; C rows of 4001 elements
# (stored from registers).
WGMMA_ODD_ROWS_SHAPES = [(1, 384, 4096, 4096), (1, 300, 14300, 2048), (1, 640, 3072, 2048),
                         (1, 896, 2048, 2048), (1, 330, 4001, 3000)]


# What each path's shapes must get from the plan on a 132-SM H100/H200 (66 pairs resident).
WGMMA_PATH_PLANS = {
    "small_tiles": (lambda: WGMMA_SMALL_SHAPES, lambda p: tuple(p["tile"]) == (64, 128) and p["split_k"] == 1),
    "tiny_tiles": (lambda: WGMMA_TINY_SHAPES, lambda p: tuple(p["tile"]) == (64, 64) and p["cluster"] == 2),
    "tiny_one_row": (lambda: WGMMA_TINY_ONE_ROW_SHAPES,
                     lambda p: tuple(p["tile"]) == (64, 64) and p["cluster"] == 1 and p["split_k"] == 1),
    "medium_tiles": (lambda: WGMMA_MEDIUM_SHAPES,
                     lambda p: tuple(p["tile"]) == (128, 128) and p["cluster"] == 2),
    "one_k_tile_narrow": (lambda: WGMMA_ONE_K_TILE_NARROW_SHAPES,
                          lambda p: tuple(p["tile"]) == (64, 256) and p["cluster"] == 2),
    "mid_tiles": (lambda: WGMMA_MID_SHAPES, lambda p: tuple(p["tile"]) == (128, 192)),
    "slim_tiles": (lambda: WGMMA_SLIM_SHAPES,
                   lambda p: p["tile"][1] in (80, 96, 160) and p["cluster"] == 2 and p["store"] == "registers"),
    "small_split_k": (lambda: WGMMA_SMALL_SPLIT_SHAPES, lambda p: tuple(p["tile"]) == (64, 128) and p["split_k"] > 1),
    "medium_split_k": (lambda: WGMMA_MEDIUM_SPLIT_SHAPES,
                       lambda p: tuple(p["tile"]) == (128, 128) and p["split_k"] == 4),
    "medium_split_tall": (lambda: WGMMA_MEDIUM_SPLIT_TALL_SHAPES,
                          lambda p: tuple(p["tile"]) == (128, 128) and p["split_k"] == 2),
    "stream_k": (lambda: WGMMA_STREAM_K_SHAPES, lambda p: tuple(p["tile"]) == (128, 256) and p["stream_k"]),
    "odd_rows": (lambda: WGMMA_ODD_ROWS_SHAPES,
                 lambda p: p["consumers"] == 2 and p["cluster"] == 1 and "odd number" in p["why"]["cluster"]),
    "medium_stream_k": (lambda: WGMMA_MEDIUM_STREAM_K_SHAPES,
                        lambda p: tuple(p["tile"]) == (128, 128) and p["stream_k_turns"] == p["turns"]),
    "small_dealt": (lambda: WGMMA_SMALL_DEALT_SHAPES,
                    lambda p: tuple(p["tile"]) == (64, 128) and p["cluster"] == 2
                    and p["stream_k_turns"] == p["turns"]),
}


@pytest.mark.parametrize("path", list(WGMMA_PATH_PLANS))
def test_sixteen_bit_shapes_take_their_path(path):
    """The shapes of each path reach it on 132 SMs (the plan is CPU code), so that a change of the
    rule cannot leave a path untested."""
    shapes, reached = WGMMA_PATH_PLANS[path]
    plans = []
    for batch, M, N, K in shapes():
        p = torch_gemm._C.sm90_plan(M, N, K, batch=batch, sm_count=132, max_active_clusters=66)
        assert reached(p), (path, batch, M, N, K, p["why"])
        plans.append(p)
    if path == "mid_tiles":  # some shapes pair their 128x192 tiles, some run them single
        assert {p["cluster"] for p in plans} == {1, 2}


# wgmma_sm90 deals the turns of a last, partial round of its 128×256 tile pairs out to every
# cluster as k-tiles (stream-K), where that saves enough: a cluster without a tile's last k-tiles
# leaves its sums in the workspace for the one with them. On a 132-SM H100/H200 (66 pairs
# resident): 204 turns (6 left over, 64 k-tiles each: pieces of ~6 k-tiles, up to 11 clusters a
# tile); edge tiles in M and N and a pair with one tile past M (3200 rows: 25 tile rows); C rows
# of 4001 elements (stored from registers); batched (9 tile rows a batch, 2 turns left over); a
# prime K. (128×192 tiles would take 4 rounds or more: more than the plan gives them.)
WGMMA_STREAM_K_SHAPES = [(1, 3072, 4352, 4096), (1, 3200, 4000, 2600), (1, 3300, 4001, 2600),
                         (4, 1152, 2560, 4096), (1, 3072, 4352, 4099)]


# Per 16-bit path: its shapes, and the linear_tiled shapes for a bias (64×128: in both epilogues;
# split K: the bias enters through one slice; stream-K: through the piece with the last k-tiles).
WGMMA_SIXTEEN_BIT_PATHS = {
    "small_tiles": (WGMMA_SMALL_SHAPES, [(1000, 1000, 1000), (130, 250, 127)]),
    "tiny_tiles": (WGMMA_TINY_SHAPES, [(512, 1024, 2048), (190, 2001, 1031)]),
    "tiny_one_row": (WGMMA_TINY_ONE_ROW_SHAPES, [(64, 2048, 2048), (33, 2001, 2000)]),
    "medium_tiles": (WGMMA_MEDIUM_SHAPES, [(1024, 1616, 2100), (1000, 2001, 2500)]),
    "one_k_tile_narrow": (WGMMA_ONE_K_TILE_NARROW_SHAPES, [(1024, 5120, 64), (1000, 5001, 37)]),
    "mid_tiles": (WGMMA_MID_SHAPES, [(1000, 2504, 1100), (1000, 2501, 577)]),
    "slim_tiles": (WGMMA_SLIM_SHAPES, [(1024, 1104, 2100), (700, 1800, 4099)]),
    "small_split_k": (WGMMA_SMALL_SPLIT_SHAPES, [(32, 4096, 8192), (64, 1000, 2053), (20, 1000, 8200)]),
    "medium_split_k": (WGMMA_MEDIUM_SPLIT_SHAPES, [(128, 3072, 12288), (100, 3001, 12289)]),
    "medium_split_tall": (WGMMA_MEDIUM_SPLIT_TALL_SHAPES, [(2048, 512, 4096), (2000, 500, 4100)]),
    "stream_k": (WGMMA_STREAM_K_SHAPES, [(3072, 4352, 4096), (3300, 4001, 2600)]),
    "odd_rows": (WGMMA_ODD_ROWS_SHAPES, [(384, 4096, 4096), (330, 4001, 3000)]),
    "medium_stream_k": (WGMMA_MEDIUM_STREAM_K_SHAPES,
                        [(256, 2048, 10240), (200, 4001, 10307), (100, 5000, 5700)]),
    "small_dealt": (WGMMA_SMALL_DEALT_SHAPES,
                    [(512, 512, 8192), (250, 1000, 8200), (100, 3000, 3100)]),
}


@requires_cuda
@pytest.mark.parametrize("path", list(WGMMA_SIXTEEN_BIT_PATHS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_wgmma_sixteen_bit_paths(path, dtype, layout):
    """The 64×128 and 64×64 tiles, split K and stream-K; all add their sums in a fixed order, so
    a second run gives the same bits."""
    skip_unless_wgmma()
    shapes, bias_shapes = WGMMA_SIXTEEN_BIT_PATHS[path]
    for shape in shapes:
        out, run_again = check_wgmma_product(f"wgmma_{path}", dtype, layout, *shape)
        assert torch.equal(out, run_again())
    for M, N, K in bias_shapes:
        check_wgmma_linear_bias(f"wgmma_{path}_bias", dtype, layout, M, N, K)


# A fresh process per setting of the TORCH_GEMM_WGMMA_* variables (read once per process): each
# shape in both 16-bit dtypes and the given layouts, against float64 with and without a bias, and
# run twice for the same bits.
ENV_SCRIPT = """
import sys, torch, torch_gemm
sys.path.insert(0, {tests!r})
from gemm_testing import assert_close_to_reference, make_operands, generator, randn
for M, N, K in {shapes!r}:
    for dtype in (torch.bfloat16, torch.float16):
        for layout in {layouts!r}:
            gen = generator("cuda", {tag!r}, M, N, K, str(dtype), layout)
            a, b = make_operands(M, N, K, layout, dtype, "cuda", gen)
            out = torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90")
            assert_close_to_reference(out, a, b)
            assert torch.equal(out, torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90"))
            bias = randn((N,), dtype, "cuda", gen)
            assert_close_to_reference(torch_gemm.linear_tiled(a, b.t(), bias, kernel="wgmma_sm90"),
                                      a, b, bias)
print("ok")
"""


def check_wgmma_under_env(tag, shapes, layouts, env, script=ENV_SCRIPT):
    skip_unless_wgmma()
    tests = os.path.dirname(os.path.abspath(__file__))
    script = script.format(tests=tests, shapes=shapes, layouts=list(layouts), tag=tag)
    run = subprocess.run([sys.executable, "-c", script], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout + run.stderr


# Appended to a forced-groups script (TORCH_GEMM_WGMMA_SHAPE=1x8xNxG): some shape took the G
# groups asked for (the plan halves them where the tiles' clusters would outnumber the resident).
GROUPS_CHECK = """
seen = set()
for M, N, K in {shapes!r}:
    for layout in {layouts!r}:
        a, b = make_operands(M, N, K, layout, DTYPE, "cuda", generator("cuda", "groups", M, N, K, layout))
        seen.add(torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]["split_groups"])
assert GROUPS in seen, seen
"""


def with_groups_check(script: str, shape: str, dtype: str) -> str:
    fields = shape.split("x")
    if len(fields) < 4:
        return script
    check = GROUPS_CHECK.replace("DTYPE", dtype).replace("GROUPS", fields[3])
    return script.replace('\nprint("ok")', "\n" + check + 'print("ok")')


# Split 64×128 tiles forced (TORCH_GEMM_WGMMA_SHAPE=1xSx128) onto shapes whose K leaves slices
# empty (their blocks add zeros), K of 1 and a prime K, every layout; and (1x8x128xG) 8 slices
# over G clusters a tile, as many as the 14 resident clusters (132 SMs) hold: 6 tiles in 2, one
# tile (60x100) in 8, 2 tiles in 4 (some clusters' slices all empty).
@requires_cuda
@pytest.mark.parametrize("shape", ["1x2x128", "1x4x128", "1x8x128", "1x8x128x2", "1x8x128x8"])
def test_wgmma_forced_small_split(shape):
    script = with_groups_check(ENV_SCRIPT, shape, "torch.bfloat16")
    check_wgmma_under_env(f"forced_split {shape}",
                          [(70, 300, 100), (5, 129, 1), (64, 256, 131), (130, 1000, 577), (60, 100, 3000)],
                          LAYOUTS, {"TORCH_GEMM_WGMMA_SHAPE": shape}, script)


# The start of the tf32 scripts below: TF32 allowed, each shape in each layout.
TF32_SCRIPT_HEAD = """
import sys, torch, torch_gemm
sys.path.insert(0, {tests!r})
from gemm_testing import assert_close_to_reference, make_operands, generator, randn
torch.backends.cuda.matmul.allow_tf32 = True
for M, N, K in {shapes!r}:
    for layout in {layouts!r}:
        gen = generator("cuda", {tag!r}, M, N, K, layout)
        a, b = make_operands(M, N, K, layout, torch.float32, "cuda", gen)
"""


# tf32's 64×256 tiles split along K in 2, 4 or 8 (TORCH_GEMM_WGMMA_SHAPE=1xS forced, and the plan's
# own choice): slices left empty by a short K (their blocks add zeros), K of 1, a prime K, edge
# tiles in M and N, C rows of 1001 elements (stored from registers), every layout (an N-major B
# runs the transposed product, whose boxes span 64 of its columns: 8 slices store from registers),
# a bias (it enters with the first slice), run twice for the same bits; then a batch; and all of it
# with C from registers (TORCH_GEMM_WGMMA_STORE=registers).
TF32_SPLIT_SCRIPT = TF32_SCRIPT_HEAD + """\
        if {split!r} is not None:  # the forced split took effect
            assert torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]["split_k"] == {split!r}
        out = torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90")
        assert_close_to_reference(out, a, b)
        assert torch.equal(out, torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90"))
        bias = randn((N,), torch.float32, "cuda", gen)
        assert_close_to_reference(torch_gemm.linear_tiled(a, b.t(), bias, kernel="wgmma_sm90"), a, b, bias)
gen = generator("cuda", {tag!r}, "bmm")
x, w = randn((3, 64, 1024), torch.float32, "cuda", gen), randn((3, 512, 1024), torch.float32, "cuda", gen)
out = torch_gemm.bmm_tiled(x, w.transpose(1, 2), kernel="wgmma_sm90")
for z in range(3):
    assert_close_to_reference(out[z], x[z], w[z].t())
print("ok")
"""
TF32_SPLIT_SHAPES = [(70, 300, 100), (5, 129, 1), (64, 256, 131), (130, 1000, 577), (200, 1001, 2050)]


@requires_cuda
@pytest.mark.parametrize("shape", ["1x2", "1x4", "1x8", "1x8x256x2", "1x8x256x8"])
@pytest.mark.parametrize("store", ["tma", "registers"])
def test_wgmma_tf32_split(shape, store):
    env = {"TORCH_GEMM_WGMMA_SHAPE": shape}
    if store == "registers":
        env["TORCH_GEMM_WGMMA_STORE"] = "registers"
    script = TF32_SPLIT_SCRIPT.replace("{split!r}", repr(int(shape.split("x")[1])))
    script = with_groups_check(script, shape, "torch.float32")
    check_wgmma_under_env(f"tf32_split {shape} {store}", TF32_SPLIT_SHAPES, LAYOUTS, env, script)


# tf32's own rules' split (TORCH_GEMM_WGMMA_TF32_PLAN=own, which every layout then takes; B
# K-major, as a linear's weight): on 132 SMs 8 slices of 2 tiles over 4 clusters a tile, 8 of 1
# tile (257 k-tiles, the last slices short or empty) over 4 clusters, 8 of 1 tile (128 k-tiles)
# over 2, 4 of 16, 2 of 64 (1000³). The script runs each with B K-major and N-major.
@requires_cuda
def test_wgmma_tf32_split_by_the_plan(monkeypatch):
    skip_unless_wgmma()
    monkeypatch.setenv("TORCH_GEMM_WGMMA_TF32_PLAN", "own")
    shapes = [(128, 256, 8192), (40, 200, 8200), (32, 256, 4096), (256, 1024, 4096),
              (1000, 1000, 1000)]
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        with tf32_allowed(True):
            for (M, N, K), split, groups in zip(shapes, (8, 8, 8, 4, 2), (4, 4, 2, 1, 1)):
                a, b = torch.empty(M, K, device="cuda"), torch.empty(N, K, device="cuda").t()
                p = torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]
                assert (p["split_k"], p["split_groups"]) == (split, groups), (M, N, K, p["why"])
    script = TF32_SPLIT_SCRIPT.replace("{split!r}", "None")
    check_wgmma_under_env("tf32_split_plan", shapes, ["contiguous", "b_t"],
                          {"TORCH_GEMM_WGMMA_TF32_PLAN": "own"}, script)


# tf32's 64×128 and 128×128 tiles (whole, or split along K in 2, 4 or 8) and 64×64 tiles forced
# (TORCH_GEMM_WGMMA_SHAPE=1xSx128, 2xSx128, 1x1x64), A through registers as on its 256-column
# tiles: the shapes and checks of the 64×256 split above, each tile and split checked to have run;
# with C from registers (TORCH_GEMM_WGMMA_STORE=registers), and the whole tiles also unpaired
# (TORCH_GEMM_WGMMA_CLUSTER=1).
TF32_NARROW_TILES = ["1x1x128", "1x2x128", "1x4x128", "1x8x128", "1x8x128x2", "2x1x128",
                     "2x2x128", "2x4x128", "1x1x64"]
TF32_TILE_CHECK = """\
        assert tuple(torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]["tile"]) == TILE
"""
TF32_PRODUCT_LINE = "        out = torch_gemm.mm_tiled(a, b, kernel=\"wgmma_sm90\")\n"


def with_tile_check(script: str, tile: tuple) -> str:
    """A tf32 script that checks, before each product, that the forced tile took."""
    check = TF32_TILE_CHECK.replace("TILE", repr(tile))
    return script.replace(TF32_PRODUCT_LINE, check + TF32_PRODUCT_LINE, 1)


@requires_cuda
@pytest.mark.parametrize("shape", TF32_NARROW_TILES)
@pytest.mark.parametrize("env", ["pairs", "single", "registers"])
def test_wgmma_tf32_forced_narrow_tiles(shape, env):
    fields = [int(f) for f in shape.split("x")]
    if env == "single" and fields[1] > 1:
        pytest.skip("split tiles run in clusters of their slices, never paired")
    overrides = {"TORCH_GEMM_WGMMA_SHAPE": shape}
    if env == "single":
        overrides["TORCH_GEMM_WGMMA_CLUSTER"] = "1"
    if env == "registers":
        overrides["TORCH_GEMM_WGMMA_STORE"] = "registers"
    script = with_tile_check(TF32_SPLIT_SCRIPT.replace("{split!r}", repr(fields[1])),
                             (64 * fields[0], fields[2]))
    script = with_groups_check(script, shape, "torch.float32")
    check_wgmma_under_env(f"tf32_narrow {shape} {env}", TF32_SPLIT_SHAPES, LAYOUTS, overrides, script)


# tf32's 128x192 tiles (every layout; a transposed C leaves from registers: the ring holds one box
# a consumer) and slim 128x160 tiles (both operands K-major, C from registers) forced
# (TORCH_GEMM_WGMMA_SHAPE=2x1x192, 2x1x160): a single tile, K of 8, edge tiles in M and N, one
# paired wave, many tiles a block; checks as above, with C from registers too.
TF32_WIDE_SHAPES = [(70, 300, 100), (5, 129, 8), (130, 83, 577), (1000, 1001, 67), (1000, 1001, 2048),
                    (4096, 4096, 64)]


@requires_cuda
@pytest.mark.parametrize("width", [192, 160])
@pytest.mark.parametrize("store", ["tma", "registers"])
def test_wgmma_tf32_forced_wide_tiles(width, store):
    overrides = {"TORCH_GEMM_WGMMA_SHAPE": f"2x1x{width}"}
    if store == "registers":
        overrides["TORCH_GEMM_WGMMA_STORE"] = "registers"
    script = with_tile_check(TF32_SPLIT_SCRIPT.replace("{split!r}", "1"), (128, width))
    layouts = LAYOUTS if width == 192 else ["b_t"]
    check_wgmma_under_env(f"tf32_wide {width} {store}", TF32_WIDE_SHAPES, layouts, overrides, script)


# tf32 under the 16-bit products' tile rules (TORCH_GEMM_WGMMA_TF32_PLAN=sixteen_bit): the plan's
# 64×128 tiles split in 8, 4 and 2 and dealt out in pairs, 128×128 tiles paired, dealt out over
# every turn and split in 4, 64×64 tiles, 128×192 and slim 128×160 tiles, as explain names them,
# against float64.
TF32_SIXTEEN_BIT_PLANS = [((128, 256, 4096), (64, 128), 8, False), ((16, 4096, 4096), (64, 128), 2, False),
                          ((128, 2048, 4096), (64, 128), 1, True), ((512, 4096, 4096), (128, 128), 1, False),
                          ((256, 2048, 10240), (128, 128), 1, True), ((128, 3072, 12288), (128, 128), 4, False),
                          ((512, 1024, 1024), (64, 64), 1, False), ((512, 6144, 2048), (128, 192), 1, False),
                          ((1024, 2560, 2560), (128, 160), 1, False)]
TF32_SIXTEEN_BIT_CHECK = """
for (M, N, K), tile, split, dealt in PLANS:
    a = torch.empty(M, K, device="cuda")
    b = torch.empty(N, K, device="cuda").t()
    p = torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]
    assert (tuple(p["tile"]), p["split_k"], p["stream_k"]) == (tile, split, dealt), (M, N, K, p["why"])
"""


@requires_cuda
def test_wgmma_tf32_sixteen_bit_plan():
    skip_unless_wgmma()
    plans = TF32_SIXTEEN_BIT_PLANS if torch.cuda.get_device_properties(0).multi_processor_count == 132 else []
    script = TF32_SPLIT_SCRIPT.replace("{split!r}", "None")
    script = script.replace('\nprint("ok")', TF32_SIXTEEN_BIT_CHECK.replace("PLANS", repr(plans)) + 'print("ok")')
    check_wgmma_under_env("tf32_sixteen_bit_plan", [shape for shape, _, _, _ in TF32_SIXTEEN_BIT_PLANS],
                          ["contiguous", "b_t"], {"TORCH_GEMM_WGMMA_TF32_PLAN": "sixteen_bit"}, script)


# 128×192 tiles forced (TORCH_GEMM_WGMMA_SHAPE=2x1x192) onto shapes the plan gives other tiles,
# every layout: a single tile, K of 1, edge tiles in M and N, C rows of 1001 elements (one short
# wave: single blocks); one paired wave (1000×1001×2048; an N-major B in 2 boxes and 1); 704
# tiles over the resident pairs with one k-tile each, so each block carries its previous tile's
# deferred stores into the next (4096×4096×64).
@requires_cuda
def test_wgmma_forced_mid_tiles():
    check_wgmma_under_env("forced_mid", [(70, 300, 100), (5, 129, 1), (130, 1000, 577), (1000, 1001, 67),
                                         (1000, 1001, 2048), (4096, 4096, 64)],
                          LAYOUTS, {"TORCH_GEMM_WGMMA_SHAPE": "2x1x192"})


# Slim 128×80, 128×96 and 128×160 tiles forced (TORCH_GEMM_WGMMA_SHAPE=2x1x80, …). They read both
# operands K-major (layout b_t, a linear's forward; in the other layouts the override is ignored
# and the plan's tiles run): a single tile, K of 8 (part of one k-tile; a K of 1 repacks A
# M-major), edge tiles in M and N (N of 83 and 1001: the last tile's columns end inside a lane's
# 8; the bias row of 80 is two and a half rounds of the bias warp's lanes), one paired wave
# (1000×1001×2048), many tiles a block (4096×4096×64), each run twice for the same bits; then the
# slim tile is checked to have run where it applies.
SLIM_CHECK = """
for M, N, K in {shapes!r}:
    a, b = make_operands(M, N, K, "b_t", torch.bfloat16, "cuda", generator("cuda", "slim", M, N, K))
    assert tuple(torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]["tile"]) == (128, WIDTH)
print("ok")
"""


@requires_cuda
@pytest.mark.parametrize("width", [80, 96, 160])
def test_wgmma_forced_slim_tiles(width):
    script = ENV_SCRIPT.replace('\nprint("ok")', SLIM_CHECK.replace("WIDTH", str(width)))
    check_wgmma_under_env(f"forced_slim {width}", [(70, 300, 100), (5, 129, 8), (130, 83, 577), (1000, 1001, 67),
                                                  (1000, 1001, 2048), (4096, 4096, 64)],
                          LAYOUTS, {"TORCH_GEMM_WGMMA_SHAPE": f"2x1x{width}"}, script)


# 16-bit 128×128 tiles split along K in 2 or 4 (TORCH_GEMM_WGMMA_SHAPE=2x2x128, 2x4x128): each
# block owns 64 or 32 of the tile's columns (TMA boxes, or registers); edge tiles in M and N, a K
# that leaves a slice empty, a prime K, C rows of 2001 elements (stored from registers).
@requires_cuda
@pytest.mark.parametrize("shape", ["2x2x128", "2x4x128"])
def test_wgmma_forced_medium_split(shape):
    split = int(shape.split("x")[1])
    check = MEDIUM_SPLIT_CHECK.replace("SPLIT", str(split))
    check_wgmma_under_env(f"forced_medium_split {shape}",
                          [(70, 300, 100), (5, 129, 1), (130, 1000, 577), (512, 1024, 2048), (1000, 2001, 1031)],
                          LAYOUTS, {"TORCH_GEMM_WGMMA_SHAPE": shape},
                          ENV_SCRIPT.replace('\nprint("ok")', "\n" + check + 'print("ok")'))


# Appended to the forced medium-split script: every shape ran on the forced tiles.
MEDIUM_SPLIT_CHECK = """
for M, N, K in {shapes!r}:
    a, b = make_operands(M, N, K, "NN", torch.bfloat16, "cuda", generator("cuda", "medium", M, N, K, "NN"))
    plan = torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]
    assert (tuple(plan["tile"]), plan["split_k"]) == ((128, 128), SPLIT), plan
"""


# 64×64 tiles forced (TORCH_GEMM_WGMMA_SHAPE=1x1x64), every layout, with pairs and single blocks
# (TORCH_GEMM_WGMMA_CLUSTER=1): a single tile, K of 1, edge tiles in M and N (N of 83: the last
# tile's columns end inside a lane's 8), an odd number of tile rows (the last pair's second block
# past M), C rows of 1001 elements (stored from registers), one paired wave (512×1024×2048; an
# N-major B's one box multicast by one block of the pair), many tiles a block (2048×2048×64); then
# the 64×64 tile is checked to have run.
TINY_CHECK = """
for M, N, K in {shapes!r}:
    for layout in {layouts!r}:
        a, b = make_operands(M, N, K, layout, torch.bfloat16, "cuda", generator("cuda", "tiny", M, N, K, layout))
        assert tuple(torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]["tile"]) == (64, 64)
"""


@requires_cuda
@pytest.mark.parametrize("cluster", ["pairs", "single"])
def test_wgmma_forced_tiny_tiles(cluster):
    env = {"TORCH_GEMM_WGMMA_SHAPE": "1x1x64"}
    if cluster == "single":
        env["TORCH_GEMM_WGMMA_CLUSTER"] = "1"
    check_wgmma_under_env(f"forced_tiny {cluster}",
                          [(64, 64, 64), (5, 129, 1), (130, 83, 577), (200, 1001, 131), (512, 1024, 2048),
                           (2048, 2048, 64)],
                          LAYOUTS, env, ENV_SCRIPT.replace('\nprint("ok")', "\n" + TINY_CHECK + 'print("ok")'))


# 128×256 tiles split along K in two (TORCH_GEMM_WGMMA_SHAPE=2x2; the plan takes 128×128 tiles
# there): K of 33 k-tiles (slices of 17 and 16), C rows of 2001 elements (stored from registers),
# a prime K.
@requires_cuda
def test_wgmma_forced_wide_split():
    check_wgmma_under_env("forced_wide_split", [(1024, 1104, 2100), (1000, 2001, 2500), (700, 1800, 4099)],
                          LAYOUTS, {"TORCH_GEMM_WGMMA_SHAPE": "2x2"})


# tf32 with few rows against a weight: decode_sm80's tf32 tiles from 3 to 8 rows against weights
# of moderate size, to 16 rows against up to 1024 columns (gemv for two rows and small weights),
# wgmma_sm90 past 16 rows or against larger weights (with TF32 off gemv up to 8 rows, then
# multistage; with too few column tiles for wgmma and too short a K to split, decode_sm80 up to 32
# rows, the CUDA cores past them); an odd K, at TF32's bound.
@requires_cuda
@pytest.mark.parametrize("M, N, kernel", [
    (2, 4100, "gemv"), (3, 4100, "gemv"), (8, 4100, "decode_sm80"), (16, 1000, "decode_sm80"),
    (16, 4000, "wgmma_sm90"), (16, 4100, "wgmma_sm90"), (32, 4100, "wgmma_sm90"), (16, 16400, "wgmma_sm90"), (33, 4100, "wgmma_sm90"),
    (64, 4100, "wgmma_sm90"), (127, 4100, "wgmma_sm90"),
])
def test_tf32_few_rows_against_a_weight(M, N, kernel):
    skip_unless_wgmma()
    gen = generator("cuda", "tf32_few_rows", M, N)
    x, w = randn((M, 516), torch.float32, "cuda", gen), randn((N, 516), torch.float32, "cuda", gen)
    with tf32_allowed(True):
        assert torch_gemm.explain(x, w.t())["kernel"] == kernel
        if M > 16:  # 8 column tiles of 8 k-tiles, too few to split: decode_sm80 up to 32 rows,
            # then the CUDA cores
            short_k = torch_gemm.explain(x[:, :256], w[:2000, :256].t())["kernel"]
            assert short_k == ("decode_sm80" if M <= 32 else "multistage"), short_k
        assert_close_to_reference(torch_gemm.linear_tiled(x, w), x, w.t())
        odd_k = x[:, :515], w[:, :515]  # no 16-byte vectors: decode_sm80 hands it to gemv
        assert_close_to_reference(torch_gemm.linear_tiled(*odd_k), odd_k[0], odd_k[1].t())
    with tf32_allowed(False):
        assert torch_gemm.explain(x, w.t())["kernel"] == ("multistage" if M > 8 else "gemv")


# gemv's loops (one or two rows in float32, bf16 and fp16: each lane's 8 vectors of B with A's
# before the multiply; float32's groups of 4 and 8 rows: B streamed, A inside the multiply, with
# 4 columns a warp from K = 5632 (1001 columns: the last warp's group partly past N); more
# 16-bit rows: plain loads; a column split over 1 to 8 warps by waves and batches): a K shorter
# than one batch, a part-empty last batch (250 vectors of float32), 64 long columns split over 8
# warps, columns past a block's 8 (N = 7, 3001); rows filling a group or not, and two groups (13,
# 16); with a bias, and a batch of 3 whose operands are slices of larger tensors (strided, still
# 16-byte vectors), against float64.
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("M", [1, 2, 3, 8, 13, 16])
@pytest.mark.parametrize("N, K", [(100, 64), (1000, 1000), (64, 16384), (3001, 2056), (7, 8), (1001, 5636)])
def test_gemv_rows(M, N, K, dtype):
    gen = generator("cuda", "gemv_rows", M, N, K, str(dtype))
    x, w = randn((M, K), dtype, "cuda", gen), randn((N, K), dtype, "cuda", gen)
    bias = randn((N,), dtype, "cuda", gen)
    with tf32_allowed(False), poisoned_outputs():
        assert_close_to_reference(torch_gemm.mm_tiled(x, w.t(), kernel="gemv"), x, w.t())
        assert_close_to_reference(torch_gemm.linear_tiled(x, w, bias, kernel="gemv"), x, w.t(), bias)
        xs = randn((3, M + 1, K + 8), dtype, "cuda", gen)[:, :M, :K]
        ws = randn((3, N, K + 16), dtype, "cuda", gen)[:, :, :K]
        out = torch_gemm.bmm_tiled(xs, ws.transpose(1, 2), kernel="gemv")
        for z in range(3):
            assert_close_to_reference(out[z].contiguous(), xs[z], ws[z].t())


# tf32 under TORCH_GEMM_WGMMA_STREAM_K=3: one row of 64×256 tiles dealt out over every SM as
# k-tiles, against float64 (with a bias: it enters with each tile's last k-tiles) and run twice
# for the same bits (the partial sums meet in a fixed order). A weight (B K-major) and A K-major
# or not: 16 tiles of 128 k-tiles; one row, one tile of 448 k-tiles over every SM. Then edge
# tiles in M and N with a ragged K (95 k-tiles) and C rows of 1001 elements (stored from
# registers), a ragged 449 k-tiles, an MN-major A with C from registers, and a transposed
# product.
# The end of the tf32 stream-K scripts: the product against float64 and run twice for the same
# bits; untransposed, with a bias (planned with stream-K too where the plan is checked).
TF32_STREAM_K_TAIL = """\
        out = torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90")
        assert_close_to_reference(out, a, b)
        assert torch.equal(out, torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90"))
        if plan["transposed"]:
            continue  # a bias belongs to C's columns: such calls run untransposed
        bias = randn((N,), torch.float32, "cuda", gen)
        if {check_plan!r}:
            assert torch_gemm.explain(a, b, kernel="wgmma_sm90", bias=bias)["plan"]["stream_k"]
        assert_close_to_reference(torch_gemm.linear_tiled(a, b.t(), bias, kernel="wgmma_sm90"),
                                  a, b, bias)
print("ok")
"""
TF32_STREAM_K_SCRIPT = TF32_SCRIPT_HEAD + """\
        plan = torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]
        assert plan["stream_k"] and plan["stream_k_turns"] == plan["turns"], plan
        assert plan["store"] == {store!r}, plan
""" + TF32_STREAM_K_TAIL.replace("{check_plan!r}", "True")


@requires_cuda
def test_wgmma_tf32_stream_k_over_every_turn():
    env = {"TORCH_GEMM_WGMMA_STREAM_K": "3"}
    run = lambda tag, shapes, layouts, store: check_wgmma_under_env(
        tag, shapes, layouts, env, script=TF32_STREAM_K_SCRIPT.replace("{store!r}", repr(store)))
    run("tf32_stream_k", [(16, 4096, 4096), (1, 200, 14336)], ["b_t", "both_t"], "tma")
    # Both operands repacked (with A's rows transposed too the product would run transposed); C
    # from registers with A MN-major, in place (rows of 36).
    run("tf32_stream_k_ragged", [(33, 1001, 3009)], ["b_t"], "registers")
    run("tf32_stream_k_ragged_k", [(1, 200, 14357)], ["b_t"], "tma")
    run("tf32_stream_k_mn_major_a", [(36, 1001, 3072)], ["both_t"], "registers")
    # NN, 4096 rows against 16 columns: Cᵀ = Bᵀ·Aᵀ runs (16 rows of Bᵀ, one row of tiles), A's
    # rows permuted through registers, C stored by transposed TMA boxes.
    run("tf32_stream_k_transposed", [(4096, 16, 4096)], ["contiguous"], "tma_transposed")


# tf32's 128×256 tiles with stream-K: the partial last round dealt out as k-tiles (on few clusters,
# TORCH_GEMM_WGMMA_MAX_CLUSTERS, so that blocks take whole turns before their pieces; and the
# plan's own on 132 SMs), and every turn under TORCH_GEMM_WGMMA_STREAM_K=3 with
# TORCH_GEMM_WGMMA_SHAPE=2x1; paired and unpaired. Edge tiles in M and N, C rows of 2001 elements
# (stored from registers), a ragged K, A MN-major (through registers), an N-major B (the
# transposed product); against float64, with a bias, and run twice for the same bits.
TF32_STREAM_K_WIDE_SCRIPT = TF32_SCRIPT_HEAD + """\
        plan = torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]
        if {check_plan!r}:
            assert tuple(plan["tile"]) == (128, 256) and plan["stream_k_turns"] > 0, plan
""" + TF32_STREAM_K_TAIL


@requires_cuda
@pytest.mark.parametrize("env", ["3:1:0", "5:1:1", "7:2:0", "0:3:0", "0:3:1"])
def test_wgmma_tf32_stream_k_on_128x256_tiles(env):
    """env: clusters resident (0: the device's), stream-K mode, 1 for unpaired blocks."""
    clusters, mode, unpaired = env.split(":")
    overrides = {"TORCH_GEMM_WGMMA_SHAPE": "2x1", "TORCH_GEMM_WGMMA_STREAM_K": mode,
                 "TORCH_GEMM_WGMMA_MAX_CLUSTERS": "" if clusters == "0" else clusters,
                 "TORCH_GEMM_WGMMA_CLUSTER": unpaired}
    shapes = [(1950, 2600, 300), (200, 2001, 3001), (1000, 1001, 1031), (256, 2048, 8192)]
    script = TF32_STREAM_K_WIDE_SCRIPT.replace("{check_plan!r}", "True")
    check_wgmma_under_env(f"tf32_stream_k_wide {env}", shapes, ["contiguous", "a_t", "both_t"], overrides,
                          script)


@requires_cuda
def test_wgmma_tf32_stream_k_by_the_plan():
    """tf32's own rules (TORCH_GEMM_WGMMA_TF32_PLAN=own; with both operands K-major the plan would
    take the 16-bit rules)."""
    skip_unless_wgmma()
    own = {"TORCH_GEMM_WGMMA_TF32_PLAN": "own"}
    # 80 pair turns of 64 k-tiles: the last 16 dealt out to 64 of the 66 resident pairs, 4 a turn.
    on_132 = torch.cuda.get_device_properties(0).multi_processor_count == 132
    script = TF32_STREAM_K_WIDE_SCRIPT.replace("{check_plan!r}", repr(on_132))
    check_wgmma_under_env("tf32_stream_k_plan", [(2048, 2560, 2048)], ["contiguous", "b_t"], own, script)
    # Every turn of 128x256 tiles dealt out in equal shares where the 64x256 tiles would be few:
    # 40 turns in 3 shares on 120 blocks, with edge tiles and a ragged K (122 k-tiles); 64 turns in
    # 2 shares on 128 blocks; 16 in 8 on 128 (edges, 163 k-tiles); an N-major B runs the
    # transposed product, whose turns split alike.
    check_wgmma_under_env("tf32_dealt_plan", [(500, 2500, 3900), (1024, 2048, 8192), (250, 2000, 5200)],
                          ["contiguous", "b_t", "a_t"], own, script)


# 16-bit products whose 128×256 tiles leave half the SMs idle, with a long K: the plan deals every
# turn of 128×256 pairs out in equal shares (16 pair turns in 4 shares, 1024 rows; 20 pair turns of edge tiles
# with a ragged K in 3; two tile rows, 20 pair turns with a prime K in 3). The plan (CPU code) is
# checked to take the rule on 132 SMs, then every layout runs by the plan on this device.
WIDE_DEALT_SHAPES = [(1024, 1024, 10240), (500, 2500, 10300), (256, 5000, 10301)]


@requires_cuda
def test_wgmma_sixteen_bit_wide_dealt_by_the_plan():
    for M, N, K in WIDE_DEALT_SHAPES:
        p = torch_gemm._C.sm90_plan(M, N, K, sm_count=132, max_active_clusters=66)
        assert tuple(p["tile"]) == (128, 256) and p["stream_k_turns"] == p["turns"] > 0, (M, N, K, p["why"])
        assert p["cluster"] == 2, p
    check_wgmma_under_env("wide_dealt_plan", WIDE_DEALT_SHAPES, LAYOUTS, {})


# The partial sums' flags carry a tag of the launch and are cleared by their one reader, with no
# memset before the launch: plans that deal turns out or split tiles over clusters are right over a
# workspace whose memory last held the old "set" value 1 (and all ones), call after call, and in a
# CUDA graph whose replays repeat the captured tag over the same workspace. On a 132-SM H100/H200:
# paired 64x128 tiles dealt in 4 shares, 128x128 tiles dealt in 2, tf32 64x256 tiles split in 8
# over 4 clusters a tile (on another GPU, those of them whose plan there sets flags); then the
# first two with TORCH_GEMM_WGMMA_FLAGS=zeroed.
FLAG_PRODUCTS = [(torch.bfloat16, 512, 512, 8192), (torch.float16, 512, 2048, 11008),
                 (torch.float32, 64, 512, 8192)]


@requires_cuda
def test_partial_sum_flags_need_no_memset():
    skip_unless_wgmma()
    was_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        operands, workspaces = [], []
        for dtype, M, N, K in FLAG_PRODUCTS:
            gen = generator("cuda", "flags", str(dtype), M, N, K)
            a, b = make_operands(M, N, K, "b_t", dtype, "cuda", gen)
            p = torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]  # this GPU's own plan
            if p["stream_k"] or p["split_groups"] > 1:
                operands.append((a, b))
                workspaces.append(p["workspace_bytes"])
        assert operands, "no product sets flags on this GPU"
        for (a, b), nbytes in zip(operands, workspaces):
            # Blocks of the workspace's size that last held the old "set" value 1 and all ones,
            # freed just before the call, which the caching allocator hands out again first.
            torch.cuda.empty_cache()
            words = (nbytes + 7) // 8
            poison = [torch.full((words,), 1, dtype=torch.int64, device="cuda"),
                      torch.full((words,), -1, dtype=torch.int64, device="cuda")]
            del poison
            first = torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90")
            assert_close_to_reference(first, a, b)
            for _ in range(3):
                assert torch.equal(torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90"), first)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = [torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90") for a, b in operands]
        for _ in range(3):
            for a, _ in operands:
                a.copy_(torch.randn_like(a))
            graph.replay()
            torch.cuda.synchronize()
            for out, (a, b) in zip(outs, operands):
                assert_close_to_reference(out, a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = was_tf32
    # As the sanitizer's initcheck runs them: the flags zeroed before the launch as well.
    check_wgmma_under_env("flags_zeroed", [(512, 512, 8192), (512, 2048, 11008)], ["b_t"],
                          {"TORCH_GEMM_WGMMA_FLAGS": "zeroed"})


# C from registers where TMA would store it (TORCH_GEMM_WGMMA_STORE=registers, which
# sanitize_cases.py sets under initcheck): 64-row, paired 128×256 and 128×128 tiles, edge tiles in
# M and N; and in float32, tf32 (its transposed product where B is N-major) and 3xTF32.
STORE_FLOAT32_SCRIPT = """
import sys, torch, torch_gemm
sys.path.insert(0, {tests!r})
from gemm_testing import assert_close_to_reference, make_operands, generator
for M, N, K in {shapes!r}:
    for layout in {layouts!r}:
        a, b = make_operands(M, N, K, layout, torch.float32, "cuda", generator("cuda", {tag!r}, M, N, K, layout))
        torch.backends.cuda.matmul.allow_tf32 = True
        assert torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]["store"] == "registers"
        assert_close_to_reference(torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90"), a, b)
        torch.backends.cuda.matmul.allow_tf32 = False
        assert torch_gemm.explain(a, b, kernel="wgmma_sm90_3xtf32")["plan"]["store"] == "registers"
        assert_close_to_reference(torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90_3xtf32"), a, b,
                                  kernel="wgmma_sm90_3xtf32")
print("ok")
"""


@requires_cuda
def test_wgmma_store_forced_to_registers():
    env = {"TORCH_GEMM_WGMMA_STORE": "registers"}
    shapes = [(200, 264, 72), (1800, 3840, 320), (1250, 4400, 320)]
    check_wgmma_under_env("store_registers", shapes, LAYOUTS, env)
    check_wgmma_under_env("store_fp32", shapes, LAYOUTS, env, script=STORE_FLOAT32_SCRIPT)


# Stream-K over every turn of one row of 64×128 tiles (TORCH_GEMM_WGMMA_STREAM_K=3, in place of
# the plan's split or unsplit tiles), on every SM: pieces of about 15 k-tiles (32 tiles of 64),
# ragged N and K, a prime K (141 k-tiles, C rows of 1001 elements: stored from registers), a
# weight of 28672 rows; and on few blocks (TORCH_GEMM_WGMMA_MAX_CLUSTERS), so that a block takes
# several whole tiles between its pieces, with a K of one k-tile too. The plan (CPU code) is
# checked to deal out every turn of each shape, so that none falls back to whole tiles.
@requires_cuda
@pytest.mark.parametrize("clusters", ["3", "7", ""])
def test_wgmma_stream_k_over_every_turn(clusters):
    if clusters:
        shapes = [(64, 1000, 333), (17, 2600, 1031), (1, 300, 4099), (50, 4000, 64)]
    else:
        shapes = [(64, 1000, 4099), (17, 2600, 1031), (1, 300, 4099), (32, 4096, 4096), (30, 1001, 9001),
                  (1, 4096, 28672)]
    for M, N, K in shapes:
        p = torch_gemm._C.sm90_plan(M, N, K, sm_count=132, stream_k="3", max_clusters=clusters or None)
        assert tuple(p["tile"]) == (64, 128) and p["stream_k_turns"] == p["turns"] > 0, (M, N, K, p["why"])
    check_wgmma_under_env(f"stream_k_all {clusters}", shapes, LAYOUTS,
                          {"TORCH_GEMM_WGMMA_MAX_CLUSTERS": clusters, "TORCH_GEMM_WGMMA_STREAM_K": "3"})


# The same on two-consumer tiles forced by TORCH_GEMM_WGMMA_SHAPE: 128×256 (2x1), a few tiles with a
# long K over every resident pair (about 8 pairs a tile); 128×128 (2x1x128), one partial round of
# pairs over every resident pair (40 pair turns of 64 k-tiles). Then for both: edge tiles in M and
# N with C rows of 2001 elements and a ragged K, one short wave of single blocks (16 k-tiles), many
# turns a pair; unpaired; on few clusters.
WGMMA_STREAM_K_ALL_TILES = {"2x1": ((128, 256), (256, 2048, 8192)), "2x1x128": ((128, 128), (384, 2560, 4096))}


@requires_cuda
@pytest.mark.parametrize("shape", list(WGMMA_STREAM_K_ALL_TILES))
@pytest.mark.parametrize("env", ["", "3", "unpaired"])
def test_wgmma_stream_k_over_every_turn_of_two_consumer_tiles(shape, env):
    tile, first = WGMMA_STREAM_K_ALL_TILES[shape]
    overrides = {"TORCH_GEMM_WGMMA_SHAPE": shape, "TORCH_GEMM_WGMMA_STREAM_K": "3",
                 "TORCH_GEMM_WGMMA_MAX_CLUSTERS": env if env.isdigit() else "",
                 "TORCH_GEMM_WGMMA_CLUSTER": "1" if env == "unpaired" else ""}
    shapes = [first, (300, 2001, 3001), (256, 2048, 1024), (1900, 2600, 300)]
    for M, N, K in shapes:
        p = torch_gemm._C.sm90_plan(M, N, K, sm_count=132, max_active_clusters=66, shape=shape, stream_k="3",
                                    max_clusters=overrides["TORCH_GEMM_WGMMA_MAX_CLUSTERS"] or None,
                                    cluster=overrides["TORCH_GEMM_WGMMA_CLUSTER"] or None)
        assert tuple(p["tile"]) == tile and p["stream_k_turns"] == p["turns"] > 0, (M, N, K, p["why"])
    check_wgmma_under_env(f"stream_k_all {shape} {env}", shapes, ("contiguous", "both_t"), overrides)


# Stream-K over every turn of forced 64×128 tiles of several tile rows
# (TORCH_GEMM_WGMMA_SHAPE=1x1x128 and TORCH_GEMM_WGMMA_STREAM_K=3), paired: each turn in 2 equal shares (512×1024×8192); 5 tile
# rows (the last pair's second block past M) with a prime K and C rows of 1001 elements (stored
# from registers); 80 turns dealt over every pair; 3 tile rows against 300 columns; then on 5
# clusters (several whole turns a cluster between pieces) and unpaired.
@requires_cuda
@pytest.mark.parametrize("env", ["", "5", "unpaired"])
def test_wgmma_stream_k_over_every_turn_of_forced_64x128_tiles(env):
    overrides = {"TORCH_GEMM_WGMMA_SHAPE": "1x1x128", "TORCH_GEMM_WGMMA_STREAM_K": "3",
                 "TORCH_GEMM_WGMMA_MAX_CLUSTERS": env if env.isdigit() else "",
                 "TORCH_GEMM_WGMMA_CLUSTER": "1" if env == "unpaired" else ""}
    shapes = [(512, 1024, 8192), (300, 1001, 4099), (512, 2560, 1024), (130, 300, 1280)]
    for M, N, K in shapes:
        p = torch_gemm._C.sm90_plan(M, N, K, sm_count=132, max_active_clusters=66, shape="1x1x128", stream_k="3",
                                    max_clusters=overrides["TORCH_GEMM_WGMMA_MAX_CLUSTERS"] or None,
                                    cluster=overrides["TORCH_GEMM_WGMMA_CLUSTER"] or None)
        assert tuple(p["tile"]) == (64, 128) and p["stream_k_turns"] == p["turns"] > 0, (M, N, K, p["why"])
        assert p["cluster"] == (1 if env == "unpaired" else 2), p
    check = PAIRED_STREAM_K_CHECK.replace("CLUSTER", "1" if env == "unpaired" else "2")
    check_wgmma_under_env(f"stream_k_all 1x1x128 {env}", shapes, LAYOUTS, overrides,
                          script=ENV_SCRIPT.replace('\nprint("ok")', "\n" + check + 'print("ok")'))


# Appended to the script above: the GPU's own plan took the path (its SMs and resident pairs may
# differ from the 132 and 66 the CPU plan was asked about).
PAIRED_STREAM_K_CHECK = """
for M, N, K in {shapes!r}:
    for layout in {layouts!r}:
        a, b = make_operands(M, N, K, layout, torch.bfloat16, "cuda", generator("cuda", "psk", M, N, K, layout))
        plan = torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]
        assert tuple(plan["tile"]) == (64, 128) and plan["stream_k_turns"] == plan["turns"] > 0, plan
        assert plan["cluster"] == CLUSTER, plan
"""


# Stream-K with few clusters (TORCH_GEMM_WGMMA_MAX_CLUSTERS), so that small products take several
# whole turns a cluster and then pieces, in both of its modes (the last partial round; that and
# one round more), paired and unpaired, on the 128×256 tiles that stream-K takes.
@requires_cuda
@pytest.mark.parametrize("env", ["3:1:0", "5:1:0", "3:2:0", "4:1:1", "7:2:1"])
def test_wgmma_stream_k_few_clusters(env):
    """env: clusters resident, stream-K mode, 1 for unpaired blocks (TORCH_GEMM_WGMMA_CLUSTER)."""
    clusters, mode, unpaired = env.split(":")
    check_wgmma_under_env(f"stream_k {env}", [(1900, 2600, 300), (2100, 2000, 333), (1300, 2600, 1031), (1024, 2304, 200)],
                          ("contiguous", "both_t"),
                          {"TORCH_GEMM_WGMMA_MAX_CLUSTERS": clusters, "TORCH_GEMM_WGMMA_STREAM_K": mode,
                           "TORCH_GEMM_WGMMA_CLUSTER": unpaired, "TORCH_GEMM_WGMMA_SHAPE": "2x1"})
