"""Python side of the gemm ops: wrappers, fake (meta) kernels and autograd formulas.

The CUDA/CPU kernels and the autocast rule live in C++ (csrc/ops); this module adds what the
dispatcher needs in Python: a fake kernel per op for torch.compile and meta tensors, and an
autograd formula per op composed from the same op, so the backward runs through our kernels.
"""

from __future__ import annotations

from typing import Optional, Union

import functools

import torch

from torch_gemm import _C

# The dtype names of kernel_table() and of the C++ messages (c10's), and the dtypes they stand for.
DTYPE_BY_NAME = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16, "BFloat16": torch.bfloat16}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPE_BY_NAME.items()}
# c10's names of the dtypes we reject, for messages that match the C++ kernels' word for word.
_C10_NAMES = {torch.int8: "Char", torch.uint8: "Byte", torch.int16: "Short", torch.int32: "Int",
              torch.int64: "Long", torch.bool: "Bool", torch.complex64: "ComplexFloat",
              torch.complex128: "ComplexDouble", torch.complex32: "ComplexHalf"}
_ALIASES = {"smem": "smem32"}


def kernel_table() -> list[dict]:
    """Every kernel compiled into this build, as dicts with ``name``, ``device`` ("cpu" or
    "cuda"), ``dtypes`` (c10 dtype names such as "Float"; DTYPE_BY_NAME maps them to torch
    dtypes), ``min_sm`` (lowest compute capability ×10, 0 for any) and ``summary``."""
    return [dict(row) for row in _kernel_rows()]


@functools.lru_cache(maxsize=None)
def _kernel_rows() -> tuple:
    return tuple(_C.kernel_table())


def available_kernels(
    device: Union[str, torch.device, None] = None, dtype: Optional[torch.dtype] = None
) -> list[str]:
    """Names accepted by ``kernel=`` for tensors on ``device`` (default: the current CUDA device
    if there is one, else the CPU), optionally only those that take ``dtype``. The first entry is
    always ``"auto"``. CUDA kernels are listed only if this build has them and the device's
    compute capability is high enough."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    sm = 0
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return []
        major, minor = torch.cuda.get_device_capability(device)
        sm = major * 10 + minor
    names = ["auto"]
    for row in _kernel_rows():
        if row["device"] != device.type or row["min_sm"] > sm:
            continue
        if dtype is not None and _DTYPE_NAMES.get(dtype) not in row["dtypes"]:
            continue
        names.append(row["name"])
    return names


def mm_tiled(a: torch.Tensor, b: torch.Tensor, *, kernel: str = "auto") -> torch.Tensor:
    """Matrix product ``a @ b`` of 2-D tensors through torch_gemm's kernels.

    Args:
        a: ``(M, K)`` tensor, float32, float64, float16 or bfloat16, any strides (transposed and
            sliced views are read in place, never copied).
        b: ``(K, N)`` tensor of the same dtype and on the same device.
        kernel: which kernel to run: ``"auto"`` (the fastest for dtype, device and shape) or a
            name from :func:`available_kernels`.

    Returns:
        A new contiguous ``(M, N)`` tensor. 16-bit inputs are accumulated in float32. Under
        ``torch.autocast`` the inputs are cast as for ``torch.mm``. Differentiable in ``a`` and
        ``b``; the backward runs through the same kernel.
    """
    return torch.ops.gemm.mm_tiled.default(a, b, kernel)


# ---------------------------------------------------------------------------------------------
# Fake kernel: shapes, dtype and device of the result without computing it. Mirrors the checks
# of csrc/ops/mm_common.cpp and csrc/ops/kernel_registry.h so that bad calls fail the same way
# while tracing as when they run.


def _c10_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype) or _C10_NAMES.get(dtype) or str(dtype).removeprefix("torch.")


def _check_mm_args(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    torch._check(a.dim() == 2, lambda: f"{op}: a must be a 2-D tensor, got a {a.dim()}-D tensor of shape {list(a.shape)}")
    torch._check(b.dim() == 2, lambda: f"{op}: b must be a 2-D tensor, got a {b.dim()}-D tensor of shape {list(b.shape)}")
    torch._check(
        a.shape[1] == b.shape[0],
        lambda: f"{op}: inner dimensions differ: a is {list(a.shape)} and b is {list(b.shape)} "
        "(a.size(1) must equal b.size(0))",
    )
    for arg, t in (("a", a), ("b", b)):
        torch._check(
            t.dtype in _DTYPE_NAMES,
            lambda: f"{op}: {arg} has unsupported dtype {_c10_name(t.dtype)}; supported dtypes are Float, Double, Half and BFloat16",
        )
    torch._check(
        a.dtype == b.dtype,
        lambda: f"{op}: a and b must have the same dtype, got {_c10_name(a.dtype)} and {_c10_name(b.dtype)}",
    )
    torch._check(a.device == b.device, lambda: f"{op}: a and b must be on the same device, got {a.device} and {b.device}")


def _check_kernel_name(op: str, kernel: str, device: torch.device, dtype: torch.dtype) -> None:
    """The name and dtype checks of find_kernel, for the device the traced tensors stand for
    (meta tensors themselves run no kernel and take any name). The architecture check stays
    with the real kernel."""
    if device.type == "meta" or kernel == "auto":
        return
    name = _ALIASES.get(kernel, kernel)
    rows = [r for r in _kernel_rows() if r["name"] == name]
    here = [r for r in rows if r["device"] == device.type]
    if not here:
        offered = ", ".join(["auto"] + [r["name"] for r in _kernel_rows() if r["device"] == device.type])
        elsewhere = ", ".join(r["device"] for r in rows)
        raise RuntimeError(
            f"{op}: kernel '{kernel}' is not available for {device.type} tensors (it runs on {elsewhere}); "
            f"kernels for {device.type}: {offered}" if rows else
            f"{op}: unknown kernel '{kernel}'; kernels for {device.type}: {offered}"
            + ("" if _C.built_with_cuda() else " (this build of torch_gemm has no CUDA kernels)")
        )
    takes = here[0]["dtypes"]
    if _DTYPE_NAMES[dtype] not in takes:
        raise RuntimeError(
            f"{op}: kernel '{kernel}' does not support dtype {_DTYPE_NAMES[dtype]} (it takes {', '.join(takes)}); "
            f"kernels for {device.type} that do: "
            + ", ".join(["auto"] + [r["name"] for r in _kernel_rows()
                                    if r["device"] == device.type and _DTYPE_NAMES[dtype] in r["dtypes"]])
        )


@torch.library.register_fake("gemm::mm_tiled")
def _mm_tiled_fake(a: torch.Tensor, b: torch.Tensor, kernel: str = "auto") -> torch.Tensor:
    _check_mm_args("gemm::mm_tiled", a, b)
    _check_kernel_name("gemm::mm_tiled", kernel, a.device, a.dtype)
    return a.new_empty((a.shape[0], b.shape[1]))


# ---------------------------------------------------------------------------------------------
# Autograd: C = A·B gives dA = dC·Bᵀ and dB = Aᵀ·dC, through mm_tiled itself with the transposes
# passed as strided views (no copies). Only the gradients that are needed are computed, and only
# the tensors those need are saved. The formula is built from the op, so double backward works.


def _mm_tiled_setup_context(ctx, inputs, output) -> None:
    a, b, ctx.kernel = inputs
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.save_for_backward(a if need_b else None, b if need_a else None)


def _mm_tiled_backward(ctx, grad: torch.Tensor):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = torch.ops.gemm.mm_tiled.default(grad, b.mT, kernel=ctx.kernel)
    if ctx.needs_input_grad[1]:
        grad_b = torch.ops.gemm.mm_tiled.default(a.mT, grad, kernel=ctx.kernel)
    return grad_a, grad_b, None


torch.library.register_autograd(
    "gemm::mm_tiled", _mm_tiled_backward, setup_context=_mm_tiled_setup_context
)
