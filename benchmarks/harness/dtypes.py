"""The dtype names of the benchmarks and their records, and the float32 modes. "tf32" is not a
tensor dtype: float32 tensors with TF32 tensor cores allowed, for ours and torch's side alike;
"float32-3xtf32" is float32 with TF32 off (torch.mm's IEEE float32) and torch_gemm's float32
precision "3xtf32", so that kernel="auto" takes wgmma_sm90_3xtf32."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

import torch_gemm

from harness.records import DTYPE_ORDER  # noqa: F401  (the names, in table order)

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "tf32": torch.float32,
    "float32-3xtf32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}


class tf32_mode:
    """Context manager: ``torch.backends.cuda.matmul.allow_tf32`` set for ours and torch's side
    alike, restored afterwards."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        self.saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = self.enabled

    def __exit__(self, *exc: object) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.saved


@contextlib.contextmanager
def float32_mode(dtype_name: str) -> Iterator[None]:
    """For a benchmark dtype name: TF32 on for "tf32" (off otherwise), and torch_gemm's float32
    precision "3xtf32" for "float32-3xtf32" ("ieee" otherwise); both restored afterwards."""
    precision = "3xtf32" if dtype_name == "float32-3xtf32" else "ieee"
    with tf32_mode(dtype_name == "tf32"), torch_gemm.fp32_precision(precision):
        yield
