import torch

import torch_gemm
from gemm_testing import BUILT_WITH_CUDA, HAS_CUDA, SEED


def pytest_report_header(config):
    gpu = torch.cuda.get_device_name() if HAS_CUDA else "none"
    return [
        f"torch_gemm {torch_gemm.__version__} (CUDA kernels compiled: {BUILT_WITH_CUDA}), "
        f"torch {torch.__version__}, GPU: {gpu}",
        f"random inputs seeded with TORCH_GEMM_TEST_SEED={SEED} (set it to reproduce a failure)",
    ]
