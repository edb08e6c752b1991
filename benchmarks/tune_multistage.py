"""multistage's plan against its alternatives: the float32 (TF32 off) forwards of decoder models'
projections timed under every plan the cost model weighs, and the model's constants fitted from
those times.

Each plan is forced through TORCH_GEMM_MULTISTAGE_PLAN ("128x256:<splits>", "64x64:<splits>",
"32x128:<splits>"),
which the launcher reads at each call, so one process times them all, interleaved with torch's
F.linear and the plan's own choice ("auto"). The fit gives the constants of
csrc/kernels/multistage_plan.h (MultistageCostModel): the 128x256 tile's FMAs a ns on one SM (from
the unsplit plans whose tiles fill whole waves), the 64x64 and 32x128 tiles' rates as fractions of
it, the split-K traffic's bytes a ns and the margin for fewer splits (the values whose choices run
fastest over the timed products); and it scores the plan: the choice's time against the best plan's.

    python benchmarks/tune_multistage.py                  # time the grid, fit, write <gpu>-multistage.json
    python benchmarks/tune_multistage.py --fit FILE.json  # the fit and the score of a record
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from typing import Optional, Sequence

import torch

import bench_models
from harness import cli, device as hdevice, table, timing

# The grid: every weight of bench_models' projections, as forwards (x·Wᵀ, both operands K-major)
# of these token counts (fewer rows go to gemv).
TOKENS = (16, 32, 64, 128, 256, 512, 1024, 2048)
ROW_KEY = ("M", "N", "K", "option")
ROW_FIELDS = ROW_KEY + ("ms",)
DEFAULT_TIMING = timing.Timing(warmup_ms=2.0, rep_ms=8.0)
# A model replaces the header's constants only where its choices run this much faster (geomean).
SAME_WITHIN = 0.002
SAVE_EVERY = 100  # products measured between writes of the record
# The tiles as multistage_plan.h has them: (block_m, block_n, block_k, blocks an SM, the blocks an
# SM a part-filled round is charged as at least).
LARGE = (128, 256, 16, 1, 1)
SMALL = (64, 64, 8, 4, 4)
NARROW = (32, 128, 16, 4, 3)
MAX_SPLITS = 8
NARROW_MAX_SPLITS, NARROW_SPLIT_STEP = 16, 4
MIN_K_TILES_PER_SPLIT = 8
MAX_WORKSPACE_BYTES = 256 << 20
NARROW_MAX_ROWS = 64
LARGE_NAME, SMALL_NAME, NARROW_NAME = "128x256", "64x64", "32x128"
TILES = {LARGE_NAME: LARGE, SMALL_NAME: SMALL, NARROW_NAME: NARROW}
# Each tile's rate as the model's fraction of the large tile's (None: the large tile itself).
RATE_OF_LARGE = {LARGE_NAME: None, SMALL_NAME: "small_rate_of_large", NARROW_NAME: "narrow_rate_of_large"}
# The constants the header holds now (the fit's starting point and the mirror's default).
HEADER_MODEL = dict(large_fmas_per_sm_ns=151.5, small_rate_of_large=0.75, narrow_rate_of_large=0.79,
                    workspace_bytes_per_ns=3000.0, tie_margin=0.02)
# The grid the fit searches (the large tile's rate is measured, not searched).
FIT_GRID = dict(small_rate_of_large=(0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9),
                narrow_rate_of_large=(0.6, 0.7, 0.79, 0.9, 1.0),
                workspace_bytes_per_ns=(250.0, 375.0, 500.0, 750.0, 1000.0, 1500.0, 3000.0, 6000.0),
                tie_margin=(0.0, 0.02, 0.05))
# Splits timed beyond those weighed, to show where more would pay.
EXTRA_SPLITS = {SMALL_NAME: (1, 2, 4, 8, 16), NARROW_NAME: (24, 32)}


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def split_of(k_tiles: int, wanted: int, batch: int = 1) -> tuple[int, int]:
    """(splits, k-tiles a split) as plan_multistage cuts K: none below MIN_K_TILES_PER_SPLIT."""
    if wanted > 1 and batch == 1 and ceil_div(k_tiles, wanted) >= MIN_K_TILES_PER_SPLIT:
        per = ceil_div(k_tiles, wanted)
        return ceil_div(k_tiles, per), per
    return 1, k_tiles


def modeled_ns(name: str, splits: int, per_split: int, M: int, N: int, batch: int, sms: int, model: dict) -> float:
    block_m, block_n, block_k, per_sm, saturating = TILES[name]
    blocks = ceil_div(M, block_m) * ceil_div(N, block_n) * batch * splits
    last = blocks % (sms * per_sm)
    charged = blocks // (sms * per_sm) * per_sm + (max(ceil_div(last, sms), saturating) if last else 0)
    share = RATE_OF_LARGE[name]
    rate = model["large_fmas_per_sm_ns"] * (model[share] if share else 1.0)
    ns = charged * per_split * block_m * block_n * block_k / rate
    if splits > 1:
        ns += (2 * splits + 1) * M * N * 4 / model["workspace_bytes_per_ns"]
    return ns


def candidates(M: int, N: int, K: int, sms: int, model: dict, batch: int = 1) -> list[tuple[str, int, float]]:
    """What plan_multistage weighs: [(tile name, splits, modeled ns)], its order."""
    found = []

    def weigh_splits(name: str, most: int) -> None:
        k_tiles = ceil_div(K, TILES[name][2])
        for wanted in [*range(1, MAX_SPLITS + 1), *range(MAX_SPLITS + NARROW_SPLIT_STEP, most + 1, NARROW_SPLIT_STEP)]:
            splits, per = split_of(k_tiles, wanted, batch)
            if wanted > 1 and (splits <= 1 or splits * M * N * 4 > MAX_WORKSPACE_BYTES):
                continue
            found.append((name, splits, modeled_ns(name, splits, per, M, N, batch, sms, model)))

    weigh_splits(LARGE_NAME, MAX_SPLITS)
    if ceil_div(M, LARGE[0]) * ceil_div(N, LARGE[1]) * batch < 2 * sms:
        small_tiles = ceil_div(M, SMALL[0]) * ceil_div(N, SMALL[1]) * batch
        k_tiles = ceil_div(K, SMALL[2])
        wanted = min(SMALL[3] * sms // max(small_tiles, 1), MAX_SPLITS, k_tiles // MIN_K_TILES_PER_SPLIT)
        splits, per = split_of(k_tiles, wanted, batch)
        if splits > 1 and splits * M * N * 4 > MAX_WORKSPACE_BYTES:
            splits, per = 1, k_tiles
        found.append((SMALL_NAME, splits, modeled_ns(SMALL_NAME, splits, per, M, N, batch, sms, model)))
        if M <= NARROW_MAX_ROWS:
            weigh_splits(NARROW_NAME, NARROW_MAX_SPLITS)
    return found


def choose(M: int, N: int, K: int, sms: int, model: dict, batch: int = 1) -> tuple[str, int]:
    """plan_multistage's choice, mirrored: the fewest splits within the margin of the least time."""
    weighed = candidates(M, N, K, sms, model, batch)
    least = min(ns for _, _, ns in weighed)
    best = min(range(len(weighed)), key=lambda i: weighed[i][2])
    for i, (_, splits, ns) in enumerate(weighed):
        if ns <= least * (1 + model["tie_margin"]) and splits < weighed[best][1]:
            best = i
    return weighed[best][0], weighed[best][1]


def option_name(tile: str, splits: int) -> str:
    return f"{tile}:{splits}"


def options_for(M: int, N: int, K: int, sms: int) -> list[str]:
    """The plans timed for a product: every plan the model weighs (its constants change costs, not
    the candidates), and where it weighs the 64x64 or the 32x128 tile, that tile split the
    EXTRA_SPLITS ways too (where K has the k-tiles)."""
    weighed = candidates(M, N, K, sms, HEADER_MODEL)
    found = [option_name(tile, splits) for tile, splits, _ in weighed]
    for name, extra in EXTRA_SPLITS.items():
        if any(tile == name for tile, _, _ in weighed):
            for splits in extra:
                if splits == 1 or split_of(ceil_div(K, TILES[name][2]), splits)[0] == splits:
                    found.append(option_name(name, splits))
    return list(dict.fromkeys(found))


def grid_products(tokens: Sequence[int]) -> list[tuple[int, int, int]]:
    """(M, N, K) of every distinct weight's forward at each token count."""
    weights = sorted({(p.n, p.k) for p in bench_models.projections(bench_models.WIDTHS, bench_models.KV_WIDTHS,
                                                                   bench_models.MLP_WIDTHS)})
    return [(t, n, k) for t in tokens for n, k in weights]


def by_product(rows: Sequence[dict]) -> dict[tuple, dict[str, float]]:
    """{(M, N, K): {option: ms}}."""
    found: dict[tuple, dict[str, float]] = {}
    for r in rows:
        found.setdefault((r["M"], r["N"], r["K"]), {})[r["option"]] = r["ms"]
    return found


def score(products: dict, sms: int, model: dict, keys: Optional[set] = None) -> dict:
    """Geomeans over the products (of `keys`, where given) whose choice under `model` was timed:
    torch / the model's choice, torch / auto (the record's build), torch / the best plan timed; and
    how many were not."""
    chosen, auto, best, untimed = [], [], [], 0
    for (M, N, K), t in products.items():
        if keys is not None and (M, N, K) not in keys:
            continue
        ms = t.get(option_name(*choose(M, N, K, sms, model)))
        if ms is None or "torch" not in t or "auto" not in t:
            untimed += 1
            continue
        chosen.append(t["torch"] / ms)
        auto.append(t["torch"] / t["auto"])
        best.append(t["torch"] / min(v for k, v in t.items() if k != "torch"))
    gm = lambda v: math.exp(sum(map(math.log, v)) / len(v)) if v else None
    return dict(products=len(chosen), untimed=untimed, model=gm(chosen), auto=gm(auto), best=gm(best),
                model_min=min(chosen) if chosen else None)


def large_rate(products: dict, sms: int) -> Optional[float]:
    """The 128x256 tile's FMAs a ns on one SM: the median over the unsplit plans of at least one
    whole wave, each wave (a part-empty last one too) taking one tile's time."""
    rates = []
    for (M, N, K), t in products.items():
        tiles = ceil_div(M, LARGE[0]) * ceil_div(N, LARGE[1])
        if "128x256:1" in t and tiles >= sms:
            waves = ceil_div(tiles, sms)
            rates.append(waves * ceil_div(K, LARGE[2]) * LARGE[0] * LARGE[1] * LARGE[2] / (t["128x256:1"] * 1e6))
    return sorted(rates)[len(rates) // 2] if rates else None


def fit(rows: Sequence[dict], sms: int) -> dict:
    """The model's constants from the times (see the module's docstring), and their score."""
    products = by_product(rows)
    rate = large_rate(products, sms)
    base = dict(HEADER_MODEL, large_fmas_per_sm_ns=rate or HEADER_MODEL["large_fmas_per_sm_ns"])
    models = [dict(base, **dict(zip(FIT_GRID, values))) for values in itertools.product(*FIT_GRID.values())]
    header = dict(HEADER_MODEL, large_fmas_per_sm_ns=base["large_fmas_per_sm_ns"])
    # Every model (the header's too) is scored on the same products: where each one's choice was timed.
    keys = {key for key, t in products.items()
            if "torch" in t and "auto" in t
            and all(option_name(*choose(*key, sms, m)) in t for m in (*models, HEADER_MODEL))}
    scored = [(score(products, sms, m, keys), m) for m in models]
    header_result = score(products, sms, header, keys)
    best_model, best_score = header, header_result
    top = max((r["model"] for r, _ in scored if r["model"] is not None), default=None)
    # The header's constants (with the measured rate) stand unless the best model beats them by
    # SAME_WITHIN; among the models at the best score, the one nearest the header's.
    if top is not None and (header_result["model"] is None or top > header_result["model"] * (1 + SAME_WITHIN)):
        # Relative distance, defined where a constant is 0 (a tie margin of 0 is in the grid).
        distance = lambda m: sum(abs(m[k] - header[k]) / max(abs(m[k]), abs(header[k])) if m[k] != header[k] else 0.0
                                 for k in FIT_GRID)
        best_score, best_model = min(((r, m) for r, m in scored if r["model"] == top), key=lambda rm: distance(rm[1]))
    return dict(model=best_model, score=best_score, header_score=score(products, sms, HEADER_MODEL, keys),
                large_rate_measured=rate is not None, left_out=len(products) - len(keys))


def fit_text(result: dict) -> str:
    model, got, header = result["model"], result["score"], result["header_score"]
    if got["model"] is None or header["model"] is None:
        return "no product was timed under torch, auto and every model's choice: nothing to fit"
    lines = [f"{name}: {model[name]:.4g}" for name in HEADER_MODEL]
    lines.append(f"scored on the {got['products']} products where every model's choice was timed "
                 f"({result['left_out']} left out)")
    lines.append("large_fmas_per_sm_ns: " + ("measured (the unsplit plans of at least one wave)" if result["large_rate_measured"]
                                             else "the header's (no unsplit plan of a whole wave was timed)"))
    rows = [["fitted", str(got["products"]), f"{got['model']:.3f}", f"{got['model_min']:.3f}", f"{got['auto']:.3f}", f"{got['best']:.3f}"],
            ["header", str(header["products"]), f"{header['model']:.3f}", f"{header['model_min']:.3f}", f"{header['auto']:.3f}", f"{header['best']:.3f}"]]
    lines.append(table.fixed_width(["constants", "products", "torch / choice", "min", "torch / auto", "torch / best"],
                                   rows, numeric={1, 2, 3, 4, 5}))
    return "\n".join(lines)


def measure(products: Sequence[tuple[int, int, int]], sms: int, budget: timing.Timing) -> list[dict]:
    """Times torch's F.linear, auto and every plan of options_for, interleaved, a product at a time."""
    import torch.nn.functional as F

    import torch_gemm

    dev = torch.device("cuda")
    variable = "TORCH_GEMM_MULTISTAGE_PLAN"
    saved = os.environ.pop(variable, None)

    def under(plan: Optional[str], fn):
        def call():
            if plan is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = plan
            return fn()
        return call

    rows = []
    progress = cli.Progress(len(products))
    try:
        for M, N, K in products:
            progress.step(f"{M}x{N}x{K}")
            x, w = torch.randn(M, K, device=dev), torch.randn(N, K, device=dev)
            ours = lambda: torch_gemm.linear_tiled(x, w, kernel="multistage")
            fns = {"torch": under(None, lambda: F.linear(x, w)), "auto": under(None, ours)}
            fns.update({option: under(option, ours) for option in options_for(M, N, K, sms)})
            ms = timing.time_interleaved(list(fns.values()), dev, budget)
            rows += [dict(M=M, N=N, K=K, option=option, ms=t) for option, t in zip(fns, ms)]
            del x, w
    finally:
        progress.close()
        os.environ.pop(variable, None)
        if saved is not None:
            os.environ[variable] = saved
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = cli.tuning_parser(__doc__, DEFAULT_TIMING)
    parser.add_argument("--tokens", nargs="+", type=int, default=list(TOKENS))
    cli.add_output_args(parser, "<gpu>-multistage.json/.csv")
    args = parser.parse_args(argv)
    budget = cli.budget_from(args, parser)
    if args.fit:
        rows, sms = cli.fitted_record_rows(parser, args.fit, "tune_multistage", args.sm_count)
        print(fit_text(fit(rows, sms)))
        return 0
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0):
        print("tune_multistage: needs an sm_80+ GPU and the CUDA kernels; " + hdevice.no_cuda_kernels_message())
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 as torch's default runs it: IEEE
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    products = grid_products(args.tokens)
    out = cli.output_dir(args, parser)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(products)} products; {cli.output_note(out)}")
    path = out / f"{hdevice.device_slug(dev)}-multistage.json"
    record = None
    for first in range(0, len(products), SAVE_EVERY):  # a record after each part: a cut-off run keeps them
        rows = measure(products[first:first + SAVE_EVERY], sms, budget)
        record = cli.write_tuning_record(path, "tune_multistage", dev, "benchmarks/tune_multistage.py", argv, budget,
                                         sms, rows, ROW_KEY, ROW_FIELDS, timer=timing.pair_timer_name(dev))
    if record is None:
        print("tune_multistage: no products to time")
        return 0
    print(fit_text(fit(record["rows"], sms)))
    print(f"record: {path} ({len(record['rows'])} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
