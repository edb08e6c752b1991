"""torch_gemm.nn: Linear against nn.Linear (forward, backward, state dicts), swap_linear and
unswap_linear on models (which modules, parameters kept, optimizers and tied weights), and a
swapped attention block under torch.compile and CUDA graphs."""

from __future__ import annotations

import copy

import logging

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import torch_gemm
from gemm_testing import device_params, generator, randn, requires_cuda, table_kernels
from model_testing import (
    FLOAT32_SINGLE_OP_TOL,
    SINGLE_OP_FACTOR,
    assert_matches_reference,
    plain_linear_names,
    randomize_,
    swapped_names,
)
from torch_gemm.attention import DecoderConfig, MultiHeadAttention, TinyDecoder
from torch_gemm.nn import Linear, is_attention_projection, swap_linear, unswap_linear

DTYPES = [pytest.param(torch.float32, id="float32"), pytest.param(torch.bfloat16, id="bfloat16")]
# Feature counts that are no multiple of any tile or vector width.
IN_FEATURES, OUT_FEATURES = 37, 29


class RecordGemmCalls(TorchDispatchMode):
    """(op name, kernel=) of every gemm op call that reaches the kernels."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "gemm":
            position = [a.name for a in func._schema.arguments].index("kernel")
            # A kernel= equal to the schema's default is dropped from the call's arguments.
            kernel = args[position] if len(args) > position else kwargs.get("kernel", "auto")
            self.calls.append((func.__name__.split(".")[0], kernel))
        return func(*args, **kwargs)

    def count(self, op: str) -> int:
        return sum(name == op for name, _ in self.calls)


def small_decoder(**overrides) -> TinyDecoder:
    config = DecoderConfig(vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=48,
                           max_seq_len=16)
    for key, value in overrides.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    return TinyDecoder(config)


ATTENTION_NAMES = [f"layers.{i}.self_attn.{p}" for i in range(2) for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
MLP_NAMES = [f"layers.{i}.mlp.{p}" for i in range(2) for p in ("gate_proj", "up_proj", "down_proj")]


# ---------------------------------------------------------------------------------------------
# Linear against nn.Linear.


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("leading", [(), (7,), (2, 5), (2, 3, 4)], ids=["1d", "2d", "3d", "4d"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_linear_matches_nn_linear(device, dtype, leading, bias):
    """Forward and every gradient (x, weight, bias) of Linear and nn.Linear on the same inputs,
    against the float64 result: x with 0 to 3 leading dimensions."""
    gen = generator(device, "linear", dtype, leading, bias)
    theirs = nn.Linear(IN_FEATURES, OUT_FEATURES, bias=bias, device=device, dtype=dtype)
    randomize_(theirs.parameters(), gen)
    ours = Linear(IN_FEATURES, OUT_FEATURES, bias=bias, device=device, dtype=dtype)
    ours.load_state_dict(theirs.state_dict())
    reference = copy.deepcopy(theirs).double()

    x = randn((*leading, IN_FEATURES), dtype, device, gen)
    grad = randn((*leading, OUT_FEATURES), dtype, device, gen)
    results = {}
    for name, module, dt in (("ours", ours, dtype), ("theirs", theirs, dtype), ("ref", reference, torch.float64)):
        xi = x.detach().to(dt).requires_grad_()
        out = module(xi)
        out.backward(grad.to(dt))
        results[name] = {"out": out, "x.grad": xi.grad, "weight.grad": module.weight.grad}
        if bias:
            results[name]["bias.grad"] = module.bias.grad
    for what in results["ours"]:
        assert_matches_reference(results["ours"][what], results["theirs"][what], results["ref"][what],
                                 f"{what} {tuple(x.shape)}", factor=SINGLE_OP_FACTOR,
                                 float32_tol=FLOAT32_SINGLE_OP_TOL,
                                 float32_max_tol=FLOAT32_SINGLE_OP_TOL)


@pytest.mark.parametrize("device", device_params())
def test_linear_passes_its_kernel(device):
    """The module's kernel attribute reaches the op, forward and backward, and follows changes."""
    kernel = table_kernels(device)[1]  # a named kernel, not "auto"
    module = Linear(8, 6, device=device, kernel=kernel)
    x = torch.randn(3, 8, device=device, requires_grad=True)
    with RecordGemmCalls() as rec:
        module(x).sum().backward()
    assert rec.calls[0] == ("linear_tiled", kernel)  # the forward
    assert len(rec.calls) >= 3 and all(k == kernel for _, k in rec.calls)  # and dx, dW in the backward
    module.kernel = "auto"
    with RecordGemmCalls() as rec:
        module(x)
    assert rec.calls == [("linear_tiled", "auto")]


def test_extra_repr_names_kernel():
    assert repr(Linear(3, 4)) == "Linear(in_features=3, out_features=4, bias=True, kernel='auto')"
    assert "kernel='blocked'" in repr(Linear(3, 4, bias=False, kernel="blocked"))
    with pytest.raises(TypeError, match="kernel must be a str"):
        Linear(3, 4, kernel=None)


# ---------------------------------------------------------------------------------------------
# State dicts and from_linear.


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_state_dict_round_trip(bias):
    """A state dict of nn.Linear loads into Linear and back, strictly, with equal values."""
    torch.manual_seed(0)
    theirs = nn.Linear(5, 3, bias=bias)
    ours = Linear(5, 3, bias=bias)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == (["weight", "bias"] if bias else ["weight"])
    ours.load_state_dict(theirs.state_dict())
    back = nn.Linear(5, 3, bias=bias)
    back.load_state_dict(ours.state_dict())
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value) and torch.equal(back.state_dict()[key], value)


def test_swap_keeps_model_state_dict():
    model = small_decoder()
    before = model.state_dict()
    swap_linear(model, all_linear=True)
    after = model.state_dict()
    assert list(after) == list(before)
    assert all(after[k].data_ptr() == before[k].data_ptr() for k in before)  # the same storage, no copy
    fresh = small_decoder()
    torch.manual_seed(1)
    fresh.reset_parameters()
    fresh.load_state_dict(after)  # a plain model loads the swapped one's state, and vice versa
    model.load_state_dict(fresh.state_dict())


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_from_linear_shares_parameters(device, bias):
    linear = nn.Linear(6, 4, bias=bias, device=device, dtype=torch.bfloat16).eval()
    ours = Linear.from_linear(linear, kernel="auto")
    assert type(ours) is Linear and type(linear) is nn.Linear  # the original is left as it was
    assert ours.weight is linear.weight
    assert (ours.bias is linear.bias) if bias else ours.bias is None
    assert ours.weight.dtype == torch.bfloat16 and ours.weight.device.type == device
    assert not ours.training and ours.kernel == "auto"
    assert (ours.in_features, ours.out_features) == (6, 4)
    x = torch.randn(2, 6, device=device, dtype=torch.bfloat16)
    assert torch.equal(ours(x), torch_gemm.linear_tiled(x, linear.weight, linear.bias))
    with pytest.raises(TypeError, match="expected a torch.nn.Linear, got Conv1d"):
        Linear.from_linear(nn.Conv1d(2, 2, 1))


# ---------------------------------------------------------------------------------------------
# Which modules swap_linear takes.


@pytest.mark.parametrize(
    "name, expected",
    [
        ("model.layers.0.self_attn.q_proj", True),  # Llama, Mistral, Qwen
        ("model.layers.0.self_attn.o_proj", True),
        ("model.decoder.layers.0.self_attn.out_proj", True),  # OPT, BART
        ("model.layers.0.self_attn.qkv_proj", True),  # Phi-3
        ("encoder.layer.0.attention.self.query", True),  # BERT
        ("encoder.layer.0.attention.self.Value", True),
        ("encoder.layer.0.attention.output.dense", True),
        ("encoder.layer.0.output.dense", False),  # BERT's MLP output
        ("encoder.layer.0.intermediate.dense", False),
        ("gpt_neox.layers.0.attention.query_key_value", True),
        ("gpt_neox.layers.0.attention.dense", True),
        ("transformer.h.0.self_attention.dense", True),  # Falcon, BLOOM
        ("gpt_neox.layers.0.mlp.dense_h_to_4h", False),
        ("encoder.block.0.layer.0.SelfAttention.q", True),  # T5
        ("encoder.block.0.layer.0.SelfAttention.o", True),
        ("encoder.block.0.layer.1.DenseReluDense.wo", False),  # T5's MLP output
        ("decoder.block.0.layer.2.DenseReluDense.wi_0", False),
        ("layers.0.attention.wq", True),  # Meta's Llama
        ("layers.0.attention.wo", True),
        ("layers.0.feed_forward.w2", False),
        ("backbone.layers.0.mixer.in_proj", False),  # Mamba's SSM block
        ("backbone.layers.0.mixer.out_proj", False),
        ("out_proj", True),  # an attention block swapped by itself
        ("model.layers.0.self_attn.dense", True),  # Phi-1/2's attention output
        ("model.layers.0.mlp.fc2", False),
        ("transformer.blocks.0.attn.Wqkv", True),  # MPT
        ("transformer.h.0.attn.c_attn", True),  # GPT-2 (a Conv1D there, so not swapped in practice)
        ("transformer.h.0.attn.c_proj", False),  # c_proj is also the MLP's name in GPT-2
        ("model.layers.0.mlp.gate_proj", False),
        ("lm_head", False),
        ("dense", False),
        ("", False),
    ],
)
def test_default_filter_names(name, expected):
    assert is_attention_projection(name, nn.Linear(2, 2)) is expected


def test_default_swaps_only_attention_projections():
    model = small_decoder()
    swap_linear(model)
    assert swapped_names(model) == ATTENTION_NAMES
    assert plain_linear_names(model) == MLP_NAMES + ["lm_head"]
    fused = swap_linear(small_decoder(fused_qkv=True))
    assert swapped_names(fused) == [f"layers.{i}.self_attn.{p}" for i in range(2) for p in ("qkv_proj", "o_proj")]


def test_all_linear():
    model = swap_linear(small_decoder(), all_linear=True)
    assert plain_linear_names(model) == []
    assert sorted(swapped_names(model)) == sorted(ATTENTION_NAMES + MLP_NAMES + ["lm_head"])


def test_filter_fn_overrides_default():
    seen = []

    def only_down_proj(name: str, module: nn.Module) -> bool:
        seen.append((name, type(module)))
        return name.endswith("mlp.down_proj")

    model = swap_linear(small_decoder(), only_down_proj)
    assert swapped_names(model) == ["layers.0.mlp.down_proj", "layers.1.mlp.down_proj"]
    # Called with the qualified name of every candidate, and only for candidates.
    assert [name for name, _ in seen] == plain_linear_names(small_decoder())
    assert all(t is nn.Linear for _, t in seen)


def test_swap_again_updates_kernel_of_chosen_modules():
    model = swap_linear(small_decoder())
    modules = dict(model.named_modules())
    swap_linear(model, lambda name, m: name.endswith("q_proj") or name.endswith("gate_proj"), kernel="blocked")
    kernels = {name: m.kernel for name, m in model.named_modules() if isinstance(m, Linear)}
    assert kernels == {**{n: "auto" for n in ATTENTION_NAMES},
                       **{n: "blocked" for n in ATTENTION_NAMES + MLP_NAMES if n.endswith(("q_proj", "gate_proj"))}}
    assert all(m is modules[name] for name, m in model.named_modules())  # the same module objects


def test_returns_model_and_swaps_a_root_linear():
    model = small_decoder()
    assert swap_linear(model) is model
    root = nn.Linear(4, 4)
    with pytest.warns(UserWarning, match=r"none of its 1 nn.Linear modules \(<the model itself>\)"):
        assert swap_linear(root) is root and type(root) is nn.Linear  # the root's name is "", no projection
    assert swap_linear(root, all_linear=True) is root and type(root) is Linear
    assert unswap_linear(root) is root and type(root) is nn.Linear


def test_linear_subclasses_are_left_alone():
    class Scaled(nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    model = nn.ModuleDict({"q_proj": Scaled(4, 4), "mha": nn.MultiheadAttention(8, 2)})
    with pytest.warns(UserWarning, match="the model has no nn.Linear module"):
        swap_linear(model, all_linear=True)
    assert type(model["q_proj"]) is Scaled
    assert type(model["mha"].out_proj) is nn.modules.linear.NonDynamicallyQuantizableLinear


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: swap_linear({"q_proj": nn.Linear(2, 2)}), TypeError,
         "swap_linear: model must be a torch.nn.Module, got dict"),
        (lambda: swap_linear(torch.ones(2)), TypeError, "got Tensor"),
        (lambda: unswap_linear([nn.Linear(2, 2)]), TypeError,
         "unswap_linear: model must be a torch.nn.Module, got list"),
        (lambda: swap_linear(nn.Linear(2, 2), lambda n, m: True, all_linear=True), ValueError, "not both"),
        (lambda: swap_linear(nn.Linear(2, 2), "q_proj"), TypeError, "filter_fn must be callable"),
        (lambda: swap_linear(nn.Linear(2, 2), kernel=3), TypeError, "kernel must be a str"),
        (lambda: swap_linear(nn.Linear(2, 2), kernel="bogus"), ValueError,
         "swap_linear: kernel 'bogus' is not a kernel of this build; known: auto, "),
        (lambda: Linear(2, 2, kernel="bogus"), ValueError,
         r"torch_gemm.nn.Linear: kernel 'bogus' is not a kernel of this build; known: auto, .*blocked"),
        (lambda: Linear.from_linear(torch.nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))), TypeError,
         r"Linear.from_linear: linear is parametrized .* remove the parametrization first"),
    ],
    ids=["dict", "tensor", "unswap_list", "filter_and_all", "filter_not_callable", "kernel_not_str",
         "swap_kernel_unknown", "linear_kernel_unknown", "from_parametrized"],
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


# The ops' aliases ("smem" for smem32) are kernels the modules take too, where the build has them.
def test_modules_take_the_ops_aliases():
    names = {row["name"] for row in torch_gemm.kernel_table()}
    for alias, name in torch_gemm.ops._ALIASES.items():
        if name not in names:
            with pytest.raises(ValueError, match=f"kernel {alias!r} is not a kernel of this build"):
                Linear(2, 2, kernel=alias)
            continue
        assert Linear(2, 2, kernel=alias).kernel == alias
        assert swap_linear(nn.Linear(2, 2), kernel=alias, all_linear=True).kernel == alias


def test_swap_that_swaps_nothing_warns_and_names_the_candidates():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    with pytest.warns(UserWarning, match=r"no module was swapped: the filter chose none of its 2 nn.Linear modules \(0, 2\)"):
        swap_linear(model)
    assert not any(isinstance(m, Linear) for m in model.modules())
    with pytest.warns(UserWarning, match="the model has no nn.Linear module"):
        swap_linear(nn.ReLU())


def test_swap_logs_what_it_swapped(caplog):
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    with caplog.at_level(logging.INFO, logger="torch_gemm.nn"):
        swap_linear(model, all_linear=True)
    assert "swap_linear: 2 module(s) on torch_gemm (kernel='auto'): 0, 1" in caplog.text


# ---------------------------------------------------------------------------------------------
# Parameters, optimizers and tied weights survive the swap.


def test_parameters_are_the_same_objects_and_optimizer_updates_them():
    model = small_decoder()
    params_before = dict(model.named_parameters())
    modules_before = dict(model.named_modules())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # built before the swap
    swap_linear(model, all_linear=True)
    assert dict(model.named_parameters()).keys() == params_before.keys()
    assert all(p is params_before[name] for name, p in model.named_parameters())
    assert all(m is modules_before[name] for name, m in model.named_modules())

    values_before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ids = torch.randint(0, model.config.vocab_size, (2, 12))
    with RecordGemmCalls() as rec:
        model(ids, labels=ids).loss.backward()
    assert rec.count("linear_tiled") >= len(swapped_names(model))  # the forward ran on torch_gemm
    optimizer.step()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert not torch.equal(p.detach(), values_before[name]), f"{name} was not updated"


def test_tied_and_shared_weights_stay_tied():
    model = small_decoder()
    model.lm_head.weight = model.embed_tokens.weight  # tied as in GPT-2 and many small LMs
    shared = nn.Linear(32, 32)
    holder = nn.ModuleDict({"q": shared, "k": shared})  # one module at two places
    swap_linear(model, all_linear=True)
    swap_linear(holder)
    assert model.lm_head.weight is model.embed_tokens.weight
    assert type(holder["q"]) is Linear and holder["q"] is holder["k"]
    ids = torch.randint(0, 64, (2, 8))
    model(ids, labels=ids).loss.backward()
    assert model.embed_tokens.weight.grad is not None


def test_unswap_linear():
    model = small_decoder()
    reference = copy.deepcopy(model)
    params_before = dict(model.named_parameters())
    swap_linear(model, all_linear=True, kernel="blocked")
    assert unswap_linear(model) is model
    assert swapped_names(model) == [] and len(plain_linear_names(model)) == len(plain_linear_names(reference))
    assert all("kernel" not in m.__dict__ for m in model.modules())
    assert all(p is params_before[name] for name, p in model.named_parameters())
    ids = torch.randint(0, 64, (2, 8))
    assert torch.equal(model(ids).logits, reference(ids).logits)


def test_swapped_model_deepcopies():
    model = swap_linear(small_decoder())
    clone = copy.deepcopy(model)
    assert swapped_names(clone) == ATTENTION_NAMES
    assert clone.layers[0].self_attn.q_proj.weight is not model.layers[0].self_attn.q_proj.weight


# ---------------------------------------------------------------------------------------------
# torch.compile and CUDA graphs.


def _attention_and_input(device, fused_qkv=False):
    torch.manual_seed(0)
    block = MultiHeadAttention(64, 4, fused_qkv=fused_qkv, bias=True, device=device)
    swap_linear(block)
    x = torch.randn(2, 16, 64, device=device, requires_grad=True)
    return block, x


@pytest.mark.parametrize("device", device_params())
def test_compile_traces_one_graph_with_the_ops(device):
    """Dynamo captures the swapped block in one graph (fullgraph: a break would raise) holding
    one linear_tiled per projection; run eagerly, the graph gives the block's output and
    gradients. Tracing only, no code generation, so this is quick."""
    torch._dynamo.reset()
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    block, x = _attention_and_input(device)
    compiled = torch.compile(block, backend=record, fullgraph=True)
    out = compiled(x)
    assert len(graphs) == 1
    targets = [str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"]
    assert sum(t.startswith("gemm.linear_tiled") for t in targets) == 4
    expected = block(x)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    (grad_compiled,) = torch.autograd.grad(out.sum(), x)
    (grad_eager,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(grad_compiled, grad_eager, rtol=0, atol=0)


@pytest.mark.parametrize("device", device_params())
def test_compile_inductor_forward_backward(device):
    """The default backend (Inductor) compiles the swapped block with its fake kernels and
    autograd formula in one graph; output and gradients match eager."""
    torch._dynamo.reset()
    block, x = _attention_and_input(device, fused_qkv=True)
    compiled = torch.compile(block, fullgraph=True)
    out = compiled(x)
    out.square().sum().backward()
    grads = {name: p.grad.clone() for name, p in block.named_parameters()}
    x_grad = x.grad.clone()
    block.zero_grad()
    x.grad = None
    expected = block(x)
    expected.square().sum().backward()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_grad, x.grad, rtol=1e-4, atol=1e-5)
    for name, p in block.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


@requires_cuda
def test_compile_reduce_overhead_cuda_graphs():
    """mode="reduce-overhead" records the swapped block in a CUDA graph and replays it on new
    inputs (warm-up, recording, then replays)."""
    torch._dynamo.reset()
    block, _ = _attention_and_input("cuda")
    block.requires_grad_(False)
    compiled = torch.compile(block, mode="reduce-overhead", fullgraph=True)
    for step in range(4):
        x = torch.randn(2, 16, 64, device="cuda")
        out = compiled(x).clone()  # the graph's output buffer is reused by the next replay
        torch.testing.assert_close(out, block(x), rtol=1e-5, atol=1e-5, msg=lambda m, step=step: f"step {step}: {m}")
