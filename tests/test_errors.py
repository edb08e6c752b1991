"""Bad input gets a clear error naming the op and the argument (never a crash or a wrong answer),
from the real kernels and from the fake kernel alike."""

import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_gemm
from torch_gemm.ops import DTYPE_BY_NAME
from gemm_testing import BUILT_WITH_CUDA, device_params, kernel_dtypes, requires_cuda, requires_two_gpus, table_kernels

OP = "gemm::mm_tiled"


def _mm(a, b, **kw):
    return torch_gemm.mm_tiled(a, b, **kw)


def _on(device, *tensors):
    return [t.to(device) for t in tensors]


@pytest.mark.parametrize("device", device_params(("cpu", "cuda", "meta")))
@pytest.mark.parametrize(
    "a_shape, b_shape, message",
    [
        ((3, 4, 5), (5, 6), "a must be a 2-D tensor, got a 3-D tensor"),
        ((4,), (4, 6), "a must be a 2-D tensor, got a 1-D tensor"),
        ((3, 4), (4,), "b must be a 2-D tensor, got a 1-D tensor"),
        ((3, 4), (2, 4, 6), "b must be a 2-D tensor, got a 3-D tensor"),
        ((3, 4), (5, 6), r"inner dimensions differ: a is \[3, 4\] and b is \[5, 6\]"),
    ],
)
def test_shape_errors(device, a_shape, b_shape, message):
    a, b = torch.randn(a_shape, device=device), torch.randn(b_shape, device=device)
    with pytest.raises(RuntimeError, match=f"{OP}: {message}"):
        _mm(a, b)


@pytest.mark.parametrize("device", device_params(("cpu", "cuda", "meta")))
def test_mixed_dtypes(device):
    a = torch.randn(3, 4, device=device)
    b = torch.randn(4, 5, device=device, dtype=torch.float16)
    with pytest.raises(RuntimeError, match=f"{OP}: a and b must have the same dtype, got Float and Half"):
        _mm(a, b)


@pytest.mark.parametrize("device", device_params(("cpu", "cuda", "meta")))
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.uint8, torch.bool, torch.complex64])
def test_unsupported_dtypes(device, dtype):
    a = torch.ones(3, 4, device=device, dtype=dtype)
    b = torch.ones(4, 5, device=device, dtype=dtype)
    names = {torch.int32: "Int", torch.int64: "Long", torch.int8: "Char", torch.uint8: "Byte",
             torch.bool: "Bool", torch.complex64: "ComplexFloat"}
    with pytest.raises(RuntimeError, match=f"{OP}: a has unsupported dtype {names[dtype]}; "
                                           "supported dtypes are Float, Double, Half and BFloat16"):
        _mm(a, b)


def _makeable_dtypes():
    """Every dtype torch names that an empty CPU tensor can take, the quantized ones aside."""
    found = {}
    for value in vars(torch).values():
        if isinstance(value, torch.dtype):
            try:
                with warnings.catch_warnings():  # "experimental" and "deprecated" dtypes
                    warnings.simplefilter("ignore")
                    torch.empty(1, dtype=value)
            except (RuntimeError, TypeError):
                continue
            if "qint" not in str(value) and "quint" not in str(value):
                found[str(value)] = value
    return [found[k] for k in sorted(found)]


@pytest.mark.parametrize("dtype", [d for d in _makeable_dtypes() if d not in DTYPE_BY_NAME.values()], ids=str)
def test_fake_names_every_unsupported_dtype_as_the_kernel_does(dtype):
    """The fake kernel's message names a dtype as c10 does (UInt16, Float8_e4m3fn, Bits8, ...),
    word for word the CPU kernel's."""
    a, b = torch.empty(3, 4, dtype=dtype), torch.empty(4, 5, dtype=dtype)
    with pytest.raises(RuntimeError) as real:
        _mm(a, b)
    with FakeTensorMode() as mode:
        with pytest.raises(RuntimeError) as fake:
            _mm(mode.from_tensor(a), mode.from_tensor(b))
    assert str(fake.value) == str(real.value)
    assert "unsupported dtype" in str(real.value)


@pytest.mark.parametrize("device", device_params(("cpu", "cuda", "meta")))
@pytest.mark.parametrize("requires_grad", [False, True], ids=["kernels", "autograd"])
@pytest.mark.parametrize("op, args, missing", [
    ("mm_tiled", lambda t: (None, t), "a"),
    ("mm_tiled", lambda t: (t, None), "b"),
    ("bmm_tiled", lambda t: (t[None], None), "b"),
    ("mm_tiled_row_sum", lambda t: (None, t), "a"),
    ("linear_tiled", lambda t: (t, None), "weight"),
    ("linear_tiled", lambda t: (None, t), "x"),
    ("linear_tiled_weight_grad", lambda t: (None, t), "grad"),
])
def test_none_for_a_tensor(device, requires_grad, op, args, missing):
    """None where a tensor goes: the op's message names the argument, from the kernels themselves
    (under inference_mode: the C++ checks, and the fake kernel's on meta tensors) and from
    autograd's kernel, which checks before it reads them (the other operand requiring grad)."""
    t = torch.randn(4, 4, device=device).requires_grad_(requires_grad)
    kwargs = {"bias": False} if op == "linear_tiled_weight_grad" else {}
    with torch.inference_mode(not requires_grad):
        with pytest.raises(RuntimeError, match=f"gemm::{op}: {missing} is an undefined tensor"):
            getattr(torch.ops.gemm, op)(*args(t), **kwargs)


@requires_cuda
@pytest.mark.parametrize("swap", [False, True])
def test_cpu_and_cuda_mixed(swap):
    a, b = torch.randn(3, 4), torch.randn(4, 5, device="cuda")
    if swap:
        a, b = a.cuda(), b.cpu()
    with pytest.raises(RuntimeError, match=f"{OP}: a and b must be on the same device, got"):
        _mm(a, b)


@requires_two_gpus
def test_two_gpus_mixed():
    a, b = torch.randn(3, 4, device="cuda:0"), torch.randn(4, 5, device="cuda:1")
    with pytest.raises(RuntimeError, match=f"{OP}: a and b must be on the same device, got cuda:0 and cuda:1"):
        _mm(a, b)


@pytest.mark.parametrize("device", device_params(("cpu", "cuda")))
def test_unknown_kernel(device):
    a, b = torch.randn(3, 4, device=device), torch.randn(4, 5, device=device)
    with pytest.raises(RuntimeError, match=f"{OP}: unknown kernel 'no_such_kernel'; kernels for {device}: auto"):
        _mm(a, b, kernel="no_such_kernel")


@pytest.mark.skipif(not BUILT_WITH_CUDA, reason="a CPU-only build knows no CUDA kernel names")
@pytest.mark.parametrize("kernel", [k for k in table_kernels("cuda") if k != "auto"] or ["naive"])
def test_cuda_kernel_on_cpu_tensors(kernel):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    with pytest.raises(RuntimeError, match=f"{OP}: kernel '{kernel}' is not available for cpu tensors "
                                           r"\(it runs on cuda\); kernels for cpu: auto, blocked"):
        _mm(a, b, kernel=kernel)


@requires_cuda
def test_cpu_kernel_on_cuda_tensors():
    a, b = torch.randn(3, 4, device="cuda"), torch.randn(4, 5, device="cuda")
    with pytest.raises(RuntimeError, match=f"{OP}: kernel 'blocked' is not available for cuda tensors"):
        _mm(a, b, kernel="blocked")


def _dtype_gaps():
    """(device, kernel, dtype) triples where a kernel of this build lacks a dtype."""
    gaps = []
    for row in torch_gemm.kernel_table():
        for label, dtype in DTYPE_BY_NAME.items():
            if label not in row["dtypes"]:
                marks = requires_cuda if row["device"] == "cuda" else ()
                gaps.append(pytest.param(row["device"], row["name"], dtype, marks=marks,
                                         id=f"{row['device']}-{row['name']}-{label}"))
    return gaps or [pytest.param(None, None, None, marks=pytest.mark.skip(reason="every kernel takes every dtype"))]


@pytest.mark.parametrize("device, kernel, dtype", _dtype_gaps())
def test_kernel_without_dtype(device, kernel, dtype):
    a = torch.randn(3, 4, device=device, dtype=dtype)
    b = torch.randn(4, 5, device=device, dtype=dtype)
    with pytest.raises(RuntimeError, match=f"{OP}: kernel '{kernel}' does not support dtype") as real:
        _mm(a, b, kernel=kernel)
    # The message offers only kernels that do take the dtype, and tracing fails the same way.
    offered = str(real.value).split("that do: ")[1].split(", ")
    assert offered[0] == "auto" and all(dtype in kernel_dtypes(k, device) for k in offered)
    with FakeTensorMode() as mode:
        with pytest.raises(RuntimeError) as fake:
            _mm(mode.from_tensor(a), mode.from_tensor(b), kernel=kernel)
    assert str(fake.value) == str(real.value)


@pytest.mark.parametrize("device", device_params(("cpu", "cuda")))
@pytest.mark.parametrize("kernel", ["no_such_kernel", "blocked", "warptile"])
def test_fake_kernel_rejects_what_the_real_one_rejects(device, kernel):
    a, b = torch.randn(3, 4, device=device), torch.randn(4, 5, device=device)
    try:
        _mm(a, b, kernel=kernel)
        return  # the real kernel takes it (e.g. warptile on CUDA in fp32): nothing to compare
    except RuntimeError as err:
        real = str(err)
    with FakeTensorMode() as mode:
        with pytest.raises(RuntimeError) as fake:
            _mm(mode.from_tensor(a), mode.from_tensor(b), kernel=kernel)
    assert str(fake.value) == real


def test_errors_leave_the_process_usable():
    a, b = torch.randn(3, 4), torch.randn(5, 6)
    for _ in range(3):
        with pytest.raises(RuntimeError):
            _mm(a, b)
    assert torch.allclose(_mm(a, b[:4, :5]), a @ b[:4, :5], atol=1e-5)
