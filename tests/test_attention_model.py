"""Attention blocks and whole models with their projections on torch_gemm: the swapped
MultiHeadAttention against the torch one (output and every gradient, float32 and bfloat16),
and small decoders (TinyDecoder; a tiny Hugging Face Llama when transformers is installed)
whose logits and 50-step AdamW loss curves match the unswapped copies."""

from __future__ import annotations

import copy
import re
from typing import Callable

import pytest
import torch
from torch import nn

from gemm_testing import device_params, generator
from model_testing import assert_matches_reference, randomize_, rel_diff, swapped_names
from torch_gemm.attention import DecoderConfig, MultiHeadAttention, TinyDecoder
from torch_gemm.nn import Linear, swap_linear

DTYPES = [pytest.param(torch.float32, id="float32"), pytest.param(torch.bfloat16, id="bfloat16")]
QKV = [pytest.param(False, id="separate_qkv"), pytest.param(True, id="fused_qkv")]

EMBED_DIM, NUM_HEADS, BATCH, TOKENS = 64, 4, 2, 24
VOCAB, SEQ_LEN = 128, 32
TRAIN_STEPS, TRAIN_BATCH, LEARNING_RATE = 50, 8, 1e-3
# Per-step loss agreement of the swapped and unswapped models over the run (float32).
LOSS_REL_TOL = 1e-3


# ---------------------------------------------------------------------------------------------
# The attention block.


def _attention_results(block: nn.Module, x: torch.Tensor, grad: torch.Tensor) -> dict[str, torch.Tensor]:
    """Output, input gradient and every parameter's gradient of one forward/backward."""
    x = x.detach().to(next(block.parameters()).dtype).requires_grad_()
    out = block(x)
    out.backward(grad.to(out.dtype))
    return {"out": out, "x.grad": x.grad, **{f"{name}.grad": p.grad for name, p in block.named_parameters()}}


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fused_qkv", QKV)
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_attention_block_matches_torch(device, dtype, fused_qkv, bias):
    """Swapped (backend="gemm") and torch blocks with the same weights: output and every
    gradient against the float64 block, within the error budget of docs/numerics.md (float32: 1e-4 relative;
    bfloat16: 3x torch's own bfloat16 error on the same inputs)."""
    gen = generator(device, "attention", dtype, fused_qkv, bias)
    kwargs = {"fused_qkv": fused_qkv, "bias": bias, "causal": True, "device": device, "dtype": dtype}
    theirs = MultiHeadAttention(EMBED_DIM, NUM_HEADS, **kwargs)
    randomize_(theirs.parameters(), gen)
    ours = MultiHeadAttention(EMBED_DIM, NUM_HEADS, backend="gemm", **kwargs)
    ours.load_state_dict(theirs.state_dict())
    assert ours.backend == "gemm" and theirs.backend == "torch"
    assert len(swapped_names(ours)) == (2 if fused_qkv else 4)
    reference = copy.deepcopy(theirs).double()

    x = torch.randn(BATCH, TOKENS, EMBED_DIM, device=device, generator=gen).to(dtype)
    grad = torch.randn(BATCH, TOKENS, EMBED_DIM, device=device, generator=gen).to(dtype)
    results = {name: _attention_results(block, x, grad)
               for name, block in (("ours", ours), ("theirs", theirs), ("ref", reference))}
    assert results["ours"].keys() == results["ref"].keys()
    # The key bias's gradient is zero in exact arithmetic (a shift of every key's score by q·b_k
    # is lost in the softmax): measure its rounding against the value bias's gradient instead.
    zero_scale = {}
    if bias and not fused_qkv:
        zero_scale["k_proj.bias.grad"] = results["ref"]["v_proj.bias.grad"].norm().item()
    for what in results["ours"]:
        assert_matches_reference(results["ours"][what], results["theirs"][what], results["ref"][what], what,
                                 scale=zero_scale.get(what, 0.0))


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32], ids=["bool_mask", "additive_mask"])
def test_attention_mask_combines_with_causal(mask_dtype):
    """A padding mask on a causal block acts as the padding mask and the causal mask together."""
    torch.manual_seed(0)
    causal = MultiHeadAttention(EMBED_DIM, NUM_HEADS, causal=True, backend="gemm")
    plain = MultiHeadAttention(EMBED_DIM, NUM_HEADS, causal=False, backend="gemm")
    plain.load_state_dict(causal.state_dict())
    x = torch.randn(BATCH, TOKENS, EMBED_DIM)
    keep = torch.ones(BATCH, 1, 1, TOKENS, dtype=torch.bool)
    keep[0, ..., TOKENS // 2:] = False  # the first sequence is padded after half its length
    both = keep & torch.ones(TOKENS, TOKENS, dtype=torch.bool).tril()

    def as_mask(allowed: torch.Tensor) -> torch.Tensor:
        if mask_dtype == torch.bool:
            return allowed
        return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))

    out = causal(x, attn_mask=as_mask(keep))
    torch.testing.assert_close(out, plain(x, attn_mask=as_mask(both)), rtol=1e-6, atol=1e-6)
    # Rows that may attend somewhere are finite (the padded tail of sequence 0 still sees its head).
    assert torch.isfinite(out).all()


def test_backends_share_parameters_and_state_dict():
    torch.manual_seed(0)
    theirs = MultiHeadAttention(EMBED_DIM, NUM_HEADS, fused_qkv=True)
    ours = MultiHeadAttention(EMBED_DIM, NUM_HEADS, fused_qkv=True, backend="gemm", kernel="blocked")
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["qkv_proj.weight", "o_proj.weight"]
    assert all(type(m) is Linear and m.kernel == "blocked" for m in (ours.qkv_proj, ours.o_proj))
    assert "backend='gemm'" in repr(ours) and "kernel='blocked'" in repr(ours)
    with pytest.raises(ValueError, match="backend must be one of torch, gemm, got 'cuda'"):
        MultiHeadAttention(EMBED_DIM, NUM_HEADS, backend="cuda")
    with pytest.raises(ValueError, match="not a multiple of num_heads"):
        MultiHeadAttention(EMBED_DIM, 5)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: MultiHeadAttention(EMBED_DIM, 0), ValueError, "embed_dim and num_heads must be positive, got 64 and 0"),
        (lambda: MultiHeadAttention(EMBED_DIM, -2), ValueError, "must be positive"),
        (lambda: MultiHeadAttention(0, 4), ValueError, "must be positive"),
        (lambda: MultiHeadAttention(EMBED_DIM, 4, backend="gemm", kernel="nope"), ValueError,
         "MultiHeadAttention: kernel 'nope' is not a kernel of this build"),
        (lambda: MultiHeadAttention(EMBED_DIM, 4, kernel="nope"), ValueError,
         "MultiHeadAttention: kernel 'nope'"),
    ],
    ids=["no_heads", "negative_heads", "no_width", "bad_kernel", "bad_kernel_torch_backend"],
)
def test_attention_block_bad_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize("shape", [(7, EMBED_DIM), (1, 2, 7, EMBED_DIM)])
def test_attention_block_names_the_input_it_takes(shape):
    block = MultiHeadAttention(EMBED_DIM, NUM_HEADS)
    with pytest.raises(ValueError, match=r"x must be \(batch, tokens, width\), got " + re.escape(str(shape))):
        block(torch.randn(shape))


def test_float64_decoder_keeps_float64_loss():
    config = DecoderConfig(vocab_size=32, hidden_size=16, num_heads=4, max_seq_len=8, num_layers=1,
                           intermediate_size=24)
    model = TinyDecoder(config, dtype=torch.float64)
    ids = torch.randint(0, 32, (2, 8))
    out = model(ids, ids)
    assert out.logits.dtype == out.loss.dtype == torch.float64
    bf16 = TinyDecoder(config, dtype=torch.bfloat16)(ids, ids)
    assert bf16.logits.dtype == torch.bfloat16 and bf16.loss.dtype == torch.float32


# ---------------------------------------------------------------------------------------------
# Whole models: TinyDecoder, and Hugging Face's Llama when transformers is installed.


def _tiny_decoder(fused_qkv: bool) -> nn.Module:
    config = DecoderConfig(vocab_size=VOCAB, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                           max_seq_len=SEQ_LEN, fused_qkv=fused_qkv)
    return TinyDecoder(config)


def _llama() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention: k_proj and v_proj are 64 -> 32
        max_position_embeddings=SEQ_LEN,
    )
    return transformers.LlamaForCausalLM(config)


# name -> (builder, attention projections per layer)
MODELS: dict[str, tuple[Callable[[], nn.Module], int]] = {
    "tiny_decoder": (lambda: _tiny_decoder(fused_qkv=False), 4),
    "tiny_decoder_fused_qkv": (lambda: _tiny_decoder(fused_qkv=True), 2),
    "llama": (_llama, 4),
}


def _models(kind: str, device: str, seed: int) -> tuple[nn.Module, nn.Module]:
    """(swapped, unswapped) copies of one freshly initialized float32 model."""
    build, per_layer = MODELS[kind]
    torch.manual_seed(seed)
    theirs = build().to(device)
    ours = swap_linear(copy.deepcopy(theirs))
    assert len(swapped_names(ours)) == 2 * per_layer  # two layers, attention projections only
    assert all(name.split(".")[-1] in ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj")
               for name in swapped_names(ours))
    return ours, theirs


def _markov_batches(device: str, gen: torch.Generator, count: int) -> list[torch.Tensor]:
    """Token sequences from a fixed random chain in which each token has two likely successors:
    structure a small model learns within a few dozen steps, so the loss curve goes down."""
    successors = torch.randint(0, VOCAB, (VOCAB, 2), generator=gen)
    batches = []
    for _ in range(count):
        tokens = torch.empty(TRAIN_BATCH, SEQ_LEN, dtype=torch.long)
        tokens[:, 0] = torch.randint(0, VOCAB, (TRAIN_BATCH,), generator=gen)
        for t in range(1, SEQ_LEN):
            pick = torch.randint(0, 2, (TRAIN_BATCH,), generator=gen)
            tokens[:, t] = successors[tokens[:, t - 1], pick]
        batches.append(tokens.to(device))
    return batches


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("kind", list(MODELS))
def test_swapped_model_logits_match(device, kind):
    ours, theirs = _models(kind, device, seed=0)
    ids = torch.randint(0, VOCAB, (2, SEQ_LEN), generator=generator("cpu", "logits", kind)).to(device)
    with torch.no_grad():
        ours_logits, theirs_logits = ours(ids).logits, theirs(ids).logits
    assert ours_logits.shape == (2, SEQ_LEN, VOCAB)
    torch.testing.assert_close(ours_logits, theirs_logits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("kind", list(MODELS))
def test_training_loss_curve_matches(device, kind):
    """50 AdamW steps on the same batches: every step's loss of the swapped model within 1e-3
    (relative) of the unswapped model's, and the loss goes down."""
    ours, theirs = _models(kind, device, seed=1)
    batches = _markov_batches(device, generator("cpu", "train", kind), count=10)
    curves = {}
    for name, model in (("ours", ours), ("theirs", theirs)):
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
        curve = []
        for step in range(TRAIN_STEPS):
            ids = batches[step % len(batches)]
            loss = model(ids, labels=ids).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            curve.append(loss.item())
        curves[name] = curve
    worst = max(range(TRAIN_STEPS), key=lambda s: rel_diff(curves["ours"][s], curves["theirs"][s]))
    assert rel_diff(curves["ours"][worst], curves["theirs"][worst]) <= LOSS_REL_TOL, (
        f"step {worst}: loss {curves['ours'][worst]:.6f} (swapped) vs {curves['theirs'][worst]:.6f} (torch)"
    )
    first, last = sum(curves["ours"][:5]) / 5, sum(curves["ours"][-5:]) / 5
    assert last < 0.9 * first, f"loss did not go down: {first:.4f} -> {last:.4f} (mean of the first/last 5 steps)"
