"""Timing: median milliseconds of one call on the device, and host microseconds per call.

On CUDA, a call is timed with CUDA events, after a warm-up, with the L2 flushed before every rep
(as ``triton.testing.do_bench`` does, and through it when triton is installed). Ours and torch's
side are timed interleaved (``time_interleaved``): rep by rep in turn, the order rotating, so
that both meet the same clocks. Timed one after the other, the first of two runs on a cooler GPU
(an H200 under a long GEMM drops from 1980 MHz to ~1500 at its 700 W cap; torch.mm timed twice in
a row read 773 and then 707 TFLOP/s at 4096³ bf16). Input sets small enough to sit in L2 are
rotated (``n_input_sets``, ``rotating``) so that no rep finds its inputs there. On the CPU, calls
are timed one after the other with ``time.perf_counter`` (median).

Host time (``time_host_pair``, ``alternating_host_times``): ``time.perf_counter`` around blocks
of calls, the sides alternating block by block.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

from harness.device import l2_bytes, sync


@dataclass(frozen=True)
class Timing:
    """Time budget of one measurement, as in ``triton.testing.do_bench``."""

    warmup_ms: float = 25.0
    rep_ms: float = 100.0


# Without triton, the hand-rolled CUDA timer zeroes this many bytes before every rep, at least
# twice the L2 (as triton does with its 256 MiB buffer), so no rep finds its inputs in L2.
MIN_FLUSH_BYTES = 256 * 2**20
# The CPU timer's reps: enough for a median, few enough for a 1-minute --quick on 2 cores.
CPU_MIN_REPS, CPU_MAX_REPS = 3, 50
# Input sets for rotation: enough that the sets together are at least twice the L2.
MAX_INPUT_SETS = 64


@functools.lru_cache(maxsize=None)
def _triton_do_bench() -> Optional[Callable[..., Any]]:
    try:
        from triton.testing import do_bench
    except ImportError:
        return None
    return do_bench


def timer_name(device: torch.device) -> str:
    """How ``time_ms`` times a call on ``device``."""
    if device.type != "cuda":
        return "time.perf_counter (median)"
    if _triton_do_bench() is not None:
        return "triton.testing.do_bench (CUDA events, median, L2 flushed)"
    return "CUDA events (median, L2 flushed by hand)"


def pair_timer_name(device: torch.device) -> str:
    """How ``time_interleaved`` times ours against torch's side on ``device``."""
    if device.type != "cuda":
        return timer_name(device)
    return "CUDA events, ours and torch interleaved rep by rep (median, L2 flushed)"


def _time_cuda_events(fn: Callable[[], object], device: torch.device, budget: Timing) -> float:
    """triton's do_bench by hand, for when triton is missing: ``_time_interleaved_cuda`` over
    one callable."""
    return _time_interleaved_cuda([fn], device, budget)[0]


def _time_cpu(fn: Callable[[], object], budget: Timing) -> float:
    """Warm up for warmup_ms (at least one call), then time reps sized by the fastest warm-up
    call: a slow first call (thread pool start, page faults) must not shrink the sample."""
    warm_ms: list[float] = []
    deadline = time.perf_counter() + budget.warmup_ms * 1e-3
    while not warm_ms or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        warm_ms.append((time.perf_counter() - t0) * 1e3)
    n_rep = min(CPU_MAX_REPS, max(CPU_MIN_REPS, int(budget.rep_ms / max(min(warm_ms), 1e-3))))
    times = []
    for _ in range(n_rep):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _time_interleaved_cuda(fns: Sequence[Callable[[], object]], device: torch.device,
                           budget: Timing) -> list[float]:
    """triton's do_bench by hand, over several callables at once: estimate each, warm up, then in
    every rep flush the L2 (by writing a buffer of at least twice its size) before each callable
    and time it with an event pair, the order rotating from rep to rep, so that every callable
    meets the same clocks and temperatures. Median milliseconds of each."""
    flush = torch.empty(max(2 * l2_bytes(device), MIN_FLUSH_BYTES) // 4, dtype=torch.int32, device=device)
    for fn in fns:
        fn()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    estimates = []
    for fn in fns:
        start.record()
        for _ in range(5):
            flush.zero_()
            fn()
        end.record()
        torch.cuda.synchronize(device)
        estimates.append(max(start.elapsed_time(end) / 5, 1e-3))
    for _ in range(max(1, int(budget.warmup_ms / sum(estimates)))):
        for fn in fns:
            fn()
    n_rep = max(1, int(budget.rep_ms / max(estimates)))
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(n_rep)] for _ in fns]
    for r in range(n_rep):
        for i in range(len(fns)):
            k = (i + r) % len(fns)
            flush.zero_()
            events[k][r][0].record()
            fns[k]()
            events[k][r][1].record()
    torch.cuda.synchronize(device)
    return [statistics.median(s.elapsed_time(e) for s, e in per_fn) for per_fn in events]


def time_interleaved(fns: Sequence[Callable[[], object]], device: torch.device, budget: Timing) -> list[float]:
    """Median milliseconds of one call of each of ``fns``, timed rep by rep in turn on CUDA (see
    ``_time_interleaved_cuda``); elsewhere one after the other with ``time_ms``."""
    if device.type == "cuda":
        return _time_interleaved_cuda(fns, device, budget)
    return [time_ms(fn, device, budget) for fn in fns]


def time_ms(fn: Callable[[], object], device: torch.device, budget: Timing) -> float:
    """Median milliseconds of one call of ``fn`` on ``device``."""
    if device.type == "cuda":
        do_bench = _triton_do_bench()
        if do_bench is not None:
            return float(do_bench(fn, warmup=budget.warmup_ms, rep=budget.rep_ms, return_mode="median"))
        return _time_cuda_events(fn, device, budget)
    return _time_cpu(fn, budget)


# ---------------------------------------------------------------------------------------------
# Inputs rotated through the L2.


def n_input_sets(set_bytes: int, l2: int) -> int:
    """How many input sets to rotate through: one when a set does not fit in L2, else enough that
    the sets together are at least twice the L2, so a set is evicted before it comes round again
    even if a flush were incomplete."""
    if l2 <= 0 or set_bytes >= l2:
        return 1
    return min(MAX_INPUT_SETS, math.ceil(2 * l2 / set_bytes))


def rotating(fn: Callable[..., object], sets: Sequence[tuple]) -> Callable[[], object]:
    """A no-argument call of ``fn`` on the next input set, round robin."""
    cycle: Iterator[tuple] = itertools.cycle(sets)
    return lambda: fn(*next(cycle))


# ---------------------------------------------------------------------------------------------
# Host time.


def alternating_host_times(fns: Sequence[Callable[[], object]], device: torch.device, rounds: int, calls: int = 1,
                           wait: bool = False) -> list[list[float]]:
    """Seconds per call of each of ``fns``, one figure per round: in every round each callable
    runs ``calls`` times under ``time.perf_counter``, the order rotating from round to round.
    The device is synchronized before each block; with ``wait`` also inside the timed span, at
    its end (the block's device work counted), else not (only what the host spends enqueueing)."""
    times: list[list[float]] = [[] for _ in fns]
    for r in range(rounds):
        for i in range(len(fns)):
            k = (i + r) % len(fns)
            sync(device)
            start = time.perf_counter()
            for _ in range(calls):
                fns[k]()
            if wait:
                sync(device)
            times[k].append((time.perf_counter() - start) / calls)
    sync(device)
    return times


def time_host_pair(ours: Callable[[], object], theirs: Callable[[], object], device: torch.device,
                   iters: int, blocks: int) -> tuple[float, float]:
    """Median µs per call of each, over ``blocks`` alternating blocks of ``iters`` calls; the
    device synchronized before each block and not inside it (a block enqueues far fewer launches
    than CUDA's queue holds, so the host never waits on the GPU)."""
    # Warm-up: first-call work (module loads, caches, allocator pools, threads), torch's first as
    # a model's own layers would run before a swapped one.
    for fn in (theirs, ours):
        for _ in range(max(3, iters // 4)):
            fn()
    ours_s, theirs_s = alternating_host_times([ours, theirs], device, blocks, iters)
    return statistics.median(ours_s) * 1e6, statistics.median(theirs_s) * 1e6
