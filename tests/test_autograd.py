"""Autograd of gemm::mm_tiled: gradients through the same kernel, transposes as views, only the
gradients that are needed, double backward."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_gemm
from gemm_testing import device_params, generator, kernel_dtypes, kernel_is_tf32, table_kernels


def _kernel_params(dtype=torch.float32, devices=("cpu", "cuda")):
    """(device, kernel) for every kernel of the build that takes dtype (float32: in IEEE
    arithmetic, so not the TF32 kernels)."""
    return [
        pytest.param(device, kernel, marks=p.marks, id=f"{device}-{kernel}")
        for p in device_params(devices)
        for device in p.values
        for kernel in table_kernels(device)
        if dtype in kernel_dtypes(kernel, device)
        and not (dtype == torch.float32 and kernel_is_tf32(kernel, device))
    ]


class RecordGemmCalls(TorchDispatchMode):
    """Records every gemm::mm_tiled call (args and kwargs) that reaches the kernels."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.gemm.mm_tiled.default:
            self.calls.append((args, kwargs))
        return func(*args, **kwargs)


@pytest.mark.parametrize("device, kernel", _kernel_params(torch.float64))
@pytest.mark.parametrize("transposed", [False, True], ids=["rowmajor", "transposed"])
def test_gradcheck(device, kernel, transposed):
    gen = generator(device, "gradcheck", kernel, transposed)
    if transposed:
        a = torch.randn(5, 7, dtype=torch.float64, device=device, generator=gen).t()
        b = torch.randn(3, 5, dtype=torch.float64, device=device, generator=gen).t()
    else:
        a = torch.randn(7, 5, dtype=torch.float64, device=device, generator=gen)
        b = torch.randn(5, 3, dtype=torch.float64, device=device, generator=gen)
    a.requires_grad_()
    b.requires_grad_()
    fn = lambda x, y: torch_gemm.mm_tiled(x, y, kernel=kernel)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (a, b))
    assert torch.autograd.gradgradcheck(fn, (a, b))


@pytest.mark.parametrize("device, kernel", _kernel_params())
def test_backward_matches_torch_float32(device, kernel):
    gen = generator(device, "backward", kernel)
    a = torch.randn(33, 97, device=device, generator=gen, requires_grad=True)
    b = torch.randn(97, 31, device=device, generator=gen, requires_grad=True)
    grad = torch.randn(33, 31, device=device, generator=gen)
    torch_gemm.mm_tiled(a, b, kernel=kernel).backward(grad)
    a_ref, b_ref = a.detach().double(), b.detach().double()
    torch.testing.assert_close(a.grad.double(), grad.double() @ b_ref.t(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad.double(), a_ref.t() @ grad.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device, kernel", _kernel_params())
@pytest.mark.parametrize("m", [6, 3], ids=["a_larger", "b_larger"])
def test_backward_uses_same_kernel_and_views(device, kernel, m):
    a = torch.randn(m, 4, device=device, requires_grad=True)
    b = torch.randn(4, 5, device=device, requires_grad=True)
    out = torch_gemm.mm_tiled(a, b, kernel=kernel)
    grad = torch.randn_like(out)
    with RecordGemmCalls() as rec:
        out.backward(grad)
    assert len(rec.calls) == 2
    # The product reading the larger operand first: dB (reads A) where A has as many elements
    # as B or more, else dA (reads B).
    db_call, da_call = (0, 1) if a.numel() >= b.numel() else (1, 0)
    (g1, bt, *kernel1), _ = rec.calls[da_call]
    (at, g2, *kernel2), _ = rec.calls[db_call]
    assert kernel1 == kernel2 == ([] if kernel == "auto" else [kernel])  # the default is dropped
    # The transposes reach the kernel as strided views of the saved inputs, not copies.
    assert bt.data_ptr() == b.data_ptr() and bt.stride() == (1, 5)
    assert at.data_ptr() == a.data_ptr() and at.stride() == (1, 4)


class RecordFirstArgs(TorchDispatchMode):
    """The first operand of every call of one gemm op, in call order."""

    def __init__(self, op):
        super().__init__()
        self.op, self.first = op, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is self.op:
            self.first.append(args[0])
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("m", [6, 3], ids=["a_larger", "b_larger"])
@pytest.mark.parametrize("op", ["bmm_tiled", "mm_tiled_row_sum"])
def test_backward_order_by_operand_size(device, m, op):
    """bmm_tiled and mm_tiled_row_sum order their backward's products as mm_tiled does: dB
    (whose first operand is Aᵀ) first where A has as many elements as B or more."""
    gen = generator(device, "backward_order", m, op)
    batch = (2,) if op == "bmm_tiled" else ()
    a = torch.randn(*batch, m, 4, device=device, generator=gen).requires_grad_()
    b = torch.randn(*batch, 4, 5, device=device, generator=gen).requires_grad_()
    if op == "bmm_tiled":
        out, recorded = torch_gemm.bmm_tiled(a, b), torch.ops.gemm.bmm_tiled.default
        loss = out.square().sum()
    else:
        out, row_sum = torch_gemm.mm_tiled_row_sum(a, b)
        recorded = torch.ops.gemm.mm_tiled.default
        loss = out.square().sum() + row_sum.square().sum()
    with RecordFirstArgs(recorded) as rec:
        loss.backward()
    assert len(rec.first) == 2
    db_first = a.numel() >= b.numel()
    assert (rec.first[0].data_ptr() == a.data_ptr()) == db_first  # dB's first operand is Aᵀ
    assert (rec.first[1].data_ptr() == a.data_ptr()) != db_first
    a_ref, b_ref = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    ref = (a_ref @ b_ref).square().sum() + (0 if op == "bmm_tiled" else a_ref.sum(-1).square().sum())
    ref.backward()
    torch.testing.assert_close(a.grad.double(), a_ref.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad.double(), b_ref.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", device_params())
def test_backward_under_dynamic_shapes(device):
    """Traced with symbolic sizes (torch.compile, dynamic=True), the backward takes its fixed
    order (no guard on the sizes) and its gradients match, for operands of either size order."""
    torch._dynamo.reset()

    @torch.compile(backend="aot_eager", dynamic=True, fullgraph=True)
    def loss_of(x, w):
        return torch_gemm.linear_tiled(x, w).square().sum() + torch_gemm.mm_tiled(x, w.t()).sum()

    for rows in (3, 7, 40):  # x smaller than w, then larger
        gen = generator(device, "backward_dynamic", rows)
        x = torch.randn(rows, 6, device=device, generator=gen).requires_grad_()
        w = torch.randn(5, 6, device=device, generator=gen).requires_grad_()
        loss_of(x, w).backward()
        x_ref, w_ref = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
        ((x_ref @ w_ref.t()).square().sum() + (x_ref @ w_ref.t()).sum()).backward()
        torch.testing.assert_close(x.grad.double(), x_ref.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(w.grad.double(), w_ref.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("which", ["a", "b"])
def test_only_needed_gradients(device, which):
    a = torch.randn(6, 4, device=device, requires_grad=(which == "a"))
    b = torch.randn(4, 5, device=device, requires_grad=(which == "b"))
    out = torch_gemm.mm_tiled(a, b)
    with RecordGemmCalls() as rec:
        out.sum().backward()
    assert len(rec.calls) == 1
    assert (a.grad is not None) == (which == "a")
    assert (b.grad is not None) == (which == "b")


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_backward_16bit(device, dtype):
    a = torch.randn(64, 48, device=device).to(dtype).requires_grad_()
    b = torch.randn(48, 40, device=device).to(dtype).requires_grad_()
    torch_gemm.mm_tiled(a, b).float().square().sum().backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    torch.mm(a2, b2).float().square().sum().backward()
    assert a.grad.dtype == dtype and b.grad.dtype == dtype
    torch.testing.assert_close(a.grad, a2.grad, rtol=2e-2, atol=2e-1)
    torch.testing.assert_close(b.grad, b2.grad, rtol=2e-2, atol=2e-1)
