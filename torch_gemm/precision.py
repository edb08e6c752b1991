"""torch_gemm's float32 precision: what kernel="auto" gives float32 products while torch does not
allow TF32 — IEEE float32 on the CUDA cores (the default, what torch promises under
``fp32_precision = "ieee"``), or 3xTF32: float32's accuracy from the TF32 tensor cores."""

from __future__ import annotations

import contextlib
from typing import Iterator

from torch_gemm import _C

MODES = ("ieee", "3xtf32")


def set_fp32_precision(mode: str) -> None:
    """Process-wide: ``"ieee"`` (default) or ``"3xtf32"``. Under ``"3xtf32"``, on an H100/H200,
    ``kernel="auto"`` runs float32 products of at least 128 rows and columns, whose 128×128 tiles
    (times the chunks it cuts a long K into where they are few) outnumber a quarter of the SMs,
    on ``wgmma_sm90_3xtf32`` wherever torch does not allow TF32
    (where it does, TF32 as torch's own matmuls); smaller ones stay IEEE float32 on the CUDA
    cores. Read at every call, so compiled graphs and CUDA graphs captured later follow it."""
    if not isinstance(mode, str):
        raise TypeError(f"set_fp32_precision: mode must be a str, one of {MODES}, got {type(mode).__name__}")
    if mode not in MODES:
        raise ValueError(f"set_fp32_precision: mode must be one of {MODES}, got {mode!r}")
    _C.set_fp32_precision(mode)


def get_fp32_precision() -> str:
    """The current mode: ``"ieee"`` or ``"3xtf32"``."""
    return _C.get_fp32_precision()


@contextlib.contextmanager
def fp32_precision(mode: str) -> Iterator[None]:
    """``with torch_gemm.fp32_precision("3xtf32"): ...``: the mode inside, the previous one after."""
    previous = get_fp32_precision()
    set_fp32_precision(mode)
    try:
        yield
    finally:
        set_fp32_precision(previous)
