"""decode_sm80: the tensor-core decode rung's own paths — token tiles of 1, 2, 4 and 8, K split
inside a block and across blocks (with the second kernel's reduction), the K tail, columns past
N, passes over tokens past 64, the batch, the bias; against an N-major weight (dx = dy·W) up to 16
tokens, K split across a cluster's blocks; and the fallback to gemv for layouts its 16-byte loads
cannot take — each against the float64 reference, in bf16/fp16 and in float32 as tf32 (only while
torch allows TF32)."""

from __future__ import annotations

import pytest
import torch

import torch_gemm
from gemm_testing import (
    assert_close_to_reference, generator, poisoned_outputs, randn, requires_cuda, table_kernels, tf32_allowed,
)

pytestmark = [
    requires_cuda,
    pytest.mark.skipif("decode_sm80" not in table_kernels("cuda"), reason="this build has no decode_sm80"),
]


def _needs_sm80() -> None:
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("decode_sm80 needs compute capability 8.0")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("M, N, K", [
    (1, 4096, 4096), (2, 1024, 4096), (7, 17, 40), (8, 512, 2048), (9, 100, 8),
    (16, 1000, 4104), (17, 33, 96), (32, 256, 512), (33, 64, 1032), (64, 4096, 256),
    (65, 48, 64), (130, 31, 72), (3, 16, 32 * 2048), (5, 1, 16), (16, 256, 8200), (5, 200, 16392),
])
def test_linear_weight_layouts(M, N, K, dtype):
    """x @ W.T with W as nn.Linear keeps it: B's columns contiguous, the rung's own path."""
    _needs_sm80()
    gen = generator("cuda", "decode", M, N, K)
    x, w = randn((M, K), dtype, "cuda", gen), randn((N, K), dtype, "cuda", gen)
    with poisoned_outputs():
        out = torch_gemm.mm_tiled(x, w.t(), kernel="decode_sm80")
    assert_close_to_reference(out, x, w.t())


@pytest.mark.parametrize("M, N, K", [(4, 1024, 4096), (16, 300, 2056), (1, 8, 8)])
def test_bias_through_linear(M, N, K):
    _needs_sm80()
    gen = generator("cuda", "decode-bias", M, N, K)
    x, w = randn((M, K), torch.bfloat16, "cuda", gen), randn((N, K), torch.bfloat16, "cuda", gen)
    bias = randn((N,), torch.bfloat16, "cuda", gen)
    with poisoned_outputs():
        out = torch_gemm.linear_tiled(x, w, bias, kernel="decode_sm80")
    assert_close_to_reference(out, x, w.t(), bias)


@pytest.mark.parametrize("case", ["odd_k", "a_transposed", "offset", "b_row_major_odd_n", "b_row_major_17_rows",
                                  "b_row_major_a_transposed", "b_row_major_offset"])
def test_layouts_that_fall_back_to_gemv(case):
    """Operands that are not contiguous, aligned 16-byte vectors along K (or, for an N-major B, up
    to 16 rows of A against B's rows in such vectors) are computed by gemv."""
    _needs_sm80()
    gen = generator("cuda", "decode-fallback", case)
    M, N, K = 4, 96, 1000 if case != "odd_k" else 1001
    if case == "b_row_major_odd_n":
        N = 100
    elif case == "b_row_major_17_rows":
        M = 17
    x, w = randn((M, K), torch.bfloat16, "cuda", gen), randn((N, K), torch.bfloat16, "cuda", gen)
    a, b = x, w.t()
    if case.startswith("b_row_major"):
        b = w.t().contiguous()
    if case.endswith("a_transposed"):
        a = x.t().contiguous().t()
    elif case == "offset":
        a = randn((M, K + 1), torch.bfloat16, "cuda", gen)[:, 1:]
    elif case == "b_row_major_offset":  # rows 97 elements apart, 2 bytes off 16
        b = randn((K, N + 1), torch.bfloat16, "cuda", gen)[:, 1:]
    assert torch_gemm.explain(a, b, kernel="decode_sm80")["plan"] is None  # not the N-major kernel
    with poisoned_outputs():
        out = torch_gemm.mm_tiled(a, b, kernel="decode_sm80")
    assert_close_to_reference(out, a, b)


# dx = dy·W: B is the (out, in) weight read as (K, N) with unit column stride. One and two token
# tiles and tokens past M, columns past N in a block's 64, K's tail inside a 32-row chunk, one warp
# of eight with chunks, a K long enough for every split; on sm_90 the plan's cluster and every
# forced cluster size (TORCH_GEMM_DECODE_CLUSTER) add the blocks' sums in the same order each run.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("M, N, K", [
    (1, 4096, 4096), (2, 8, 8), (5, 72, 40), (8, 1000, 4104), (9, 64, 32), (16, 2048, 28672),
    (16, 136, 1000), (3, 8192, 256), (12, 520, 8200),
])
def test_n_major_weight(M, N, K, dtype, monkeypatch):
    _needs_sm80()
    gen = generator("cuda", "decode-n-major", M, N, K)
    g, w = randn((M, K), dtype, "cuda", gen), randn((K, N), dtype, "cuda", gen)
    bias = randn((N,), dtype, "cuda", gen)
    for cluster in (None, 1, 2, 4, 8):
        if cluster is None:
            monkeypatch.delenv("TORCH_GEMM_DECODE_CLUSTER", raising=False)
        else:
            monkeypatch.setenv("TORCH_GEMM_DECODE_CLUSTER", str(cluster))
        plan = torch_gemm.explain(g, w, kernel="decode_sm80")["plan"]
        assert plan is not None, "the N-major kernel's layout, not gemv's"
        if torch.cuda.get_device_capability() == (9, 0) and cluster is not None:
            assert plan["cluster"] <= cluster
        with poisoned_outputs():
            out = torch_gemm.mm_tiled(g, w, kernel="decode_sm80")
            assert_close_to_reference(out, g, w)
            assert torch.equal(out, torch_gemm.mm_tiled(g, w, kernel="decode_sm80"))
            with_bias = torch_gemm.linear_tiled(g, w.t(), bias, kernel="decode_sm80")
            assert_close_to_reference(with_bias, g, w, bias)


def test_n_major_weight_batched_and_strided():
    """A batch of N-major weights whose rows are strided past N."""
    _needs_sm80()
    gen = generator("cuda", "decode-n-major-bmm")
    g = randn((3, 6, 2048), torch.bfloat16, "cuda", gen)
    w = randn((3, 2048, 1032), torch.bfloat16, "cuda", gen)[:, :, :1024]
    assert torch_gemm.explain(g, w, kernel="decode_sm80")["plan"] is not None
    out = torch_gemm.bmm_tiled(g, w, kernel="decode_sm80")
    for z in range(3):
        assert_close_to_reference(out[z], g[z], w[z])
    assert torch.equal(out, torch_gemm.bmm_tiled(g, w, kernel="decode_sm80"))


# 3 x 32 blocks of a short K stream unsplit; 2 x 4 blocks of K = 8192 (16 KB rows) split K across
# blocks on any GPU of 32 SMs or more, and the second kernel adds their sums in a fixed order.
@pytest.mark.parametrize("batch, M, N, K", [(3, 8, 512, 2048), (2, 8, 64, 8192)])
def test_batched_and_deterministic(batch, M, N, K):
    _needs_sm80()
    gen = generator("cuda", "decode-bmm", batch, N, K)
    x, w = randn((batch, M, K), torch.bfloat16, "cuda", gen), randn((batch, N, K), torch.bfloat16, "cuda", gen)
    first = torch_gemm.bmm_tiled(x, w.transpose(1, 2), kernel="decode_sm80")
    for z in range(batch):
        assert_close_to_reference(first[z], x[z], w[z].t())
    again = torch_gemm.bmm_tiled(x, w.transpose(1, 2), kernel="decode_sm80")
    assert torch.equal(first, again)


# auto on an H100/H200 (132 SMs) hands a few rows to another plan than decode_sm80's unsplit one,
# each run with a bias against the float64 reference, the same bits each run: decode_sm80's K split
# for up to 4 rows where it evens out the rounds of more 16-column blocks than one round holds (320
# blocks, K = 11008: 4 splits, the bias through the second kernel); wgmma_sm90's split 64x128 tiles
# against a big weight (kWgmmaOverDecode: 9 and 16 rows of 8192 x 8192, 2^26 elements).
@pytest.mark.parametrize("M, N, K, kernel, rule", [
    (1, 5120, 11008, "decode_sm80", "even out the rounds"),
    (4, 5120, 11008, "decode_sm80", "even out the rounds"),
    (9, 8192, 8192, "wgmma_sm90", "big weight"),
    (16, 8192, 8192, "wgmma_sm90", "big weight"),
])
def test_auto_decode_rules_run(M, N, K, kernel, rule):
    _needs_sm80()
    gen = generator("cuda", "decode-rules", M, N, K)
    x, w = randn((M, K), torch.bfloat16, "cuda", gen), randn((N, K), torch.bfloat16, "cuda", gen)
    bias = randn((N,), torch.bfloat16, "cuda", gen)
    why = torch_gemm.explain(x, w.t())
    if rule not in why["reason"]:
        pytest.skip(f"auto takes {why['kernel']} here (this GPU's SMs or build)")
    assert why["kernel"] == kernel
    with poisoned_outputs():
        out = torch_gemm.linear_tiled(x, w, bias)
    assert_close_to_reference(out, x, w.t(), bias)
    assert torch.equal(out, torch_gemm.linear_tiled(x, w, bias))


def test_empty_and_zero_k():
    _needs_sm80()
    x = torch.randn(4, 0, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8, 0, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(torch_gemm.mm_tiled(x, w.t(), kernel="decode_sm80"), torch.zeros(4, 8, device="cuda", dtype=torch.bfloat16))
    assert torch_gemm.mm_tiled(x[:0], w.t(), kernel="decode_sm80").shape == (0, 8)


# float32 as tf32 (m16n8k8, 4 elements a 16-byte vector, so K's tail and alignment differ from
# 16-bit): every token-tile count, K split across blocks, K a multiple of 4 but not of a 16-element
# chunk, columns past N, a pass past 64 tokens; with a bias; batched and deterministic.
@pytest.mark.parametrize("M, N, K", [
    (1, 4096, 4096), (2, 1024, 4096), (7, 17, 44), (8, 512, 2048), (9, 100, 4), (16, 1000, 4100),
    (17, 33, 96), (32, 256, 516), (33, 64, 1036), (64, 4096, 256), (65, 48, 64), (130, 31, 72),
    (3, 16, 16 * 2048), (5, 1, 8),
])
def test_tf32_linear_weight_layouts(M, N, K):
    _needs_sm80()
    gen = generator("cuda", "decode-tf32", M, N, K)
    x, w = randn((M, K), torch.float32, "cuda", gen), randn((N, K), torch.float32, "cuda", gen)
    bias = randn((N,), torch.float32, "cuda", gen)
    with tf32_allowed(True), poisoned_outputs():
        out = torch_gemm.mm_tiled(x, w.t(), kernel="decode_sm80")
        assert_close_to_reference(out, x, w.t())
        out = torch_gemm.linear_tiled(x, w, bias, kernel="decode_sm80")
        assert_close_to_reference(out, x, w.t(), bias)


def test_tf32_batched_deterministic_and_only_where_torch_allows_it():
    _needs_sm80()
    gen = generator("cuda", "decode-tf32-bmm")
    x, w = randn((3, 8, 2048), torch.float32, "cuda", gen), randn((3, 512, 2048), torch.float32, "cuda", gen)
    with tf32_allowed(True):
        first = torch_gemm.bmm_tiled(x, w.transpose(1, 2), kernel="decode_sm80")
        for z in range(3):
            assert_close_to_reference(first[z], x[z], w[z].t())
        assert torch.equal(first, torch_gemm.bmm_tiled(x, w.transpose(1, 2), kernel="decode_sm80"))
        # An odd K (no 16-byte vectors) is computed by gemv, in float32.
        a, b = x[0, :, :2047], w[0, :, :2047].t()
        assert_close_to_reference(torch_gemm.mm_tiled(a, b, kernel="decode_sm80"), a, b)
    with tf32_allowed(False), pytest.raises(RuntimeError, match="kernel 'decode_sm80' multiplies float32 in TF32"):
        torch_gemm.mm_tiled(x[0], w[0].t(), kernel="decode_sm80")
