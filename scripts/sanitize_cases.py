"""Runs every CUDA kernel of the build on shapes with edge tiles, in every dtype it takes and in
transposed/offset layouts, once each: the workload scripts/sanitize.sh runs under
compute-sanitizer. Exits non-zero if any result is wrong.

Inputs are made on the CPU and copied to the GPU, and results are checked on the CPU: the
sanitizers instrument only our kernels (--kernel-name kns=gemm_), so memory written by torch's
own kernels would look uninitialized to initcheck, while host copies are tracked."""

import sys

import torch

import torch_gemm
from torch_gemm.ops import DTYPE_BY_NAME

SHAPES = [(1, 1, 1), (7, 5, 3), (33, 65, 17), (129, 257, 31), (128, 128, 8), (255, 129, 130), (16, 4, 513)]


def main() -> int:
    bad = 0
    for row in torch_gemm.kernel_table():
        if row["device"] != "cuda":
            continue
        for dtype in (DTYPE_BY_NAME[d] for d in row["dtypes"]):
            for M, N, K in SHAPES:
                for a_t, b_t, offset in ((False, False, 0), (True, False, 0), (False, True, 1), (True, True, 1)):
                    a_base = torch.randn((K, M + offset) if a_t else (M, K + offset)).to(dtype)
                    b_base = torch.randn((N, K + offset) if b_t else (K, N + offset)).to(dtype)
                    a_cpu = a_base[:, offset:].t() if a_t else a_base[:, offset:]
                    b_cpu = b_base[:, offset:].t() if b_t else b_base[:, offset:]
                    a_gpu, b_gpu = a_base.cuda(), b_base.cuda()
                    a = a_gpu[:, offset:].t() if a_t else a_gpu[:, offset:]
                    b = b_gpu[:, offset:].t() if b_t else b_gpu[:, offset:]
                    out = torch_gemm.mm_tiled(a, b, kernel=row["name"]).cpu()
                    ref = a_cpu.double() @ b_cpu.double()
                    err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                    if not err < (1e-5 if dtype in (torch.float32, torch.float64) else 2e-2):
                        print(f"WRONG {row['name']} {dtype} {(M, N, K)} a_t={a_t} b_t={b_t}: {err:.2e}")
                        bad += 1
    torch.cuda.synchronize()
    print(f"sanitize_cases: {'all correct' if not bad else f'{bad} wrong'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
