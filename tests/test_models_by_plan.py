"""models_by_plan on the CPU: a bench_models record's rows mapped to the products they timed and
grouped by the plan explain gives them (the plan is CPU code)."""

from __future__ import annotations

import json

import pytest

import models_by_plan


def _row(tokens, n, k, name, ratio, dtype="bfloat16"):
    return dict(width=4096, n=n, k=k, tokens=tokens, dtype=dtype, **{"pass": name}, projection="q/o",
                ms=1.0, torch_ms=ratio, ratio=ratio)


@pytest.mark.parametrize("name, product", [
    ("fwd", (256, 2560, 4096, "NT")),   # linear_tiled(x, W): x (256, 4096), W (2560, 4096)
    ("dx", (256, 4096, 2560, "NN")),    # grad (256, 2560) · W (2560, 4096)
    ("dw", (2560, 4096, 256, "TN")),    # grad.T (2560, 256) · x (256, 4096)
])
def test_rows_map_to_the_products_they_timed(name, product):
    assert models_by_plan.product_of(_row(256, 2560, 4096, name, 1.0)) == product


def test_operands_have_the_layouts_strides():
    a, b = models_by_plan.operands(8, 16, 32, "TN", models_by_plan.torch.bfloat16)
    assert a.shape == (8, 32) and a.stride() == (1, 8)      # grad.T: M-major
    assert b.shape == (32, 16) and b.stride() == (16, 1)    # x: N-major


def test_plan_label_names_tile_split_pairs_and_fill():
    one_round = {"kernel": "wgmma_sm90", "plan": dict(tile=(128, 256), split_k=1, cluster=2, stream_k=False,
                                                       turns=40, grid=80)}
    assert models_by_plan.plan_label(one_round, 132) == "wgmma_sm90, 128x256, pairs, 1 round, <70% busy"
    split = {"kernel": "wgmma_sm90", "plan": dict(tile=(64, 128), split_k=2, cluster=1, stream_k=False,
                                                   turns=64, grid=128)}
    assert models_by_plan.plan_label(split, 132) == "wgmma_sm90, 64x128, split 2, single, 1 round, >=90% busy"
    groups = {"kernel": "wgmma_sm90", "plan": dict(tile=(64, 256), split_k=8, split_groups=4, cluster=1,
                                                    stream_k=False, turns=1, grid=32)}
    assert models_by_plan.plan_label(groups, 132) == \
        "wgmma_sm90, 64x256, split 8 x 4 clusters, single, 1 round, <70% busy"
    assert models_by_plan.plan_label({"kernel": "gemv", "plan": None}, 132) == "gemv"


def test_report_orders_groups_by_total_loss(tmp_path, capsys):
    # 1024 tokens against 2560 x 2560 and 2560 x 4096 weights: 128x192 tiles on 132 SMs; 8192
    # tokens against 4096 x 4096: 128x256, many rounds. The first group loses more in total (two
    # rows at 0.8) than the second (one at 0.7).
    rows = [_row(1024, 2560, 2560, "fwd", 0.8), _row(1024, 2560, 4096, "fwd", 0.8),
            _row(8192, 4096, 4096, "fwd", 0.7), _row(8192, 4096, 4096, "fwd+bwd", 0.1)]
    path = tmp_path / "x-models.json"
    path.write_text(json.dumps({"metadata": {"sm_count": 132, "device": "test"}, "rows": rows}))
    assert models_by_plan.main([str(path)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("fwd ")]
    assert len(lines) == 2, out  # fwd+bwd has no single plan
    assert "128x192" in lines[0] and "128x256" in lines[1] and "8 rounds" in lines[1]
    assert "1024x2560x4096 NT 0.80" in lines[0]


def test_a_record_without_sm_count_is_refused(tmp_path):
    path = tmp_path / "x-models.json"
    path.write_text(json.dumps({"metadata": {}, "rows": [_row(1, 256, 256, "fwd", 1.0)]}))
    with pytest.raises(SystemExit):
        models_by_plan.main([str(path)])
