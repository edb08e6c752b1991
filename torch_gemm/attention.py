"""A reference attention block and a tiny decoder built from plain ``nn.Linear`` projections, for
the tests and the attention benchmark: run them as they are ("torch"), or with their projections
swapped onto torch_gemm's kernels by :func:`torch_gemm.nn.swap_linear` ("gemm"), and compare.

    attn = MultiHeadAttention(4096, 32, backend="gemm")      # q/k/v/o on linear_tiled
    model = TinyDecoder(DecoderConfig(vocab_size=256, hidden_size=64))
    swap_linear(model)                                       # its attention projections only
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

from torch_gemm.nn import Linear, _checked_kernel, swap_linear

__all__ = [
    "BACKENDS",
    "DecoderConfig",
    "DecoderLayer",
    "DecoderOutput",
    "MultiHeadAttention",
    "SwiGLU",
    "TinyDecoder",
    "make_norm",
]

BACKENDS = ("torch", "gemm")


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention: projections ``q_proj``, ``k_proj``, ``v_proj`` (or one
    ``qkv_proj`` with ``fused_qkv``) and ``o_proj``, all ``nn.Linear``, around
    ``F.scaled_dot_product_attention``.

    Args:
        embed_dim: model width C; a multiple of ``num_heads``.
        num_heads: heads H, each of width C / H.
        fused_qkv: one (C → 3C) projection instead of three (C → C).
        bias: biases on all projections.
        causal: each position attends to itself and earlier positions only.
        dropout: attention-probability dropout, in training mode only.
        backend: ``"torch"`` (``nn.Linear``) or ``"gemm"`` (the projections swapped by
            ``swap_linear`` onto ``torch_gemm.linear_tiled``); parameters and state dict are the
            same either way.
        kernel: the ``kernel=`` of the swapped projections (``backend="gemm"``).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        fused_qkv: bool = False,
        bias: bool = False,
        causal: bool = True,
        dropout: float = 0.0,
        backend: str = "torch",
        kernel: str = "auto",
        device: Optional[torch.device | str] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        if num_heads <= 0 or embed_dim <= 0:
            raise ValueError(
                f"MultiHeadAttention: embed_dim and num_heads must be positive, got {embed_dim} and {num_heads}"
            )
        if embed_dim % num_heads != 0:
            raise ValueError(f"MultiHeadAttention: embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
        if backend not in BACKENDS:
            raise ValueError(f"MultiHeadAttention: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        kernel = _checked_kernel("MultiHeadAttention", kernel)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.fused_qkv, self.causal, self.dropout = fused_qkv, causal, dropout
        factory = {"device": device, "dtype": dtype}
        if fused_qkv:
            self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim, bias=bias, **factory)
        else:
            self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
            self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
            self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.o_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        if backend == "gemm":
            swap_linear(self, kernel=kernel, all_linear=True)

    @property
    def backend(self) -> str:
        """``"gemm"`` when the output projection runs on torch_gemm, else ``"torch"``."""
        return "gemm" if isinstance(self.o_proj, Linear) else "torch"

    def forward(self, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``x``: (B, T, C). ``attn_mask``: optional, broadcastable to (B, H, T, T); boolean
        (True = may attend) or additive float, as for ``scaled_dot_product_attention``. With
        ``causal`` it is combined with the causal mask. Returns (B, T, C)."""
        # Only the rank is checked: under tensor parallelism x keeps the full width while
        # embed_dim and num_heads are set to a rank's share of the heads.
        if x.dim() != 3:
            raise ValueError(f"MultiHeadAttention: x must be (batch, tokens, width), got {tuple(x.shape)}")
        batch, tokens, _ = x.shape
        if self.fused_qkv:
            q, k, v = self.qkv_proj(x).split(self.embed_dim, dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        # (B, T, C) -> (B, H, T, D): views, no copies; SDPA takes the strides as they are.
        q, k, v = (t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2) for t in (q, k, v))
        is_causal = self.causal and attn_mask is None
        if attn_mask is not None and self.causal:
            # SDPA takes either is_causal or a mask, not both: fold the causal rule into the mask.
            allowed = torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).tril()
            if attn_mask.dtype == torch.bool:
                attn_mask = attn_mask & allowed
            else:
                attn_mask = attn_mask.masked_fill(~allowed, float("-inf"))
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal
        )
        return self.o_proj(out.transpose(1, 2).reshape(batch, tokens, self.embed_dim))

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, fused_qkv={self.fused_qkv}, "
                f"causal={self.causal}, backend={self.backend!r}")


# ---------------------------------------------------------------------------------------------
# A tiny decoder: pre-norm layers of attention and a SwiGLU MLP, Llama's layout with learned
# positions instead of rotary ones.


@dataclass
class DecoderConfig:
    """Sizes of a :class:`TinyDecoder`; the defaults make a model of 0.14 M parameters."""

    vocab_size: int = 256
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 172
    max_seq_len: int = 128
    norm_eps: float = 1e-5
    fused_qkv: bool = False
    bias: bool = False


def make_norm(dim: int, eps: float, *, device=None, dtype=None) -> nn.Module:
    """``nn.RMSNorm`` (torch ≥ 2.4), else ``nn.LayerNorm`` without bias."""
    rms_norm = getattr(nn, "RMSNorm", None)
    if rms_norm is not None:
        return rms_norm(dim, eps=eps, device=device, dtype=dtype)
    return nn.LayerNorm(dim, eps=eps, bias=False, device=device, dtype=dtype)


class SwiGLU(nn.Module):
    """Llama's MLP: ``down_proj(silu(gate_proj(x)) * up_proj(x))``."""

    def __init__(
        self, hidden_size: int, intermediate_size: int, *, bias: bool = False, device=None, dtype=None
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias, **factory)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias, **factory)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias, **factory)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """``x + self_attn(attn_norm(x))``, then ``x + mlp(mlp_norm(x))``; causal attention."""

    def __init__(self, config: DecoderConfig, *, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.attn_norm = make_norm(config.hidden_size, config.norm_eps, **factory)
        self.self_attn = MultiHeadAttention(config.hidden_size, config.num_heads, fused_qkv=config.fused_qkv,
                                            bias=config.bias, causal=True, **factory)
        self.mlp_norm = make_norm(config.hidden_size, config.norm_eps, **factory)
        self.mlp = SwiGLU(config.hidden_size, config.intermediate_size, bias=config.bias, **factory)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class DecoderOutput(NamedTuple):
    """What :class:`TinyDecoder` returns; the fields are named as in Hugging Face's
    ``CausalLMOutput``, so code can drive either model the same way."""

    logits: torch.Tensor
    loss: Optional[torch.Tensor] = None


class TinyDecoder(nn.Module):
    """Token and learned position embeddings, ``num_layers`` :class:`DecoderLayer`, a final norm
    and an ``lm_head`` (``nn.Linear``, no bias). Initialized as GPT-2/Llama are (normal, std
    0.02; biases zero), from torch's global generator: ``torch.manual_seed(s)`` before
    construction gives the same model every time."""

    init_std = 0.02

    def __init__(self, config: DecoderConfig, *, device=None, dtype=None) -> None:
        super().__init__()
        self.config = config
        factory = {"device": device, "dtype": dtype}
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, **factory)
        self.embed_positions = nn.Embedding(config.max_seq_len, config.hidden_size, **factory)
        self.layers = nn.ModuleList(DecoderLayer(config, **factory) for _ in range(config.num_layers))
        self.norm = make_norm(config.hidden_size, config.norm_eps, **factory)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False, **factory)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=self.init_std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, labels: Optional[torch.Tensor] = None) -> DecoderOutput:
        """``input_ids``: (B, T) token ids, T ≤ ``max_seq_len``. ``labels``: optional (B, T) ids
        whose loss is the mean cross entropy of predicting ``labels[:, t + 1]`` from the logits
        at t (shifted inside, as in Hugging Face's causal LMs; label -100 is ignored). Returns
        :class:`DecoderOutput` with logits (B, T, vocab_size) and the loss (None without labels)."""
        tokens = input_ids.shape[1]
        if tokens > self.config.max_seq_len:
            raise ValueError(f"TinyDecoder: {tokens} tokens exceed max_seq_len {self.config.max_seq_len}")
        positions = torch.arange(tokens, device=input_ids.device)
        x = self.embed_tokens(input_ids) + self.embed_positions(positions)
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.norm(x))
        loss = None
        if labels is not None:
            # 16-bit logits are summed in float32; float32 and float64 ones as they are.
            wide = logits.to(torch.promote_types(logits.dtype, torch.float32))
            loss = F.cross_entropy(wide[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
        return DecoderOutput(logits, loss)
