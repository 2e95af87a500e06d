"""The README's test command is what CI runs (.ci/run finds it with a grep pattern): it installs with the
constraints file, which pins the test tools to the versions CI ran, so a fresh clone resolves to them."""

from __future__ import annotations

import re

from paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _ci_pattern() -> re.Pattern[str]:
    """The ``grep -m1 -E '…' README.md`` pattern of .ci/run, as a Python regex."""
    found = re.search(r"grep -m1 -E '([^']+)' README\.md", CI)
    assert found, ".ci/run no longer greps README.md for the test command"
    return re.compile(found.group(1).replace("[[:space:]]", r"\s"))


def test_ci_finds_the_readme_command_and_it_uses_the_constraints() -> None:
    pattern = _ci_pattern()
    commands = [line.strip() for line in README.splitlines() if pattern.search(line)]
    assert commands == [
        'pip install torch==2.13.0 && pip install -e ".[dev]" -c constraints.txt && python -m pytest -n 2'
    ]


def test_every_readme_install_of_the_test_extras_uses_the_constraints() -> None:
    installs = re.findall(r'pip install -e "\.\[(?:dev|test)\]"[^\n]*', README)
    assert len(installs) >= 2 and all("-c constraints.txt" in line for line in installs), installs


def test_the_constraints_pin_the_test_tools_and_leave_torch_and_finderledge_out() -> None:
    pins = dict(
        line.split("==", 1)
        for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    )
    tools = (
        "pytest",
        "pytest-xdist",
        "schemathesis",
        "hypothesis",
        "chromadb",
        "ruff",
        "mypy",
        "langchain-core",
    )
    for tool in tools:
        assert re.fullmatch(r"\d+(\.\d+)*", pins[tool]), (tool, pins.get(tool))
    assert "torch" not in pins and "finderledge" not in pins  # the README installs the CPU torch first
