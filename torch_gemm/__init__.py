"""torch_gemm: hand-written CUDA GEMM kernels as PyTorch custom operators.

Importing this package registers ``torch.ops.gemm.*`` (CUDA, CPU, Meta/fake, autograd and
autocast). Use the op directly or through the wrappers here::

    import torch, torch_gemm
    c = torch_gemm.mm_tiled(a, b)                   # kernel="auto"
    c = torch.ops.gemm.mm_tiled(a, b, kernel="smem32")
"""

import torch  # noqa: F401  (the extension needs torch's libraries loaded first)

from torch_gemm import _C  # noqa: F401  (registers the gemm ops)
from torch_gemm import attention, distributed, nn  # noqa: F401  (nn.Linear; DTensor strategies)
from torch_gemm.build import build_info, describe_build, warn_if_cuda_kernels_missing
from torch_gemm.nn import swap_linear, unswap_linear
from torch_gemm.ops import (
    available_kernels, bmm_tiled, explain, kernel_table, linear_tiled, linear_tiled_weight_grad, mm_tiled,
    mm_tiled_row_sum,
)
from torch_gemm.precision import fp32_precision, get_fp32_precision, set_fp32_precision
from torch_gemm.version import __version__

__all__ = [
    "__version__",
    "attention",
    "available_kernels",
    "build_info",
    "bmm_tiled",
    "describe_build",
    "explain",
    "fp32_precision",
    "get_fp32_precision",
    "kernel_table",
    "linear_tiled",
    "linear_tiled_weight_grad",
    "mm_tiled",
    "mm_tiled_row_sum",
    "nn",
    "set_fp32_precision",
    "swap_linear",
    "unswap_linear",
]

warn_if_cuda_kernels_missing()
distributed._register_on_dtensor_import()
