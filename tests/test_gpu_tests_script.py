"""scripts/gpu_tests.sh's queue on the CPU, with a stand-in nvidia-smi that reports two GPUs: every
chunk of test ids runs once, on one of them; a deadline that leaves chunks unstarted, or ids that
fail to collect, fail the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_tests.sh"
FILES = "tests/test_tune_plan.py"  # a few quick CPU tests


def run_script(tmp_path: Path, gpus: int, **env: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + 'echo "Stand-in GPU"\n' * gpus)
    smi.chmod(0o755)
    full_env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                "PYTHON": sys.executable, "OUT": str(tmp_path / "out"),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                **env}
    return subprocess.run(["bash", str(SCRIPT)], env=full_env, capture_output=True, text=True,
                          timeout=600)


def test_without_a_gpu_it_stops(tmp_path):
    run = run_script(tmp_path, 0)
    assert run.returncode == 2 and "gpu_tests: no GPU" in run.stdout


def test_every_chunk_runs_once(tmp_path):
    run = run_script(tmp_path, 2, TEST_FILES=FILES, CHUNKS="3", WORKERS="1")
    assert run.returncode == 0, run.stdout + run.stderr
    progress = (tmp_path / "out" / "progress.txt").read_text().splitlines()
    chunks = sorted(line.split()[0] for line in progress)
    assert chunks == ["c000", "c001", "c002"], progress
    assert {line.split()[2] for line in progress} <= {"0", "1"}
    assert all(" exit 0 " in line for line in progress), progress
    assert "0 chunk(s) not started, 0 log(s) without a summary" in run.stdout
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_a_deadline_leaves_chunks_unstarted_and_fails(tmp_path):
    run = run_script(tmp_path, 2, TEST_FILES=FILES, CHUNKS="3", WORKERS="1", DEADLINE="0")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "3 chunk(s) not started" in run.stdout
    assert not (tmp_path / "out" / "progress.txt").exists()


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


def test_a_collection_error_fails_the_run(tmp_path):
    run = run_script(tmp_path, 2, TEST_FILES="tests/no_such_test_file.py")
    assert run.returncode == 1 and "gpu_tests: collection failed" in run.stdout, run.stdout
