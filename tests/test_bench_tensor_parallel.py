"""CPU tests of benchmarks/bench_tensor_parallel.py: the projections' share of a profile, the table
and the command line, and a whole run on two gloo ranks under torchrun at tiny sizes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

import bench_tensor_parallel as bench
from bench_tensor_parallel import OpTime
from harness import device as devices

SCRIPT = Path(bench.__file__).resolve()
RUN_TIMEOUT_S = 120


# ---------------------------------------------------------------------------------------------
# The share of a profile.


def test_share_counts_products_and_what_they_call():
    ops = [
        OpTime("aten::add", 10.0),
        OpTime("gemm::linear_tiled", 5.0),                                    # the DTensor call
        OpTime("gemm::linear_tiled", 20.0, ("gemm::linear_tiled",)),          # its local call
        OpTime("aten::empty", 5.0, ("gemm::linear_tiled", "gemm::linear_tiled")),
        OpTime("aten::mm", 40.0, ("MmBackward0",)),
        OpTime("aten::linear", 2.0),
        OpTime("aten::t", 3.0, ("aten::linear",)),
        OpTime("aten::_scaled_dot_product_flash_attention", 15.0),
    ]
    assert bench.projection_share(ops) == pytest.approx(75.0 / 100.0)


def test_share_leaves_out_the_sync_and_collectives():
    ops = [
        OpTime(bench.SYNC_LABEL, 1.0),
        OpTime("c10d::allreduce_", 100.0, (bench.SYNC_LABEL,)),
        OpTime("gemm::linear_tiled_weight_grad", 30.0),
        OpTime("_c10d_functional::all_reduce", 10.0, ("gemm::linear_tiled_weight_grad",)),
        OpTime("_c10d_functional::wait_tensor", 60.0),
    ]
    # The sync is in neither sum; the collective inside the product counts in the step only.
    assert bench.projection_share(ops) == pytest.approx(30.0 / 100.0)


def test_share_of_nothing_is_none():
    assert bench.projection_share([]) is None
    assert bench.projection_share([OpTime("aten::mm", 0.0)]) is None


def _event(name, parent=None, cpu_us=0.0, device_us=0.0, device_type=torch.autograd.DeviceType.CPU):
    return SimpleNamespace(name=name, cpu_parent=parent, self_cpu_time_total=cpu_us,
                           self_device_time_total=device_us, device_type=device_type)


def test_profile_ops_walks_parents_and_skips_kernel_events():
    outer = _event("aten::linear", cpu_us=4.0, device_us=0.0)
    inner = _event("aten::mm", outer, cpu_us=6.0, device_us=50.0)
    kernel = _event("sm90_xmma_gemm", device_us=50.0, device_type=torch.autograd.DeviceType.CUDA)
    other = _event("aten::add", cpu_us=10.0, device_us=50.0)
    events = [outer, inner, kernel, other]
    assert bench.profile_ops(events, "cpu") == [
        OpTime("aten::linear", 4.0), OpTime("aten::mm", 6.0, ("aten::linear",)), OpTime("aten::add", 10.0)]
    assert [op.self_us for op in bench.profile_ops(events, "device")] == [0.0, 50.0, 50.0]
    assert bench.shares_of(events, torch.device("cuda")) == (pytest.approx(0.5), "device")
    assert bench.shares_of(events, torch.device("cpu")) == (pytest.approx(0.5), "cpu")


def test_shares_fall_back_to_cpu_time_without_device_events():
    events = [_event("gemm::linear_tiled", cpu_us=30.0), _event("aten::add", cpu_us=10.0)]
    assert bench.shares_of(events, torch.device("cuda")) == (pytest.approx(0.75), "cpu")


# ---------------------------------------------------------------------------------------------
# Table and command line.


def _row(**fields):
    row = {"width": 4096, "tokens": 8192, "tp": 2, "dtype": "bfloat16", "ms": 50.0, "torch_ms": 55.0, "ratio": 1.1,
           "projection_share": 0.6, "torch_projection_share": 0.62, "rel_diff": 1e-3, "status": "OK",
           "tol": 3e-2, "error": None}
    row.update(fields)
    return row


def test_table_has_the_columns_and_shares():
    text = bench.format_table([_row(), _row(status="WRONG", ms=None, ratio=None, projection_share=None)])
    header = text.splitlines()[0].split()
    assert header[:7] == ["width", "tokens", "tp", "dtype", "ms", "torch", "ms"]
    assert "60.0% / 62.0%" in text and "- / 62.0%" in text
    assert "WRONG (tol 3e-02)" in text


@pytest.mark.parametrize("argv, message", [
    (["--width", "96", "--head-dim", "64"], "not a multiple of --head-dim"),
    (["--width", "96", "--head-dim", "32"], "3 heads do not split over 2 ranks"),
    (["--tokens", "30", "--batch", "4"], "not a multiple of --batch"),
    (["--reps", "0"], "--reps must be a positive integer"),
])
def test_validate_refuses_sizes_that_do_not_split(argv, message, capsys):
    parser = bench.build_parser()
    with pytest.raises(SystemExit):
        bench.validate(parser.parse_args(argv), parser, world=2)
    assert message in capsys.readouterr().err


def test_defaults_are_issue_32s_shape():
    args = bench.build_parser().parse_args([])
    assert (args.width, args.tokens, args.batch, args.head_dim, args.dtype) == (4096, 8192, 1, 128, "auto")


def test_without_torchrun_it_says_how_to_start(monkeypatch, capsys):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(SystemExit):
        bench.main(["--device", "cpu"])
    assert "torchrun" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# A whole run on two CPU ranks.


def _gloo_missing() -> str:
    if not dist.is_available() or not dist.is_gloo_available():
        return "torch.distributed has no gloo backend"
    return ""


def _run_torchrun(args: list[str], cwd: Path) -> tuple[int, str]:
    """The script under torchrun on two ranks; its exit status and output. The launcher and its
    ranks run in their own session, killed together past RUN_TIMEOUT_S."""
    import torch_gemm

    env = dict(os.environ, OMP_NUM_THREADS="1")
    # The torch_gemm this process imported, whatever an editable install points at.
    package_root = str(Path(torch_gemm.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(SCRIPT), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"the run passed {RUN_TIMEOUT_S} s:\n{output[-4000:]}")
    return proc.returncode, output


@pytest.mark.skipif(bool(_gloo_missing()), reason=_gloo_missing() or "gloo is available")
def test_two_cpu_ranks_write_the_record(tmp_path):
    out = tmp_path / "results"
    code, output = _run_torchrun(["--device", "cpu", "--width", "64", "--tokens", "32", "--head-dim", "32",
                                  "--warmup", "1", "--reps", "3", "--profile-steps", "1", "--out", str(out)], tmp_path)
    assert code == 0, output[-4000:]
    assert "x 2 ranks (gloo)" in output and "TP=2" in output, output[-4000:]
    table_line = next(line for line in output.splitlines() if line.split()[:4] == ["64", "32", "2", "float32"])
    assert table_line.split()[-1] == "OK"

    record = json.loads((out / f"{devices.device_slug(torch.device('cpu'))}-tp.json").read_text())
    assert record["metadata"]["world_size"] == 2 and record["metadata"]["backend"] == "gloo"
    (row,) = record["rows"]
    assert {k: row[k] for k in bench.ROW_KEY} == {"width": 64, "tokens": 32, "batch": 1, "tp": 2,
                                                  "dtype": "float32", "kernel": "auto"}
    assert (row["status"], row["heads"], row["intermediate"], row["share_basis"]) == ("OK", 2, 256, "cpu")
    assert row["ms"] > 0 and row["torch_ms"] > 0
    assert row["ratio"] == pytest.approx(row["torch_ms"] / row["ms"])
    assert 0 < row["projection_share"] < 1 and 0 < row["torch_projection_share"] < 1
    assert row["rel_diff"] <= row["tol"] == 1e-4
    csv_header = (out / f"{devices.device_slug(torch.device('cpu'))}-tp.csv").read_text().splitlines()[0]
    assert csv_header.startswith(",".join(bench.ROW_FIELDS[:6]))
