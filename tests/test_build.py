"""What a build says about itself: the kernels it compiled, and how to get the CUDA ones where
they are missing (the tests' summary, the benchmarks' header and the import warning use it)."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_gemm
from torch_gemm import build


def test_build_info_lists_the_kernel_table():
    info = torch_gemm.build_info()
    assert info["cuda_kernels"] == torch_gemm._C.built_with_cuda()
    table = torch_gemm.kernel_table()
    for device in ("cpu", "cuda"):
        assert info["kernels"][device] == [row["name"] for row in table if row["device"] == device]
    assert "blocked" in info["kernels"]["cpu"]
    assert (info["hint"] is None) == info["cuda_kernels"]


def test_describe_build_names_kernels_and_how_to_get_the_missing_ones():
    line = torch_gemm.describe_build()
    assert line.startswith("torch_gemm kernels: cpu: blocked")
    if torch_gemm._C.built_with_cuda():
        assert "wgmma_sm90" in line and "not compiled" not in line
    else:
        assert "cuda: none (not compiled)" in line and "pip install --no-build-isolation -e ." in line


@pytest.mark.parametrize("cuda_torch, nvcc, gpu, expected", [
    (False, None, False, "is a CPU-only build"),
    (True, None, False, "no CUDA toolkit was found"),
    (True, "/usr/bin/true", False, "TORCH_GEMM_FORCE_CUDA=1"),
    (True, "/usr/bin/true", True, "a toolkit (/usr/bin/true) and a GPU are here"),
])
def test_hint_for_a_build_without_cuda_kernels(monkeypatch, cuda_torch, nvcc, gpu, expected):
    monkeypatch.setattr(build._C, "built_with_cuda", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0" if cuda_torch else None)
    monkeypatch.setattr(build.shutil, "which", lambda name: nvcc)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    assert expected in build.build_info()["hint"]


@pytest.mark.parametrize("built_with_cuda, gpu, warns", [(False, True, True), (False, False, False),
                                                          (True, True, False)])
def test_import_warns_only_where_cuda_kernels_were_expected(monkeypatch, built_with_cuda, gpu, warns):
    monkeypatch.setattr(build._C, "built_with_cuda", lambda: built_with_cuda)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build.warn_if_cuda_kernels_missing()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert bool(messages) == warns
    if warns:
        assert "built without its CUDA kernels, but this machine has a GPU" in messages[0]
