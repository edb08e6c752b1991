"""Fuzzed correctness: kernel × dtype × random M, N, K in [0, 3000] × layouts that break
alignment, against float64. A bounded sample runs everywhere; TORCH_GEMM_FUZZ_CASES=5000 (as
scripts/gpu_check.sh sets it) runs the full sweep on a GPU. Every mismatch is a bug."""

import os
import random

import pytest
import torch

import torch_gemm
from gemm_testing import SEED, assert_close_to_reference, kernel_dtype_params, poisoned_outputs, strided_operand

LAYOUTS = ("contiguous", "a_t", "b_t", "both_t", "offset", "expanded")


def _size(rng: random.Random, limit: int) -> int:
    """Mostly small and odd, sometimes a tile edge, now and then up to the limit."""
    roll = rng.random()
    if roll < 0.1:
        return rng.choice([0, 1, 2, 3])
    if roll < 0.3:
        return max(0, min(limit, rng.choice([16, 32, 64, 128, 256]) + rng.choice([-1, 0, 1])))
    if roll < 0.9:
        return rng.randint(1, min(limit, 300))
    return rng.randint(1, limit)


def _case(rng, gen, dtype, device, limit):
    M, N, K = _size(rng, limit), _size(rng, limit), _size(rng, limit)
    layout = rng.choice(LAYOUTS)
    if layout == "expanded":
        a = torch.randn(1, K, generator=gen, device=device).to(dtype).expand(M, K)
        b = torch.randn(K, 1, generator=gen, device=device).to(dtype).expand(K, N)
    else:
        a_t = layout in ("a_t", "both_t") or (layout == "offset" and rng.random() < 0.5)
        b_t = layout in ("b_t", "both_t") or (layout == "offset" and rng.random() < 0.5)
        a = strided_operand(M, K, a_t, layout == "offset", gen, dtype, device)
        b = strided_operand(K, N, b_t, layout == "offset", gen, dtype, device)
    return (M, N, K, layout), a, b


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_fuzz(device, kernel, dtype):
    on_gpu = device == "cuda"
    total = int(os.environ.get("TORCH_GEMM_FUZZ_CASES", "0")) or (400 if on_gpu else 240)
    n_params = len(kernel_dtype_params(("cuda",) if on_gpu else ("cpu",)))
    cases = max(1, -(-total // n_params))  # rounded up: the total over all params is at least `total`
    limit = 3000 if on_gpu else 700
    rng = random.Random(f"{SEED}-{device}-{kernel}-{dtype}")
    gen = torch.Generator(device=device)
    gen.manual_seed(rng.randrange(2**62))
    failures = []
    for _ in range(cases):
        desc, a, b = _case(rng, gen, dtype, device, limit)
        try:
            with poisoned_outputs():
                out = torch_gemm.mm_tiled(a, b, kernel=kernel)
            assert_close_to_reference(out, a, b)
        except AssertionError as err:
            failures.append(f"{desc} strides a={a.stride()} b={b.stride()}: {str(err).splitlines()[0]}")
    assert not failures, f"{len(failures)}/{cases} cases wrong (seed {SEED}):\n" + "\n".join(failures[:10])
