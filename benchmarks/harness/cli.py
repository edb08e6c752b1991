"""Command-line pieces every benchmark script shares: list arguments, the timing budget, where
the record goes (``--out``/``--record``), and a progress line over a sweep."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

from harness import records
from harness.timing import Timing

Shape = tuple[int, int, int]  # (M, N, K)


def split_list(values: Optional[Sequence[str]]) -> list[str]:
    """Values given as repeated arguments and/or comma-separated lists, flattened, in order,
    without duplicates."""
    return list(dict.fromkeys(v for value in values or () for v in re.split(r"[,\s]+", value) if v))


def parse_ints(values: Optional[Sequence[str]], what: str) -> list[int]:
    """Positive integers from ``split_list``; ``ValueError`` naming the bad item."""
    numbers = []
    for item in split_list(values):
        if not re.fullmatch(r"\d+", item) or int(item) < 1:
            raise ValueError(f"{what}: {item!r} is not a positive integer")
        numbers.append(int(item))
    return numbers


def parse_shapes(spec: str | Sequence[str], presets: Optional[Mapping[str, Sequence[Shape]]] = None) -> list[Shape]:
    """Shapes (M, N, K) from ``MxNxK`` items and names of ``presets``, separated by commas or
    whitespace, in order and without duplicates. Raises ``ValueError`` naming the bad item."""
    presets = presets or {}
    named = f" or a preset name ({', '.join(presets)})" if presets else ""
    text = spec if isinstance(spec, str) else ",".join(spec)
    items = [t for t in re.split(r"[,\s]+", text) if t]
    if not items:
        raise ValueError("no shapes given: expected MxNxK items" + (f" or presets {', '.join(presets)}" if presets else ""))
    shapes: list[Shape] = []
    for item in items:
        if item.lower() in presets:
            shapes.extend(presets[item.lower()])
            continue
        m = re.fullmatch(r"(\d+)[xX×](\d+)[xX×](\d+)", item)
        if m is None:
            raise ValueError(f"bad shape {item!r}: expected MxNxK with positive integers (e.g. 4096x4096x4096){named}")
        dims = tuple(int(g) for g in m.groups())
        if min(dims) < 1:
            raise ValueError(f"bad shape {item!r}: every dimension must be at least 1")
        shapes.append(dims)  # type: ignore[arg-type]
    return list(dict.fromkeys(shapes))


def add_timing_args(parser: argparse.ArgumentParser) -> None:
    """--warmup-ms and --rep-ms: the CUDA-event timing budget of one measurement."""
    parser.add_argument("--warmup-ms", type=float, default=Timing.warmup_ms,
                        help="warm-up time per measurement in ms (default: %(default)g, as do_bench)")
    parser.add_argument("--rep-ms", type=float, default=Timing.rep_ms,
                        help="time of the timed reps per measurement in ms (default: %(default)g, as do_bench)")


def budget_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Timing:
    """The validated timing budget of ``add_timing_args``; bad values exit through ``parser``."""
    if not (args.warmup_ms >= 0 and args.rep_ms > 0):
        parser.error("--warmup-ms must be >= 0 and --rep-ms > 0")
    return Timing(args.warmup_ms, args.rep_ms)


def add_output_args(parser: argparse.ArgumentParser, files: str) -> None:
    """--out DIR and --record: where ``files`` (e.g. "<gpu>.json/.csv") go."""
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help=f"directory of the {files} record (default: ./{records.DEFAULT_OUT_NAME} in the current "
                             "directory; rows merge into a record already there)")
    parser.add_argument("--record", action="store_true",
                        help="write into the checkout's benchmarks/results instead: the committed records "
                             "that benchmarks/report.py turns into the README table")


def output_dir(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Path:
    """The directory of ``add_output_args``: --out, the checkout's records with --record, else
    ./bench_results. --record with another --out, or with a script's --no-record, exits through
    ``parser``."""
    if args.record and getattr(args, "no_record", False):
        parser.error("--record writes the record into the checkout, --no-record writes none; drop one")
    if args.record:
        if args.out is not None and args.out.resolve() != records.RESULTS_DIR.resolve():
            parser.error(f"--record writes into {records.RESULTS_DIR}; drop --out {args.out} or --record")
        return records.RESULTS_DIR
    return args.out if args.out is not None else records.default_out()


def output_note(out: Path) -> str:
    """One line for the header: where the record goes, and how to send it elsewhere."""
    if out.resolve() == records.RESULTS_DIR.resolve():
        return f"record: {out} (the checkout's committed records)"
    return f"record: {out.resolve()} (--out DIR elsewhere; --record for the checkout's benchmarks/results)"


class Progress:
    """tqdm over a sweep when it is installed, else a carriage-return counter on stderr."""

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


def tuning_parser(doc: str, budget: Timing) -> argparse.ArgumentParser:
    """A tuning script's parser (its docstring's first paragraph as the description), with ``--fit
    FILE``, ``--sm-count`` and the timing budget's ``--warmup-ms`` and ``--rep-ms`` (defaults:
    ``budget``)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", type=Path, help="fit a record instead of measuring")
    parser.add_argument("--sm-count", type=int, default=None, help="with --fit: the GPU's SMs (default: the record's)")
    parser.add_argument("--warmup-ms", type=float, default=budget.warmup_ms)
    parser.add_argument("--rep-ms", type=float, default=budget.rep_ms)
    return parser


def fitted_record_rows(parser: argparse.ArgumentParser, path: Path, program: str,
                       sm_count: Optional[int]) -> tuple[list[dict], int]:
    """A tuning script's ``--fit FILE``: the record's rows and the GPU's SM count (``--sm-count``,
    else the record's); a missing file or SM count stops the script with a usage error."""
    record = records.load_record(path, program)
    if record is None:
        parser.error(f"--fit {path}: no such file")
    sms = sm_count or record["metadata"].get("sm_count")
    if not sms:
        parser.error("--fit: the record names no sm_count; pass --sm-count")
    return record["rows"], sms


def write_tuning_record(path: Path, program: str, device, script: str, argv: Optional[Sequence[str]],
                        budget: Timing, sms: int, rows: Sequence[dict], row_key: Sequence[str],
                        row_fields: Sequence[str], timer: Optional[str] = None) -> dict:
    """A tuning script's record: the run's metadata with the GPU's SM count (which its fit reads),
    ``rows`` merged into the record at ``path``. ``timer``: how the rows were timed (default:
    ``timing.timer_name``'s, one call at a time). Returns the merged record."""
    from harness import device as hdevice, timing

    commit, dirty = records.git_state()
    metadata = records.run_metadata(hdevice.device_fields(device), commit, dirty, timer=timer or timing.timer_name(device),
                                    script=script, argv=argv, warmup_ms=budget.warmup_ms, rep_ms=budget.rep_ms)
    metadata["sm_count"] = sms
    return records.write_merged(path, program, metadata, rows, row_key, row_fields)
