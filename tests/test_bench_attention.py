"""CPU tests of benchmarks/bench_attention.py: counting, the command line, the record (rows,
merging, CSV, plot) and the check that keeps a wrong swapped module from being timed. Whole runs
go through ``--device cpu`` at tiny sizes; no GPU needed."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import pytest
import torch

import bench_attention
import torch_gemm.ops
from harness import cli, device as devices, gate, timing

# Tiny sizes and a timing budget of a few ms per measurement: a whole run takes about a second.
TINY = ["--device", "cpu", "--widths", "32", "--tokens", "16,24", "--head-dim", "16", "--batch", "2",
        "--bias-width", "32", "--bias-tokens", "20", "--warmup-ms", "0", "--rep-ms", "2"]


def _record_path(out: Path) -> Path:
    return out / f"{devices.device_slug(torch.device('cpu'))}-attention.json"


# ---------------------------------------------------------------------------------------------
# Counting and cases.


def test_intermediate_size():
    assert bench_attention.intermediate_size(4096) == 14336  # Llama-3-8B
    assert bench_attention.intermediate_size(2048) == 7168
    assert bench_attention.intermediate_size(8192) == 28672
    assert bench_attention.intermediate_size(32) == 128  # tiny widths round to a multiple of themselves


def test_flops():
    Case = bench_attention.Case
    attention = Case("attention", "bfloat16", 256, 1024, batch=2)
    projections = 2.0 * 1024 * 4 * 256**2
    scores = 2.0 * 2 * 512**2 * 256  # causal: half of QKᵀ and PV over 2 sequences of 512
    assert bench_attention.flops(attention, "fwd") == projections + scores
    assert bench_attention.flops(attention, "fwd+bwd") == 3 * projections + 3.5 * scores
    layer = Case("decoder_layer", "bfloat16", 4096, 8192)
    mlp = 2.0 * 8192 * 3 * 4096 * 14336
    assert bench_attention.flops(layer, "fwd") == pytest.approx(2.0 * 8192 * 4 * 4096**2 + mlp + 2.0 * 8192**2 * 4096)
    bias = Case("linear_bias", "bfloat16", 4096, 8192)
    assert bench_attention.flops(bias, "fwd") == 2.0 * 8192 * 4096**2
    assert bench_attention.tflops_of(2e12, 1000.0) == pytest.approx(2.0)
    assert bench_attention.tflops_of(2e12, None) is None


def test_build_cases_order():
    cases = bench_attention.build_cases(["attention", "decoder_layer", "linear_bias"], ["bfloat16", "float32"],
                                        [2048, 4096], [1024, 2048], 1, ("bfloat16", 4096, 8192))
    assert len(cases) == 2 * 2 * 2 * 2 + 1
    assert [(c.dtype, c.module, c.width, c.tokens) for c in cases[:3]] == [
        ("bfloat16", "attention", 2048, 1024),
        ("bfloat16", "attention", 2048, 2048),
        ("bfloat16", "attention", 4096, 1024),
    ]
    assert cases[-1] == bench_attention.Case("linear_bias", "bfloat16", 4096, 8192, 1)
    assert bench_attention.Case("attention", "float32", 64, 96, batch=3).seq_len == 32


def test_defaults_match_the_issue():
    assert bench_attention.DEFAULT_WIDTHS == (2048, 4096, 8192)
    assert bench_attention.DEFAULT_TOKENS == (2048, 4096, 8192, 16384)
    assert bench_attention.DEFAULT_DTYPES == ("bfloat16", "float32")
    bias_case = (bench_attention.BIAS_WIDTH, bench_attention.BIAS_TOKENS, bench_attention.BIAS_DTYPE)
    assert bias_case == (4096, 8192, "bfloat16")
    assert bench_attention.HEAD_DIM == 128


def test_parse_lists():
    assert cli.split_list(["a,b", "c", "a"]) == ["a", "b", "c"]
    assert cli.parse_ints(["2048,4096", "8192"], "--widths") == [2048, 4096, 8192]
    assert cli.parse_ints(None, "--widths") == []
    for bad in ("0", "-3", "4k", "1.5"):
        with pytest.raises(ValueError, match=f"--tokens: '{bad}' is not a positive integer"):
            cli.parse_ints([bad], "--tokens")


def test_rel_diff():
    a = torch.randn(4, 5)
    assert gate.rel_diff([a, a], [a, a]) == 0.0
    assert gate.rel_diff([a * (1 + 1e-3)], [a]) == pytest.approx(1e-3, rel=1e-3)
    assert gate.rel_diff([a, a * 1.1], [a, a]) == pytest.approx(0.1, rel=1e-3)  # the worst of the tensors
    nan = a.clone()
    nan[0, 0] = math.nan
    assert math.isnan(gate.rel_diff([nan], [a]))
    assert math.isnan(gate.rel_diff([a[:-1]], [a]))


# ---------------------------------------------------------------------------------------------
# Command line.


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dtypes", "int8"], "--dtypes: unknown dtype 'int8'"),
        (["--modules", "mlp"], "--modules: unknown module 'mlp'"),
        (["--passes", "bwd"], "--passes: unknown pass 'bwd'"),
        (["--widths", "100"], "--widths: 100 not a multiple of --head-dim 128"),
        (["--tokens", "1000", "--batch", "3"], "--tokens: 1000 not a multiple of --batch 3"),
        (["--widths", "abc"], "--widths: 'abc' is not a positive integer"),
        (["--batch", "0"], "--batch must be a positive integer"),
        (["--quick", "--widths", "4096"], "--quick picks its own"),
        (["--kernel", "no_such_kernel"], "--kernel: 'no_such_kernel' is not available for cpu"),
        (["--swap", "mlp"], "invalid choice: 'mlp'"),
    ],
)
def test_cli_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_attention.run(["--device", "cpu", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_without_cuda_says_so_and_exits_zero(tmp_path, capsys):
    assert bench_attention.main(["--quick", "--out", str(tmp_path)]) == 0
    assert "torch sees no CUDA device; nothing measured" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())


def test_quick_config():
    cfg = bench_attention.parse_args(["--device", "cpu", "--quick"])
    modules = [c for c in cfg.cases if c.module != "linear_bias"]
    assert {(c.dtype, c.width, c.tokens) for c in modules} == {("bfloat16", 4096, 4096), ("float32", 4096, 4096)}
    assert {c.module for c in modules} == {"attention", "decoder_layer"} and len(modules) == 4
    assert cfg.cases[-1] == bench_attention.Case("linear_bias", "bfloat16", 4096, 8192)
    assert cfg.passes == ["fwd", "fwd+bwd"] and cfg.quick


# ---------------------------------------------------------------------------------------------
# Whole runs on the CPU.


def test_run_writes_record(tmp_path, capsys):
    rows = bench_attention.run([*TINY, "--dtypes", "float32", "--out", str(tmp_path)])
    # (attention, decoder_layer) x 2 token counts x 2 passes, and the bias case's 2 passes.
    assert len(rows) == 2 * 2 * 2 + 2
    assert all(r["status"] == "OK" for r in rows), [r for r in rows if r["status"] != "OK"]
    out = capsys.readouterr().out
    assert "decoder_layer" in out and "fwd+bwd" in out and "baseline ms / ms: above 1, torch_gemm is faster" in out

    record = json.loads(_record_path(tmp_path).read_text())
    assert set(record) == {"metadata", "rows"} and len(record["rows"]) == len(rows)
    meta = record["metadata"]
    for key in ("device", "torch", "git_commit", "date", "tf32", "timer", "command", "head_dim", "kernel", "swap"):
        assert key in meta, key
    assert meta["tf32"] == {"bfloat16": False, "float32": False} and meta["head_dim"] == 16
    for r in record["rows"]:
        assert set(r) == set(bench_attention.ROW_FIELDS)
        assert r["module"] in bench_attention.MODULES and r["pass"] in bench_attention.PASSES
        assert r["dtype"] == ("bfloat16" if r["module"] == "linear_bias" else "float32")
        assert r["rel_diff"] <= r["tol"]
        for key in ("ms", "torch_ms", "baseline_ms", "ratio"):
            assert isinstance(r[key], float) and r[key] > 0, key
        assert r["ratio"] == pytest.approx(r["baseline_ms"] / r["ms"])
        if r["module"] == "linear_bias":
            assert (r["width"], r["tokens"], r["baseline"]) == (32, 20, "linear_tiled without bias")
            assert r["heads"] is None and r["swapped"] is None
        else:
            assert r["baseline"] == "torch" and r["baseline_ms"] == r["torch_ms"]
            assert (r["width"], r["batch"], r["heads"], r["seq_len"] * 2) == (32, 2, 2, r["tokens"])
            assert r["swapped"] == ("all" if r["module"] == "attention" else "attention")
            assert (r["intermediate"] is not None) == (r["module"] == "decoder_layer")

    with (tmp_path / f"{_record_path(tmp_path).stem}.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows) and list(table[0]) == list(bench_attention.ROW_FIELDS)
    if bench_attention_has_matplotlib():
        png = tmp_path / f"{_record_path(tmp_path).stem}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def bench_attention_has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_run_merges_with_existing_record(tmp_path, monkeypatch):
    def run_timed_at(ms, tokens):
        # A fixed "time" per run tells which run a row in the merged record came from.
        monkeypatch.setattr(timing, "time_ms", lambda fn, device, timing: (fn(), ms)[1])
        bench_attention.run([*TINY, "--tokens", tokens, "--dtypes", "float32", "--modules", "attention",
                             "--passes", "fwd", "--no-plot", "--out", str(tmp_path)])

    run_timed_at(1.0, "16,24")
    run_timed_at(2.0, "24,32")
    record = json.loads(_record_path(tmp_path).read_text())
    assert {r["tokens"]: r["ms"] for r in record["rows"]} == {16: 1.0, 24: 2.0, 32: 2.0}
    assert "--tokens 24,32" in record["metadata"]["command"]
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("failure", ["perturbed", "nan", "raises"])
def test_wrong_swapped_module_is_reported_and_never_timed(tmp_path, monkeypatch, failure):
    real = torch_gemm.ops.linear_tiled
    timed = []

    def broken(x, weight, bias=None, *, kernel="auto"):
        if failure == "raises":
            raise RuntimeError("gemm::linear_tiled: launch failed\nsecond line")
        out = real(x, weight, bias, kernel=kernel)
        return out * (math.nan if failure == "nan" else 1.1)  # 10%: beyond every dtype's bound

    def spy_time_ms(fn, device, timing):
        timed.append(fn)
        return 1.0

    # Modules reach linear_tiled through torch_gemm.ops, the bias case through the package.
    monkeypatch.setattr(torch_gemm.ops, "linear_tiled", broken)
    monkeypatch.setattr(bench_attention.torch_gemm, "linear_tiled", broken)
    monkeypatch.setattr(timing, "time_ms", spy_time_ms)
    argv = [*TINY, "--tokens", "16", "--dtypes", "float32", "--no-plot", "--out", str(tmp_path)]
    rows = bench_attention.run(argv)
    expected = "ERROR" if failure == "raises" else "WRONG"
    assert len(rows) == 6 and all(r["status"] == expected for r in rows)
    for r in rows:
        assert r["ms"] is None and r["ratio"] is None and r["tflops"] is None
        assert r["torch_ms"] == 1.0  # the torch side is still measured
    if failure == "raises":
        assert all(r["error"] == "RuntimeError: gemm::linear_tiled: launch failed" for r in rows)
    elif failure == "nan":
        assert all(r["rel_diff"] is None for r in rows)  # NaN is stored as null; the status says why
    else:
        assert all(r["rel_diff"] > r["tol"] for r in rows)
    assert len(timed) == len(rows)  # only the torch sides were timed
    assert bench_attention.main(argv) == 1


def test_corrupt_record_stops_before_measuring(tmp_path, monkeypatch):
    _record_path(tmp_path).write_text("{not json")
    monkeypatch.setattr(timing, "time_ms", lambda *args: pytest.fail("measured despite a corrupt record"))
    with pytest.raises(SystemExit, match="is not valid JSON"):
        bench_attention.run([*TINY, "--out", str(tmp_path)])


# ---------------------------------------------------------------------------------------------
# Output.


def _row(module="attention", pass_name="fwd", dtype="bfloat16", width=4096, tokens=4096, ratio=0.5, status="OK"):
    ms = 2.0 if status == "OK" else None
    return {"module": module, "pass": pass_name, "dtype": dtype, "width": width, "tokens": tokens, "batch": 1,
            "kernel": "auto", "swapped": "all", "status": status, "ms": ms, "torch_ms": 1.0,
            "baseline_ms": 1.0, "ratio": ratio if status == "OK" else None, "tflops": 10.0 if ms else None,
            "torch_tflops": 20.0, "rel_diff": 1e-3, "tol": 3e-2, "error": None}


def test_merge_records():
    old = {"metadata": {"device": "X", "date": "old", "kept": 1},
           "rows": [_row(tokens=2048), _row(tokens=4096), _row(module="decoder_layer")]}
    merged = bench_attention.merge_records(old, {"device": "X", "date": "new"},
                                           [_row(tokens=4096, ratio=0.9), _row(pass_name="fwd+bwd")])
    assert merged["metadata"] == {"device": "X", "date": "new", "kept": 1}
    got = [(r["module"], r["pass"], r["tokens"], r["ratio"]) for r in merged["rows"]]
    assert got == [("attention", "fwd", 2048, 0.5), ("attention", "fwd", 4096, 0.9),
                   ("attention", "fwd+bwd", 4096, 0.5), ("decoder_layer", "fwd", 4096, 0.5)]


def test_format_table():
    rows = [_row(), _row(status="WRONG"), dict(_row(status="ERROR"), error="RuntimeError: boom")]
    lines = bench_attention.format_table(rows).splitlines()
    assert lines[0].split()[:5] == ["module", "pass", "dtype", "width", "tokens"]
    assert lines[2].endswith("OK") and "0.500" in lines[2]
    assert lines[3].endswith("WRONG (tol 3e-02)") and lines[4].endswith("ERROR: RuntimeError: boom")
    # The legend under the table defines the columns and says where the method is written down.
    legend = {line.split()[0]: line for line in lines[5:] if line.startswith("  ")}
    assert set(legend) >= {"ms", "baseline", "ratio", "TFLOP/s", "rel_diff"}
    assert "baseline ms / ms" in legend["ratio"]
    assert lines[-1].endswith("docs/benchmarks.md")


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(m, p, d, w, t, ratio=0.01 * t / w) for m in ("attention", "decoder_layer") for p in ("fwd", "fwd+bwd")
            for d in ("bfloat16", "float32") for w in (2048, 4096) for t in (2048, 4096, 8192)]
    rows.append(_row("linear_bias", ratio=0.98))
    path = bench_attention.plot_record({"metadata": {"device": "Test GPU"}, "rows": rows}, tmp_path / "t.png")
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert bench_attention.plot_record({"rows": [_row("linear_bias")]}, tmp_path / "none.png") is None


def test_plot_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    assert bench_attention.plot_record({"rows": [_row()]}, tmp_path / "t.png") is None
    assert "needs matplotlib" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
