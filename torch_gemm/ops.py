"""Python side of the gemm ops: wrappers and fake (meta) kernels.

The CUDA/CPU kernels, the autograd formulas and the autocast rule live in C++ (csrc/ops); this
module adds the wrappers and what the dispatcher needs in Python: a fake kernel per op for
torch.compile and meta tensors.
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
# The overloads the wrappers call, looked up once: a wrapper adds one Python call to the op's own
# dispatch, and checks nothing that the C++ boundary checks.
_MM_TILED = torch.ops.gemm.mm_tiled.default
_BMM_TILED = torch.ops.gemm.bmm_tiled.default
_LINEAR_TILED = torch.ops.gemm.linear_tiled.default
_MM_TILED_ROW_SUM = torch.ops.gemm.mm_tiled_row_sum.default


def kernel_table() -> list[dict]:
    """Every kernel compiled into this build, as dicts with ``name``, ``device`` ("cpu" or
    "cuda"), ``dtypes`` (c10 dtype names such as "Float"; DTYPE_BY_NAME maps them to torch
    dtypes), ``min_sm`` (lowest compute capability ×10, 0 for any), ``summary``, ``tf32``
    (True where the kernel multiplies float32 as TF32 on the tensor cores, which it does only
    while torch allows TF32 for matmuls) and ``row_sum`` (True where :func:`mm_tiled_row_sum`
    sums a's rows inside the kernel rather than in a separate reduction)."""
    return [dict(row) for row in _kernel_rows()]


@functools.lru_cache(maxsize=None)
def _kernel_rows() -> tuple:
    return tuple(_C.kernel_table())


def available_kernels(
    device: Union[str, torch.device, None] = None,
    dtype: Optional[torch.dtype] = None,
    allow_tf32: Optional[bool] = None,
) -> list[str]:
    """Names accepted by ``kernel=`` for tensors on ``device`` (default: the current CUDA device
    if there is one, else the CPU), optionally only those that take ``dtype``. The first entry is
    always ``"auto"``. CUDA kernels are listed only if this build has them and the device's
    compute capability is high enough. For float32, the TF32 tensor-core kernels are listed only
    where TF32 is allowed: ``allow_tf32``, or by default torch's current
    ``torch.backends.cuda.matmul.allow_tf32``."""
    if allow_tf32 is None:
        allow_tf32 = torch.backends.cuda.matmul.allow_tf32
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
        if dtype == torch.float32 and row["tf32"] and not allow_tf32:
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
    return _MM_TILED(a, b, kernel)


def bmm_tiled(a: torch.Tensor, b: torch.Tensor, *, kernel: str = "auto") -> torch.Tensor:
    """Batched matrix product ``a[i] @ b[i]`` of 3-D tensors, as ``torch.bmm``.

    Args:
        a: ``(B, M, K)`` tensor, float32, float64, float16 or bfloat16, any strides, including
            batch stride 0 (an expanded operand) and transposed views such as ``k.transpose(1, 2)``.
        b: ``(B, K, N)`` tensor of the same dtype and on the same device.
        kernel: as for :func:`mm_tiled`; the batch runs in one launch.

    Returns:
        A new contiguous ``(B, M, N)`` tensor. Differentiable in ``a`` and ``b`` through the same
        kernels; autocast casts as for ``torch.bmm``.
    """
    return _BMM_TILED(a, b, kernel)


def linear_tiled(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, *, kernel: str = "auto"
) -> torch.Tensor:
    """``x @ weight.T + bias``, as ``torch.nn.functional.linear``, with the bias added in the
    kernel's epilogue.

    Args:
        x: ``(..., K)`` tensor (any number of leading dimensions, flattened into the rows of one
            product: a view where the strides allow, else a copy).
        weight: ``(N, K)`` tensor, as ``nn.Linear`` stores it; read transposed through its
            strides, never copied.
        bias: optional ``(N,)`` tensor, same dtype and device, added before the one rounding to
            the output dtype.
        kernel: as for :func:`mm_tiled`.

    Returns:
        A new ``(..., N)`` tensor. Differentiable in x, weight and bias: dx = grad·W and
        dW = gradᵀ·x run through the same kernels, db = grad summed over the leading dimensions.
    """
    return _LINEAR_TILED(x, weight, bias, kernel)


def mm_tiled_row_sum(a: torch.Tensor, b: torch.Tensor, *, kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """``(a @ b, a.sum(1))`` in one call: with ``a = grad.mT`` and ``b = x``, the weight and bias
    gradients of a linear layer.

    Args:
        a: ``(M, K)`` tensor, as for :func:`mm_tiled`.
        b: ``(K, N)`` tensor of the same dtype and on the same device.
        kernel: as for :func:`mm_tiled`. Kernels whose :func:`kernel_table` row has ``row_sum``
            add up a's rows from the tiles the product reads anyway (where N > 0); for the others
            the row sums are a separate reduction.

    Returns:
        The ``(M, N)`` product, as :func:`mm_tiled` returns it, and the ``(M,)`` row sums of ``a``
        in a's dtype (16-bit inputs summed in float32 and rounded once). Differentiable in ``a``
        and ``b``; autocast casts as for ``torch.mm``.
    """
    return _MM_TILED_ROW_SUM(a, b, kernel)


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
    if dtype == torch.float32 and here[0]["tf32"] and not torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError(
            f"{op}: kernel '{kernel}' multiplies float32 in TF32, which torch does not allow now; allow it with "
            "torch.backends.cuda.matmul.allow_tf32 = True (or torch.set_float32_matmul_precision('high')), "
            "or pick a CUDA-core kernel"
        )


def _check_pair(op: str, a: torch.Tensor, a_name: str, b: torch.Tensor, b_name: str) -> None:
    """check_operand_pair of csrc/ops/mm_common.cpp: supported, equal dtypes and one device."""
    for arg, t in ((a_name, a), (b_name, b)):
        torch._check(
            t.dtype in _DTYPE_NAMES,
            lambda: f"{op}: {arg} has unsupported dtype {_c10_name(t.dtype)}; supported dtypes are Float, Double, Half and BFloat16",
        )
    torch._check(
        a.dtype == b.dtype,
        lambda: f"{op}: {a_name} and {b_name} must have the same dtype, got {_c10_name(a.dtype)} and {_c10_name(b.dtype)}",
    )
    torch._check(
        a.device == b.device,
        lambda: f"{op}: {a_name} and {b_name} must be on the same device, got {a.device} and {b.device}",
    )


def _check_dim(op: str, t: torch.Tensor, name: str, dim: int) -> None:
    torch._check(t.dim() == dim, lambda: f"{op}: {name} must be a {dim}-D tensor, got a {t.dim()}-D tensor of shape {list(t.shape)}")


@torch.library.register_fake("gemm::mm_tiled")
def _mm_tiled_fake(a: torch.Tensor, b: torch.Tensor, kernel: str = "auto") -> torch.Tensor:
    _check_mm_args("gemm::mm_tiled", a, b)
    _check_kernel_name("gemm::mm_tiled", kernel, a.device, a.dtype)
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.register_fake("gemm::mm_tiled_row_sum")
def _mm_tiled_row_sum_fake(a: torch.Tensor, b: torch.Tensor, kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    _check_mm_args("gemm::mm_tiled_row_sum", a, b)
    _check_kernel_name("gemm::mm_tiled_row_sum", kernel, a.device, a.dtype)
    return a.new_empty((a.shape[0], b.shape[1])), a.new_empty((a.shape[0],))


@torch.library.register_fake("gemm::bmm_tiled")
def _bmm_tiled_fake(a: torch.Tensor, b: torch.Tensor, kernel: str = "auto") -> torch.Tensor:
    op = "gemm::bmm_tiled"
    _check_dim(op, a, "a", 3)
    _check_dim(op, b, "b", 3)
    torch._check(
        a.shape[0] == b.shape[0],
        lambda: f"{op}: batch sizes differ: a is {list(a.shape)} and b is {list(b.shape)} (a.size(0) must equal b.size(0))",
    )
    torch._check(
        a.shape[2] == b.shape[1],
        lambda: f"{op}: inner dimensions differ: a is {list(a.shape)} and b is {list(b.shape)} (a.size(2) must equal b.size(1))",
    )
    _check_pair(op, a, "a", b, "b")
    _check_kernel_name(op, kernel, a.device, a.dtype)
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))


@torch.library.register_fake("gemm::linear_tiled")
def _linear_tiled_fake(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, kernel: str = "auto"
) -> torch.Tensor:
    op = "gemm::linear_tiled"
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least 1 dimension, got a 0-D tensor")
    _check_dim(op, weight, "weight", 2)
    torch._check(
        x.shape[-1] == weight.shape[1],
        lambda: f"{op}: x's last dimension must equal weight.size(1) (weight is (out_features, in_features)), "
        f"got x of shape {list(x.shape)} and weight of shape {list(weight.shape)}",
    )
    _check_pair(op, x, "x", weight, "weight")
    if bias is not None:
        _check_pair(op, x, "x", bias, "bias")
        torch._check(
            bias.dim() == 1 and bias.shape[0] == weight.shape[0],
            lambda: f"{op}: bias must be a 1-D tensor of weight.size(0) = {weight.shape[0]} elements, got shape {list(bias.shape)}",
        )
    _check_kernel_name(op, kernel, x.device, x.dtype)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))
