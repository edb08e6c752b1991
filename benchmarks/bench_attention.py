"""Benchmark an attention block and a decoder layer with their projections on torch_gemm against
the same modules on torch's nn.Linear (cuBLAS), and the cost of linear_tiled's fused bias.

Each module is built once (torch_gemm.attention.MultiHeadAttention, or a DecoderLayer: pre-norm
attention and a SwiGLU MLP of 3.5x the width, as Llama-3-8B's 4096 -> 14336); a twin of it that
shares its Parameters (no copies) is swapped with ``torch_gemm.swap_linear`` and checked against
the torch result, then the two are timed. Passes:
``fwd`` (inference: under ``torch.no_grad``) and ``fwd+bwd`` (forward, then the gradients of the
input and of every parameter for a random upstream gradient). Heads are width / head_dim (128).

Timing as bench_mm.py (docs/benchmarks.md): CUDA events, median, L2 flushed before every rep, the
torch module and its swapped twin (for linear_bias: with the bias, without it, and torch's F.linear)
interleaved rep by rep, so that both sides meet the same clocks (timed one after the other, the
first runs on a cooler GPU); float32 rows have TF32 off for both sides (dtype ``tf32`` turns it
on for both). A swapped module whose output (and, for
fwd+bwd, input gradient) differs from torch's by more than a dtype's sanity bound is reported
WRONG and not timed; the numerics themselves are tested in tests/test_attention_model.py.

Usage::

    python benchmarks/bench_attention.py --quick          # width 4096, 4096 tokens, both dtypes
    python benchmarks/bench_attention.py                  # bf16, fp32 x widths 2048..8192 x tokens 2048..16384
    python benchmarks/bench_attention.py --dtypes bfloat16 --widths 4096 --tokens 8192 --batch 4
    python benchmarks/bench_attention.py --modules decoder_layer --swap all    # the MLP too

Rows merge into ``<out>/<gpu>-attention.json`` (same metadata block as bench_mm.py; a row per
module, pass, dtype, width, tokens and batch) with ``<gpu>-attention.csv`` and the plot
``<gpu>-attention.png`` beside it; ``<out>`` is ``./bench_results`` unless ``--out`` says
otherwise (``--record``: the checkout's ``benchmarks/results``). In every row ``ratio = baseline_ms / ms``: for the
``attention`` and ``decoder_layer`` rows the baseline is torch (``torch_ms``), so above 1 means
torch_gemm is faster; for the ``linear_bias`` rows (linear_tiled with a bias against without
one, at width 4096, 8192 tokens, bfloat16 by default) it is the same call without the bias, so
1 means the fused bias is free. The exit status is 1 when a measurement was WRONG or failed;
without CUDA the script says so and exits 0 (``--device cpu`` runs it on the CPU at whatever
sizes are given, to test the script itself).
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
import torch.nn.functional as F

import torch_gemm
from torch_gemm.attention import DecoderConfig, DecoderLayer, MultiHeadAttention
from torch_gemm.nn import swap_linear

from harness import cli, device as devices, gate, plots, records, table, timing
from harness.dtypes import TORCH_DTYPES, tf32_mode
from harness.timing import Timing

PROGRAM = "bench_attention"

MODULES = ("attention", "decoder_layer", "linear_bias")
PASSES = ("fwd", "fwd+bwd")
DTYPES = ("bfloat16", "float32", "tf32", "float16")
DEFAULT_DTYPES = ("bfloat16", "float32")
DEFAULT_WIDTHS = (2048, 4096, 8192)
DEFAULT_TOKENS = (2048, 4096, 8192, 16384)
QUICK = {"dtypes": DEFAULT_DTYPES, "widths": (4096,), "tokens": (4096,)}
HEAD_DIM = 128
# SwiGLU width over model width: Llama-3-8B's 14336 / 4096, rounded to a multiple of this.
MLP_RATIO = 3.5
MLP_MULTIPLE = 256
# The fused-bias case: one linear_tiled at the width of a 7-8B model's attention projections.
BIAS_WIDTH, BIAS_TOKENS, BIAS_DTYPE = 4096, 8192, "bfloat16"
SWAP_CHOICES = ("attention", "all")

# Largest relative difference ‖ours − torch‖ / ‖torch‖ of the checked outputs before a
# measurement counts as WRONG. A sanity bound that a broken kernel (errors of order 1) cannot
# pass, not the numerics test: both sides round, so 16-bit results differ by a few units of
# the dtype's rounding (2^-8 for bfloat16) after a layer's worth of operations.
CHECK_TOL = {"float32": 1e-4, "tf32": 2e-2, "bfloat16": 3e-2, "float16": 1e-2}

ROW_FIELDS = (
    "module", "pass", "dtype", "width", "tokens", "batch", "seq_len", "heads", "intermediate",
    "kernel", "swapped", "status", "ms", "torch_ms", "ratio", "baseline", "baseline_ms",
    "tflops", "torch_tflops", "rel_diff", "tol", "error", "git_commit",
)
ROW_KEY = ("module", "pass", "dtype", "width", "tokens", "batch", "kernel", "swapped")


# ---------------------------------------------------------------------------------------------
# Cases and counting.


@dataclass(frozen=True)
class Case:
    """One module at one size; every requested pass is measured on it."""

    module: str
    dtype: str
    width: int
    tokens: int
    batch: int = 1

    @property
    def seq_len(self) -> int:
        return self.tokens // self.batch


def intermediate_size(width: int) -> int:
    """The SwiGLU width of a decoder layer: 3.5x, rounded to a multiple of 256 (4096 -> 14336),
    or of the width itself below 256 (the script's own tests run at tiny widths)."""
    multiple = min(MLP_MULTIPLE, width)
    return max(1, round(width * MLP_RATIO / multiple)) * multiple


def flops(case: Case, pass_name: str, head_dim: int = HEAD_DIM) -> float:
    """Model FLOPs of one call. Projections: 2 per weight element per token forward, 3x that
    with the backward (dx and dW). Causal attention: QKᵀ and PV over half the score matrix,
    2·batch·seq²·width forward, 3.5x that with the backward (flash-attention's count)."""
    width, tokens = case.width, case.tokens
    if case.module == "linear_bias":
        projection = 2.0 * tokens * width * width
        attention = 0.0
    else:
        weights = 4 * width * width
        if case.module == "decoder_layer":
            weights += 3 * width * intermediate_size(width)
        projection = 2.0 * tokens * weights
        attention = 2.0 * case.batch * case.seq_len**2 * width
    if pass_name == "fwd":
        return projection + attention
    return 3.0 * projection + 3.5 * attention


def tflops_of(flop_count: float, ms: Optional[float]) -> Optional[float]:
    return flop_count / (ms * 1e-3) / 1e12 if ms else None


def build_cases(
    modules: Sequence[str], dtypes: Sequence[str], widths: Sequence[int], tokens: Sequence[int], batch: int,
    bias_case: tuple[str, int, int],
) -> list[Case]:
    """Cases in sweep order (dtype outermost, so the TF32 switch flips rarely; width before
    tokens, so each width's weights are built once per module), then the fused-bias case."""
    cases = [Case(m, d, w, t, batch) for d in dtypes for m in modules if m != "linear_bias"
             for w in widths for t in tokens]
    if "linear_bias" in modules:
        bias_dtype, bias_width, bias_tokens = bias_case
        cases.append(Case("linear_bias", bias_dtype, bias_width, bias_tokens, 1))
    return cases


# ---------------------------------------------------------------------------------------------
# Modules, inputs and the measured calls.


def build_module(case: Case, head_dim: int, device: torch.device) -> torch.nn.Module:
    """The torch variant of a case's module, initialized by torch's defaults (seeded)."""
    dtype = TORCH_DTYPES[case.dtype]
    torch.manual_seed(0)
    heads = case.width // head_dim
    if case.module == "attention":
        return MultiHeadAttention(case.width, heads, causal=True, device=device, dtype=dtype)
    config = DecoderConfig(hidden_size=case.width, num_heads=heads, intermediate_size=intermediate_size(case.width))
    return DecoderLayer(config, device=device, dtype=dtype)


def module_step(module: torch.nn.Module, x: torch.Tensor, grad: torch.Tensor, pass_name: str) -> Callable[[], tuple]:
    """One measured call: the output (fwd), or the output and the gradients of x and of every
    parameter (fwd+bwd). Returns the tensors to check, output first."""
    if pass_name == "fwd":
        def forward() -> tuple:
            with torch.no_grad():
                return (module(x),)
        return forward
    inputs = [x, *module.parameters()]

    def forward_backward() -> tuple:
        out = module(x)
        return (out, *torch.autograd.grad(out, inputs, grad))
    return forward_backward


@dataclass(frozen=True)
class Measurement:
    """Times and check of one (case, pass): status OK (checked, then timed), WRONG (failed the
    check, not timed) or ERROR (raised; ``error`` holds the first line)."""

    status: str
    ms: Optional[float]
    baseline_ms: Optional[float]
    torch_ms: Optional[float]
    rel_diff: Optional[float]
    error: Optional[str] = None


def swapped_twin(module: torch.nn.Module, cfg: "Config") -> torch.nn.Module:
    """A copy of ``module`` holding the same Parameters (no copies), with its Linears swapped."""
    twin = copy.deepcopy(module, memo={id(p): p for p in module.parameters()})
    return swap_linear(twin, kernel=cfg.kernel, all_linear=cfg.swap == "all")


def measure_module(case: Case, pass_name: str, module: torch.nn.Module, x: torch.Tensor, grad: torch.Tensor,
                   cfg: "Config") -> Measurement:
    """The torch module (its result is the check's reference) and its swapped twin; the twin is
    timed, interleaved with torch, only once its result passed the check."""
    torch_step = module_step(module, x, grad, pass_name)
    reference = tuple(t.detach().clone() for t in torch_step()[:2])  # output, and x's gradient
    ours_step = module_step(swapped_twin(module, cfg), x, grad, pass_name)
    status, diff, error = gate.check_against(lambda: ours_step()[:2], reference, CHECK_TOL[case.dtype])
    if status == "OK":
        ms, torch_ms = timing.time_interleaved([ours_step, torch_step], cfg.device, cfg.budget)
    else:
        ms, torch_ms = None, timing.time_ms(torch_step, cfg.device, cfg.budget)
    return Measurement(status, ms, torch_ms, torch_ms, diff, error)


def measure_bias(case: Case, pass_name: str, cfg: "Config") -> Measurement:
    """linear_tiled with a bias against without one (the baseline), on the same x and weight;
    torch's F.linear with the bias beside them."""
    dtype = TORCH_DTYPES[case.dtype]
    gen = torch.Generator(device=cfg.device).manual_seed(0)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        t = torch.randn(*shape, device=cfg.device, generator=gen) * scale
        return t.to(dtype).requires_grad_(pass_name == "fwd+bwd")

    x = randn(case.tokens, case.width)
    weight = randn(case.width, case.width, scale=case.width**-0.5)
    bias = randn(case.width)
    grad = torch.randn(case.tokens, case.width, device=cfg.device, generator=gen).to(dtype)

    def step(linear: Callable[..., torch.Tensor], with_bias: bool) -> Callable[[], tuple]:
        args = (x, weight, bias) if with_bias else (x, weight)

        def call() -> tuple:
            if pass_name == "fwd":
                with torch.no_grad():
                    return (linear(*args),)
            out = linear(*args)
            return (out, *torch.autograd.grad(out, args, grad))
        return call

    ours = lambda *args: torch_gemm.linear_tiled(*args, kernel=cfg.kernel)  # noqa: E731
    tol = CHECK_TOL[case.dtype]
    torch_with = step(F.linear, True)
    ours_with, ours_without = step(ours, True), step(ours, False)
    status, diff, error = gate.check_against(ours_with, tuple(t.detach().clone() for t in torch_with()), tol)
    if status == "OK":
        reference = tuple(t.detach().clone() for t in step(F.linear, False)())
        status, diff_without, error = gate.check_against(ours_without, reference, tol)
        diff = diff_without if diff_without is None else max(diff, diff_without)
    if status != "OK":
        return Measurement(status, None, None, timing.time_ms(torch_with, cfg.device, cfg.budget), diff, error)
    ms, baseline_ms, torch_ms = timing.time_interleaved([ours_with, ours_without, torch_with], cfg.device,
                                                        cfg.budget)
    return Measurement(status, ms, baseline_ms, torch_ms, diff, error)


# ---------------------------------------------------------------------------------------------
# Rows and records.


def make_row(case: Case, pass_name: str, m: Measurement, cfg: "Config", git_commit: Optional[str]) -> dict:
    """One record row; ``ratio = baseline_ms / ms`` (baseline: torch, or linear_tiled without the
    bias for linear_bias rows)."""
    is_bias = case.module == "linear_bias"
    count = flops(case, pass_name, cfg.head_dim)
    ok = m.status == "OK"
    return {
        "module": case.module,
        "pass": pass_name,
        "dtype": case.dtype,
        "width": case.width,
        "tokens": case.tokens,
        "batch": case.batch,
        "seq_len": case.seq_len,
        "heads": None if is_bias else case.width // cfg.head_dim,
        "intermediate": intermediate_size(case.width) if case.module == "decoder_layer" else None,
        "kernel": cfg.kernel,
        "swapped": None if is_bias else ("all" if case.module == "attention" else cfg.swap),
        "status": m.status,
        "ms": m.ms if ok else None,
        "torch_ms": m.torch_ms,
        "ratio": m.baseline_ms / m.ms if ok and m.ms and m.baseline_ms else None,
        "baseline": "linear_tiled without bias" if is_bias else "torch",
        "baseline_ms": m.baseline_ms,
        "tflops": tflops_of(count, m.ms) if ok else None,
        "torch_tflops": tflops_of(count, m.torch_ms),
        "rel_diff": gate.finite_or_none(m.rel_diff),
        "tol": CHECK_TOL[case.dtype],
        "error": m.error,
        "git_commit": git_commit,
    }


def _row_order(row: dict) -> tuple:
    def rank(values: Sequence[str], value: Any) -> int:
        return values.index(value) if value in values else len(values)

    return (rank(MODULES, row.get("module")), rank(DTYPES, row.get("dtype")), row.get("width") or 0,
            row.get("tokens") or 0, row.get("batch") or 0, rank(PASSES, row.get("pass")))


def merge_records(old: Optional[dict], metadata: dict, rows: Sequence[dict]) -> dict:
    """Rows of this run replace old rows with the same key (module, pass, dtype, width, tokens,
    batch, kernel, swapped); other old rows stay; this run's metadata keys replace the old ones."""
    return records.merge_records(old, metadata, rows, key=records.key_of(ROW_KEY), order=_row_order)


# ---------------------------------------------------------------------------------------------
# Output.


LEGEND = (
    ("ms", "median time of one call with the projections on torch_gemm (swapped module) or of linear_tiled"),
    ("baseline ms", "the same for the baseline: torch's nn.Linear module (attention, decoder_layer), "
                    "linear_tiled without the bias (linear_bias)"),
    ("ratio", "baseline ms / ms: above 1, torch_gemm is faster (linear_bias: 1 = the fused bias is free)"),
    ("TFLOP/s", "the call's model FLOPs / ms; torch TFLOP/s the same for torch's side"),
    ("rel_diff", "largest |ours - torch| / |torch| of the output (and, fwd+bwd, x's gradient); "
                 "WRONG: beyond the dtype's sanity bound, not timed"),
)


def format_table(rows: Sequence[dict]) -> str:
    """The run's rows as a fixed-width text table, with the legend of its columns under it."""
    header = ("module", "pass", "dtype", "width", "tokens", "ms", "baseline ms", "ratio", "TFLOP/s",
              "torch TFLOP/s", "rel_diff", "status")
    lines = [(
        r["module"], r["pass"], r["dtype"], str(r["width"]), str(r["tokens"]), table.fmt(r["ms"], ".3f"),
        table.fmt(r["baseline_ms"], ".3f"), table.fmt(r["ratio"], ".3f"), table.fmt(r["tflops"], ".1f"),
        table.fmt(r["torch_tflops"], ".1f"), table.fmt(r["rel_diff"], ".1e"), table.status_text(r, ".0e"),
    ) for r in rows]
    return "\n".join([
        table.fixed_width(header, lines, numeric=set(range(3, 11))),
        "Each row: the module with its projections on torch_gemm against the same module on nn.Linear "
        "(same weights, inputs and run).",
        table.legend(LEGEND),
        "Method and columns: docs/benchmarks.md",
    ])


def plot_record(record: dict, path: Path) -> Optional[Path]:
    """ratio (torch / ours) against tokens: a panel per module and pass, a line per dtype and
    width. Returns the file written, or None (no matplotlib, or no rows to plot)."""
    plt = plots.pyplot(PROGRAM)
    if plt is None:
        return None
    rows = [r for r in record["rows"] if r.get("module") in MODULES[:2] and r.get("ratio")]
    panels = [(m, p) for m in MODULES[:2] for p in PASSES if any(r["module"] == m and r["pass"] == p for r in rows)]
    if not panels:
        print(f"{PROGRAM}: no module rows in the record; {path.name} not written", file=sys.stderr)
        return None
    fig, axes = plots.panels(plt, len(panels), 6.0, 4.2)
    for ax, (module, pass_name) in zip(axes, panels):
        mine = [r for r in rows if r["module"] == module and r["pass"] == pass_name]
        for dtype, width, batch in sorted({(r["dtype"], r["width"], r["batch"]) for r in mine},
                                          key=lambda k: (DTYPES.index(k[0]) if k[0] in DTYPES else 9, k[1], k[2])):
            pts = sorted((r["tokens"], r["ratio"]) for r in mine
                         if (r["dtype"], r["width"], r["batch"]) == (dtype, width, batch))
            label = f"{dtype}, width {width}" + (f", batch {batch}" if batch != 1 else "")
            ax.plot(*zip(*pts), marker="o", label=label)
        ax.axhline(1.0, color="k", linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        plots.log_y(ax)
        ticks = sorted({r["tokens"] for r in mine})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("tokens (batch × sequence)")
        ax.set_ylabel("torch time / torch_gemm time")
        ax.set_title(f"{module}, {pass_name}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"projections on torch_gemm vs nn.Linear, on {record.get('metadata', {}).get('device', '?')}")
    return plots.save(plt, fig, path)


# ---------------------------------------------------------------------------------------------
# Command line.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench_attention.py",
        description="Time an attention block and a decoder layer with torch_gemm projections against nn.Linear.",
    )
    parser.add_argument("--quick", action="store_true",
                        help="width 4096, 4096 tokens, bfloat16 and float32, every module and pass (a few rows)")
    parser.add_argument("--dtypes", nargs="+", metavar="DTYPE",
                        help=f"{', '.join(DTYPES)} (default: {','.join(DEFAULT_DTYPES)})")
    parser.add_argument("--widths", nargs="+", metavar="C",
                        help=f"model widths, multiples of --head-dim (default: {','.join(map(str, DEFAULT_WIDTHS))})")
    parser.add_argument("--tokens", nargs="+", metavar="T",
                        help=f"tokens per call, batch × sequence (default: {','.join(map(str, DEFAULT_TOKENS))})")
    parser.add_argument("--batch", type=int, default=1,
                        help="sequences the tokens are split into (default: 1, one sequence of all the tokens)")
    parser.add_argument("--head-dim", type=int, default=HEAD_DIM, help="width of one head (default: %(default)s)")
    parser.add_argument("--modules", nargs="+", metavar="MODULE",
                        help=f"{', '.join(MODULES)} (default: all)")
    parser.add_argument("--passes", nargs="+", metavar="PASS", help=f"{', '.join(PASSES)} (default: both)")
    parser.add_argument("--kernel", default="auto", help="kernel= of the swapped projections (default: auto)")
    parser.add_argument("--swap", choices=SWAP_CHOICES, default="attention",
                        help="decoder_layer: swap the attention projections (default; what swap_linear does "
                             "by default) or all its linear layers")
    parser.add_argument("--bias-width", type=int, default=BIAS_WIDTH, help="linear_bias: K = N (default: %(default)s)")
    parser.add_argument("--bias-tokens", type=int, default=BIAS_TOKENS, help="linear_bias: M (default: %(default)s)")
    parser.add_argument("--bias-dtype", choices=DTYPES, default=BIAS_DTYPE,
                        help="linear_bias: dtype (default: %(default)s)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (default); cpu only to exercise the script, its times mean little")
    cli.add_output_args(parser, "<gpu>-attention.json/.csv/.png")
    parser.add_argument("--no-plot", action="store_true", help="do not write the PNG plot")
    cli.add_timing_args(parser)
    return parser


@dataclass
class Config:
    """The validated command line."""

    device: torch.device
    cases: list[Case]
    passes: list[str]
    kernel: str
    swap: str
    head_dim: int
    budget: Timing
    out: Path
    plot: bool
    quick: bool


def parse_args(argv: Optional[Sequence[str]]) -> Optional[Config]:
    """The validated command line; None when there is no CUDA device to measure on. Bad input
    exits through ``argparse`` with a message."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        return None
    if args.device == "cuda" and not torch_gemm._C.built_with_cuda():
        parser.error(devices.no_cuda_kernels_message())

    dtypes = cli.split_list(args.dtypes) or list(DEFAULT_DTYPES)
    for d in dtypes:
        if d not in DTYPES:
            parser.error(f"--dtypes: unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    modules = cli.split_list(args.modules) or list(MODULES)
    for m in modules:
        if m not in MODULES:
            parser.error(f"--modules: unknown module {m!r}; choose from {', '.join(MODULES)}")
    passes = cli.split_list(args.passes) or list(PASSES)
    for p in passes:
        if p not in PASSES:
            parser.error(f"--passes: unknown pass {p!r}; choose from {', '.join(PASSES)}")
    if args.quick:
        if args.widths or args.tokens or args.dtypes:
            parser.error("--quick picks its own dtypes, widths and tokens; drop them or --quick")
        dtypes, widths, tokens = list(QUICK["dtypes"]), list(QUICK["widths"]), list(QUICK["tokens"])
    else:
        try:
            widths = cli.parse_ints(args.widths, "--widths") or list(DEFAULT_WIDTHS)
            tokens = cli.parse_ints(args.tokens, "--tokens") or list(DEFAULT_TOKENS)
        except ValueError as e:
            parser.error(str(e))
    for number, name in ((args.batch, "--batch"), (args.head_dim, "--head-dim"), (args.bias_width, "--bias-width"),
                         (args.bias_tokens, "--bias-tokens")):
        if number < 1:
            parser.error(f"{name} must be a positive integer, got {number}")
    bad_widths = [w for w in widths if w % args.head_dim]
    if bad_widths:
        parser.error(f"--widths: {', '.join(map(str, bad_widths))} not a multiple of --head-dim {args.head_dim}")
    bad_tokens = [t for t in tokens if t % args.batch]
    if bad_tokens:
        parser.error(f"--tokens: {', '.join(map(str, bad_tokens))} not a multiple of --batch {args.batch}")
    if args.device == "cpu":
        dtypes = [d for d in dtypes if d != "tf32"]
    device = torch.device(args.device)
    available = torch_gemm.available_kernels(device)
    if args.kernel not in available:
        parser.error(f"--kernel: {args.kernel!r} is not available for {device.type}; available: {', '.join(available)}")
    bias_dtype = args.bias_dtype if not (args.device == "cpu" and args.bias_dtype == "tf32") else "float32"
    cases = build_cases(modules, dtypes, widths, tokens, args.batch, (bias_dtype, args.bias_width, args.bias_tokens))
    return Config(device, cases, passes, args.kernel, args.swap, args.head_dim,
                  cli.budget_from(args, parser), cli.output_dir(args, parser), not args.no_plot, args.quick)


def run_case(case: Case, cfg: Config, git_commit: Optional[str],
             cache: dict[tuple, torch.nn.Module]) -> list[dict]:
    """Rows of every pass of one case. ``cache`` holds the last module built, so the tokens of
    one width reuse its weights."""
    rows = []
    with tf32_mode(case.dtype == "tf32"):
        if case.module == "linear_bias":
            measurements = [(p, measure_bias(case, p, cfg)) for p in cfg.passes]
        else:
            key = (case.module, case.dtype, case.width)
            if key not in cache:
                cache.clear()  # one module in memory at a time: an 8192-wide float32 layer is ~4 GB
                if cfg.device.type == "cuda":
                    torch.cuda.empty_cache()
                cache[key] = build_module(case, cfg.head_dim, cfg.device)
            module = cache[key]
            dtype = TORCH_DTYPES[case.dtype]
            gen = torch.Generator(device=cfg.device).manual_seed(case.tokens)
            x = torch.randn(case.batch, case.seq_len, case.width, device=cfg.device, generator=gen).to(dtype)
            grad = torch.randn(x.shape, device=cfg.device, generator=gen).to(dtype)
            measurements = []
            for p in cfg.passes:
                measurements.append((p, measure_module(case, p, module, x.requires_grad_(p == "fwd+bwd"), grad, cfg)))
    for pass_name, m in measurements:
        rows.append(make_row(case, pass_name, m, cfg, git_commit))
        print(f"bench_attention: {case.module} {pass_name} {case.dtype} width {case.width} tokens {case.tokens}: "
              f"{m.status} {table.fmt(m.ms, '.3f')} ms (baseline {table.fmt(m.baseline_ms, '.3f')} ms)", file=sys.stderr)
    return rows


def run(argv: Optional[Sequence[str]] = None) -> list[dict]:
    """Run the benchmark for a command line; returns this run's rows (also merged into the
    record on disk). Without CUDA (and without --device cpu): a message, no rows."""
    cfg = parse_args(argv)
    if cfg is None:
        print("bench_attention: torch sees no CUDA device; nothing measured (the benchmark is for GPUs; "
              "--device cpu runs the script on the CPU)")
        return []
    device = cfg.device
    name, slug = devices.device_name(device), devices.device_slug(device) + "-attention"
    cfg.out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path, png_path = (cfg.out / f"{slug}.{ext}" for ext in ("json", "csv", "png"))
    old_record = records.load_record(json_path, PROGRAM)  # a corrupt record stops the run before the sweep
    commit, dirty = records.git_state()
    for line in devices.build_lines(device):
        print(f"{PROGRAM}: {line}")
    print(f"{PROGRAM}: {name} | {timing.pair_timer_name(device)} | {len(cfg.cases)} cases x "
          f"{len(cfg.passes)} passes | kernel {cfg.kernel}, decoder_layer swaps {cfg.swap}")
    print(f"{PROGRAM}: {cli.output_note(cfg.out)}")

    rows: list[dict] = []
    cache: dict[tuple, torch.nn.Module] = {}
    for case in cfg.cases:
        rows += run_case(case, cfg, commit, cache)
    cache.clear()

    metadata = records.run_metadata(devices.device_fields(device), commit, dirty, timer=timing.pair_timer_name(device),
                                    script="benchmarks/bench_attention.py", argv=argv,
                                    warmup_ms=cfg.budget.warmup_ms, rep_ms=cfg.budget.rep_ms)
    metadata.update({
        # allow_tf32 as set for both sides, per dtype of the rows.
        "tf32": {d: d == "tf32" for d in sorted({c.dtype for c in cfg.cases})},
        "head_dim": cfg.head_dim,
        "mlp_ratio": MLP_RATIO,
        "kernel": cfg.kernel,
        "swap": cfg.swap,
        "quick": cfg.quick,
    })
    record = merge_records(old_record, metadata, rows)
    records.write_record(record, json_path, csv_path, ROW_FIELDS)

    print(format_table(rows))
    bad = [r for r in rows if r["status"] != "OK"]
    if bad:
        print(f"{PROGRAM}: {len(bad)} of {len(rows)} measurements not OK (WRONG: differs from torch beyond "
              "the sanity bound, not timed; ERROR: raised)")
    print(f"{PROGRAM}: wrote {json_path} ({len(record['rows'])} rows after merge) and {csv_path}")
    if cfg.plot and plot_record(record, png_path):
        print(f"{PROGRAM}: wrote {png_path}")
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command-line entry: 0 when every measurement was correct (or there was no GPU), else 1."""
    rows = run(argv)
    return 0 if all(r["status"] == "OK" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
