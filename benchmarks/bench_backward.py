"""Times the backward of a product through torch_gemm (both gradients, through mm_tiled's autograd
formula) against the same through torch.mm, on the same inputs and the same upstream gradient.

    python benchmarks/bench_backward.py                      # 8192x4096x4096 float32, TF32 off
    python benchmarks/bench_backward.py --shapes 4096x4096x4096 --dtype float32

The backward of C = A @ B computes dA = dC @ B^T and dB = A^T @ dC: two products in the NT and TN
layouts. Time is the median of CUDA-event-timed reps (triton.testing.do_bench when available,
as bench_mm.py) of torch.autograd.grad(C, (A, B), dC), forward excluded. Rows go to
``<out>/<gpu>-backward.json`` with ``ms``, ``torch_ms`` and ``ratio`` = torch time / ours.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

import torch_gemm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_mm  # noqa: E402  (timing, device naming and git state shared with the main benchmark)


def backward_ms(mm, a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor, timing) -> float:
    out = mm(a, b)
    return bench_mm.time_ms(lambda: torch.autograd.grad(out, (a, b), grad, retain_graph=True), a.device, timing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="8192x4096x4096", help="comma-separated MxNxK")
    parser.add_argument("--dtype", default="float32", choices=["float32", "tf32"])
    parser.add_argument("--out", default=str(bench_mm.REPO_ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_backward: needs a CUDA device")
        return 1
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    timing = bench_mm.Timing()
    rows = []
    for M, N, K in bench_mm.parse_shapes(args.shapes):
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(M, K, device=device, generator=gen).requires_grad_()
        b = torch.randn(K, N, device=device, generator=gen).requires_grad_()
        grad = torch.randn(M, N, device=device, generator=gen)
        ours = backward_ms(torch_gemm.mm_tiled, a, b, grad, timing)
        theirs = backward_ms(torch.mm, a, b, grad, timing)
        tflops = 2 * 2 * M * N * K / ours / 1e9
        row = {"op": "mm_backward", "kernel": "auto", "dtype": args.dtype, "M": M, "N": N, "K": K,
               "ms": ours, "torch_ms": theirs, "ratio": theirs / ours, "tflops": tflops}
        rows.append(row)
        print(f"backward {M}x{N}x{K} {args.dtype}: ours {ours:.3f} ms ({tflops:.1f} TFLOP/s), "
              f"torch {theirs:.3f} ms, ratio (torch/ours) {theirs / ours:.3f}")
    commit, dirty = bench_mm.git_state()
    record = {"metadata": {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "git_commit": commit, "dirty": dirty,
                           "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                           "tf32": args.dtype == "tf32"},
              "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{bench_mm.device_slug(device)}-backward.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
