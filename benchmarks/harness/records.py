"""Records: ``{"metadata": {...}, "rows": [...]}`` JSON files, one per device and benchmark, with a
CSV of the same rows beside each. A run merges its rows into the record already at the path (a
row with the same key replaces the old one, the others stay) and its metadata over the old
metadata. Where records go: ``./bench_results`` under the current directory unless ``--out``
says otherwise; the checkout's ``benchmarks/results`` (the committed records that report.py
turns into the README table) only when asked, with ``--record`` or ``--out benchmarks/results``.

No torch here: report.py reads records without it.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
# The committed records: report.py reads them, --record writes them.
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# Where a run writes by default: under the directory it was started from, never into the
# checkout's records (the checkout's .gitignore lists the name).
DEFAULT_OUT_NAME = "bench_results"

# The dtype names rows carry, in table order. "tf32" is float32 with TF32 tensor cores allowed.
DTYPE_ORDER = ("float32", "tf32", "float32-3xtf32", "bfloat16", "float16", "float64")

# Metadata every record has (run_metadata writes them; each benchmark adds its own keys).
METADATA_KEYS = ("device", "device_type", "torch", "cuda", "torch_gemm", "git_commit", "git_dirty", "date",
                 "timer", "command", "python")


def default_out() -> Path:
    """The default output directory: ``bench_results`` in the current directory."""
    return Path.cwd() / DEFAULT_OUT_NAME


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


def run_metadata(device_fields: dict, commit: Optional[str], dirty: Optional[bool], *, timer: str, script: str,
                 argv: Optional[Sequence[str]] = None, warmup_ms: Optional[float] = None,
                 rep_ms: Optional[float] = None) -> dict:
    """The metadata every benchmark writes: what ran on what (``device_fields``, from
    harness.device.device_fields), at which commit, when, timed how, and the command line
    (``argv``, or this process's). ``warmup_ms``/``rep_ms``: the CUDA-event timing budget, for
    the scripts timed that way. Each benchmark adds its own keys."""
    metadata = {
        **device_fields,
        "git_commit": commit,
        "git_dirty": dirty,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "timer": timer,
    }
    if warmup_ms is not None:
        metadata.update(warmup_ms=warmup_ms, rep_ms=rep_ms)
    metadata.update(command=shlex.join([script, *(sys.argv[1:] if argv is None else argv)]),
                    python=platform.python_version())
    return metadata


def key_of(fields: Sequence[str]) -> Callable[[dict], tuple]:
    """The merge key of rows: the values of ``fields``."""
    return lambda row: tuple(row.get(k) for k in fields)


def merge_records(old: Optional[dict], metadata: dict, rows: Sequence[dict], key: Callable[[dict], tuple],
                  order: Optional[Callable[[dict], tuple]] = None) -> dict:
    """The record after a run: ``rows`` replace old rows with the same ``key``, other old rows
    stay, all sorted by ``order`` (default: the key's values as strings); metadata keys of the
    run replace the old ones."""
    old = old or {}
    merged = {key(r): r for r in old.get("rows", [])}
    merged.update((key(r), r) for r in rows)
    order = order or (lambda r: tuple(map(str, key(r))))
    return {
        "metadata": {**old.get("metadata", {}), **metadata},
        "rows": sorted(merged.values(), key=order),
    }


def load_record(path: Path, program: str) -> Optional[dict]:
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


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file so an interrupted run never leaves a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_record(record: dict, json_path: Path, csv_path: Path, fields: Sequence[str]) -> None:
    """JSON with one row per line (readable diffs), and the same rows as CSV: ``fields`` first,
    then any other keys the rows have."""
    rows_text = ",\n".join("  " + json.dumps(r) for r in record["rows"])
    write_atomic(
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


def write_merged(path: Path, program: str, metadata: dict, rows: Sequence[dict], row_key: Sequence[str],
                 row_fields: Sequence[str], order: Optional[Callable[[dict], tuple]] = None) -> dict:
    """Merge ``rows`` into the record at ``path`` (``<name>.json``; a row with the same
    ``row_key`` values replaces the old one) and write it with ``<name>.csv`` beside it. Returns
    the merged record."""
    record = merge_records(load_record(path, program), metadata, rows, key_of(row_key), order)
    write_record(record, path, path.with_suffix(".csv"), row_fields)
    return record


def write_host_timed_record(path: Path, program: str, metadata: dict, rows: Sequence[dict],
                            row_key: Sequence[str], row_fields: Sequence[str]) -> None:
    """``write_merged`` for the scripts timed by the host's clock, rows ordered by their key,
    and the path printed."""
    write_merged(path, program, metadata, rows, row_key, row_fields)
    print(f"record: {path}")
