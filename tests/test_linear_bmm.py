"""Correctness of gemm::linear_tiled (bias fused in the epilogue) and gemm::bmm_tiled: every
kernel × dtype, odd shapes, every layout of weight and of the batch, against float64."""

import pytest
import torch

import torch_gemm
from gemm_testing import (
    RecordGemmOps,
    assert_batch_close_to_reference,
    assert_close_to_reference,
    device_params,
    generator,
    kernel_dtype_params,
    poisoned_outputs,
    randn,
    requires_cuda,
)

# (rows of x, N, K): primes, edges around the tile sizes, K = 0 and 1.
LINEAR_SHAPES = [(1, 1, 1), (7, 33, 97), (129, 257, 64), (64, 128, 33), (31, 16, 0), (1000, 97, 257)]
WEIGHT_LAYOUTS = ["nn_linear", "transposed", "sliced"]


def _weight(N: int, K: int, layout: str, dtype, device, gen) -> torch.Tensor:
    """(N, K) as nn.Linear stores it, as the transpose of a (K, N) tensor, or a slice at an odd
    offset of a wider one."""
    if layout == "transposed":
        return randn((K, N), dtype, device, gen).t()
    if layout == "sliced":
        return randn((N + 2, K + 3), dtype, device, gen)[1 : N + 1, 3:]
    return randn((N, K), dtype, device, gen)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
@pytest.mark.parametrize("weight_layout", WEIGHT_LAYOUTS)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_linear_tiled_matches_float64(device, kernel, dtype, weight_layout, with_bias):
    for rows, N, K in LINEAR_SHAPES:
        gen = generator(device, "linear", kernel, str(dtype), weight_layout, with_bias, rows, N, K)
        x = randn((rows, K), dtype, device, gen)
        weight = _weight(N, K, weight_layout, dtype, device, gen)
        bias = randn((N,), dtype, device, gen) if with_bias else None
        with poisoned_outputs():
            out = torch_gemm.linear_tiled(x, weight, bias, kernel=kernel)
        assert_close_to_reference(out, x, weight.t(), bias)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_tiled_leading_dimensions(device, dtype):
    """x of 1, 2, 3 and 4 dimensions, including a permuted one that cannot be flattened as a view
    and an empty leading dimension; the result keeps x's leading shape."""
    gen = generator(device, "leading", str(dtype))
    weight = randn((24, 40), dtype, device, gen)
    bias = randn((24,), dtype, device, gen)
    xs = [
        randn((40,), dtype, device, gen),
        randn((5, 40), dtype, device, gen),
        randn((3, 7, 40), dtype, device, gen),
        randn((2, 3, 5, 40), dtype, device, gen),
        randn((5, 3, 2, 40), dtype, device, gen).permute(2, 1, 0, 3),
        randn((0, 3, 40), dtype, device, gen),
    ]
    for x in xs:
        out = torch_gemm.linear_tiled(x, weight, bias)
        assert out.shape == (*x.shape[:-1], 24)
        if x.numel():
            assert_close_to_reference(out.reshape(-1, 24), x.reshape(-1, 40), weight.t(), bias)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
def test_linear_tiled_k_zero_gives_the_bias(device, kernel, dtype):
    x = torch.empty(5, 0, dtype=dtype, device=device)
    weight = torch.empty(9, 0, dtype=dtype, device=device)
    bias = torch.arange(9, dtype=dtype, device=device)
    with poisoned_outputs():
        out = torch_gemm.linear_tiled(x, weight, bias, kernel=kernel)
    assert torch.equal(out, bias.expand(5, 9))


@pytest.mark.parametrize("device", device_params())
def test_linear_tiled_strided_bias(device):
    gen = generator(device, "strided_bias")
    x = randn((33, 17), torch.float32, device, gen)
    weight = randn((12, 17), torch.float32, device, gen)
    bias = randn((24,), torch.float32, device, gen)[::2]  # stride 2
    assert_close_to_reference(torch_gemm.linear_tiled(x, weight, bias), x, weight.t(), bias)


# (B, M, N, K) and how the operands are laid out.
BMM_SHAPES = [(1, 7, 33, 97), (3, 129, 64, 65), (5, 1, 17, 1), (2, 64, 128, 0), (0, 4, 5, 6), (4, 33, 31, 257)]
BMM_LAYOUTS = ["contiguous", "transposed", "broadcast", "heads"]


def _bmm_operands(B, M, N, K, layout, dtype, device, gen):
    """a (B, M, K), b (B, K, N): contiguous; each matrix transposed; b broadcast over the batch
    (batch stride 0, as expand gives); or attention's layout, (B, heads, T, d) seen through a
    permute, so the batch stride is not the matrix size."""
    if layout == "transposed":
        return (randn((B, K, M), dtype, device, gen).transpose(1, 2),
                randn((B, N, K), dtype, device, gen).transpose(1, 2))
    if layout == "broadcast":
        return randn((B, M, K), dtype, device, gen), randn((1, K, N), dtype, device, gen).expand(B, K, N)
    if layout == "heads":
        a = randn((M, B, K), dtype, device, gen).transpose(0, 1)  # (B, M, K), batch stride K
        b = randn((K, B, N), dtype, device, gen).transpose(0, 1)  # (B, K, N), batch stride N
        return a, b
    return randn((B, M, K), dtype, device, gen), randn((B, K, N), dtype, device, gen)


@pytest.mark.parametrize("device, kernel, dtype", kernel_dtype_params())
@pytest.mark.parametrize("layout", BMM_LAYOUTS)
def test_bmm_tiled_matches_float64(device, kernel, dtype, layout):
    for B, M, N, K in BMM_SHAPES:
        gen = generator(device, "bmm", kernel, str(dtype), layout, B, M, N, K)
        a, b = _bmm_operands(B, M, N, K, layout, dtype, device, gen)
        with poisoned_outputs():
            out = torch_gemm.bmm_tiled(a, b, kernel=kernel)
        assert out.shape == (B, M, N) and out.is_contiguous()
        for i in range(B):
            assert_close_to_reference(out[i], a[i], b[i])


@requires_cuda
@pytest.mark.parametrize("kernel", ["auto", "naive", "multistage"])
def test_bmm_tiled_batch_beyond_grid_z(kernel):
    """More batch elements than gridDim.z takes (65535): the launchers split the batch."""
    B = 65535 + 7
    gen = generator("cuda", "big_batch", kernel)
    a = randn((B, 3, 5), torch.float32, "cuda", gen)
    b = randn((B, 5, 2), torch.float32, "cuda", gen)
    with poisoned_outputs():
        out = torch_gemm.bmm_tiled(a, b, kernel=kernel)
    assert_batch_close_to_reference(out, a, b)


@requires_cuda
def test_multistage_last_launch_of_one_product_splits_k():
    """A batch of 65536 runs as a launch of 65535 products and one of one, which multistage plans
    alone: with K = 129 that one splits K (on most SM counts), in the workspace sized for it."""
    B, M, N, K = 65536, 3, 2, 129
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    plan = torch_gemm._C.multistage_plan(M, N, K, sm_count=sms, batch=B)
    gen = generator("cuda", "last_launch", B)
    a = randn((B, M, K), torch.float32, "cuda", gen)
    b = randn((B, K, N), torch.float32, "cuda", gen)
    with poisoned_outputs():
        out = torch_gemm.bmm_tiled(a, b, kernel="multistage")
    assert_batch_close_to_reference(out, a, b)
    assert_close_to_reference(out[-1], a[-1], b[-1])  # the last launch's product, alone
    if plan["last_launch"]["split_k"] > 1:
        assert plan["workspace_bytes"] == plan["last_launch"]["split_k"] * M * N * 4


# ---------------------------------------------------------------------------------------------
# The ops as PyTorch sees them: opcheck, gradcheck through every kernel, autocast, compile, CUDA
# graphs, errors.


def _float64_kernels(devices=("cpu", "cuda")):
    return [p for p in kernel_dtype_params(devices) if p.values[2] == torch.float64]


@pytest.mark.parametrize("device", device_params())
def test_opcheck(device):
    gen = generator(device, "opcheck_linear_bmm")
    x = randn((2, 3, 8), torch.float32, device, gen).requires_grad_()
    weight = randn((5, 8), torch.float32, device, gen).requires_grad_()
    bias = randn((5,), torch.float32, device, gen).requires_grad_()
    a = randn((3, 4, 6), torch.float32, device, gen).requires_grad_()
    b = randn((3, 5, 6), torch.float32, device, gen).transpose(1, 2).requires_grad_()
    for args in [(x, weight, bias, "auto"), (x, weight, None, "auto"), (x.detach()[0], weight.detach().t().contiguous().t(), None, "auto")]:
        torch.library.opcheck(torch.ops.gemm.linear_tiled.default, args)
    for args in [(a, b, "auto"), (a.detach(), b.detach().expand(3, 6, 5), "auto")]:
        torch.library.opcheck(torch.ops.gemm.bmm_tiled.default, args)


@pytest.mark.parametrize("device, kernel, dtype", _float64_kernels())
def test_gradcheck(device, kernel, dtype):
    gen = generator(device, "gradcheck_linear_bmm", kernel)
    x = randn((2, 3, 5), dtype, device, gen).requires_grad_()
    weight = randn((4, 5), dtype, device, gen).requires_grad_()
    bias = randn((4,), dtype, device, gen).requires_grad_()
    linear = lambda x, w, b: torch_gemm.linear_tiled(x, w, b, kernel=kernel)  # noqa: E731
    assert torch.autograd.gradcheck(linear, (x, weight, bias))
    assert torch.autograd.gradgradcheck(linear, (x, weight, bias))
    a = randn((3, 4, 5), dtype, device, gen).requires_grad_()
    b = randn((3, 6, 5), dtype, device, gen).transpose(1, 2).detach().requires_grad_()
    bmm = lambda a, b: torch_gemm.bmm_tiled(a, b, kernel=kernel)  # noqa: E731
    assert torch.autograd.gradcheck(bmm, (a, b))
    assert torch.autograd.gradgradcheck(bmm, (a, b))


# Which of (x, weight, bias) need a gradient, and the gemm ops the backward then runs besides the
# forward's linear_tiled: dx through linear_tiled, dW (with db where the bias needs one) through
# linear_tiled_weight_grad, db alone as torch's sum.
LINEAR_BACKWARD_CASES = {
    "all": ((True, True, True), ["linear_tiled.default", "linear_tiled_weight_grad.default"]),
    "weight_and_bias": ((False, True, True), ["linear_tiled_weight_grad.default"]),
    "x_and_weight": ((True, True, False), ["linear_tiled.default", "linear_tiled_weight_grad.default"]),
    "x_and_bias": ((True, False, True), ["linear_tiled.default"]),
    "bias": ((False, False, True), []),
}


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("case", LINEAR_BACKWARD_CASES)
def test_linear_backward_runs_every_product_through_our_kernels(device, case):
    needs, backward_ops = LINEAR_BACKWARD_CASES[case]
    gen = generator(device, "linear_backward", case)
    x, weight, bias = (randn(shape, torch.float32, device, gen).requires_grad_(need)
                       for shape, need in zip([(4, 6, 8), (5, 8), (5,)], needs))
    grad = randn((4, 6, 5), torch.float32, device, gen)
    with RecordGemmOps() as calls:
        torch_gemm.linear_tiled(x, weight, bias).backward(grad)
    assert sorted(calls.names) == sorted(["linear_tiled.default"] + backward_ops)
    refs = [t.detach().double().requires_grad_(t.requires_grad) for t in (x, weight, bias)]
    torch.nn.functional.linear(*refs).backward(grad.double())
    for ours, ref in zip((x, weight, bias), refs):
        assert (ours.grad is None) == (ref.grad is None)
        if ref.grad is not None:
            torch.testing.assert_close(ours.grad, ref.grad.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "device, amp_dtype",
    [pytest.param("cpu", torch.bfloat16, id="cpu-bf16")]
    + [pytest.param("cuda", dt, marks=requires_cuda, id=f"cuda-{str(dt)[6:]}") for dt in (torch.float16, torch.bfloat16)],
)
def test_autocast_casts_like_torch(device, amp_dtype):
    x = torch.randn(3, 24, 40, device=device)
    weight = torch.randn(16, 40, device=device)
    bias = torch.randn(16, device=device)
    with torch.autocast(device, dtype=amp_dtype):
        ours = torch_gemm.linear_tiled(x, weight, bias)
        theirs = torch.nn.functional.linear(x, weight, bias)
        ours_bmm = torch_gemm.bmm_tiled(x, x.mT)
        theirs_bmm = torch.bmm(x, x.mT)
    assert ours.dtype == theirs.dtype == amp_dtype
    assert ours_bmm.dtype == theirs_bmm.dtype == amp_dtype
    assert_close_to_reference(ours.reshape(-1, 16), x.reshape(-1, 40).to(amp_dtype), weight.t().to(amp_dtype), bias.to(amp_dtype))


@pytest.mark.parametrize("device", device_params())
def test_compile_fullgraph_with_backward(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x, w, b, q, k):
        return torch_gemm.linear_tiled(x, w, b).sum() + torch_gemm.bmm_tiled(q, k.mT).sum()

    x = torch.randn(2, 9, 8, device=device, requires_grad=True)
    w = torch.randn(6, 8, device=device, requires_grad=True)
    b = torch.randn(6, device=device, requires_grad=True)
    q = torch.randn(3, 5, 4, device=device, requires_grad=True)
    k = torch.randn(3, 7, 4, device=device, requires_grad=True)
    f(x, w, b, q, k).backward()
    torch.testing.assert_close(b.grad, torch.full((6,), 18.0, device=device))
    torch.testing.assert_close(w.grad, torch.ones(18, 6, device=device).t() @ x.detach().reshape(18, 8))
    torch.testing.assert_close(q.grad, torch.ones(3, 5, 7, device=device) @ k.detach())


@requires_cuda
def test_cuda_graph_capture_linear_and_bmm():
    x = torch.randn(64, 96, device="cuda")
    w = torch.randn(80, 96, device="cuda")
    b = torch.randn(80, device="cuda")
    q = torch.randn(4, 33, 16, device="cuda")
    torch_gemm.linear_tiled(x, w, b), torch_gemm.bmm_tiled(q, q.mT)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch_gemm.linear_tiled(x, w, b)
        scores = torch_gemm.bmm_tiled(q, q.mT)
    x.copy_(torch.randn_like(x))
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    assert_close_to_reference(out, x, w.t(), b)
    for i in range(4):
        assert_close_to_reference(scores[i], q[i], q[i].t())


@pytest.mark.parametrize("device", device_params())
def test_bad_inputs_name_the_op_and_argument(device):
    x = torch.randn(4, 8, device=device)
    w = torch.randn(5, 8, device=device)
    cases = [
        (lambda: torch_gemm.linear_tiled(x, w.t()), "gemm::linear_tiled: x's last dimension must equal weight.size(1)"),
        (lambda: torch_gemm.linear_tiled(x, w, torch.randn(4, device=device)), "gemm::linear_tiled: bias must be a 1-D tensor of weight.size(0) = 5"),
        (lambda: torch_gemm.linear_tiled(x, w, torch.randn(5, device=device).double()), "gemm::linear_tiled: x and bias must have the same dtype"),
        (lambda: torch_gemm.linear_tiled(x, w[0]), "gemm::linear_tiled: weight must be a 2-D tensor"),
        (lambda: torch_gemm.linear_tiled(torch.tensor(1.0, device=device), w), "gemm::linear_tiled: x must have at least 1 dimension"),
        (lambda: torch_gemm.linear_tiled(x.int(), w.int()), "gemm::linear_tiled: x has unsupported dtype Int"),
        (lambda: torch_gemm.linear_tiled(x, w, kernel="nope"), "gemm::linear_tiled: unknown kernel 'nope'"),
        (lambda: torch_gemm.bmm_tiled(x, w), "gemm::bmm_tiled: a must be a 3-D tensor"),
        (lambda: torch_gemm.bmm_tiled(x[None], w[None]), "gemm::bmm_tiled: inner dimensions differ"),
        (lambda: torch_gemm.bmm_tiled(x.expand(2, 4, 8), w.t()[None]), "gemm::bmm_tiled: batch sizes differ"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            call()
        # The fake kernel says the same while tracing.
        with torch._subclasses.fake_tensor.FakeTensorMode(allow_non_fake_inputs=True), pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            call()
