"""decode_sm80: the tensor-core decode rung's own paths — token tiles of 1, 2, 4 and 8, K split
inside a block and across blocks (with the second kernel's reduction), the K tail, columns past
N, passes over tokens past 64, the batch, the bias, and the fallback to gemv for layouts its
16-byte loads cannot take — each against the float64 reference."""

from __future__ import annotations

import pytest
import torch

import torch_gemm
from gemm_testing import (
    assert_close_to_reference, generator, poisoned_outputs, randn, requires_cuda, table_kernels,
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
    (65, 48, 64), (130, 31, 72), (3, 16, 32 * 2048), (5, 1, 16),
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


@pytest.mark.parametrize("case", ["odd_k", "a_transposed", "b_row_major", "offset"])
def test_layouts_that_fall_back_to_gemv(case):
    """Operands that are not contiguous, aligned 16-byte vectors along K are computed by gemv."""
    _needs_sm80()
    gen = generator("cuda", "decode-fallback", case)
    M, N, K = 4, 96, 1000 if case != "odd_k" else 1001
    x, w = randn((M, K), torch.bfloat16, "cuda", gen), randn((N, K), torch.bfloat16, "cuda", gen)
    a, b = x, w.t()
    if case == "a_transposed":
        a = x.t().contiguous().t()
    elif case == "b_row_major":
        b = w.t().contiguous()
    elif case == "offset":
        a = randn((M, K + 1), torch.bfloat16, "cuda", gen)[:, 1:]
    with poisoned_outputs():
        out = torch_gemm.mm_tiled(a, b, kernel="decode_sm80")
    assert_close_to_reference(out, a, b)


def test_batched_and_deterministic():
    _needs_sm80()
    gen = generator("cuda", "decode-bmm")
    x, w = randn((3, 8, 2048), torch.bfloat16, "cuda", gen), randn((3, 512, 2048), torch.bfloat16, "cuda", gen)
    first = torch_gemm.bmm_tiled(x, w.transpose(1, 2), kernel="decode_sm80")
    for z in range(3):
        assert_close_to_reference(first[z], x[z], w[z].t())
    again = torch_gemm.bmm_tiled(x, w.transpose(1, 2), kernel="decode_sm80")
    assert torch.equal(first, again)  # the split's partial sums are added in a fixed order


def test_empty_and_zero_k():
    _needs_sm80()
    x = torch.randn(4, 0, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8, 0, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(torch_gemm.mm_tiled(x, w.t(), kernel="decode_sm80"), torch.zeros(4, 8, device="cuda", dtype=torch.bfloat16))
    assert torch_gemm.mm_tiled(x[:0], w.t(), kernel="decode_sm80").shape == (0, 8)
