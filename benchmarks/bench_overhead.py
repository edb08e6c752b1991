"""Host overhead: the CPU time a call of each op costs to enqueue, against the torch equivalent.

Each op runs on products small enough that the device is never the bottleneck (a few µs of GPU
work a call; on the CPU a product of a few thousand multiply-adds), so the time per call is the
host's: argument checks, dispatch, autograd bookkeeping, planning and the launches. Passes:
``fwd`` (inputs that do not require grad) and ``fwd+bwd`` (every input requires grad; the
forward, then ``backward`` of a fixed upstream gradient, the gradients reset to None each call
as ``optimizer.zero_grad()`` does). Ops and their torch equivalents:

    mm          mm_tiled(a, b)            torch.mm(a, b)
    bmm         bmm_tiled(a, b)           torch.bmm(a, b)
    linear      linear_tiled(x, w[, b])   F.linear(x, w[, b])      x 2-D or 3-D, bias or none
    mm_row_sum  mm_tiled_row_sum(a, b)    (torch.mm(a, b), a.sum(1))

Timing: ``time.perf_counter`` over a block of calls with the device synchronized before the block
and not inside it (a block enqueues far fewer launches than CUDA's queue holds, so the host never
waits on the GPU); ours and torch's blocks alternate, and each figure is the median over the
blocks of µs per call. ``ratio = torch_us / us``: above 1, our call costs the host less.

Usage::

    python benchmarks/bench_overhead.py                 # CUDA (if present) and CPU, every case
    python benchmarks/bench_overhead.py --device cuda --profile   # and where the µs go

Rows merge into ``<out>/<device>-overhead.json`` (``<out>``: ./bench_results unless --out or
--record says otherwise; docs/benchmarks.md; rows: op, pass, bias, x_dim, kernel, device,
dtype, M, N, K, batch, us, torch_us, ratio). ``--profile`` prints torch.profiler's CPU table (self
time per op and autograd node) for linear fwd+bwd with a bias, ours then torch's.
"""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F

import torch_gemm

from harness import cli, device as devices, records, timing

HOST_TIMER = "time.perf_counter per block of calls, median of blocks, ours and torch alternating"

OPS = ("mm", "bmm", "linear", "mm_row_sum")
PASSES = ("fwd", "fwd+bwd")
# Per device: dtype, (M, N, K) and the batch of bmm / the leading dimension of a 3-D x. On CUDA
# a one-wave product of a decode-sized M (a few µs of GPU time); on the CPU one whose arithmetic
# is far below the call's overhead.
SHAPES = {
    "cuda": ("bfloat16", (16, 1024, 1024), 4),
    "cpu": ("float32", (4, 32, 32), 2),
}
ROW_FIELDS = ("op", "pass", "bias", "x_dim", "kernel", "device", "dtype", "M", "N", "K", "batch", "us",
              "torch_us", "ratio", "iters", "blocks", "git_commit")
ROW_KEY = ("op", "pass", "bias", "x_dim", "kernel", "device", "dtype", "M", "N", "K", "batch")


@dataclass(frozen=True)
class Case:
    op: str
    pass_: str
    bias: bool = False
    x_dim: int = 2
    kernel: str = "auto"

    @property
    def label(self) -> str:
        extra = ("+bias" if self.bias else "") + (" x3d" if self.x_dim == 3 else "")
        extra += f" [{self.kernel}]" if self.kernel != "auto" else ""
        return f"{self.op}{extra} {self.pass_}"


def all_cases() -> list[Case]:
    cases = []
    for pass_ in PASSES:
        cases += [Case("mm", pass_), Case("bmm", pass_)]
        cases += [Case("linear", pass_, bias, x_dim) for x_dim in (2, 3) for bias in (False, True)]
        cases.append(Case("mm_row_sum", pass_))
    return cases


def make_calls(case: Case, device: torch.device) -> tuple[Callable[[], None], Callable[[], None], dict]:
    """(ours, torch's, shape fields of the row): two callables of one call each on the same
    inputs, the backward included for fwd+bwd."""
    dtype_name, (M, N, K), batch = SHAPES[device.type]
    dtype = getattr(torch, dtype_name)
    grad = case.pass_ == "fwd+bwd"
    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=device, dtype=dtype, generator=gen).requires_grad_(grad)

    if case.op in ("mm", "mm_row_sum"):
        inputs = (rand(M, K), rand(K, N))
        ours_fn = torch_gemm.mm_tiled if case.op == "mm" else torch_gemm.mm_tiled_row_sum
        if case.kernel != "auto":
            ours_fn = functools.partial(ours_fn, kernel=case.kernel)
        torch_fn = torch.mm if case.op == "mm" else (lambda a, b: (torch.mm(a, b), a.sum(1)))
        shape = dict(M=M, N=N, K=K, batch=1)
    elif case.op == "bmm":
        inputs = (rand(batch, M, K), rand(batch, K, N))
        ours_fn, torch_fn = torch_gemm.bmm_tiled, torch.bmm
        shape = dict(M=M, N=N, K=K, batch=batch)
    else:
        x = rand(batch, M // batch, K) if case.x_dim == 3 else rand(M, K)
        inputs = (x, rand(N, K)) + ((rand(N),) if case.bias else ())
        ours_fn, torch_fn = torch_gemm.linear_tiled, F.linear
        shape = dict(M=M, N=N, K=K, batch=batch if case.x_dim == 3 else 1)
    # The upstream gradients, one per output, made once.
    with torch.no_grad():
        outs = torch_fn(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    upstream = [torch.randn(o.shape, device=device, dtype=dtype, generator=gen) for o in outs]

    def call(fn: Callable[..., object]) -> Callable[[], None]:
        if not grad:
            return lambda: fn(*inputs)

        def step() -> None:
            for t in inputs:
                t.grad = None
            out = fn(*inputs)
            torch.autograd.backward(out if isinstance(out, tuple) else (out,), upstream)

        return step

    return call(ours_fn), call(torch_fn), shape


def measure(cases: Sequence[Case], device: torch.device, iters: int, blocks: int,
            commit: Optional[str]) -> list[dict]:
    rows = []
    dtype_name = SHAPES[device.type][0]
    for case in cases:
        ours, theirs, shape = make_calls(case, device)
        us, torch_us = timing.time_host_pair(ours, theirs, device, iters, blocks)
        rows.append({"op": case.op, "pass": case.pass_, "bias": case.bias, "x_dim": case.x_dim, "kernel": case.kernel,
                     "device": device.type, "dtype": dtype_name, **shape, "us": round(us, 2),
                     "torch_us": round(torch_us, 2), "ratio": round(torch_us / us, 3),
                     "iters": iters, "blocks": blocks, "git_commit": commit})
        print(f"  {device.type:4s} {case.label:28s} ours {us:8.1f} us   torch {torch_us:8.1f} us   "
              f"ratio {torch_us / us:5.3f}", flush=True)
    return rows


def profile(device: torch.device, iters: int) -> str:
    """torch.profiler's CPU table for linear fwd+bwd with a bias: ours, then torch's."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    ours, theirs, _ = make_calls(Case("linear", "fwd+bwd", bias=True), device)
    text = []
    for name, fn in (("torch_gemm", ours), ("torch", theirs)):
        for _ in range(iters):
            fn()
        devices.sync(device)
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(iters):
                fn()
            devices.sync(device)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
        text.append(f"== {name}: linear+bias fwd+bwd on {device.type}, {iters} calls ==\n{table}")
    return "\n".join(text)


def format_table(rows: Sequence[dict]) -> str:
    lines = [f"{'device':6s} {'case':28s} {'us':>9s} {'torch_us':>9s} {'ratio':>6s}"]
    for r in rows:
        case = Case(r["op"], r["pass"], r["bias"], r["x_dim"], r.get("kernel", "auto"))
        lines.append(f"{r['device']:6s} {case.label:28s} {r['us']:9.1f} {r['torch_us']:9.1f} {r['ratio']:6.3f}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench_overhead.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="all",
                        help="where to measure (default: all = CUDA if present, and the CPU)")
    parser.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS))
    parser.add_argument("--passes", nargs="+", choices=PASSES, default=list(PASSES))
    parser.add_argument("--iters", type=int, default=200, help="calls per timed block (default: %(default)s)")
    parser.add_argument("--blocks", type=int, default=15, help="timed blocks per side (default: %(default)s)")
    parser.add_argument("--kernels", action="store_true",
                        help="also mm fwd on every named kernel of the device: each launcher's own host cost")
    parser.add_argument("--profile", action="store_true",
                        help="also print torch.profiler's CPU table of linear+bias fwd+bwd, ours and torch's")
    cli.add_output_args(parser, "<device>-overhead.json/.csv")
    parser.add_argument("--no-record", action="store_true", help="print the table only, write no record")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.iters < 1 or args.blocks < 1:
        raise SystemExit("bench_overhead.py: --iters and --blocks must be at least 1")
    out = cli.output_dir(args, parser)
    targets = []
    if args.device in ("cuda", "all") and torch.cuda.is_available():
        targets.append(torch.device("cuda"))
    elif args.device == "cuda":
        print("bench_overhead.py: no CUDA device; nothing to measure")
        return 0
    if args.device in ("cpu", "all"):
        targets.append(torch.device("cpu"))
    cases = [c for c in all_cases() if c.op in args.ops and c.pass_ in args.passes]
    commit, dirty = records.git_state()
    rows = []
    for line in devices.build_lines(targets[0]):
        print(line)
    if not args.no_record:
        print(cli.output_note(out))
    for device in targets:
        print(f"{devices.device_name(device)}: {SHAPES[device.type][0]}, (M, N, K) = {SHAPES[device.type][1]}, "
              f"{args.iters} calls x {args.blocks} blocks a side (torch_gemm from {Path(torch_gemm.__file__).parent})",
              flush=True)
        here = list(cases)
        if args.kernels:
            dtype = getattr(torch, SHAPES[device.type][0])
            here += [Case("mm", "fwd", kernel=k) for k in torch_gemm.available_kernels(device, dtype)[1:]]
        rows += measure(here, device, args.iters, args.blocks, commit)
        if args.profile:
            print(profile(device, args.iters))
    print(format_table(rows))
    if args.no_record:
        return 0
    # The record is named after the GPU where there is one (its CPU rows are that host's).
    name_device = targets[0]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{devices.device_slug(name_device)}-overhead.json"
    metadata = records.run_metadata(devices.device_fields(name_device), commit, dirty, timer=HOST_TIMER,
                                    script="benchmarks/bench_overhead.py", argv=argv)
    metadata.update(host_cpu=devices.cpu_name(), threads=torch.get_num_threads(), shapes=SHAPES)
    records.write_host_timed_record(path, "bench_overhead.py", metadata, rows, ROW_KEY, ROW_FIELDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
