"""Reliability of gemm::mm_tiled beyond plain correctness: NaN/Inf propagate as in torch.mm,
results are bitwise reproducible across runs and streams, concurrent callers on their own streams
get correct results, repeated calls leak nothing, and sizes past 2^31 elements are indexed
correctly."""

import contextlib
import ctypes
import os
import subprocess
import sys
import threading

import pytest
import torch

import torch_gemm
from gemm_testing import (
    HAS_CUDA,
    assert_close_to_reference,
    generator,
    kernel_dtype_params,
    kernel_test_dtype,
    make_operands,
    requires_cuda,
    requires_two_gpus,
    table_kernels,
)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_nan_and_inf_propagate_like_torch_mm(device, kernel, dtype):
    gen = generator(device, "nonfinite", kernel, str(dtype))
    a, b = make_operands(67, 45, 39, "contiguous", dtype, device, gen)
    a, b = a.clone(), b.clone()
    a[3, 5] = float("nan")      # row 3 of C: NaN
    a[10, 7] = float("inf")     # row 10: ±inf, NaN where b[7, j] == 0
    b[7, 4] = 0.0
    b[20, 30] = float("-inf")   # column 30: ±inf, NaN in rows 3 and 10
    ours = torch_gemm.mm_tiled(a, b, kernel=kernel)
    theirs = torch.mm(a.double(), b.double()).to(dtype)
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))
    assert torch.equal(torch.isposinf(ours), torch.isposinf(theirs))
    assert torch.equal(torch.isneginf(ours), torch.isneginf(theirs))
    finite = torch.isfinite(theirs)
    assert torch.isfinite(ours[finite]).all()


@requires_cuda
@pytest.mark.parametrize("kernel", table_kernels("cuda"))
def test_bitwise_identical_across_streams(kernel):
    gen = generator("cuda", "streams", kernel)
    a, b = make_operands(517, 263, 1031, "a_t", kernel_test_dtype(kernel, "cuda"), "cuda", gen)
    first = torch_gemm.mm_tiled(a, b, kernel=kernel)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        second = torch_gemm.mm_tiled(a, b, kernel=kernel)
    side.synchronize()
    assert torch.equal(first, second)


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=requires_cuda)])
def test_concurrent_threads_on_own_streams(device):
    """Several Python threads, each on its own CUDA stream (on CUDA), each with its own shapes."""
    n_threads, iters = 4, 25
    errors = []

    def worker(idx):
        try:
            stream = torch.cuda.Stream() if device == "cuda" else None
            gen = generator(device, "threads", idx)
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                for it in range(iters):
                    M, N, K = 33 + 17 * idx + it, 65 + 5 * idx, 129 + it
                    a, b = make_operands(M, N, K, "b_t", torch.float32, device, gen)
                    out = torch_gemm.mm_tiled(a, b)
                    if stream is not None:
                        stream.synchronize()
                    assert_close_to_reference(out, a, b)
        except Exception as err:  # collected and reported by the main thread
            errors.append(f"thread {idx}: {err!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "\n".join(errors)


def _thread_has_cuda_context() -> bool:
    """Whether the calling thread has a CUDA context current, asked of the driver itself."""
    libcuda = ctypes.CDLL("libcuda.so.1")
    context = ctypes.c_void_p()
    assert libcuda.cuCtxGetCurrent(ctypes.byref(context)) == 0
    return bool(context.value)


@requires_cuda
@pytest.mark.parametrize("kernel", table_kernels("cuda"))
@pytest.mark.parametrize("shape", [(64, 64, 64), (1, 4096, 4096)])
def test_first_cuda_work_of_a_thread(kernel, shape):
    """A new thread whose first CUDA work is our product: no context is current there yet
    (runtime calls bind one lazily; the tensor-map encodes are driver calls, which do not), the
    case behind the spurious 'invalid argument' failures of wgmma_sm90 (benchmarks/NOTES.md)."""
    M, N, K = shape
    dtype = kernel_test_dtype(kernel, "cuda")
    a, b = make_operands(M, N, K, "contiguous", dtype, "cuda", generator("cuda", "thread-first", kernel))
    expected = torch_gemm.mm_tiled(a, b, kernel=kernel)  # warms the allocator: no cudaMalloc below
    torch.cuda.synchronize()
    seen = {}

    def worker():
        try:
            seen["context before"] = _thread_has_cuda_context()
            seen["out"] = torch_gemm.mm_tiled(a, b, kernel=kernel)
        except Exception as err:  # reported by the main thread
            seen["error"] = err

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen["context before"] is False, "the new thread already had a context: the case is not reached"
    assert "error" not in seen, repr(seen.get("error"))
    torch.cuda.synchronize()
    assert torch.equal(seen["out"], expected)


@requires_cuda
def test_backward_in_a_fresh_process():
    """The third report of the spurious failures, as a user ran it: a fresh process, a few small
    products, then a linear forward with grad and its backward, whose dx product is the first CUDA
    work of autograd's device thread."""
    script = """
import torch, torch_gemm
for kernel in ("smem32", "mma_sm80", "wgmma_sm90"):
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    torch_gemm.mm_tiled(a, a, kernel=kernel)
x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
w = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
torch_gemm.linear_tiled(x, w).sum().backward()
torch.cuda.synchronize()
assert x.grad is not None and w.grad is not None
print("ok")
"""
    if not {"smem32", "mma_sm80", "wgmma_sm90"} <= set(table_kernels("cuda")):
        pytest.skip("needs a build with smem32, mma_sm80 and wgmma_sm90")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("device, calls", [pytest.param("cpu", 2000), pytest.param("cuda", 10_000, marks=requires_cuda)])
def test_repeated_calls_leak_nothing(device, calls):
    gen = generator(device, "leaks")
    shapes = [(1, 7, 3), (31, 33, 64), (64, 1, 97), (128, 96, 16), (5, 257, 2)]
    kernels = table_kernels(device)
    operands = {dtype: [make_operands(m, n, k, "contiguous", dtype, device, gen) for m, n, k in shapes]
                for dtype in {kernel_test_dtype(kernel, device) for kernel in kernels}}

    def burst(count):
        for i in range(count):
            kernel = kernels[i % len(kernels)]
            a, b = operands[kernel_test_dtype(kernel, device)][i % len(shapes)]
            torch_gemm.mm_tiled(a, b, kernel=kernel)

    burst(len(shapes) * len(kernels) * 4)  # warm caches and the allocator
    if device == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
    rss_before = _rss_bytes()
    burst(calls)
    if device == "cuda":
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated() == before
    # Host memory: allow allocator noise, not growth per call (a 1 KB leak per call would be 10 MB).
    assert _rss_bytes() - rss_before < 8 * 2**20


def _big_enough(gib: float) -> bool:
    if not HAS_CUDA:
        return False
    free, _ = torch.cuda.mem_get_info()
    return free > gib * 2**30


@requires_cuda
@pytest.mark.parametrize("kernel, dtype", [
    pytest.param(k, dt, id=f"{k}-{str(dt)[6:]}")
    for k, dt in [(k, kernel_test_dtype(k, "cuda")) for k in table_kernels("cuda")] + [("smem32", torch.float16)]
])
def test_more_than_2_31_elements(kernel, dtype):
    """A with 2^31 + 3·1024 elements (row offsets past 2^31) and C with 46341² > 2^31 elements:
    the rows at the far end are checked against float64."""
    if not _big_enough(40):
        pytest.skip("needs ~40 GiB of free GPU memory")
    elem = torch.finfo(dtype).bits // 8
    gen = generator("cuda", "int64", kernel, str(dtype))

    K = 1024
    M = 2**31 // K + 3
    a = torch.randn(M, K, device="cuda", generator=gen, dtype=dtype)
    b = torch.randn(K, 8, device="cuda", generator=gen, dtype=dtype)
    assert a.numel() > 2**31
    out = torch_gemm.mm_tiled(a, b, kernel=kernel)
    for rows in (slice(0, 4), slice(M - 4, M)):
        assert_close_to_reference(out[rows].contiguous(), a[rows], b)
    del a, out

    side = 46341
    a = torch.randn(side, 4, device="cuda", generator=gen, dtype=dtype)
    b = torch.randn(4, side, device="cuda", generator=gen, dtype=dtype)
    out = torch_gemm.mm_tiled(a, b, kernel=kernel)
    assert out.numel() > 2**31 and out.numel() * elem > 2**32
    for rows in (slice(0, 2), slice(side - 2, side)):
        ref = a[rows].double() @ b.double()
        assert torch.allclose(out[rows].double(), ref, rtol=1e-2 if elem == 2 else 1e-5, atol=1e-2 if elem == 2 else 1e-5)


@requires_two_gpus
@pytest.mark.parametrize("kernel", table_kernels("cuda"))
def test_tensors_on_second_gpu_computed_there(kernel):
    """The device guard: with cuda:0 current, tensors on cuda:1 are computed on cuda:1."""
    gen = generator("cuda:1", "guard", kernel)
    a, b = make_operands(129, 65, 97, "a_t", kernel_test_dtype(kernel, "cuda"), "cuda:1", gen)
    with torch.cuda.device(0):
        out = torch_gemm.mm_tiled(a, b, kernel=kernel)
    assert out.device == torch.device("cuda:1")
    torch.cuda.synchronize(1)
    assert_close_to_reference(out, a, b)
