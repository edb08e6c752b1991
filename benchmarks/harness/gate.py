"""The correctness gate: nothing is timed before its output has been checked. A product is
checked against the float64 product of the same operands (``reference``, ``check_correct``) with
a bound per dtype (``tolerance``): IEEE float32 and float64 against a fixed bound, the reduced
precisions against torch's own error on the same inputs (flash-attention's rule). A whole module
or a call with several outputs is checked against torch's result (``check_against``)."""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch

# Relative-error bounds. The reduced precisions may err by this factor over torch's own error on
# the same inputs, with a floor so that a torch result that happens to be exact does not demand
# exactness of us.
FLOAT32_TOL = 1e-5
FLOAT64_TOL = 1e-12
REDUCED_TOL_FACTOR = 2.0
REDUCED_TOL_FLOOR = 1e-6


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 product on the operands' device (a few ms for the largest presets on an H100)."""
    return torch.mm(a.to(torch.float64), b.to(torch.float64))


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| (Frobenius), in float64 on ref's device."""
    diff = out.to(torch.float64) - ref
    return (torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref)).item()


def tolerance(dtype: str, torch_err: float) -> float:
    """Largest rel_err that passes for ``dtype``, given torch's own rel_err on the same inputs."""
    if dtype in ("float32", "float32-3xtf32"):  # 3xTF32 is held to float32's bar
        return FLOAT32_TOL
    if dtype == "float64":
        return FLOAT64_TOL
    if dtype == "tf32":
        # TF32 may be used, not must: where torch.mm takes an fp32 path anyway (cuBLAS's GEMV at
        # M = 1 is ~5e-7), twice its error would hold ours to a stricter bar than plain float32.
        return max(REDUCED_TOL_FACTOR * torch_err, FLOAT32_TOL)
    return max(REDUCED_TOL_FACTOR * torch_err, REDUCED_TOL_FLOOR)


def check_correct(out: torch.Tensor, ref: torch.Tensor, tol: float) -> tuple[bool, float]:
    """(passes, rel_err). A wrong shape, NaN or inf never passes."""
    if tuple(out.shape) != tuple(ref.shape):
        return False, math.nan
    err = rel_error(out, ref)
    return math.isfinite(err) and err <= tol, err


def rel_diff(ours: Sequence[torch.Tensor], theirs: Sequence[torch.Tensor]) -> float:
    """The largest ‖ours − theirs‖ / ‖theirs‖ over the checked tensors, computed in float64;
    NaN where shapes differ or a result is not finite."""
    worst = 0.0
    for a, b in zip(ours, theirs):
        if a.shape != b.shape:
            return math.nan
        diff = torch.linalg.vector_norm(a.double() - b.double()).item()
        norm = torch.linalg.vector_norm(b.double()).item()
        err = diff / norm if norm > 0 else (0.0 if diff == 0 else math.inf)
        if not math.isfinite(err):
            return math.nan
        worst = max(worst, err)
    return worst


def error_text(e: BaseException) -> str:
    """A raised error as a record stores it: its type and the first line of its message."""
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


def check_against(ours: Callable[[], Sequence[torch.Tensor]], reference_out: Sequence[torch.Tensor],
                  tol: float) -> tuple[str, Optional[float], Optional[str]]:
    """(status, rel_diff, error) of ``ours``, run once and compared with ``reference_out``:
    status "OK" (within ``tol``), "WRONG" (beyond it, or not finite) or "ERROR" (raised; the
    error's first line)."""
    try:
        # The comparison runs inside the try: an asynchronous CUDA fault surfaces at its .item().
        diff = rel_diff(ours(), reference_out)
        return ("OK" if diff <= tol else "WRONG"), diff, None
    except RuntimeError as e:  # TORCH_CHECK failures, CUDA errors, out of memory
        return "ERROR", None, error_text(e)


def finite_or_none(x: Optional[float]) -> Optional[float]:
    """JSON has no NaN/inf: a non-finite error is stored as null (the status says WRONG)."""
    return x if x is not None and math.isfinite(x) else None
