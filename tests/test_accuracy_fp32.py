"""accuracy_fp32's measures and table on the CPU (the comparison that matters needs an H100/H200)."""

from __future__ import annotations

import json
import math

import torch

import accuracy_fp32


def test_errors_measure_relative_l2_and_elements_in_units_of_the_bound():
    ref = torch.tensor([[1.0, -2.0]], dtype=torch.float64)
    scale = torch.tensor([[4.0, 8.0]], dtype=torch.float64)
    out = torch.tensor([[1.0, -2.0 + 8 * accuracy_fp32.U32]])
    rel_l2, per_elem = accuracy_fp32.errors(out, ref, scale)
    assert abs(per_elem - 1.0) < 1e-3 and 0 < rel_l2 < 1e-6
    assert accuracy_fp32.errors(torch.tensor([[math.inf, 0.0]]), ref, scale) == (math.inf, math.inf)


def test_wide_inputs_span_the_range():
    gen = torch.Generator().manual_seed(0)
    x = accuracy_fp32.operand(64, 64, "wide", gen, torch.device("cpu")).abs()
    assert x.max() > 2.0**40 and x.min() < 2.0**-40 and torch.isfinite(x).all()


def test_table_and_record(tmp_path, capsys):
    assert accuracy_fp32.main(["--ks", "16", "64", "--size", "16", "--device", "cpu", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| uniform | 16 |" in text and "| wide | 64 |" in text and "SGEMM (torch.mm, IEEE)" in text
    record = json.loads(next(tmp_path.glob("*-accuracy.json")).read_text())
    assert len(record["rows"]) == 2 * 3 * 3  # K values x distributions x the CPU's three paths
