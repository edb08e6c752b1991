"""CPU checks of scripts/sanitize_cases.py, the sanitizers' workload: each named case reaches the
path it names per the plans on a 132-SM H100/H200, the list covers every required path, and the
kernel-name filter of scripts/sanitize.sh matches every kernel the extension defines."""

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("sanitize_cases", REPO / "scripts" / "sanitize_cases.py")
sanitize_cases = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sanitize_cases)

CASES = [(group, case) for group in sanitize_cases.GROUPS for case in group.cases]
# Every path of wgmma_sm90 (3xTF32's promoted tiles too) and decode_sm80 that a shape or an option
# selects, and the other kernels' named cases: a case list that stops reaching one of them fails
# here.
REQUIRED_PATHS = {
    "multistage split-K", "multistage large split-K", "multistage narrow split-K", "multistage narrow",
    "wgmma 128x256 pairs", "wgmma 128x256 single", "wgmma 64x256", "wgmma 64x128 unsplit",
    "wgmma 64x128 split 2", "wgmma 64x128 split 4", "wgmma 64x128 split 8", "wgmma 64x128 split 8 in 4 clusters",
    "wgmma 64x64 pairs", "wgmma 128x128 pairs",
    "wgmma 128x192 pairs", "wgmma 128x192 pairs N-major",
    "wgmma 128x256 split 2", "wgmma stream-K", "wgmma repack odd leading dimension",
    "wgmma repack misaligned", "wgmma operands MN-major", "wgmma store registers", "wgmma store tma",
    "wgmma tf32 64x256 pairs", "wgmma tf32 transposed", "wgmma tf32 split 8",
    "wgmma tf32 split 8 in 4 clusters", "wgmma tf32 split 8 transposed", "wgmma tf32 64x128 pairs",
    "wgmma tf32 64x128 split 8", "wgmma tf32 64x128 pairs dealt", "wgmma tf32 128x128 pairs dealt",
    "wgmma tf32 128x128 split 4", "wgmma tf32 128x128 single", "wgmma tf32 128x128 split 2",
    "wgmma 128x128 split 2 two rows", "wgmma tf32 64x128 split 8 in 2 clusters", "wgmma tf32 64x64 pairs",
    "wgmma tf32 128x128 pairs dealt transposed", "wgmma tf32 64x64 transposed",
    "wgmma tf32 128x128 split 4 MN-major A", "wgmma tf32 128x192 pairs", "wgmma tf32 128x192 transposed",
    "wgmma tf32 slim 128x160",
    "wgmma tf32 split 4 transposed", "wgmma tf32 split 2 bias", "wgmma bias", "wgmma row sums fused",
    "wgmma row sums separate", "wgmma batched",
    "3xtf32 promoted 128x128 pairs", "3xtf32 promoted 128x128 single", "3xtf32 promoted 64x128 pairs",
    "3xtf32 promoted 64x128 single", "3xtf32 store registers", "3xtf32 operands MN-major", "3xtf32 bias",
    "3xtf32 batched", "3xtf32 chunks of K", "3xtf32 chunks of K MN-major",
    "decode 1 token tile unsplit", "decode 1 token tile split", "decode 2 token tiles unsplit",
    "decode 2 token tiles split", "decode 4 token tiles", "decode 8 token tiles", "decode tf32 split",
    "decode tf32 4 token tiles", "decode tf32 8 token tiles", "decode N-major cluster of 4",
    "decode N-major edges", "gemv", "gemv streamed two rows", "gemv streamed split", "gemv float32 rows",
    "gemv float32 row groups", "multistage split-K",
}


def test_every_required_path_has_a_case():
    named = {case.path for _, case in CASES}
    assert REQUIRED_PATHS <= named, f"no case for {sorted(REQUIRED_PATHS - named)}"


def test_case_names_are_unique_and_explained():
    paths = [case.path for _, case in CASES]
    assert len(paths) == len(set(paths))
    assert all(case.why for _, case in CASES)


def test_group_names_unique_and_default_first():
    names = [group.name for group in sanitize_cases.GROUPS]
    assert len(names) == len(set(names))
    assert sanitize_cases.GROUPS[0].env == {} and sanitize_cases.GROUPS[0].sweep
    for group in sanitize_cases.GROUPS:
        assert set(group.env) <= set(sanitize_cases.OVERRIDE_ARGS), group.name


@pytest.mark.parametrize("group,case", CASES, ids=[case.path for _, case in CASES])
def test_case_reaches_its_path(group, case):
    """The plan on 132 SMs, under the group's overrides, says what the case expects; the wgmma,
    multistage and decode cases must expect something."""
    if case.kernel in ("wgmma_sm90", "wgmma_sm90_3xtf32", "decode_sm80", "multistage"):
        assert case.expect, f"{case.path}: no expected plan"
    answer = sanitize_cases.plan(case, group.env)
    assert not sanitize_cases.mismatches(case, answer), (case.path, answer.get("why", answer))


@pytest.mark.parametrize("tool", sorted(sanitize_cases.TOOL_ENV))
def test_cases_reach_their_paths_under_each_tools_overrides(tool, monkeypatch):
    """Under a tool's overrides (initcheck: C from registers) every case still reaches its path but
    for C's store, which the plan then takes from registers."""
    for group, case in CASES:
        env = {**group.env, **sanitize_cases.TOOL_ENV[tool]}
        for var in sanitize_cases.OVERRIDE_ARGS:
            monkeypatch.delenv(var, raising=False)
        for var, value in env.items():
            monkeypatch.setenv(var, value)
        answer = sanitize_cases.plan(case, env)
        assert not sanitize_cases.mismatches(case, answer, env), (tool, case.path, answer.get("why", answer))
        if "store" in case.expect:
            assert answer["store"] == "registers", (tool, case.path)


def test_forced_paths_need_their_group():
    """The forced paths are out of the plan's reach without their overrides: were the default
    plan to take them, their groups (a process each) would be wasted, or mislabelled."""
    for group, case in CASES:
        if group.env:
            assert sanitize_cases.mismatches(case, sanitize_cases.plan(case, {})), case.path


def test_layouts_are_what_the_case_says():
    for _, case in CASES:
        a, b, bias = sanitize_cases.operands(case)
        assert (a.stride(-1) == 1) == case.a_k_major or case.K <= 1, case.path
        assert (b.stride(-2) == 1) == case.b_k_major, case.path
        assert a.storage_offset() == b.storage_offset() == case.offset
        assert (bias is not None) == (case.op == "linear")


def test_list_groups_prints_every_group(capsys):
    assert sanitize_cases.main(["--list-groups"]) == 0
    assert capsys.readouterr().out.split() == [g.name for g in sanitize_cases.GROUPS]


def test_kernel_filter_matches_every_kernel():
    """sanitize.sh instruments kernels whose names hold `torch_gemm`: every __global__ function of
    csrc/ lies inside namespace torch_gemm (the repack and row-sum kernels' own names do not start
    with gemm_)."""
    script = (REPO / "scripts" / "sanitize.sh").read_text()
    assert "--kernel-name kns=torch_gemm " in script
    for path in sorted((REPO / "csrc").rglob("*.cu*")):
        text = path.read_text()
        for match in re.finditer(r"__global__", text):
            before = text[: match.start()]
            opened = len(re.findall(r"^namespace torch_gemm \{", before, re.M))
            closed = len(re.findall(r"^\}  // namespace torch_gemm", before, re.M))
            assert opened > closed, f"{path.relative_to(REPO)}: a kernel outside namespace torch_gemm"
