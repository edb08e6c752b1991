"""tune_plan's grid and fit on the CPU (the timing itself needs an sm_90 GPU)."""

from __future__ import annotations

import json

import tune_plan


def _row(M, N, K, option, ms, layout="NT"):
    return dict(M=M, N=N, K=K, layout=layout, dtype="bfloat16", option=option, ms=ms)


def test_grid_has_the_three_products_of_each_projection():
    products = tune_plan.grid_products([4096], [256])
    assert (256, 4096, 4096, "NT") in products and (256, 4096, 4096, "NN") in products
    assert (4096, 4096, 256, "TN") in products
    assert (256, 14336, 4096, "NT") in products and (256, 4096, 14336, "NN") in products
    assert len(products) == len(set(products))


def test_grid_takes_other_key_value_and_mlp_widths():
    products = tune_plan.grid_products([8192], [1], kv=[1024], mlp=[28672])
    assert (1, 28672, 8192, "NN") in products and (1, 1024, 8192, "NT") in products
    assert not any(n == 14336 or k == 14336 for _, n, k, _ in products)


def test_fit_recovers_the_tile_cost_and_the_pairing_threshold():
    sms = 132
    rows = []
    # 128x128 tiles at 0.6 of a 128x256 tile's time per round: 1024x4096 (128 wide tiles, 1 round;
    # 256 medium, 2 rounds) and 2048x5632 (352 wide, 3 rounds; 704 medium, 6 rounds).
    for M, N, K, wide_rounds, medium_rounds in ((1024, 4096, 4096, 1, 2), (2048, 5632, 2048, 3, 6)):
        rows += [_row(M, N, K, "128x256", 10.0 * wide_rounds), _row(M, N, K, "128x128", 6.0 * medium_rounds)]
    # One wave of 128x256 tiles (2048x2048: 128 tiles): pairs slower at 16 k-tiles, not at 32.
    rows += [_row(2048, 2048, 1024, "128x256", 11.0), _row(2048, 2048, 1024, "128x256-unpaired", 10.0),
             _row(2048, 2048, 2048, "128x256", 10.0), _row(2048, 2048, 2048, "128x256-unpaired", 10.1)]
    # auto against the options: best on one product, 20% off on another.
    rows += [_row(1024, 4096, 4096, "auto", 10.0), _row(2048, 5632, 2048, "auto", 36.0)]
    result = tune_plan.fit(rows, sms)
    assert abs(result["medium_tile_cost"] - 0.6) < 1e-9 and result["medium_tile_cost_samples"] == 2
    assert result["pair_one_wave_min_k_tiles"] == 17
    assert result["auto_scored"] == 2 and result["auto_best"] == 1
    worst = result["auto_worst"][0]
    assert worst[0] == 1.2 and worst[1][:3] == [2048, 5632, 2048] and worst[2] == "128x256"
    text = tune_plan.fit_text(result)
    assert "kMediumTileCostTenths: 6" in text and "kPairOneWaveMinKTiles: 17" in text


def test_fit_recovers_the_192_column_tile_cost_from_the_paired_tiles_of_either_b():
    # 1024x2560: 80 tiles of 128x256 and 112 of 128x192, one round each; 2048x2560: 160 and 224, two.
    # Paired 128x192 tiles, as the plan runs them with a K-major (NT) or an N-major (NN) B; the
    # unpaired ones are not the plan's, and are ignored.
    rows = []
    for M, layout in ((1024, "NT"), (2048, "NN")):
        rounds = M // 1024
        rows += [_row(M, 2560, 4096, "128x256", 10.0 * rounds, layout),
                 _row(M, 2560, 4096, "128x192", 8.0 * rounds, layout),
                 _row(M, 2560, 4096, "128x192-unpaired", 99.0, layout)]
    result = tune_plan.fit(rows, 132)
    assert abs(result["mid_tile_cost"] - 0.8) < 1e-9 and result["mid_tile_cost_samples"] == 2
    assert "kMidTileCostTenths: 8" in tune_plan.fit_text(result)


def test_fit_of_a_record_file(tmp_path, capsys):
    path = tmp_path / "x-plan.json"
    rows = [_row(1024, 4096, 4096, "128x256", 10.0), _row(1024, 4096, 4096, "128x128", 12.0)]
    path.write_text(json.dumps({"metadata": {"sm_count": 132}, "rows": rows}))
    assert tune_plan.main(["--fit", str(path)]) == 0
    assert "kMediumTileCostTenths: 6" in capsys.readouterr().out
