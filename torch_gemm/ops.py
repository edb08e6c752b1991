"""Python side of the gemm ops: wrappers and fake (meta) kernels.

The CUDA/CPU kernels, the autograd formulas and the autocast rule live in C++ (csrc/ops); this
module adds the wrappers and what the dispatcher needs in Python: a fake kernel per op for
torch.compile and meta tensors.
"""

from __future__ import annotations

from typing import Optional, Union

import functools
import os

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
_LINEAR_TILED_WEIGHT_GRAD = torch.ops.gemm.linear_tiled_weight_grad.default


def kernel_table() -> list[dict]:
    """Every kernel compiled into this build, as dicts with ``name``, ``device`` ("cpu" or
    "cuda"), ``dtypes`` (c10 dtype names such as "Float"; DTYPE_BY_NAME maps them to torch
    dtypes), ``min_sm`` (lowest compute capability ×10, 0 for any), ``summary``, ``tf32``
    (True where the kernel multiplies float32 as TF32 on the tensor cores, which it does only
    while torch allows TF32 for matmuls) and ``row_sum`` (True where :func:`mm_tiled_row_sum`
    sums a's rows inside the kernel rather than in a separate reduction)."""
    return [dict(row) for row in _kernel_rows()]


def _torch_allows_tf32() -> bool:
    """Whether torch's CUDA matmuls may use TF32 now, as the C++ ops read it: from torch 2.9 its
    fp32_precision setting (the legacy allow_tf32 raises once that has been set), else the flag."""
    precision = getattr(torch.backends.cuda.matmul, "fp32_precision", None)
    if precision is not None:
        return precision == "tf32"
    return bool(torch.backends.cuda.matmul.allow_tf32)


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
    where TF32 is allowed: ``allow_tf32``, or by default whether torch's CUDA matmuls may use it
    now (``torch.backends.cuda.matmul.fp32_precision``, or ``allow_tf32`` before torch 2.9)."""
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise TypeError(f"available_kernels: dtype must be a torch.dtype or None, got {dtype!r}")
    if allow_tf32 is None:
        allow_tf32 = _torch_allows_tf32()
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


# The environment variables wgmma_sm90's launcher reads once per process (TORCH_GEMM_WGMMA_*), as
# sm90_plan's keyword arguments.
_SM90_OVERRIDES = {"shape": "TORCH_GEMM_WGMMA_SHAPE", "cluster": "TORCH_GEMM_WGMMA_CLUSTER",
                   "stream_k": "TORCH_GEMM_WGMMA_STREAM_K", "max_clusters": "TORCH_GEMM_WGMMA_MAX_CLUSTERS",
                   "store": "TORCH_GEMM_WGMMA_STORE", "tf32_plan": "TORCH_GEMM_WGMMA_TF32_PLAN"}
# The CUDA rungs as csrc/ops/cuda/mm_cuda.cpp's table has them, (dtypes, lowest compute capability
# × 10, float32 as TF32): kernel_table() lists them only in builds with the CUDA kernels, and
# explain answers for a CUDA device in any build (tests/test_heuristics.py checks the two agree).
_ANY_DTYPE = ("Float", "Double", "Half", "BFloat16")
_CUDA_KERNELS = {
    "naive": (_ANY_DTYPE, 0, False), "smem16": (_ANY_DTYPE, 0, False), "smem32": (_ANY_DTYPE, 0, False),
    "regtile": (("Float",), 0, False), "warptile": (("Float",), 0, False), "multistage": (("Float",), 80, False),
    "gemv": (_ANY_DTYPE, 0, False), "decode_sm80": (("Float", "Half", "BFloat16"), 80, True),
    "mma_sm80": (("Half", "BFloat16"), 80, False), "wgmma_sm90": (("Float", "Half", "BFloat16"), 90, True),
    "wgmma_sm90_3xtf32": (("Float",), 90, False),
}


def _positive_int(fn: str, name: str, value, *, optional: bool) -> Optional[int]:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{fn}: {name} must be a positive int, got {value!r}")
    return value


def explain(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    kernel: str = "auto",
    bias: Optional[torch.Tensor] = None,
    row_sum: bool = False,
    sm: Optional[int] = None,
    sm_count: Optional[int] = None,
    max_active_clusters: Optional[int] = None,
    allow_tf32: Optional[bool] = None,
) -> dict:
    """Which kernel ``mm_tiled(a, b)`` (``bmm_tiled`` for 3-D tensors; with ``bias``, the product of
    ``linear_tiled(a, b.mT, bias)``; with ``row_sum=True``, ``mm_tiled_row_sum``) would run, and,
    for ``wgmma_sm90``, ``multistage`` and an N-major ``decode_sm80``, how: nothing is computed.

    Args:
        a, b: the operands, on a CUDA device, the CPU or the meta device; only their shapes,
            strides, dtype and alignment are read.
        kernel: ``"auto"`` (the rule the ops follow) or a kernel name.
        sm, sm_count: the CUDA device to explain for: compute capability × 10 (90 for an
            H100/H200) and its multiprocessors. Default: ``a``'s device where it is a CUDA device;
            for CPU tensors without ``sm`` the CPU kernel; for meta tensors without ``sm`` no
            kernel (``"kernel": None``).
        max_active_clusters: pairs of blocks of wgmma_sm90 resident at once (the launcher asks
            ``cudaOccupancyMaxActiveClusters``); default ``sm_count // 2``.
        allow_tf32: default whether torch's CUDA matmuls may use TF32 now, as the ops read it.

    Returns:
        ``{"kernel", "reason", "device", "sm", "sm_count", "dtype", "op", "M", "N", "K", "batch",
        "plan"}``, ``op`` being the op the call stands for. ``plan`` is None except for
        ``wgmma_sm90`` and ``wgmma_sm90_3xtf32`` (the product over the split operands, with K's
        ``chunks`` and a workspace that counts the split operands and partial sums too), where it
        is ``torch_gemm._C.sm90_plan``'s answer: the tile, consumers,
        cluster, split_k (and split_groups), stream_k (and stream_k_turns), each operand's
        ``k_major`` and ``repack``, C's ``store`` (``"tma"``, ``"tma_transposed"`` or
        ``"registers"``), ``transposed``, ``row_sum``, the tiles, turns, resident clusters, grid and
        workspace bytes, and under ``"why"`` a sentence per decision; for ``multistage``, where it
        is ``torch_gemm._C.multistage_plan``'s answer: the tile, split_k, waves, the cost model's
        time of it and of every plan it weighed, the workspace and why; and for ``decode_sm80``
        against an N-major ``b`` (dx against a linear's weight), where ``torch_gemm._C.
        decode_n_major_plan`` answers: its token tiles, 64-column blocks, the cluster splitting K
        and whether ``auto`` prefers it. The environment's ``TORCH_GEMM_WGMMA_*``,
        ``TORCH_GEMM_MULTISTAGE_PLAN`` and ``TORCH_GEMM_DECODE_CLUSTER`` overrides are read as the
        launchers read them.
    """
    fn = "torch_gemm.explain"
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a tensor, got {type(t).__name__}")
    if not isinstance(kernel, str):
        raise TypeError(f"{fn}: kernel must be a str, got {type(kernel).__name__}")
    if not isinstance(row_sum, bool):
        raise TypeError(f"{fn}: row_sum must be a bool, got {type(row_sum).__name__}")
    if a.dim() == 3 or b.dim() == 3:
        op = "bmm_tiled"
        _check_bmm_args(fn, a, b)
        if bias is not None or row_sum:
            raise ValueError(f"{fn}: bias and row_sum go with 2-D a and b (bmm_tiled takes neither)")
        batch, M, K, N = a.shape[0], a.shape[1], a.shape[2], b.shape[2]
        b_sk = b.stride(1)
    else:
        op = "mm_tiled_row_sum" if row_sum else "linear_tiled" if bias is not None else "mm_tiled"
        _check_mm_args(fn, a, b)
        batch, (M, K), N = 1, a.shape, b.shape[1]
        b_sk = b.stride(0)
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"{fn}: bias must be a tensor or None, got {type(bias).__name__}")
        if row_sum:
            raise ValueError(f"{fn}: bias and row_sum=True together: no op takes both")
        _check_pair(fn, a, "a", bias, "bias")
        torch._check(bias.dim() == 1 and bias.shape[0] == N,
                     lambda: f"{fn}: bias must be a 1-D tensor of N = {N} elements, got shape {list(bias.shape)}")
    if sm is not None:
        _positive_int(fn, "sm", sm, optional=False)
        if sm_count is None:
            raise ValueError(f"{fn}: sm={sm} needs sm_count, the device's number of multiprocessors")
    sm_count = _positive_int(fn, "sm_count", sm_count, optional=True)
    max_active_clusters = _positive_int(fn, "max_active_clusters", max_active_clusters, optional=True)
    if allow_tf32 is None:
        allow_tf32 = _torch_allows_tf32()
    dtype = a.dtype
    answer = {"kernel": None, "reason": "", "device": a.device.type, "sm": sm, "sm_count": sm_count,
              "dtype": dtype, "op": op, "M": M, "N": N, "K": K, "batch": batch, "plan": None}

    if sm is None and a.device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(a.device)
        sm = major * 10 + minor
        if sm_count is None:
            sm_count = torch.cuda.get_device_properties(a.device).multi_processor_count
        answer.update(sm=sm, sm_count=sm_count)
    if sm is None:
        if a.device.type == "meta":
            answer["reason"] = ("meta tensors run no kernel; pass sm= and sm_count= for what a CUDA "
                                "device would run")
            return answer
        if kernel not in ("auto", "blocked"):
            if _ALIASES.get(kernel, kernel) not in _CUDA_KERNELS:
                raise ValueError(f"{fn}: unknown kernel '{kernel}'; kernels for {a.device.type}: auto, blocked")
            raise ValueError(f"{fn}: kernel '{kernel}' is not available for {a.device.type} tensors; "
                             f"kernels for {a.device.type}: auto, blocked (pass sm= and sm_count= to "
                             "explain a CUDA device)")
        answer.update(kernel="blocked", reason="the CPU's kernel: packed blocks, a vectorized "
                      "register-blocked micro-kernel, parallel over blocks of C")
        return answer

    answer["device"] = "cuda"
    with_sm90a = bool(_C.built_with_sm90a()) if _C.built_with_cuda() else True
    if kernel == "auto":
        choice = _C.auto_kernel(M, N, K, dtype=_torch_dtype_name(dtype), sm=sm, sm_count=sm_count,
                                b_stride_k=b_sk, allow_tf32=bool(allow_tf32), sm90a=with_sm90a,
                                three_tf32=_C.get_fp32_precision() == "3xtf32", batch=batch,
                                a_strides=list(a.stride()), b_strides=list(b.stride()),
                                a_address=_address(a), b_address=_address(b),
                                bias=bias is not None, row_sum=row_sum)
        answer.update(kernel=choice["kernel"], reason=choice["reason"])
    else:
        name = _ALIASES.get(kernel, kernel)
        if name not in _CUDA_KERNELS:
            raise ValueError(f"{fn}: unknown kernel '{kernel}'; kernels for cuda: "
                             + ", ".join(("auto", *_CUDA_KERNELS)))
        # What the op would refuse: a dtype the kernel does not take, a GPU below it, or TF32
        # while torch does not allow it.
        dtypes, min_sm, tf32 = _CUDA_KERNELS[name]
        if _DTYPE_NAMES.get(dtype) not in dtypes:
            raise ValueError(f"{fn}: kernel '{name}' does not support dtype {_c10_name(dtype)} "
                             f"(it takes {', '.join(dtypes)})")
        if min_sm == 90 and sm != 90:  # wgmma and TMA: sm_90a code, which no later GPU runs
            raise ValueError(f"{fn}: kernel '{name}' runs on compute capability 9.0 only, not "
                             f"{sm // 10}.{sm % 10}")
        if sm < min_sm:
            raise ValueError(f"{fn}: kernel '{name}' needs compute capability {min_sm // 10}.{min_sm % 10} "
                             f"or higher, not {sm // 10}.{sm % 10}")
        if tf32 and dtype == torch.float32 and not allow_tf32:
            raise ValueError(f"{fn}: kernel '{name}' multiplies float32 in TF32, which is not allowed "
                             "(allow_tf32=False, or torch's setting)")
        answer.update(kernel=name, reason=f"asked for by kernel='{kernel}'")
    env = {arg: os.environ.get(var) for arg, var in _SM90_OVERRIDES.items()}
    if answer["kernel"] == "wgmma_sm90_3xtf32":
        # The TF32 product over 3·K that it runs on its split operands (where it cuts K into
        # chunks, over 3·chunk_k, a batch of them: plan["chunks"], counted in plan["batch"]).
        answer["plan"] = _C.sm90_plan(M, N, K, sm_count=sm_count, batch=batch, dtype="float32",
                                      bias=bias is not None, max_active_clusters=max_active_clusters,
                                      three_tf32=True, **env)
    if answer["kernel"] == "multistage":
        answer["plan"] = _C.multistage_plan(M, N, K, sm_count=sm_count, batch=batch,
                                            plan=os.environ.get("TORCH_GEMM_MULTISTAGE_PLAN"))
    if answer["kernel"] == "decode_sm80":
        # Against an N-major weight (dx): its 64-column blocks and the cluster splitting K (None
        # for the K-major kernel, whose plan is not exposed).
        answer["plan"] = _C.decode_n_major_plan(
            M, N, K, dtype=_torch_dtype_name(dtype), sm_count=sm_count, batch=batch,
            clusters=sm == 90 and with_sm90a,
            cluster=os.environ.get("TORCH_GEMM_DECODE_CLUSTER"), a_strides=list(a.stride()),
            b_strides=list(b.stride()),
            a_address=_address(a), b_address=_address(b))
    if answer["kernel"] == "wgmma_sm90":
        answer["plan"] = _C.sm90_plan(
            M, N, K, sm_count=sm_count, batch=batch, dtype=_torch_dtype_name(dtype),
            a_strides=list(a.stride()), b_strides=list(b.stride()), a_address=_address(a),
            b_address=_address(b), bias=bias is not None, row_sum=row_sum,
            max_active_clusters=max_active_clusters, **env)
    return answer


def _torch_dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _address(t: torch.Tensor) -> int:
    """Where t's first element is (for alignment); meta tensors have no storage: 0."""
    return 0 if t.device.type == "meta" else t.data_ptr()


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


def linear_tiled_weight_grad(
    grad: torch.Tensor, x: torch.Tensor, *, bias: bool = False, kernel: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight gradient of :func:`linear_tiled`, ``gradᵀ @ x`` over the rows, and with
    ``bias=True`` its bias gradient, ``grad`` summed over the rows: what linear_tiled's backward
    calls.

    Args:
        grad: ``(..., N)`` tensor, the gradient of linear_tiled's output.
        x: ``(..., K)`` tensor with the same leading dimensions, same dtype and device. Any
            strides; the leading dimensions are flattened into the rows inside the op (so a
            DTensor sharded along any of them is never reshaped).
        bias: whether to compute the bias gradient.
        kernel: as for :func:`mm_tiled`; the bias gradient is summed in the kernel where it fuses
            :func:`mm_tiled_row_sum`'s row sums.

    Returns:
        ``(dW, db)``: dW ``(N, K)``, contiguous, as :func:`mm_tiled` returns ``gradᵀ @ x``;
        db ``(N,)`` in grad's dtype (16-bit summed in float32 and rounded once) where ``bias``,
        else an empty tensor. Differentiable in grad and x through linear_tiled (double backward
        of a linear layer); autocast casts as for ``torch.mm``.
    """
    return _LINEAR_TILED_WEIGHT_GRAD(grad, x, bias, kernel)


# ---------------------------------------------------------------------------------------------
# Fake kernel: shapes, dtype and device of the result without computing it. Mirrors the checks
# of csrc/ops/mm_common.cpp and csrc/ops/kernel_registry.h so that bad calls fail the same way
# while tracing as when they run.


def _c10_name(dtype: torch.dtype) -> str:
    """c10's name of a dtype, as the C++ messages print it. Past the tables, c10 capitalizes
    torch's name (float8_e4m3fn: Float8_e4m3fn, bits8: Bits8), its unsigned and b-prefixed
    families with two capitals (uint16: UInt16, bcomplex32: BComplex32)."""
    named = _DTYPE_NAMES.get(dtype) or _C10_NAMES.get(dtype)
    if named:
        return named
    name = str(dtype).removeprefix("torch.")
    for prefix, c10_prefix in (("uint", "UInt"), ("bcomplex", "BComplex")):
        if name.startswith(prefix):
            return c10_prefix + name[len(prefix):]
    return name[:1].upper() + name[1:]


def _check_mm_args(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    _check_defined(op, a=a, b=b)
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
    if dtype == torch.float32 and here[0]["tf32"] and not _torch_allows_tf32():
        raise RuntimeError(
            f"{op}: kernel '{kernel}' multiplies float32 in TF32, which torch does not allow now; allow it with "
            "torch.backends.cuda.matmul.fp32_precision = \"tf32\" (or torch.backends.cuda.matmul.allow_tf32 = True, "
            "or torch.set_float32_matmul_precision('high')), or pick a CUDA-core kernel"
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


def _check_defined(op: str, **tensors: Optional[torch.Tensor]) -> None:
    """check_defined of csrc/ops/mm_common.cpp: a tensor argument given as None."""
    for name, t in tensors.items():
        torch._check(t is not None, lambda: f"{op}: {name} is an undefined tensor")


def _check_dim(op: str, t: torch.Tensor, name: str, dim: int) -> None:
    torch._check(t.dim() == dim, lambda: f"{op}: {name} must be a {dim}-D tensor, got a {t.dim()}-D tensor of shape {list(t.shape)}")


def _check_bmm_args(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    _check_defined(op, a=a, b=b)
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


@torch.library.register_fake("gemm::linear_tiled_weight_grad")
def _linear_tiled_weight_grad_fake(
    grad: torch.Tensor, x: torch.Tensor, bias: bool, kernel: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    op = "gemm::linear_tiled_weight_grad"
    _check_defined(op, grad=grad, x=x)
    torch._check(grad.dim() >= 1, lambda: f"{op}: grad must have at least 1 dimension, got a 0-D tensor")
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least 1 dimension, got a 0-D tensor")
    torch._check(
        grad.dim() == x.dim() and grad.shape[:-1] == x.shape[:-1],
        lambda: f"{op}: grad and x must have the same leading dimensions (all but the last), got grad of shape "
        f"{list(grad.shape)} and x of shape {list(x.shape)}",
    )
    _check_pair(op, grad, "grad", x, "x")
    _check_kernel_name(op, kernel, grad.device, grad.dtype)
    return grad.new_empty((grad.shape[-1], x.shape[-1])), grad.new_empty((grad.shape[-1] if bias else 0,))


@torch.library.register_fake("gemm::bmm_tiled")
def _bmm_tiled_fake(a: torch.Tensor, b: torch.Tensor, kernel: str = "auto") -> torch.Tensor:
    op = "gemm::bmm_tiled"
    _check_bmm_args(op, a, b)
    _check_kernel_name(op, kernel, a.device, a.dtype)
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))


@torch.library.register_fake("gemm::linear_tiled")
def _linear_tiled_fake(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, kernel: str = "auto"
) -> torch.Tensor:
    op = "gemm::linear_tiled"
    _check_defined(op, x=x, weight=weight)
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
