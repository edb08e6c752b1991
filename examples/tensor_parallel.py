"""Train a small decoder over N ranks with every projection on torch_gemm and tensor-parallel
(DTensor), optionally with sequence parallelism and with FSDP2 over a second mesh dimension:

    torchrun --nproc-per-node 2 examples/tensor_parallel.py                        # TP over 2 ranks
    torchrun --nproc-per-node 2 examples/tensor_parallel.py --sequence-parallel --compare
    torchrun --nproc-per-node 4 examples/tensor_parallel.py --dp 2                 # FSDP2 x TP, 2x2 mesh

With as many GPUs as ranks (and torch_gemm's CUDA kernels) the ranks run on GPUs over NCCL in
bfloat16; otherwise on CPUs over gloo in float32 (--device picks). The task: sequences that count
up from a random start by a random step (mod the vocabulary), learnt from their first tokens.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

import torch_gemm
from torch_gemm.attention import DecoderConfig, TinyDecoder
from torch_gemm.distributed import exit_rank, optimizer_param_groups, parallelize_decoder, rank_device


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: CUDA over NCCL where every rank has a GPU, else CPU over gloo")
    parser.add_argument("--dp", type=int, default=1,
                        help="data-parallel (FSDP2) size; the ranks are dp x tp (default 1: TP only)")
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="shard the norms and the residual stream on the sequence dimension")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16, help="sequences per step, over all data-parallel ranks")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--compare", action="store_true",
                        help="train an unsharded nn.Linear copy beside it on every rank and fail if the "
                             "loss curves part within the first --compare-steps steps (float32: 1e-3 "
                             "relative, bfloat16: 5e-2); later steps are shown, not checked")
    parser.add_argument("--compare-steps", type=int, default=20,
                        help="steps whose losses --compare checks (default: %(default)s): two trainings "
                             "that round differently drift apart, in bfloat16 by tens of percent after "
                             "a few hundred steps, whatever computes their products")
    return parser.parse_args()


def pick_device(choice: str, local_rank: int, local_world: int) -> tuple[str, torch.device, torch.dtype]:
    """(backend, device, dtype) for this rank: bfloat16 on GPUs, float32 on CPUs."""
    try:
        backend, device = rank_device(choice, local_rank, local_world)
    except RuntimeError as e:
        sys.exit(f"tensor_parallel.py: {e}")
    return backend, device, torch.bfloat16 if device.type == "cuda" else torch.float32


def counting_batch(step: int, args: argparse.Namespace, device: torch.device) -> torch.Tensor:
    """(batch, tokens) ids: start + step * t (mod vocab), the same on every rank for a step."""
    gen = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    start = torch.randint(0, args.vocab, (args.batch, 1), generator=gen)
    stride = torch.randint(1, 8, (args.batch, 1), generator=gen)
    return ((start + stride * torch.arange(args.tokens)) % args.vocab).to(device)


def local_numel(model: torch.nn.Module) -> int:
    """Parameters this rank holds: a DTensor's numel() counts the whole tensor."""
    return sum(getattr(p, "to_local", lambda p=p: p)().numel() for p in model.parameters())


def main() -> int:
    args = parse_args()
    if "RANK" not in os.environ:
        sys.exit("tensor_parallel.py: start it with torchrun, e.g. torchrun --nproc-per-node 2 examples/tensor_parallel.py")
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    backend, device, dtype = pick_device(args.device, local_rank, local_world)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.compare_steps < 1:
        sys.exit(f"tensor_parallel.py: --compare-steps must be >= 1, got {args.compare_steps}")
    if args.dp < 1 or world % args.dp != 0:
        sys.exit(f"tensor_parallel.py: --dp {args.dp} does not divide the {world} ranks")
    tp = world // args.dp
    if args.batch % args.dp != 0:
        sys.exit(f"tensor_parallel.py: --batch {args.batch} is not a multiple of --dp {args.dp}")
    mesh = init_device_mesh(device.type, (args.dp, tp), mesh_dim_names=("dp", "tp"))

    # Every rank builds the same model from the same seed; parallelize_decoder keeps each rank's
    # slice of every projection.
    torch.manual_seed(args.seed)
    config = DecoderConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_layers=args.layers,
                           num_heads=args.heads, intermediate_size=4 * args.hidden, max_seq_len=args.tokens)
    model = TinyDecoder(config, device=device, dtype=dtype)
    reference = copy.deepcopy(model) if args.compare else None
    torch_gemm.swap_linear(model, all_linear=True)            # q/k/v/o, the MLP and lm_head
    parallelize_decoder(model, mesh["tp"], sequence_parallel=args.sequence_parallel)
    if args.dp > 1:
        from torch.distributed.fsdp import fully_shard

        # FSDP2 warns where the model returns a view (the logits, which the tensor-parallel lm_head
        # hands back as a view of its local tensor) in case it is modified in place; nothing is.
        warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
        for layer in model.layers:
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    # DTensor and plain parameters apart: the foreach step cannot take a mix of them.
    optimizer = torch.optim.AdamW(optimizer_param_groups(model), lr=args.lr)
    ref_optimizer = torch.optim.AdamW(reference.parameters(), lr=args.lr) if reference is not None else None

    dp_rank = mesh["dp"].get_local_rank()
    if rank == 0:
        what = f"{tp}-way tensor parallel" + (" with sequence parallelism" if args.sequence_parallel else "")
        what += f", FSDP2 over {args.dp}" if args.dp > 1 else ""
        print(f"{world} ranks ({backend}, {device.type}, {str(dtype).removeprefix('torch.')}): {what}; "
              f"{sum(p.numel() for p in model.parameters())} parameters, {local_numel(model)} on this rank")
    tol = 1e-3 if dtype == torch.float32 else 5e-2
    worst, start = 0.0, time.perf_counter()
    for step in range(args.steps):
        ids = counting_batch(step, args, device)
        loss = model(ids.chunk(args.dp)[dp_rank], labels=ids.chunk(args.dp)[dp_rank]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        # Each data-parallel group's loss is its share of the batch; their mean is the batch's.
        mean = loss.detach().float().clone()
        dist.all_reduce(mean, group=mesh["dp"].get_group())
        mean = mean.item() / args.dp
        line = f"step {step:4d}  loss {mean:.4f}"
        if reference is not None:
            ref_loss = reference(ids, labels=ids).loss
            ref_loss.backward()
            ref_optimizer.step()
            ref_optimizer.zero_grad(set_to_none=True)
            if step < args.compare_steps:
                worst = max(worst, abs(mean - ref_loss.item()) / abs(ref_loss.item()))
            line += f"  (unsharded nn.Linear model: {ref_loss.item():.4f})"
        if rank == 0 and (step % args.log_every == 0 or step == args.steps - 1):
            print(line, flush=True)
    if rank == 0:
        print(f"{args.steps} steps in {time.perf_counter() - start:.1f} s")
    failed = reference is not None and worst > tol
    if rank == 0 and reference is not None:
        print(f"largest relative difference from the unsharded model's loss over the first "
              f"{min(args.compare_steps, args.steps)} steps: {worst:.2e} ({'above' if failed else 'within'} {tol:g})")
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    exit_rank(main())
