"""torch_gemm past one device: the gemm ops' DTensor sharding strategies, swapped attention blocks
and decoders made tensor-parallel (before or after the swap, with and without sequence
parallelism), AdamW loss curves, FSDP2 + TP (1×2 and 2×1 meshes on 2 ranks, 2×2 on 4) and
torch.compile of a TP block, each against the unsharded nn.Linear model.

The ranks are processes this file starts as a script (``python tests/test_distributed.py
--worker ...``), once per backend and world size; each runs every check of its world in order
and writes what happened, and the tests here read it. Over gloo on CPU ranks (float32, 2 and 4
ranks) everywhere torch.distributed has gloo; over NCCL on GPUs (bfloat16) where at least two are
present. TORCH_GEMM_GLOO_DTYPE=bfloat16 runs the CPU ranks in the GPUs' dtype, which tries the
bfloat16 tolerances without GPUs. A rank that fails a check exits at once, so the others'
collectives fail rather than wait, and a whole run has a time limit: nothing here can hang the
suite.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.distributed as dist

# The float64 reference and the error budget of the module tests (docs/numerics.md).
from gemm_testing import rel_err
from model_testing import assert_matches_reference, randomize_, rel_diff

HERE = Path(__file__).resolve()
# A whole run of ranks, every check of one world included; far above what it takes (seconds on
# two cores, Inductor's first compile included), low enough that a hang fails the test instead
# of the CI job.
RUN_TIMEOUT_S = 600
# A collective that waits longer than this raises on the ranks still in it.
COLLECTIVE_TIMEOUT_S = 120

BATCH, TOKENS = 2, 8
EMBED_DIM, NUM_HEADS = 32, 4
DECODER = dict(vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
               max_seq_len=16, bias=True)
ADAMW_STEPS, LEARNING_RATE = 3, 1e-2
# GPUs train in bfloat16, CPU ranks in float32 unless told otherwise.
BACKEND_DTYPES = {"nccl": "bfloat16", "gloo": os.environ.get("TORCH_GEMM_GLOO_DTYPE", "float32")}
# Per-step loss agreement of the tensor-parallel swapped model and the unsharded one.
LOSS_REL_TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


# ---------------------------------------------------------------------------------------------
# The checks, run on every rank. Each takes the rank's context; a failed assert or an exception
# fails it on that rank, Skip skips it on every rank (they all decide alike).


class Skip(Exception):
    pass


class Context:
    def __init__(self, backend: str, rank: int, world: int, seed: int, dtype: torch.dtype) -> None:
        from torch.distributed.device_mesh import init_device_mesh

        self.backend, self.rank, self.world, self.seed, self.dtype = backend, rank, world, seed, dtype
        self.device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        self.mesh = init_device_mesh(self.device.split(":")[0], (world,), mesh_dim_names=("tp",))

    def generator(self, *salt) -> torch.Generator:
        """The same numbers on every rank (a replicated input is the same everywhere)."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed((self.seed + zlib.crc32(repr(salt).encode())) % (2**63))
        return gen

    def randn(self, *shape, gen: torch.Generator) -> torch.Tensor:
        return torch.randn(shape, device=self.device, generator=gen).to(self.dtype)


CHECKS: dict[str, Callable[[Context], None]] = {}
# The checks each world size runs, in order; a world of 4 is the 2×2 mesh of FSDP2 + TP, where
# both dimensions shard (on 2 ranks one of them has a single rank).
WORLD_CHECKS = {
    2: ["op_strategies", "errors_and_kernel_argument", "attention_block", "decoder",
        "decoder_sequence_parallel", "adamw_loss_curve", "fsdp2_swap_order", "fsdp2_tp_1x2", "fsdp2_tp",
        "compile_block"],
    4: ["op_strategies", "decoder_sequence_parallel", "fsdp2_tp"],
}


def check(fn: Callable[[Context], None]) -> Callable[[Context], None]:
    CHECKS[fn.__name__.removeprefix("check_")] = fn
    return fn


# Two computations of one value in the same dtype that differ in the order of their sums (and, in
# bfloat16, in where partial sums are rounded): their relative distance ‖got − expected‖ / ‖expected‖.
CLOSE_TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def _close(got: torch.Tensor, expected: torch.Tensor, what: str, dtype: torch.dtype) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype, \
        f"{what}: {got.dtype} {tuple(got.shape)}, expected {expected.dtype} {tuple(expected.shape)}"
    err = rel_err(got, expected)
    assert err <= CLOSE_TOL[dtype], f"{what}: relative error {err:.2e} > {CLOSE_TOL[dtype]:g} ({dtype})"


def _partial_piece(ctx: Context, full: torch.Tensor) -> torch.Tensor:
    """This rank's summand of a Partial tensor whose sum over the ranks is ``full``: full times
    1/2, 1/4, ... with the last two ranks' shares equal, so that each is a different tensor and
    every share, a power of two, is exact in any dtype."""
    share = 2.0 ** -min(ctx.rank + 1, ctx.world - 1)
    return full * share


@check
def check_op_strategies(ctx: Context) -> None:
    """Every op on DTensors placed as each of its strategies expects: the output has the
    strategy's placement with no communication in the forward (DTensor used the strategy rather
    than moving data) nor in the backward (its ops found strategies for the gradients as they
    come, e.g. linear_tiled_weight_grad for x and grad sharded along the sequence), and output
    and gradients are the op's on the whole tensors."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    n = 2 * ctx.world  # every sharded size a multiple of the ranks
    gen = ctx.generator("op_strategies")
    R, P, S = Replicate(), Partial(), Shard
    mm, bmm = torch.ops.gemm.mm_tiled, torch.ops.gemm.bmm_tiled
    linear, row_sum = torch.ops.gemm.linear_tiled, torch.ops.gemm.mm_tiled_row_sum
    weight_grad = functools.partial(torch.ops.gemm.linear_tiled_weight_grad, bias=True)
    weight_grad_no_bias = functools.partial(torch.ops.gemm.linear_tiled_weight_grad, bias=False)
    x3 = (BATCH * ctx.world, n, n + ctx.world)
    g3 = (*x3[:-1], n)  # linear's gradient for x3 and a weight of n rows
    cases = [
        # op, shapes of the tensor arguments, their placements, the output's placements
        (mm, [(n, 3 * n), (3 * n, n)], [R, R], [R]),
        (mm, [(n, 3 * n), (3 * n, n)], [S(0), R], [S(0)]),
        (mm, [(n, 3 * n), (3 * n, n)], [R, S(1)], [S(1)]),
        (mm, [(n, 3 * n), (3 * n, n)], [S(1), S(0)], [P]),
        (mm, [(n, 3 * n), (3 * n, n)], [P, R], [P]),
        (mm, [(n, 3 * n), (3 * n, n)], [R, P], [P]),
        (bmm, [(n, n, 3 * n), (n, 3 * n, n)], [S(0), S(0)], [S(0)]),
        (bmm, [(n, n, 3 * n), (n, 3 * n, n)], [S(1), R], [S(1)]),
        (bmm, [(n, n, 3 * n), (n, 3 * n, n)], [R, S(2)], [S(2)]),
        (bmm, [(n, n, 3 * n), (n, 3 * n, n)], [S(2), S(1)], [P]),
        (linear, [x3, (n, x3[-1]), (n,)], [R, R, R], [R]),
        (linear, [x3, (n, x3[-1]), (n,)], [S(0), R, R], [S(0)]),
        (linear, [x3, (n, x3[-1]), (n,)], [S(1), R, R], [S(1)]),
        (linear, [x3, (n, x3[-1]), (n,)], [R, S(0), S(0)], [S(2)]),          # ColwiseParallel
        (linear, [x3, (n, x3[-1]), None], [S(2), S(1), None], [P]),          # RowwiseParallel
        (linear, [x3, (n, x3[-1]), (n,)], [S(2), S(1), R], [P]),             # the bias split, not added twice
        (linear, [(n, n), (n, n), (n,)], [P, R, P], [P]),
        (row_sum, [(n, 3 * n), (3 * n, n)], [S(0), R], [S(0), S(0)]),
        (row_sum, [(n, 3 * n), (3 * n, n)], [R, S(1)], [S(1), R]),
        (row_sum, [(n, 3 * n), (3 * n, n)], [S(1), S(0)], [P, P]),
        (weight_grad, [g3, x3], [R, R], [R, R]),
        (weight_grad, [g3, x3], [S(0), S(0)], [P, P]),
        (weight_grad, [g3, x3], [S(1), S(1)], [P, P]),                        # sequence parallel
        (weight_grad_no_bias, [g3, x3], [S(1), S(1)], [P, R]),                # db empty
        (weight_grad, [g3, x3], [R, S(2)], [S(1), R]),                        # RowwiseParallel's dW
        (weight_grad, [g3, x3], [S(2), R], [S(0), S(0)]),                     # ColwiseParallel's dW and db
        (weight_grad, [g3, x3], [P, R], [P, P]),
        (weight_grad, [g3, x3], [R, P], [P, R]),
    ]
    for op, shapes, placements, expected in cases:
        what = f"{_op_name(op)}{[str(p) for p in placements]}"
        full = [None if s is None else ctx.randn(*s, gen=gen) for s in shapes]
        args = []
        for t, placement in zip(full, placements):
            if t is None:
                args.append(None)
            elif placement == P:
                args.append(DTensor.from_local(_partial_piece(ctx, t), ctx.mesh, [P]).requires_grad_())
            else:
                args.append(distribute_tensor(t, ctx.mesh, [placement]).requires_grad_())
        with CommDebugMode() as comms:
            out = op(*args)
        outs = out if isinstance(out, tuple) else (out,)
        assert comms.get_total_counts() == 0, f"{what}: the forward communicated ({comms.get_comm_counts()})"
        assert [o.placements[0] for o in outs] == expected, f"{what}: output placed {[o.placements for o in outs]}, not {expected}"
        grads = [ctx.randn(*o.shape, gen=gen) for o in outs]
        # A sharded output's gradient arrives sharded alike, as the next op's backward hands it on.
        grad_placements = [o.placements if o.placements[0].is_shard() else [R] for o in outs]
        grad_dtensors = [distribute_tensor(g, ctx.mesh, p) for g, p in zip(grads, grad_placements)]
        with CommDebugMode() as comms:
            torch.autograd.backward(list(outs), grad_dtensors)
        assert comms.get_total_counts() == 0, f"{what}: the backward communicated ({comms.get_comm_counts()})"
        got = [o.full_tensor() for o in outs] + [a.grad.full_tensor() for a in args if a is not None]
        reference = _float64_results(op, full, grads)
        scale = _float64_results(op, [None if t is None else t.abs() for t in full], [g.abs() for g in grads])
        names = [f"output {i}" for i in range(len(outs))] + [f"gradient of argument {i}" for i, t in enumerate(full) if t is not None]
        for g, ref, sc, name in zip(got, reference, scale, names):
            _within_rounding(g, ref, sc, f"{what} {name}", ctx.dtype)


def _op_name(op) -> str:
    if isinstance(op, functools.partial):
        return f"{op.func._qualified_op_name}({', '.join(f'{k}={v}' for k, v in op.keywords.items())})"
    return op._qualified_op_name


def _float64_results(op, inputs: list, grads: list) -> list[torch.Tensor]:
    """The op's outputs and its inputs' gradients in float64 on the same (rounded) values."""
    inputs = [None if t is None else t.double().requires_grad_() for t in inputs]
    outs = op(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    torch.autograd.backward(list(outs), [g.double() for g in grads])
    return [o.detach() for o in outs] + [t.grad for t in inputs if t is not None]


# A sharded product's rounding against the float64 one, measured on the scale of its summands,
# ‖|A|·|B|‖ (the standard bound on a product's rounding is γ_K·|A||B|): sums split among ranks
# round each share, and a share may be larger than the total where the terms cancel (a short row
# sum of random numbers), so ‖reference‖ would call correct rounding wrong. A wrong placement
# or a bias added twice is off by the size of the values, far above these.
ROUNDING_TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def _within_rounding(got: torch.Tensor, reference: torch.Tensor, scale: torch.Tensor, what: str, dtype) -> None:
    assert got.shape == reference.shape and got.dtype == dtype, \
        f"{what}: {got.dtype} {tuple(got.shape)}, expected {dtype} {tuple(reference.shape)}"
    err = (got.double() - reference).norm().item() / max(scale.norm().item(), 1e-30)
    assert err <= ROUNDING_TOL[dtype], f"{what}: error {err:.2e} of ‖|A||B|‖ > {ROUNDING_TOL[dtype]:g} ({dtype})"


@check
def check_errors_and_kernel_argument(ctx: Context) -> None:
    """Bad DTensor arguments get the op's own message on every rank; the kernel= argument
    reaches each rank's call even where DTensor redistributed the inputs first and had decided
    the same placements for another kernel before (torch_gemm.distributed keys DTensor's cache by
    kernel); the tensor-parallel plans refuse what they cannot split, naming it."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    gen = ctx.generator("errors")
    x = distribute_tensor(ctx.randn(4, 2 * ctx.world, gen=gen), ctx.mesh, [Shard(0)])
    w = distribute_tensor(ctx.randn(2 * ctx.world, 2 * ctx.world, gen=gen), ctx.mesh, [Shard(1)])
    wrong = distribute_tensor(ctx.randn(3, 5, gen=gen), ctx.mesh, [Replicate()])
    try:
        torch.ops.gemm.linear_tiled(x, wrong)
    except RuntimeError as error:
        assert "gemm::linear_tiled: x's last dimension must equal weight.size(1)" in str(error), str(error)
    else:
        raise AssertionError("linear_tiled took a weight of the wrong width")
    expected = torch.ops.gemm.linear_tiled(x.full_tensor(), w.full_tensor())
    _close(torch.ops.gemm.linear_tiled(x, w).full_tensor(), expected, "x Shard(0), weight Shard(1)", ctx.dtype)
    try:
        torch.ops.gemm.linear_tiled(x, w, None, "no_such_kernel")
    except RuntimeError as error:
        assert "no_such_kernel" in str(error), str(error)
    else:
        raise AssertionError("kernel='no_such_kernel' did not reach the ranks' calls (a cached kernel ran instead)")

    from torch_gemm.attention import MultiHeadAttention
    from torch_gemm.distributed import parallelize_attention

    bad = [
        (lambda: parallelize_attention(MultiHeadAttention(8, 2, fused_qkv=True), ctx.mesh), ValueError,
         "has a fused qkv_proj"),
        (lambda: parallelize_attention(MultiHeadAttention(3 * ctx.world + 3, ctx.world + 1), ctx.mesh), ValueError,
         f"has {ctx.world + 1} heads, not a multiple of the {ctx.world} tensor-parallel ranks"),
        (lambda: parallelize_attention(MultiHeadAttention(8, 2), "tp"), TypeError,
         "mesh must be a torch.distributed DeviceMesh, got str"),
    ]
    for call, error_type, message in bad:
        try:
            call()
        except error_type as error:
            assert message in str(error), str(error)
        else:
            raise AssertionError(f"no {error_type.__name__} ({message})")


def _attention_pair(ctx: Context, salt):
    from torch_gemm.attention import MultiHeadAttention

    torch.manual_seed(0)
    theirs = MultiHeadAttention(EMBED_DIM, NUM_HEADS, bias=True, device=ctx.device, dtype=ctx.dtype)
    randomize_(theirs.parameters(), ctx.generator("attention", salt))
    return theirs, copy.deepcopy(theirs).double()


def _full(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def _compare_grads(ours: torch.nn.Module, theirs: torch.nn.Module, reference: torch.nn.Module, what: str) -> None:
    theirs_params, reference_params = dict(theirs.named_parameters()), dict(reference.named_parameters())
    projections = {f"{module_name}.{name}".lstrip(".") for module_name, module in ours.named_modules()
                   if isinstance(module, torch.nn.Linear) for name, _ in module.named_parameters(recurse=False)}
    checked = 0
    for name, p in ours.named_parameters():
        assert p.grad is not None, f"{what}: {name} has no gradient"
        # The backward's products leave a projection's gradients placed as its parameters: no
        # gather of a sharded weight's gradient, no pending sum left for the optimizer.
        if name in projections:
            assert p.grad.placements == p.placements, f"{what}: {name}.grad placed {p.grad.placements}, {name} {p.placements}"
        # The key bias's gradient is zero in exact arithmetic (softmax ignores a shift shared by
        # all keys): its rounding is measured against the value bias's gradient.
        scale = 0.0
        if name.endswith("k_proj.bias"):
            scale = reference_params[name.replace("k_proj", "v_proj")].grad.norm().item()
        assert_matches_reference(_full(p.grad), theirs_params[name].grad, reference_params[name].grad,
                                 f"{what}: {name}.grad", scale=scale)
        checked += 1
    assert checked == len(theirs_params), f"{what}: {checked} parameters, the unsharded model has {len(theirs_params)}"


def _swapped_and_sharded(module: torch.nn.Module, what: str) -> None:
    from torch.distributed.tensor import DTensor

    from torch_gemm.nn import Linear

    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(isinstance(m, Linear) for m in linears), \
        f"{what}: not every projection runs on torch_gemm: {[type(m).__name__ for m in linears]}"
    assert all(isinstance(m.weight, DTensor) for m in linears), f"{what}: a projection's weight is not a DTensor"


@check
def check_attention_block(ctx: Context) -> None:
    """A swapped attention block made tensor-parallel (parallelize_attention: q/k/v columnwise,
    o rowwise), swapped before or after: output, input gradient and every parameter's gradient
    match the unsharded nn.Linear block's within the error budget."""
    from torch_gemm.distributed import parallelize_attention
    from torch_gemm.nn import swap_linear

    for order in ("swap_then_parallelize", "parallelize_then_swap"):
        theirs, reference = _attention_pair(ctx, order)
        ours = copy.deepcopy(theirs)
        if order == "swap_then_parallelize":
            parallelize_attention(swap_linear(ours, all_linear=True), ctx.mesh)
        else:
            swap_linear(parallelize_attention(ours, ctx.mesh), all_linear=True)
        _swapped_and_sharded(ours, order)
        gen = ctx.generator("attention input", order)
        x, grad = ctx.randn(BATCH, TOKENS, EMBED_DIM, gen=gen), ctx.randn(BATCH, TOKENS, EMBED_DIM, gen=gen)
        results = {}
        for name, block in (("ours", ours), ("theirs", theirs), ("reference", reference)):
            xi = x.detach().to(next(block.parameters()).dtype).requires_grad_()
            out = block(xi)
            out.backward(grad.to(out.dtype))
            results[name] = (out, xi.grad)
        for i, what in enumerate(("output", "x.grad")):
            assert_matches_reference(results["ours"][i], results["theirs"][i], results["reference"][i], f"{order}: {what}")
        _compare_grads(ours, theirs, reference, order)


def _decoder_pair(ctx: Context, salt):
    from torch_gemm.attention import DecoderConfig, TinyDecoder

    torch.manual_seed(0)
    theirs = TinyDecoder(DecoderConfig(**DECODER), device=ctx.device, dtype=ctx.dtype)
    randomize_(theirs.parameters(), ctx.generator("decoder", salt))
    return theirs, copy.deepcopy(theirs).double()


def _tokens(ctx: Context, salt, batch: int = BATCH) -> torch.Tensor:
    return torch.randint(0, DECODER["vocab_size"], (batch, TOKENS), device=ctx.device, generator=ctx.generator("tokens", salt))


def _parallel_decoder(ctx: Context, theirs: torch.nn.Module, *, sequence_parallel: bool, mesh=None):
    from torch_gemm.distributed import parallelize_decoder
    from torch_gemm.nn import swap_linear

    ours = swap_linear(copy.deepcopy(theirs), all_linear=True)
    parallelize_decoder(ours, mesh if mesh is not None else ctx.mesh, sequence_parallel=sequence_parallel)
    _swapped_and_sharded(ours, "decoder")
    return ours


def _decoder_matches(ctx: Context, *, sequence_parallel: bool) -> None:
    theirs, reference = _decoder_pair(ctx, sequence_parallel)
    ours = _parallel_decoder(ctx, theirs, sequence_parallel=sequence_parallel)
    ids = _tokens(ctx, sequence_parallel)
    outputs = {}
    for name, model in (("ours", ours), ("theirs", theirs), ("reference", reference)):
        out = model(ids, labels=ids)
        out.loss.backward()
        outputs[name] = out
    assert_matches_reference(outputs["ours"].logits, outputs["theirs"].logits, outputs["reference"].logits, "logits")
    assert_matches_reference(outputs["ours"].loss, outputs["theirs"].loss, outputs["reference"].loss, "loss")
    _compare_grads(ours, theirs, reference, "decoder")


@check
def check_decoder(ctx: Context) -> None:
    """TinyDecoder with every projection swapped (lm_head and the MLP too) and tensor-parallel,
    embeddings rowwise: logits, loss and every gradient match the unsharded model's."""
    _decoder_matches(ctx, sequence_parallel=False)


@check
def check_decoder_sequence_parallel(ctx: Context) -> None:
    """As check_decoder, with the norms and the residual stream sharded on the sequence
    (SequenceParallel; the rowwise projections reduce-scatter)."""
    _decoder_matches(ctx, sequence_parallel=True)


def _train(model: torch.nn.Module, batches: list[torch.Tensor]) -> list[float]:
    """AdamW with foreach kernels, as the CUDA optimizers default to, on every backend: a
    parallel model's DTensor and plain parameters in separate groups (optimizer_param_groups)."""
    from torch_gemm.distributed import optimizer_param_groups

    optimizer = torch.optim.AdamW(optimizer_param_groups(model), lr=LEARNING_RATE, foreach=True)
    losses = []
    for ids in batches:
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(_full(loss.detach()).float()))
    return losses


def _assert_same_curve(ours: list[float], theirs: list[float], dtype: torch.dtype, what: str) -> None:
    tol = LOSS_REL_TOL[dtype]
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert rel_diff(a, b) <= tol, f"{what}: step {step}: loss {a:.6f} vs the unsharded model's {b:.6f} (tol {tol:g})"


@check
def check_adamw_loss_curve(ctx: Context) -> None:
    """A few AdamW steps of the swapped, tensor-parallel decoder give the unsharded model's loss
    curve. Without sequence parallelism, so that the norms' weights stay plain tensors beside the
    DTensor projections (FSDP2 + TP trains the sequence-parallel one)."""
    theirs, _ = _decoder_pair(ctx, "adamw")
    ours = _parallel_decoder(ctx, theirs, sequence_parallel=False)
    batches = [_tokens(ctx, ("adamw", step)) for step in range(ADAMW_STEPS)]
    _assert_same_curve(_train(ours, batches), _train(theirs, batches), ctx.dtype, "AdamW")


@check
def check_compile_block(ctx: Context) -> None:
    """torch.compile(fullgraph=True) of the swapped, tensor-parallel attention block: Dynamo
    takes it in one graph (a break would raise) holding the four linear_tiled calls, Inductor
    compiles it with the DTensor strategies and the fake kernels, and output and gradients
    match the eager block's."""
    from torch._inductor.compile_fx import compile_fx

    from torch_gemm.distributed import parallelize_attention
    from torch_gemm.nn import swap_linear

    theirs, _ = _attention_pair(ctx, "compile")
    eager = parallelize_attention(swap_linear(copy.deepcopy(theirs), all_linear=True), ctx.mesh)
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return compile_fx(gm, example_inputs)

    compiled = torch.compile(eager, backend=backend, fullgraph=True)
    gen = ctx.generator("compile input")
    x, grad = ctx.randn(BATCH, TOKENS, EMBED_DIM, gen=gen), ctx.randn(BATCH, TOKENS, EMBED_DIM, gen=gen)
    results = []
    for block in (compiled, eager):
        xi = x.clone().requires_grad_()
        out = block(xi)
        out.backward(grad)
        results.append((out, xi.grad, {n: _full(p.grad) for n, p in eager.named_parameters()}))
        eager.zero_grad(set_to_none=True)
    assert len(graphs) == 1, f"Dynamo made {len(graphs)} graphs"
    targets = [str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"]
    assert sum(t.startswith("gemm.linear_tiled") for t in targets) == 4, targets
    _close(results[0][0], results[1][0], "compiled output", ctx.dtype)
    _close(results[0][1], results[1][1], "compiled x.grad", ctx.dtype)
    for name, g in results[0][2].items():
        _close(g, results[1][2][name], f"compiled {name}.grad", ctx.dtype)


def _fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        raise Skip("torch.distributed.fsdp has no fully_shard (torch < 2.6)")
    return fully_shard


def _data_parallel_curve(ctx: Context, model: torch.nn.Module, batches: list[torch.Tensor], dp_group, dp_rank: int,
                         dp: int = 2) -> list[float]:
    """The loss curve of ``model`` trained by ``dp`` data-parallel groups that each take a
    1/dp share of every batch: each share's mean loss, averaged (the shares have as many tokens)."""
    shares = torch.tensor(_train(model, [ids.chunk(dp)[dp_rank] for ids in batches]), device=ctx.device)
    dist.all_reduce(shares, group=dp_group)
    return (shares / dp).tolist()


@check
def check_fsdp2_swap_order(ctx: Context) -> None:
    """FSDP2 with fully_shard on every projection by itself: swapped before, the wrapped modules
    run on torch_gemm and train as the unsharded model does; swapped after, swap_linear leaves
    them and warns, naming them."""
    import warnings

    from torch_gemm.nn import Linear, swap_linear

    fully_shard = _fully_shard()
    theirs, _ = _decoder_pair(ctx, "fsdp2 swap order")

    def wrapped(model):
        for module in list(model.modules()):
            if isinstance(module, torch.nn.Linear):
                fully_shard(module, mesh=ctx.mesh)
        return fully_shard(model, mesh=ctx.mesh)

    late = wrapped(copy.deepcopy(theirs))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        swap_linear(late, all_linear=True)
    messages = [str(w.message) for w in caught if "swap_linear" in str(w.message)]
    assert len(messages) == 1 and "fully_shard" in messages[0] and "layers.0.self_attn.q_proj" in messages[0], messages
    assert not any(isinstance(m, Linear) for m in late.modules())

    ours = wrapped(swap_linear(copy.deepcopy(theirs), all_linear=True))
    assert sum(isinstance(m, Linear) for m in ours.modules()) == 7 * DECODER["num_layers"] + 1
    batches = [_tokens(ctx, ("fsdp2 swap order", step), batch=2 * BATCH) for step in range(ADAMW_STEPS)]
    curve = _data_parallel_curve(ctx, ours, batches, ctx.mesh.get_group(), ctx.rank)
    _assert_same_curve(curve, _train(theirs, batches), ctx.dtype, "FSDP2 on each projection")


def _fsdp2_tp(ctx: Context, dp: int, what: str) -> None:
    """FSDP2 over the first dimension of a dp × (world / dp) mesh, the swapped decoder tensor- and
    sequence-parallel over the second: each data-parallel group of ranks takes a 1/dp share of the
    batch, and a few AdamW steps give the loss curve of the unsharded model on the whole batch."""
    from torch.distributed.device_mesh import init_device_mesh

    fully_shard = _fully_shard()
    mesh = init_device_mesh(ctx.device.split(":")[0], (dp, ctx.world // dp), mesh_dim_names=("dp", "tp"))
    theirs, _ = _decoder_pair(ctx, what)
    ours = _parallel_decoder(ctx, theirs, sequence_parallel=True, mesh=mesh["tp"])
    for layer in ours.layers:
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(ours, mesh=mesh["dp"])
    batches = [_tokens(ctx, (what, step), batch=2 * BATCH) for step in range(ADAMW_STEPS)]
    curve = _data_parallel_curve(ctx, ours, batches, mesh["dp"].get_group(), mesh["dp"].get_local_rank(), dp)
    _assert_same_curve(curve, _train(theirs, batches), ctx.dtype, f"FSDP2 + TP, {dp}x{ctx.world // dp} mesh")


@check
def check_fsdp2_tp(ctx: Context) -> None:
    """FSDP2 over two data-parallel ranks, TP over the rest: on 2 ranks a 2×1 mesh (parameters
    sharded and gathered along the data-parallel dimension, the tensor-parallel plan on a 1-rank
    one), on 4 the 2×2 mesh where both dimensions shard."""
    _fsdp2_tp(ctx, 2, "fsdp")


@check
def check_fsdp2_tp_1x2(ctx: Context) -> None:
    """FSDP2 + TP on 2 ranks, tensor parallelism over both: the TP-sharded DTensors under FSDP2's
    wrapping on a 1-rank data-parallel dimension (2-D DTensor parameters)."""
    _fsdp2_tp(ctx, 1, "fsdp 1x2")


# ---------------------------------------------------------------------------------------------
# A rank: this file run as a script.


def _worker(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, choices=sorted(WORLD_CHECKS), required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], required=True)
    args = parser.parse_args(argv)
    import torch_gemm  # noqa: F401  (the ops and their strategies)

    if args.backend == "nccl":
        torch.cuda.set_device(args.rank)
    dist.init_process_group(args.backend, init_method=f"file://{args.store}", rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    results: dict[str, dict] = {}
    out = Path(args.results) / f"rank{args.rank}.json"
    ctx = Context(args.backend, args.rank, args.world, args.seed, getattr(torch, args.dtype))
    for name in WORLD_CHECKS[args.world]:
        start = time.perf_counter()
        try:
            CHECKS[name](ctx)
            results[name] = {"status": "passed"}
        except Skip as reason:
            results[name] = {"status": "skipped", "detail": str(reason)}
        except BaseException:
            results[name] = {"status": "failed", "detail": traceback.format_exc()}
        results[name]["seconds"] = round(time.perf_counter() - start, 2)
        out.write_text(json.dumps(results))
        if results[name]["status"] == "failed":
            # The others may be inside a collective this rank will not join: leaving closes the
            # connections and makes theirs fail at once.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------------------------
# The tests: one run of ranks per backend and world size, shared by that world's tests.


def _gloo_missing() -> str:
    if not dist.is_available():
        return "torch.distributed is not available in this torch"
    if not dist.is_gloo_available():
        return "torch.distributed has no gloo backend"
    return ""


def _nccl_missing(world: int) -> str:
    if not dist.is_available() or not dist.is_nccl_available():
        return "torch.distributed has no NCCL backend"
    if not torch.cuda.is_available() or torch.cuda.device_count() < world:
        return f"needs {world} CUDA devices"
    import torch_gemm

    if not torch_gemm._C.built_with_cuda():
        return "this build of torch_gemm has no CUDA kernels"
    return ""


def _wait_or_kill(procs: list[subprocess.Popen], deadline: float) -> bool:
    """Wait for every process until ``deadline``; past it, kill the process groups they lead
    (each was started in its own session, so its children go too). Returns whether it killed."""
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            break
    else:
        return False
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return True


@functools.lru_cache(maxsize=None)
def _run_ranks(backend: str, world: int) -> dict:
    """Start ``world`` ranks, wait for them (RUN_TIMEOUT_S at most) and return
    ``{"checks": {name: {rank: result}}, "logs": {rank: output tail}, "returncodes": [...],
    "timed_out": bool}``."""
    with tempfile.TemporaryDirectory(prefix=f"torch_gemm_{backend}{world}_") as tmp:
        return _run_ranks_in(backend, world, Path(tmp))


def _subprocess_env() -> dict:
    """The environment of the processes a test starts: this one's, with the torch_gemm this
    process imported first on their path (an editable install may point elsewhere)."""
    import torch_gemm

    env = dict(os.environ)
    package_root = str(Path(torch_gemm.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def _run_ranks_in(backend: str, world: int, workdir: Path) -> dict:
    from gemm_testing import SEED

    env = _subprocess_env()
    if backend == "gloo":
        # Ranks share the CPU's cores: one thread each rather than every rank on every core.
        env["OMP_NUM_THREADS"] = "1"
    procs, logs = [], []
    for rank in range(world):
        log = open(workdir / f"rank{rank}.log", "w")
        logs.append(log)
        cmd = [sys.executable, str(HERE), "--worker", "--backend", backend, "--rank", str(rank),
               "--world", str(world), "--store", str(workdir / "store"), "--results", str(workdir),
               "--seed", str(SEED), "--dtype", BACKEND_DTYPES[backend]]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=HERE.parent,
                                      start_new_session=True))
    timed_out = _wait_or_kill(procs, time.monotonic() + RUN_TIMEOUT_S)
    for log in logs:
        log.close()
    checks: dict[str, dict[int, dict]] = {name: {} for name in WORLD_CHECKS[world]}
    tails = {}
    for rank in range(world):
        path = workdir / f"rank{rank}.json"
        if path.exists():
            for name, result in json.loads(path.read_text()).items():
                checks[name][rank] = result
        tails[rank] = (workdir / f"rank{rank}.log").read_text()[-3000:]
    return {"checks": checks, "logs": tails, "returncodes": [p.returncode for p in procs], "timed_out": timed_out}


def _assert_check_passed(backend: str, world: int, name: str) -> None:
    run = _run_ranks(backend, world)
    results = run["checks"][name]
    failed = {rank: r for rank, r in results.items() if r["status"] == "failed"}
    if failed:
        rank, result = min(failed.items())
        pytest.fail(f"{name} failed on rank {rank} of {world} ({backend}):\n{result['detail']}", pytrace=False)
    missing = [rank for rank in range(world) if rank not in results]
    if missing:
        why = f"the run passed its {RUN_TIMEOUT_S} s limit" if run["timed_out"] else "an earlier check failed or a rank died"
        logs = "\n".join(f"--- rank {r} (exit code {run['returncodes'][r]}):\n{run['logs'][r]}" for r in missing)
        pytest.fail(f"{name} did not finish on ranks {missing} of {world} ({backend}): {why}\n{logs}", pytrace=False)
    if any(r["status"] == "skipped" for r in results.values()):
        pytest.skip(results[0]["detail"])


def _params(backend: str) -> list:
    params = []
    for world, names in WORLD_CHECKS.items():
        for name in names:
            missing = _gloo_missing() if backend == "gloo" else _nccl_missing(world)
            marks = [pytest.mark.skipif(bool(missing), reason=missing)]
            if backend == "nccl":
                marks.append(pytest.mark.cuda)
            params.append(pytest.param(world, name, marks=marks, id=f"{name}-{world}ranks"))
    return params


@pytest.mark.parametrize("world, name", _params("gloo"))
def test_gloo_cpu_ranks(world, name):
    _assert_check_passed("gloo", world, name)


@pytest.mark.parametrize("world, name", _params("nccl"))
def test_nccl_gpus(world, name):
    _assert_check_passed("nccl", world, name)


# One process, one rank: the ops on DTensors work whichever of torch_gemm and
# torch.distributed.tensor is imported first, and torch_gemm alone does not import the latter.
_IMPORT_ORDER_SCRIPT = """
import sys, torch, torch.distributed as dist
{first}
{second}
assert torch_gemm.distributed.sharding_strategies_registered()
dist.init_process_group("gloo", init_method="file://{store}", rank=0, world_size=1)
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh
mesh = init_device_mesh("cpu", (1,))
x, w = torch.randn(3, 4), torch.randn(5, 4)
y = torch.ops.gemm.linear_tiled(distribute_tensor(x, mesh, [Shard(0)]), distribute_tensor(w, mesh, [Shard(0)]))
torch.testing.assert_close(y.full_tensor(), x @ w.T)
dist.destroy_process_group()
"""


_TORCH_GEMM_ALONE = "import torch_gemm\nassert 'torch.distributed.tensor' not in sys.modules, 'import torch_gemm loaded DTensor'"
IMPORT_ORDERS = {
    "torch_gemm_first": (_TORCH_GEMM_ALONE, "import torch.distributed.tensor"),
    "dtensor_first": ("import torch.distributed.tensor", "import torch_gemm"),
    # The call imports torch.distributed.tensor, whose hook registers them inside the call.
    "registered_by_hand": (_TORCH_GEMM_ALONE, "assert torch_gemm.distributed.register_sharding_strategies()"),
}


@pytest.mark.skipif(bool(_gloo_missing()), reason=_gloo_missing() or "gloo is available")
@pytest.mark.parametrize("order", IMPORT_ORDERS)
def test_strategies_registered_in_any_import_order(tmp_path, order):
    first, second = IMPORT_ORDERS[order]
    script = _IMPORT_ORDER_SCRIPT.format(first=first, second=second, store=tmp_path / "store")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=_subprocess_env())
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(bool(_gloo_missing()), reason=_gloo_missing() or "gloo is available")
def test_example_trains_on_cpu_ranks(tmp_path):
    """examples/tensor_parallel.py under torchrun on two CPU ranks: a few steps of the swapped,
    tensor- and sequence-parallel decoder, whose losses it checks against an unsharded copy."""
    example = HERE.parent.parent / "examples" / "tensor_parallel.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(example),
           "--device", "cpu", "--steps", "6", "--log-every", "5", "--hidden", "32", "--heads", "4",
           "--tokens", "16", "--sequence-parallel", "--compare"]
    with open(tmp_path / "output.log", "w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_subprocess_env(),
                                start_new_session=True)
        timed_out = _wait_or_kill([proc], time.monotonic() + RUN_TIMEOUT_S)
        log.seek(0)
        output = log.read()
    assert not timed_out, f"the example ran past {RUN_TIMEOUT_S} s:\n{output[-4000:]}"
    assert proc.returncode == 0, output[-4000:]
    assert "2 ranks (gloo, cpu, float32): 2-way tensor parallel with sequence parallelism" in output, output[-4000:]
    assert "step    5  loss" in output and "within" in output, output[-4000:]


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))


def test_rank_device_picks_gloo_without_gpus_for_every_rank():
    from torch_gemm.distributed import rank_device

    assert rank_device("cpu", 0, 2) == ("gloo", torch.device("cpu"))
    assert rank_device("auto", 0, 64) == ("gloo", torch.device("cpu"))  # no node has 64 GPUs here
    with pytest.raises(RuntimeError, match="--device cuda needs 64 GPUs per node"):
        rank_device("cuda", 0, 64)
