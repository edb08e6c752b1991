"""Runs every CUDA kernel of the build on shapes with edge tiles, in every dtype it takes and in
transposed/offset layouts, once each, plus one linear_tiled with a bias per kernel and dtype, and
for kernels that fuse mm_tiled_row_sum's row sums that op on every shape: the workload
scripts/sanitize.sh runs under compute-sanitizer. Exits non-zero if any result is wrong.
A kernel that multiplies float32 in TF32 runs its float32 cases with TF32 allowed (and a TF32
tolerance). SANITIZE_KERNELS=wgmma_sm90,mma_sm80 restricts the run to those kernels.

Inputs are made on the CPU and copied to the GPU, and results are checked on the CPU: the
sanitizers instrument only our kernels (--kernel-name kns=gemm_), so memory written by torch's
own kernels would look uninitialized to initcheck, while host copies are tracked."""

import os
import sys

import torch

import torch_gemm
from torch_gemm.ops import DTYPE_BY_NAME

SHAPES = [(1, 1, 1), (7, 5, 3), (33, 65, 17), (129, 257, 31), (128, 128, 8), (255, 129, 130), (16, 4, 513)]
# For the tensor-core kernels: C rows 16-byte aligned (wgmma's TMA-store epilogue) with edge tiles
# in M, N and K. On a 132-SM H100/H200, 16-bit: the first takes wgmma's 64×128 tiles, the second
# (68 tiles, one wave) and third (350 tiles, 3 rounds) its paired 128×128 tiles, the fourth its
# paired 128×256 tiles (225 tiles: a persistent block stores several through its box ring); tf32
# takes 64×256 tiles on the first two and 128×256 on the others. K is long enough (5 k-tiles of
# 64, 10 of tf32's 32) for the rings to wrap. The 128×256 tiles split along K, which the plan no
# longer picks (TORCH_GEMM_WGMMA_SHAPE=2x2), are not in this run.
TENSOR_CORE_SHAPES = [(200, 264, 72), (250, 4264, 2050), (1250, 4400, 320), (1800, 3840, 320)]
TENSOR_CORE_KERNELS = ("wgmma_sm90", "mma_sm80")
# Kernels whose bias reaches the consumers through an mbarrier-ordered shared-memory row, which
# racecheck reports as a race although it is ordered (scripts/racecheck_probe.cu shows the same on
# a minimal kernel); sanitize.sh names the tool in SANITIZE_TOOL.
RACECHECK_BLIND_TO_BIAS = ("wgmma_sm90",)


def tolerance(dtype: torch.dtype, tf32: bool) -> float:
    if dtype in (torch.float32, torch.float64):
        return 1e-2 if tf32 else 1e-5
    return 2e-2


def check(name: str, what: str, out: torch.Tensor, ref: torch.Tensor, tol: float) -> int:
    err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    if err < tol:
        return 0
    print(f"WRONG {name} {what}: {err:.2e}")
    return 1


def run_cases(name: str, dtype: torch.dtype, shapes: list, tol: float) -> int:
    """Every shape in the four layouts through mm_tiled, then the last shape through linear_tiled
    with a bias (added by the kernel); returns the number of wrong results."""
    bad = 0
    for M, N, K in shapes:
        for a_t, b_t, offset in ((False, False, 0), (True, False, 0), (False, True, 1), (True, True, 1)):
            a_base = torch.randn((K, M + offset) if a_t else (M, K + offset)).to(dtype)
            b_base = torch.randn((N, K + offset) if b_t else (K, N + offset)).to(dtype)
            a_cpu = a_base[:, offset:].t() if a_t else a_base[:, offset:]
            b_cpu = b_base[:, offset:].t() if b_t else b_base[:, offset:]
            a_gpu, b_gpu = a_base.cuda(), b_base.cuda()
            a = a_gpu[:, offset:].t() if a_t else a_gpu[:, offset:]
            b = b_gpu[:, offset:].t() if b_t else b_gpu[:, offset:]
            out = torch_gemm.mm_tiled(a, b, kernel=name).cpu()
            ref = a_cpu.double() @ b_cpu.double()
            bad += check(name, f"{dtype} {(M, N, K)} a_t={a_t} b_t={b_t}", out, ref, tol)
    if name in RACECHECK_BLIND_TO_BIAS and os.environ.get("SANITIZE_TOOL") == "racecheck":
        print(f"sanitize_cases: {name} {dtype} linear + bias left out of racecheck "
              "(its bias row's mbarrier handoff, scripts/racecheck_probe.cu)")
        return bad
    M, N, K = shapes[-1]
    x, w, bias = torch.randn(M, K).to(dtype), torch.randn(N, K).to(dtype), torch.randn(N).to(dtype)
    out = torch_gemm.linear_tiled(x.cuda(), w.cuda(), bias.cuda(), kernel=name).cpu()
    ref = x.double() @ w.double().t() + bias.double()
    return bad + check(name, f"{dtype} linear {(M, N, K)} + bias", out, ref, tol)


def run_row_sum_cases(name: str, dtype: torch.dtype, shapes: list, tol: float) -> int:
    """mm_tiled_row_sum on every shape with a = gᵀ, as linear_tiled_weight_grad (linear's
    backward) runs it: the row sums the kernel writes besides C. Returns the number of wrong
    results."""
    bad = 0
    for M, N, K in shapes:
        g, b = torch.randn(K, M).to(dtype), torch.randn(K, N).to(dtype)
        out, row_sum = torch_gemm.mm_tiled_row_sum(g.cuda().t(), b.cuda(), kernel=name)
        bad += check(name, f"{dtype} row_sum product {(M, N, K)}", out.cpu(), g.double().t() @ b.double(), tol)
        bad += check(name, f"{dtype} row sums {(M, N, K)}", row_sum.cpu(), g.double().sum(0), tol)
    return bad


def main() -> int:
    only = [k for k in os.environ.get("SANITIZE_KERNELS", "").split(",") if k]
    names = {row["name"] for row in torch_gemm.kernel_table() if row["device"] == "cuda"}
    unknown = sorted(set(only) - names)
    if unknown:
        print(f"sanitize_cases: SANITIZE_KERNELS names no CUDA kernel of this build: {unknown} "
              f"(there are {sorted(names)})")
        return 2
    major, minor = torch.cuda.get_device_capability()
    bad = 0
    for row in torch_gemm.kernel_table():
        name = row["name"]
        if row["device"] != "cuda" or (only and name not in only):
            continue
        if row["min_sm"] > major * 10 + minor:
            print(f"sanitize_cases: {name} needs sm_{row['min_sm']}, skipped on sm_{major}{minor}")
            continue
        shapes = SHAPES + (TENSOR_CORE_SHAPES if name in TENSOR_CORE_KERNELS else [])
        for dtype in (DTYPE_BY_NAME[d] for d in row["dtypes"]):
            tf32 = bool(row.get("tf32")) and dtype == torch.float32
            allowed = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                bad += run_cases(name, dtype, shapes, tolerance(dtype, tf32))
                if row["row_sum"]:
                    bad += run_row_sum_cases(name, dtype, shapes, tolerance(dtype, tf32))
            finally:
                torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.cuda.synchronize()
    print(f"sanitize_cases: {'all correct' if not bad else f'{bad} wrong'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
