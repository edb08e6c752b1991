"""The README stays true: its example runs (the CPU part everywhere, the whole of it on a GPU),
its links lead to files, and CI runs its test command word for word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gemm_testing import HAS_CUDA

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _section_code(title: str) -> str:
    section = README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_using_the_ops_example_runs():
    code = _section_code("Using the ops")
    if not HAS_CUDA:
        code = code.split('device="cuda"', 1)[0].rsplit("\n", 1)[0]  # the lines before the first CUDA tensor
        assert "mm_tiled(a, b)" in code, "the README's example should start with a CPU part"
    exec(compile(code, "README.md", "exec"), {})


def test_links_lead_to_files():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links
    for link in links:
        if not link.startswith("http"):
            assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_ci_runs_the_readme_test_command():
    quickstart = README.split("## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    test_line = next(line for line in quickstart.splitlines() if "pytest" in line and not line.startswith("#"))
    install, run = (part.strip() for part in test_line.split("&&"))
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "python -m " + install in ci or install in ci, f"CI does not run {install!r}"
    assert run in ci, f"CI does not run {run!r}"


@pytest.mark.parametrize("doc", ["architecture", "kernels", "numerics", "benchmarks", "building", "distributed"])
def test_docs_exist_and_name_no_files_users_lack(doc):
    text = (ROOT / "docs" / f"{doc}.md").read_text()
    assert "DESIGN" not in text
    for link in re.findall(r"\]\(([^)#]+)\)", text):
        if not link.startswith("http"):
            assert (ROOT / "docs" / link).exists(), f"docs/{doc}.md links to {link}, which does not exist"
