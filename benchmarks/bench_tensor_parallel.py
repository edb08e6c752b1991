"""One tensor-parallel decoder layer, forward + backward, with every projection on torch_gemm
against the same layer on nn.Linear in the same run, and the projection products' share of each
step (issue 32). Method and columns: docs/benchmarks.md.

    torchrun --nproc-per-node 2 benchmarks/bench_tensor_parallel.py --width 4096 --tokens 8192 --dtype bfloat16
    torchrun --nproc-per-node 2 benchmarks/bench_tensor_parallel.py --device cpu --width 64 --tokens 32 --head-dim 32
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import torch
import torch.distributed as dist

import torch_gemm
from torch_gemm.attention import DecoderConfig, DecoderLayer
from torch_gemm.distributed import exit_rank, rank_device
from torch_gemm.nn import swap_linear

from bench_attention import CHECK_TOL, HEAD_DIM, MLP_RATIO, intermediate_size
from harness import cli, device as devices, gate, records, table

PROGRAM = "bench_tensor_parallel"
SCRIPT = "benchmarks/bench_tensor_parallel.py"
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}

ROW_FIELDS = (
    "width", "tokens", "batch", "seq_len", "tp", "dtype", "heads", "intermediate", "kernel", "backend",
    "status", "ms", "torch_ms", "ratio", "projection_share", "torch_projection_share", "share_basis",
    "rel_diff", "tol", "reps", "error", "git_commit",
)
ROW_KEY = ("width", "tokens", "batch", "tp", "dtype", "kernel")

# The products of the projections in a profile, whichever side runs them: torch_gemm's ops, and
# the aten ops nn.Linear goes through (linear forward, mm/addmm in its backward). Time inside them
# counts with them, so nesting (a DTensor op around its local call) is counted once.
TORCH_PRODUCT_OPS = frozenset({"aten::linear", "aten::mm", "aten::addmm"})
# Collectives: a DTensor op may redistribute its inputs inside its call; that is communication,
# not the product, wherever it is recorded.
COMM_PREFIXES = ("c10d::", "_c10d_functional::", "nccl:", "gloo:", "record_param_comms")
# Recorded around the all-reduce that starts every step together: not part of the step.
SYNC_LABEL = "bench_tensor_parallel::sync_ranks"
STATUS_CODES = ("OK", "WRONG", "ERROR")


# ---------------------------------------------------------------------------------------------
# The projections' share of a profiled step (pure: tested without a profiler).


@dataclass(frozen=True)
class OpTime:
    """One op of a profile: its self time (device or CPU, µs) and the ops around it, outermost
    first."""

    name: str
    self_us: float
    enclosing: tuple[str, ...] = ()


def is_product(name: str) -> bool:
    """An op that computes a projection's product, on torch_gemm or on torch."""
    return name.startswith("gemm::") or name in TORCH_PRODUCT_OPS


def is_communication(name: str) -> bool:
    return name.startswith(COMM_PREFIXES)


def projection_share(ops: Iterable[OpTime]) -> Optional[float]:
    """The self time of the products and of what they call (collectives excepted), over the self
    time of every op; the ranks' start-together all-reduce (under SYNC_LABEL) is left out of
    both. None when no time was recorded."""
    total = products = 0.0
    for op in ops:
        chain = (*op.enclosing, op.name)
        if SYNC_LABEL in chain:
            continue
        total += op.self_us
        if any(map(is_product, chain)) and not any(map(is_communication, chain)):
            products += op.self_us
    return products / total if total > 0 else None


def profile_ops(events: Sequence, basis: str) -> list[OpTime]:
    """``OpTime``s of a profiler's CPU-side events: ``basis`` "device" takes the kernel time each
    op launched itself, "cpu" its self CPU time. Kernel events are left out: their time is in the
    op that launched them."""
    ops = []
    for event in events:
        if getattr(event, "device_type", None) != torch.autograd.DeviceType.CPU:
            continue
        enclosing, parent = [], event.cpu_parent
        while parent is not None:
            enclosing.append(parent.name)
            parent = parent.cpu_parent
        self_us = event.self_device_time_total if basis == "device" else event.self_cpu_time_total
        ops.append(OpTime(event.name, float(self_us), tuple(reversed(enclosing))))
    return ops


def shares_of(events: Sequence, device: torch.device) -> tuple[Optional[float], str]:
    """(projection share, basis) of a profile: device time on a GPU where the profiler recorded
    kernels, else CPU time."""
    if device.type == "cuda":
        share = projection_share(profile_ops(events, "device"))
        if share is not None:
            return share, "device"
    return projection_share(profile_ops(events, "cpu")), "cpu"


# ---------------------------------------------------------------------------------------------
# Ranks, layers and steps.


def pick_device(choice: str, dtype_choice: str, local_rank: int, local_world: int) -> tuple[str, torch.device, str]:
    """(backend, device, dtype name) for this rank, as examples/tensor_parallel.py picks them."""
    try:
        backend, device = rank_device(choice, local_rank, local_world)
    except RuntimeError as e:
        sys.exit(f"{PROGRAM}: {e}")
    if dtype_choice == "auto":
        return backend, device, "bfloat16" if device.type == "cuda" else "float32"
    return backend, device, dtype_choice


def parallelize_layer(layer: DecoderLayer, mesh) -> DecoderLayer:
    """The plan ``parallelize_decoder`` gives each of its layers (without sequence parallelism):
    attention heads split over the ranks, gate/up columnwise and down rowwise."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from torch_gemm.distributed import parallelize_attention

    parallelize_attention(layer.self_attn, mesh)
    parallelize_module(layer.mlp, mesh, {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(),
                                         "down_proj": RowwiseParallel()})
    return layer


def build_layers(args: argparse.Namespace, device: torch.device, dtype: torch.dtype, mesh) -> tuple:
    """(ours, torch's): one layer from one seed on every rank, a copy of it swapped, both made
    tensor-parallel."""
    torch.manual_seed(0)
    config = DecoderConfig(hidden_size=args.width, num_heads=args.width // args.head_dim,
                           intermediate_size=intermediate_size(args.width))
    theirs = DecoderLayer(config, device=device, dtype=dtype)
    ours = swap_linear(copy.deepcopy(theirs), kernel=args.kernel, all_linear=True)
    return parallelize_layer(ours, mesh), parallelize_layer(theirs, mesh)


def layer_step(layer: torch.nn.Module, x: torch.Tensor, grad: torch.Tensor) -> Callable[[], tuple]:
    """Forward, then the gradients of x and of every parameter; returns (output, x's gradient,
    the parameters' gradients...)."""
    inputs = [x, *layer.parameters()]

    def step() -> tuple:
        out = layer(x)
        return (out, *torch.autograd.grad(out, inputs, grad))
    return step


def sync_ranks(device: torch.device) -> None:
    """Return when every rank has got here and its device is idle: the start of a timed step."""
    with torch.profiler.record_function(SYNC_LABEL):
        dist.all_reduce(torch.zeros(1, device=device))
        devices.sync(device)


def check_layers(ours: Callable[[], tuple], theirs: Callable[[], tuple], tol: float,
                 device: torch.device) -> tuple[str, Optional[float], Optional[str]]:
    """(status, rel_diff, error) of ours' output and x's gradient against torch's, the same on
    every rank: the worst status and the largest difference of any rank."""
    reference = tuple(t.detach().clone() for t in theirs()[:2])
    status, diff, error = gate.check_against(lambda: ours()[:2], reference, tol)
    worst = torch.tensor([STATUS_CODES.index(status), -1.0 if diff is None else diff], dtype=torch.float64,
                         device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    code, diff_max = worst.tolist()
    return STATUS_CODES[int(code)], gate.finite_or_none(diff_max) if diff_max >= 0 else None, error


def time_steps(steps: Sequence[Callable[[], tuple]], device: torch.device, warmup: int, reps: int) -> list[float]:
    """Median ms of each step: rep by rep in turn, the order reversed every other rep, each rep
    started on all ranks together and its time the slowest rank's. No L2 flush: a layer's
    weights and activations are many times the L2."""
    times = torch.zeros(len(steps), reps, dtype=torch.float64)
    cuda = device.type == "cuda"
    start, end = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else (None, None)
    for rep in range(warmup + reps):
        order = range(len(steps)) if rep % 2 == 0 else reversed(range(len(steps)))
        for k in order:
            sync_ranks(device)
            if cuda:
                start.record()
                steps[k]()
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                steps[k]()
                ms = (time.perf_counter() - t0) * 1e3
            if rep >= warmup:
                times[k, rep - warmup] = ms
    times = times.to(device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return [statistics.median(row) for row in times.cpu().tolist()]


def profile_share(step: Callable[[], tuple], device: torch.device, n_steps: int) -> tuple[Optional[float], str]:
    """The projections' share of ``step`` over ``n_steps`` profiled on rank 0; every rank runs
    the steps (their collectives need all ranks), only rank 0 records them."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    recording = profile(activities=activities) if dist.get_rank() == 0 else contextlib.nullcontext()
    with recording as prof:
        for _ in range(n_steps):
            sync_ranks(device)
            step()
        devices.sync(device)
    if prof is None:
        return None, "device" if device.type == "cuda" else "cpu"
    return shares_of(prof.events(), device)


# ---------------------------------------------------------------------------------------------
# Output.


LEGEND = (
    ("ms", "median time of one forward + backward step, every projection on torch_gemm (slowest rank per rep)"),
    ("torch ms", "the same for the layer on nn.Linear, timed in the same reps"),
    ("ratio", "torch ms / ms: above 1, torch_gemm is faster"),
    ("proj share", "the products' share of the step's device time (CPU time on CPUs), ours / torch's layer"),
    ("rel_diff", "largest |ours - torch| / |torch| of the output and x's gradient; WRONG: beyond the bound, not timed"),
)


def format_table(rows: Sequence[dict]) -> str:
    """The rows as a fixed-width table with its legend."""
    header = ("width", "tokens", "tp", "dtype", "ms", "torch ms", "ratio", "proj share", "rel_diff", "status")
    lines = [(
        str(r["width"]), str(r["tokens"]), str(r["tp"]), r["dtype"], table.fmt(r["ms"], ".3f"),
        table.fmt(r["torch_ms"], ".3f"), table.fmt(r["ratio"], ".3f"),
        f"{table.fmt(r['projection_share'], '.1%')} / {table.fmt(r['torch_projection_share'], '.1%')}",
        table.fmt(r["rel_diff"], ".1e"), table.status_text(r, ".0e"),
    ) for r in rows]
    return "\n".join([table.fixed_width(header, lines, numeric={0, 1, 2, 4, 5, 6, 7, 8}),
                      table.legend(LEGEND), "Method and columns: docs/benchmarks.md"])


# ---------------------------------------------------------------------------------------------
# Command line.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench_tensor_parallel.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=4096, help="model width (default: %(default)s)")
    parser.add_argument("--tokens", type=int, default=8192,
                        help="tokens per step, batch x sequence (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=1,
                        help="sequences the tokens are split into (default: %(default)s)")
    parser.add_argument("--head-dim", type=int, default=HEAD_DIM, help="width of one head (default: %(default)s)")
    parser.add_argument("--dtype", choices=["auto", *DTYPES], default="auto",
                        help="auto: bfloat16 on GPUs, float32 on CPUs")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: CUDA over NCCL where every rank has a GPU, else CPU over gloo")
    parser.add_argument("--kernel", default="auto", help="kernel= of the swapped projections (default: auto)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed reps of each layer first (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=20, help="timed reps of each layer (default: %(default)s)")
    parser.add_argument("--profile-steps", type=int, default=3,
                        help="steps of each layer profiled for the projections' share; 0: none (default: %(default)s)")
    parser.add_argument("--timeout-s", type=int, default=300,
                        help="a collective waiting longer fails the run instead of hanging (default: %(default)s)")
    cli.add_output_args(parser, "<gpu>-tp.json/.csv")
    return parser


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser, world: int) -> None:
    """Exit through ``parser`` on sizes the tensor-parallel layer cannot take."""
    for name in ("width", "tokens", "batch", "head_dim", "reps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    if args.warmup < 0 or args.profile_steps < 0:
        parser.error("--warmup and --profile-steps must be >= 0")
    if args.width % args.head_dim:
        parser.error(f"--width {args.width} is not a multiple of --head-dim {args.head_dim}")
    if args.tokens % args.batch:
        parser.error(f"--tokens {args.tokens} is not a multiple of --batch {args.batch}")
    heads = args.width // args.head_dim
    if heads % world:
        parser.error(f"{heads} heads do not split over {world} ranks (each rank takes whole heads)")
    if intermediate_size(args.width) % world:
        parser.error(f"the MLP width {intermediate_size(args.width)} does not split over {world} ranks")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if "RANK" not in os.environ:
        parser.error(f"start it with torchrun, e.g. torchrun --nproc-per-node 2 {SCRIPT}")
    out = cli.output_dir(args, parser)
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    backend, device, dtype_name = pick_device(args.device, args.dtype, local_rank, local_world)
    validate(args, parser, int(os.environ["WORLD_SIZE"]))
    available = torch_gemm.available_kernels(device, DTYPES[dtype_name])
    if args.kernel not in available:
        parser.error(f"--kernel {args.kernel!r} is not available for {dtype_name} on {device.type}: "
                     f"{', '.join(available)}")
    json_path = out / f"{devices.device_slug(device)}-tp.json"
    # A file there that is not a record stops the run before the measurement; every rank reads it
    # (one host, one file), since a rank that stopped alone would leave the others waiting.
    records.load_record(json_path, PROGRAM)

    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout_s))
    from torch.distributed.device_mesh import init_device_mesh

    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh(device.type, (world,))
    dtype = DTYPES[dtype_name]
    say = print if rank == 0 else (lambda *a, **k: None)
    for line in devices.build_lines(device):
        say(f"{PROGRAM}: {line}")
    say(f"{PROGRAM}: {devices.device_name(device)} x {world} ranks ({backend}) | decoder layer, width {args.width}, "
        f"{args.tokens} tokens, {dtype_name}, TP={world} | {args.warmup} + {args.reps} reps, interleaved")
    say(f"{PROGRAM}: {cli.output_note(out)}")

    ours, theirs = build_layers(args, device, dtype, mesh)
    gen = torch.Generator(device=device).manual_seed(args.tokens)
    shape = (args.batch, args.tokens // args.batch, args.width)
    x = torch.randn(shape, device=device, generator=gen).to(dtype).requires_grad_()
    grad = torch.randn(shape, device=device, generator=gen).to(dtype)
    ours_step, torch_step = layer_step(ours, x, grad), layer_step(theirs, x, grad)

    tol = CHECK_TOL[dtype_name]
    status, diff, error = check_layers(ours_step, torch_step, tol, device)
    ms = torch_ms = share = torch_share = None
    basis = "device" if device.type == "cuda" else "cpu"
    if status == "OK":
        ms, torch_ms = time_steps([ours_step, torch_step], device, args.warmup, args.reps)
        if args.profile_steps:
            share, basis = profile_share(ours_step, device, args.profile_steps)
            torch_share, _ = profile_share(torch_step, device, args.profile_steps)
    else:
        say(f"{PROGRAM}: {status}: the swapped layer's output or input gradient differs from nn.Linear's "
            f"(rel_diff {table.fmt(diff, '.2e')}, bound {tol:g}{'; ' + error if error else ''}); not timed",
            file=sys.stderr)

    if rank == 0:
        commit, dirty = records.git_state()
        row = {
            "width": args.width, "tokens": args.tokens, "batch": args.batch, "seq_len": args.tokens // args.batch,
            "tp": world, "dtype": dtype_name, "heads": args.width // args.head_dim,
            "intermediate": intermediate_size(args.width), "kernel": args.kernel, "backend": backend,
            "status": status, "ms": ms, "torch_ms": torch_ms, "ratio": torch_ms / ms if ms and torch_ms else None,
            "projection_share": share, "torch_projection_share": torch_share, "share_basis": basis,
            "rel_diff": diff, "tol": tol, "reps": args.reps, "error": error, "git_commit": commit,
        }
        metadata = records.run_metadata(devices.device_fields(device), commit, dirty,
                                        timer=("CUDA events" if device.type == "cuda" else "time.perf_counter")
                                        + ", ours and torch interleaved rep by rep, slowest rank (median)",
                                        script=SCRIPT, argv=argv)
        metadata.update(world_size=world, backend=backend, head_dim=args.head_dim, mlp_ratio=MLP_RATIO,
                        warmup_reps=args.warmup, reps=args.reps, profile_steps=args.profile_steps)
        out.mkdir(parents=True, exist_ok=True)
        record = records.write_merged(json_path, PROGRAM, metadata, [row], ROW_KEY, ROW_FIELDS)
        print(format_table([row]))
        print(f"{PROGRAM}: wrote {json_path} ({len(record['rows'])} rows after merge) "
              f"and {json_path.with_suffix('.csv')}")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if status == "OK" else 1


if __name__ == "__main__":
    exit_rank(main())
