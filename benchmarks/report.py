"""Regenerate the results in README.md and docs/benchmarks.md from the committed benchmark records
(benchmarks/results/*.json).

README.md, between ``<!-- results:begin -->`` and ``<!-- results:end -->``: about a dozen headline
rows from ONE record, one GPU: torch_gemm's ``auto`` kernel against torch.mm on the same inputs in
the same run, the GPU and the commit stated above the table, and the attention block's rows from
that GPU's ``-attention`` record where there is one. The record is the H200's where it has the
headline shapes, else the newest H100 or H200 record with bfloat16 rows, else the newest record;
``--record`` picks one.

docs/benchmarks.md, between the same markers: the full tables, one per record, a line per
(shape, layout, dtype) of the tables' shapes (every shape with ``--all``): auto's TFLOP/s, the
fastest other kernel, torch.mm's TFLOP/s from the same run, auto / torch.mm, and the kernels that
failed the correctness check. Records without mm_tiled rows (``-attention``, ``-overhead``, ...)
have no full table.

Usage::

    python benchmarks/report.py                  # print both blocks
    python benchmarks/report.py --write          # and write them into README.md and docs/benchmarks.md
    python benchmarks/report.py --record benchmarks/results/nvidia-h100-80gb-hbm3.json
    python benchmarks/report.py --results /tmp/bench --readme /tmp/README.md --docs /tmp/bench.md --write
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from harness import table
from harness.records import DTYPE_ORDER, REPO_ROOT, RESULTS_DIR

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
OP = "mm_tiled"
SHORT_DTYPE = {"float32": "fp32", "tf32": "tf32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64"}

# The README's rows: NN layout, kernel auto, these shapes per dtype in this order; a row the
# record lacks is left out. Model shapes are Llama-3-8B's projections at 8192 tokens.
SHAPE_NAMES: dict[tuple[int, int, int], str] = {
    (4096, 4096, 4096): "square",
    (8192, 8192, 8192): "square",
    (4095, 4095, 4095): "ragged: no tile divides it",
    (1000, 1000, 1000): "small, ragged",
    (8192, 12288, 4096): "fused QKV projection",
    (8192, 4096, 14336): "MLP down projection",
    (16, 4096, 4096): "decode, 16 tokens",
}
HEADLINE_SHAPES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "bfloat16": tuple(SHAPE_NAMES),
    "float16": ((4096, 4096, 4096), (8192, 8192, 8192), (4095, 4095, 4095)),
    "tf32": ((4096, 4096, 4096),),
    "float32": ((4096, 4096, 4096),),
}
# The attention block's rows in the README: (dtype, width, tokens), every module and pass.
ATTENTION_HEADLINE = ("bfloat16", 4096, 8192)
ATTENTION_MODULES = ("attention", "decoder_layer")
# (M, N, K) of the full tables by default: the headline shapes, the anchors of the performance
# log, a decode shape.
TABLE_SHAPES = {
    (4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 4096), (8192, 12288, 4096),
    (8192, 4096, 14336), (4095, 4095, 4095), (4097, 4096, 4096), (1000, 1000, 1000),
    (2048, 2048, 2048), (16, 4096, 4096),
}
# The GPUs whose record the README shows by default.
GPU_PATTERN = re.compile(r"\bH(100|200)\b")
# The commit since which the benchmarks time ours and torch interleaved rep by rep; rows measured
# before it timed torch first, then ours.
INTERLEAVED_SINCE = "9ffa057"


def load_records(results_dir: Path) -> list[tuple[Path, dict]]:
    """(path, record) of every results JSON with mm_tiled rows, sorted by file name."""
    found = []
    for path in sorted(results_dir.glob("*.json")):
        record = _read(path)
        if isinstance(record, dict) and any(r.get("op") == OP for r in record.get("rows", [])):
            found.append((path, record))
    return found


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"report: {path} is not valid JSON: {e}") from None


def _auto_row(record: dict, dtype: str, shape: tuple[int, int, int]) -> Optional[dict]:
    return next((r for r in record["rows"] if r.get("op") == OP and r.get("kernel") == "auto"
                 and r.get("layout") == "NN" and r.get("dtype") == dtype and (r["M"], r["N"], r["K"]) == shape), None)


def _date(item: tuple[Path, dict]) -> str:
    return item[1].get("metadata", {}).get("date") or ""


def pick_record(found: Sequence[tuple[Path, dict]]) -> Optional[tuple[Path, dict]]:
    """The README's record: the H200's where it has the headline bfloat16 4096³ row, else the
    newest H100 or H200 record with bfloat16 rows, else the newest record."""
    if not found:
        return None
    hopper = [item for item in found if GPU_PATTERN.search(item[1].get("metadata", {}).get("device", ""))
              and any(row.get("op") == OP and row.get("dtype") == "bfloat16" for row in item[1]["rows"])]
    h200 = [item for item in hopper if "H200" in item[1]["metadata"]["device"]
            and _auto_row(item[1], "bfloat16", (4096, 4096, 4096)) is not None]
    return max(h200 or hopper or found, key=_date)


def _commit(row: dict, meta: dict) -> str:
    return (row.get("git_commit") or meta.get("git_commit") or "?")[:7]


def _interleaved(commit: str) -> Optional[bool]:
    """Whether rows measured at ``commit`` were timed interleaved with torch (INTERLEAVED_SINCE
    is an ancestor of it); None where git cannot tell."""
    try:
        result = subprocess.run(["git", "-C", str(REPO_ROOT), "merge-base", "--is-ancestor", INTERLEAVED_SINCE, commit],
                                capture_output=True)
    except OSError:
        return None
    return {0: True, 1: False}.get(result.returncode)


def _timed_how(commit: str) -> str:
    if _interleaved(commit) is False:
        return "timed one after the other, torch.mm first"
    return "timed interleaved rep by rep"


def _pct(row: dict) -> str:
    if row.get("bw_pct") is not None:
        return f"{row['bw_pct']:.0f}% BW"
    return "–" if row.get("pct_peak") is None else f"{row['pct_peak']:.1f}%"


def _cell(row: dict, key: str, spec: str = ".3g") -> str:
    if row.get("status") != "OK" and key in ("tflops", "ratio", "ms"):
        return f"**{row.get('status')}**"
    return table.fmt(row.get(key), spec).replace("-", "–")


def render_headline(path: Path, record: dict, attention: Optional[dict]) -> str:
    """The README block's body: the GPU and commit, the headline table, the attention rows."""
    meta = record.get("metadata", {})
    picked = [(dtype, shape, SHAPE_NAMES[shape], row) for dtype, shapes in HEADLINE_SHAPES.items() for shape in shapes
              if (row := _auto_row(record, dtype, shape)) is not None]
    attention_rows = _attention_rows(attention) if attention else []
    labels = [(_commit(row, meta), f"{SHORT_DTYPE.get(dtype, dtype)} {M}×{N}×{K}")
              for dtype, (M, N, K), _, row in picked]
    labels += [(_commit(row, attention.get("metadata", {})), f"{row['module']} {row['pass']}") for row in attention_rows]
    commits = Counter(commit for commit, _ in labels)
    main_commit = commits.most_common(1)[0][0] if commits else _commit({}, meta)

    def mark(row: dict, row_meta: dict) -> str:
        return "" if _commit(row, row_meta) == main_commit else "†"

    lines = [
        f"**{meta.get('device', '?')}**, commit `{main_commit}` (torch {meta.get('torch', '?')}, "
        f"CUDA {meta.get('cuda') or '–'}; record `{_shown(path)}`, last updated {(meta.get('date') or '?')[:10]}). "
        "Each row: torch_gemm's `mm_tiled` (kernel `auto`) against `torch.mm` on the same inputs in the same "
        f"run, {_timed_how(main_commit)} (CUDA events, median, L2 flushed), after the output passed a "
        "float64 check.",
        "",
        "| M×N×K | shape | dtype | torch_gemm TFLOP/s | torch.mm TFLOP/s | ratio | of peak |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for dtype, (M, N, K), what, row in picked:
        lines.append(f"| {M}×{N}×{K}{mark(row, meta)} | {what} | {SHORT_DTYPE.get(dtype, dtype)} | "
                     f"{_cell(row, 'tflops')} | {_cell(row, 'torch_tflops')} | {_cell(row, 'ratio', '.3f')} | "
                     f"{_pct(row)} |")
    peak = meta.get("peak_tflops") or {}
    peak_text = ", ".join(f"{SHORT_DTYPE.get(d, d)} {v:g}" for d, v in peak.items())
    notes = ["ratio: torch_gemm TFLOP/s / torch.mm TFLOP/s; above 1, torch_gemm is faster."]
    if peak_text:
        notes.append(f"of peak: of the datasheet dense peak ({meta.get('peak_source') or 'this GPU'}: "
                     f"{peak_text} TFLOP/s).")
    if meta.get("copy_gbps"):
        notes.append("BW: a bandwidth-bound row's bytes (A, B and C once) over its time, of the copy bandwidth "
                     f"measured in the run ({meta['copy_gbps']:.0f} GB/s).")
    if attention_rows:
        att_meta = attention.get("metadata", {})
        dtype, width, tokens = ATTENTION_HEADLINE
        lines += [
            "",
            f"An attention block and a Llama-style decoder layer (`benchmarks/bench_attention.py`), width {width}, "
            f"{tokens} tokens, {SHORT_DTYPE[dtype]}: the module with its projections on torch_gemm against the same "
            "module on `nn.Linear` (same weights and inputs, same run).",
            "",
            "| module | pass | torch_gemm ms | torch ms | ratio |",
            "|---|---|---:|---:|---:|",
        ]
        for row in attention_rows:
            lines.append(f"| {row['module']}{mark(row, att_meta)} | {row['pass']} | {_cell(row, 'ms', '.3f')} | "
                         f"{_cell(row, 'torch_ms', '.3f')} | {_cell(row, 'ratio', '.3f')} |")
        notes.append("Attention ratio: torch ms / torch_gemm ms; above 1, torch_gemm is faster.")
    others = [c for c in sorted(commits) if c != main_commit]
    if others:
        notes.append("† measured at another commit, in a run merged into the same record: " + "; ".join(
            f"`{c}` ({', '.join(label for commit, label in labels if commit == c)}"
            + (f"; before {INTERLEAVED_SINCE}, so torch.mm was timed first" if _interleaved(c) is False else "")
            + ")" for c in others) + ".")
    notes.append("Every shape, layout and kernel of every record: [docs/benchmarks.md](docs/benchmarks.md#results).")
    return "\n".join(lines + [""] + [" ".join(notes)])


def _attention_rows(record: dict) -> list[dict]:
    dtype, width, tokens = ATTENTION_HEADLINE
    return [r for module in ATTENTION_MODULES for pass_name in ("fwd", "fwd+bwd") for r in record.get("rows", [])
            if (r.get("module"), r.get("pass"), r.get("dtype"), r.get("width"), r.get("tokens"), r.get("batch"))
            == (module, pass_name, dtype, width, tokens, 1)]


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it is inside it."""
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# The full tables.


def _group_order(key: tuple) -> tuple:
    dtype, layout, M, N, K = key
    rank = DTYPE_ORDER.index(dtype) if dtype in DTYPE_ORDER else len(DTYPE_ORDER)
    return (rank, layout, M, N, K)


def summarize(rows: Sequence[dict], headline_only: bool = False) -> list[dict]:
    """A line per (dtype, layout, shape), in table order: the auto row (``auto``, whatever its
    status) and the fastest correct non-auto row (``best``, or None). With headline_only, only
    TABLE_SHAPES, if the rows have any of them."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("op") == OP:
            groups.setdefault((r["dtype"], r["layout"], r["M"], r["N"], r["K"]), []).append(r)
    keys = sorted(groups, key=_group_order)
    if headline_only and any(k[2:] in TABLE_SHAPES for k in keys):
        keys = [k for k in keys if k[2:] in TABLE_SHAPES]
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
    counts: Counter[str] = Counter()
    for line in summary:
        for row in (line["auto"], line["best"]):
            if row is not None:
                counts[_commit(row, meta)] += 1
    parts = [f"{c} ({n} rows)" for c, n in counts.most_common()]
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


def _note(source: str) -> str:
    return f"<!-- generated by benchmarks/report.py from {source}; rerun it instead of editing this block -->"


def render_readme(results_dir: Path, record_path: Optional[Path] = None) -> str:
    """The README block (without the markers)."""
    if record_path is not None:
        chosen: Optional[tuple[Path, dict]] = (record_path, _read(record_path))
    else:
        chosen = pick_record(load_records(results_dir))
    if chosen is None:
        return _note(f"{_shown(results_dir)}/*.json") + \
            "\n\n_No benchmark results yet: run `python benchmarks/bench_mm.py --quick`._"
    path, record = chosen
    attention_path = path.with_name(f"{path.stem}-attention.json")
    attention = _read(attention_path) if attention_path.exists() else None
    source = _shown(path) + (f" and {attention_path.name}" if attention else "")
    return _note(source) + "\n\n" + render_headline(path, record, attention)


def render_docs(results_dir: Path, headline_only: bool = True) -> str:
    """The docs block (without the markers): a full table per record."""
    found = load_records(results_dir)
    note = _note(f"{_shown(results_dir)}/*.json")
    if not found:
        return note + "\n\n_No benchmark results yet: run `python benchmarks/bench_mm.py --quick`._"
    body = "\n\n".join(render_record(rec, headline_only) for _, rec in found)
    if headline_only:
        body += (f"\n\nSelected shapes; every shape, layout and rung is in `{_shown(results_dir)}/*.json` / `.csv` "
                 "(`python benchmarks/report.py --all`), with plots in `*-square.png` and `*-ratio.png`.")
    return note + "\n\n" + body


def replace_block(text: str, block: str) -> Optional[str]:
    """``text`` with everything between the markers replaced by ``block``; None if the markers
    are missing or out of order."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[: start + len(BEGIN)] + "\n" + block + "\n" + text[end:]


def write_block(path: Path, block: str) -> None:
    """Replace the marked block of ``path``; say so, or say why not."""
    text = path.read_text() if path.exists() else ""
    new_text = replace_block(text, block)
    if new_text is None:
        print(f"report: {path} has no {BEGIN} ... {END} block; nothing written", file=sys.stderr)
    elif new_text != text:
        path.write_text(new_text)
        print(f"report: updated {path}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR,
                        help="directory of bench_mm.py records (default: benchmarks/results)")
    parser.add_argument("--record", type=Path, help="the README's record (default: picked as the module says)")
    parser.add_argument("--readme", type=Path, default=REPO_ROOT / "README.md",
                        help="file whose marked block gets the headline table (default: README.md)")
    parser.add_argument("--docs", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md",
                        help="file whose marked block gets the full tables (default: docs/benchmarks.md)")
    parser.add_argument("--write", action="store_true",
                        help=f"replace the blocks between {BEGIN} and {END} in --readme and --docs")
    parser.add_argument("--all", action="store_true", help="full tables: every shape, not only the selected ones")
    args = parser.parse_args(argv)

    readme_block = render_readme(args.results, args.record)
    docs_block = render_docs(args.results, headline_only=not args.all)
    print(readme_block + "\n\n" + docs_block)
    if args.write:
        write_block(args.readme, readme_block)
        write_block(args.docs, docs_block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
