"""CPU tests of benchmarks/bench_overhead.py and bench_generate.py: the cases, a whole run at a
few calls per block, the record's rows and their merging. No GPU needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import bench_generate
import bench_overhead
from harness import device as devices

TINY = ["--device", "cpu", "--iters", "2", "--blocks", "1"]


def _record(out: Path) -> dict:
    return json.loads((out / f"{devices.device_slug(torch.device('cpu'))}-overhead.json").read_text())


def test_cases_cover_every_op_and_pass():
    cases = bench_overhead.all_cases()
    assert {c.op for c in cases} == set(bench_overhead.OPS)
    assert {c.pass_ for c in cases} == set(bench_overhead.PASSES)
    linear = [c for c in cases if c.op == "linear"]
    assert {(c.bias, c.x_dim) for c in linear} == {(False, 2), (True, 2), (False, 3), (True, 3)}
    assert len(set(cases)) == len(cases)


@pytest.mark.parametrize("case", bench_overhead.all_cases(), ids=lambda c: c.label)
def test_calls_run_and_compute_gradients(case):
    ours, theirs, shape = bench_overhead.make_calls(case, torch.device("cpu"))
    ours()
    theirs()
    assert shape["M"] > 0 and shape["batch"] >= 1


def test_whole_run_writes_and_merges_the_record(tmp_path, capsys):
    assert bench_overhead.main(TINY + ["--ops", "mm", "linear", "--out", str(tmp_path)]) == 0
    rows = _record(tmp_path)["rows"]
    assert {r["op"] for r in rows} == {"mm", "linear"}
    assert {r["pass"] for r in rows} == {"fwd", "fwd+bwd"}
    for r in rows:
        assert r["device"] == "cpu" and r["us"] > 0 and r["torch_us"] > 0
        # The record rounds the ratio to 3 decimals: near 0.02 (a slow call) that is more than 1 %.
        assert r["ratio"] == pytest.approx(r["torch_us"] / r["us"], rel=0.01, abs=5e-4)
    # A second run of other ops keeps the first run's rows; a rerun of one replaces it.
    assert bench_overhead.main(TINY + ["--ops", "bmm", "--passes", "fwd", "--out", str(tmp_path)]) == 0
    assert bench_overhead.main(TINY + ["--ops", "mm", "--passes", "fwd", "--out", str(tmp_path)]) == 0
    merged = _record(tmp_path)["rows"]
    assert len(merged) == len(rows) + 1
    assert (tmp_path / f"{devices.device_slug(torch.device('cpu'))}-overhead.csv").exists()
    assert "ratio" in capsys.readouterr().out


def test_default_out_and_record_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert bench_overhead.main(TINY + ["--ops", "mm", "--passes", "fwd"]) == 0
    assert _record(tmp_path / "bench_results")["rows"]
    assert f"record: {tmp_path.resolve() / 'bench_results'}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench_overhead.main(TINY + ["--record", "--no-record"])
    assert "drop one" in capsys.readouterr().err


def test_kernel_rows(tmp_path):
    assert bench_overhead.main(TINY + ["--ops", "mm", "--passes", "fwd", "--kernels", "--out", str(tmp_path)]) == 0
    kernels = {r["kernel"] for r in _record(tmp_path)["rows"]}
    assert kernels == {"auto", "blocked"}


def test_bad_arguments_exit_with_a_message():
    with pytest.raises(SystemExit):
        bench_overhead.main(["--device", "cpu", "--iters", "0"])
    with pytest.raises(SystemExit):
        bench_overhead.main(["--ops", "conv"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-CUDA path of bench_generate")
def test_generate_without_cuda_says_so(capsys):
    assert bench_generate.main(["--no-record"]) == 0
    assert "no CUDA device" in capsys.readouterr().out


def test_generate_parser_defaults():
    args = bench_generate.build_parser().parse_args([])
    assert args.modes == ["eager"] and args.batches == [1, 16]
    assert args.layers == bench_generate.LLAMA_1B["num_hidden_layers"]
