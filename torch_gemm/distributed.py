"""The gemm ops on DTensors: sharding strategies that let tensor parallelism (parallelize_module)
and FSDP2 (fully_shard) run torch_gemm's projections, and the tensor-parallel plans of this
package's reference attention block and decoder.

DTensor asks each op how its inputs may be sharded and what the output then is; without an answer
it raises "Operator gemm.linear_tiled.default does not have a sharding strategy registered". The
strategies are those torch gives aten.mm, aten.bmm and aten.linear, per mesh dimension: everything
replicated; the rows (M, or any leading dimension of linear's x) sharded; the columns (N, the
weight's rows) sharded; the reduction (K) sharded on both operands with a Partial (pending sum)
output; and one operand Partial with the other replicated, as a product is linear in each operand.
DTensor expands them over every mesh dimension and redistributes inputs that fit none; the local
call is the op itself on each rank's shards. The backwards call the same ops on DTensor gradients
(csrc/ops/autograd.cpp), so training needs nothing more.

They are registered when ``torch.distributed.tensor`` is imported, before or after torch_gemm:
importing it costs about a third of a second, which a single-device user should not pay at
``import torch_gemm``. Where torch has no torch.distributed nothing is registered and nothing fails.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
import warnings
from typing import Optional

import torch

__all__ = [
    "exit_rank",
    "optimizer_param_groups",
    "rank_device",
    "parallelize_attention",
    "parallelize_decoder",
    "register_sharding_strategies",
    "sharding_strategies_registered",
]

_DTENSOR_MODULE = "torch.distributed.tensor"
# Reentrant: register_sharding_strategies imports torch.distributed.tensor, whose import may run
# the hook below, which calls register_sharding_strategies again on the same thread.
_lock = threading.RLock()
_registered = False


# ---------------------------------------------------------------------------------------------
# The strategies. Each function receives the op's arguments with every DTensor replaced by its
# DTensorSpec (shape and placements) and returns (output placements, input placements) pairs for
# one mesh dimension, with None for arguments that are not tensors (kernel, a bias of None).


def _placements():
    from torch.distributed.tensor import Partial, Replicate, Shard

    return Partial, Replicate, Shard


# Partial reductions a product passes through unchanged: (sum_r A_r)·B = sum_r (A_r·B), and the
# same for the mean.
_LINEAR_REDUCE_OPS = ("sum", "avg")


def _mm_shardings(a, b, kernel="auto"):
    """mm_tiled: (M, K)·(K, N)."""
    return _product_shardings(batch=False)


def _bmm_shardings(a, b, kernel="auto"):
    """bmm_tiled: (B, M, K)·(B, K, N), the batch sharded too."""
    return _product_shardings(batch=True)


def _product_shardings(*, batch: bool):
    Partial, Replicate, Shard = _placements()
    r = 1 if batch else 0  # a's row dimension; a is (B?, M, K), b (B?, K, N), the output (B?, M, N)
    strategies = [
        ([Replicate()], [Replicate(), Replicate(), None]),
        ([Shard(r)], [Shard(r), Replicate(), None]),                      # M
        ([Shard(r + 1)], [Replicate(), Shard(r + 1), None]),              # N
        ([Partial()], [Shard(r + 1), Shard(r), None]),                    # K: partial sums
    ]
    if batch:
        strategies.append(([Shard(0)], [Shard(0), Shard(0), None]))
    for op in _LINEAR_REDUCE_OPS:
        strategies.append(([Partial(op)], [Partial(op), Replicate(), None]))
        strategies.append(([Partial(op)], [Replicate(), Partial(op), None]))
    return strategies


def _row_sum_shardings(a, b, kernel="auto"):
    """mm_tiled_row_sum: (a·b, a.sum(1)); the row sums follow a's rows and, like the product, are
    partial where K is sharded."""
    Partial, Replicate, Shard = _placements()
    strategies = [
        ([Replicate(), Replicate()], [Replicate(), Replicate(), None]),
        ([Shard(0), Shard(0)], [Shard(0), Replicate(), None]),            # M
        ([Shard(1), Replicate()], [Replicate(), Shard(1), None]),         # N: every rank sums all of a
        ([Partial(), Partial()], [Shard(1), Shard(0), None]),             # K
    ]
    for op in _LINEAR_REDUCE_OPS:
        strategies.append(([Partial(op), Partial(op)], [Partial(op), Replicate(), None]))
        strategies.append(([Partial(op), Replicate()], [Replicate(), Partial(op), None]))
    return strategies


def _linear_shardings(x, weight, bias=None, kernel="auto"):
    """linear_tiled: x (..., K) · weight (N, K)ᵀ + bias (N). Where the output is Partial the bias
    is too: DTensor splits a replicated bias among the ranks, so that it is added once in the sum
    (as torch does for aten.addmm)."""
    Partial, Replicate, Shard = _placements()
    last = x.ndim - 1
    has_bias = bias is not None

    def strategy(out, x_p, w_p, b_p):
        return [out], [x_p, w_p, b_p if has_bias else None, None]

    strategies = [strategy(Replicate(), Replicate(), Replicate(), Replicate())]
    strategies += [strategy(Shard(d), Shard(d), Replicate(), Replicate()) for d in range(last)]  # rows
    strategies.append(strategy(Shard(last), Replicate(), Shard(0), Shard(0)))                 # N: columnwise
    strategies.append(strategy(Partial(), Shard(last), Shard(1), Partial()))                  # K: rowwise
    for op in _LINEAR_REDUCE_OPS:
        strategies.append(strategy(Partial(op), Partial(op), Replicate(), Partial(op)))
        strategies.append(strategy(Partial(op), Replicate(), Partial(op), Partial(op)))
    return strategies


def _weight_grad_shardings(grad, x, bias, kernel="auto"):
    """linear_tiled_weight_grad: (dW, db) = (Σ_r grad[r]ᵀ⊗x[r], Σ_r grad[r]) over the rows of grad
    (..., N) and x (..., K), the leading dimensions flattened inside the op. Rows sharded alike
    along any leading dimension (data or sequence parallelism) give each rank its rows' share of
    both sums, Partial; x's columns sharded give dW's columns; grad's columns give dW's rows and
    db. Without ``bias`` db is an empty tensor, Replicate in every strategy."""
    Partial, Replicate, Shard = _placements()
    last = grad.ndim - 1

    def strategy(dw, db, grad_p, x_p):
        return [dw, db if bias else Replicate()], [grad_p, x_p, None, None]

    strategies = [strategy(Replicate(), Replicate(), Replicate(), Replicate())]
    strategies += [strategy(Partial(), Partial(), Shard(d), Shard(d)) for d in range(last)]  # rows
    strategies.append(strategy(Shard(1), Replicate(), Replicate(), Shard(last)))             # x's columns (K)
    strategies.append(strategy(Shard(0), Shard(0), Shard(last), Replicate()))                # grad's columns (N)
    for op in _LINEAR_REDUCE_OPS:
        strategies.append(strategy(Partial(op), Partial(op), Partial(op), Replicate()))
        strategies.append(strategy(Partial(op), Replicate(), Replicate(), Partial(op)))      # db needs no x
    return strategies


def register_sharding_strategies() -> bool:
    """Register the gemm ops' sharding strategies with DTensor (once; later calls do nothing).
    Done by itself when ``torch.distributed.tensor`` is imported; call it only where an import
    hook cannot run. Returns whether the strategies are registered: False where torch was built
    without torch.distributed."""
    global _registered
    if not torch.distributed.is_available():
        return False
    with _lock:
        if _registered:
            return True
        from torch.distributed.tensor.experimental import register_sharding

        if _registered:  # the import ran the hook, which registered them
            return True
        gemm = torch.ops.gemm
        for op, shardings in ((gemm.mm_tiled.default, _mm_shardings), (gemm.bmm_tiled.default, _bmm_shardings),
                              (gemm.linear_tiled.default, _linear_shardings),
                              (gemm.mm_tiled_row_sum.default, _row_sum_shardings),
                              (gemm.linear_tiled_weight_grad.default, _weight_grad_shardings)):
            register_sharding(op)(shardings)
            _key_sharding_cache_by_options(op)
        _registered = True
    return True


def _key_sharding_cache_by_options(op: torch._ops.OpOverload) -> None:
    """DTensor caches an op's sharding decision under its tensors' specs and the arguments from
    ``static_argnum`` on, which register_sharding sets at the first int argument: ``kernel`` (a
    str) and linear_tiled_weight_grad's ``bias`` (a bool) would be left out. For ``bias`` the
    cached decision would place db as the first call's was placed; for ``kernel``, where the
    decision redistributes the inputs, torch versions before use_val_from_redistribute_schema
    took the non-tensor arguments of the local call from the cached decision, i.e. a later call
    with another kernel would run the first one's. Keying the cache by every argument from the
    first non-tensor one on (one entry per kernel name and bias) closes both on every version."""
    try:
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._op_schema import RuntimeSchemaInfo

        infos = DTensor._op_dispatcher.sharding_propagator.op_to_schema_info
    except (ImportError, AttributeError):  # a torch whose DTensor internals moved: nothing to key
        return
    arguments = op._schema.arguments
    first = next(i for i, arg in enumerate(arguments) if not _is_tensor_type(arg.type))
    try:
        infos[op] = RuntimeSchemaInfo(first, [arg.name for arg in arguments[first:]], needs_pytree=True)
    except TypeError:  # a RuntimeSchemaInfo of other fields: the cache stays as DTensor keys it
        return


def _is_tensor_type(arg_type) -> bool:
    """Tensor or Tensor? (linear_tiled's bias): DTensor keys its cache by tensors' specs anyway."""
    if isinstance(arg_type, torch.OptionalType):
        arg_type = arg_type.getElementType()
    return isinstance(arg_type, torch.TensorType)


def sharding_strategies_registered() -> bool:
    """Whether DTensor knows the gemm ops' strategies in this process."""
    return _registered


# ---------------------------------------------------------------------------------------------
# Registration on import of torch.distributed.tensor. A finder ahead of the others on sys.meta_path
# sees that one module's import, lets the usual finder locate it, and wraps its loader so that the
# strategies are registered as soon as the module has run (DTensors, hence calls that need the
# strategies, cannot exist before). It removes itself at the first match.


class _RegisterAfterLoad(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _register_or_warn()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _DTensorImportHook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _DTENSOR_MODULE:
            return None
        _remove_import_hook()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _RegisterAfterLoad(spec.loader)
        return spec


_hook: Optional[_DTensorImportHook] = None


def _remove_import_hook() -> None:
    global _hook
    with _lock:
        if _hook is not None and _hook in sys.meta_path:
            sys.meta_path.remove(_hook)
        _hook = None


def _register_or_warn() -> None:
    # Neither the user's import of torch.distributed.tensor nor import torch_gemm may fail for a
    # torch whose DTensor API differs from the ones tested: DTensor arguments then fail instead.
    try:
        register_sharding_strategies()
    except Exception as error:
        warnings.warn(
            f"torch_gemm: the gemm ops' DTensor sharding strategies could not be registered "
            f"({type(error).__name__}: {error}); DTensor arguments to the gemm ops will fail",
            RuntimeWarning,
            stacklevel=3,
        )


def _register_on_dtensor_import() -> None:
    """Called at ``import torch_gemm``: register now if torch.distributed.tensor is loaded, else
    when it is."""
    global _hook
    if not torch.distributed.is_available():
        return
    if _DTENSOR_MODULE in sys.modules:
        _register_or_warn()
        return
    with _lock:
        if _hook is None:
            _hook = _DTensorImportHook()
            sys.meta_path.insert(0, _hook)


# ---------------------------------------------------------------------------------------------
# Tensor-parallel plans for torch_gemm.attention's MultiHeadAttention and TinyDecoder, as torch's
# tensor-parallel tutorial writes them for Llama: q/k/v and the MLP's gate/up columnwise (each rank
# a slice of the heads and of the MLP's width, no communication), o and down rowwise (one
# all-reduce, or with sequence parallelism a reduce-scatter, per block). They hold for nn.Linear
# and torch_gemm.nn.Linear alike, applied before or after swap_linear.


def _check_mesh(fn: str, mesh) -> int:
    from torch.distributed.device_mesh import DeviceMesh

    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"{fn}: mesh must be a torch.distributed DeviceMesh, got {type(mesh).__name__}")
    if mesh.ndim != 1:
        raise ValueError(
            f"{fn}: mesh must be the 1-D tensor-parallel mesh, got {mesh.ndim} dimensions "
            "(pass mesh['tp'] of a 2-D mesh; FSDP2's fully_shard takes the other dimension)"
        )
    return mesh.size()


def _attention_plan(fn: str, block, tp: int, prefix: str = "", *, sequence_parallel: bool = False) -> dict:
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    if getattr(block, "fused_qkv", False):
        raise ValueError(
            f"{fn}: {prefix.rstrip('.') or 'the block'} has a fused qkv_proj, whose rows are q, k and v one after "
            "the other: a columnwise split would give each rank parts of different projections; "
            "build it with fused_qkv=False"
        )
    if block.num_heads % tp != 0:
        raise ValueError(
            f"{fn}: {prefix.rstrip('.') or 'the block'} has {block.num_heads} heads, not a multiple of the "
            f"{tp} tensor-parallel ranks (each rank takes whole heads)"
        )
    rowwise = RowwiseParallel(output_layouts=Shard(1)) if sequence_parallel else RowwiseParallel()
    return {
        f"{prefix}q_proj": ColwiseParallel(),
        f"{prefix}k_proj": ColwiseParallel(),
        f"{prefix}v_proj": ColwiseParallel(),
        f"{prefix}o_proj": rowwise,
    }


def _shard_heads(block, tp: int) -> None:
    # After the columnwise split each rank's q, k and v hold num_heads / tp whole heads; the
    # block's forward reshapes its local tensors by these numbers.
    block.num_heads //= tp
    block.embed_dim //= tp


def parallelize_attention(block, mesh):
    """Make a :class:`torch_gemm.attention.MultiHeadAttention` tensor-parallel over the 1-D
    ``mesh``: q/k/v columnwise (each rank computes ``num_heads / mesh.size()`` heads), o rowwise;
    input and output are replicated (plain tensors, the same on every rank). In place; returns
    ``block``. Its projections may be ``nn.Linear`` or ``torch_gemm.nn.Linear``, and
    ``swap_linear`` may run before or after."""
    from torch.distributed.tensor.parallel import parallelize_module

    fn = "torch_gemm.distributed.parallelize_attention"
    tp = _check_mesh(fn, mesh)
    parallelize_module(block, mesh, _attention_plan(fn, block, tp))
    _shard_heads(block, tp)
    return block


def parallelize_decoder(model, mesh, *, sequence_parallel: bool = False):
    """Make a :class:`torch_gemm.attention.TinyDecoder` tensor-parallel over the 1-D ``mesh``:
    the embeddings rowwise (each rank a slice of the vocabulary and positions), in every layer the
    attention as :func:`parallelize_attention` does and the MLP's gate/up columnwise and down
    rowwise, and ``lm_head`` columnwise with the logits gathered (replicated). With
    ``sequence_parallel`` the norms and the residual stream between the blocks are sharded on
    the sequence dimension (SequenceParallel): tokens must then be a multiple of the mesh size.
    In place; returns ``model``. Compose with FSDP2 by calling ``fully_shard`` on the layers and
    the model afterwards, over the other dimension of a 2-D mesh."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module,
    )

    fn = "torch_gemm.distributed.parallelize_decoder"
    tp = _check_mesh(fn, mesh)
    if model.config.intermediate_size % tp != 0:
        raise ValueError(
            f"{fn}: intermediate_size {model.config.intermediate_size} is not a multiple of the "
            f"{tp} tensor-parallel ranks"
        )
    seq = Shard(1)
    if sequence_parallel:
        plan = {
            "embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq),
            # positions are (T,) and their embedding (T, C): its sequence dimension is 0.
            "embed_positions": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(0)),
            "norm": SequenceParallel(),
            "lm_head": ColwiseParallel(input_layouts=seq, output_layouts=Replicate()),
        }
    else:
        plan = {
            "embed_tokens": RowwiseParallel(input_layouts=Replicate()),
            "embed_positions": RowwiseParallel(input_layouts=Replicate()),
            "lm_head": ColwiseParallel(output_layouts=Replicate()),
        }
    for i, layer in enumerate(model.layers):
        prefix = f"layers.{i}."
        plan.update(_attention_plan(fn, layer.self_attn, tp, f"{prefix}self_attn.",
                                    sequence_parallel=sequence_parallel))
        plan[f"{prefix}mlp.gate_proj"] = ColwiseParallel()
        plan[f"{prefix}mlp.up_proj"] = ColwiseParallel()
        plan[f"{prefix}mlp.down_proj"] = RowwiseParallel(output_layouts=seq) if sequence_parallel else RowwiseParallel()
        if sequence_parallel:
            plan[f"{prefix}attn_norm"] = SequenceParallel()
            plan[f"{prefix}mlp_norm"] = SequenceParallel()
            # The blocks' inputs are gathered whole from the sequence shards (all-gather) before
            # their columnwise projections.
            for block in ("self_attn", "mlp"):
                plan[f"{prefix}{block}"] = PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(Replicate(),))
    parallelize_module(model, mesh, plan)
    for layer in model.layers:
        _shard_heads(layer.self_attn, tp)
    return model


def optimizer_param_groups(model) -> list[dict]:
    """``model``'s parameters as optimizer parameter groups that torch's foreach (multi-tensor)
    optimizer kernels take: plain tensors in one group, DTensors in one group per device mesh.
    A tensor-parallel model without sequence parallelism keeps its norms' weights as plain
    tensors beside the DTensor projections, and a foreach step over such a mix fails ("got mixed
    torch.Tensor and DTensor"); the CUDA optimizers use foreach by default. Use as
    ``torch.optim.AdamW(optimizer_param_groups(model), lr=...)``."""
    groups: dict = {}
    for param in model.parameters():
        mesh = getattr(param, "device_mesh", None)
        groups.setdefault(mesh, []).append(param)
    return [{"params": params} for params in groups.values()]


def rank_device(choice: str, local_rank: int, local_world: int) -> tuple[str, torch.device]:
    """(backend, device) for rank ``local_rank`` of ``local_world`` on its node: NCCL on GPU
    ``local_rank`` where every rank of the node has a GPU, torch has NCCL and torch_gemm its CUDA
    kernels (``choice`` "auto" or "cuda"), else gloo on the CPU (``choice`` "cpu", or "auto"
    without them). ``choice`` "cuda" without them raises ``RuntimeError`` saying what is missing."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    from torch_gemm import _C

    usable = gpus >= local_world and _C.built_with_cuda() and torch.distributed.is_nccl_available()
    if choice == "cuda" and not usable:
        raise RuntimeError(f"--device cuda needs {local_world} GPUs per node, NCCL and torch_gemm's CUDA kernels; "
                           f"found {gpus} GPUs, CUDA kernels compiled: {_C.built_with_cuda()}")
    if choice != "cpu" and usable:
        torch.cuda.set_device(local_rank)
        return "nccl", torch.device("cuda", local_rank)
    return "gloo", torch.device("cpu")


def exit_rank(code: int) -> None:
    """Leave a torchrun rank with ``code`` without the interpreter's finalization, once its output
    is flushed: for a script's last line, after ``destroy_process_group``. gloo's worker thread may
    still be destroying the last collective's work, whose saved thread-local state holds a Python
    object; its decref, once finalization has begun, ends that thread inside a destructor, and
    std::terminate aborts the rank (exit -6, "terminate called without an active exception") after
    a run that succeeded (pytorch#179291)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
