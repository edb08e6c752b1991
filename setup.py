"""Build torch_gemm._C.

The CUDA kernels are compiled when a CUDA toolkit (nvcc) and a CUDA build of torch are present
and either a GPU is visible or TORCH_GEMM_FORCE_CUDA=1 is set (CI: no GPU, but every .cu file
must compile). Otherwise a CPU-only extension is built. TORCH_GEMM_CPU_ONLY=1 forces CPU-only.

Object files are kept under build/, so a reinstall recompiles only what changed. Architectures
come from TORCH_CUDA_ARCH_LIST, by default "8.0;9.0a" (sm_80 for mma.sync GPUs,
sm_90a for Hopper's wgmma/setmaxnreg, which need the "a" target).
"""

import glob
import os
import sys

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCH_LIST = "8.0;9.0a"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0").lower() in ("1", "true", "yes", "on")


def _cuda_choice() -> tuple[bool, str]:
    """Whether to compile the CUDA kernels, and why (printed by the build, kept by the extension
    for ``torch_gemm.build_info()``)."""
    if _env_flag("TORCH_GEMM_CPU_ONLY"):
        return False, "TORCH_GEMM_CPU_ONLY=1 was set"
    has_toolkit = CUDA_HOME is not None and torch.version.cuda is not None
    if _env_flag("TORCH_GEMM_FORCE_CUDA"):
        if not has_toolkit:
            raise RuntimeError(
                "TORCH_GEMM_FORCE_CUDA=1 but no CUDA toolkit (CUDA_HOME) or no CUDA build of torch "
                f"(torch {torch.__version__}, CUDA_HOME={CUDA_HOME})"
            )
        if not os.path.exists(os.path.join(CUDA_HOME, "include", "cuda_runtime.h")):
            raise RuntimeError(
                f"TORCH_GEMM_FORCE_CUDA=1 but CUDA_HOME={CUDA_HOME} has no include/cuda_runtime.h; "
                "set CUDA_HOME to the toolkit's root (e.g. /usr/local/cuda)"
            )
        return True, "TORCH_GEMM_FORCE_CUDA=1 was set"
    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} is a CPU-only build"
    if CUDA_HOME is None:
        return False, "no CUDA toolkit was found (set CUDA_HOME to the toolkit matching torch's CUDA)"
    if not torch.cuda.is_available():
        return False, (f"no GPU was visible at build time (toolkit at {CUDA_HOME}); "
                       "rebuild with TORCH_GEMM_FORCE_CUDA=1 to compile the CUDA kernels anyway")
    return True, "a CUDA toolkit and a GPU were found"


def _sources(*patterns: str) -> list[str]:
    found = []
    for pattern in patterns:
        found += sorted(glob.glob(os.path.join("csrc", pattern), recursive=True))
    return found


# Link the shared libstdc++ that torch itself uses. Some toolchains (the GPU machines' g++ wrapper
# puts a directory holding only libstdc++.a first) otherwise link a private static copy into _C,
# and that copy's stream code crashes the process the first time it formats an integer (in any
# TORCH_CHECK message with a size in it). Naming the shared object resolves every symbol first.
link_flags = ["-l:libstdc++.so.6"] if sys.platform.startswith("linux") else []

with_cuda, build_reason = _cuda_choice()
# -fopenmp-simd: honour `#pragma omp simd` (the CPU micro-kernel) without linking OpenMP.
cxx_flags = ["-O3", "-fopenmp-simd"]
host_sources = _sources("torch_gemm.cpp", "ops/*.cpp", "cpu/*.cpp", "kernels/**/*.cpp")

if with_cuda:
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    cxx_flags.append("-DTORCH_GEMM_WITH_CUDA")
    nvcc_flags = [
        "-O3",
        "--expt-relaxed-constexpr",
        "-lineinfo",
        "-DTORCH_GEMM_WITH_CUDA",
    ]
    # wgmma/TMA code exists only in an sm_90a build; the launcher refuses to run without it.
    if "9.0a" in os.environ["TORCH_CUDA_ARCH_LIST"].replace(" ", ";").split(";"):
        nvcc_flags.append("-DTORCH_GEMM_WITH_SM90A")
        cxx_flags.append("-DTORCH_GEMM_WITH_SM90A")
    if _env_flag("TORCH_GEMM_PTXAS_VERBOSE"):
        nvcc_flags.append("-Xptxas=-v")
    extension = CUDAExtension(
        name="torch_gemm._C",
        sources=host_sources + _sources("ops/cuda/*.cpp", "kernels/**/*.cu"),
        include_dirs=[os.path.join(ROOT, "csrc")],
        extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags},
        extra_link_args=link_flags,
    )
else:
    extension = CppExtension(
        name="torch_gemm._C",
        sources=host_sources,
        include_dirs=[os.path.join(ROOT, "csrc")],
        extra_compile_args={"cxx": cxx_flags},
        extra_link_args=link_flags,
    )

print(f"torch_gemm: building {'with' if with_cuda else 'without'} the CUDA kernels ({build_reason})"
      + (f" for TORCH_CUDA_ARCH_LIST={os.environ['TORCH_CUDA_ARCH_LIST']}" if with_cuda else ""))


class IncrementalBuildExtension(BuildExtension):
    """Compiles into build/ of the checkout. An editable install (pip install -e) otherwise gets a
    fresh temporary build directory each time, so every reinstall, even with extras only, would
    recompile every kernel; here ninja recompiles only what changed."""

    def finalize_options(self):
        super().finalize_options()
        flavour = "cuda" if with_cuda else "cpu"
        self.build_temp = os.path.join(ROOT, "build", f"temp-{flavour}-py{sys.version_info[0]}{sys.version_info[1]}")


setup(
    ext_modules=[extension],
    cmdclass={"build_ext": IncrementalBuildExtension.with_options(use_ninja=True)},
)
