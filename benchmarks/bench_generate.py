"""Greedy generation of a small transformers Llama with every Linear on torch_gemm, against the
same model on torch's nn.Linear: tokens per second, where host time per call decides the pace.

The model is built from a config (random weights, no download): Llama-3.2-1B's shape by default
(width 2048, 16 layers, 32 query and 8 key/value heads, MLP 8192, vocabulary 128256, tied
embeddings), bf16. Its twin shares every Parameter and has every nn.Linear swapped
(``swap_linear(all_linear=True)``, the LM head included). Each rep generates ``--new-tokens``
tokens greedily (KV cache, ``min_new_tokens`` so that both sides make every token) from a random
prompt, the torch model and the twin alternating rep by rep; the figure is the median.
Modes: ``eager``, and ``compile`` (a static cache, under which transformers compiles each
decoding step with ``torch.compile(mode="reduce-overhead")``).

Usage::

    python benchmarks/bench_generate.py                   # eager, batch 1 and 16
    python benchmarks/bench_generate.py --modes eager compile --batches 1

Rows merge into ``<out>/<gpu>-generate.json`` (``<out>``: ./bench_results unless --out or
--record says otherwise; docs/benchmarks.md; rows: mode, batch, prompt, new_tokens,
tokens_per_s, torch_tokens_per_s, ratio = ours / torch, same_tokens = the fraction of generated
tokens equal to torch's; bf16 rounding differs between the kernels, so greedy paths may part).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Optional, Sequence

import torch

from torch_gemm.nn import swap_linear

from harness import cli, device as devices, records, timing

HOST_TIMER = "time.perf_counter around generate(), synchronized; median of reps, sides alternating"

# Llama-3.2-1B's shape.
LLAMA_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, vocab_size=128256, max_position_embeddings=4096,
                tie_word_embeddings=True, rope_theta=500000.0)
ROW_FIELDS = ("mode", "batch", "prompt", "new_tokens", "tokens_per_s", "torch_tokens_per_s", "ratio",
              "same_tokens", "reps", "git_commit")
ROW_KEY = ("mode", "batch", "prompt", "new_tokens")


def build_twins(layers: int, device: torch.device) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(torch model, swapped twin) sharing every Parameter and buffer, in bf16 on `device`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{**LLAMA_1B, "num_hidden_layers": layers})
    config.pad_token_id = 0
    torch.manual_seed(0)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with device:
            base = LlamaForCausalLM(config).eval()
            twin = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default_dtype)
    twin.load_state_dict(base.state_dict(), assign=True)
    if config.tie_word_embeddings:
        twin.tie_weights()
    swap_linear(twin, all_linear=True)
    return base, twin


def generate_fn(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int, static: bool):
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                  pad_token_id=0, attention_mask=torch.ones_like(prompt))
    if static:
        from transformers import CompileConfig

        # transformers compiles the decoding step itself under a static cache
        # (torch.compile, mode "reduce-overhead", CUDA graphs), marking each step for the graphs.
        kwargs["cache_implementation"] = "static"
        kwargs["compile_config"] = CompileConfig(fullgraph=False, mode="reduce-overhead")

    @torch.no_grad()
    def run() -> torch.Tensor:
        return model.generate(prompt, **kwargs)

    return run


def measure(base, twin, mode: str, batch: int, prompt_len: int, new_tokens: int, reps: int,
            device: torch.device, commit: Optional[str]) -> dict:
    gen = torch.Generator(device=device).manual_seed(batch)
    prompt = torch.randint(1, base.config.vocab_size, (batch, prompt_len), device=device, generator=gen)
    static = mode == "compile"
    runs = [generate_fn(m, prompt, new_tokens, static) for m in (base, twin)]
    outs = [run() for run in runs]  # warm-up (and, compiled, the compilations)
    outs = [run() for run in runs]
    seconds = timing.alternating_host_times(runs, device, reps, wait=True)
    tokens = batch * new_tokens
    theirs, ours = (tokens / statistics.median(s) for s in seconds)
    generated = [o[:, prompt_len:] for o in outs]
    same = (generated[0] == generated[1]).float().mean().item()
    return {"mode": mode, "batch": batch, "prompt": prompt_len, "new_tokens": new_tokens,
            "tokens_per_s": round(ours, 1), "torch_tokens_per_s": round(theirs, 1),
            "ratio": round(ours / theirs, 3), "same_tokens": round(same, 3), "reps": reps,
            "git_commit": commit}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench_generate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", choices=("eager", "compile"), default=["eager"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens (default: %(default)s)")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens generated a rep (default: %(default)s)")
    parser.add_argument("--layers", type=int, default=LLAMA_1B["num_hidden_layers"],
                        help="decoder layers (default: %(default)s, Llama-3.2-1B's)")
    parser.add_argument("--reps", type=int, default=5, help="timed reps a side (default: %(default)s)")
    cli.add_output_args(parser, "<gpu>-generate.json/.csv")
    parser.add_argument("--no-record", action="store_true", help="print the rows only, write no record")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = cli.output_dir(args, parser)
    if not torch.cuda.is_available():
        print("bench_generate.py: no CUDA device; nothing to measure")
        return 0
    try:
        import transformers
    except ImportError:
        print("bench_generate.py: transformers is not installed; nothing to measure")
        return 0
    device = torch.device("cuda")
    commit, dirty = records.git_state()
    for line in devices.build_lines(device):
        print(line)
    if not args.no_record:
        print(cli.output_note(out))
    base, twin = build_twins(args.layers, device)
    print(f"{devices.device_name(device)}: Llama ({args.layers} layers, width {LLAMA_1B['hidden_size']}), bf16, "
          f"transformers {transformers.__version__}, prompt {args.prompt}, {args.new_tokens} new tokens", flush=True)
    rows = []
    for mode in args.modes:
        for batch in args.batches:
            try:
                row = measure(base, twin, mode, batch, args.prompt, args.new_tokens, args.reps, device, commit)
            except Exception as e:  # noqa: BLE001  (a mode transformers does not allow: say so, go on)
                print(f"  {mode:7s} batch {batch:3d}: not measured ({type(e).__name__}: {e})", flush=True)
                continue
            rows.append(row)
            print(f"  {mode:7s} batch {batch:3d}: ours {row['tokens_per_s']:8.1f} tok/s   torch "
                  f"{row['torch_tokens_per_s']:8.1f} tok/s   ratio {row['ratio']:.3f}   "
                  f"same tokens {row['same_tokens']:.2f}", flush=True)
    if args.no_record or not rows:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{devices.device_slug(device)}-generate.json"
    metadata = records.run_metadata(devices.device_fields(device), commit, dirty, timer=HOST_TIMER,
                                    script="benchmarks/bench_generate.py", argv=argv)
    metadata.update(transformers=transformers.__version__, model={**LLAMA_1B, "num_hidden_layers": args.layers})
    records.write_host_timed_record(path, "bench_generate.py", metadata, rows, ROW_KEY, ROW_FIELDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
