"""gemm::linear_tiled_weight_grad, (gradᵀ·x, grad summed) over the rows of N-D grad and x: both
results of every kernel × dtype against float64 and, bit for bit, against mm_tiled_row_sum on the
flattened rows; 1- to 4-D operands, zero rows, strided and permuted ones; the op as PyTorch sees
it (fake, autograd, torch.compile, autocast, CUDA graphs, errors) and as linear_tiled's backward
calls it. opcheck is in test_library.py."""

import math
import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

import torch_gemm
from gemm_testing import (
    RecordGemmOps,
    assert_close_to_reference,
    assert_row_sum_close_to_reference,
    device_params,
    generator,
    kernel_dtype_params,
    kernel_test_dtype,
    poisoned_outputs,
    randn,
    requires_cuda,
    table_kernels,
)

OP = "gemm::linear_tiled_weight_grad"

# (leading dimensions, N, K): one row (1-D), 2-, 3- and 4-D operands, zero rows (K = 0 of the
# product: dW zeros, db zeros), N = 0 and K = 0, and rows and widths that are no multiple of a tile.
SHAPES = [
    ((), 33, 97), ((7,), 1, 1), ((129,), 31, 65), ((3, 43), 17, 130), ((2, 3, 5), 64, 9),
    ((0,), 5, 7), ((2, 0, 3), 6, 4), ((4, 5), 0, 8), ((4, 5), 8, 0), ((2, 300), 40, 24),
]
# How grad and x are laid out: contiguous; the last dimension strided (the transposed view of a
# (C, rows) tensor, the leading dimensions still one stride apart); sliced at an odd offset of
# wider rows; the leading dimensions permuted, so that no stride walks them (the op copies).
LAYOUTS = ["contiguous", "transposed", "sliced", "permuted"]
VIEW_LAYOUTS = LAYOUTS[:3]


def _operand(leading: tuple, cols: int, layout: str, dtype, device, gen) -> torch.Tensor:
    if layout == "transposed":
        return randn((cols, *leading), dtype, device, gen).movedim(0, -1)
    if layout == "sliced":
        return randn((*leading, cols + 5), dtype, device, gen)[..., 3 : cols + 3]
    if layout == "permuted" and len(leading) >= 2:
        order = list(reversed(range(len(leading)))) + [len(leading)]
        return randn((*reversed(leading), cols), dtype, device, gen).permute(order)
    return randn((*leading, cols), dtype, device, gen)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """t (..., C) as (rows, C), for the reference (the product of the leading sizes, not -1: with
    C = 0 the -1 would be ambiguous)."""
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def _operands(leading, N, K, layout, dtype, device, gen):
    return _operand(leading, N, layout, dtype, device, gen), _operand(leading, K, layout, dtype, device, gen)


def _fuses_row_sum(kernel: str, device: str) -> bool:
    return any(r["name"] == kernel and r["device"] == device and r["row_sum"] for r in torch_gemm.kernel_table())


def test_schema():
    op = torch.ops.gemm.linear_tiled_weight_grad.default
    assert str(op._schema) == ('gemm::linear_tiled_weight_grad(Tensor grad, Tensor x, bool bias, '
                               'str kernel="auto") -> (Tensor, Tensor)')
    assert torch.Tag.flexible_layout in op.tags


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_matches_float64(device, kernel, dtype, layout, bias):
    for leading, N, K in SHAPES:
        gen = generator(device, "weight_grad", kernel, str(dtype), layout, bias, leading, N, K)
        grad, x = _operands(leading, N, K, layout, dtype, device, gen)
        with poisoned_outputs():
            grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad, x, bias=bias, kernel=kernel)
        assert_close_to_reference(grad_weight, _rows(grad).t(), _rows(x))
        if bias:
            assert_row_sum_close_to_reference(grad_bias, _rows(grad).t())
        else:
            assert grad_bias.shape == (0,) and grad_bias.dtype == dtype and grad_bias.device == grad.device


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
@pytest.mark.parametrize("layout", VIEW_LAYOUTS)
def test_same_bits_as_mm_tiled_row_sum_on_the_rows(device, kernel, dtype, layout):
    """The product and the sums the backward got from mm_tiled_row_sum(rows(grad).mT, rows(x))
    before this op existed: the same kernel on the same params, so the same bits."""
    for leading, N, K in SHAPES:
        gen = generator(device, "weight_grad_bits", kernel, str(dtype), layout, leading, N, K)
        grad, x = _operands(leading, N, K, layout, dtype, device, gen)
        grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad, x, bias=True, kernel=kernel)
        product, row_sum = torch_gemm.mm_tiled_row_sum(_rows(grad).mT, _rows(x), kernel=kernel)
        assert torch.equal(grad_weight, product) and torch.equal(grad_bias, row_sum)


def _named_kernel_params(devices=("cpu", "cuda")):
    return [pytest.param(device, kernel, marks=p.marks, id=f"{device}-{kernel}")
            for p in device_params(devices) for device in p.values
            for kernel in table_kernels(device)[1:]]


@pytest.mark.parametrize("device, kernel", _named_kernel_params())
@pytest.mark.parametrize("K", [0, 96])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_torch_sums_only_where_the_kernel_does_not(device, kernel, K, bias):
    """As mm_tiled_row_sum: a kernel whose table row says row_sum writes db itself (no torch
    reduction), except where K = 0 and no tile of grad is read; without bias nothing is summed."""
    dtype = kernel_test_dtype(kernel, device)
    gen = generator(device, "weight_grad_fused", kernel, K, bias)
    grad, x = _operands((2, 65), 130, K, "contiguous", dtype, device, gen)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad, x, bias=bias, kernel=kernel)
    torch_reduced = any(event.name == "aten::sum" for event in prof.events())
    assert torch_reduced == (bias and (K == 0 or not _fuses_row_sum(kernel, device)))
    assert_close_to_reference(grad_weight, _rows(grad).t(), _rows(x))
    if bias:
        assert_row_sum_close_to_reference(grad_bias, _rows(grad).t())


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_deterministic(device, kernel, dtype):
    gen = generator(device, "weight_grad_determinism", kernel, str(dtype))
    grad, x = _operands((3, 100), 257, 300, "contiguous", dtype, device, gen)
    first = torch_gemm.linear_tiled_weight_grad(grad, x, bias=True, kernel=kernel)
    second = torch_gemm.linear_tiled_weight_grad(grad, x, bias=True, kernel=kernel)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


# ---------------------------------------------------------------------------------------------
# The op as PyTorch sees it.


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_meta_tensors(dtype, bias):
    grad = torch.empty(2, 3, 7, device="meta", dtype=dtype)
    x = torch.empty(2, 9, 3, device="meta", dtype=dtype).transpose(1, 2)
    grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad, x, bias=bias)
    assert grad_weight.device.type == grad_bias.device.type == "meta"
    assert grad_weight.shape == (7, 9) and grad_bias.shape == ((7,) if bias else (0,))
    assert grad_weight.dtype == grad_bias.dtype == dtype and grad_weight.is_contiguous()


def _float64_kernels(devices=("cpu", "cuda")):
    return [p for p in kernel_dtype_params(devices) if p.values[2] == torch.float64]


@pytest.mark.parametrize("device, kernel, dtype", _float64_kernels())
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("leading", [(), (4,), (2, 3)], ids=["1d", "2d", "3d"])
def test_gradcheck(device, kernel, dtype, bias, leading):
    """Its backward is linear_tiled's (d grad = x·gdWᵀ + gdb, d x = grad·gdW), so this is also the
    double backward of a linear layer."""
    gen = generator(device, "weight_grad_gradcheck", kernel, bias, leading)
    grad = randn((*leading, 5), dtype, device, gen).requires_grad_()
    x = randn((*leading, 3), dtype, device, gen).requires_grad_()
    fn = lambda g, x: torch_gemm.linear_tiled_weight_grad(g, x, bias=bias, kernel=kernel)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (grad, x))
    assert torch.autograd.gradgradcheck(fn, (grad, x))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("used", ["weight", "bias", "both"])
def test_backward_of_the_outputs_used(device, used):
    """An output that does not reach the loss gets no gradient computed: db alone is linear in
    grad alone (its gradient is gdb spread over the rows, no product), and x then gets none."""
    gen = generator(device, "weight_grad_backward", used)
    grad = randn((3, 4, 6), torch.float32, device, gen).requires_grad_()
    x = randn((3, 4, 5), torch.float32, device, gen).requires_grad_()
    gdw, gdb = randn((6, 5), torch.float32, device, gen), randn((6,), torch.float32, device, gen)
    grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad, x, bias=True)
    outputs, grads = {"weight": ([grad_weight], [gdw]), "bias": ([grad_bias], [gdb]),
                      "both": ([grad_weight, grad_bias], [gdw, gdb])}[used]
    with RecordGemmOps() as calls:
        torch.autograd.backward(outputs, grads)
    assert calls.names == ([] if used == "bias" else ["linear_tiled.default"] * 2)

    ref_g, ref_x = (t.detach().double().requires_grad_() for t in (grad, x))
    ref_w, ref_b = _rows(ref_g).t() @ _rows(ref_x), _rows(ref_g).sum(0)
    torch.autograd.backward({"weight": [ref_w], "bias": [ref_b], "both": [ref_w, ref_b]}[used],
                            [g.double() for g in grads])
    torch.testing.assert_close(grad.grad, ref_g.grad.float(), rtol=1e-5, atol=1e-5)
    if used == "bias":
        assert x.grad is None
    else:
        torch.testing.assert_close(x.grad, ref_x.grad.float(), rtol=1e-5, atol=1e-5)


class RecordOps(TorchDispatchMode):
    """Every op that reaches the dispatcher's Python key (aten and gemm), by name."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("x_shape", [(8,), (6, 8), (4, 6, 8)], ids=["1d", "2d", "3d"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_linear_backward_flattens_nothing_itself(device, x_shape, bias):
    """linear_tiled's backward hands grad and x to linear_tiled_weight_grad as they are: no view
    of them (a DTensor sharded along a leading dimension could not take the flattening one), and
    besides the two ops only the weight's transpose for dx (AccumulateGrad's detaches aside); dW
    first where x has as many elements as the weight or more (it reads x), else dx (it reads W)."""
    gen = generator(device, "linear_backward_views", x_shape, bias)
    x = randn(x_shape, torch.float32, device, gen).requires_grad_()
    weight = randn((5, 8), torch.float32, device, gen).requires_grad_()
    b = randn((5,), torch.float32, device, gen).requires_grad_() if bias else None
    out = torch_gemm.linear_tiled(x, weight, b)
    grad = torch.ones_like(out)
    with RecordOps() as calls:
        out.backward(grad)
    dx = ["aten.transpose.int", "gemm.linear_tiled.default"]
    dw = ["gemm.linear_tiled_weight_grad.default"]
    expected = dw + dx if x.numel() >= weight.numel() else dx + dw
    assert [n for n in calls.names if n != "aten.detach.default"] == expected


@pytest.mark.parametrize("device", device_params())
def test_linear_double_backward_runs_on_our_kernels(device):
    """A gradient penalty through linear_tiled: the weight gradient's own backward runs on
    linear_tiled (no torch matmul), and matches F.linear's (float64 both: the penalty chains four
    products, whose float32 rounding would blur a wrong term less than it should)."""
    gen = generator(device, "linear_double_backward")
    x, weight, b = (randn(shape, torch.float64, device, gen).requires_grad_() for shape in [(3, 4, 6), (5, 6), (5,)])

    def penalty(linear, x, weight, b):
        out = linear(x, weight, b)
        dx, dw, db = torch.autograd.grad(out.square().sum(), (x, weight, b), create_graph=True)
        return dx.square().sum() + dw.square().sum() + db.square().sum()

    with RecordOps() as calls:
        penalty(torch_gemm.linear_tiled, x, weight, b).backward()
    assert not [n for n in calls.names if n.split(".")[1] in ("mm", "bmm", "addmm", "matmul", "linear")], calls.names
    assert "gemm.linear_tiled_weight_grad.default" in calls.names
    refs = [t.detach().clone().requires_grad_() for t in (x, weight, b)]
    penalty(torch.nn.functional.linear, *refs).backward()
    for ours, ref in zip((x, weight, b), refs):
        torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", device_params())
def test_compile_fullgraph_with_backward(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(grad, x):
        grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad.sin(), x, bias=True)
        return grad_weight.square().sum() + grad_bias.square().sum()

    gen = generator(device, "weight_grad_compile")
    grad = randn((2, 9, 5), torch.float32, device, gen).requires_grad_()
    x = randn((2, 9, 7), torch.float32, device, gen).requires_grad_()
    loss = f(grad, x)
    loss.backward()
    ref_g, ref_x = (t.detach().double().requires_grad_() for t in (grad, x))
    ref_loss = (_rows(ref_g.sin()).t() @ _rows(ref_x)).square().sum() + _rows(ref_g.sin()).sum(0).square().sum()
    ref_loss.backward()
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.grad.double(), ref_g.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad.double(), ref_x.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "device, amp_dtype",
    [pytest.param("cpu", torch.bfloat16, id="cpu-bf16")]
    + [pytest.param("cuda", dt, marks=requires_cuda, id=f"cuda-{str(dt)[6:]}") for dt in (torch.float16, torch.bfloat16)],
)
def test_autocast_casts_like_torch_mm(device, amp_dtype):
    grad = torch.randn(3, 40, 24, device=device)
    x = torch.randn(3, 40, 16, device=device)
    with torch.autocast(device, dtype=amp_dtype):
        grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad, x, bias=True)
        grad_weight64, grad_bias64 = torch_gemm.linear_tiled_weight_grad(grad.double(), x.double(), bias=True)
        theirs = torch.mm(_rows(grad).t(), _rows(x))
    assert grad_weight.dtype == grad_bias.dtype == theirs.dtype == amp_dtype
    assert grad_weight64.dtype == grad_bias64.dtype == torch.float64  # float64 is left alone, as for torch.mm
    assert_close_to_reference(grad_weight, _rows(grad).t().to(amp_dtype), _rows(x).to(amp_dtype))
    assert_row_sum_close_to_reference(grad_bias, _rows(grad).t().to(amp_dtype))


@requires_cuda
@pytest.mark.parametrize("dtype, K", [(torch.bfloat16, 2304), (torch.bfloat16, 0), (torch.float32, 2304)])
def test_cuda_graph_capture_and_replay(dtype, K):
    """Where kernel="auto" fuses db (bf16 with wgmma_sm90's tiles filling an H100/H200) and where
    torch's reduction runs beside the product (K = 0; float32)."""
    grad = torch.randn(2, 100, 1024, device="cuda").to(dtype)
    x = torch.randn(2, 100, K, device="cuda").to(dtype)
    torch_gemm.linear_tiled_weight_grad(grad, x, bias=True)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grad_weight, grad_bias = torch_gemm.linear_tiled_weight_grad(grad, x, bias=True)
    for _ in range(2):
        grad.copy_(torch.randn_like(grad))
        graph.replay()
        torch.cuda.synchronize()
        assert_close_to_reference(grad_weight, _rows(grad).t(), _rows(x))
        assert_row_sum_close_to_reference(grad_bias, _rows(grad).t())


@pytest.mark.parametrize("device", device_params(("cpu", "cuda", "meta")))
def test_bad_inputs_name_the_op_and_argument(device):
    """The real kernel and the fake one, while tracing, fail alike."""
    grad = torch.randn(2, 4, 8, device=device)
    x = torch.randn(2, 4, 5, device=device)
    call = torch_gemm.linear_tiled_weight_grad
    leading = re.escape("grad and x must have the same leading dimensions (all but the last)")
    cases = [
        (lambda: call(grad, x[:, :3]), rf"{OP}: {leading}, got grad of shape \[2, 4, 8\] and x of shape \[2, 3, 5\]"),
        (lambda: call(grad, x[0]), rf"{OP}: {leading}, got grad of shape \[2, 4, 8\] and x of shape \[4, 5\]"),
        (lambda: call(grad[0, 0], x), rf"{OP}: {leading}, got grad of shape \[8\]"),
        (lambda: call(grad.sum(), x), f"{OP}: grad must have at least 1 dimension, got a 0-D tensor"),
        (lambda: call(grad, x.sum()), f"{OP}: x must have at least 1 dimension, got a 0-D tensor"),
        (lambda: call(grad, x.half()), f"{OP}: grad and x must have the same dtype, got Float and Half"),
        (lambda: call(grad.int(), x.int()), f"{OP}: grad has unsupported dtype Int"),
        (lambda: call(grad, x.to(torch.complex64)), f"{OP}: x has unsupported dtype ComplexFloat"),
    ]
    if device != "meta":  # meta tensors run no kernel and take any name
        cases.append((lambda: call(grad, x, kernel="nope"), f"{OP}: unknown kernel 'nope'"))
    for fn, message in cases:
        with pytest.raises(RuntimeError, match=message):
            fn()
        with FakeTensorMode(allow_non_fake_inputs=True), pytest.raises(RuntimeError, match=message):
            fn()


@requires_cuda
def test_cpu_and_cuda_mixed():
    with pytest.raises(RuntimeError, match=f"{OP}: grad and x must be on the same device, got cpu and cuda:0"):
        torch_gemm.linear_tiled_weight_grad(torch.randn(3, 4), torch.randn(3, 5, device="cuda"))
