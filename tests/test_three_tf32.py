"""wgmma_sm90_3xtf32 (float32 at float32's accuracy on the TF32 tensor cores) and the float32
precision setting that lets kernel="auto" take it: the setting and the rule on the CPU, the kernel
against float64 and torch.mm's float32 on an H100/H200."""

from __future__ import annotations

import math

import pytest
import torch

import torch_gemm
from gemm_testing import (
    LAYOUTS, assert_close_to_reference, generator, make_operands, randn, reference, requires_cuda,
    skip_unless_wgmma, tf32_allowed,
)

KERNEL = "wgmma_sm90_3xtf32"


@pytest.fixture(autouse=True)
def _restore_precision():
    saved = torch_gemm.get_fp32_precision()
    yield
    torch_gemm.set_fp32_precision(saved)


# ---- The setting and the rule (CPU).

def test_default_is_ieee_and_the_context_manager_restores():
    assert torch_gemm.get_fp32_precision() == "ieee"
    with pytest.raises(RuntimeError):
        with torch_gemm.fp32_precision("3xtf32"):
            assert torch_gemm.get_fp32_precision() == "3xtf32"
            raise RuntimeError("inside")
    assert torch_gemm.get_fp32_precision() == "ieee"


@pytest.mark.parametrize("mode", ["IEEE", "tf32", "", "3xTF32 "])
def test_bad_mode_names_the_call_and_the_modes(mode):
    with pytest.raises(ValueError, match=r"set_fp32_precision: mode must be one of \('ieee', '3xtf32'\)"):
        torch_gemm.set_fp32_precision(mode)


@pytest.mark.parametrize("mode", [None, 3, b"ieee"])
def test_mode_of_another_type_is_a_type_error(mode):
    with pytest.raises(TypeError, match=r"set_fp32_precision: mode must be a str, one of \('ieee', '3xtf32'\)"):
        torch_gemm.set_fp32_precision(mode)
    assert torch_gemm.get_fp32_precision() == "ieee"


@pytest.mark.parametrize("M, N, K, dtype, sm, allow_tf32, three_tf32, expected", [
    (4096, 4096, 4096, "float32", 90, False, True, KERNEL),
    (4096, 4096, 4096, "float32", 90, False, False, "multistage"),   # the default: IEEE float32
    (4096, 4096, 4096, "float32", 90, True, True, "wgmma_sm90"),     # TF32 allowed: torch's own choice
    (4096, 100, 4096, "float32", 90, False, True, "multistage"),     # under one 128-row tile
    (256, 4096, 4096, "float32", 90, False, True, KERNEL),           # 64 tiles of 128x128: > 132 / 4
    (256, 2048, 2048, "float32", 90, False, True, KERNEL),           # 32 tiles, K in 2 chunks: 64
    (256, 2048, 1024, "float32", 90, False, True, "multistage"),     # 32 tiles, K too short to cut
    (1024, 512, 4096, "float32", 90, False, True, KERNEL),
    (4096, 4096, 4096, "float32", 80, False, True, "multistage"),    # no wgmma
    (2, 4096, 4096, "float32", 90, False, True, "gemv"),             # decode: gemv is float32 exact
    (4096, 4096, 4096, "bfloat16", 90, False, True, "wgmma_sm90"),
])
def test_auto_rule(M, N, K, dtype, sm, allow_tf32, three_tf32, expected):
    choice = torch_gemm._C.auto_kernel(M, N, K, dtype=dtype, sm=sm, allow_tf32=allow_tf32, three_tf32=three_tf32)
    assert choice["kernel"] == expected, choice["reason"]


def test_auto_counts_the_batch_in_3xtf32s_tiles():
    # 256 x 2048 is 32 tiles of 128x128, too few alone (K = 1024 is too short to cut into chunks);
    # three of them in one bmm are 96.
    one = torch_gemm._C.auto_kernel(256, 2048, 1024, dtype="float32", sm=90, allow_tf32=False, three_tf32=True)
    three = torch_gemm._C.auto_kernel(256, 2048, 1024, dtype="float32", sm=90, allow_tf32=False, three_tf32=True,
                                      batch=3)
    assert (one["kernel"], three["kernel"]) == ("multistage", KERNEL)
    with torch_gemm.fp32_precision("3xtf32"):
        a, b = torch.empty(3, 256, 1024, device="meta"), torch.empty(3, 1024, 2048, device="meta")
        assert torch_gemm.explain(a, b, sm=90, sm_count=132, allow_tf32=False)["kernel"] == KERNEL


def test_explain_follows_the_setting():
    a = torch.empty(1024, 2048, device="meta")
    b = torch.empty(2048, 1024, device="meta")
    assert torch_gemm.explain(a, b, sm=90, sm_count=132, allow_tf32=False)["kernel"] == "multistage"
    with torch_gemm.fp32_precision("3xtf32"):
        answer = torch_gemm.explain(a, b, sm=90, sm_count=132, allow_tf32=False)
    assert answer["kernel"] == KERNEL and "3xtf32" in answer["reason"]
    # 1024 x 1024 is 64 tiles of 128x128, fewer than half of 132 SMs: the one-consumer 64x128 tiles.
    plan = answer["plan"]
    assert plan["K"] == 3 * 2048 and tuple(plan["tile"]) == (64, 128) and not plan["transposed"]
    assert "promoted" in plan["why"]["tile"] and plan["split_k"] == 1
    assert "idle" in plan["why"]["tile"]


def test_explain_names_a_short_m_as_the_reason_for_one_consumer():
    """64 rows against 132 tiles' worth of columns: one consumer because the rows fill a 64-row
    tile, not because 128x128 tiles would be few."""
    plan = torch_gemm._C.sm90_plan(64, 8448, 4096, sm_count=132, dtype="float32", three_tf32=True)
    assert plan["consumers"] == 1 and "64 rows fill a 64-row tile" in plan["why"]["tile"], plan["why"]["tile"]


@pytest.mark.parametrize("K", [3, 5, 4096])
def test_explain_reads_the_split_operands_in_place(K):
    """The split rows are two segments of K (of each of K's chunks) rounded up to a k-tile (32
    floats), which TMA reads as they are: no repack in the plan, whatever K (K·4 bytes is not a
    multiple of 16 for odd K); the product runs over three segments. 512 x 384 is 24 tiles of
    64x128: K = 4096 is cut into 4 chunks."""
    a, b = torch.empty(512, K, device="meta"), torch.empty(K, 384, device="meta")
    with torch_gemm.fp32_precision("3xtf32"):
        plan = torch_gemm.explain(a, b, kernel="wgmma_sm90_3xtf32", sm=90, sm_count=132, allow_tf32=False)["plan"]
    assert not plan["a"]["repack"] and not plan["b"]["repack"]
    assert plan["chunks"] == (4 if K == 4096 else 1)
    segment = -(-(-(-K // plan["chunks"])) // 32) * 32
    assert plan["K"] == 3 * segment
    # The workspace: each operand's rows of two segments a chunk (at least 16 bytes apart), and
    # with chunks their partial sums; the product itself needs none here.
    ld = max(2 * segment, 4)
    split = 512 * ld * 4 * plan["chunks"] + 384 * ld * 4 * plan["chunks"]
    partials = 512 * 384 * 4 * plan["chunks"] if plan["chunks"] > 1 else 0
    assert plan["workspace_bytes"] >= split + partials, plan["workspace_bytes"]


@pytest.mark.parametrize("M, N, tile, chunks", [(4096, 4096, (128, 128), 1), (8192, 4096, (128, 128), 1),
                                                (64, 4096, (64, 128), 4), (1, 1, (64, 128), 4)])
def test_plan_runs_the_promoted_tiles(M, N, tile, chunks):
    """3xTF32's inner product runs on the 128-column tf32 tiles whose k-tiles are added in fp32, in
    whatever layout the caller's operands came: the split copies are K-major. 64 x 4096 (32 tiles
    of 64x128) cuts K into 4 chunks, 128 tiles, still 64 rows (a 128-row tile would be half
    empty); one tile too (four SMs take it, not one)."""
    plan = torch_gemm._C.sm90_plan(M, N, 4096, sm_count=132, dtype="float32", three_tf32=True)
    assert tuple(plan["tile"]) == tile and plan["a"]["k_major"] and plan["b"]["k_major"]
    assert not plan["transposed"] and plan["split_k"] == 1 and plan["chunks"] == chunks
    assert plan["K"] == 3 * 4096 // chunks
    with pytest.raises(ValueError, match="three_tf32 takes float32 only"):
        torch_gemm._C.sm90_plan(M, N, 4096, sm_count=132, dtype="bfloat16", three_tf32=True)


@pytest.mark.parametrize("M, N, K, chunks", [
    (128, 128, 32768, 8),    # 2 tiles of 64x128: as many chunks as allowed
    (300, 200, 5000, 4),     # 5 x 2 tiles; the last chunk shorter (5000 = 3 x 1280 + 1160)
    (512, 5120, 28672, 4),   # 160 tiles of 128x128 fill the second round to 21 %; 4 chunks, 640, to 97 %
    (2048, 2048, 32768, 1),  # 256 tiles fill two rounds to 97 %
    (256, 2048, 1024, 1),    # chunks of at least 1024
    (128, 128, 0, 1),        # no K: nothing to cut
    (1, 1, 1, 1),
])
def test_chunks_of_k(M, N, K, chunks):
    """Where one product's promoted tiles would leave SMs idle, 3xTF32 cuts K into chunks of whole
    k-tiles run as a batch, each but the last (which may be shorter) at least 1024 long: the count
    of least estimated time on 132 SMs
    (rounds of tiles times their k-tiles, plus the partial sums' bytes); a caller's batch is never
    cut."""
    plan = torch_gemm._C.sm90_plan(M, N, K, sm_count=132, dtype="float32", three_tf32=True)
    assert plan["chunks"] == chunks
    chunk_k = -(-(-(-K // chunks)) // 32) * 32
    assert plan["K"] == 3 * chunk_k and plan["batch"] == chunks and (K == 0 or -(-K // chunk_k) == chunks)
    assert torch_gemm._C.sm90_plan(M, N, K, sm_count=132, dtype="float32", three_tf32=True, batch=2)["chunks"] == 1


# ---- The kernel on an H100/H200.

SHAPES = [(1, 1, 1), (128, 128, 0), (129, 257, 1), (200, 264, 72), (333, 517, 1021), (1024, 1024, 4096),
          (130, 1000, 65)]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M, N, K", SHAPES)
def test_against_float64(M, N, K, layout):
    skip_unless_wgmma()
    gen = generator("cuda", "3xtf32", M, N, K, layout)
    a, b = make_operands(M, N, K, layout, torch.float32, "cuda", gen)
    with tf32_allowed(False):
        out = torch_gemm.mm_tiled(a, b, kernel=KERNEL)
        assert_close_to_reference(out, a, b, kernel=KERNEL)
        bias = randn((N,), torch.float32, "cuda", gen)
        assert_close_to_reference(torch_gemm.linear_tiled(a, b.t(), bias, kernel=KERNEL), a, b, bias, kernel=KERNEL)


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M, N, K", [(300, 200, 5000), (129, 130, 4099), (64, 384, 8191), (1, 1, 100000),
                                     (3, 7, 9001)])
def test_chunks_of_k_against_float64(M, N, K, layout):
    """K cut into chunks (test_chunks_of_k), the last one shorter and not a whole k-tile; with a
    bias, which joins the chunks' sum once; one and a few rows and columns (8 chunks, N not a
    multiple of 4: the sum's scalar path)."""
    skip_unless_wgmma()
    gen = generator("cuda", "3xtf32 chunks", M, N, K, layout)
    a, b = make_operands(M, N, K, layout, torch.float32, "cuda", gen)
    with tf32_allowed(False):
        assert_close_to_reference(torch_gemm.mm_tiled(a, b, kernel=KERNEL), a, b, kernel=KERNEL)
        bias = randn((N,), torch.float32, "cuda", gen)
        assert_close_to_reference(torch_gemm.linear_tiled(a, b.t(), bias, kernel=KERNEL), a, b, bias, kernel=KERNEL)


@requires_cuda
def test_batched_and_row_sums():
    skip_unless_wgmma()
    gen = generator("cuda", "3xtf32 batched")
    a, b = randn((3, 200, 300), torch.float32, "cuda", gen), randn((3, 300, 150), torch.float32, "cuda", gen)
    out = torch_gemm.bmm_tiled(a, b, kernel=KERNEL)
    for i in range(3):
        assert_close_to_reference(out[i].contiguous(), a[i], b[i], kernel=KERNEL)
    product, sums = torch_gemm.mm_tiled_row_sum(a[0], b[0], kernel=KERNEL)
    assert_close_to_reference(product, a[0], b[0], kernel=KERNEL)
    torch.testing.assert_close(sums.double(), a[0].double().sum(1), rtol=1e-5, atol=1e-4)


@requires_cuda
@pytest.mark.parametrize("one_product", [True, False])
@pytest.mark.parametrize("K", [16, 64, 256, 4096, 65536])
def test_as_accurate_as_sgemm(K, one_product):
    """Relative L2 error against float64 (CUTLASS's example 27 measure): within SGEMM's (torch.mm,
    TF32 off) on the same inputs, with a margin below K = 256 where TF32's dropped small·small
    term is not yet under the float32 sum's rounding. 256 x 256 alone cuts K = 4096 and 65536 into
    chunks; as one of a batch of two (never cut) it runs as one product."""
    skip_unless_wgmma()
    gen = generator("cuda", "3xtf32 accuracy", K)
    a, b = randn((256, K), torch.float32, "cuda", gen), randn((K, 256), torch.float32, "cuda", gen)
    ref = reference(a, b)
    with tf32_allowed(False):
        if one_product:
            ours = torch_gemm.bmm_tiled(a.expand(2, -1, -1), b.expand(2, -1, -1), kernel=KERNEL)[1].double()
        else:
            ours = torch_gemm.mm_tiled(a, b, kernel=KERNEL).double()
        sgemm = torch.mm(a, b).double()
    err = ((ours - ref).norm() / ref.norm()).item()
    err_sgemm = ((sgemm - ref).norm() / ref.norm()).item()
    assert err <= (1.0 if K >= 256 else 4.0) * err_sgemm + 1e-9, (err, err_sgemm)


def ours_and_torch_mm(a, b):
    """3xTF32's product and torch.mm's (TF32 off), once their NaN and ±Inf are checked to agree
    place by place."""
    with tf32_allowed(False):
        ours = torch_gemm.mm_tiled(a, b, kernel=KERNEL)
        theirs = torch.mm(a, b)
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    assert torch.equal(ours[torch.isinf(theirs)], theirs[torch.isinf(theirs)])
    return ours, theirs


@requires_cuda
def test_inf_nan_and_huge_values_as_torch_mm():
    """Inf and NaN reach C as torch.mm's float32 gives them: an Inf against exactly representable
    (TF32) values is Inf, not the NaN of Inf times a zero small part; values within half a TF32
    step of float's largest stay finite through the split (their row against column 1 sums to
    half of float's largest; against the other columns it overflows, as torch.mm's does)."""
    skip_unless_wgmma()
    a = torch.ones(128, 128, device="cuda")
    b = torch.ones(128, 128, device="cuda")
    a[0, 0], a[1, 5], a[2, 7] = math.inf, -math.inf, math.nan
    huge = torch.finfo(torch.float32).max
    a[3, :] = huge
    b[:, 1] = 2.0**-8
    ours, _ = ours_and_torch_mm(a, b)
    assert torch.isfinite(ours[3, 1]) and abs(ours[3, 1].item() / (huge * 2.0**-8 * 128) - 1) < 1e-6


@requires_cuda
def test_inf_and_nan_across_chunks_of_k_as_torch_mm():
    """128 x 128 x 5000 runs as 4 chunks of K, the last one shorter (1160): an Inf, -Inf or NaN in
    any chunk, the last included, reaches C as torch.mm's; +Inf and -Inf in different chunks of one
    sum give NaN, as in torch.mm's one sum."""
    skip_unless_wgmma()
    K = 5000
    assert torch_gemm._C.sm90_plan(128, 128, K, sm_count=132, dtype="float32", three_tf32=True)["chunks"] == 4
    gen = generator("cuda", "3xtf32 chunk infs")
    a, b = randn((128, K), torch.float32, "cuda", gen), randn((K, 128), torch.float32, "cuda", gen)
    a[0, 10], a[1, 4999], a[2, 2600] = math.inf, -math.inf, math.nan
    a[3, 100], a[3, 4000] = math.inf, -math.inf
    b[4500, 7] = math.inf
    _, theirs = ours_and_torch_mm(a, b)
    assert torch.isinf(theirs).any() and torch.isnan(theirs).any()


@requires_cuda
def test_overflow_of_the_cross_terms_or_of_big_big_as_torch_mm():
    """Sums past float's range overflow as torch.mm's do, whichever part of the split overflows:
    (a) big·big's terms (±2^125) cancel while the cross terms (2^113 each) sum to 2^128: +Inf;
    (b) big·big overflows to +Inf while the cross terms overflow to -Inf (b's small part is
    negative): +Inf, not NaN. (a) on 128 x 128 runs as 8 chunks of K, whose finite partial sums
    (2^125 each) overflow as they are added; on 2048 x 2048, as one product."""
    skip_unless_wgmma()
    K = 32768
    pairs = []
    for size in (128, 2048):
        a = torch.full((size, K), 2.0**62, device="cuda")
        b = torch.empty(K, size, device="cuda")
        b[0::2], b[1::2] = 2.0**63 + 2.0**51, -(2.0**63 - 2.0**51)  # small parts both +2^51
        b[:, 64:] = 1.0  # exact in TF32: no cross terms, a finite 2^77
        pairs.append((a, b))
    a2 = torch.full((128, 128), 2.0**100, device="cuda")
    b2 = torch.full((128, 128), 2.0**40 - 2.0**28, device="cuda")  # big 2^40, small -2^28
    pairs.append((a2, b2))
    for x, y in pairs:
        _, theirs = ours_and_torch_mm(x, y)
        assert torch.isinf(theirs).any()


@requires_cuda
def test_auto_takes_it_under_the_setting_only_while_tf32_is_off():
    skip_unless_wgmma()
    # 64 tiles of 128x128: enough for auto to take 3xTF32 (more than a quarter of the SMs).
    a, b = torch.randn(1024, 256, device="cuda"), torch.randn(256, 1024, device="cuda")
    with tf32_allowed(False), torch_gemm.fp32_precision("3xtf32"):
        assert torch_gemm.explain(a, b)["kernel"] == KERNEL
        assert_close_to_reference(torch_gemm.mm_tiled(a, b), a, b, kernel="auto")
    with tf32_allowed(True), torch_gemm.fp32_precision("3xtf32"):
        assert torch_gemm.explain(a, b)["kernel"] == "wgmma_sm90"
