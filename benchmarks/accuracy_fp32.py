"""How accurate each float32 path is against float64: torch.mm in IEEE float32 (SGEMM), torch.mm
in TF32 (1xTF32), and torch_gemm's wgmma_sm90_3xtf32 and its default float32 kernel, on the same
inputs, for K from 16 to 65536 and three input distributions.

Two measures per product, as CUTLASS's example 27 and docs/numerics.md take them: the relative L2
error ‖C − C₆₄‖ / ‖C₆₄‖, and the largest element error in units of the float32 bound's scale,
max |C − C₆₄| / (u₃₂ · (|A|·|B|)), u₃₂ = 2⁻²⁴. Prints a markdown table (the README's) and writes
``<gpu>-accuracy.json``.

    python benchmarks/accuracy_fp32.py                 # the table, M = N = 256
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Callable, Optional, Sequence

import torch

import torch_gemm
from harness import cli, device as hdevice, records
from harness.dtypes import tf32_mode

KS = (16, 64, 256, 1024, 4096, 16384, 65536)
DISTRIBUTIONS = ("uniform", "normal", "wide")
U32 = 2.0**-24
ROW_KEY = ("path", "distribution", "K")
ROW_FIELDS = ROW_KEY + ("M", "N", "rel_l2", "max_elem_in_u")
# log2 of the wide distribution's magnitudes: log-uniform over 2^-60 … 2^60, random signs.
WIDE_LOG2 = 60.0


def operand(rows: int, cols: int, distribution: str, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    if distribution == "uniform":
        return torch.rand(rows, cols, generator=gen, device=device) * 2 - 1
    if distribution == "normal":
        return torch.randn(rows, cols, generator=gen, device=device)
    exponents = (torch.rand(rows, cols, generator=gen, device=device) * 2 - 1) * WIDE_LOG2
    signs = torch.randint(0, 2, (rows, cols), generator=gen, device=device) * 2 - 1
    return (signs * torch.exp2(exponents)).float()


def paths(device: torch.device) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """The float32 products compared, each under its own TF32 and precision settings."""

    def torch_mm(tf32: bool):
        def run(a, b):
            with tf32_mode(tf32):
                return torch.mm(a, b)
        return run

    def ours(kernel: str):
        def run(a, b):
            with tf32_mode(False):
                return torch_gemm.mm_tiled(a, b, kernel=kernel)
        return run

    found = {"SGEMM (torch.mm, IEEE)": torch_mm(False), "1xTF32 (torch.mm, TF32)": torch_mm(True),
             "torch_gemm auto (IEEE)": ours("auto")}
    if "wgmma_sm90_3xtf32" in torch_gemm.available_kernels(device, torch.float32, allow_tf32=False):
        found["torch_gemm 3xTF32"] = ours("wgmma_sm90_3xtf32")
    return found


def errors(out: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor) -> tuple[float, float]:
    """(relative L2 error, largest element error in units of u32 · (|A|·|B|)); inf where out is not
    finite but the reference is."""
    diff = out.double() - ref
    if not torch.isfinite(diff).all():
        return math.inf, math.inf
    rel_l2 = (diff.norm() / ref.norm()).item() if ref.norm() > 0 else 0.0
    per_elem = (diff.abs() / (U32 * scale).clamp_min(torch.finfo(torch.float64).tiny)).max().item()
    return rel_l2, per_elem


def measure(ks: Sequence[int], distributions: Sequence[str], size: int, device: torch.device, seed: int) -> list[dict]:
    rows = []
    runners = paths(device)
    for distribution in distributions:
        for K in ks:
            gen = torch.Generator(device=device).manual_seed(seed + K)
            a = operand(size, K, distribution, gen, device)
            b = operand(K, size, distribution, gen, device)
            ref = a.double() @ b.double()
            scale = a.double().abs() @ b.double().abs()
            for name, run in runners.items():
                rel_l2, per_elem = errors(run(a, b), ref, scale)
                rows.append(dict(path=name, distribution=distribution, K=K, M=size, N=size,
                                 rel_l2=rel_l2, max_elem_in_u=per_elem))
    return rows


def markdown(rows: Sequence[dict]) -> str:
    """One table per measure: a row per (distribution, K), a column per path."""
    names = list(dict.fromkeys(r["path"] for r in rows))
    keys = list(dict.fromkeys((r["distribution"], r["K"]) for r in rows))
    at = {(r["path"], r["distribution"], r["K"]): r for r in rows}
    out = []
    for field, title in (("rel_l2", "relative L2 error against float64"),
                         ("max_elem_in_u", "largest element error, in u32·(|A|·|B|)")):
        out.append(f"{title}:\n")
        out.append("| inputs | K | " + " | ".join(names) + " |")
        out.append("|---|---|" + "---|" * len(names))
        for distribution, K in keys:
            cells = [f"{at[(n, distribution, K)][field]:.2e}" if (n, distribution, K) in at else "-" for n in names]
            out.append(f"| {distribution} | {K} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ks", nargs="+", type=int, default=list(KS))
    parser.add_argument("--distributions", nargs="+", default=list(DISTRIBUTIONS), choices=DISTRIBUTIONS)
    parser.add_argument("--size", type=int, default=256, help="M = N (default 256)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None)
    cli.add_output_args(parser, "<gpu>-accuracy.json/.csv")
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = measure(args.ks, args.distributions, args.size, device, args.seed)
    print(markdown(rows))
    out = cli.output_dir(args, parser)
    out.mkdir(parents=True, exist_ok=True)
    commit, dirty = records.git_state()
    metadata = records.run_metadata(hdevice.device_fields(device), commit, dirty, timer="none (errors only)",
                                    script="benchmarks/accuracy_fp32.py", argv=argv)
    path = out / f"{hdevice.device_slug(device)}-accuracy.json"
    record = records.write_merged(path, "accuracy_fp32", metadata, rows, ROW_KEY, ROW_FIELDS)
    print(f"record: {path} ({len(record['rows'])} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
