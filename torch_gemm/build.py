"""What this build of the extension holds: which kernels were compiled, and, where the CUDA
kernels were not, why that may be and how to get them. Shown by the tests' summary, the
benchmarks' header and, where a GPU is present but the CUDA kernels are missing, at import."""

from __future__ import annotations

import os
import shutil
import warnings
from typing import Optional

import torch

from torch_gemm import _C, ops

__all__ = ["build_info", "describe_build"]

_REBUILD = 'pip install --no-build-isolation -e .'


def _cuda_hint() -> Optional[str]:
    """How to get the CUDA kernels into a build that lacks them (None where it has them)."""
    if _C.built_with_cuda():
        return None
    if torch.version.cuda is None:
        return (f"torch {torch.__version__} is a CPU-only build: install a CUDA build of torch, then "
                f"rebuild ({_REBUILD})")
    toolkit = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = shutil.which("nvcc") or (toolkit and os.path.join(toolkit, "bin", "nvcc"))
    if not nvcc or not os.path.exists(nvcc):
        return (f"no CUDA toolkit was found: install the one matching torch's CUDA {torch.version.cuda}, "
                f"set CUDA_HOME to it and rebuild ({_REBUILD})")
    if torch.cuda.is_available():
        return (f"a toolkit ({nvcc}) and a GPU are here: rebuild ({_REBUILD}) without "
                "TORCH_GEMM_CPU_ONLY, with CUDA_HOME set to the toolkit")
    return (f"a toolkit is here ({nvcc}); without a visible GPU the build compiles the CPU kernel only: "
            f"TORCH_GEMM_FORCE_CUDA=1 CUDA_HOME=<toolkit> {_REBUILD} compiles the CUDA kernels anyway")


def build_info() -> dict:
    """``{"cuda_kernels": bool, "kernels": {"cpu": [...], "cuda": [...]}, "hint": str | None}``:
    the kernel names compiled per device (``kernel_table()``), and, for a build without the CUDA
    kernels, how to get them."""
    kernels: dict[str, list[str]] = {"cpu": [], "cuda": []}
    for row in ops.kernel_table():
        kernels[row["device"]].append(row["name"])
    return {"cuda_kernels": bool(_C.built_with_cuda()), "kernels": kernels, "hint": _cuda_hint()}


def describe_build() -> str:
    """One line: the kernels this build compiled, and the hint of :func:`build_info` if any."""
    info = build_info()
    line = f"torch_gemm kernels: cpu: {', '.join(info['kernels']['cpu'])}; cuda: "
    line += ", ".join(info["kernels"]["cuda"]) if info["cuda_kernels"] else "none (not compiled)"
    return line + (f" — {info['hint']}" if info["hint"] else "")


def warn_if_cuda_kernels_missing() -> None:
    """At import: a GPU is visible but this build has no CUDA kernels, so every CUDA call would
    fail. Checked only for CPU-only builds, which then pay one device-count query."""
    if not _C.built_with_cuda() and torch.version.cuda is not None and torch.cuda.is_available():
        warnings.warn(
            "torch_gemm was built without its CUDA kernels, but this machine has a GPU; "
            "rebuild with the toolkit matching torch's CUDA "
            f"({torch.version.cuda}): CUDA_HOME=<toolkit> {_REBUILD}",
            RuntimeWarning,
            stacklevel=3,
        )
