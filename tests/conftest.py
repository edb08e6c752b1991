import sys

import pytest
import torch

import gemm_testing
import torch_gemm
from gemm_testing import BUILT_WITH_CUDA, HAS_CUDA, SEED, tf32_allowed


@pytest.fixture(autouse=True)
def _tf32_for_marked_tests(request):
    """TF32 on for the float32 cases of TF32 kernels (marked by kernel_dtype_params), and
    explicitly off for every other test, whatever an earlier test left behind."""
    with tf32_allowed(request.node.get_closest_marker("tf32") is not None):
        yield


@pytest.fixture(autouse=True)
def _current_kernel(request):
    """The test's `kernel` parameter, for the error bounds that depend on the kernel
    (gemm_testing.current_kernel); None for tests without one."""
    callspec = getattr(request.node, "callspec", None)
    gemm_testing.current_kernel = callspec.params.get("kernel") if callspec is not None else None
    yield
    gemm_testing.current_kernel = None


def pytest_report_header(config):
    gpu = torch.cuda.get_device_name() if HAS_CUDA else "none"
    return [
        f"torch_gemm {torch_gemm.__version__} (CUDA kernels compiled: {BUILT_WITH_CUDA}), "
        f"torch {torch.__version__}, GPU: {gpu}",
        f"random inputs seeded with TORCH_GEMM_TEST_SEED={SEED} (set it to reproduce a failure)",
    ]


def pytest_terminal_summary(terminalreporter):
    """The seed again at the end, where `-q` shows it, with the kernels this build compiled (a
    CPU-only build says how to get the CUDA ones) and the soak's count when it ran."""
    terminalreporter.write_line(f"random inputs seeded with TORCH_GEMM_TEST_SEED={SEED}")
    terminalreporter.write_line(torch_gemm.describe_build())
    soak = sys.modules.get("test_soak")
    for line in getattr(soak, "SOAK_SUMMARY", []):
        terminalreporter.write_line(line)
