"""tune_multistage's mirror of the plan and its fit on the CPU (the timing itself needs a GPU)."""

from __future__ import annotations

import random

import pytest

import torch_gemm
import tune_multistage as tm


def test_mirror_chooses_as_the_header_plans():
    """The Python model the fit searches is plan_multistage's: the same choice on the grid's
    products and random ones, for several SM counts and batches."""
    rng = random.Random(61)
    shapes = [(M, N, K, 1) for M, N, K in tm.grid_products(tm.TOKENS)[::7]]
    shapes += [(rng.choice([1, 3, 64, 65, 128, 300, 1000, 4097]), rng.randint(1, 30000), rng.randint(0, 30000),
                rng.choice([1, 1, 2, 7])) for _ in range(400)]
    for sms in (16, 114, 132):
        for M, N, K, batch in shapes:
            plan = torch_gemm._C.multistage_plan(M, N, K, sm_count=sms, batch=batch)
            tile, splits = tm.choose(M, N, K, sms, tm.HEADER_MODEL, batch)
            assert (tile, splits) == ("x".join(map(str, plan["tile"])), plan["split_k"]), (M, N, K, sms, batch)
            weighed = [(f"{c['tile'][0]}x{c['tile'][1]}", c["split_k"]) for c in plan["candidates"]]
            assert weighed == [(t, s) for t, s, _ in tm.candidates(M, N, K, sms, tm.HEADER_MODEL, batch)]


def test_every_plan_the_model_weighs_is_timed():
    for M, N, K in [(16, 4096, 4096), (256, 5120, 28672), (2048, 2560, 28672), (64, 256, 8192)]:
        options = tm.options_for(M, N, K, 132)
        for tile, splits, _ in tm.candidates(M, N, K, 132, tm.HEADER_MODEL):
            assert tm.option_name(tile, splits) in options
        assert len(options) == len(set(options))


def test_fit_keeps_the_header_where_its_choices_are_the_fastest():
    """Times that follow the header's model exactly: the fit measures its large-tile rate and
    keeps its constants, and its choice is the best plan on every product."""
    sms, model = 132, dict(tm.HEADER_MODEL)
    rows = []
    for M, N, K in [(256, 5120, 28672), (2048, 2560, 28672), (4096, 4096, 4096), (128, 2560, 2560), (32, 8192, 4096)]:
        times = {tm.option_name(t, s): ns * 1e-6 for t, s, ns in tm.candidates(M, N, K, sms, model)}
        for option in tm.options_for(M, N, K, sms):
            ms = times.get(option, 2 * max(times.values()))
            rows.append(dict(M=M, N=N, K=K, option=option, ms=ms))
        chosen = times[tm.option_name(*tm.choose(M, N, K, sms, model))]
        rows += [dict(M=M, N=N, K=K, option="auto", ms=chosen), dict(M=M, N=N, K=K, option="torch", ms=chosen)]
    result = tm.fit(rows, sms)
    assert result["model"]["large_fmas_per_sm_ns"] == pytest.approx(model["large_fmas_per_sm_ns"], rel=1e-6)
    assert {k: result["model"][k] for k in tm.FIT_GRID} == {k: model[k] for k in tm.FIT_GRID}
    assert result["score"]["model"] == pytest.approx(1.0) and result["score"]["products"] == 5
    assert "torch / choice" in tm.fit_text(result)
