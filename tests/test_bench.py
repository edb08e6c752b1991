"""CPU tests of the benchmark's own logic (benchmarks/harness, benchmarks/bench_mm.py and
benchmarks/report.py): counting, shape parsing, the record format and its merging, and the
correctness gate that keeps a wrong kernel from being timed. No GPU, triton or matplotlib needed.
The scripts and the harness import through pytest's pythonpath (pyproject.toml)."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_gemm

import bench_mm
import report
from harness import device as devices, gate, peaks, records, timing

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# Timing budget for in-process runs: a few ms per measurement keeps every run well under a second.
FAST = ["--device", "cpu", "--warmup-ms", "0", "--rep-ms", "2"]


@pytest.fixture(autouse=True)
def small_copy_buffer(monkeypatch):
    """The copy-bandwidth measurement's 256 MiB buffer is for real runs; 1 MiB exercises it."""
    monkeypatch.setitem(peaks.COPY_BYTES, "cpu", 2**20)


# ---------------------------------------------------------------------------------------------
# Counting and shapes.


def test_flops_and_bytes():
    assert peaks.flops(4096, 4096, 4096) == 2 * 4096**3
    assert peaks.flops(3, 5, 7) == 210
    # A (M×K) + B (K×N) + C (M×N), each once, at the dtype's width; tf32 tensors are float32.
    assert peaks.bytes_moved(2, 3, 5, "float32") == (10 + 15 + 6) * 4
    assert peaks.bytes_moved(2, 3, 5, "tf32") == (10 + 15 + 6) * 4
    assert peaks.bytes_moved(2, 3, 5, "bfloat16") == (10 + 15 + 6) * 2
    assert peaks.bytes_moved(2, 3, 5, "float16") == (10 + 15 + 6) * 2
    assert peaks.bytes_moved(2, 3, 5, "float64") == (10 + 15 + 6) * 8
    assert peaks.tflops_of(1000, 1000, 1000, 2.0) == pytest.approx(1.0)


def test_is_decode():
    assert peaks.is_decode(1, 4096, 4096)
    assert peaks.is_decode(256, 14336, 4096)
    assert peaks.is_decode(3, 5120, 13824)
    assert not peaks.is_decode(257, 4096, 4096)
    assert not peaks.is_decode(256, 256, 256)


def test_parse_shapes_items_presets_and_dedup():
    assert bench_mm.parse_shapes("4096x4096x4096, 8X16x32") == [(4096, 4096, 4096), (8, 16, 32)]
    assert bench_mm.parse_shapes(["1x2x3", "1x2x3,4x5x6"]) == [(1, 2, 3), (4, 5, 6)]
    mixed = bench_mm.parse_shapes("7x7x7,square")
    assert mixed[0] == (7, 7, 7) and mixed[1:] == list(bench_mm.PRESETS["square"])


def test_presets():
    p = bench_mm.PRESETS
    assert p["square"] == tuple((n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192))
    llm = bench_mm.parse_shapes("llm")
    # tokens 512..16384 against (K, N) = 4096x4096, QKV 4096->12288, MLP 4096->14336, 14336->4096
    assert len(llm) == 6 * 4 and len(set(llm)) == len(llm)
    for shape in [(512, 4096, 4096), (16384, 12288, 4096), (2048, 14336, 4096), (8192, 4096, 14336)]:
        assert shape in llm
    decode = set(p["decode"])
    for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        assert {(m, 4096, 4096), (m, 14336, 4096), (m, 4096, 14336)} <= decode
    assert {(4095, 4095, 4095), (4097, 4096, 4096), (1000, 1000, 1000), (3, 5120, 13824)} <= set(p["odd"])


@pytest.mark.parametrize(
    "spec, message",
    [
        ("4096x4096", "bad shape '4096x4096'"),
        ("axbxc", "bad shape 'axbxc'"),
        ("4x4x4x4", "bad shape"),
        ("-1x2x3", "bad shape '-1x2x3'"),
        ("0x8x8", "at least 1"),
        ("squares", "preset name (square, llm, decode, odd)"),
        (" , ", "no shapes given"),
    ],
)
def test_parse_shapes_rejects(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bench_mm.parse_shapes(spec)


def test_quick_sets():
    cuda = bench_mm.quick_cases("cuda")
    nn = {c.shape for c in cuda if c.layout == "NN"}
    assert {(1024,) * 3, (2048,) * 3, (4096,) * 3, (4095,) * 3, (1000,) * 3} <= nn
    others = [c for c in cuda if c.layout != "NN"]
    assert sorted(c.layout for c in others) == ["NT", "TN", "TT"]
    assert all(c.kernels == ("auto",) and c.shape == (4096,) * 3 for c in others)
    assert max(peaks.flops(*c.shape) for c in bench_mm.quick_cases("cpu")) <= peaks.flops(1024, 1024, 1024)


def test_build_plan_skips_slow_kernels_above_cap():
    kernels = {"bfloat16": ["auto", "naive", "smem16", "smem32", "wgmma"]}
    tasks, notes = bench_mm.build_plan(
        bench_mm.quick_cases("cuda"), ["bfloat16"], kernels, bench_mm.QUICK_SLOW_FLOP_CAP
    )
    by_case = {(t.case.shape, t.case.layout): t.kernels for t in tasks}
    assert by_case[((2048,) * 3, "NN")] == ("auto", "naive", "smem16", "smem32", "wgmma")
    assert by_case[((4096,) * 3, "NN")] == ("auto", "wgmma")
    assert by_case[((4096,) * 3, "NT")] == ("auto",)
    assert any("naive, smem16, smem32 at 4096x4096x4096 NN bfloat16" in n for n in notes)
    assert not any(" NT " in n for n in notes)  # NT cases never had the slow kernels in them
    tasks, notes = bench_mm.build_plan(bench_mm.quick_cases("cuda"), ["bfloat16"], kernels, math.inf)
    assert not notes and all("naive" in t.kernels for t in tasks if t.case.layout == "NN")


# ---------------------------------------------------------------------------------------------
# Names and peaks.


def test_gpu_slug():
    assert devices.gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert devices.gpu_slug("NVIDIA H200") == "nvidia-h200"
    assert devices.gpu_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb"
    assert devices.gpu_slug("  Weird/Name (x) ") == "weird-name-x"
    slug = devices.device_slug(torch.device("cpu"))
    assert slug.startswith("cpu-") and slug == devices.gpu_slug(slug)


@pytest.mark.parametrize(
    "name, entry, bf16",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.5),
        ("NVIDIA H100 NVL", "H100 NVL", 835.5),
        ("NVIDIA H200", "H200 SXM", 989.5),
        ("NVIDIA H200 NVL", "H200 NVL", 835.5),
        ("NVIDIA GH200 480GB", "GH200", 989.5),
        ("NVIDIA A100-SXM4-80GB", "A100", 312.0),
        ("NVIDIA A100 80GB PCIe", "A100", 312.0),
        ("NVIDIA L40S", "L40S", 362.05),
        ("NVIDIA L4", "L4", 121.0),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2),
    ],
)
def test_lookup_peak(name, entry, bf16):
    found, peak = peaks.lookup_peak(name)
    assert found == entry and peak["bfloat16"] == bf16
    assert set(peak) == {"float32", "tf32", "float32-3xtf32", "bfloat16", "float16"}
    assert peak["float32"] <= peak["tf32"] <= peak["bfloat16"] == peak["float16"]
    assert peak["float32-3xtf32"] == peak["tf32"] / 3


def test_lookup_peak_unknown():
    assert peaks.lookup_peak("Some Future GPU") == (None, {})


def test_parse_peak_override():
    assert peaks.parse_peak_override("100")["bfloat16"] == 100.0
    assert peaks.parse_peak_override("bfloat16=989.5, float32=67") == {"bfloat16": 989.5, "float32": 67.0}
    for bad in ("bf16=3", "bfloat16=x", "-5", "bfloat16=0", ","):
        with pytest.raises(ValueError):
            peaks.parse_peak_override(bad)


# ---------------------------------------------------------------------------------------------
# Inputs and correctness.


@pytest.mark.parametrize("layout", bench_mm.LAYOUTS)
def test_make_operands_layouts(layout):
    a, b = bench_mm.make_operands(bench_mm.Case(3, 5, 7, layout), torch.float32, torch.device("cpu"))
    assert a.shape == (3, 7) and b.shape == (7, 5)
    assert a.is_contiguous() == (layout[0] == "N") and a.t().is_contiguous() == (layout[0] == "T")
    assert b.is_contiguous() == (layout[1] == "N") and b.t().is_contiguous() == (layout[1] == "T")
    assert a.std() > 0 and b.std() > 0  # random, not zeros or ones


def test_n_input_sets():
    assert timing.n_input_sets(10, 0) == 1  # CPU: no rotation
    assert timing.n_input_sets(100, 50) == 1  # one set already exceeds L2
    assert timing.n_input_sets(10, 50) == 10  # sets together at least twice the L2
    assert timing.n_input_sets(1, 50 * 2**20) == timing.MAX_INPUT_SETS


def test_tolerance():
    assert gate.tolerance("float32", 0.5) == gate.FLOAT32_TOL
    assert gate.tolerance("float64", 0.5) == gate.FLOAT64_TOL
    assert gate.tolerance("bfloat16", 2e-3) == pytest.approx(4e-3)
    assert gate.tolerance("tf32", 0.0) == gate.FLOAT32_TOL  # never stricter than float32
    assert gate.tolerance("tf32", 3e-4) == pytest.approx(6e-4)
    assert gate.tolerance("float16", 0.0) == gate.REDUCED_TOL_FLOOR


def test_check_correct():
    a, b = torch.randn(20, 30, dtype=torch.float64), torch.randn(30, 10, dtype=torch.float64)
    ref = a @ b
    ok, err = gate.check_correct(ref.float(), ref, 1e-5)
    assert ok and 0 <= err < 1e-6
    ok, err = gate.check_correct(ref * (1 + 1e-3), ref, 1e-5)
    assert not ok and err == pytest.approx(1e-3)
    nan = ref.clone()
    nan[3, 4] = math.nan
    assert gate.check_correct(nan, ref, math.inf) == (False, pytest.approx(math.nan, nan_ok=True))
    inf = ref.clone()
    inf[0, 0] = math.inf
    assert not gate.check_correct(inf, ref, math.inf)[0]
    assert not gate.check_correct(ref[:-1], ref, math.inf)[0]  # wrong shape, even if broadcastable


# ---------------------------------------------------------------------------------------------
# Rows and records.


def _outcomes():
    ok = bench_mm.Outcome("auto", "OK", ms=2.0, rel_err=1e-7)
    wrong = bench_mm.Outcome("naive", "WRONG", rel_err=math.nan)
    torch_o = bench_mm.Outcome("torch.mm", "OK", ms=1.0, rel_err=2e-7)
    return ok, wrong, torch_o


def test_make_rows():
    ok, wrong, torch_o = _outcomes()
    case = bench_mm.Case(1000, 1000, 1000, "NT")
    rows = bench_mm.make_rows(case, "float32", [ok, wrong], torch_o, tol=1e-5, peak_tflops=4.0,
                              copy_gbps=100.0, git_commit="abc")
    good, bad = rows
    assert set(good) == set(bench_mm.ROW_FIELDS)
    assert (good["op"], good["kernel"], good["layout"], good["M"]) == ("mm_tiled", "auto", "NT", 1000)
    assert good["tflops"] == pytest.approx(1.0) and good["torch_tflops"] == pytest.approx(2.0)
    assert good["ratio"] == pytest.approx(0.5) and good["pct_peak"] == pytest.approx(25.0)
    assert good["bw_pct"] is None  # not a decode shape
    assert bad["status"] == "WRONG" and bad["tflops"] is None and bad["ms"] is None and bad["ratio"] is None
    assert bad["rel_err"] is None  # NaN is stored as null; the status says why
    assert bad["torch_tflops"] == pytest.approx(2.0)

    decode = bench_mm.make_rows(bench_mm.Case(1, 4096, 4096), "bfloat16", [ok], torch_o, tol=1e-3,
                                peak_tflops=None, copy_gbps=100.0, git_commit=None)[0]
    expected_gbps = peaks.bytes_moved(1, 4096, 4096, "bfloat16") / 2e-3 / 1e9
    assert decode["bw_pct"] == pytest.approx(100 * expected_gbps / 100.0)
    assert decode["torch_bw_pct"] == pytest.approx(2 * decode["bw_pct"])
    assert decode["pct_peak"] is None


def _row(kernel, M, tflops, dtype="float32"):
    return {"op": "mm_tiled", "kernel": kernel, "dtype": dtype, "layout": "NN", "M": M, "N": M, "K": M,
            "status": "OK", "tflops": tflops, "torch_tflops": 10.0, "ratio": tflops / 10.0}


def test_merge_records():
    old = {"metadata": {"device": "X", "date": "old", "kept": 1},
           "rows": [_row("auto", 1024, 1.0), _row("smem32", 1024, 2.0), _row("auto", 512, 3.0)]}
    new_rows = [_row("auto", 1024, 5.0), _row("auto", 256, 6.0), _row("auto", 1024, 7.0, dtype="bfloat16")]
    merged = bench_mm.merge_records(old, {"device": "X", "date": "new"}, new_rows)
    assert merged["metadata"] == {"device": "X", "date": "new", "kept": 1}
    got = {(r["kernel"], r["dtype"], r["M"]): r["tflops"] for r in merged["rows"]}
    assert got == {("auto", "float32", 1024): 5.0, ("smem32", "float32", 1024): 2.0,
                   ("auto", "float32", 512): 3.0, ("auto", "float32", 256): 6.0,
                   ("auto", "bfloat16", 1024): 7.0}
    assert bench_mm.merge_records(None, {"a": 1}, new_rows)["rows"] == bench_mm.merge_records({}, {}, new_rows)["rows"]


# ---------------------------------------------------------------------------------------------
# Whole runs, in-process, on tiny CPU shapes.

META_TYPES = {"device": str, "torch": str, "git_commit": (str, type(None)), "date": str, "tf32": dict,
              "copy_gbps": float, "peak_tflops": dict, "command": str, "quick": bool, "timer": str}


def test_run_writes_record(tmp_path, capsys):
    rows = bench_mm.run([*FAST, "--shapes", "24x40x56,8x1024x1024", "--dtype", "float32,bfloat16",
                         "--layout", "NN", "TN", "--out", str(tmp_path)])
    kernels = torch_gemm_kernels()
    assert len(rows) == 2 * 2 * 2 * len(kernels)
    assert all(r["status"] == "OK" for r in rows)
    out = capsys.readouterr().out
    assert "TFLOP/s" in out and "24x40x56" in out and "bfloat16" in out

    slug = devices.device_slug(torch.device("cpu"))
    record = json.loads((tmp_path / f"{slug}.json").read_text())
    assert set(record) == {"metadata", "rows"}
    for key, typ in META_TYPES.items():
        assert isinstance(record["metadata"][key], typ), key
    assert record["metadata"]["device"] == devices.cpu_name()
    assert len(record["rows"]) == len(rows)
    for r in record["rows"]:
        assert set(r) == set(bench_mm.ROW_FIELDS)
        assert r["op"] == "mm_tiled" and r["kernel"] in kernels and r["status"] == "OK"
        assert r["dtype"] in ("float32", "bfloat16") and r["layout"] in ("NN", "TN")
        assert all(isinstance(r[k], int) for k in "MNK")
        for k in ("tflops", "torch_tflops", "ratio", "ms", "torch_ms", "rel_err", "torch_rel_err", "tol"):
            assert isinstance(r[k], float) and r[k] >= 0, k
        assert r["ratio"] == pytest.approx(r["tflops"] / r["torch_tflops"])
        assert r["rel_err"] <= r["tol"]
        assert (r["bw_pct"] is not None) == (r["M"] == 8)  # only the decode-like shape

    with (tmp_path / f"{slug}.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows) and list(table[0]) == list(bench_mm.ROW_FIELDS)


def torch_gemm_kernels():
    return bench_mm.torch_gemm.available_kernels("cpu", torch.float32)


def torch_gemm_built_with_cuda():
    return bench_mm.torch_gemm._C.built_with_cuda()


def test_run_merges_with_existing_record(tmp_path, monkeypatch):
    def run_timed_at(ms, shapes):
        # A fixed "time" per run tells which run a row in the merged record came from.
        monkeypatch.setattr(timing, "time_ms", lambda fn, device, timing: ms)
        bench_mm.run([*FAST, "--shapes", shapes, "--dtype", "float32", "--kernel", "auto", "--out", str(tmp_path)])

    run_timed_at(1.0, "16x16x16,32x32x32")
    run_timed_at(2.0, "32x32x32,48x48x48")
    record = json.loads((tmp_path / f"{devices.device_slug(torch.device('cpu'))}.json").read_text())
    assert {r["M"]: r["ms"] for r in record["rows"]} == {16: 1.0, 32: 2.0, 48: 2.0}
    assert "--shapes 32x32x32,48x48x48" in record["metadata"]["command"]  # metadata of the latest run


@pytest.mark.parametrize("failure", ["perturbed", "nan", "raises"])
def test_wrong_kernel_is_reported_and_never_timed(tmp_path, monkeypatch, failure):
    calls = {"auto": 0, "blocked": 0}
    real_mm = bench_mm.torch_gemm.mm_tiled

    def flaky_mm(a, b, *, kernel="auto"):
        calls[kernel] += 1
        c = real_mm(a, b, kernel=kernel)
        if kernel != "blocked":
            return c
        if failure == "raises":
            raise RuntimeError("gemm::mm_tiled: launch of kernel 'blocked' failed\nsecond line")
        return c.fill_(math.nan) if failure == "nan" else c * (1 + 1e-3)

    def spy_time_ms(fn, device, timing):
        fn()
        return 1.0

    monkeypatch.setattr(bench_mm.torch_gemm, "mm_tiled", flaky_mm)
    monkeypatch.setattr(timing, "time_ms", spy_time_ms)
    args = [*FAST, "--shapes", "64x48x32,33x17x9", "--dtype", "float32", "--kernel", "auto,blocked",
            "--out", str(tmp_path)]
    rows = bench_mm.run(args)
    by_kernel = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    assert all(r["status"] == "OK" and r["tflops"] is not None for r in by_kernel["auto"])
    expected = "ERROR" if failure == "raises" else "WRONG"
    for r in by_kernel["blocked"]:
        assert r["status"] == expected
        assert r["tflops"] is None and r["ms"] is None and r["ratio"] is None
        assert r["torch_tflops"] is not None  # the baseline is still measured
    if failure == "perturbed":
        assert all(r["rel_err"] == pytest.approx(1e-3, rel=1e-2) for r in by_kernel["blocked"])
    if failure == "raises":
        message = "RuntimeError: gemm::mm_tiled: launch of kernel 'blocked' failed"  # first line only
        assert all(r["error"] == message for r in by_kernel["blocked"])
    # Two shapes: the wrong kernel ran once per shape (its check) and never under the timer;
    # the good one ran for its check and once more in the (spy) timer.
    assert calls == {"auto": 4, "blocked": 2}
    assert bench_mm.main(args) == 1


def test_corrupt_record_stops_before_measuring(tmp_path, monkeypatch):
    (tmp_path / f"{devices.device_slug(torch.device('cpu'))}.json").write_text("{not json")
    monkeypatch.setattr(timing, "time_ms", lambda *args: pytest.fail("measured despite a corrupt record"))
    with pytest.raises(SystemExit, match="is not valid JSON"):
        bench_mm.run([*FAST, "--shapes", "8x8x8", "--out", str(tmp_path)])


def test_exit_status_zero_when_all_correct(tmp_path):
    assert bench_mm.main([*FAST, "--shapes", "8x8x8", "--dtype", "float32", "--out", str(tmp_path)]) == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--shapes", "4096x4096"], "--shapes: bad shape '4096x4096'"),
        (["--shapes", "bogus"], "preset name"),
        (["--layout", "NX"], "--layout: unknown layout 'NX'"),
        (["--dtype", "int8"], "--dtype: unknown dtype 'int8'"),
        (["--kernel", "no_such_kernel"], "--kernel: 'no_such_kernel' is not available for cpu"),
        (["--quick", "--shapes", "square"], "--quick picks its own shapes"),
        (["--peak-tflops", "fp8=3"], "--peak-tflops: bad peak 'fp8=3'"),
        (["--slow-gflop-cap", "-1"], "--slow-gflop-cap must be"),
        (["--device", "tpu"], "invalid choice: 'tpu'"),
    ],
)
def test_cli_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_mm.run(["--device", "cpu", *argv] if "--device" not in argv else argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cli_cuda_without_gpu(capsys):
    with pytest.raises(SystemExit):
        bench_mm.run(["--device", "cuda"])
    assert "torch sees no CUDA device" in capsys.readouterr().err


def test_tf32_on_cpu_is_skipped(tmp_path, capsys):
    assert bench_mm.run([*FAST, "--dtype", "tf32", "--shapes", "8x8x8", "--out", str(tmp_path)]) == []
    assert "skipping dtype tf32 on the CPU" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_format_table():
    ok, wrong, torch_o = _outcomes()
    rows = bench_mm.make_rows(bench_mm.Case(8, 8, 8), "float32", [ok, wrong], torch_o, tol=1e-5,
                              peak_tflops=None, copy_gbps=None, git_commit=None)
    lines = bench_mm.format_table(rows).splitlines()
    assert lines[0].split() == ["shape", "layout", "dtype", "kernel", "TFLOP/s", "torch.mm", "ratio", "%peak",
                                "%BW", "rel_err", "status"]
    assert "WRONG (tol 1.0e-05)" in lines[3] and lines[2].endswith("OK")
    # Under the table: what a row compares, every column defined, and where the method is.
    assert "against torch.mm, same inputs, same run" in lines[4]
    legend = {line.split()[0]: line for line in lines[5:] if line.startswith("  ")}
    assert set(legend) == {"layout", "TFLOP/s", "torch.mm", "ratio", "%peak", "%BW", "rel_err"}
    assert "above 1, torch_gemm is faster" in legend["ratio"]
    assert lines[-1] == "Method and columns: docs/benchmarks.md"


def test_format_table_marks_torch_slow_paths(monkeypatch):
    """A ratio against a known-slow torch path (CPU 16-bit matmul without oneDNN) is marked,
    and the legend says why."""
    ok, _, torch_o = _outcomes()
    rows = [row for dtype in ("float32", "bfloat16")
            for row in bench_mm.make_rows(bench_mm.Case(8, 8, 8), dtype, [ok], torch_o, tol=1e-3,
                                          peak_tflops=None, copy_gbps=None, git_commit=None)]
    monkeypatch.setattr(devices, "torch_slow_path",
                        lambda device_type, dtype: "no fast path" if dtype == "bfloat16" else None)
    lines = bench_mm.format_table(rows, "cpu").splitlines()
    assert lines[2].split()[6] == "0.500" and lines[3].split()[6] == "0.500" + bench_mm.SLOW_MARK
    mark_lines = [line for line in lines if line.strip().startswith(bench_mm.SLOW_MARK)]
    assert len(mark_lines) == 1 and "no fast path" in mark_lines[0] and "slow path" in mark_lines[0]


def test_torch_slow_path(monkeypatch):
    assert devices.torch_slow_path("cuda", "bfloat16") is None
    assert devices.torch_slow_path("cpu", "float32") is None
    # Without oneDNN, torch's CPU bfloat16/float16 matmul takes its generic fallback.
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert "bfloat16" in devices.torch_slow_path("cpu", "bfloat16")
    assert "float16" in devices.torch_slow_path("cpu", "float16")


# ---------------------------------------------------------------------------------------------
# What a new user meets first: the header, where the record goes, the docs it points to.


def test_header_names_the_build_and_the_record(tmp_path, capsys):
    bench_mm.run([*FAST, "--shapes", "8x8x8", "--dtype", "float32,bfloat16", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    compiled = "compiled" if torch_gemm_built_with_cuda() else "not compiled (CPU kernels only)"
    assert f"bench_mm: torch_gemm {bench_mm.torch_gemm.__version__} from " in out
    assert f"; CUDA kernels: {compiled}\n" in out
    kernels = ", ".join(torch_gemm_kernels())
    assert f"bench_mm: kernels timed on cpu: float32, bfloat16: {kernels}\n" in out
    assert f"bench_mm: record: {tmp_path.resolve()} (--out DIR elsewhere; --record" in out


@pytest.mark.parametrize("cuda_kernels, possible, shown", [(False, True, True), (False, False, False),
                                                           (True, True, False)])
def test_header_says_how_to_get_the_cuda_kernels(monkeypatch, cuda_kernels, possible, shown):
    """Where the CUDA kernels were not compiled but a GPU or nvcc is here, the header says how
    to get them (torch_gemm.build_info's hint, which names CUDA_HOME / TORCH_GEMM_FORCE_CUDA)."""
    hint = "TORCH_GEMM_FORCE_CUDA=1 CUDA_HOME=<toolkit> pip install --no-build-isolation -e ."
    info = {"cuda_kernels": cuda_kernels, "kernels": {"cpu": ["blocked"], "cuda": []},
            "hint": None if cuda_kernels else hint}
    monkeypatch.setattr(bench_mm.torch_gemm, "build_info", lambda: info)
    monkeypatch.setattr(devices, "_cuda_possible", lambda: possible)
    lines = devices.build_lines(torch.device("cpu"))
    assert lines[1] == "kernels compiled for cpu: blocked"
    assert (f"to get the CUDA kernels: {hint}" in lines) == shown


def test_default_out_is_not_the_checkout(tmp_path, monkeypatch, capsys):
    """Without --out, a run writes ./bench_results under the current directory and leaves the
    checkout's committed records alone."""
    def snapshot():
        return {p.name: p.stat().st_mtime_ns for p in records.RESULTS_DIR.iterdir()}

    before = snapshot()
    monkeypatch.chdir(tmp_path)
    bench_mm.run([*FAST, "--shapes", "8x8x8", "--dtype", "float32"])
    slug = devices.device_slug(torch.device("cpu"))
    assert (tmp_path / "bench_results" / f"{slug}.json").exists()
    assert snapshot() == before
    assert f"record: {tmp_path.resolve() / 'bench_results'} (--out DIR elsewhere" in capsys.readouterr().out


def test_record_flag_writes_the_checkout_records(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    monkeypatch.setattr(records, "RESULTS_DIR", results)
    bench_mm.run([*FAST, "--shapes", "8x8x8", "--dtype", "float32", "--record"])
    assert (results / f"{devices.device_slug(torch.device('cpu'))}.json").exists()
    assert f"record: {results} (the checkout's committed records)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        bench_mm.run([*FAST, "--record", "--out", str(tmp_path / "elsewhere")])
    assert exc.value.code == 2 and "drop --out" in capsys.readouterr().err


def test_default_out_is_ignored_by_git():
    """Run from the checkout's root, the default output folder must not show in `git status`."""
    if shutil.which("git") is None or not (records.REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    probe = f"{records.DEFAULT_OUT_NAME}/{devices.device_slug(torch.device('cpu'))}.json"
    result = subprocess.run(["git", "-C", str(records.REPO_ROOT), "check-ignore", "-q", probe])
    assert result.returncode == 0, f"{probe} is not ignored: add {records.DEFAULT_OUT_NAME}/ to .gitignore"


BENCH_SOURCES = sorted([*BENCHMARKS.glob("*.py"), *BENCHMARKS.glob("harness/*.py")])
# sys.path edited: inserted into, appended to, assigned.
PATH_TRICK = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend)\b|\[[^\]]*\]\s*=|\+?=)")


@pytest.mark.parametrize("path", BENCH_SOURCES, ids=lambda p: p.relative_to(BENCHMARKS).as_posix())
def test_sources_stand_alone(path):
    """The benchmarks cite the docs users have (docs/benchmarks.md), not the design file, and
    reach the harness without sys.path tricks."""
    text = path.read_text()
    assert "DESIGN" not in text
    assert not PATH_TRICK.search(text)


def test_tests_use_no_path_tricks():
    for path in sorted(Path(__file__).parent.glob("test_bench*.py")):
        assert not PATH_TRICK.search(path.read_text()), path.name


def test_docs_exist_for_what_the_scripts_cite():
    doc = records.REPO_ROOT / "docs" / "benchmarks.md"
    assert doc.exists()
    text = doc.read_text()
    for script in ("bench_mm.py", "bench_attention.py", "bench_backward.py", "bench_overhead.py",
                   "bench_generate.py", "report.py"):
        assert script in text, script
    for column in ("ratio", "%peak", "%BW", "rel_err", "rel_diff"):
        assert f"`{column}`" in text, column


# ---------------------------------------------------------------------------------------------
# Plots.


def _synthetic_record():
    rows = [dict(_row(k, n, t), layout="NN") for n in (256, 512, 1024) for k, t in (("auto", n / 100), ("naive", 1.0))]
    rows += [dict(_row("auto", 0, 5.0), M=m, N=n, K=k, ratio=0.5)
             for m, n, k in bench_mm.PRESETS["llm"][:8] + bench_mm.PRESETS["decode"][:8]]
    return {"metadata": {"device": "Test GPU", "peak_tflops": {"float32": 20.0}}, "rows": rows}


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    written = bench_mm.plot_record(_synthetic_record(), tmp_path, "test-gpu")
    assert [p.name for p in written] == ["test-gpu-square.png", "test-gpu-ratio.png"]
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    assert bench_mm.plot_record(_synthetic_record(), tmp_path, "test-gpu") == []
    assert "needs matplotlib" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------
# report.py


def test_report_summarize_and_render():
    rows = [_row("auto", 1024, 4.0), _row("naive", 1024, 1.0), _row("smem32", 1024, 3.0),
            dict(_row("wgmma", 1024, 0.0), status="WRONG", tflops=None),
            _row("auto", 512, 2.0, dtype="bfloat16"), _row("auto", 512, 2.5)]
    picked = [(line["dtype"], line["M"], line["auto"]["tflops"], line["best"] and line["best"]["kernel"])
              for line in report.summarize(rows)]
    assert picked == [("float32", 512, 2.5, None), ("float32", 1024, 4.0, "smem32"), ("bfloat16", 512, 2.0, None)]
    text = report.render_record({"metadata": {"device": "NVIDIA H200", "git_commit": "0123456789abcdef"},
                                 "rows": rows})
    assert text.startswith("### NVIDIA H200")
    assert "| 1024×1024×1024 | NN | float32 | 4 | smem32 | 3 | 10 | 0.4 |" in text
    assert "wgmma 1024×1024×1024 NN float32 (WRONG)" in text
    assert "commit 0123456 (" in text and "abcdef" not in text


def test_report_headline_shapes():
    rows = [_row("auto", 4096, 40.0), _row("auto", 300, 1.0)]
    headline = [line["M"] for line in report.summarize(rows, headline_only=True)]
    assert headline == [4096]
    assert [line["M"] for line in report.summarize(rows)] == [300, 4096]
    # A record with none of the headline shapes (a CPU run) shows all of its shapes.
    assert [line["M"] for line in report.summarize([_row("auto", 300, 1.0)], headline_only=True)] == [300]


def _mm_record(device, date, rows, commit="aaaaaaa"):
    return {"metadata": {"device": device, "date": date, "git_commit": commit, "peak_tflops": {"bfloat16": 1000.0}},
            "rows": rows}


def test_report_picks_one_record():
    bf16 = dict(_row("auto", 4096, 600.0, dtype="bfloat16"), git_commit="bbbbbbb")
    h200 = (Path("h200.json"), _mm_record("NVIDIA H200", "2026-01-01", [bf16]))
    h100 = (Path("h100.json"), _mm_record("NVIDIA H100 80GB HBM3", "2026-02-01", [bf16]))
    h200_fp32 = (Path("h200.json"), _mm_record("NVIDIA H200", "2026-03-01", [_row("auto", 4096, 40.0)]))
    cpu = (Path("cpu.json"), _mm_record("Intel Xeon", "2026-04-01", [bf16]))
    assert report.pick_record([h100, h200, cpu]) is h200  # the H200's, though older
    assert report.pick_record([h200_fp32, h100, cpu]) is h100  # the H200 record lacks the bf16 rows
    assert report.pick_record([cpu]) is cpu
    assert report.pick_record([]) is None


def test_report_headline_states_gpu_and_commit(monkeypatch):
    monkeypatch.setattr(report, "_interleaved", lambda commit: commit != "0ld0ld0")
    rows = [dict(_row("auto", 4096, 600.0, dtype="bfloat16"), torch_tflops=500.0, ratio=1.2, pct_peak=60.0,
                 git_commit="bbbbbbbbbb"),
            dict(_row("auto", 8192, 650.0, dtype="bfloat16"), git_commit="bbbbbbb"),
            dict(_row("auto", 4096, 40.0), git_commit="0ld0ld0"),
            dict(_row("smem32", 4096, 9.0, dtype="bfloat16"), git_commit="bbbbbbb"),  # not auto: not shown
            dict(_row("auto", 300, 1.0, dtype="bfloat16"), git_commit="bbbbbbb")]  # not a headline shape
    attention = {"metadata": {}, "rows": [
        {"module": m, "pass": p, "dtype": "bfloat16", "width": 4096, "tokens": 8192, "batch": 1, "status": "OK",
         "ms": 2.0, "torch_ms": 2.2, "ratio": 1.1, "git_commit": "bbbbbbb"}
        for m in ("attention", "decoder_layer") for p in ("fwd", "fwd+bwd")]}
    text = report.render_headline(Path("nvidia-h200.json"), _mm_record("NVIDIA H200", "2026-01-01", rows), attention)
    assert text.startswith("**NVIDIA H200**, commit `bbbbbbb`")
    assert "timed interleaved rep by rep" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and "×" in line and "M×N×K" not in line]
    assert table_rows == ["| 4096×4096×4096 | square | bf16 | 600 | 500 | 1.200 | 60.0% |",
                          "| 8192×8192×8192 | square | bf16 | 650 | 10 | 65.000 | – |",
                          "| 4096×4096×4096† | square | fp32 | 40 | 10 | 4.000 | – |"]
    assert "| decoder_layer | fwd+bwd | 2.000 | 2.200 | 1.100 |" in text
    assert "† measured at another commit" in text
    assert "`0ld0ld0` (fp32 4096×4096×4096; before 9ffa057, so torch.mm was timed first)" in text
    assert "ratio: torch_gemm TFLOP/s / torch.mm TFLOP/s; above 1, torch_gemm is faster." in text


def test_report_write(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    bf16 = [dict(_row("auto", 4096, 600.0, dtype="bfloat16"), git_commit="ccccccc")]
    (results / "nvidia-h200.json").write_text(json.dumps(_mm_record("NVIDIA H200", "2026-01-01", bf16)))
    (results / "nvidia-h200-attention.json").write_text(json.dumps({"metadata": {}, "rows": [{"dtype": "bfloat16"}]}))
    (results / "cpu-x.json").write_text(json.dumps(_mm_record("X CPU", "2026-05-01", [_row("auto", 64, 1.0)])))
    readme, docs = tmp_path / "README.md", tmp_path / "benchmarks.md"
    readme.write_text("# t\n\n<!-- results:begin -->\nold table\n<!-- results:end -->\n\nafter\n")
    docs.write_text("# b\n\n<!-- results:begin -->\n<!-- results:end -->\n")
    argv = ["--results", str(results), "--readme", str(readme), "--docs", str(docs), "--write"]
    assert report.main(argv) == 0
    text = readme.read_text()
    assert "old table" not in text and text.startswith("# t\n") and text.endswith("\nafter\n")
    # The README: one record, one GPU, its headline rows.
    assert "from results/nvidia-h200.json and nvidia-h200-attention.json" in text or \
        f"from {results / 'nvidia-h200.json'} and nvidia-h200-attention.json" in text
    assert "**NVIDIA H200**, commit `ccccccc`" in text and "X CPU" not in text
    assert "| 4096×4096×4096 | square | bf16 | 600 | 10 | 60.000 | – |" in text
    # The docs: a full table per record.
    full = docs.read_text()
    assert full.count("### ") == 2 and "| 4096×4096×4096 | NN | bfloat16 | 600 | – | – | 10 | 60 |" in full
    # Idempotent: a second run gives the same files.
    report.main(argv)
    assert readme.read_text() == text and docs.read_text() == full

    plain = tmp_path / "PLAIN.md"
    plain.write_text("no markers here\n")
    capsys.readouterr()
    report.main(["--results", str(results), "--readme", str(plain), "--docs", str(docs), "--write"])
    captured = capsys.readouterr()
    assert plain.read_text() == "no markers here\n"
    assert "**NVIDIA H200**" in captured.out and "nothing written" in captured.err


def test_readme_block_is_current():
    """The README's results block is what report.py makes of the committed records."""
    if report._interleaved(report.INTERLEAVED_SINCE) is None:
        pytest.skip("no git history here to tell how old rows were timed")
    readme = (records.REPO_ROOT / "README.md").read_text()
    assert report.replace_block(readme, report.render_readme(records.RESULTS_DIR)) == readme, \
        "README.md's results block is stale: run python benchmarks/report.py --write"


def test_float32_modes_of_the_benchmark_dtypes():
    from harness.dtypes import float32_mode

    saved_tf32, saved_precision = torch.backends.cuda.matmul.allow_tf32, torch_gemm.get_fp32_precision()
    for name, tf32, precision in (("tf32", True, "ieee"), ("float32-3xtf32", False, "3xtf32"), ("float32", False, "ieee")):
        with float32_mode(name):
            assert torch.backends.cuda.matmul.allow_tf32 == tf32 and torch_gemm.get_fp32_precision() == precision
        assert torch.backends.cuda.matmul.allow_tf32 == saved_tf32
        assert torch_gemm.get_fp32_precision() == saved_precision
