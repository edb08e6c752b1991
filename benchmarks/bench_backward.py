"""Times the backward of a product through torch_gemm (both gradients, through mm_tiled's autograd
formula) against the same through torch.mm, on the same inputs and the same upstream gradient.

    python benchmarks/bench_backward.py                      # 8192x4096x4096 float32, TF32 off
    python benchmarks/bench_backward.py --shapes 4096x4096x4096 --dtype float32

The backward of C = A @ B computes dA = dC @ B^T and dB = A^T @ dC: two products in the NT and TN
layouts. Time is the median of CUDA-event-timed reps (triton.testing.do_bench when available;
docs/benchmarks.md) of torch.autograd.grad(C, (A, B), dC), forward excluded, ours and torch's
one after the other. Rows go to ``<out>/<gpu>-backward.json`` (``<out>``: ./bench_results
unless --out or --record says otherwise) with ``ms``, ``torch_ms`` and ``ratio`` = torch time /
ours; a run replaces the record.
"""

from __future__ import annotations

import argparse
import sys

import torch

import torch_gemm

from harness import cli, device as devices, peaks, records, timing
from harness.timing import Timing

PROGRAM = "bench_backward"
ROW_FIELDS = ("op", "kernel", "dtype", "M", "N", "K", "ms", "torch_ms", "ratio", "tflops")


def backward_ms(mm, a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor, budget: Timing) -> float:
    out = mm(a, b)
    return timing.time_ms(lambda: torch.autograd.grad(out, (a, b), grad, retain_graph=True), a.device, budget)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_backward.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="8192x4096x4096", help="comma-separated MxNxK")
    parser.add_argument("--dtype", default="float32", choices=["float32", "tf32"])
    cli.add_output_args(parser, "<gpu>-backward.json/.csv")
    args = parser.parse_args(argv)
    try:
        shapes = cli.parse_shapes(args.shapes)
    except ValueError as e:
        parser.error(f"--shapes: {e}")
    out = cli.output_dir(args, parser)
    if not torch.cuda.is_available():
        print(f"{PROGRAM}: needs a CUDA device")
        return 1
    device = torch.device("cuda")
    for line in devices.build_lines(device):
        print(f"{PROGRAM}: {line}")
    print(f"{PROGRAM}: {cli.output_note(out)}")
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    budget = Timing()
    rows = []
    for M, N, K in shapes:
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(M, K, device=device, generator=gen).requires_grad_()
        b = torch.randn(K, N, device=device, generator=gen).requires_grad_()
        grad = torch.randn(M, N, device=device, generator=gen)
        ours = backward_ms(torch_gemm.mm_tiled, a, b, grad, budget)
        theirs = backward_ms(torch.mm, a, b, grad, budget)
        tflops = 2 * peaks.tflops_of(M, N, K, ours)  # two products: dA and dB
        row = {"op": "mm_backward", "kernel": "auto", "dtype": args.dtype, "M": M, "N": N, "K": K,
               "ms": ours, "torch_ms": theirs, "ratio": theirs / ours, "tflops": tflops}
        rows.append(row)
        print(f"backward {M}x{N}x{K} {args.dtype}: ours {ours:.3f} ms ({tflops:.1f} TFLOP/s), "
              f"torch {theirs:.3f} ms, ratio (torch/ours) {theirs / ours:.3f}")
    commit, dirty = records.git_state()
    metadata = records.run_metadata(devices.device_fields(device), commit, dirty, timer=timing.timer_name(device),
                                    script="benchmarks/bench_backward.py", argv=argv, warmup_ms=budget.warmup_ms,
                                    rep_ms=budget.rep_ms)
    metadata["tf32"] = args.dtype == "tf32"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{devices.device_slug(device)}-backward.json"
    records.write_record({"metadata": metadata, "rows": rows}, path, path.with_suffix(".csv"), ROW_FIELDS)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
