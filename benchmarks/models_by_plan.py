"""A bench_models record grouped by the plan each product runs on: where the losses to torch are.

Each fwd, dx and dW row of a ``<gpu>-models.json`` is mapped to the call it timed
(``linear_tiled(x, W)``: NT; ``mm_tiled(grad, W)``: NN; ``mm_tiled(grad.T, x)``: TN) and to what
``torch_gemm.explain`` says that call runs on the record's GPU (compute capability 9.0 and the
record's SM count): the kernel and, for wgmma_sm90, the tile, K slices, pairs, stream-K and how
full one round of its blocks is; for multistage, the tile, K slices and waves. Prints the groups
of (pass, token band, plan) by their total loss (the sum of log(ours / torch) over the group: what
the band's geomean would gain if they ran at torch's pace), each with its geomean, min and worst
products. No GPU needed: the plan is CPU code, evaluated at this checkout's commit, which may
differ from the record's.

    python benchmarks/models_by_plan.py benchmarks/results/nvidia-h200-models.json
    python benchmarks/models_by_plan.py FILE --dtypes bfloat16 --passes fwd --top 10
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Optional, Sequence

import torch

import bench_models
import torch_gemm
from harness import dtypes, records, table

PLAN_PASSES = ("fwd", "dx", "dw")  # fwd+bwd is several products: no single plan
SM90 = 90  # the records' GPUs (H100, H200)
# Share of the SMs that one round of the plan's blocks keeps busy, in these bands.
FILL_BANDS = ((0.7, "<70%"), (0.9, "70-90%"), (math.inf, ">=90%"))


def product_of(row: dict) -> tuple[int, int, int, str]:
    """(M, N, K, layout) of the product a fwd, dx or dW row timed (bench_models.pass_fns)."""
    tokens, n, k = row["tokens"], row["n"], row["k"]
    return {"fwd": (tokens, n, k, "NT"), "dx": (tokens, k, n, "NN"), "dw": (n, k, tokens, "TN")}[row["pass"]]


def operands(M: int, N: int, K: int, layout: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Meta tensors with the strides of bench_models' operands: A (M, K), K-major unless layout[0]
    is "T"; B (K, N), N-major unless layout[1] is "T"."""
    a = torch.empty(M, K, device="meta", dtype=dtype) if layout[0] == "N" else torch.empty(K, M, device="meta", dtype=dtype).t()
    b = torch.empty(K, N, device="meta", dtype=dtype) if layout[1] == "N" else torch.empty(N, K, device="meta", dtype=dtype).t()
    return a, b


def fill_band(fill: float) -> str:
    return next(name for bound, name in FILL_BANDS if fill < bound)


def plan_label(explained: dict, sms: int) -> str:
    """The kernel, and for wgmma_sm90 its tile, split, pairs, stream-K and the first round's fill;
    for multistage its tile, split and waves; for decode_sm80 against an N-major weight its
    cluster and blocks."""
    plan = explained.get("plan")
    if not plan:
        return explained["kernel"]
    if explained["kernel"] == "decode_sm80":
        blocks = plan["blocks"] * plan["cluster"]
        return f"decode_sm80, N-major, cluster {plan['cluster']}, {blocks} blocks"
    tile = "x".join(map(str, plan["tile"]))
    if explained["kernel"] == "multistage":
        split = f", split {plan['split_k']}" if plan["split_k"] > 1 else ""
        return f"multistage, {tile}{split}, {plan['waves']} wave" + ("s" if plan["waves"] != 1 else "")
    parts = [explained["kernel"], tile]
    if plan["split_k"] > 1:
        groups = plan.get("split_groups", 1)
        parts.append(f"split {plan['split_k']}" + (f" x {groups} clusters" if groups > 1 else ""))
    parts.append("pairs" if plan["cluster"] == 2 else "single")
    if plan["stream_k"]:
        parts.append("stream-K")
    rounds = math.ceil(plan["grid"] / sms) if plan["split_k"] > 1 else math.ceil(plan["turns"] * plan["cluster"] / plan["grid"])
    blocks = plan["grid"] if rounds == 1 else sms
    parts.append(f"{rounds} round" + ("s" if rounds > 1 else "") + f", {fill_band(min(blocks / sms, 1.0))} busy")
    return ", ".join(parts)


def grouped(rows: Sequence[dict], sms: int) -> dict[tuple[str, str, str], list[tuple[dict, tuple]]]:
    """{(pass, token band, plan label): [(row, product), ...]} for the fwd, dx and dW rows."""
    labels: dict[tuple, str] = {}
    groups: dict[tuple[str, str, str], list[tuple[dict, tuple]]] = defaultdict(list)
    for row in rows:
        if row["pass"] not in PLAN_PASSES:
            continue
        product = product_of(row)
        key = (*product, row["dtype"])
        if key not in labels:
            a, b = operands(*product, dtypes.TORCH_DTYPES[row["dtype"]])
            # auto's float32 choice follows TF32 and the 3xTF32 setting, as the row was timed.
            with dtypes.float32_mode(row["dtype"]):
                labels[key] = plan_label(torch_gemm.explain(a, b, sm=SM90, sm_count=sms), sms)
        groups[(row["pass"], bench_models.band_of(row["tokens"]), labels[key])].append((row, product))
    return groups


def report(groups: dict[tuple[str, str, str], list[tuple[dict, tuple]]], top: int, worst: int) -> str:
    """The groups by total loss, largest first."""
    scored = []
    for (name, band, label), members in groups.items():
        logs = [math.log(row["ratio"]) for row, _ in members]
        scored.append((-sum(logs), name, band, label, members, math.exp(sum(logs) / len(logs))))
    scored.sort(key=lambda s: -s[0])
    lines = []
    for loss, name, band, label, members, geomean in scored[:top]:
        low = sorted(members, key=lambda m: m[0]["ratio"])[:worst]
        named = ", ".join(f"{M}x{N}x{K} {layout} {row['ratio']:.2f}" for row, (M, N, K, layout) in low)
        lines.append([name, band, label, str(len(members)), f"{loss:.2f}", f"{geomean:.3f}",
                      f"{min(row['ratio'] for row, _ in members):.3f}", named])
    header = ["pass", "tokens", "plan", "shapes", "loss", "geomean", "min", "worst (M x N x K layout ratio)"]
    return table.fixed_width(header, lines, numeric={3, 4, 5, 6}) + "\n" + table.legend([
        ("plan", "what torch_gemm.explain says the product runs on the record's GPU, at this checkout; for "
                 "wgmma_sm90 the tile, K slices, pairs, stream-K, the rounds of blocks and how many SMs the "
                 "first keeps busy"),
        ("loss", "sum over the group of log(torch ms / ours), negated: > 0 where the group loses to torch"),
        ("ratio", "torch ms / ours from the record (> 1: ours faster)"),
    ])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record", type=Path, help="a bench_models record (<gpu>-models.json)")
    parser.add_argument("--dtypes", nargs="+", default=None, help="default: every dtype in the record")
    parser.add_argument("--passes", nargs="+", default=list(PLAN_PASSES), choices=PLAN_PASSES)
    parser.add_argument("--sm-count", type=int, default=None, help="default: the record's")
    parser.add_argument("--top", type=int, default=25, help="groups to print (default 25)")
    parser.add_argument("--worst", type=int, default=3, help="products named a group (default 3)")
    args = parser.parse_args(argv)
    record = records.load_record(args.record, "bench_models")
    if record is None:
        parser.error(f"{args.record}: no such file")
    sms = args.sm_count or record["metadata"].get("sm_count")
    if not sms:
        parser.error(f"{args.record} names no sm_count: pass --sm-count")
    rows = [r for r in record["rows"] if r["pass"] in args.passes and (args.dtypes is None or r["dtype"] in args.dtypes)]
    unknown = sorted({r["dtype"] for r in rows} - set(dtypes.TORCH_DTYPES))
    if unknown:
        parser.error(f"dtypes without a torch dtype: {', '.join(unknown)}")
    if not rows:
        print(f"models_by_plan: no {', '.join(args.passes)} rows in {args.record} for those dtypes")
        return 0
    device = record["metadata"].get("device", "?")
    commit = str(record["metadata"].get("git_commit") or "?")[:7]
    print(f"{len(rows)} rows of {args.record} ({device}, {sms} SMs, recorded at {commit}), plans at this checkout")
    print(report(grouped(rows, sms), args.top, args.worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
