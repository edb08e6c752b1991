"""The dtype names of the benchmarks and their records, and TF32 mode. "tf32" is not a tensor
dtype: float32 tensors with TF32 tensor cores allowed, for ours and torch's side alike."""

from __future__ import annotations

import torch

from harness.records import DTYPE_ORDER  # noqa: F401  (the names, in table order)

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "tf32": torch.float32,
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
