"""Benchmark torch_gemm's mm_tiled kernels against torch.mm (cuBLAS on CUDA) on the same inputs.

Every kernel's output is first checked against a float64 reference; a wrong kernel is reported
WRONG and never timed. Timing follows DESIGN.md §6: CUDA events, median, warm-up, L2 flushed
before every rep, as ``triton.testing.do_bench`` does; input buffers are rotated where one set
fits in L2; torch.mm is timed in the same run, on the same inputs, with the same TF32 setting,
interleaved with each kernel rep by rep (the order alternating), so that both meet the same
clocks: timed one after the other, the first of two runs on a cooler GPU (an H200 under a long
GEMM drops from 1980 MHz to ~1500 at its 700 W cap; torch.mm timed twice in a row read 773 and
then 707 TFLOP/s at 4096³ bf16). On a machine without CUDA the same
command line times the CPU kernels against torch.mm on the CPU (time.perf_counter, median).

Usage::

    python benchmarks/bench_mm.py --quick                     # a few minutes at most on an H100
    python benchmarks/bench_mm.py --shapes llm --dtype bfloat16 --plot
    python benchmarks/bench_mm.py --shapes square,odd --dtype float32,tf32 --kernel auto,smem32
    python benchmarks/bench_mm.py --shapes 4096x4096x4096,8192x12288x4096 --layout NN NT TN TT
    python benchmarks/bench_mm.py --shapes decode --kernel auto --peak-tflops bfloat16=989.5
    python benchmarks/bench_mm.py --quick --device cpu --out /tmp/bench

Shapes are ``MxNxK`` (C[M, N] = A[M, K] @ B[K, N]) or presets: ``square`` (256 ... 8192 cubed),
``llm`` (512 ... 16384 tokens against 4096x4096, QKV 4096x12288 and MLP 4096x14336 /
14336x4096 weights), ``decode`` (M = 1 ... 256 against 4096/14336 weights), ``odd`` (sizes
that are not multiples of any tile). Layouts ``NN``, ``NT``, ``TN``, ``TT``: the first letter
is for a, the second for b; ``T`` means the operand is a transposed view (for a:
``torch.randn(K, M).t()``), ``N`` a row-major contiguous tensor. Dtype ``tf32`` is float32 with
``torch.backends.cuda.matmul.allow_tf32 = True`` for both ours and torch.mm; ``float32`` has it
off for both.

Results merge into ``<out>/<gpu>.json`` (rows with the same op, kernel, dtype, layout and shape
are replaced, the others kept) with a CSV beside it, and with ``--plot`` PNG plots
(``<gpu>-square.png``: TFLOP/s against size; ``<gpu>-ratio.png``: auto / torch.mm over the llm
and decode shapes). ``benchmarks/report.py`` turns the JSON files into the README table.
The exit status is 1 when any kernel was WRONG or failed, so scripts can gate on it.
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import torch

import torch_gemm

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results"
OP = "mm_tiled"

Shape = tuple[int, int, int]  # (M, N, K)

# ---------------------------------------------------------------------------------------------
# Dtypes. "tf32" is not a tensor dtype: float32 tensors with TF32 tensor cores allowed.

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "tf32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}
DTYPE_ORDER = tuple(TORCH_DTYPES)
# What "--dtype all" means per device: tf32 is a CUDA tensor-core mode, float64 is there on the
# CPU for completeness (on a GPU it is a gradcheck dtype, not one we tune for).
ALL_DTYPES = {
    "cuda": ("float32", "tf32", "bfloat16", "float16"),
    "cpu": ("float32", "bfloat16", "float16", "float64"),
}

# Relative-error bounds (DESIGN.md §5). IEEE float32/float64 against a fixed bound; the reduced
# precisions against torch.mm's own error on the same inputs (flash-attention's rule), with a
# floor so that a torch.mm that happens to be exact does not demand exactness of us.
FLOAT32_TOL = 1e-5
FLOAT64_TOL = 1e-12
REDUCED_TOL_FACTOR = 2.0
REDUCED_TOL_FLOOR = 1e-6

# ---------------------------------------------------------------------------------------------
# Shapes.

LAYOUTS = ("NN", "NT", "TN", "TT")
SQUARE_SIZES = tuple(2**i for i in range(8, 14))  # 256 ... 8192
LLM_TOKENS = tuple(2**i for i in range(9, 15))  # 512 ... 16384
# Llama-3-8B-like projections as (in-features K, out-features N): attention output, fused QKV,
# MLP up/gate and MLP down.
LLM_WEIGHTS = ((4096, 4096), (4096, 12288), (4096, 14336), (14336, 4096))
DECODE_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_WEIGHTS = ((4096, 4096), (4096, 14336), (14336, 4096), (14336, 14336))  # (K, N)

PRESETS: dict[str, tuple[Shape, ...]] = {
    "square": tuple((n, n, n) for n in SQUARE_SIZES),
    # M = tokens, K = in-features, N = out-features; includes 8192x4096x14336 (MLP down).
    "llm": tuple((t, n, k) for t in LLM_TOKENS for k, n in LLM_WEIGHTS),
    "decode": tuple((m, n, k) for m in DECODE_M for k, n in DECODE_WEIGHTS),
    # Sizes that are no multiple of any tile: a ragged edge in one dimension at a time (4097),
    # in all three (4095, 1000, 1023x1025x1027), and skinny extremes (M = 3, M = 77, K = 129).
    "odd": (
        (4095, 4095, 4095),
        (4097, 4096, 4096),
        (4096, 4097, 4096),
        (4096, 4096, 4097),
        (1000, 1000, 1000),
        (1023, 1025, 1027),
        (3, 5120, 13824),
        (77, 7777, 777),
        (2047, 8191, 129),
    ),
}

# A row is a decode row when a few tokens (M) meet a large weight: the time then goes into
# streaming the weight, so bandwidth, not FLOP/s, is the figure of merit.
DECODE_MAX_M = 256
DECODE_MIN_WEIGHT_DIM = 1024

# The textbook rungs (one thread per output, the shared-memory tiles) run at a few percent of
# peak; above this many FLOPs they would take most of a sweep's time and tell us nothing new.
QUICK_SLOW_FLOP_CAP = 2 * 2048**3
DEFAULT_SLOW_FLOP_CAP = 2 * 4096**3


def is_slow_kernel(name: str) -> bool:
    """The textbook rungs that are skipped above the FLOP cap."""
    return name == "naive" or name.startswith("smem")


@dataclass(frozen=True)
class Case:
    """One problem: shape, layout, and (for --quick's layout checks) a restricted kernel set."""

    M: int
    N: int
    K: int
    layout: str = "NN"
    kernels: Optional[tuple[str, ...]] = None  # None: every kernel selected for the run

    @property
    def shape(self) -> Shape:
        return (self.M, self.N, self.K)


def parse_shapes(spec: str | Sequence[str]) -> list[Shape]:
    """Shapes from preset names and ``MxNxK`` items, separated by commas or whitespace, in order
    and without duplicates. Raises ``ValueError`` naming the bad item."""
    text = spec if isinstance(spec, str) else ",".join(spec)
    items = [t for t in re.split(r"[,\s]+", text) if t]
    if not items:
        raise ValueError("no shapes given: expected MxNxK items or presets " + ", ".join(PRESETS))
    shapes: list[Shape] = []
    for item in items:
        if item.lower() in PRESETS:
            shapes.extend(PRESETS[item.lower()])
            continue
        m = re.fullmatch(r"(\d+)[xX×](\d+)[xX×](\d+)", item)
        if m is None:
            raise ValueError(
                f"bad shape {item!r}: expected MxNxK with positive integers (e.g. 4096x4096x4096) "
                f"or a preset name ({', '.join(PRESETS)})"
            )
        dims = tuple(int(g) for g in m.groups())
        if min(dims) < 1:
            raise ValueError(f"bad shape {item!r}: every dimension must be at least 1")
        shapes.append(dims)  # type: ignore[arg-type]
    return list(dict.fromkeys(shapes))


def quick_cases(device_type: str) -> list[Case]:
    """The --quick set: a few sizes, some ragged and one decode-like, in NN for every kernel, plus
    the other layouts for the auto kernel only. Small on the CPU, where torch.mm in float16 has
    no fast path (seconds for one 1024^3 product)."""
    if device_type == "cuda":
        nn = [(1024,) * 3, (2048,) * 3, (4096,) * 3, (4095,) * 3, (1000,) * 3, (16, 4096, 4096)]
        layout_size = 4096
    else:
        nn = [(256,) * 3, (512,) * 3, (255, 257, 263), (500, 300, 700), (16, 2048, 2048)]
        layout_size = 512
    cases = [Case(*s, "NN") for s in nn]
    cases += [Case(layout_size, layout_size, layout_size, lay, ("auto",)) for lay in LAYOUTS[1:]]
    return cases


# ---------------------------------------------------------------------------------------------
# Counting.


def flops(M: int, N: int, K: int) -> int:
    """Floating-point operations of one GEMM: a multiply and an add per (m, n, k)."""
    return 2 * M * N * K


def bytes_moved(M: int, N: int, K: int, dtype: str) -> int:
    """The least memory traffic of one GEMM: A and B read once, C written once."""
    return (M * K + K * N + M * N) * TORCH_DTYPES[dtype].itemsize


def tflops_of(M: int, N: int, K: int, ms: float) -> float:
    return flops(M, N, K) / (ms * 1e-3) / 1e12


def is_decode(M: int, N: int, K: int) -> bool:
    return M <= DECODE_MAX_M and min(N, K) >= DECODE_MIN_WEIGHT_DIM


# ---------------------------------------------------------------------------------------------
# Devices, names and peaks.


def gpu_slug(name: str) -> str:
    """File-name form of a device name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else the machine architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def device_slug(device: torch.device) -> str:
    """Name of the results file: the GPU's name, or "cpu-<model>" without trademarks and clock."""
    if device.type == "cuda":
        return gpu_slug(device_name(device))
    model = re.sub(r"\((R|TM)\)|\bCPU\b|\bProcessor\b|@.*$", " ", cpu_name(), flags=re.I)
    return "cpu-" + gpu_slug(model)


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


def lookup_peak(name: str) -> tuple[Optional[str], dict[str, float]]:
    """(table entry, peak TFLOP/s per dtype) for a device name; (None, {}) when it is unknown."""
    for entry, pattern, peaks in PEAK_TFLOPS:
        if re.search(pattern, name, flags=re.I):
            return entry, dict(peaks)
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


def l2_bytes(device: torch.device) -> int:
    """L2 size of a GPU; 0 on the CPU, where torch does not expose the last-level cache."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.get_device_properties(device).L2_cache_size)


# ---------------------------------------------------------------------------------------------
# Timing.


@dataclass(frozen=True)
class Timing:
    """Time budget of one measurement, as in ``triton.testing.do_bench``."""

    warmup_ms: float = 25.0
    rep_ms: float = 100.0


# Without triton, the hand-rolled CUDA timer zeroes this many bytes before every rep, at least
# twice the L2 (as triton does with its 256 MiB buffer), so no rep finds its inputs in L2.
MIN_FLUSH_BYTES = 256 * 2**20
# The CPU timer's reps: enough for a median, few enough for a 1-minute --quick on 2 cores.
CPU_MIN_REPS, CPU_MAX_REPS = 3, 50
# Copy buffers: far beyond any GPU's L2 or any CPU's last-level cache, so the copy measures DRAM.
COPY_BYTES = {"cuda": 2**30, "cpu": 256 * 2**20}
# Input sets for rotation: enough that the sets together are at least twice the L2.
MAX_INPUT_SETS = 64


@functools.lru_cache(maxsize=None)
def _triton_do_bench() -> Optional[Callable[..., Any]]:
    try:
        from triton.testing import do_bench
    except ImportError:
        return None
    return do_bench


def timer_name(device: torch.device) -> str:
    if device.type != "cuda":
        return "time.perf_counter (median)"
    if _triton_do_bench() is not None:
        return "triton.testing.do_bench (CUDA events, median, L2 flushed)"
    return "CUDA events (median, L2 flushed by hand)"


def pair_timer_name(device: torch.device) -> str:
    """How bench_mm times a kernel against torch.mm (``time_interleaved``)."""
    if device.type != "cuda":
        return timer_name(device)
    return "CUDA events, ours and torch interleaved rep by rep (median, L2 flushed)"


def _time_cuda_events(fn: Callable[[], object], device: torch.device, timing: Timing) -> float:
    """triton's do_bench by hand, for when triton is missing: ``_time_interleaved_cuda`` over
    one callable."""
    return _time_interleaved_cuda([fn], device, timing)[0]


def _time_cpu(fn: Callable[[], object], timing: Timing) -> float:
    """Warm up for warmup_ms (at least one call), then time reps sized by the fastest warm-up
    call: a slow first call (thread pool start, page faults) must not shrink the sample."""
    warm_ms: list[float] = []
    deadline = time.perf_counter() + timing.warmup_ms * 1e-3
    while not warm_ms or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        warm_ms.append((time.perf_counter() - t0) * 1e3)
    n_rep = min(CPU_MAX_REPS, max(CPU_MIN_REPS, int(timing.rep_ms / max(min(warm_ms), 1e-3))))
    times = []
    for _ in range(n_rep):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _time_interleaved_cuda(fns: Sequence[Callable[[], object]], device: torch.device,
                           timing: Timing) -> list[float]:
    """triton's do_bench by hand, over several callables at once: estimate each, warm up, then in
    every rep flush the L2 (by writing a buffer of at least twice its size) before each callable
    and time it with an event pair, the order rotating from rep to rep, so that every callable
    meets the same clocks and temperatures. Median milliseconds of each."""
    flush = torch.empty(max(2 * l2_bytes(device), MIN_FLUSH_BYTES) // 4, dtype=torch.int32, device=device)
    for fn in fns:
        fn()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    estimates = []
    for fn in fns:
        start.record()
        for _ in range(5):
            flush.zero_()
            fn()
        end.record()
        torch.cuda.synchronize(device)
        estimates.append(max(start.elapsed_time(end) / 5, 1e-3))
    for _ in range(max(1, int(timing.warmup_ms / sum(estimates)))):
        for fn in fns:
            fn()
    n_rep = max(1, int(timing.rep_ms / max(estimates)))
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(n_rep)] for _ in fns]
    for r in range(n_rep):
        for i in range(len(fns)):
            k = (i + r) % len(fns)
            flush.zero_()
            events[k][r][0].record()
            fns[k]()
            events[k][r][1].record()
    torch.cuda.synchronize(device)
    return [statistics.median(s.elapsed_time(e) for s, e in per_fn) for per_fn in events]


def time_interleaved(fns: Sequence[Callable[[], object]], device: torch.device,
                     timing: Timing) -> list[float]:
    """Median milliseconds of one call of each of ``fns``, timed rep by rep in turn on CUDA (see
    ``_time_interleaved_cuda``); elsewhere one after the other with ``time_ms``."""
    if device.type == "cuda":
        return _time_interleaved_cuda(fns, device, timing)
    return [time_ms(fn, device, timing) for fn in fns]


def time_ms(fn: Callable[[], object], device: torch.device, timing: Timing) -> float:
    """Median milliseconds of one call of ``fn`` on ``device``."""
    if device.type == "cuda":
        do_bench = _triton_do_bench()
        if do_bench is not None:
            return float(do_bench(fn, warmup=timing.warmup_ms, rep=timing.rep_ms, return_mode="median"))
        return _time_cuda_events(fn, device, timing)
    return _time_cpu(fn, timing)


def measure_copy_gbps(device: torch.device, timing: Timing) -> float:
    """Device-memory bandwidth of a large copy: bytes read plus bytes written over its time."""
    nbytes = COPY_BYTES[device.type]
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.zeros_like(src)  # written now, so the CPU's page faults are not timed
    ms = time_ms(lambda: dst.copy_(src), device, timing)
    return 2 * nbytes / (ms * 1e-3) / 1e9


class tf32_mode:
    """Context manager: ``torch.backends.cuda.matmul.allow_tf32`` set for ours and torch.mm alike,
    restored afterwards."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        self.saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = self.enabled

    def __exit__(self, *exc: object) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.saved


# ---------------------------------------------------------------------------------------------
# Inputs and correctness.


def make_operands(case: Case, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh randn operands in the case's layout: 'T' makes the operand a transposed view."""
    M, N, K = case.shape

    def randn(rows: int, cols: int, transposed: bool) -> torch.Tensor:
        if transposed:
            return torch.randn(cols, rows, dtype=dtype, device=device).t()
        return torch.randn(rows, cols, dtype=dtype, device=device)

    return randn(M, K, case.layout[0] == "T"), randn(K, N, case.layout[1] == "T")


def n_input_sets(set_bytes: int, l2: int) -> int:
    """How many input sets to rotate through: one when a set does not fit in L2, else enough that
    the sets together are at least twice the L2, so a set is evicted before it comes round again
    even if a flush were incomplete."""
    if l2 <= 0 or set_bytes >= l2:
        return 1
    return min(MAX_INPUT_SETS, math.ceil(2 * l2 / set_bytes))


def rotating(
    mm: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    sets: Sequence[tuple[torch.Tensor, torch.Tensor]],
) -> Callable[[], torch.Tensor]:
    """A no-argument call of ``mm`` on the next input set, round robin."""
    cycle: Iterator[tuple[torch.Tensor, torch.Tensor]] = itertools.cycle(sets)
    return lambda: mm(*next(cycle))


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 product on the operands' device (a few ms for the largest presets on an H100)."""
    return torch.mm(a.to(torch.float64), b.to(torch.float64))


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| (Frobenius), in float64 on ref's device."""
    diff = out.to(torch.float64) - ref
    return (torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref)).item()


def tolerance(dtype: str, torch_err: float) -> float:
    """Largest rel_err that passes for ``dtype``, given torch.mm's own rel_err on the same inputs."""
    if dtype == "float32":
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


# ---------------------------------------------------------------------------------------------
# Rows and records.

ROW_FIELDS = (
    "op", "kernel", "dtype", "layout", "M", "N", "K", "status",
    "tflops", "torch_tflops", "ratio", "ms", "torch_ms",
    "rel_err", "torch_rel_err", "tol", "pct_peak", "bw_pct", "torch_bw_pct",
    "error", "git_commit",
)
ROW_KEY = ("op", "kernel", "dtype", "layout", "M", "N", "K")


@dataclass(frozen=True)
class Outcome:
    """What happened to one callable on one case: status "OK" (checked, then timed), "WRONG"
    (failed the check, not timed) or "ERROR" (raised; ``error`` holds the message)."""

    kernel: str
    status: str
    ms: Optional[float] = None
    rel_err: Optional[float] = None
    error: Optional[str] = None
    torch_ms: Optional[float] = None  # torch.mm's time, interleaved with this kernel's


def _finite(x: Optional[float]) -> Optional[float]:
    """JSON has no NaN/inf: a non-finite error is stored as null (the status says WRONG)."""
    return x if x is not None and math.isfinite(x) else None


def make_rows(
    case: Case,
    dtype: str,
    outcomes: Sequence[Outcome],
    torch_outcome: Outcome,
    *,
    tol: float,
    peak_tflops: Optional[float],
    copy_gbps: Optional[float],
    git_commit: Optional[str],
) -> list[dict]:
    """One record row per kernel outcome, with torch.mm's figures from the same inputs beside it."""
    M, N, K = case.shape

    def bw_pct(ms: Optional[float]) -> Optional[float]:
        if not is_decode(M, N, K) or copy_gbps is None or ms is None:
            return None
        return 100.0 * bytes_moved(M, N, K, dtype) / (ms * 1e-3) / (copy_gbps * 1e9)

    rows = []
    for o in outcomes:
        torch_ms = o.torch_ms if o.torch_ms is not None else torch_outcome.ms
        torch_tflops = tflops_of(M, N, K, torch_ms) if torch_ms else None
        tflops = tflops_of(M, N, K, o.ms) if o.status == "OK" and o.ms else None
        rows.append({
            "op": OP,
            "kernel": o.kernel,
            "dtype": dtype,
            "layout": case.layout,
            "M": M,
            "N": N,
            "K": K,
            "status": o.status,
            "tflops": tflops,
            "torch_tflops": torch_tflops,
            "ratio": tflops / torch_tflops if tflops and torch_tflops else None,
            "ms": o.ms if o.status == "OK" else None,
            "torch_ms": torch_ms,
            "rel_err": _finite(o.rel_err),
            "torch_rel_err": _finite(torch_outcome.rel_err),
            "tol": tol,
            "pct_peak": 100.0 * tflops / peak_tflops if tflops and peak_tflops else None,
            "bw_pct": bw_pct(o.ms if o.status == "OK" else None),
            "torch_bw_pct": bw_pct(torch_ms),
            "error": o.error,
            "git_commit": git_commit,
        })
    return rows


def row_key(row: dict) -> tuple:
    return tuple(row.get(k) for k in ROW_KEY)


def _row_order(row: dict) -> tuple:
    dtype_rank = DTYPE_ORDER.index(row["dtype"]) if row.get("dtype") in DTYPE_ORDER else len(DTYPE_ORDER)
    return (row.get("op", ""), dtype_rank, row.get("layout", ""), row.get("M", 0), row.get("N", 0),
            row.get("K", 0), row.get("kernel") != "auto", row.get("kernel", ""))


def merge_records(old: Optional[dict], metadata: dict, rows: Sequence[dict],
                  key: Callable[[dict], tuple] = row_key, order: Callable[[dict], tuple] = _row_order) -> dict:
    """The record after a run: ``rows`` replace old rows with the same key (here op, kernel,
    dtype, layout, M, N, K), other old rows stay, sorted by ``order``; metadata keys of the run
    replace the old ones. bench_attention.py passes its own key and order."""
    old = old or {}
    merged = {key(r): r for r in old.get("rows", [])}
    merged.update((key(r), r) for r in rows)
    return {
        "metadata": {**old.get("metadata", {}), **metadata},
        "rows": sorted(merged.values(), key=order),
    }


def load_record(path: Path, program: str = "bench_mm") -> Optional[dict]:
    """The record at ``path``, None if there is none; a file that is not one stops the program
    (named in the message) rather than being overwritten."""
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"{program}: {path} is not valid JSON ({e}); fix or move it, it is not overwritten") from None
    if not isinstance(record, dict) or not isinstance(record.get("rows"), list):
        raise SystemExit(f"{program}: {path} is not a results record ({{'metadata': ..., 'rows': [...]}})")
    return record


def _write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file so an interrupted run never leaves a half-written record."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run_metadata(name: str, device: torch.device, commit, dirty, timing: "Timing", script: str,
                 argv=None) -> dict:
    """The record metadata every benchmark writes: what ran, on what, when, timed how, and the
    command line (``argv``, or this process's). Each benchmark adds its own keys."""
    metadata = {
        "device": name,
        "device_type": device.type,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "torch_gemm": torch_gemm.__version__,
        "triton": getattr(sys.modules.get("triton"), "__version__", None),
        "git_commit": commit,
        "git_dirty": dirty,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "timer": timer_name(device),
        "warmup_ms": timing.warmup_ms,
        "rep_ms": timing.rep_ms,
        "command": shlex.join([script, *(sys.argv[1:] if argv is None else argv)]),
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        metadata.update(sm=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count)
    else:
        metadata.update(threads=torch.get_num_threads())
    return metadata


def write_record(record: dict, json_path: Path, csv_path: Path, fields: Sequence[str] = ROW_FIELDS) -> None:
    """JSON with one row per line (readable diffs), and the same rows as CSV: ``fields`` first,
    then any other keys the rows have."""
    rows_text = ",\n".join("  " + json.dumps(r) for r in record["rows"])
    _write_atomic(
        json_path,
        '{\n "metadata": ' + json.dumps(record["metadata"], indent=2).replace("\n", "\n ")
        + ',\n "rows": [\n' + rows_text + "\n ]\n}\n",
    )
    extra = sorted({k for r in record["rows"] for k in r} - set(fields))
    tmp = csv_path.with_name(csv_path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields) + extra, restval="")
        writer.writeheader()
        writer.writerows(record["rows"])
    os.replace(tmp, csv_path)



def write_host_timed_record(path: Path, script: str, metadata: dict, rows: list[dict],
                            row_key: Sequence[str], row_fields: Sequence[str]) -> None:
    """Merges `rows` into the record at `path` (a row with the same `row_key` values replaces the
    old one) and writes it with its CSV: for the scripts timed by the host's clock, whose metadata
    has no CUDA-event timing."""
    for key in ("warmup_ms", "rep_ms"):
        metadata.pop(key, None)
    record = merge_records(load_record(path, script), metadata, rows,
                           key=lambda r: tuple(r.get(k) for k in row_key),
                           order=lambda r: tuple(str(r.get(k)) for k in row_key))
    write_record(record, path, path.with_suffix(".csv"), row_fields)
    print(f"record: {path}")

def git_state() -> tuple[Optional[str], Optional[bool]]:
    """(HEAD commit, whether tracked files differ from it), or (None, None) outside git.

    A copy of the tree without its history (as on the lent GPU machines) takes both from
    TORCH_GEMM_GIT_COMMIT and TORCH_GEMM_GIT_DIRTY (0/1), set by whoever made the copy."""
    if os.environ.get("TORCH_GEMM_GIT_COMMIT"):
        return os.environ["TORCH_GEMM_GIT_COMMIT"], os.environ.get("TORCH_GEMM_GIT_DIRTY", "0") == "1"
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit, bool(status.strip())


# ---------------------------------------------------------------------------------------------
# The sweep.


@dataclass(frozen=True)
class Task:
    dtype: str
    case: Case
    kernels: tuple[str, ...]


def build_plan(
    cases: Sequence[Case],
    dtypes: Sequence[str],
    kernels_for: Mapping[str, Sequence[str]],
    slow_flop_cap: float,
) -> tuple[list[Task], list[str]]:
    """Tasks (dtype outermost, so the TF32 switch flips rarely) and notes on what was skipped."""
    tasks, notes = [], []
    for dtype in dtypes:
        for case in cases:
            wanted = [k for k in kernels_for[dtype] if case.kernels is None or k in case.kernels]
            slow = [k for k in wanted if is_slow_kernel(k) and flops(*case.shape) > slow_flop_cap]
            if slow:
                notes.append(
                    f"skipped {', '.join(slow)} at {'x'.join(map(str, case.shape))} {case.layout} {dtype}: "
                    f"{flops(*case.shape) / 1e9:.1f} GFLOP > slow-kernel cap {slow_flop_cap / 1e9:.1f} GFLOP "
                    "(--slow-gflop-cap)"
                )
            kernels = tuple(k for k in wanted if k not in slow)
            if kernels:
                tasks.append(Task(dtype, case, kernels))
    return tasks, notes


class Progress:
    """tqdm over the sweep when it is installed, else a carriage-return counter on stderr."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=total, file=sys.stderr, unit="meas", dynamic_ncols=True)

    def step(self, what: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_description_str(what, refresh=False)
            self.bar.update(1)
        else:
            counter = f"[{self.done:>{len(str(self.total))}}/{self.total}]"
            print(f"\r{counter} {what:<60}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            print(file=sys.stderr)


def run_task(
    task: Task,
    device: torch.device,
    timing: Timing,
    progress: Progress,
) -> tuple[list[Outcome], Outcome, float]:
    """Check, then time, torch.mm and every kernel of one task on the same inputs.

    Returns (kernel outcomes, torch.mm's outcome, tolerance). A kernel is timed only after its
    output on the first input set passed the float64 check."""
    case, dtype = task.case, task.dtype
    shape_text = f"{dtype} {case.layout} {'x'.join(map(str, case.shape))}"
    torch_dtype = TORCH_DTYPES[dtype]
    with tf32_mode(dtype == "tf32"):
        n_sets = n_input_sets(bytes_moved(*case.shape, dtype), l2_bytes(device))
        sets = [make_operands(case, torch_dtype, device) for _ in range(n_sets)]
        a0, b0 = sets[0]
        ref = reference(a0, b0)
        torch_err = rel_error(torch.mm(a0, b0), ref)
        tol = tolerance(dtype, torch_err)
        torch_fn = rotating(torch.mm, sets)
        outcomes = []
        for kernel in task.kernels:
            ours = functools.partial(_ours, kernel=kernel)
            try:
                # The check runs inside the try: an asynchronous CUDA fault of the kernel
                # surfaces at the check's synchronizing .item() and belongs to this kernel.
                ok, err = check_correct(ours(a0, b0), ref, tol)
                if ok:
                    ms, torch_ms = time_interleaved([rotating(ours, sets), torch_fn], device, timing)
                    outcomes.append(Outcome(kernel, "OK", ms, err, torch_ms=torch_ms))
                else:
                    outcomes.append(Outcome(kernel, "WRONG", rel_err=err))
            except RuntimeError as e:  # TORCH_CHECK failures, CUDA errors, out of memory
                first_line = (str(e).strip().splitlines() or [""])[0]
                outcomes.append(Outcome(kernel, "ERROR", error=f"{type(e).__name__}: {first_line}"))
            progress.step(f"{shape_text} {kernel}")
        # torch.mm's own figure, for the rows of kernels that were not timed: the median of its
        # interleaved times, or timed alone where no kernel was.
        paired = [o.torch_ms for o in outcomes if o.torch_ms is not None]
        torch_ms = statistics.median(paired) if paired else time_ms(torch_fn, device, timing)
        torch_outcome = Outcome("torch.mm", "OK", torch_ms, torch_err)
        progress.step(f"{shape_text} torch.mm")
    return outcomes, torch_outcome, tol


def _ours(a: torch.Tensor, b: torch.Tensor, *, kernel: str) -> torch.Tensor:
    # Looked up at call time (not bound at import) so tests can substitute a wrong kernel.
    return torch_gemm.mm_tiled(a, b, kernel=kernel)


# ---------------------------------------------------------------------------------------------
# Output.


def _fmt(x: Optional[float], spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _status_text(row: dict) -> str:
    if row["status"] == "WRONG":
        return f"WRONG (tol {row['tol']:.1e})"
    if row["status"] == "ERROR":
        return f"ERROR: {row['error']}"
    return row["status"]


def format_table(rows: Sequence[dict]) -> str:
    """The run's rows as a fixed-width text table."""
    header = ("shape", "layout", "dtype", "kernel", "TFLOP/s", "torch.mm", "ratio", "%peak", "%BW", "rel_err", "status")
    lines = [
        (
            "x".join(str(r[d]) for d in "MNK"), r["layout"], r["dtype"], r["kernel"],
            _fmt(r["tflops"], ".3g"), _fmt(r["torch_tflops"], ".3g"), _fmt(r["ratio"], ".3f"),
            _fmt(r["pct_peak"], ".1f"), _fmt(r["bw_pct"], ".1f"), _fmt(r["rel_err"], ".1e"),
            _status_text(r),
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    numeric = {4, 5, 6, 7, 8, 9}

    def fmt_line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([fmt_line(header), fmt_line(["-" * w for w in widths])] + [fmt_line(line) for line in lines])


def plot_record(record: dict, out_dir: Path, slug: str) -> list[Path]:
    """PNG plots of a record; returns the files written. Without matplotlib: a warning, nothing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_mm: warning: --plot needs matplotlib (pip install matplotlib); no plots written", file=sys.stderr)
        return []
    written = []
    for path, plot in ((out_dir / f"{slug}-square.png", _plot_square), (out_dir / f"{slug}-ratio.png", _plot_ratio)):
        fig = plot(plt, record)
        if fig is None:
            print(f"bench_mm: no rows for {path.name} in the record; plot skipped", file=sys.stderr)
            continue
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _mm_rows(record: dict, **match: Any) -> list[dict]:
    return [r for r in record["rows"]
            if r.get("op") == OP and r.get("status") == "OK" and all(r.get(k) == v for k, v in match.items())]


def _label_2_and_5(value: float, _pos: int) -> str:
    """Minor-tick label of a log axis: only 2x and 5x a power of ten, so labels do not crowd."""
    if value <= 0:
        return ""
    return f"{value:g}" if round(value / 10 ** math.floor(math.log10(value))) in (2, 5) else ""


def _plot_square(plt: Any, record: dict) -> Any:
    """TFLOP/s against size, per dtype: one line per kernel, torch.mm dashed, the peak dotted."""
    square = set(PRESETS["square"])
    rows = [r for r in _mm_rows(record, layout="NN") if (r["M"], r["N"], r["K"]) in square]
    dtypes = [d for d in DTYPE_ORDER if any(r["dtype"] == d for r in rows)]
    if not dtypes:
        return None
    from matplotlib.ticker import FuncFormatter

    meta = record.get("metadata", {})
    ncols = min(2, len(dtypes))
    nrows = math.ceil(len(dtypes) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 4.4 * nrows), squeeze=False)
    for ax in axes.flat[len(dtypes):]:
        ax.set_visible(False)
    for ax, dtype in zip(axes.flat, dtypes):
        drows = [r for r in rows if r["dtype"] == dtype]
        kernels = sorted({r["kernel"] for r in drows}, key=lambda k: (k != "auto", k))
        for kernel in kernels:
            pts = sorted((r["M"], r["tflops"]) for r in drows if r["kernel"] == kernel)
            ax.plot(*zip(*pts), marker="o", label=kernel)
        # Each row carries the torch.mm timing from its own run; merged runs can differ slightly.
        sizes = sorted({r["M"] for r in drows})
        torch_pts = [(s, statistics.median(r["torch_tflops"] for r in drows if r["M"] == s)) for s in sizes]
        ax.plot(*zip(*torch_pts), "k--", marker="s", label="torch.mm")
        peak = (meta.get("peak_tflops") or {}).get(dtype)
        if peak:
            ax.axhline(peak, color="r", linestyle=":", label=f"peak {peak:g}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_yscale("log")  # the textbook rungs sit two orders of magnitude below cuBLAS
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(_label_2_and_5))
        ax.set_xlabel("M = N = K")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{dtype}, NN")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"mm_tiled vs torch.mm on {meta.get('device', '?')}")
    _tight_below_suptitle(fig)
    return fig


def _tight_below_suptitle(fig: Any, title_inches: float = 0.5) -> None:
    """tight_layout ignores the suptitle; keep the panels out of its strip at the top."""
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - title_inches / fig.get_figheight()))


def _plot_ratio(plt: Any, record: dict) -> Any:
    """Heatmaps of auto / torch.mm over the llm and decode shapes: a row of panels per dtype."""
    from matplotlib.colors import TwoSlopeNorm

    rows = _mm_rows(record, layout="NN", kernel="auto")
    by_shape = {(r["dtype"], r["M"], r["N"], r["K"]): r["ratio"] for r in rows if r.get("ratio")}
    grids = (("llm", LLM_TOKENS, LLM_WEIGHTS, "tokens M"), ("decode", DECODE_M, DECODE_WEIGHTS, "M"))
    panels = []  # (dtype, preset, y label, row values, col labels, matrix)
    for dtype in DTYPE_ORDER:
        for preset, ms, weights, ylabel in grids:
            matrix = [[by_shape.get((dtype, m, n, k), math.nan) for k, n in weights] for m in ms]
            keep_r = [i for i, line in enumerate(matrix) if any(not math.isnan(v) for v in line)]
            keep_c = [j for j in range(len(weights)) if any(not math.isnan(matrix[i][j]) for i in keep_r)]
            if keep_r:
                panels.append((dtype, preset, ylabel, [ms[i] for i in keep_r],
                               [f"{weights[j][0]}→{weights[j][1]}" for j in keep_c],
                               [[matrix[i][j] for j in keep_c] for i in keep_r]))
    if not panels:
        return None
    values = [v for p in panels for line in p[5] for v in line if not math.isnan(v)]
    norm = TwoSlopeNorm(vmin=min(min(values), 0.5), vcenter=1.0, vmax=max(max(values), 1.5))
    cols = 2
    nrows = math.ceil(len(panels) / cols)
    panel_height = 0.45 * max(len(p[3]) for p in panels) + 1.8
    fig, axes = plt.subplots(nrows, cols, figsize=(6.0 * cols, panel_height * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (dtype, preset, ylabel, ys, xs, matrix) in zip(axes.flat, panels):
        image = ax.imshow(matrix, cmap="RdYlGn", norm=norm, aspect="auto")
        for i, line in enumerate(matrix):
            for j, v in enumerate(line):
                if not math.isnan(v):
                    ax.text(j, i, f"{v:.2g}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(xs)), xs)
        ax.set_yticks(range(len(ys)), [str(y) for y in ys])
        ax.set_xlabel("weight K→N (in→out features)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{preset}, {dtype}: auto / torch.mm")
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(f"mm_tiled(kernel='auto') / torch.mm, NN, on {record.get('metadata', {}).get('device', '?')}")
    _tight_below_suptitle(fig)
    return fig


# ---------------------------------------------------------------------------------------------
# Command line.


def _split(values: Optional[Sequence[str]]) -> list[str]:
    """Values given as repeated arguments and/or comma-separated lists, flattened."""
    return [v for value in values or () for v in value.replace(",", " ").split()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench_mm.py",
        description="Benchmark torch_gemm mm_tiled kernels against torch.mm on the same inputs.",
        epilog="Presets for --shapes: " + "; ".join(f"{k} ({len(v)} shapes)" for k, v in PRESETS.items()),
    )
    parser.add_argument("--dtype", nargs="+", default=["all"], metavar="DTYPE",
                        help="float32, tf32, bfloat16, float16, float64 or all (default: all = "
                             "float32,tf32,bfloat16,float16 on CUDA, float32,bfloat16,float16,float64 on CPU)")
    parser.add_argument("--kernel", nargs="+", default=["all"], metavar="NAME",
                        help="kernel names from torch_gemm.available_kernels(), or all (default)")
    parser.add_argument("--layout", nargs="+", metavar="LAYOUT",
                        help="NN, NT, TN, TT or all; first letter for a, second for b, T = transposed view "
                             "(default: NN)")
    parser.add_argument("--shapes", nargs="+", metavar="SHAPES",
                        help=f"presets ({', '.join(PRESETS)}) and/or MxNxK items, comma-separated "
                             "(default: square)")
    parser.add_argument("--quick", action="store_true",
                        help="a small fixed set (NN for every kernel, NT/TN/TT for auto); slow textbook "
                             "kernels skipped above 2*2048^3 FLOPs")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help="default: cuda if available, else cpu")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="directory of <device>.json/.csv records and plots (default: benchmarks/results)")
    parser.add_argument("--plot", action="store_true",
                        help="also write PNG plots of the merged record (needs matplotlib)")
    parser.add_argument("--peak-tflops", metavar="PEAK",
                        help="peak TFLOP/s for %%peak: one number for all dtypes or dtype=N pairs "
                             "(default: the table entry for the GPU)")
    parser.add_argument("--slow-gflop-cap", type=float, metavar="GFLOP",
                        help="skip naive/smem* kernels above this many GFLOP (default: "
                             f"{DEFAULT_SLOW_FLOP_CAP / 1e9:.0f}, with --quick "
                             f"{QUICK_SLOW_FLOP_CAP / 1e9:.1f}; inf for none)")
    parser.add_argument("--warmup-ms", type=float, default=Timing.warmup_ms,
                        help="warm-up time per measurement in ms (default: %(default)g, as do_bench)")
    parser.add_argument("--rep-ms", type=float, default=Timing.rep_ms,
                        help="time of the timed reps per measurement in ms (default: %(default)g, as do_bench)")
    return parser


@dataclass
class Config:
    """The validated command line."""

    device: torch.device
    dtypes: list[str]
    kernels_for: dict[str, list[str]]
    cases: list[Case]
    slow_flop_cap: float
    peak_override: dict[str, float]
    timing: Timing
    out: Path
    plot: bool
    quick: bool


def parse_args(argv: Optional[Sequence[str]]) -> Config:
    """Parse and validate the command line; bad input exits through ``argparse`` with a message."""
    parser = build_parser()
    args = parser.parse_args(argv)

    device_type = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device_type == "cuda":
        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no CUDA device")
        if not any(row["device"] == "cuda" for row in torch_gemm.kernel_table()):
            parser.error("--device cuda: this build of torch_gemm has no CUDA kernels (rebuild it on a "
                         "machine with nvcc, see setup.py)")
    device = torch.device(device_type)

    dtype_names = _split(args.dtype)
    for d in dtype_names:
        if d != "all" and d not in TORCH_DTYPES:
            parser.error(f"--dtype: unknown dtype {d!r}; choose from {', '.join(DTYPE_ORDER)} or all")
    dtypes = list(dict.fromkeys(ALL_DTYPES[device_type] if "all" in dtype_names else dtype_names))
    if device_type == "cpu" and "tf32" in dtypes:
        print("bench_mm: skipping dtype tf32 on the CPU: TF32 is a CUDA tensor-core mode", file=sys.stderr)
        dtypes.remove("tf32")

    available = {d: torch_gemm.available_kernels(device, TORCH_DTYPES[d], allow_tf32=d == "tf32") for d in dtypes}
    kernel_names = _split(args.kernel)
    if "all" in kernel_names:
        kernels_for = available
    else:
        known = {k for names in available.values() for k in names}
        for k in kernel_names:
            if k not in known:
                listed = ", ".join(dict.fromkeys(k2 for names in available.values() for k2 in names))
                parser.error(f"--kernel: {k!r} is not available for {device_type} "
                             f"{'/'.join(dtypes) or 'any dtype'}; available: {listed}")
        kernels_for = {d: [k for k in available[d] if k in kernel_names] for d in dtypes}
        for d in dtypes:
            missing = [k for k in kernel_names if k not in available[d]]
            if missing:
                print(f"bench_mm: {', '.join(missing)} not available for {d}; skipped there", file=sys.stderr)

    if args.quick:
        if args.shapes or args.layout:
            parser.error("--quick picks its own shapes and layouts; drop --shapes/--layout or --quick")
        cases = quick_cases(device_type)
    else:
        try:
            shapes = parse_shapes(args.shapes or ["square"])
        except ValueError as e:
            parser.error(f"--shapes: {e}")
        layouts = _split(args.layout) or ["NN"]
        for lay in layouts:
            if lay.upper() != "ALL" and lay.upper() not in LAYOUTS:
                parser.error(f"--layout: unknown layout {lay!r}; choose from {', '.join(LAYOUTS)} or all")
        if any(lay.upper() == "ALL" for lay in layouts):
            layouts = list(LAYOUTS)
        else:
            layouts = list(dict.fromkeys(lay.upper() for lay in layouts))
        cases = [Case(*s, lay) for s in shapes for lay in layouts]

    if args.slow_gflop_cap is not None:
        if not args.slow_gflop_cap >= 0:
            parser.error("--slow-gflop-cap must be a non-negative number (or inf)")
        cap = args.slow_gflop_cap * 1e9
    else:
        cap = QUICK_SLOW_FLOP_CAP if args.quick else DEFAULT_SLOW_FLOP_CAP
    try:
        peak_override = parse_peak_override(args.peak_tflops) if args.peak_tflops else {}
    except ValueError as e:
        parser.error(f"--peak-tflops: {e}")
    if not (args.warmup_ms >= 0 and args.rep_ms > 0):
        parser.error("--warmup-ms must be >= 0 and --rep-ms > 0")

    return Config(device, dtypes, kernels_for, cases, cap, peak_override,
                  Timing(args.warmup_ms, args.rep_ms), args.out, args.plot, args.quick)


def run(argv: Optional[Sequence[str]] = None) -> list[dict]:
    """Run the benchmark for a command line; returns this run's rows (also merged into the
    record on disk)."""
    cfg = parse_args(argv)
    device = cfg.device
    name, slug = device_name(device), device_slug(device)
    tasks, notes = build_plan(cfg.cases, cfg.dtypes, cfg.kernels_for, cfg.slow_flop_cap)
    for note in notes:
        print(f"bench_mm: {note}")
    if not tasks:
        print("bench_mm: nothing to measure")
        return []

    # Read the old record first: a corrupt one stops the run before the sweep, not after it.
    cfg.out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = cfg.out / f"{slug}.json", cfg.out / f"{slug}.csv"
    old_record = load_record(json_path)

    peak_entry, peaks = lookup_peak(name) if device.type == "cuda" else (None, {})
    peaks.update(cfg.peak_override)
    peak_source = "--peak-tflops" if cfg.peak_override else peak_entry
    commit, dirty = git_state()
    torch.manual_seed(0)
    copy_gbps = measure_copy_gbps(device, cfg.timing)
    peak_text = ", ".join(f"{d} {v:g}" for d, v in peaks.items()) or "unknown (set --peak-tflops)"
    print(f"bench_mm: {name} | {pair_timer_name(device)} | copy bandwidth {copy_gbps:.0f} GB/s | "
          f"peak TFLOP/s: {peak_text}" + (f" ({peak_source})" if peak_source else ""))

    rows: list[dict] = []
    progress = Progress(sum(1 + len(t.kernels) for t in tasks))
    try:
        for task in tasks:
            outcomes, torch_outcome, tol = run_task(task, device, cfg.timing, progress)
            rows += make_rows(task.case, task.dtype, outcomes, torch_outcome, tol=tol,
                              peak_tflops=peaks.get(task.dtype), copy_gbps=copy_gbps, git_commit=commit)
    finally:
        progress.close()

    metadata = run_metadata(name, device, commit, dirty, cfg.timing, "benchmarks/bench_mm.py", argv)
    metadata.update({
        "timer": pair_timer_name(device),
        # allow_tf32 as set for both ours and torch.mm, per dtype of the rows.
        "tf32": {"float32": False, "tf32": True} if device.type == "cuda" else {"float32": False},
        "l2_bytes": l2_bytes(device),
        "copy_gbps": copy_gbps,
        "peak_tflops": peaks,
        "peak_source": peak_source,
        "slow_gflop_cap": cfg.slow_flop_cap / 1e9,
        "quick": cfg.quick,
    })

    record = merge_records(old_record, metadata, rows)
    write_record(record, json_path, csv_path)

    print(format_table(rows))
    bad = [r for r in rows if r["status"] != "OK"]
    if bad:
        print(f"bench_mm: {len(bad)} of {len(rows)} measurements not OK (WRONG: failed the float64 check, "
              "not timed; ERROR: the kernel raised)")
    print(f"bench_mm: wrote {json_path} ({len(record['rows'])} rows after merge) and {csv_path}")
    if cfg.plot:
        for path in plot_record(record, cfg.out, slug):
            print(f"bench_mm: wrote {path}")
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command-line entry: 0 when every kernel was correct, 1 otherwise."""
    rows = run(argv)
    return 0 if all(r["status"] == "OK" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
