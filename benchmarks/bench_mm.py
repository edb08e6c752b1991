"""Benchmark torch_gemm's mm_tiled kernels against torch.mm (cuBLAS on CUDA) on the same inputs.

Every kernel's output is first checked against a float64 reference; a wrong kernel is reported
WRONG and never timed. On CUDA each kernel is timed with CUDA events (median, warm-up, L2 flushed
before every rep), interleaved rep by rep with torch.mm on the same inputs, same dtype and same
TF32 setting; input sets are rotated where one fits in L2. On a machine without CUDA the same
command line times the CPU kernels against torch.mm on the CPU (time.perf_counter, median).
docs/benchmarks.md describes the method, the columns and the records.

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
and decode shapes). ``<out>`` is ``./bench_results`` unless ``--out`` says otherwise; ``--record``
writes into the checkout's ``benchmarks/results``, which ``benchmarks/report.py`` turns into the
README table. The exit status is 1 when any kernel was WRONG or failed, so scripts can gate on it.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import torch

import torch_gemm

from harness import cli, device as devices, gate, peaks, plots, records, table, timing
from harness.cli import Shape
from harness.dtypes import DTYPE_ORDER, TORCH_DTYPES, float32_mode
from harness.timing import Timing

OP = "mm_tiled"
PROGRAM = "bench_mm"


# What "--dtype all" means per device: tf32 is a CUDA tensor-core mode, float64 is there on the
# CPU for completeness (on a GPU it is a gradcheck dtype, not one we tune for).
ALL_DTYPES = {
    "cuda": ("float32", "tf32", "bfloat16", "float16"),
    "cpu": ("float32", "bfloat16", "float16", "float64"),
}

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
    """Shapes from preset names and ``MxNxK`` items (``harness.cli.parse_shapes``)."""
    return cli.parse_shapes(spec, PRESETS)


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
            slow = [k for k in wanted if is_slow_kernel(k) and peaks.flops(*case.shape) > slow_flop_cap]
            if slow:
                notes.append(
                    f"skipped {', '.join(slow)} at {'x'.join(map(str, case.shape))} {case.layout} {dtype}: "
                    f"{peaks.flops(*case.shape) / 1e9:.1f} GFLOP > slow-kernel cap {slow_flop_cap / 1e9:.1f} GFLOP "
                    "(--slow-gflop-cap)"
                )
            kernels = tuple(k for k in wanted if k not in slow)
            if kernels:
                tasks.append(Task(dtype, case, kernels))
    return tasks, notes



def run_task(task: Task, device: torch.device, budget: Timing,
             progress: cli.Progress) -> tuple[list[Outcome], Outcome, float]:
    """Check, then time, torch.mm and every kernel of one task on the same inputs.

    Returns (kernel outcomes, torch.mm's outcome, tolerance). A kernel is timed only after its
    output on the first input set passed the float64 check."""
    case, dtype = task.case, task.dtype
    shape_text = f"{dtype} {case.layout} {'x'.join(map(str, case.shape))}"
    torch_dtype = TORCH_DTYPES[dtype]
    with float32_mode(dtype):
        n_sets = timing.n_input_sets(peaks.bytes_moved(*case.shape, dtype), devices.l2_bytes(device))
        sets = [make_operands(case, torch_dtype, device) for _ in range(n_sets)]
        a0, b0 = sets[0]
        ref = gate.reference(a0, b0)
        torch_err = gate.rel_error(torch.mm(a0, b0), ref)
        tol = gate.tolerance(dtype, torch_err)
        torch_fn = timing.rotating(torch.mm, sets)
        outcomes = []
        for kernel in task.kernels:
            ours = functools.partial(_ours, kernel=kernel)
            try:
                # The check runs inside the try: an asynchronous CUDA fault of the kernel
                # surfaces at the check's synchronizing .item() and belongs to this kernel.
                ok, err = gate.check_correct(ours(a0, b0), ref, tol)
                if ok:
                    ms, torch_ms = timing.time_interleaved([timing.rotating(ours, sets), torch_fn], device, budget)
                    outcomes.append(Outcome(kernel, "OK", ms, err, torch_ms=torch_ms))
                else:
                    outcomes.append(Outcome(kernel, "WRONG", rel_err=err))
            except RuntimeError as e:  # TORCH_CHECK failures, CUDA errors, out of memory
                outcomes.append(Outcome(kernel, "ERROR", error=gate.error_text(e)))
            progress.step(f"{shape_text} {kernel}")
        # torch.mm's own figure, for the rows of kernels that were not timed: the median of its
        # interleaved times, or timed alone where no kernel was.
        paired = [o.torch_ms for o in outcomes if o.torch_ms is not None]
        torch_ms = statistics.median(paired) if paired else timing.time_ms(torch_fn, device, budget)
        torch_outcome = Outcome("torch.mm", "OK", torch_ms, torch_err)
        progress.step(f"{shape_text} torch.mm")
    return outcomes, torch_outcome, tol


def _ours(a: torch.Tensor, b: torch.Tensor, *, kernel: str) -> torch.Tensor:
    # Looked up at call time (not bound at import) so tests can substitute a wrong kernel.
    return torch_gemm.mm_tiled(a, b, kernel=kernel)


def make_operands(case: Case, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh randn operands in the case's layout: 'T' makes the operand a transposed view."""
    M, N, K = case.shape

    def randn(rows: int, cols: int, transposed: bool) -> torch.Tensor:
        if transposed:
            return torch.randn(cols, rows, dtype=dtype, device=device).t()
        return torch.randn(rows, cols, dtype=dtype, device=device)

    return randn(M, K, case.layout[0] == "T"), randn(K, N, case.layout[1] == "T")


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
    rows = []
    for o in outcomes:
        torch_ms = o.torch_ms if o.torch_ms is not None else torch_outcome.ms
        torch_tflops = peaks.tflops_of(M, N, K, torch_ms) if torch_ms else None
        ms = o.ms if o.status == "OK" else None
        tflops = peaks.tflops_of(M, N, K, ms) if ms else None
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
            "ms": ms,
            "torch_ms": torch_ms,
            "rel_err": gate.finite_or_none(o.rel_err),
            "torch_rel_err": gate.finite_or_none(torch_outcome.rel_err),
            "tol": tol,
            "pct_peak": 100.0 * tflops / peak_tflops if tflops and peak_tflops else None,
            "bw_pct": peaks.bw_pct(M, N, K, dtype, ms, copy_gbps),
            "torch_bw_pct": peaks.bw_pct(M, N, K, dtype, torch_ms, copy_gbps),
            "error": o.error,
            "git_commit": git_commit,
        })
    return rows


def _row_order(row: dict) -> tuple:
    dtype_rank = DTYPE_ORDER.index(row["dtype"]) if row.get("dtype") in DTYPE_ORDER else len(DTYPE_ORDER)
    return (row.get("op", ""), dtype_rank, row.get("layout", ""), row.get("M", 0), row.get("N", 0),
            row.get("K", 0), row.get("kernel") != "auto", row.get("kernel", ""))


def merge_records(old: Optional[dict], metadata: dict, rows: Sequence[dict]) -> dict:
    """Rows of this run replace old rows with the same op, kernel, dtype, layout and shape; other
    old rows stay; this run's metadata keys replace the old ones."""
    return records.merge_records(old, metadata, rows, key=records.key_of(ROW_KEY), order=_row_order)


# ---------------------------------------------------------------------------------------------
# Output.

SLOW_MARK = "*"
LEGEND = (
    ("layout", "NN, NT, TN, TT: T = that operand (a, then b) is a transposed view"),
    ("TFLOP/s", "2·M·N·K / median time of torch_gemm's kernel"),
    ("torch.mm", "the same for torch.mm, timed in the same run on the same inputs (interleaved on CUDA)"),
    ("ratio", "torch_gemm TFLOP/s / torch.mm TFLOP/s: above 1, torch_gemm is faster"),
    ("%peak", "torch_gemm TFLOP/s in % of the GPU's datasheet dense peak for the dtype (-: not known)"),
    ("%BW", "bandwidth-bound rows (M <= 256): A, B and C bytes / time, in % of the copy bandwidth measured"),
    ("rel_err", "|C - C64| / |C64| against the float64 product; WRONG: above the dtype's bound, not timed"),
)


def format_table(rows: Sequence[dict], device_type: str = "cuda") -> str:
    """The run's rows as a fixed-width text table, with the legend of its columns under it. A
    ratio against a known-slow torch path (``device.torch_slow_path``) carries SLOW_MARK."""
    header = ("shape", "layout", "dtype", "kernel", "TFLOP/s", "torch.mm", "ratio", "%peak", "%BW", "rel_err", "status")
    slow = {r["dtype"]: devices.torch_slow_path(device_type, r["dtype"]) for r in rows}
    lines = [
        (
            "x".join(str(r[d]) for d in "MNK"), r["layout"], r["dtype"], r["kernel"],
            table.fmt(r["tflops"], ".3g"), table.fmt(r["torch_tflops"], ".3g"),
            table.fmt(r["ratio"], ".3f") + (SLOW_MARK if slow[r["dtype"]] and r["ratio"] else ""),
            table.fmt(r["pct_peak"], ".1f"), table.fmt(r["bw_pct"], ".1f"), table.fmt(r["rel_err"], ".1e"),
            table.status_text(r),
        )
        for r in rows
    ]
    entries = list(LEGEND)
    for dtype, reason in slow.items():
        if reason:
            entries.append((SLOW_MARK, f"{reason}: the ratio measures torch's slow path, not a fast kernel of ours"))
    return "\n".join([
        table.fixed_width(header, lines, numeric={4, 5, 6, 7, 8, 9}),
        "Each row: a torch_gemm kernel (mm_tiled(kernel=...)) against torch.mm, same inputs, same run.",
        table.legend(entries),
        "Method and columns: docs/benchmarks.md",
    ])


def plot_record(record: dict, out_dir: Path, slug: str) -> list[Path]:
    """PNG plots of a record; returns the files written. Without matplotlib: a warning, nothing."""
    plt = plots.pyplot(PROGRAM)
    if plt is None:
        return []
    written = []
    for path, plot in ((out_dir / f"{slug}-square.png", _plot_square), (out_dir / f"{slug}-ratio.png", _plot_ratio)):
        fig = plot(plt, record)
        if fig is None:
            print(f"{PROGRAM}: no rows for {path.name} in the record; plot skipped", file=sys.stderr)
            continue
        written.append(plots.save(plt, fig, path))
    return written


def _mm_rows(record: dict, **match: Any) -> list[dict]:
    return [r for r in record["rows"]
            if r.get("op") == OP and r.get("status") == "OK" and all(r.get(k) == v for k, v in match.items())]


def _plot_square(plt: Any, record: dict) -> Any:
    """TFLOP/s against size, per dtype: one line per kernel, torch.mm dashed, the peak dotted."""
    square = set(PRESETS["square"])
    rows = [r for r in _mm_rows(record, layout="NN") if (r["M"], r["N"], r["K"]) in square]
    dtypes = [d for d in DTYPE_ORDER if any(r["dtype"] == d for r in rows)]
    if not dtypes:
        return None
    meta = record.get("metadata", {})
    fig, axes = plots.panels(plt, len(dtypes), 6.0, 4.4)
    for ax, dtype in zip(axes, dtypes):
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
        plots.log_y(ax)  # the textbook rungs sit two orders of magnitude below cuBLAS
        ax.set_xlabel("M = N = K")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{dtype}, NN")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"mm_tiled vs torch.mm on {meta.get('device', '?')}")
    return fig


def _plot_ratio(plt: Any, record: dict) -> Any:
    """Heatmaps of auto / torch.mm over the llm and decode shapes: a row of panels per dtype."""
    from matplotlib.colors import TwoSlopeNorm

    rows = _mm_rows(record, layout="NN", kernel="auto")
    by_shape = {(r["dtype"], r["M"], r["N"], r["K"]): r["ratio"] for r in rows if r.get("ratio")}
    grids = (("llm", LLM_TOKENS, LLM_WEIGHTS, "tokens M"), ("decode", DECODE_M, DECODE_WEIGHTS, "M"))
    found = []  # (dtype, preset, y label, row values, col labels, matrix)
    for dtype in DTYPE_ORDER:
        for preset, ms, weights, ylabel in grids:
            matrix = [[by_shape.get((dtype, m, n, k), math.nan) for k, n in weights] for m in ms]
            keep_r = [i for i, line in enumerate(matrix) if any(not math.isnan(v) for v in line)]
            keep_c = [j for j in range(len(weights)) if any(not math.isnan(matrix[i][j]) for i in keep_r)]
            if keep_r:
                found.append((dtype, preset, ylabel, [ms[i] for i in keep_r],
                              [f"{weights[j][0]}→{weights[j][1]}" for j in keep_c],
                              [[matrix[i][j] for j in keep_c] for i in keep_r]))
    if not found:
        return None
    values = [v for p in found for line in p[5] for v in line if not math.isnan(v)]
    norm = TwoSlopeNorm(vmin=min(min(values), 0.5), vcenter=1.0, vmax=max(max(values), 1.5))
    panel_height = 0.45 * max(len(p[3]) for p in found) + 1.8
    fig, axes = plots.panels(plt, len(found), 6.0, panel_height)
    for ax, (dtype, preset, ylabel, ys, xs, matrix) in zip(axes, found):
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
    return fig


# ---------------------------------------------------------------------------------------------
# Command line.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench_mm.py",
        description="Benchmark torch_gemm mm_tiled kernels against torch.mm on the same inputs "
                    "(method and columns: docs/benchmarks.md).",
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
    cli.add_output_args(parser, "<device>.json/.csv and plots")
    parser.add_argument("--plot", action="store_true",
                        help="also write PNG plots of the merged record (needs matplotlib)")
    parser.add_argument("--peak-tflops", metavar="PEAK",
                        help="peak TFLOP/s for %%peak: one number for all dtypes or dtype=N pairs "
                             "(default: the table entry for the GPU)")
    parser.add_argument("--slow-gflop-cap", type=float, metavar="GFLOP",
                        help="skip naive/smem* kernels above this many GFLOP (default: "
                             f"{DEFAULT_SLOW_FLOP_CAP / 1e9:.0f}, with --quick "
                             f"{QUICK_SLOW_FLOP_CAP / 1e9:.1f}; inf for none)")
    cli.add_timing_args(parser)
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
    budget: Timing
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
            parser.error(f"--device cuda: {devices.no_cuda_kernels_message()}")
    device = torch.device(device_type)

    dtype_names = cli.split_list(args.dtype)
    for d in dtype_names:
        if d != "all" and d not in TORCH_DTYPES:
            parser.error(f"--dtype: unknown dtype {d!r}; choose from {', '.join(DTYPE_ORDER)} or all")
    dtypes = list(ALL_DTYPES[device_type] if "all" in dtype_names else dtype_names)
    for cuda_only in ("tf32", "float32-3xtf32"):
        if device_type == "cpu" and cuda_only in dtypes:
            print(f"{PROGRAM}: skipping dtype {cuda_only} on the CPU: a CUDA tensor-core mode", file=sys.stderr)
            dtypes.remove(cuda_only)

    available = {d: torch_gemm.available_kernels(device, TORCH_DTYPES[d], allow_tf32=d == "tf32") for d in dtypes}
    kernel_names = cli.split_list(args.kernel)
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
                print(f"{PROGRAM}: {', '.join(missing)} not available for {d}; skipped there", file=sys.stderr)

    if args.quick:
        if args.shapes or args.layout:
            parser.error("--quick picks its own shapes and layouts; drop --shapes/--layout or --quick")
        cases = quick_cases(device_type)
    else:
        try:
            shapes = parse_shapes(args.shapes or ["square"])
        except ValueError as e:
            parser.error(f"--shapes: {e}")
        layouts = [lay.upper() for lay in cli.split_list(args.layout)] or ["NN"]
        for lay in layouts:
            if lay != "ALL" and lay not in LAYOUTS:
                parser.error(f"--layout: unknown layout {lay!r}; choose from {', '.join(LAYOUTS)} or all")
        layouts = list(LAYOUTS) if "ALL" in layouts else list(dict.fromkeys(layouts))
        cases = [Case(*s, lay) for s in shapes for lay in layouts]

    if args.slow_gflop_cap is not None:
        if not args.slow_gflop_cap >= 0:
            parser.error("--slow-gflop-cap must be a non-negative number (or inf)")
        cap = args.slow_gflop_cap * 1e9
    else:
        cap = QUICK_SLOW_FLOP_CAP if args.quick else DEFAULT_SLOW_FLOP_CAP
    try:
        peak_override = peaks.parse_peak_override(args.peak_tflops) if args.peak_tflops else {}
    except ValueError as e:
        parser.error(f"--peak-tflops: {e}")

    return Config(device, dtypes, kernels_for, cases, cap, peak_override, cli.budget_from(args, parser),
                  cli.output_dir(args, parser), args.plot, args.quick)


def run(argv: Optional[Sequence[str]] = None) -> list[dict]:
    """Run the benchmark for a command line; returns this run's rows (also merged into the
    record on disk)."""
    cfg = parse_args(argv)
    device = cfg.device
    name, slug = devices.device_name(device), devices.device_slug(device)
    for line in devices.build_lines(device, cfg.kernels_for):
        print(f"{PROGRAM}: {line}")
    tasks, notes = build_plan(cfg.cases, cfg.dtypes, cfg.kernels_for, cfg.slow_flop_cap)
    for note in notes:
        print(f"{PROGRAM}: {note}")
    if not tasks:
        print(f"{PROGRAM}: nothing to measure")
        return []

    # Read the old record first: a corrupt one stops the run before the sweep, not after it.
    cfg.out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = cfg.out / f"{slug}.json", cfg.out / f"{slug}.csv"
    old_record = records.load_record(json_path, PROGRAM)

    peak_entry, peak_tflops = peaks.lookup_peak(name) if device.type == "cuda" else (None, {})
    peak_tflops.update(cfg.peak_override)
    peak_source = "--peak-tflops" if cfg.peak_override else peak_entry
    commit, dirty = records.git_state()
    torch.manual_seed(0)
    copy_gbps = peaks.measure_copy_gbps(device, cfg.budget)
    peak_text = ", ".join(f"{d} {v:g}" for d, v in peak_tflops.items()) or "unknown (set --peak-tflops)"
    print(f"{PROGRAM}: {name} | {timing.pair_timer_name(device)} | copy bandwidth {copy_gbps:.0f} GB/s | "
          f"peak TFLOP/s: {peak_text}" + (f" ({peak_source})" if peak_source else ""))
    print(f"{PROGRAM}: {cli.output_note(cfg.out)}")

    rows: list[dict] = []
    progress = cli.Progress(sum(1 + len(t.kernels) for t in tasks))
    try:
        for task in tasks:
            outcomes, torch_outcome, tol = run_task(task, device, cfg.budget, progress)
            rows += make_rows(task.case, task.dtype, outcomes, torch_outcome, tol=tol,
                              peak_tflops=peak_tflops.get(task.dtype), copy_gbps=copy_gbps, git_commit=commit)
    finally:
        progress.close()

    metadata = records.run_metadata(devices.device_fields(device), commit, dirty, timer=timing.pair_timer_name(device),
                                    script="benchmarks/bench_mm.py", argv=argv, warmup_ms=cfg.budget.warmup_ms,
                                    rep_ms=cfg.budget.rep_ms)
    metadata.update({
        # allow_tf32 as set for both ours and torch.mm, per dtype of the rows.
        "tf32": {"float32": False, "tf32": True} if device.type == "cuda" else {"float32": False},
        "l2_bytes": devices.l2_bytes(device),
        "copy_gbps": copy_gbps,
        "peak_tflops": peak_tflops,
        "peak_source": peak_source,
        "slow_gflop_cap": cfg.slow_flop_cap / 1e9,
        "quick": cfg.quick,
    })

    record = merge_records(old_record, metadata, rows)
    records.write_record(record, json_path, csv_path, ROW_FIELDS)

    print(format_table(rows, device.type))
    bad = [r for r in rows if r["status"] != "OK"]
    if bad:
        print(f"{PROGRAM}: {len(bad)} of {len(rows)} measurements not OK (WRONG: failed the float64 check, "
              "not timed; ERROR: the kernel raised)")
    print(f"{PROGRAM}: wrote {json_path} ({len(record['rows'])} rows after merge) and {csv_path}")
    if cfg.plot:
        for path in plot_record(record, cfg.out, slug):
            print(f"{PROGRAM}: wrote {path}")
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command-line entry: 0 when every kernel was correct, 1 otherwise."""
    rows = run(argv)
    return 0 if all(r["status"] == "OK" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
