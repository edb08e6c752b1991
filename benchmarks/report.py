"""Regenerate the README's results table from the benchmark records (benchmarks/results/*.json).

One markdown table per device record, a line per (shape, layout, dtype): the auto kernel's
TFLOP/s, the fastest rung and its TFLOP/s, torch.mm's TFLOP/s from the same run, and auto /
torch.mm. By default only the headline shapes (DESIGN §6's anchors and the issues' targets) are
shown where the record has them; ``--all`` lists every shape. Kernels that failed the
correctness check are listed under the table. Records without mm_tiled rows (the attention
benchmark's ``<gpu>-attention.json``) are left out.

Usage::

    python benchmarks/report.py                  # print the tables
    python benchmarks/report.py --write          # also replace the block in README.md between
                                                 # <!-- results:begin --> and <!-- results:end -->
    python benchmarks/report.py --all            # every shape of every record
    python benchmarks/report.py --results /tmp/bench --readme /tmp/README.md --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
OP = "mm_tiled"
# Table order of dtypes; the names are bench_mm.py's (not imported, so this runs without torch).
DTYPE_ORDER = ("float32", "tf32", "bfloat16", "float16", "float64")
# (M, N, K) shown by default: DESIGN §6's anchors, the issues' targets, a decode shape.
HEADLINE_SHAPES = {
    (4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 4096), (8192, 12288, 4096),
    (8192, 4096, 14336), (4095, 4095, 4095), (4097, 4096, 4096), (1000, 1000, 1000),
    (2048, 2048, 2048), (16, 4096, 4096),
}


def load_records(results_dir: Path) -> list[tuple[Path, dict]]:
    """(path, record) of every results JSON with mm_tiled rows, sorted by file name."""
    records = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise SystemExit(f"report: {path} is not valid JSON: {e}") from None
        if isinstance(record, dict) and any(r.get("op") == OP for r in record.get("rows", [])):
            records.append((path, record))
    return records


def _group_order(key: tuple) -> tuple:
    dtype, layout, M, N, K = key
    rank = DTYPE_ORDER.index(dtype) if dtype in DTYPE_ORDER else len(DTYPE_ORDER)
    return (rank, layout, M, N, K)


def summarize(rows: Sequence[dict], headline_only: bool = False) -> list[dict]:
    """A line per (dtype, layout, shape), in table order: the auto row (``auto``, whatever its
    status) and the fastest correct non-auto row (``best``, or None). With headline_only, only
    HEADLINE_SHAPES, if the rows have any of them."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("op") == OP:
            groups.setdefault((r["dtype"], r["layout"], r["M"], r["N"], r["K"]), []).append(r)
    keys = sorted(groups, key=_group_order)
    if headline_only and any(k[2:] in HEADLINE_SHAPES for k in keys):
        keys = [k for k in keys if k[2:] in HEADLINE_SHAPES]
    lines = []
    for key in keys:
        group = groups[key]
        auto = next((r for r in group if r["kernel"] == "auto"), None)
        others = [r for r in group if r["kernel"] != "auto" and r.get("status") == "OK" and r.get("tflops")]
        best = max(others, key=lambda r: r["tflops"]) if others else None
        lines.append({"dtype": key[0], "layout": key[1], "M": key[2], "N": key[3], "K": key[4],
                      "auto": auto, "best": best})
    return lines


def _num(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.3g}"


def _tflops(row: Optional[dict]) -> str:
    if row is None:
        return "–"
    return _num(row.get("tflops")) if row.get("status") == "OK" else f"**{row.get('status')}**"


def _provenance(summary: Sequence[dict], meta: dict) -> str:
    """The commits the shown rows were measured at, most rows first ("commits 2232659 (40 rows),
    ede474c (4 rows)"): a record merges runs, so its metadata names only the last one."""
    counts: dict[str, int] = {}
    for line in summary:
        for row in (line["auto"], line["best"]):
            if row is not None:
                commit = (row.get("git_commit") or meta.get("git_commit") or "?")[:7]
                counts[commit] = counts.get(commit, 0) + 1
    parts = [f"{c} ({n} rows)" for c, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return ("commit " if len(parts) == 1 else "commits ") + ", ".join(parts)


def render_record(record: dict, headline_only: bool = True) -> str:
    """Markdown for one device: a heading, the run's provenance, the table, and failures."""
    meta = record.get("metadata", {})
    summary = summarize(record["rows"], headline_only)
    lines = [
        f"### {meta.get('device', '?')}",
        "",
        f"torch {meta.get('torch', '?')}, CUDA {meta.get('cuda') or '–'}, "
        f"{_provenance(summary, meta)}; last run {(meta.get('date') or '?')[:10]}, timed with {meta.get('timer', '?')}"
        + ("; TF32 only in tf32 rows." if meta.get("device_type") == "cuda" else "."),
        "",
        "| shape (M×N×K) | layout | dtype | auto TFLOP/s | fastest rung | its TFLOP/s | torch.mm TFLOP/s | auto / torch.mm |",
        "|---|---|---|---:|---|---:|---:|---:|",
    ]
    for line in summary:
        auto, best = line["auto"], line["best"]
        torch_tflops = (auto or best or {}).get("torch_tflops")
        ratio = auto.get("ratio") if auto and auto.get("status") == "OK" else None
        lines.append(
            f"| {line['M']}×{line['N']}×{line['K']} | {line['layout']} | {line['dtype']} | {_tflops(auto)} | "
            f"{best['kernel'] if best else '–'} | {_tflops(best)} | {_num(torch_tflops)} | {_num(ratio)} |"
        )
    failed = [r for r in record["rows"] if r.get("op") == OP and r.get("status") != "OK"]
    if failed:
        lines += ["", "Not timed (failed the float64 check or raised): " + "; ".join(
            f"{r['kernel']} {r['M']}×{r['N']}×{r['K']} {r['layout']} {r['dtype']} ({r.get('status')})"
            for r in failed
        ) + "."]
    return "\n".join(lines)


def render(records: Sequence[tuple[Path, dict]], results_dir: Path, headline_only: bool = True) -> str:
    """The whole generated block (without the markers)."""
    try:
        shown = results_dir.resolve().relative_to(REPO_ROOT)
    except ValueError:  # results outside the repository
        shown = results_dir
    note = f"<!-- generated by benchmarks/report.py from {shown}/*.json; rerun it instead of editing this block -->"
    if not records:
        return note + "\n\n_No benchmark results yet: run `python benchmarks/bench_mm.py --quick`._"
    body = "\n\n".join(render_record(rec, headline_only) for _, rec in records)
    if headline_only:
        body += (f"\n\nHeadline shapes only; every shape, layout and rung is in `{shown}/*.json` / `.csv` "
                 "(`python benchmarks/report.py --all`), with plots in `*-square.png` and `*-ratio.png`.")
    return note + "\n\n" + body


def replace_block(text: str, block: str) -> Optional[str]:
    """``text`` with everything between the markers replaced by ``block``; None if the markers
    are missing or out of order."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[: start + len(BEGIN)] + "\n" + block + "\n" + text[end:]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "benchmarks" / "results",
                        help="directory of bench_mm.py records (default: benchmarks/results)")
    parser.add_argument("--readme", type=Path, default=REPO_ROOT / "README.md",
                        help="file whose marked block --write replaces (default: README.md)")
    parser.add_argument("--write", action="store_true",
                        help=f"replace the block between {BEGIN} and {END} in --readme")
    parser.add_argument("--all", action="store_true", help="every shape, not only the headline ones")
    args = parser.parse_args(argv)

    block = render(load_records(args.results), args.results, headline_only=not args.all)
    print(block)
    if args.write:
        text = args.readme.read_text() if args.readme.exists() else ""
        new_text = replace_block(text, block)
        if new_text is None:
            print(f"report: {args.readme} has no {BEGIN} ... {END} block; nothing written", file=sys.stderr)
        elif new_text != text:
            args.readme.write_text(new_text)
            print(f"report: updated {args.readme}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
