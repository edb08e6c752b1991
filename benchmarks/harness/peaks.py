"""What a device can do at most, and what a product asks of it: the GPUs' datasheet peak
TFLOP/s, the copy bandwidth measured in the run, and a GEMM's FLOP and byte counts. %peak and %BW
in the tables are against these."""

from __future__ import annotations

import re
from typing import Optional

import torch

from harness.dtypes import DTYPE_ORDER, TORCH_DTYPES
from harness.timing import Timing, time_ms

# Dense (no sparsity) TFLOP/s from the vendors' datasheets; fp16/bf16 with fp32 accumulation,
# which is what our kernels and torch.mm use. First match wins, so variants precede the family.
PEAK_TFLOPS: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("H100 PCIe", r"\bH100\b.*\bPCIe\b", {"float32": 51.0, "tf32": 378.0, "bfloat16": 756.5, "float16": 756.5}),
    ("H100 NVL", r"\bH100\b.*\bNVL\b", {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5, "float16": 835.5}),
    ("H100 SXM", r"\bH100\b", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5, "float16": 989.5}),
    ("H200 NVL", r"\bH200\b.*\bNVL\b", {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5, "float16": 835.5}),
    ("H200 SXM", r"\bH200\b", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5, "float16": 989.5}),
    ("GH200", r"\bGH200\b", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5, "float16": 989.5}),
    ("A100", r"\bA100\b", {"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0, "float16": 312.0}),
    ("L40S", r"\bL40S\b", {"float32": 91.6, "tf32": 183.0, "bfloat16": 362.05, "float16": 362.05}),
    ("L40", r"\bL40\b", {"float32": 90.5, "tf32": 90.5, "bfloat16": 181.0, "float16": 181.0}),
    ("L4", r"\bL4\b", {"float32": 30.3, "tf32": 60.0, "bfloat16": 121.0, "float16": 121.0}),
    ("RTX 4090", r"\bRTX 4090\b", {"float32": 82.6, "tf32": 82.6, "bfloat16": 165.2, "float16": 165.2}),
)

# Copy buffers: far beyond any GPU's L2 or any CPU's last-level cache, so the copy measures DRAM.
COPY_BYTES = {"cuda": 2**30, "cpu": 256 * 2**20}

# A product is bandwidth-bound (a decode row) when a few tokens (M) meet a large weight: the time
# then goes into streaming the weight, so bandwidth, not FLOP/s, is the figure of merit.
DECODE_MAX_M = 256
DECODE_MIN_WEIGHT_DIM = 1024


def lookup_peak(name: str) -> tuple[Optional[str], dict[str, float]]:
    """(table entry, peak TFLOP/s per dtype) for a device name; (None, {}) when it is unknown.
    float32-3xtf32's is a third of TF32's: three TF32 products per float32 one."""
    for entry, pattern, peaks in PEAK_TFLOPS:
        if re.search(pattern, name, flags=re.I):
            return entry, {**peaks, "float32-3xtf32": peaks["tf32"] / 3}
    return None, {}


def parse_peak_override(spec: str) -> dict[str, float]:
    """``--peak-tflops``: one number for every dtype, or ``dtype=TFLOPS`` pairs separated by
    commas. Raises ``ValueError`` with the offending item."""
    spec = spec.strip()
    try:
        value = float(spec)
    except ValueError:
        pass
    else:
        if not value > 0:
            raise ValueError(f"peak must be positive, got {spec!r}")
        return {d: value for d in DTYPE_ORDER}
    peaks = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        dtype, sep, value_text = item.partition("=")
        dtype = dtype.strip()
        if not sep or dtype not in TORCH_DTYPES:
            raise ValueError(
                f"bad peak {item!r}: expected TFLOPS or dtype=TFLOPS with dtype one of {', '.join(DTYPE_ORDER)}"
            )
        try:
            value = float(value_text)
        except ValueError:
            raise ValueError(f"bad peak {item!r}: {value_text!r} is not a number") from None
        if not value > 0:
            raise ValueError(f"bad peak {item!r}: must be positive")
        peaks[dtype] = value
    if not peaks:
        raise ValueError("empty --peak-tflops")
    return peaks


def measure_copy_gbps(device: torch.device, budget: Timing) -> float:
    """Device-memory bandwidth of a large copy: bytes read plus bytes written over its time."""
    nbytes = COPY_BYTES[device.type]
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.zeros_like(src)  # written now, so the CPU's page faults are not timed
    ms = time_ms(lambda: dst.copy_(src), device, budget)
    return 2 * nbytes / (ms * 1e-3) / 1e9


# ---------------------------------------------------------------------------------------------
# Counting.


def flops(M: int, N: int, K: int) -> int:
    """Floating-point operations of one GEMM: a multiply and an add per (m, n, k)."""
    return 2 * M * N * K


def bytes_moved(M: int, N: int, K: int, dtype: str) -> int:
    """The least memory traffic of one GEMM: A and B read once, C written once."""
    return (M * K + K * N + M * N) * TORCH_DTYPES[dtype].itemsize


def tflops_of(M: int, N: int, K: int, ms: float) -> float:
    """TFLOP/s of one M×N×K GEMM that took ``ms`` milliseconds."""
    return flops(M, N, K) / (ms * 1e-3) / 1e12


def is_decode(M: int, N: int, K: int) -> bool:
    """A bandwidth-bound product: a few rows against a large weight."""
    return M <= DECODE_MAX_M and min(N, K) >= DECODE_MIN_WEIGHT_DIM


def bw_pct(M: int, N: int, K: int, dtype: str, ms: Optional[float], copy_gbps: Optional[float]) -> Optional[float]:
    """The least traffic of the product over its time, in % of the measured copy bandwidth; None
    where the product is not bandwidth-bound (``is_decode``) or a figure is missing."""
    if not is_decode(M, N, K) or copy_gbps is None or ms is None:
        return None
    return 100.0 * bytes_moved(M, N, K, dtype) / (ms * 1e-3) / (copy_gbps * 1e9)
