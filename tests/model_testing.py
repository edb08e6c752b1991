"""Helpers for the module-level tests (test_nn.py, test_attention_model.py): the docs/numerics.md error
budget applied to a computation done twice in the same dtype — once with torch_gemm's
projections, once with torch's — against a float64 reference of the same computation."""

from __future__ import annotations

import math
from typing import Iterable

import torch

import torch_gemm.nn
from gemm_testing import rel_err

# How far ours may be from the float64 reference, as a multiple of torch's own distance from it,
# for 16-bit dtypes: 2x for one product (docs/numerics.md), more where many roundings compound (a whole
# attention block: projections, softmax, their gradients) and either implementation may be the
# luckier one on a given input.
SINGLE_OP_FACTOR = 2.0
BLOCK_FACTOR = 3.0
# float32 (TF32 off): fixed bounds on the relative error; for a whole block, the factor times
# torch's own error where torch's is already near the bound (a loss through a whole decoder, where
# a few roundings of large logits decide it), up to FLOAT32_BLOCK_MAX_TOL, well under what TF32's
# rounding would leave. float64: a fixed bound.
FLOAT32_SINGLE_OP_TOL = 1e-5
FLOAT32_BLOCK_TOL = 1e-4
FLOAT32_BLOCK_MAX_TOL = 4e-4
FLOAT64_TOL = 1e-12
# Below this, a reduced-precision torch result that happens to be exact does not demand exactness.
REDUCED_TOL_FLOOR = 1e-6
# A result zero in exact arithmetic, measured against a scale: its rounding passes below this
# fraction of the dtype's ulp (bf16: 1.2e-4 of the scale), whatever torch's own rounding was.
SCALED_ULP_FRACTION = 1 / 64


def tolerance(dtype: torch.dtype, torch_err: float, *, factor: float, float32_tol: float,
              float32_max_tol: float, scaled: bool = False) -> float:
    """The largest relative error that passes for ``dtype``, given torch's error on the same inputs
    (float32: float32_tol, or the factor times torch's error up to float32_max_tol). scaled: the
    result is zero in exact arithmetic, its error taken against a scale, so only rounding summed
    in another order than torch's is left (sequence parallelism adds the ranks' partial sums):
    anything below SCALED_ULP_FRACTION of an ulp of the scale passes too."""
    if dtype == torch.float64:
        tol = FLOAT64_TOL
    elif dtype == torch.float32:
        tol = max(float32_tol, min(factor * torch_err, float32_max_tol))
    else:
        tol = max(factor * torch_err, REDUCED_TOL_FLOOR)
    return max(tol, torch.finfo(dtype).eps * SCALED_ULP_FRACTION) if scaled else tol


def assert_matches_reference(
    ours: torch.Tensor,
    theirs: torch.Tensor,
    reference: torch.Tensor,
    what: str,
    *,
    factor: float = BLOCK_FACTOR,
    float32_tol: float = FLOAT32_BLOCK_TOL,
    float32_max_tol: float = FLOAT32_BLOCK_MAX_TOL,
    scale: float = 0.0,
) -> None:
    """ours (torch_gemm) and theirs (torch) computed the same thing in the same dtype; reference
    is the float64 result on the same (already rounded) inputs. Shape, dtype and device must
    agree with theirs, ours must be finite and its error ‖out − reference‖ / max(‖reference‖,
    scale) within the budget. ``scale`` is for results that are zero in exact arithmetic (the
    key bias's gradient: softmax ignores a shift shared by all keys), where only rounding is
    left and ‖reference‖ would make any rounding an infinite relative error."""
    assert ours.shape == theirs.shape, f"{what}: shape {tuple(ours.shape)} != torch's {tuple(theirs.shape)}"
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != torch's {theirs.dtype}"
    assert ours.device == theirs.device, f"{what}: device {ours.device} != torch's {theirs.device}"
    assert torch.isfinite(ours).all(), f"{what}: non-finite values"
    err, torch_err = _error(ours, reference, scale), _error(theirs, reference, scale)
    tol = tolerance(ours.dtype, torch_err, factor=factor, float32_tol=float32_tol,
                    float32_max_tol=float32_max_tol, scaled=scale > 0.0)
    assert err <= tol, f"{what}: rel_err {err:.3e} > tol {tol:.3e} (torch's own rel_err {torch_err:.3e}, {ours.dtype})"


def _error(out: torch.Tensor, reference: torch.Tensor, scale: float) -> float:
    if scale <= 0.0:
        return rel_err(out, reference)
    diff = (out.double() - reference.double()).norm().item()
    return diff / max(reference.double().norm().item(), scale)


def rel_diff(a: float, b: float) -> float:
    """|a - b| relative to |b| (inf where b is 0 and a is not)."""
    if a == b:
        return 0.0
    return abs(a - b) / abs(b) if b != 0 else math.inf


def swapped_names(model: torch.nn.Module) -> list[str]:
    """Qualified names of the modules that run on torch_gemm (torch_gemm.nn.Linear)."""
    return [name for name, module in model.named_modules() if isinstance(module, torch_gemm.nn.Linear)]


def plain_linear_names(model: torch.nn.Module) -> list[str]:
    """Qualified names of the modules that are exactly torch.nn.Linear."""
    return [name for name, module in model.named_modules() if type(module) is torch.nn.Linear]


def randomize_(params: Iterable[torch.nn.Parameter], gen: torch.Generator) -> None:
    """Fresh random values for parameters (weights ~ N(0, 1/fan_in), 1-D ones ~ N(0, 0.1²)) from a
    seeded generator, so each test session sees new numbers that the seed reproduces."""
    with torch.no_grad():
        for p in params:
            noise = torch.randn(p.shape, dtype=torch.float32, device=p.device, generator=gen)
            scale = p.shape[-1] ** -0.5 if p.dim() >= 2 else 0.1
            p.copy_(noise * scale)
