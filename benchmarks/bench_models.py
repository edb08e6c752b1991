"""The projections of decoder models, decode to prefill: torch_gemm against torch on every shape.

For a grid of model configs (width, grouped-query key/value width, MLP width) and token counts,
each projection's products are timed separately — the forward (linear_tiled(x, W), NT), dx
(grad·W, NN) and dW (gradᵀ·x, TN) — and the forward + backward through autograd, each against
torch's equivalent (F.linear, torch.mm, F.linear's autograd) on the same inputs, interleaved rep
by rep with the L2 flushed (harness.timing). Prints a summary by token band (geomean and min of
torch ms / ours, the worst shapes named), writes ``<gpu>-models.json``/``.csv`` and, with
matplotlib, a heatmap of the ratio (``<gpu>-models.png``).

    python benchmarks/bench_models.py --quick                 # a sample of the grid, bf16
    python benchmarks/bench_models.py --shard 1/4 --record    # a quarter of the whole grid
    python benchmarks/bench_models.py --merge a/X-models.json b/X-models.json --out DIR  # shards into one
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F

import torch_gemm
from harness import cli, device as hdevice, dtypes, plots, records, table, timing

WIDTHS = (2048, 2560, 3072, 4096, 5120, 6144, 8192)
KV_WIDTHS = (256, 512, 1024, 2048)
MLP_WIDTHS = (5632, 6912, 8192, 11008, 13824, 14336, 28672)
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK = dict(widths=(2048, 4096), kv=(512, 1024), mlp=(5632, 14336), tokens=(1, 8, 64, 256, 1024, 4096))
PASSES = ("fwd", "dx", "dw", "fwd+bwd")
# The float32 modes (harness.dtypes.float32_mode): float32 with TF32 off on both sides, TF32 on
# both, and ours under float32 precision "3xtf32" (auto: 3xTF32 where its rule takes it) against
# torch.mm's IEEE float32.
FLOAT32_DTYPES = ("float32", "tf32", "float32-3xtf32")
BANDS = (("1-64", 1, 64), ("128-512", 128, 512), (">=1024", 1024, 1 << 62))
ROW_KEY = ("width", "n", "k", "tokens", "dtype", "pass")
ROW_FIELDS = ROW_KEY + ("projection", "ms", "torch_ms", "ratio")
# Decode: a few tokens against a large weight, a product bound by streaming the weight once. Its
# forward is also timed against a device copy of the weight's bytes in the same interleaved reps,
# and reported as the fraction of the copy's bandwidth (read + write) it reaches.
DECODE_MAX_TOKENS = 16
DECODE_MIN_WEIGHT = 4096 * 4096
# The budget of one measurement: the grid has thousands, and the larger products run for
# milliseconds, so a fraction of do_bench's default still gives tens of reps.
DEFAULT_TIMING = timing.Timing(warmup_ms=5.0, rep_ms=25.0)


@dataclass(frozen=True)
class Projection:
    width: int  # the model's hidden size
    name: str   # q/o, kv, mlp_up (and gate), mlp_down
    n: int      # out_features
    k: int      # in_features


def projections(widths: Sequence[int], kv: Sequence[int], mlp: Sequence[int]) -> list[Projection]:
    """The distinct (out, in) products of each width's decoder layer: q and o (width → width), the
    key/value projections (width → kv, narrower than q: one as wide is q's product), the MLP's up
    and gate (width → mlp) and down (mlp → width)."""
    found = []
    for w in widths:
        found.append(Projection(w, "q/o", w, w))
        found += [Projection(w, "kv", n, w) for n in kv if n < w]
        found += [Projection(w, "mlp_up", m, w) for m in mlp if m > w]
        found += [Projection(w, "mlp_down", w, m) for m in mlp if m > w]
    return found


def cases(projs: Sequence[Projection], tokens: Sequence[int], dtype_names: Sequence[str],
          shard: tuple[int, int]) -> list[tuple[Projection, int, str]]:
    """Every (projection, tokens, dtype), the shard's share (every count-th case from index-1)."""
    index, count = shard
    everything = list(itertools.product(projs, tokens, dtype_names))
    return everything[index - 1::count]


def is_decode(tokens: int, n: int, k: int) -> bool:
    return tokens <= DECODE_MAX_TOKENS and n * k >= DECODE_MIN_WEIGHT


def copy_fraction(tokens: int, n: int, k: int, element_bytes: int, ms: float, copy_ms: float) -> float:
    """The forward's bandwidth (x, W and y once each) as a fraction of the copy's (W read and
    written in copy_ms)."""
    moved = (tokens * k + n * k + tokens * n) * element_bytes
    return (moved / ms) / (2 * n * k * element_bytes / copy_ms)


def pass_fns(proj: Projection, tokens: int, dtype: torch.dtype, dev: torch.device
             ) -> dict[str, tuple[Callable[[], object], ...]]:
    """(ours, torch's) for each pass, on one set of inputs shared by both; for a decode forward
    also the copy of the weight's bytes."""
    x = torch.randn(tokens, proj.k, device=dev, dtype=dtype)
    w = torch.randn(proj.n, proj.k, device=dev, dtype=dtype) / math.sqrt(proj.k)
    g = torch.randn(tokens, proj.n, device=dev, dtype=dtype)
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()

    def fwd_bwd(linear: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[[], object]:
        def run() -> None:
            xg.grad = wg.grad = None
            linear(xg, wg).backward(g)
        return run

    fwd = (lambda: torch_gemm.linear_tiled(x, w), lambda: F.linear(x, w))
    if is_decode(tokens, proj.n, proj.k):
        copy = torch.empty_like(w)
        fwd += (lambda: copy.copy_(w),)
    return {
        "fwd": fwd,
        "dx": (lambda: torch_gemm.mm_tiled(g, w), lambda: torch.mm(g, w)),
        "dw": (lambda: torch_gemm.mm_tiled(g.t(), x), lambda: torch.mm(g.t(), x)),
        "fwd+bwd": (fwd_bwd(torch_gemm.linear_tiled), fwd_bwd(F.linear)),
    }


def measure(todo: Sequence[tuple[Projection, int, str]], passes: Sequence[str], dev: torch.device,
            budget: timing.Timing, progress: cli.Progress) -> list[dict]:
    rows = []
    for proj, tokens, dtype_name in todo:
        fns = pass_fns(proj, tokens, dtypes.TORCH_DTYPES[dtype_name], dev)
        for name in passes:
            # TF32 on for "tf32" (both sides), 3xTF32 for ours under "float32-3xtf32" (torch.mm
            # in IEEE float32), IEEE float32 for "float32".
            with dtypes.float32_mode(dtype_name):
                times = timing.time_interleaved(list(fns[name]), dev, budget)
            ms, torch_ms = times[:2]
            row = dict(width=proj.width, n=proj.n, k=proj.k, tokens=tokens, dtype=dtype_name, **{"pass": name},
                       projection=proj.name, ms=ms, torch_ms=torch_ms, ratio=torch_ms / ms)
            if len(times) == 3:
                element_bytes = torch.empty((), dtype=dtypes.TORCH_DTYPES[dtype_name]).element_size()
                row.update(copy_ms=times[2], copy_fraction=copy_fraction(tokens, proj.n, proj.k, element_bytes,
                                                                         ms, times[2]))
            rows.append(row)
        progress.step(f"{proj.name} {tokens}x{proj.k}->{proj.n} {dtype_name}")
        del fns
    return rows


def band_of(tokens: int) -> str:
    return next(name for name, lo, hi in BANDS if lo <= tokens <= hi)


def summary(rows: Sequence[dict], worst: int = 3) -> str:
    """Geomean and min of the ratio per (dtype, pass, token band), with the worst shapes."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["dtype"], r["pass"], band_of(r["tokens"]))].append(r)
    lines = []
    for (dtype_name, name, band), group in sorted(groups.items(), key=lambda kv: (kv[0][0], PASSES.index(kv[0][1]),
                                                                               [b[0] for b in BANDS].index(kv[0][2]))):
        ratios = [r["ratio"] for r in group]
        geomean = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        low = sorted(group, key=lambda r: r["ratio"])[:worst]
        named = ", ".join(f"{r['tokens']}x{r['k']}->{r['n']} {r['ratio']:.2f}" for r in low)
        lines.append([dtype_name, name, band, str(len(group)), f"{geomean:.3f}", f"{min(ratios):.3f}", named])
    header = ["dtype", "pass", "tokens", "shapes", "geomean", "min", "worst (tokens x in -> out ratio)"]
    return table.fixed_width(header, lines, numeric={3, 4, 5}) + "\n" + decode_summary(rows, worst) + table.legend([
        ("ratio", "torch ms / ours, same inputs, same run, interleaved rep by rep (> 1: ours faster)"),
        ("fwd", "linear_tiled(x, W) against F.linear (NT)"),
        ("dx / dw", "mm_tiled(grad, W) (NN) / mm_tiled(grad.T, x) (TN) against torch.mm"),
        ("fwd+bwd", "y = linear_tiled(x, W); y.backward(grad) against F.linear's, x and W requiring grad"),
        ("decode", f"forward of <= {DECODE_MAX_TOKENS} tokens, N*K >= 4096^2: bandwidth (x, W, y once) / a copy's "
                   "of W (read + write), timed in the same reps"),
    ])


def decode_summary(rows: Sequence[dict], worst: int = 3) -> str:
    """Per dtype, the decode forwards' fraction of the copy bandwidth (min, worst shapes named) and
    their ratio to torch (geomean); empty where the rows have none."""
    by_dtype: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("copy_fraction") is not None:
            by_dtype[r["dtype"]].append(r)
    lines = []
    for dtype_name, group in sorted(by_dtype.items()):
        geomean = math.exp(sum(math.log(r["ratio"]) for r in group) / len(group))
        low = sorted(group, key=lambda r: r["copy_fraction"])[:worst]
        named = ", ".join(f"{r['tokens']}x{r['k']}->{r['n']} {r['copy_fraction']:.2f}" for r in low)
        lines.append(f"decode {dtype_name}: {len(group)} shapes, copy bandwidth fraction min "
                     f"{min(r['copy_fraction'] for r in group):.3f} ({named}), ratio to torch geomean {geomean:.3f}\n")
    return "".join(lines)


def heatmap(rows: Sequence[dict], path: Path, title: str) -> Optional[Path]:
    """The ratio per (projection, tokens), one panel per pass and dtype, log-scaled around 1."""
    plt = plots.pyplot("bench_models")
    if plt is None or not rows:
        return None
    import numpy as np
    from matplotlib.colors import LogNorm

    panels_of = sorted({(r["dtype"], r["pass"]) for r in rows}, key=lambda p: (p[0], PASSES.index(p[1])))
    shapes = sorted({(r["width"], r["n"], r["k"]) for r in rows})
    tokens = sorted({r["tokens"] for r in rows})
    fig, axes = plots.panels(plt, len(panels_of), width=7.0, height=max(3.0, 0.16 * len(shapes) + 1.2))
    for ax, (dtype_name, name) in zip(axes, panels_of):
        grid = np.full((len(shapes), len(tokens)), np.nan)
        for r in rows:
            if (r["dtype"], r["pass"]) == (dtype_name, name):
                grid[shapes.index((r["width"], r["n"], r["k"])), tokens.index(r["tokens"])] = r["ratio"]
        image = ax.imshow(grid, aspect="auto", cmap="RdYlGn", norm=LogNorm(vmin=0.5, vmax=2.0))
        ax.set_title(f"{dtype_name} {name}", fontsize=9)
        ax.set_xticks(range(len(tokens)), [str(t) for t in tokens], fontsize=6, rotation=90)
        ax.set_yticks(range(len(shapes)), [f"{k}->{n}" for _, n, k in shapes], fontsize=5)
        fig.colorbar(image, ax=ax, fraction=0.04)
    fig.suptitle(title, fontsize=10)
    return plots.save(plt, fig, path)


def grid_coverage(rows: Sequence[dict]) -> str:
    """Whether the rows hold the whole grid for their dtypes and passes: a record needs it."""
    dtype_names = sorted({r["dtype"] for r in rows})
    passes = sorted({r["pass"] for r in rows})
    wanted = {(p.width, p.n, p.k, t, d, name)
              for p, t, d in cases(projections(WIDTHS, KV_WIDTHS, MLP_WIDTHS), TOKENS, dtype_names, (1, 1))
              for name in passes}
    have = {tuple(r[k] for k in ROW_KEY) for r in rows}
    found = len(wanted & have)
    whole = "the whole grid" if found == len(wanted) else "NOT the whole grid"
    return (f"{found} of the grid's {len(wanted)} (shape, tokens, dtype, pass) rows for "
            f"{', '.join(dtype_names)} x {', '.join(passes)}: {whole}")


def merge_shards(paths: Sequence[str], out: Path, plot: bool) -> int:
    """Shards' records (bench_models --shard, each run on a GPU of its own) into one record in out,
    named as the first; refused where they come from different GPUs or commits."""
    shards = []
    for name in paths:
        record = records.load_record(Path(name), "bench_models")
        if record is None:
            print(f"bench_models --merge: no record at {name}")
            return 2
        shards.append(record)
    for field in ("device", "git_commit", "git_dirty"):
        values = {str(s["metadata"].get(field)) for s in shards}
        if len(values) > 1:
            print(f"bench_models --merge: the shards differ in {field} ({', '.join(sorted(values))}); "
                  "a record holds one GPU at one commit")
            return 2
    rows = [row for s in shards for row in s["rows"]]
    metadata = {**shards[0]["metadata"], "merged_from": [str(Path(p)) for p in paths]}
    out.mkdir(parents=True, exist_ok=True)
    path = out / Path(paths[0]).name
    record = records.write_merged(path, "bench_models", metadata, rows, ROW_KEY, ROW_FIELDS)
    print(summary(record["rows"]))
    print(grid_coverage(record["rows"]))
    print(f"record: {path} ({len(record['rows'])} rows)")
    if plot:
        commit = metadata.get("git_commit")
        png = heatmap(record["rows"], path.with_suffix(".png"),
                      f"torch ms / ours, {metadata.get('device')}, {commit and commit[:7]}")
        if png:
            print(f"heatmap: {png}")
    return 0


def parse_shard(spec: str, parser: argparse.ArgumentParser) -> tuple[int, int]:
    try:
        index, count = (int(v) for v in spec.split("/"))
    except ValueError:
        parser.error(f"--shard takes INDEX/COUNT such as 1/4, got {spec!r}")
    if not 1 <= index <= count:
        parser.error(f"--shard {spec}: INDEX must be between 1 and COUNT")
    return index, count


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a sample of the grid (bf16; the record needs the whole grid)")
    parser.add_argument("--dtypes", nargs="+", default=None, choices=list(FLOAT32_DTYPES) + ["bfloat16", "float16"],
                        help="default: bfloat16 and float16 (bfloat16 with --quick); float32 (TF32 off), tf32 and "
                             "float32-3xtf32 (ours under float32 precision '3xtf32', torch.mm in float32) on request")
    parser.add_argument("--tokens", nargs="+", type=int, default=None, help="token counts (default: the grid's)")
    parser.add_argument("--widths", nargs="+", type=int, default=None, help="model widths (default: the grid's)")
    parser.add_argument("--passes", nargs="+", default=list(PASSES), choices=PASSES)
    parser.add_argument("--shard", default="1/1", help="INDEX/COUNT: run every COUNT-th case from INDEX (default 1/1)")
    parser.add_argument("--no-plot", action="store_true", help="no heatmap")
    cli.add_output_args(parser, "<gpu>-models.json/.csv/.png")
    parser.add_argument("--warmup-ms", type=float, default=DEFAULT_TIMING.warmup_ms)
    parser.add_argument("--rep-ms", type=float, default=DEFAULT_TIMING.rep_ms)
    parser.add_argument("--merge", nargs="+", metavar="RECORD", default=None,
                        help="no timing: merge these shards' <gpu>-models.json into one record in the output "
                             "directory, with its summary, whether it holds the whole grid, and the heatmap")
    args = parser.parse_args(argv)
    if args.merge:
        return merge_shards(args.merge, cli.output_dir(args, parser), plot=not args.no_plot)
    budget = cli.budget_from(args, parser)
    shard = parse_shard(args.shard, parser)
    if not torch.cuda.is_available() or not torch_gemm._C.built_with_cuda():
        print("bench_models: needs a CUDA GPU and the CUDA kernels; " + hdevice.no_cuda_kernels_message())
        return 0
    dev = torch.device("cuda")
    grid = QUICK if args.quick else dict(widths=WIDTHS, kv=KV_WIDTHS, mlp=MLP_WIDTHS, tokens=TOKENS)
    widths = args.widths or grid["widths"]
    tokens = args.tokens or grid["tokens"]
    dtype_names = args.dtypes or (["bfloat16"] if args.quick else ["bfloat16", "float16"])
    todo = cases(projections(widths, grid["kv"], grid["mlp"]), tokens, dtype_names, shard)
    out = cli.output_dir(args, parser)
    out.mkdir(parents=True, exist_ok=True)
    for line in hdevice.build_lines(dev):
        print(line)
    print(f"{len(todo)} cases x {len(args.passes)} passes (shard {args.shard}); {cli.output_note(out)}")

    rows = measure(todo, args.passes, dev, budget, cli.Progress(len(todo)))
    print(summary(rows))
    print(grid_coverage(rows))
    commit, dirty = records.git_state()
    metadata = records.run_metadata(hdevice.device_fields(dev), commit, dirty, timer=timing.pair_timer_name(dev),
                                    script="benchmarks/bench_models.py", argv=argv,
                                    warmup_ms=budget.warmup_ms, rep_ms=budget.rep_ms)
    path = out / f"{hdevice.device_slug(dev)}-models.json"
    record = records.write_merged(path, "bench_models", metadata, rows, ROW_KEY, ROW_FIELDS)
    print(f"record: {path} ({len(record['rows'])} rows)")
    if not args.no_plot:
        png = heatmap(record["rows"], path.with_suffix(".png"),
                      f"torch ms / ours, {hdevice.device_name(dev)}, {commit and commit[:7]}")
        if png:
            print(f"heatmap: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
