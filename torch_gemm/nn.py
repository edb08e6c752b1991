"""Drop-in modules: ``torch_gemm.nn.Linear`` and :func:`swap_linear`, which puts it in place of a
model's ``nn.Linear`` projections without copying a parameter.

    model = AutoModelForCausalLM.from_pretrained(...)
    torch_gemm.swap_linear(model)                  # attention projections (q/k/v/o) by default
    torch_gemm.swap_linear(model, all_linear=True) # every nn.Linear
    torch_gemm.unswap_linear(model)                # back to nn.Linear, for comparisons

Swapping changes the class of each chosen module in place. The module object, its Parameter
objects, its hooks and any other attributes stay as they were, so optimizer state, tied weights
(an ``lm_head`` sharing the embedding's weight), ``state_dict`` keys and references held
elsewhere keep working, and nothing is allocated.
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Callable, Optional, TypeVar

import torch

from torch_gemm import ops

__all__ = [
    "ATTENTION_PROJECTION_NAMES",
    "Linear",
    "is_attention_projection",
    "swap_linear",
    "unswap_linear",
]

logger = logging.getLogger(__name__)

ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)
FilterFn = Callable[[str, torch.nn.Module], bool]


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` computed by ``torch_gemm.linear_tiled``: ``y = x @ weight.T + bias``
    with the bias added in the kernel's epilogue and the backward through the same kernels.

    Same constructor, parameters and ``state_dict`` keys as ``nn.Linear`` (a state dict of one
    loads into the other), plus ``kernel``: the ``kernel=`` argument passed to every call
    (``"auto"``, or a name from ``torch_gemm.available_kernels()``), checked against this
    build's kernels at construction. It is a plain attribute and may be changed at any time.
    """

    kernel: str = "auto"

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Optional[torch.device | str] = None,
        dtype: Optional[torch.dtype] = None,
        *,
        kernel: str = "auto",
    ) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.kernel = _checked_kernel("torch_gemm.nn.Linear", kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.linear_tiled(x, self.weight, self.bias, kernel=self.kernel)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, kernel={self.kernel!r}"

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, kernel: str = "auto") -> "Linear":
        """A new ``Linear`` whose ``weight`` and ``bias`` are the very Parameter objects of
        ``linear`` (no copy: same storage, device, dtype and ``requires_grad``; an optimizer
        holding them updates both modules). ``linear`` itself is left unchanged, and its hooks
        are not carried over; :func:`swap_linear` converts modules in place instead, keeping
        hooks and identity."""
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"Linear.from_linear: expected a torch.nn.Linear, got {type(linear).__name__}")
        if torch.nn.utils.parametrize.is_parametrized(linear):
            raise TypeError(
                "Linear.from_linear: linear is parametrized (torch.nn.utils.parametrize, e.g. weight_norm): "
                "its weight is computed at each call, not a Parameter to share; remove the "
                "parametrization first (parametrize.remove_parametrizations)"
            )
        # Built on the meta device: the initialization nn.Linear runs allocates and costs nothing
        # there, and the placeholders are replaced right away.
        new = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta",
                  kernel=kernel)
        new.weight = linear.weight
        if linear.bias is not None:
            new.bias = linear.bias
        new.train(linear.training)
        return new


# ---------------------------------------------------------------------------------------------
# Which modules are attention projections.

# Attribute names of attention projections in common model code (compared case-insensitively):
#   Llama, Mistral, Qwen, Gemma, Phi-3, OPT, BART: q_proj, k_proj, v_proj, o_proj / out_proj
#     (Phi-3 fuses them into qkv_proj);
#   BERT, RoBERTa, ViT: attention.self.{query,key,value} (the output is handled by name below);
#   T5: q, k, v, o; Meta's reference Llama: wq, wk, wv, wo; MPT: Wqkv, out_proj;
#   GPT-NeoX, Falcon, BLOOM: query_key_value; this package's MultiHeadAttention: qkv_proj, o_proj;
#   GPT-2's c_attn is listed, but GPT-2 builds it (and c_proj) as transformers' Conv1D, which is
#     not an nn.Linear, so nothing in GPT-2 is swapped.
ATTENTION_PROJECTION_NAMES = frozenset(
    name.lower()
    for name in (
        "q_proj", "k_proj", "v_proj", "o_proj", "out_proj", "qkv_proj", "qkv", "c_attn",
        "query", "key", "value", "query_key_value", "q", "k", "v", "o",
        "wq", "wk", "wv", "wo", "Wqkv", "in_proj",
    )
)

# Names that other blocks use too, which count only inside an attention module (a parent whose
# name holds "attn" or "attention", or none: a block passed by itself): T5's MLP output is
# ``DenseReluDense.wo`` (its attention's ``SelfAttention.o``), Mamba's mixer has ``in_proj`` and
# ``out_proj``.
AMBIGUOUS_PROJECTION_NAMES = frozenset(("wo", "in_proj", "out_proj"))


def _in_attention(parent: str) -> bool:
    return "attn" in parent or "attention" in parent


def is_attention_projection(name: str, module: torch.nn.Module) -> bool:
    """swap_linear's default filter: True for the qualified module name of an attention
    projection. The last name component is looked up in :data:`ATTENTION_PROJECTION_NAMES`
    (``wo``, ``in_proj`` and ``out_proj`` only under an attention module, whose name holds
    ``attn`` or ``attention``, or at the top: T5's ``DenseReluDense.wo`` and Mamba's
    ``mixer.out_proj`` are not attention); a ``dense`` layer counts when its parent is an
    attention module (GPT-NeoX's ``attention.dense``, Falcon's ``self_attention.dense``, Phi's
    ``self_attn.dense``) or BERT's ``attention.output`` (``…attention.output.dense``; the MLP's
    ``output.dense`` beside it does not count)."""
    parts = name.lower().split(".")
    parent = parts[-2] if len(parts) >= 2 else ""
    if parts[-1] in AMBIGUOUS_PROJECTION_NAMES:
        return len(parts) == 1 or _in_attention(parent)
    if parts[-1] in ATTENTION_PROJECTION_NAMES:
        return True
    if parts[-1] == "dense" and len(parts) >= 2:
        grandparent = parts[-3] if len(parts) >= 3 else ""
        return _in_attention(parent) or (parent == "output" and "attention" in grandparent)
    return False


# ---------------------------------------------------------------------------------------------
# Swapping.


def _checked_kernel(fn: str, kernel: object) -> str:
    """kernel itself, if it is "auto" or a kernel this build compiled (for any device and dtype:
    the module may move later); a bad name fails here rather than at the first forward."""
    if not isinstance(kernel, str):
        raise TypeError(f"{fn}: kernel must be a str such as 'auto', got {type(kernel).__name__}")
    known = ["auto"] + sorted({row["name"] for row in ops.kernel_table()})
    if ops._ALIASES.get(kernel, kernel) not in known:
        raise ValueError(
            f"{fn}: kernel {kernel!r} is not a kernel of this build; known: {', '.join(known)} "
            "(torch_gemm.available_kernels(device, dtype) lists those for a device and dtype)"
        )
    return kernel


def _check_module(fn: str, model: object) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{fn}: model must be a torch.nn.Module, got {type(model).__name__}")


def _under_fully_shard(module: torch.nn.Module) -> Optional[type]:
    """The class FSDP2's fully_shard wrapped, where ``module`` is an ``nn.Linear`` or a
    ``torch_gemm.nn.Linear`` that fully_shard was applied to by itself (it turns the class into a
    subclass, ``FSDPLinear``, of FSDPModule and the module's class); else None."""
    fsdp = sys.modules.get("torch.distributed.fsdp")  # not loaded: nothing can be wrapped
    fsdp_module = getattr(fsdp, "FSDPModule", None)
    if fsdp_module is None or not isinstance(module, fsdp_module):
        return None
    base = type(module).__bases__[-1]
    return base if base in (torch.nn.Linear, Linear) else None


def swap_linear(
    model: ModuleT,
    filter_fn: Optional[FilterFn] = None,
    kernel: str = "auto",
    *,
    all_linear: bool = False,
) -> ModuleT:
    """Make ``nn.Linear`` submodules of ``model`` run on torch_gemm's kernels, in place.

    Args:
        model: any ``nn.Module``; it may itself be an ``nn.Linear`` (qualified name ``""``).
        filter_fn: ``filter_fn(name, module) -> bool`` picks the modules to swap, given the
            qualified name from ``model.named_modules()`` (``"model.layers.0.self_attn.q_proj"``).
            It is called only for candidates: modules whose type is exactly ``nn.Linear`` or
            already ``torch_gemm.nn.Linear`` (either also where ``fully_shard`` wrapped it by
            itself). Default: :func:`is_attention_projection`.
        kernel: the ``kernel=`` the swapped modules pass to ``linear_tiled``.
        all_linear: swap every candidate (instead of giving ``filter_fn``).

    Returns:
        ``model`` itself. The swapped modules' names are logged (logger ``torch_gemm.nn``, level
        INFO); a call that swaps nothing warns, naming the ``nn.Linear`` modules it passed over.

    Each chosen module's class becomes ``torch_gemm.nn.Linear``: the module object, its
    Parameters, hooks and attributes are kept, so optimizers built before the swap, tied weights
    and ``state_dict`` keys are unaffected. A chosen module that already is a
    ``torch_gemm.nn.Linear`` just takes the new ``kernel``. Subclasses of ``nn.Linear`` (quantized,
    LoRA or parametrized layers, ``nn.MultiheadAttention.out_proj``) are skipped: their forward
    may differ from ``x @ weight.T + bias``. A module shared at several places is seen once and
    swapped once.

    Tensor parallelism (``parallelize_module``) may come before or after: it keeps the class and
    makes the Parameters DTensors, which the ops take. FSDP2's ``fully_shard`` on a block or model
    leaves the ``nn.Linear`` modules inside as they are; an ``nn.Linear`` that ``fully_shard``
    wrapped by itself has another class and is not swapped (a warning names it): swap first.
    """
    _check_module("swap_linear", model)
    kernel = _checked_kernel("swap_linear", kernel)
    if all_linear and filter_fn is not None:
        raise ValueError("swap_linear: give filter_fn or all_linear=True, not both")
    if filter_fn is not None and not callable(filter_fn):
        raise TypeError(
            f"swap_linear: filter_fn must be callable as filter_fn(name, module), got {type(filter_fn).__name__}"
        )
    chosen = (lambda name, module: True) if all_linear else (filter_fn or is_attention_projection)
    swapped, passed_over, fully_sharded = [], [], []
    for name, module in model.named_modules():
        wrapped = _under_fully_shard(module)
        if type(module) not in (torch.nn.Linear, Linear) and wrapped is None:
            continue
        if not chosen(name, module):
            passed_over.append(name)
            continue
        if wrapped is torch.nn.Linear:
            fully_sharded.append(name or "<the model itself>")
            continue
        if type(module) is torch.nn.Linear:
            module.__class__ = Linear
        module.kernel = kernel
        swapped.append(name)
    if fully_sharded:
        warnings.warn(
            f"swap_linear: {len(fully_sharded)} nn.Linear module(s) that FSDP2's fully_shard wrapped by "
            f"themselves were not swapped ({', '.join(fully_sharded[:8])}{', ...' if len(fully_sharded) > 8 else ''}): "
            "call swap_linear before fully_shard",
            UserWarning,
            stacklevel=2,
        )
    if swapped:
        logger.info("swap_linear: %d module(s) on torch_gemm (kernel=%r): %s", len(swapped), kernel,
                    ", ".join(name or "<the model itself>" for name in swapped))
    elif not fully_sharded:
        names = [name or "<the model itself>" for name in passed_over]
        seen = (f"the filter chose none of its {len(names)} nn.Linear modules ({', '.join(names[:8])}"
                + (", ...)" if len(names) > 8 else ")")) if names else "the model has no nn.Linear module"
        warnings.warn(
            f"swap_linear: no module was swapped: {seen}. The default filter takes attention "
            "projections by name (torch_gemm.nn.ATTENTION_PROJECTION_NAMES); pass filter_fn or "
            "all_linear=True to choose others (subclasses of nn.Linear are never swapped)",
            UserWarning,
            stacklevel=2,
        )
    return model


def unswap_linear(model: ModuleT) -> ModuleT:
    """Undo :func:`swap_linear`: every ``torch_gemm.nn.Linear`` in ``model`` (``model`` included)
    becomes an ``nn.Linear`` again, in place, with the same Parameters. Returns ``model``."""
    _check_module("unswap_linear", model)
    for _, module in model.named_modules():
        if type(module) is Linear:
            module.__class__ = torch.nn.Linear
            module.__dict__.pop("kernel", None)
    return model
