"""Shared helpers for the torch_gemm tests: devices, kernels, operands in every layout, the
float64 reference and the error budget (DESIGN §5)."""

from __future__ import annotations

import math
import os
import random
import zlib

import pytest
import torch

import torch_gemm

HAS_CUDA = torch.cuda.is_available()
BUILT_WITH_CUDA = torch_gemm._C.built_with_cuda()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
requires_two_gpus = pytest.mark.skipif(
    not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA devices"
)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
LAYOUTS = ["contiguous", "a_t", "b_t", "both_t", "sliced"]

# Fresh inputs every session, reproducible on demand: the seed is printed in pytest's header.
SEED = int(os.environ.get("TORCH_GEMM_TEST_SEED", random.SystemRandom().randrange(2**31)))


def table_kernels(device: str) -> list[str]:
    """Kernels this build has for a device type ("auto" first), without needing the device
    itself, so CUDA cases are collected (and skipped) on machines without a GPU."""
    return ["auto"] + [row["name"] for row in torch_gemm.kernel_table() if row["device"] == device]


def kernel_dtypes(name: str, device: str) -> list[torch.dtype]:
    if name == "auto":
        return DTYPES
    names = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16, "BFloat16": torch.bfloat16}
    for row in torch_gemm.kernel_table():
        if row["name"] == name and row["device"] == device:
            return [names[d] for d in row["dtypes"]]
    return []


def device_params(devices=("cpu", "cuda")):
    """pytest params over devices, CUDA ones marked to skip without a GPU."""
    return [pytest.param(d, marks=requires_cuda if d == "cuda" else (), id=d) for d in devices]


def kernel_dtype_params(devices=("cpu", "cuda")):
    """(device, kernel, dtype) for every kernel of the build and every dtype it takes."""
    params = []
    for device in devices:
        if device == "cuda" and not BUILT_WITH_CUDA:
            continue
        for kernel in table_kernels(device):
            for dtype in kernel_dtypes(kernel, device):
                params.append(
                    pytest.param(device, kernel, dtype, marks=requires_cuda if device == "cuda" else (),
                                 id=f"{device}-{kernel}-{str(dtype).removeprefix('torch.')}")
                )
    return params


def generator(device: str, *salt) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed((SEED + zlib.crc32(repr(salt).encode())) % (2**63))
    return g


def randn(shape, dtype, device, gen) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.float32, device=device, generator=gen).to(dtype)


def make_operands(M: int, N: int, K: int, layout: str, dtype: torch.dtype, device: str, gen):
    """a (M, K) and b (K, N) as views in the given layout: row-major, transposed views of
    row-major storage, or slices of larger tensors at an odd storage offset."""
    if layout == "sliced":
        big_a = randn((M + 3, K + 5), dtype, device, gen)
        big_b = randn((K + 2, N + 7), dtype, device, gen)
        # Column offsets 3 and 5 make the storage offsets odd (no 8- or 16-byte alignment) and
        # the row strides K + 5 and N + 7 are not the logical widths.
        return big_a[:M, 3 : K + 3], big_b[:K, 5 : N + 5]
    a_t = layout in ("a_t", "both_t")
    b_t = layout in ("b_t", "both_t")
    a = randn((K, M), dtype, device, gen).t() if a_t else randn((M, K), dtype, device, gen)
    b = randn((N, K), dtype, device, gen).t() if b_t else randn((K, N), dtype, device, gen)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float64 on the same (already rounded) inputs."""
    return a.double() @ b.double()


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    denom = ref.norm().item()
    num = (out - ref).norm().item()
    if denom == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / denom


def poison_allocator(numel: int, dtype: torch.dtype, device: str) -> None:
    """Leaves a NaN-filled block of the output's size in the allocator's cache, so an output
    element that the kernel fails to write is very likely to read back as NaN."""
    if numel > 0:
        junk = torch.full((numel,), float("nan"), dtype=dtype, device=device)
        del junk


def assert_close_to_reference(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """DESIGN §5: fp64 < 1e-12, fp32 < 1e-5, 16-bit within 2x of torch.mm's own error."""
    M, N = a.shape[0], b.shape[1]
    assert out.shape == (M, N)
    assert out.dtype == a.dtype and out.device == a.device
    assert out.is_contiguous()
    assert not torch.isnan(out).any(), "NaN in output (unwritten element or bad arithmetic)"
    ref = reference(a, b)
    err = rel_err(out, ref)
    if a.dtype == torch.float64:
        tol = 1e-12
    elif a.dtype == torch.float32:
        tol = 1e-5
    else:
        tol = max(2.0 * rel_err(torch.mm(a, b), ref), 1e-6)
    assert err <= tol, f"rel_err {err:.3e} > {tol:.3e} for {tuple(a.shape)}@{tuple(b.shape)} {a.dtype}"
