"""Shared helpers for the torch_gemm tests: devices, kernels, operands in every layout, the
float64 reference and the error budget (docs/numerics.md)."""

from __future__ import annotations

import contextlib
import math
import os
import random
import zlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_gemm
from torch_gemm.ops import DTYPE_BY_NAME

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
    for row in torch_gemm.kernel_table():
        if row["name"] == name and row["device"] == device:
            return [DTYPE_BY_NAME[d] for d in row["dtypes"]]
    return []


def kernel_is_tf32(name: str, device: str) -> bool:
    """Whether the kernel multiplies float32 as TF32 (and so runs float32 only with TF32 on)."""
    return any(row["name"] == name and row["device"] == device and row["tf32"] for row in torch_gemm.kernel_table())


def kernel_test_dtype(name: str, device: str) -> torch.dtype:
    """float32 where the kernel takes it in IEEE arithmetic, else the first dtype it does
    (bfloat16 for the tensor-core rungs): for tests of behaviour that any dtype shows."""
    dtypes = kernel_dtypes(name, device)
    if torch.float32 in dtypes and not kernel_is_tf32(name, device):
        return torch.float32
    return next(d for d in dtypes if d != torch.float32)


def skip_unless_wgmma() -> None:
    """Skips the calling test where wgmma_sm90 cannot run: not in this build, or not an sm_90 GPU."""
    if not any(r["name"] == "wgmma_sm90" and r["device"] == "cuda" for r in torch_gemm.kernel_table()):
        pytest.skip("this build has no wgmma_sm90")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma_sm90 runs on sm_90 only")


@contextlib.contextmanager
def tf32_allowed(enabled: bool = True):
    """torch.backends.cuda.matmul.allow_tf32 set inside, for ours and torch.mm alike."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


HAS_FP32_PRECISION = hasattr(torch.backends, "fp32_precision")  # torch's newer TF32 setting (2.9)


@contextlib.contextmanager
def torch_tf32_setting(how: str):
    """TF32 for CUDA matmuls set inside one of torch's ways — "allow_tf32" / "deny_tf32" (the
    legacy flag), "precision_high" (set_float32_matmul_precision), "matmul_tf32" / "matmul_ieee"
    (torch.backends.cuda.matmul.fp32_precision), "generic_tf32" (torch.backends.fp32_precision,
    which the matmul setting inherits) — and torch's state restored after."""
    # Each setting torch keeps apart: the legacy matmul precision (which set_float32_matmul_precision
    # and allow_tf32 also write, and whose getter raises while it disagrees with the rest), the
    # generic precision, and the CUDA and oneDNN matmuls' (resolved values: an inherited one comes
    # back explicit).
    saved_legacy = torch.get_float32_matmul_precision()
    saved_generic = torch.backends.fp32_precision
    saved_matmul = torch.backends.cuda.matmul.fp32_precision
    saved_mkldnn_matmul = torch.backends.mkldnn.matmul.fp32_precision
    try:
        if how in ("allow_tf32", "deny_tf32"):
            torch.backends.cuda.matmul.allow_tf32 = how == "allow_tf32"
        elif how == "precision_high":
            torch.set_float32_matmul_precision("high")
        elif how in ("matmul_tf32", "matmul_ieee"):
            torch.backends.cuda.matmul.fp32_precision = how.split("_")[1]
        elif how == "generic_tf32":
            torch.backends.cuda.matmul.fp32_precision = "none"  # inherit, not an explicit "ieee"
            torch.backends.fp32_precision = "tf32"
        else:
            raise ValueError(f"torch_tf32_setting: unknown way {how!r}")
        yield
    finally:
        torch.set_float32_matmul_precision(saved_legacy)
        torch.backends.fp32_precision = saved_generic
        torch.backends.cuda.matmul.fp32_precision = saved_matmul
        torch.backends.mkldnn.matmul.fp32_precision = saved_mkldnn_matmul


def device_params(devices=("cpu", "cuda")):
    """pytest params over devices, CUDA ones marked to skip without a GPU."""
    return [pytest.param(d, marks=requires_cuda if d == "cuda" else (), id=d) for d in devices]


def kernel_dtype_params(devices=("cpu", "cuda")):
    """(device, kernel, dtype) for every kernel of the build and every dtype it takes. A TF32
    kernel's float32 case is marked ``tf32`` (id "...-tf32"): conftest turns TF32 on for it."""
    params = []
    for device in devices:
        if device == "cuda" and not BUILT_WITH_CUDA:
            continue
        for kernel in table_kernels(device):
            for dtype in kernel_dtypes(kernel, device):
                marks = [requires_cuda] if device == "cuda" else []
                name = str(dtype).removeprefix("torch.")
                if dtype == torch.float32 and kernel_is_tf32(kernel, device):
                    marks.append(pytest.mark.tf32)
                    name = "tf32"
                params.append(pytest.param(device, kernel, dtype, marks=marks, id=f"{device}-{kernel}-{name}"))
    return params


def generator(device: str, *salt) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed((SEED + zlib.crc32(repr(salt).encode())) % (2**63))
    return g


def randn(shape, dtype, device, gen) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.float32, device=device, generator=gen).to(dtype)


def strided_operand(rows: int, cols: int, transposed: bool, offset: bool, gen, dtype: torch.dtype,
                    device: str, batch: tuple = ()) -> torch.Tensor:
    """A (*batch, rows, cols) view: of row-major storage, or the transposed view of a
    (cols, rows) one; with `offset`, starting 3 elements into each row of wider storage, which
    breaks 16-byte alignment of the base pointer and of the leading dimension."""
    pad = 3 if offset else 0
    shape = (*batch, cols, rows + pad) if transposed else (*batch, rows, cols + pad)
    base = randn(shape, dtype, device, gen)[..., pad:]
    return base.mT if transposed else base


def make_operands(M: int, N: int, K: int, layout: str, dtype: torch.dtype, device: str, gen,
                  batch: tuple = ()):
    """a (*batch, M, K) and b (*batch, K, N) as views in the given layout, each matrix laid out
    alike: row-major, transposed views of row-major storage, or slices of larger tensors at an
    odd storage offset."""
    if layout == "sliced":
        big_a = randn((*batch, M + 3, K + 5), dtype, device, gen)
        big_b = randn((*batch, K + 2, N + 7), dtype, device, gen)
        # Column offsets 3 and 5 make the storage offsets odd (no 8- or 16-byte alignment) and
        # the row strides K + 5 and N + 7 are not the logical widths.
        return big_a[..., :M, 3 : K + 3], big_b[..., :K, 5 : N + 5]
    a_t = layout in ("a_t", "both_t")
    b_t = layout in ("b_t", "both_t")
    a = randn((*batch, K, M), dtype, device, gen).mT if a_t else randn((*batch, M, K), dtype, device, gen)
    b = randn((*batch, N, K), dtype, device, gen).mT if b_t else randn((*batch, K, N), dtype, device, gen)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor, bias=None) -> torch.Tensor:
    """a @ b (+ bias) in float64 on the same (already rounded) inputs."""
    out = a.double() @ b.double()
    return out if bias is None else out + bias.double()


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    denom = ref.norm().item()
    num = (out - ref).norm().item()
    if denom == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / denom


@contextlib.contextmanager
def poisoned_outputs():
    """Inside, torch.empty (and so the op's output) is filled with NaN (integers: their max),
    torch's deterministic-mode guarantee, so an element the kernel fails to write reads back as
    NaN. warn_only: the torch.mm reference calls must not raise."""
    was, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)


def tf32_in_effect(t: torch.Tensor) -> bool:
    """Whether a float32 product on this tensor's device may be computed in TF32 now, read as the
    ops read it (torch's legacy allow_tf32 raises once the newer fp32_precision has been set)."""
    return t.dtype == torch.float32 and t.is_cuda and torch_gemm.ops._torch_allows_tf32()


def round_to_tf32(t: torch.Tensor, truncate: bool = False) -> torch.Tensor:
    """float32 rounded to tf32 (10 mantissa bits): to nearest with ties away from zero, as
    cvt.rna.tf32.f32 does (half of the dropped 13 bits' range added to the magnitude, then cut),
    or truncated, as the tensor cores read a float32 operand straight from memory."""
    bits = t.contiguous().view(torch.int32)
    return ((bits if truncate else bits + 0x1000) & ~0x1FFF).view(torch.float32).view(t.shape)


# A TF32 product's operand error: each operand keeps 10 of float32's 23 mantissa bits (the tensor
# cores drop the rest), so a product a·b is off by less than 2·2^-10 of |a·b|.
_TF32_PRODUCT_ERR = 2.0**-9

# 3xTF32 (wgmma_sm90_3xtf32) below K = 256: its dropped small·small term and the tensor cores'
# truncating sums within a k-tile are not yet under the float32 accumulation's own bound, and it
# may be off by 2^-20 of Σ|a·b| more (8 units of float32's last place). From K = 256 on it is held
# to SGEMM's bound (docs/numerics.md).
_THREE_TF32_SMALL_K_ERR = 2.0**-20
THREE_TF32_FULL_BOUND_K = 256

# The kernel= of the running test, from its `kernel` parameter (conftest.py sets it), for bounds
# that depend on the kernel where a check is not told it.
current_kernel: str | None = None


def three_tf32_in_effect(a: torch.Tensor, b: torch.Tensor, kernel: str | None = None) -> bool:
    """Whether the float32 product a @ b runs as 3xTF32: kernel="wgmma_sm90_3xtf32", or "auto"
    where torch_gemm.explain says auto takes it (float32 precision "3xtf32", TF32 off, a shape it
    takes). ``kernel``: the call's, else the running test's."""
    kernel = kernel if kernel is not None else current_kernel
    if a.dtype != torch.float32 or not a.is_cuda or tf32_in_effect(a):
        return False
    if kernel in (None, "auto"):
        return torch_gemm.get_fp32_precision() == "3xtf32" and torch_gemm.explain(a, b)["kernel"] == "wgmma_sm90_3xtf32"
    return kernel == "wgmma_sm90_3xtf32"


# Unit roundoff of the accumulation (fp32 for every 16-bit and fp32 input, fp64 for fp64), and
# the spacing of the output dtype near 1 (its rounding of the result).
_ACC_UNIT = {torch.float64: 2.0**-53}
_OUT_EPS = {torch.float64: 2.0**-52, torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}


def error_scale(ref: torch.Tensor, summands: torch.Tensor, K: int) -> float:
    """The denominator of the fp32/fp64 norm error: ‖ref‖, or the size of the summands where the
    dot products cancel. Rounding error scales with Σ|a_ik·b_kj| (the standard GEMM bound is
    γ_K·|A||B|), so for ill-conditioned data such as stride-0 expanded operands, where every
    output is one dot product that may nearly cancel, ‖ref‖ alone would call correct rounding
    wrong. ‖|A||B|‖/√K is about 0.64·‖ref‖ for random dense data, so there ‖ref‖ decides and the
    bound is as strict as a plain relative error."""
    return max(ref.norm().item(), summands.norm().item() / math.sqrt(max(K, 1)))


def _rounding_bound(dtype: torch.dtype, ref: torch.Tensor, summands: torch.Tensor, K: int) -> torch.Tensor:
    """The per-element bound of an exact-arithmetic product's rounding: the output's rounding,
    eps·(|ref| + tiny), plus the accumulator's, 3·√K·u·(|A|·|B|)."""
    return (_OUT_EPS[dtype] * (ref.abs() + torch.finfo(dtype).tiny)
            + 3.0 * math.sqrt(max(K, 1)) * _ACC_UNIT.get(dtype, 2.0**-24) * summands)


def assert_close_to_reference(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias=None,
                              kernel: str | None = None) -> None:
    """docs/numerics.md's two checks. On the whole matrix — fp64 < 1e-12, fp32 < 1e-5 (relative
    to error_scale), 16-bit and TF32 (float32 on CUDA while torch allows TF32) within 2x of
    torch.mm's own error on the same inputs, with the same TF32 setting — and, so that one wrong
    element or edge row cannot hide in the rounding of the rest, on every element:
    |out - ref| <= eps(out dtype)·(|ref| + tiny) + 3·√K·u(accumulator)·(|A|·|B|), where
    eps·tiny is the output dtype's subnormal spacing (fp16 results under 6e-5 round absolutely),
    and TF32 adds its operand truncation, 2^-9·(|A|·|B|); 3xTF32 below K = 256 (kernel: the
    call's kernel=, else the running test's), 2^-20·(|A|·|B|).
    With a bias (linear_tiled's epilogue) the reference is a @ b + bias and torch's own error is
    that of torch.addmm."""
    M, N, K = a.shape[0], b.shape[1], a.shape[1]
    assert out.shape == (M, N)
    assert out.dtype == a.dtype and out.device == a.device
    assert out.is_contiguous()
    assert not torch.isnan(out).any(), "NaN in output (unwritten element or bad arithmetic)"
    ref = reference(a, b, bias)
    summands = a.double().abs() @ b.double().abs()
    if bias is not None:
        summands = summands + bias.double().abs()
    diff = (out.double() - ref).abs()
    tf32 = tf32_in_effect(a)
    if a.dtype == torch.float64 or (a.dtype == torch.float32 and not tf32):
        tol = 1e-12 if a.dtype == torch.float64 else 1e-5
        scale = error_scale(ref, summands, K)
        total = diff.norm().item()
        err = 0.0 if total == 0.0 else (total / scale if scale > 0 else math.inf)
    else:
        err = rel_err(out, ref)
        ours_torch = torch.mm(a, b) if bias is None else torch.addmm(bias, a, b)
        own = rel_err(ours_torch, ref)
        if tf32:
            # torch.mm may not use TF32 at all (small shapes), and with few outputs two errors
            # differ by more than 2x by chance: the error allowed is also that of an exact product
            # of the operands as a TF32 kernel may read them, both rounded to nearest or one of
            # them truncated (the tensor cores drop the low bits of the operand they read straight
            # from memory: B, or A where wgmma_sm90 runs the transposed product Bᵀ·Aᵀ).
            own = max(own, rel_err(reference(round_to_tf32(a), round_to_tf32(b), bias), ref),
                      rel_err(reference(round_to_tf32(a), round_to_tf32(b, truncate=True), bias), ref),
                      rel_err(reference(round_to_tf32(a, truncate=True), round_to_tf32(b), bias), ref))
        tol = max(2.0 * own, 1e-6)
    assert err <= tol, f"rel_err {err:.3e} > {tol:.3e} for {tuple(a.shape)}@{tuple(b.shape)} {a.dtype}"
    bound = _rounding_bound(a.dtype, ref, summands, K)
    if tf32:
        bound = bound + _TF32_PRODUCT_ERR * summands
    elif K < THREE_TF32_FULL_BOUND_K and three_tf32_in_effect(a, b, kernel):
        bound = bound + _THREE_TF32_SMALL_K_ERR * summands
    worst = (diff - bound).argmax() if diff.numel() else None
    if worst is not None and diff.flatten()[worst] > bound.flatten()[worst]:
        i, j = divmod(worst.item(), N)
        raise AssertionError(
            f"element ({i}, {j}) of {tuple(a.shape)}@{tuple(b.shape)} {a.dtype}: |out - ref| = "
            f"{diff[i, j].item():.3e} > bound {bound[i, j].item():.3e} (out {out[i, j].item()}, ref {ref[i, j].item()})"
        )


def assert_batch_close_to_reference(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """assert_close_to_reference's per-element bound over a batch of products too many to check one
    at a time (float64, or float32 with TF32 off: the bound has no TF32 or 3xTF32 term)."""
    assert a.dtype == torch.float64 or (a.dtype == torch.float32 and not tf32_in_effect(a))
    K = a.shape[-1]
    ref = torch.bmm(a.double(), b.double())
    assert out.shape == ref.shape and out.dtype == a.dtype
    assert not torch.isnan(out).any(), "NaN in output (unwritten element or bad arithmetic)"
    summands = torch.bmm(a.double().abs(), b.double().abs())
    bound = _rounding_bound(a.dtype, ref, summands, K)
    diff = (out.double() - ref).abs()
    worst = (diff - bound).argmax() if diff.numel() else None
    if worst is not None and diff.flatten()[worst] > bound.flatten()[worst]:
        index = tuple(int(i) for i in torch.unravel_index(worst, diff.shape))
        raise AssertionError(f"element {index} of {tuple(a.shape)}@{tuple(b.shape)} {a.dtype}: |out - ref| = "
                             f"{diff[index].item():.3e} > bound {bound[index].item():.3e}")


def assert_row_sum_close_to_reference(row_sum: torch.Tensor, a: torch.Tensor) -> None:
    """a.sum(1) as mm_tiled_row_sum promises it: (M,), a's dtype and device, contiguous, and on
    every element one rounding to a's dtype of a sum kept in the accumulator (fp32 for float32
    and the 16-bit dtypes, fp64 for float64):
    |out - ref| <= acc + ½·eps(dtype)·(|ref| + acc + tiny), where acc = 3·√K·u(accumulator)·Σ_k|a_mk|
    bounds the accumulation's error (as in assert_close_to_reference) and the rest is the final
    rounding, half an ulp of the accumulated sum (half the subnormal spacing near zero). Partial
    sums rounded to a 16-bit dtype, or float32 summands rounded to TF32, do not fit in it."""
    M, K = a.shape
    assert row_sum.shape == (M,)
    assert row_sum.dtype == a.dtype and row_sum.device == a.device
    assert row_sum.is_contiguous()
    assert not torch.isnan(row_sum).any(), "NaN in row sum (unwritten element or bad arithmetic)"
    ref = a.double().sum(1)
    acc = 3.0 * math.sqrt(max(K, 1)) * _ACC_UNIT.get(a.dtype, 2.0**-24) * a.double().abs().sum(1)
    bound = acc + 0.5 * _OUT_EPS[a.dtype] * (ref.abs() + acc + torch.finfo(a.dtype).tiny)
    diff = (row_sum.double() - ref).abs()
    if diff.numel() and (diff > bound).any():
        m = (diff - bound).argmax().item()
        raise AssertionError(
            f"row sum {m} of a {tuple(a.shape)} {a.dtype}: |out - ref| = {diff[m].item():.3e} > bound "
            f"{bound[m].item():.3e} (out {row_sum[m].item()}, ref {ref[m].item()})"
        )


class RecordGemmOps(TorchDispatchMode):
    """The gemm ops that reach the kernels, by overload name ("mm_tiled.default")."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "gemm":
            self.names.append(func.__name__)
        return func(*args, **(kwargs or {}))
