"""bench_models' grid, sharding and summary on the CPU (the timing itself needs a GPU)."""

from __future__ import annotations

import json

import bench_models


def test_projections_of_a_width():
    projs = bench_models.projections([4096], [512, 1024, 4096, 8192], [11008, 2048])
    shapes = {(p.name, p.n, p.k) for p in projs}
    assert ("q/o", 4096, 4096) in shapes
    assert {("kv", 512, 4096), ("kv", 1024, 4096)} <= shapes and ("kv", 8192, 4096) not in shapes
    assert ("kv", 4096, 4096) not in shapes  # as wide as q: q's product
    assert {("mlp_up", 11008, 4096), ("mlp_down", 4096, 11008)} <= shapes
    assert not any(p.n == 2048 or p.k == 2048 for p in projs)  # an MLP narrower than the model is none


def test_full_grid_has_widths_off_the_large_tiles_and_every_token_count():
    projs = bench_models.projections(bench_models.WIDTHS, bench_models.KV_WIDTHS, bench_models.MLP_WIDTHS)
    assert any(p.n % 512 for p in projs) and any(p.k % 512 for p in projs)  # 2560, 11008, 6912, ...
    todo = bench_models.cases(projs, bench_models.TOKENS, ["bfloat16", "float16"], (1, 1))
    assert len(todo) == len(projs) * len(bench_models.TOKENS) * 2


def test_shards_partition_the_cases():
    projs = bench_models.projections([2048, 4096], [512], [5632])
    everything = bench_models.cases(projs, [1, 64, 4096], ["bfloat16"], (1, 1))
    shards = [bench_models.cases(projs, [1, 64, 4096], ["bfloat16"], (i, 3)) for i in (1, 2, 3)]
    assert sorted(map(repr, sum(shards, []))) == sorted(map(repr, everything))


def test_summary_by_band_names_the_worst_shape():
    rows = [dict(width=4096, n=1024, k=4096, tokens=t, dtype="bfloat16", **{"pass": "fwd"}, projection="kv",
                 ms=1.0, torch_ms=r, ratio=r) for t, r in ((1, 0.5), (8, 2.0), (256, 1.0), (4096, 1.1))]
    text = bench_models.summary(rows)
    band_1_64 = next(line for line in text.splitlines() if " 1-64 " in line)
    assert "1.000" in band_1_64 and "0.500" in band_1_64 and "1x4096->1024 0.50" in band_1_64
    assert "torch ms / ours" in text


def test_decode_rows_report_the_copy_bandwidth_fraction():
    assert bench_models.is_decode(16, 4096, 4096) and not bench_models.is_decode(17, 4096, 4096)
    assert not bench_models.is_decode(1, 1024, 4096)
    # The weight alone, read once in the time a copy reads and writes it: half the copy's bandwidth.
    assert abs(bench_models.copy_fraction(0, 4096, 4096, 2, ms=1.0, copy_ms=1.0) - 0.5) < 1e-12
    assert bench_models.copy_fraction(1, 4096, 4096, 2, ms=1.0, copy_ms=2.0) > 1.0
    rows = [dict(width=4096, n=4096, k=4096, tokens=t, dtype="bfloat16", **{"pass": "fwd"}, projection="q/o",
                 ms=1.0, torch_ms=r, ratio=r, copy_ms=2 * f, copy_fraction=f)
            for t, r, f in ((1, 1.2, 0.9), (16, 1.1, 0.8))]
    text = bench_models.summary(rows)
    line = next(line for line in text.splitlines() if line.startswith("decode bfloat16"))
    assert "2 shapes" in line and "min 0.800" in line and "16x4096->4096 0.80" in line
    assert f"geomean {(1.2 * 1.1) ** 0.5:.3f}" in line
    plain = bench_models.summary([dict(rows[0], copy_fraction=None)])
    assert not any(line.startswith("decode ") for line in plain.splitlines())


def test_float32_modes_are_dtypes_of_the_sweep(capsys):
    # float32, tf32 and float32-3xtf32 are accepted names, run under harness.dtypes.float32_mode;
    # without CUDA the script says so and exits cleanly.
    assert set(bench_models.FLOAT32_DTYPES) == {"float32", "tf32", "float32-3xtf32"}
    import torch
    if not torch.cuda.is_available():
        assert bench_models.main(["--quick", "--dtypes", "float32-3xtf32", "tf32", "float32"]) == 0
        assert "needs a CUDA GPU" in capsys.readouterr().out


def _shard_record(directory, rows, commit="abc1234", device="NVIDIA H100 80GB HBM3"):
    from harness import records
    path = directory / "nvidia-h100-80gb-hbm3-models.json"
    metadata = {"device": device, "git_commit": commit, "git_dirty": False}
    records.write_merged(path, "bench_models", metadata, rows, bench_models.ROW_KEY, bench_models.ROW_FIELDS)
    return str(path)


def _row(tokens, ratio, dtype="bfloat16"):
    return dict(width=4096, n=1024, k=4096, tokens=tokens, dtype=dtype, **{"pass": "fwd"}, projection="kv",
                ms=1.0, torch_ms=ratio, ratio=ratio)


def test_merge_joins_shards_and_says_whether_the_grid_is_whole(tmp_path, capsys):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a = _shard_record(tmp_path / "a", [_row(1, 0.9), _row(256, 1.1)])
    b = _shard_record(tmp_path / "b", [_row(4096, 1.2)])
    assert bench_models.main(["--merge", a, b, "--out", str(tmp_path / "all"), "--no-plot"]) == 0
    text = capsys.readouterr().out
    merged = json.loads((tmp_path / "all" / "nvidia-h100-80gb-hbm3-models.json").read_text())
    assert sorted(r["tokens"] for r in merged["rows"]) == [1, 256, 4096]
    assert merged["metadata"]["merged_from"] == [a, b]
    assert "NOT the whole grid" in text and "3 of the grid's" in text


def test_merge_refuses_shards_of_different_commits(tmp_path, capsys):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a = _shard_record(tmp_path / "a", [_row(1, 0.9)])
    b = _shard_record(tmp_path / "b", [_row(8, 1.0)], commit="def5678")
    assert bench_models.main(["--merge", a, b, "--out", str(tmp_path / "all"), "--no-plot"]) == 2
    assert "differ in git_commit" in capsys.readouterr().out
    assert not (tmp_path / "all" / "nvidia-h100-80gb-hbm3-models.json").exists()


def test_the_whole_grid_is_recognised():
    rows = [dict(width=p.width, n=p.n, k=p.k, tokens=t, dtype=d, **{"pass": "fwd"})
            for p, t, d in bench_models.cases(bench_models.projections(bench_models.WIDTHS, bench_models.KV_WIDTHS,
                                                                       bench_models.MLP_WIDTHS),
                                              bench_models.TOKENS, ["float16"], (1, 1))]
    assert bench_models.grid_coverage(rows).endswith(": the whole grid")
    assert "NOT the whole grid" in bench_models.grid_coverage([r for r in rows if r["tokens"] != 1])
    assert len({tuple(r[k] for k in bench_models.ROW_KEY[:4]) for r in rows}) == len(rows)  # no product twice
