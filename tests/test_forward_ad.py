"""Forward-mode AD of every gemm op (torch.autograd.forward_ad, torch.func.jvp): tangents through
the same kernels, on any subset of the inputs, and a backward run under forward AD."""

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.func import jvp

import torch_gemm
from gemm_testing import device_params, generator, kernel_dtypes, table_kernels

F64 = torch.float64


def _randn(gen, device, *shape, dtype=F64):
    return torch.randn(*shape, dtype=dtype, device=device, generator=gen)


def _ops(device, gen, dtype=F64):
    """(name, function, inputs, float64 reference) for each op on small operands, a transposed
    one among them."""
    a, b = _randn(gen, device, 5, 7, dtype=dtype).t(), _randn(gen, device, 5, 3, dtype=dtype)
    x, w, bias = _randn(gen, device, 2, 3, 5, dtype=dtype), _randn(gen, device, 4, 5, dtype=dtype), _randn(gen, device, 4, dtype=dtype)
    ba, bb = _randn(gen, device, 2, 3, 5, dtype=dtype), _randn(gen, device, 2, 4, 5, dtype=dtype).transpose(1, 2)
    grad = _randn(gen, device, 2, 3, 4, dtype=dtype)
    return [
        ("mm_tiled", lambda a, b: torch_gemm.mm_tiled(a, b), (a, b), lambda a, b: a @ b),
        ("bmm_tiled", lambda a, b: torch_gemm.bmm_tiled(a, b), (ba, bb), lambda a, b: a @ b),
        ("linear_tiled", lambda x, w, c: torch_gemm.linear_tiled(x, w, c), (x, w, bias),
         lambda x, w, c: torch.nn.functional.linear(x, w, c)),
        ("linear_tiled_nobias", lambda x, w: torch_gemm.linear_tiled(x, w), (x, w),
         lambda x, w: torch.nn.functional.linear(x, w)),
        ("mm_tiled_row_sum", lambda a, b: torch_gemm.mm_tiled_row_sum(a, b), (a, b), lambda a, b: (a @ b, a.sum(1))),
        ("linear_tiled_weight_grad", lambda g, x: torch_gemm.linear_tiled_weight_grad(g, x, bias=True), (grad, x),
         lambda g, x: (g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1]).sum(0))),
        ("linear_tiled_weight_grad_nobias", lambda g, x: torch_gemm.linear_tiled_weight_grad(g, x)[0], (grad, x),
         lambda g, x: g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])),
    ]


OP_NAMES = [name for name, *_ in _ops("cpu", torch.Generator().manual_seed(0))]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("op", OP_NAMES)
def test_gradcheck_forward_and_forward_over_reverse(device, op):
    """Forward AD's Jacobian matches finite differences, and so does the tangent of a backward
    run under forward AD (the saved operands keep their tangents)."""
    gen = generator(device, "forward-ad", op)
    _, fn, inputs, _ = next(o for o in _ops(device, gen) if o[0] == op)
    inputs = tuple(t.detach().requires_grad_() for t in inputs)
    assert torch.autograd.gradcheck(fn, inputs, check_forward_ad=True)
    assert torch.autograd.gradgradcheck(fn, inputs, check_fwd_over_rev=True)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("with_tangent", ["first", "second", "last", "all"])
def test_jvp_with_tangents_on_some_inputs(device, op, with_tangent):
    """torch.func.jvp with tangents on a subset of the inputs (the others held fixed), no input
    requiring grad: the tangent equals the float64 reference's."""
    gen = generator(device, "jvp", op, with_tangent)
    _, fn, inputs, reference = next(o for o in _ops(device, gen) if o[0] == op)
    chosen = {"first": [0], "second": [1], "last": [len(inputs) - 1], "all": list(range(len(inputs)))}[with_tangent]
    tangents = [_randn(gen, device, *t.shape) for t in inputs]

    def restricted(f):
        return lambda *moving: f(*[moving[chosen.index(i)] if i in chosen else t for i, t in enumerate(inputs)])

    primals = tuple(inputs[i] for i in chosen)
    picked = tuple(tangents[i] for i in chosen)
    out, tangent = jvp(restricted(fn), primals, picked)
    out_ref, tangent_ref = jvp(restricted(reference), primals, picked)
    torch.testing.assert_close(out, out_ref)
    torch.testing.assert_close(tangent, tangent_ref)


@pytest.mark.parametrize("device, kernel", [
    pytest.param(p.values[0], k, marks=p.marks, id=f"{p.values[0]}-{k}")
    for p in device_params() for k in table_kernels(p.values[0]) if torch.bfloat16 in kernel_dtypes(k, p.values[0])
])
def test_jvp_16bit_runs_on_the_kernel(device, kernel):
    """A bf16 tangent of mm_tiled and linear_tiled, through the kernel the call names, against
    float64: as close as the forward itself."""
    if device == "cuda" and kernel not in torch_gemm.available_kernels("cuda", torch.bfloat16):
        pytest.skip(f"{kernel} does not run on this GPU")
    gen = generator(device, "jvp16", kernel)
    a, b, ta = (_randn(gen, device, *s, dtype=torch.bfloat16) for s in ((33, 64), (64, 17), (33, 64)))
    _, tangent = jvp(lambda a: torch_gemm.mm_tiled(a, b, kernel=kernel), (a,), (ta,))
    expected = ta.double() @ b.double()
    assert tangent.dtype == torch.bfloat16
    torch.testing.assert_close(tangent.double(), expected, atol=0.05 * expected.abs().max().item(), rtol=0.02)
    w, tw = (_randn(gen, device, 17, 64, dtype=torch.bfloat16) for _ in range(2))
    _, tangent = jvp(lambda w: torch_gemm.linear_tiled(a, w, kernel=kernel), (w,), (tw,))
    expected = a.double() @ tw.double().T
    torch.testing.assert_close(tangent.double(), expected, atol=0.05 * expected.abs().max().item(), rtol=0.02)


@pytest.mark.parametrize("device", device_params())
def test_dual_inputs_that_require_grad(device):
    """A dual input that requires grad: the tangent is set and the backward still reaches the
    input, under no_grad the tangent alone."""
    gen = generator(device, "dual-grad")
    a, b, ta = _randn(gen, device, 4, 6), _randn(gen, device, 6, 3), _randn(gen, device, 4, 6)
    leaf = a.clone().requires_grad_()
    with fwAD.dual_level():
        out = torch_gemm.mm_tiled(fwAD.make_dual(leaf, ta), b)
        primal, tangent = fwAD.unpack_dual(out)
        torch.testing.assert_close(tangent, ta @ b)
        primal.sum().backward()
        with torch.no_grad():
            _, tangent = fwAD.unpack_dual(torch_gemm.mm_tiled(fwAD.make_dual(a, ta), b))
        torch.testing.assert_close(tangent, ta @ b)
    torch.testing.assert_close(leaf.grad, torch.ones(4, 3, dtype=F64, device=device) @ b.T)


@pytest.mark.parametrize("device", device_params())
def test_bias_tangent_alone(device):
    """Only the bias carries a tangent: the output's is that tangent broadcast over the rows."""
    gen = generator(device, "bias-tangent")
    x, w, bias, tb = _randn(gen, device, 2, 3, 5), _randn(gen, device, 4, 5), _randn(gen, device, 4), _randn(gen, device, 4)
    _, tangent = jvp(lambda c: torch_gemm.linear_tiled(x, w, c), (bias,), (tb,))
    torch.testing.assert_close(tangent, tb.expand(2, 3, 4))
