"""wgmma_sm90's plan against its alternatives: the 16-bit projections of decoder models timed under
every tile option the plan chooses among, and the rule's constants fitted from those times.

Each option is forced through TORCH_GEMM_WGMMA_SHAPE / _CLUSTER, which the launcher reads once a
process, so each runs in a process of its own (this script with --worker). The fit gives the
constants of csrc/kernels/sm90/heuristics.cpp: kMediumTileCostTenths and kMidTileCostTenths (a
128×128 and a 128×192 tile's time in tenths of a 128×256 tile's, from shapes timed on both) and
kPairOneWaveMinKTiles (the shortest K,
in k-tiles, from which pairs sharing B are no slower on one wave of two-consumer tiles); and it
scores the plan: auto's time against the best option's, per shape.

    python benchmarks/tune_plan.py                     # time the grid, fit, write <gpu>-plan.json
    python benchmarks/tune_plan.py --fit FILE.json     # the fit and the score of a record
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

import torch

import bench_models
from harness import cli, device as hdevice, dtypes, table, timing

# Option name → the overrides that force it ("auto": none, the plan's own choice).
OPTIONS = {
    "auto": {},
    "128x256": {"TORCH_GEMM_WGMMA_SHAPE": "2x1"},
    "128x256-unpaired": {"TORCH_GEMM_WGMMA_SHAPE": "2x1", "TORCH_GEMM_WGMMA_CLUSTER": "1"},
    "128x128": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x128"},
    "128x128-unpaired": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x128", "TORCH_GEMM_WGMMA_CLUSTER": "1"},
    "128x192": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x192"},
    "128x192-unpaired": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x192", "TORCH_GEMM_WGMMA_CLUSTER": "1"},
    "128x96": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x96"},
    "128x80": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x80"},
    "128x160": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x160"},
    "64x256": {"TORCH_GEMM_WGMMA_SHAPE": "1x1"},
    "64x128": {"TORCH_GEMM_WGMMA_SHAPE": "1x1x128"},
    "64x128-unpaired": {"TORCH_GEMM_WGMMA_SHAPE": "1x1x128", "TORCH_GEMM_WGMMA_CLUSTER": "1"},
    "64x128-split2": {"TORCH_GEMM_WGMMA_SHAPE": "1x2x128"},
    "64x128-split4": {"TORCH_GEMM_WGMMA_SHAPE": "1x4x128"},
    "64x64": {"TORCH_GEMM_WGMMA_SHAPE": "1x1x64"},
    "128x128-split2": {"TORCH_GEMM_WGMMA_SHAPE": "2x2x128"},
    "128x128-split4": {"TORCH_GEMM_WGMMA_SHAPE": "2x4x128"},
    "64x128-sk": {"TORCH_GEMM_WGMMA_SHAPE": "1x1x128", "TORCH_GEMM_WGMMA_STREAM_K": "3"},
    "128x256-sk": {"TORCH_GEMM_WGMMA_SHAPE": "2x1", "TORCH_GEMM_WGMMA_STREAM_K": "3"},
    "128x128-sk": {"TORCH_GEMM_WGMMA_SHAPE": "2x1x128", "TORCH_GEMM_WGMMA_STREAM_K": "3"},
}
# The grid: bench_models' projections of these widths, as forward (NT), dx (NN) and dW (TN)
# products, for token counts where the plan's tiles matter (fewer go to the decode kernels).
WIDTHS = (2048, 4096, 5120)
KV_WIDTHS = (512, 1024)
MLP_WIDTHS = (5632, 14336)
TOKENS = (128, 256, 512, 1024, 2048, 4096)
ROW_KEY = ("M", "N", "K", "layout", "dtype", "option")
ROW_FIELDS = ROW_KEY + ("ms",)
K_TILE_BYTES = 128  # a k-tile is one 128-byte row of K (sm90/heuristics.h)
# A measurement's budget: hundreds of products times every option, each tens of µs to a ms.
DEFAULT_TIMING = timing.Timing(warmup_ms=5.0, rep_ms=20.0)
# Within this of the best option, a pick counts as the best (the timer's run-to-run noise).
SAME_WITHIN = 0.03


def grid_products(widths: Sequence[int], tokens: Sequence[int], kv: Sequence[int] = KV_WIDTHS,
                  mlp: Sequence[int] = MLP_WIDTHS) -> list[tuple[int, int, int, str]]:
    """(M, N, K, layout) of every projection's forward, dx and dW products, without repeats."""
    found = []
    for proj in bench_models.projections(widths, kv, mlp):
        for t in tokens:
            found += [(t, proj.n, proj.k, "NT"), (t, proj.k, proj.n, "NN"), (proj.n, proj.k, t, "TN")]
    return list(dict.fromkeys(found))


def operands(M: int, N: int, K: int, layout: str, dtype: torch.dtype, dev: torch.device):
    a = torch.randn(M, K, device=dev, dtype=dtype) if layout[0] == "N" else torch.randn(K, M, device=dev, dtype=dtype).t()
    b = torch.randn(K, N, device=dev, dtype=dtype) if layout[1] == "N" else torch.randn(N, K, device=dev, dtype=dtype).t()
    return a, b


def worker(option: str, products_file: Path, dtype_name: str, out_file: Path, budget: timing.Timing) -> int:
    """Times every product with wgmma_sm90 under this process's overrides; writes [[M, N, K,
    layout, ms], ...]. An option that asks for stream-K over every turn skips the products whose
    plan does not take it (too few k-tiles, or other tiles), so that no time is recorded under a
    plan it did not run."""
    import torch_gemm

    dev = torch.device("cuda")
    dtype = dtypes.TORCH_DTYPES[dtype_name]
    every_turn = OPTIONS[option].get("TORCH_GEMM_WGMMA_STREAM_K") == "3"
    results = []
    for M, N, K, layout in json.loads(products_file.read_text()):
        a, b = operands(M, N, K, layout, dtype, dev)
        if every_turn and not torch_gemm.explain(a, b, kernel="wgmma_sm90")["plan"]["stream_k"]:
            continue
        ms = timing.time_ms(lambda: torch_gemm.mm_tiled(a, b, kernel="wgmma_sm90"), dev, budget)
        results.append([M, N, K, layout, ms])
        del a, b
    out_file.write_text(json.dumps(results))
    return 0


def tiles(M: int, N: int, block_m: int, block_n: int) -> int:
    return math.ceil(M / block_m) * math.ceil(N / block_n)


def k_tiles(K: int, dtype_name: str) -> int:
    return math.ceil(K / (K_TILE_BYTES // (2 if dtype_name in ("bfloat16", "float16") else 4)))


def by_product(rows: Sequence[dict]) -> dict[tuple, dict[str, float]]:
    """{(M, N, K, layout, dtype): {option: ms}}."""
    table_of: dict[tuple, dict[str, float]] = {}
    for r in rows:
        table_of.setdefault((r["M"], r["N"], r["K"], r["layout"], r["dtype"]), {})[r["option"]] = r["ms"]
    return table_of


def fit(rows: Sequence[dict], sms: int) -> dict:
    """The rule's constants from the times (see the module's docstring), and auto's score."""
    products = by_product(rows)
    # A 128×128 or 128×192 tile against a 128×256 one, all paired: time per round, where the
    # 128×256 tiles fill at least half the SMs (a partial round's idle SMs clock the others higher).
    costs: dict[int, list[float]] = {128: [], 192: []}
    for (M, N, K, _, _), t in products.items():
        wide = tiles(M, N, 128, 256)
        if "128x256" not in t or wide * 2 < sms:
            continue
        for tile_n in costs:
            name = f"128x{tile_n}"
            if name in t:
                per_round = t[name] / math.ceil(tiles(M, N, 128, tile_n) / sms)
                costs[tile_n].append(per_round / (t["128x256"] / math.ceil(wide / sms)))
    # Pairs on one wave of two-consumer tiles, by K: the smallest k-tile count from which paired is
    # never slower (beyond SAME_WITHIN) than unpaired.
    pair_losses = []
    for (M, N, K, _, dtype_name), t in products.items():
        for tile_n, name in ((256, "128x256"), (128, "128x128")):
            if name in t and name + "-unpaired" in t and tiles(M, N, 128, tile_n) <= sms and math.ceil(M / 128) >= 2:
                pair_losses.append((k_tiles(K, dtype_name), t[name] / t[name + "-unpaired"]))
    slower = [kt for kt, ratio in pair_losses if ratio > 1 + SAME_WITHIN]
    min_k_tiles = max(slower) + 1 if slower else (min(kt for kt, _ in pair_losses) if pair_losses else None)
    # auto against the best option.
    losses = []
    for key, t in products.items():
        if "auto" in t and len(t) > 1:
            best = min(t.values())
            losses.append((t["auto"] / best, key, min(t, key=t.get)))
    losses.sort(key=lambda x: -x[0])
    return {
        "medium_tile_cost": statistics.median(costs[128]) if costs[128] else None,
        "medium_tile_cost_samples": len(costs[128]),
        "mid_tile_cost": statistics.median(costs[192]) if costs[192] else None,
        "mid_tile_cost_samples": len(costs[192]),
        "pair_one_wave_min_k_tiles": min_k_tiles,
        "pair_samples": len(pair_losses),
        "auto_best": sum(1 for loss, _, _ in losses if loss <= 1 + SAME_WITHIN),
        "auto_scored": len(losses),
        "auto_geomean_loss": math.exp(sum(math.log(x) for x, _, _ in losses) / len(losses)) if losses else None,
        "auto_worst": [(round(loss, 3), list(key), best) for loss, key, best in losses[:8]],
    }


def fit_text(result: dict) -> str:
    lines = []
    tiles_fitted = (("medium", "kMediumTileCostTenths", "128x128"), ("mid", "kMidTileCostTenths", "128x192"))
    for key, constant, tile in tiles_fitted:
        cost = result[f"{key}_tile_cost"]
        lines.append(f"{constant}: {'-' if cost is None else round(10 * cost)} "
                     f"(a {tile} tile takes {'-' if cost is None else f'{cost:.3f}'} of a 128x256 tile's time, "
                     f"median of {result[f'{key}_tile_cost_samples']} products)")
    lines += [
        f"kPairOneWaveMinKTiles: {result['pair_one_wave_min_k_tiles']} "
        f"(pairs no slower on one wave from this many k-tiles, {result['pair_samples']} products)",
    ]
    if result["auto_scored"]:
        lines.append(f"auto: the best option (within {SAME_WITHIN:.0%}) on {result['auto_best']} of "
                     f"{result['auto_scored']} products; auto / best geomean {result['auto_geomean_loss']:.3f}")
        lines.append(table.fixed_width(["auto / best", "M, N, K, layout, dtype", "best"],
                                       [[f"{loss:.3f}", " ".join(map(str, key)), best]
                                        for loss, key, best in result["auto_worst"]], numeric={0}))
    return "\n".join(lines)


def measure(products: list, dtype_name: str, options: Sequence[str], budget: timing.Timing, workdir: Path) -> list[dict]:
    products_file = workdir / "products.json"
    products_file.write_text(json.dumps(products))
    rows = []
    for option in options:
        out_file = workdir / f"{option}.json"
        cmd = [sys.executable, __file__, "--worker", option, "--products", str(products_file), "--dtypes", dtype_name,
               "--worker-out", str(out_file), "--warmup-ms", str(budget.warmup_ms), "--rep-ms", str(budget.rep_ms)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_GEMM_WGMMA_")}
        subprocess.run(cmd, env={**env, **OPTIONS[option]}, check=True)
        timed = json.loads(out_file.read_text())
        for M, N, K, layout, ms in timed:
            rows.append(dict(M=M, N=N, K=K, layout=layout, dtype=dtype_name, option=option, ms=ms))
        print(f"  {option}: {len(timed)} of {len(products)} products")
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = cli.tuning_parser(__doc__, DEFAULT_TIMING)
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16"], choices=["bfloat16", "float16"])
    parser.add_argument("--widths", nargs="+", type=int, default=list(WIDTHS))
    parser.add_argument("--tokens", nargs="+", type=int, default=list(TOKENS))
    parser.add_argument("--kv-widths", nargs="+", type=int, default=list(KV_WIDTHS))
    parser.add_argument("--mlp-widths", nargs="+", type=int, default=list(MLP_WIDTHS))
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=list(OPTIONS))
    parser.add_argument("--worker", choices=list(OPTIONS), help=argparse.SUPPRESS)
    parser.add_argument("--products", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    cli.add_output_args(parser, "<gpu>-plan.json/.csv")
    args = parser.parse_args(argv)
    budget = cli.budget_from(args, parser)
    if args.worker:
        return worker(args.worker, args.products, args.dtypes[0], args.worker_out, budget)
    if args.fit:
        rows, sms = cli.fitted_record_rows(parser, args.fit, "tune_plan", args.sm_count)
        print(fit_text(fit(rows, sms)))
        return 0
    if not torch.cuda.is_available() or not torch.cuda.get_device_capability() == (9, 0):
        print("tune_plan: needs an sm_90 GPU (H100/H200) and the CUDA kernels; " + hdevice.no_cuda_kernels_message())
        return 0
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    products = grid_products(args.widths, args.tokens, args.kv_widths, args.mlp_widths)
    out = cli.output_dir(args, parser)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(products)} products x {len(args.options)} options x {len(args.dtypes)} dtypes; {cli.output_note(out)}")
    rows = []
    for dtype_name in args.dtypes:
        rows += measure(products, dtype_name, args.options, budget, out)
    path = out / f"{hdevice.device_slug(dev)}-plan.json"
    record = cli.write_tuning_record(path, "tune_plan", dev, "benchmarks/tune_plan.py", argv, budget, sms, rows,
                                     ROW_KEY, ROW_FIELDS)
    for name in ("products.json", *(f"{o}.json" for o in args.options)):
        (out / name).unlink(missing_ok=True)
    print(fit_text(fit(record["rows"], sms)))
    print(f"record: {path} ({len(record['rows'])} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
