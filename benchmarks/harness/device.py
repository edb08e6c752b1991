"""Devices: names as records carry them and as file names, their properties, what this build of
torch_gemm compiled for them, and where torch's own side takes a known-slow path."""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

import torch

import torch_gemm


def gpu_slug(name: str) -> str:
    """File-name form of a device name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else the machine architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def device_name(device: torch.device) -> str:
    """The name records carry: the GPU's as torch reports it, or the CPU's model name."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def device_slug(device: torch.device) -> str:
    """Name of the results file: the GPU's name, or "cpu-<model>" without trademarks and clock."""
    if device.type == "cuda":
        return gpu_slug(device_name(device))
    model = re.sub(r"\((R|TM)\)|\bCPU\b|\bProcessor\b|@.*$", " ", cpu_name(), flags=re.I)
    return "cpu-" + gpu_slug(model)


def l2_bytes(device: torch.device) -> int:
    """L2 size of a GPU; 0 on the CPU, where torch does not expose the last-level cache."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.get_device_properties(device).L2_cache_size)


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_fields(device: torch.device) -> dict:
    """The record metadata that says what ran on what: the device, torch, CUDA, torch_gemm and
    triton versions, and the GPU's architecture and SM count (the CPU's thread count)."""
    fields = {
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "torch_gemm": torch_gemm.__version__,
        "triton": getattr(sys.modules.get("triton"), "__version__", None),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        fields.update(sm=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count)
    else:
        fields.update(threads=torch.get_num_threads())
    return fields


# ---------------------------------------------------------------------------------------------
# What this build compiled.


def _cuda_possible() -> bool:
    """A GPU is visible, or a CUDA toolkit is there to compile for one."""
    toolkit = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return (torch.cuda.is_available() or shutil.which("nvcc") is not None
            or bool(toolkit and os.path.exists(os.path.join(toolkit, "bin", "nvcc"))))


def build_lines(device: torch.device, kernels_for: Optional[Mapping[str, Sequence[str]]] = None) -> list[str]:
    """The benchmark header's account of the build: torch_gemm's version and location, whether
    its CUDA kernels were compiled, the kernels to be timed per dtype (``kernels_for``; default
    the device's kernel names), and, where the CUDA kernels are missing but a GPU or a toolkit is
    here, how to get them."""
    info = torch_gemm.build_info()
    lines = [f"torch_gemm {torch_gemm.__version__} from {Path(torch_gemm.__file__).parent}; CUDA kernels: "
             + ("compiled" if info["cuda_kernels"] else "not compiled (CPU kernels only)")]
    if kernels_for:
        by_list: dict[tuple[str, ...], list[str]] = {}
        for dtype, names in kernels_for.items():
            by_list.setdefault(tuple(names), []).append(dtype)
        timed = "; ".join(f"{', '.join(dtypes)}: {', '.join(names) or 'none'}" for names, dtypes in by_list.items())
        lines.append(f"kernels timed on {device.type}: {timed}")
    else:
        lines.append(f"kernels compiled for {device.type}: {', '.join(info['kernels'][device.type]) or 'none'}")
    if not info["cuda_kernels"] and info["hint"] and _cuda_possible():
        lines.append(f"to get the CUDA kernels: {info['hint']}")
    return lines


def no_cuda_kernels_message() -> str:
    """Why a CUDA run cannot go ahead with this build, and how to get the kernels."""
    hint = torch_gemm.build_info()["hint"]
    return "this build of torch_gemm has no CUDA kernels" + (f": {hint}" if hint else "")


# ---------------------------------------------------------------------------------------------
# torch's side.


def torch_slow_path(device_type: str, dtype: str) -> Optional[str]:
    """Why torch's own product in ``dtype`` on ``device_type`` takes a known-slow path here, or
    None. On the CPU, torch multiplies bfloat16 and float16 through oneDNN only where the CPU has
    the instructions for it (``torch.ops.mkldnn._is_mkldnn_bf16_supported()``, ``..._fp16_...``),
    and otherwise through a generic fallback many times slower than its float32 (ours then reads
    10-35x "faster than torch"): a ratio against it measures that fallback, not our kernel."""
    if device_type != "cpu" or dtype not in ("bfloat16", "float16"):
        return None
    supported = {"bfloat16": torch.ops.mkldnn._is_mkldnn_bf16_supported,
                 "float16": torch.ops.mkldnn._is_mkldnn_fp16_supported}[dtype]
    if torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled and supported():
        return None
    return f"torch's CPU {dtype} matmul has no fast (oneDNN) path on this CPU"
