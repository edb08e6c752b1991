"""The op as PyTorch sees it: registration, opcheck, fake/meta, torch.compile, CUDA graphs,
autocast, streams, and the Python API."""

import pytest
import torch

import torch_gemm
from gemm_testing import (
    BUILT_WITH_CUDA,
    assert_close_to_reference,
    device_params,
    generator,
    kernel_test_dtype,
    requires_cuda,
    table_kernels,
)


def test_version_and_namespace():
    assert isinstance(torch_gemm.__version__, str) and torch_gemm.__version__.count(".") == 2
    assert hasattr(torch.ops.gemm, "mm_tiled")
    schema = str(torch.ops.gemm.mm_tiled.default._schema)
    assert schema == 'gemm::mm_tiled(Tensor a, Tensor b, str kernel="auto") -> Tensor'


def test_available_kernels():
    assert torch_gemm.available_kernels("cpu") == ["auto", "blocked"]
    assert torch_gemm.available_kernels("cpu", torch.float16) == ["auto", "blocked"]
    rows = torch_gemm.kernel_table()
    assert {r["device"] for r in rows} == ({"cpu", "cuda"} if BUILT_WITH_CUDA else {"cpu"})
    for row in rows:
        assert set(row) == {"name", "device", "dtypes", "min_sm", "summary", "tf32", "row_sum"} and row["summary"]
        assert not row["tf32"] or "Float" in row["dtypes"]
    if torch.cuda.is_available():
        cuda = torch_gemm.available_kernels("cuda")
        assert cuda[0] == "auto" and {"naive", "smem16", "smem32"} <= set(cuda)
        # TF32 kernels are offered for float32 only while TF32 is allowed (or asked for).
        tf32 = {r["name"] for r in rows if r["tf32"]}
        sm = torch.cuda.get_device_capability()
        runnable_tf32 = {r["name"] for r in rows if r["tf32"] and r["min_sm"] <= sm[0] * 10 + sm[1]}
        assert not tf32 & set(torch_gemm.available_kernels("cuda", torch.float32, allow_tf32=False))
        assert runnable_tf32 <= set(torch_gemm.available_kernels("cuda", torch.float32, allow_tf32=True))
    else:
        assert torch_gemm.available_kernels("cuda") == []


def _samples(device):
    """opcheck samples: plain, transposed and sliced operands, with and without requires_grad."""
    gen = generator(device, "opcheck")
    samples = []
    for rg in (False, True):
        def t(*shape):
            return torch.randn(*shape, device=device, generator=gen).requires_grad_(rg)
        samples.append(((t(5, 3), t(3, 4)), {}))
        samples.append(((t(3, 5).t(), t(4, 3).t()), {}))
        samples.append(((t(6, 9)[1:, 2:5], t(5, 7)[1:4, ::2]), {}))
        for kernel in table_kernels(device):
            dtype = kernel_test_dtype(kernel, device)
            samples.append(((t(7, 2).to(dtype), t(2, 3).to(dtype)), {"kernel": kernel}))
    return samples


@pytest.mark.parametrize("device", device_params())
def test_opcheck(device):
    for args, kwargs in _samples(device):
        torch.library.opcheck(torch.ops.gemm.mm_tiled.default, args, kwargs)


def _weight_grad_samples(device):
    """opcheck samples of linear_tiled_weight_grad: 1- to 4-D grad and x, zero rows, strided and
    permuted operands, with and without the bias gradient and requires_grad, every kernel."""
    gen = generator(device, "opcheck_weight_grad")
    samples = []
    for rg in (False, True):
        def t(*shape, dtype=torch.float32):
            return torch.randn(*shape, device=device, generator=gen).to(dtype).requires_grad_(rg)
        for bias in (False, True):
            samples.append((t(5), t(3), bias))
            samples.append((t(7, 5), t(7, 3), bias))
            samples.append((t(2, 4, 5), t(5, 4, 2).permute(2, 1, 0), bias))
            samples.append((t(2, 3, 2, 5), t(2, 3, 2, 6)[..., 1:4], bias))
            samples.append((t(0, 4, 5), t(0, 4, 3), bias))
        for kernel in table_kernels(device):
            dtype = kernel_test_dtype(kernel, device)
            samples.append((t(3, 2, 7, dtype=dtype), t(3, 2, 3, dtype=dtype), True, kernel))
    return samples


@pytest.mark.parametrize("device", device_params())
def test_opcheck_linear_weight_grad(device):
    for args in _weight_grad_samples(device):
        torch.library.opcheck(torch.ops.gemm.linear_tiled_weight_grad.default, args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_meta_tensors(dtype):
    a = torch.empty(7, 3, device="meta", dtype=dtype)
    b = torch.empty(9, 3, device="meta", dtype=dtype).t()
    out = torch_gemm.mm_tiled(a, b)
    assert out.device.type == "meta" and out.shape == (7, 9) and out.dtype == dtype and out.is_contiguous()


@pytest.mark.parametrize("device", device_params())
def test_compile_fullgraph(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x, w1, w2):
        return torch_gemm.mm_tiled(torch.relu(torch_gemm.mm_tiled(x, w1)), w2.t())

    gen = generator(device, "compile")
    x = torch.randn(16, 32, device=device, generator=gen)
    w1 = torch.randn(32, 24, device=device, generator=gen)
    w2 = torch.randn(8, 24, device=device, generator=gen)
    torch.testing.assert_close(f(x, w1, w2), torch.relu(x @ w1) @ w2.t(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("call", ["wrapper", "op_keyword", "op_positional"])
def test_compile_with_explicit_kernel(device, call):
    torch._dynamo.reset()
    kernel = table_kernels(device)[1]
    calls = {
        "wrapper": lambda x, w: torch_gemm.mm_tiled(x, w, kernel=kernel),
        "op_keyword": lambda x, w: torch.ops.gemm.mm_tiled(x, w, kernel=kernel),
        "op_positional": lambda x, w: torch.ops.gemm.mm_tiled(x, w, kernel),
    }
    f = torch.compile(lambda x, w: calls[call](x.sin(), w), fullgraph=True)
    x = torch.randn(5, 7, device=device)
    w = torch.randn(7, 3, device=device, requires_grad=True)
    torch.testing.assert_close(f(x, w), x.sin() @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", device_params())
def test_compile_backward(device):
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: torch_gemm.mm_tiled(x, y).sum(), fullgraph=True)
    x = torch.randn(9, 5, device=device, requires_grad=True)
    y = torch.randn(5, 6, device=device, requires_grad=True)
    f(x, y).backward()
    torch.testing.assert_close(x.grad, torch.ones(9, 6, device=device) @ y.detach().t())
    torch.testing.assert_close(y.grad, x.detach().t() @ torch.ones(9, 6, device=device))


@requires_cuda
def test_compile_reduce_overhead_cuda_graphs():
    torch._dynamo.reset()

    @torch.compile(mode="reduce-overhead", fullgraph=True)
    def f(x, w):
        return torch_gemm.mm_tiled(x, w) * 2.0

    w = torch.randn(64, 48, device="cuda")
    for _ in range(4):  # warm-up runs, then recorded and replayed graphs
        x = torch.randn(32, 64, device="cuda")
        torch.testing.assert_close(f(x, w), (x.double() @ w.double() * 2.0).float(), rtol=1e-5, atol=1e-4)


@requires_cuda
@pytest.mark.parametrize(
    "M, N, K", [(129, 33, 65), (64, 96, 2048), (1280, 2560, 64)], ids=["small_tile", "split_k", "large_tile"]
)
def test_cuda_graph_capture_and_replay(M, N, K):
    """split_k also allocates its workspace inside the capture (from the graph's pool); large_tile
    launches multistage's 75 KB-shared-memory configuration, which sets its attribute at launch."""
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    torch_gemm.mm_tiled(a, b)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch_gemm.mm_tiled(a, b)
    for _ in range(2):
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.cuda.synchronize()
        assert_close_to_reference(out, a, b)


@requires_cuda
@pytest.mark.parametrize("kernel", table_kernels("cuda"))
def test_non_default_stream(kernel):
    side = torch.cuda.Stream()
    dtype = kernel_test_dtype(kernel, "cuda")
    a = torch.randn(300, 200, device="cuda").to(dtype)
    b = torch.randn(200, 100, device="cuda").to(dtype)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # Keep the side stream busy first: if the op ran on another stream it would read
        # a before this copy lands and the result would be wrong.
        torch.cuda._sleep(1_000_000)
        a_new = a * 3.0
        out = torch_gemm.mm_tiled(a_new, b, kernel=kernel)
    side.synchronize()
    assert_close_to_reference(out, a_new, b)


@pytest.mark.parametrize(
    "device, amp_dtype",
    [pytest.param("cpu", torch.bfloat16, id="cpu-bf16")]
    + [pytest.param("cuda", dt, marks=requires_cuda, id=f"cuda-{str(dt)[6:]}") for dt in (torch.float16, torch.bfloat16)],
)
def test_autocast_casts_like_torch_mm(device, amp_dtype):
    a = torch.randn(24, 40, device=device)
    b = torch.randn(40, 16, device=device)
    with torch.autocast(device, dtype=amp_dtype):
        ours = torch_gemm.mm_tiled(a, b)
        theirs = torch.mm(a, b)
        ours64 = torch_gemm.mm_tiled(a.double(), b.double())
    assert ours.dtype == theirs.dtype == amp_dtype
    assert ours64.dtype == torch.float64  # float64 is left alone, as for torch.mm
    assert_close_to_reference(ours, a.to(amp_dtype), b.to(amp_dtype))


@pytest.mark.parametrize("device", device_params())
def test_autocast_mixed_input_dtypes(device):
    """fp32 activations against a bf16 weight, the usual case in a model: cast as torch.mm is."""
    x = torch.randn(24, 40, device=device)
    w = torch.randn(40, 16, device=device).bfloat16()
    with torch.autocast(device, dtype=torch.bfloat16):
        ours = torch_gemm.mm_tiled(x, w)
        theirs = torch.mm(x, w)
    assert ours.dtype == theirs.dtype == torch.bfloat16
    assert_close_to_reference(ours, x.bfloat16(), w)
    with pytest.raises(RuntimeError, match="a and b must have the same dtype"):
        torch_gemm.mm_tiled(x, w)  # outside autocast mixed dtypes are an error, as for torch.mm


@pytest.mark.parametrize("device", device_params())
def test_autocast_backward(device):
    a = torch.randn(24, 40, device=device, requires_grad=True)
    b = torch.randn(40, 16, device=device, requires_grad=True)
    with torch.autocast(device, dtype=torch.bfloat16):
        out = torch_gemm.mm_tiled(a, b)
    out.float().sum().backward()
    assert a.grad.dtype == torch.float32 and b.grad.dtype == torch.float32
    expected = torch.ones(24, 16, device=device).bfloat16().double() @ b.detach().bfloat16().double().t()
    torch.testing.assert_close(a.grad.double(), expected, rtol=2e-2, atol=5e-2)
