"""gemm::mm_tiled_row_sum, (a @ b, a.sum(1)): both results of every kernel × dtype × shape ×
layout against float64, the row sum fused only by the kernels that say so, and the op as PyTorch
sees it (opcheck, fake, autograd, torch.compile, autocast, CUDA graphs, errors)."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.profiler import ProfilerActivity, profile

import torch_gemm
from gemm_testing import (
    LAYOUTS,
    RecordGemmOps,
    assert_close_to_reference,
    assert_row_sum_close_to_reference,
    device_params,
    generator,
    kernel_dtype_params,
    kernel_test_dtype,
    make_operands,
    poisoned_outputs,
    randn,
    requires_cuda,
    skip_unless_wgmma,
    table_kernels,
    tf32_allowed,
)

OP = "gemm::mm_tiled_row_sum"

# (M, N, K): 0, 1 and primes in every position; N = 0 with K > 0, where no tile runs and the sums
# must still be right; K = 0 (zero sums); a K of many k-tiles, as dW's K is the token count; and
# shapes on both sides of wgmma_sm90's tile-height choice (see WGMMA_TILE_SHAPES in test_mm.py),
# with C rows 16-byte aligned for its TMA-store epilogue (1024×2304) and not (1100×2100).
SHAPES = [
    (0, 33, 97), (1, 33, 97), (31, 0, 64), (31, 1, 64), (97, 7, 0), (97, 7, 1), (0, 0, 0), (1, 1, 1),
    (64, 0, 1000), (1, 0, 1), (127, 131, 257), (2, 1, 1025), (1, 1025, 2), (129, 257, 4099),
    (1100, 2100, 200), (1024, 2304, 200), (300, 1000, 130),
]


def _fuses_row_sum(kernel: str, device: str) -> bool:
    return any(r["name"] == kernel and r["device"] == device and r["row_sum"] for r in torch_gemm.kernel_table())


def test_schema():
    schema = str(torch.ops.gemm.mm_tiled_row_sum.default._schema)
    assert schema == 'gemm::mm_tiled_row_sum(Tensor a, Tensor b, str kernel="auto") -> (Tensor, Tensor)'
    assert torch.Tag.flexible_layout in torch.ops.gemm.mm_tiled_row_sum.default.tags


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
@pytest.mark.parametrize("layout", LAYOUTS)
def test_matches_float64(device, kernel, dtype, layout):
    """layout a_t is linear_tiled's backward: a = grad.mT with grad contiguous."""
    for M, N, K in SHAPES:
        gen = generator(device, "row_sum", kernel, str(dtype), layout, M, N, K)
        a, b = make_operands(M, N, K, layout, dtype, device, gen)
        with poisoned_outputs():
            out, row_sum = torch_gemm.mm_tiled_row_sum(a, b, kernel=kernel)
        assert_close_to_reference(out, a, b)
        assert_row_sum_close_to_reference(row_sum, a)


# wgmma_sm90 sums 16-bit rows beside the product, tile column j over K-slice j, where its tile
# columns give at least 8 slices (N > 7·256), and in a kernel of its own before the product
# otherwise (and for float32): both sides, at both tile heights (100 rows: 64-row tiles), with
# slices that end inside a 16-byte chunk (K = 4099, 999), M ending inside one (300, 1030, 257,
# 77), many slices of the separate kernel (2000×300×5001), and a's rows or columns contiguous
# (layouts).
WGMMA_ROW_SUM_SHAPES = [(300, 2050, 4099), (100, 2050, 4099), (1030, 1800, 999), (257, 1792, 3000),
                        (2000, 300, 5001), (77, 9, 130)]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_wgmma_fused_and_separate_slices(dtype, layout):
    skip_unless_wgmma()
    with tf32_allowed(dtype == torch.float32):
        for M, N, K in WGMMA_ROW_SUM_SHAPES:
            gen = generator("cuda", "row_sum_slices", str(dtype), layout, M, N, K)
            a, b = make_operands(M, N, K, layout, dtype, "cuda", gen)
            with poisoned_outputs():
                out, row_sum = torch_gemm.mm_tiled_row_sum(a, b, kernel="wgmma_sm90")
            assert_close_to_reference(out, a, b)
            assert_row_sum_close_to_reference(row_sum, a)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_expanded_stride_zero_a(device, kernel, dtype):
    """a with stride 0 along K (every row constant) and along M (every row the same)."""
    M, N, K = 64, 128, 96
    gen = generator(device, "row_sum_expand", kernel, str(dtype))
    b = randn((K, N), dtype, device, gen)
    for a in (randn((M, 1), dtype, device, gen).expand(M, K), randn((1, K), dtype, device, gen).expand(M, K)):
        with poisoned_outputs():
            out, row_sum = torch_gemm.mm_tiled_row_sum(a, b, kernel=kernel)
        assert_close_to_reference(out, a, b)
        assert_row_sum_close_to_reference(row_sum, a)


def _named_kernel_params(devices=("cpu", "cuda")):
    """(device, kernel) for every named kernel of the build, at the dtype its tests use."""
    return [pytest.param(device, kernel, marks=p.marks, id=f"{device}-{kernel}")
            for p in device_params(devices) for device in p.values
            for kernel in table_kernels(device)[1:]]


@pytest.mark.parametrize("device, kernel", _named_kernel_params())
@pytest.mark.parametrize("N", [0, 96])
def test_torch_sums_only_where_the_kernel_does_not(device, kernel, N):
    """A kernel whose table row says row_sum writes the sums itself (no torch reduction runs),
    except where N = 0 and no tile of a is read; any other kernel leaves them to torch."""
    dtype = kernel_test_dtype(kernel, device)
    gen = generator(device, "row_sum_fused", kernel, N)
    a, b = make_operands(130, N, 200, "a_t", dtype, device, gen)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out, row_sum = torch_gemm.mm_tiled_row_sum(a, b, kernel=kernel)
    torch_reduced = any(event.name == "aten::sum" for event in prof.events())
    assert torch_reduced == (N == 0 or not _fuses_row_sum(kernel, device))
    assert_close_to_reference(out, a, b)
    assert_row_sum_close_to_reference(row_sum, a)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_deterministic(device, kernel, dtype):
    gen = generator(device, "row_sum_determinism", kernel, str(dtype))
    a, b = make_operands(257, 300, 1000, "a_t", dtype, device, gen)
    first = torch_gemm.mm_tiled_row_sum(a, b, kernel=kernel)
    second = torch_gemm.mm_tiled_row_sum(a, b, kernel=kernel)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


# ---------------------------------------------------------------------------------------------
# The op as PyTorch sees it.


@pytest.mark.parametrize("device", device_params())
def test_opcheck(device):
    gen = generator(device, "row_sum_opcheck")
    samples = []
    for rg in (False, True):
        def t(*shape, dtype=torch.float32):
            return randn(shape, dtype, device, gen).requires_grad_(rg)
        samples.append((t(5, 3), t(3, 4)))
        samples.append((t(3, 5).t(), t(4, 3).t()))
        samples.append((t(6, 9)[1:, 2:5], t(5, 7)[1:4, ::2]))
        samples.append((t(4, 3), t(3, 0)))  # N = 0: the row sums alone
        for kernel in table_kernels(device):
            dtype = kernel_test_dtype(kernel, device)
            samples.append((t(2, 7, dtype=dtype).t(), t(2, 3, dtype=dtype), kernel))
    for args in samples:
        torch.library.opcheck(torch.ops.gemm.mm_tiled_row_sum.default, args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_meta_tensors(dtype):
    a = torch.empty(3, 7, device="meta", dtype=dtype).t()
    b = torch.empty(3, 9, device="meta", dtype=dtype)
    out, row_sum = torch_gemm.mm_tiled_row_sum(a, b)
    assert out.device.type == row_sum.device.type == "meta"
    assert out.shape == (7, 9) and row_sum.shape == (7,)
    assert out.dtype == row_sum.dtype == dtype and out.is_contiguous()


def _float64_kernels(devices=("cpu", "cuda")):
    return [p for p in kernel_dtype_params(devices) if p.values[2] == torch.float64]


@pytest.mark.parametrize("device, kernel, dtype", _float64_kernels())
def test_gradcheck(device, kernel, dtype):
    gen = generator(device, "row_sum_gradcheck", kernel)
    a = randn((5, 7), dtype, device, gen).t().requires_grad_()  # (7, 5), as linear's gradᵀ
    b = randn((5, 3), dtype, device, gen).requires_grad_()
    fn = lambda a, b: torch_gemm.mm_tiled_row_sum(a, b, kernel=kernel)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (a, b))
    assert torch.autograd.gradgradcheck(fn, (a, b))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("used", ["product", "row_sum", "both"])
def test_backward_of_the_outputs_used(device, used):
    """The gradient of an output that does not reach the loss is taken as zero without being
    computed: the row sum alone needs no product, and b no gradient."""
    gen = generator(device, "row_sum_backward", used)
    a = randn((6, 9), torch.float32, device, gen).t().requires_grad_()
    b = randn((6, 4), torch.float32, device, gen).requires_grad_()
    grad_out, grad_row_sum = randn((9, 4), torch.float32, device, gen), randn((9,), torch.float32, device, gen)
    out, row_sum = torch_gemm.mm_tiled_row_sum(a, b)
    outputs, grads = {"product": ([out], [grad_out]), "row_sum": ([row_sum], [grad_row_sum]),
                      "both": ([out, row_sum], [grad_out, grad_row_sum])}[used]
    with RecordGemmOps() as calls:
        torch.autograd.backward(outputs, grads)
    assert calls.names == ([] if used == "row_sum" else ["mm_tiled.default"] * 2)

    ref_a, ref_b = (t.detach().double().requires_grad_() for t in (a, b))
    ref_outputs = {"product": [ref_a @ ref_b], "row_sum": [ref_a.sum(1)], "both": [ref_a @ ref_b, ref_a.sum(1)]}[used]
    torch.autograd.backward(ref_outputs, [g.double() for g in grads])
    torch.testing.assert_close(a.grad, ref_a.grad.float(), rtol=1e-5, atol=1e-5)
    if used == "row_sum":
        assert b.grad is None
    else:
        torch.testing.assert_close(b.grad, ref_b.grad.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", device_params())
def test_compile_fullgraph_with_backward(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(a, b):
        out, row_sum = torch_gemm.mm_tiled_row_sum(a.sin(), b)
        return out.sum() + row_sum.square().sum()

    gen = generator(device, "row_sum_compile")
    a = randn((8, 11), torch.float32, device, gen).t().requires_grad_()
    b = randn((8, 5), torch.float32, device, gen).requires_grad_()
    loss = f(a, b)
    loss.backward()
    ref_a, ref_b = (t.detach().double().requires_grad_() for t in (a, b))
    ref_loss = (ref_a.sin() @ ref_b).sum() + ref_a.sin().sum(1).square().sum()
    ref_loss.backward()
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a.grad.double(), ref_a.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad.double(), ref_b.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "device, amp_dtype",
    [pytest.param("cpu", torch.bfloat16, id="cpu-bf16")]
    + [pytest.param("cuda", dt, marks=requires_cuda, id=f"cuda-{str(dt)[6:]}") for dt in (torch.float16, torch.bfloat16)],
)
def test_autocast_casts_like_torch_mm(device, amp_dtype):
    a = torch.randn(40, 24, device=device).t()
    b = torch.randn(40, 16, device=device)
    with torch.autocast(device, dtype=amp_dtype):
        out, row_sum = torch_gemm.mm_tiled_row_sum(a, b)
        out64, row_sum64 = torch_gemm.mm_tiled_row_sum(a.double(), b.double())
        theirs = torch.mm(a, b)
    assert out.dtype == row_sum.dtype == theirs.dtype == amp_dtype
    assert out64.dtype == row_sum64.dtype == torch.float64  # float64 is left alone, as for torch.mm
    assert_close_to_reference(out, a.to(amp_dtype), b.to(amp_dtype))
    assert_row_sum_close_to_reference(row_sum, a.to(amp_dtype))


@requires_cuda
@pytest.mark.parametrize("dtype, N", [(torch.bfloat16, 2304), (torch.bfloat16, 0), (torch.float32, 2304)])
def test_cuda_graph_capture_and_replay(dtype, N):
    """Where kernel="auto" fuses the row sum (bf16 with wgmma_sm90's tiles filling an H100/H200)
    and where torch's reduction runs beside the product (N = 0; float32)."""
    a = torch.randn(200, 1024, device="cuda").to(dtype).t()
    b = torch.randn(200, N, device="cuda").to(dtype)
    torch_gemm.mm_tiled_row_sum(a, b)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, row_sum = torch_gemm.mm_tiled_row_sum(a, b)
    for _ in range(2):
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.cuda.synchronize()
        assert_close_to_reference(out, a, b)
        assert_row_sum_close_to_reference(row_sum, a)


@pytest.mark.parametrize("device", device_params(("cpu", "cuda", "meta")))
def test_bad_inputs_name_the_op_and_argument(device):
    """The real kernel and the fake one, while tracing, fail alike."""
    a = torch.randn(4, 8, device=device)
    b = torch.randn(8, 5, device=device)
    cases = [
        (lambda: torch_gemm.mm_tiled_row_sum(a[None], b), f"{OP}: a must be a 2-D tensor, got a 3-D tensor"),
        (lambda: torch_gemm.mm_tiled_row_sum(a, b[0]), f"{OP}: b must be a 2-D tensor, got a 1-D tensor"),
        (lambda: torch_gemm.mm_tiled_row_sum(a, b.t()), rf"{OP}: inner dimensions differ: a is \[4, 8\] and b is \[5, 8\]"),
        (lambda: torch_gemm.mm_tiled_row_sum(a, b.half()), f"{OP}: a and b must have the same dtype, got Float and Half"),
        (lambda: torch_gemm.mm_tiled_row_sum(a.int(), b.int()), f"{OP}: a has unsupported dtype Int"),
    ]
    if device != "meta":  # meta tensors run no kernel and take any name
        cases.append((lambda: torch_gemm.mm_tiled_row_sum(a, b, kernel="nope"), f"{OP}: unknown kernel 'nope'"))
    for call, message in cases:
        with pytest.raises(RuntimeError, match=message):
            call()
        with FakeTensorMode(allow_non_fake_inputs=True), pytest.raises(RuntimeError, match=message):
            call()


@requires_cuda
def test_cpu_and_cuda_mixed():
    with pytest.raises(RuntimeError, match=f"{OP}: a and b must be on the same device, got cpu and cuda:0"):
        torch_gemm.mm_tiled_row_sum(torch.randn(3, 4), torch.randn(4, 5, device="cuda"))
