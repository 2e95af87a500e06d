"""The README's Quick start command, ``python examples/quickstart.py``, runs as written and prints what it
promises: the example folder indexed, English and Japanese hybrid results, and a context with citations.

The ``pip install`` steps before it on the same line are what CI itself runs (.ci/run), so only the last
command of the line runs here, in a temporary copy of ``examples/`` (the in-memory example writes nothing
there, which the test also checks).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def _quick_start_line() -> str:
    """The indented command line of README.md's "Quick start" section that runs the example."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    [line] = [
        ln.strip() for ln in section.splitlines() if ln.startswith("    ") and "examples/quickstart.py" in ln
    ]
    return line


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def _results_after(heading: str, out: str) -> list[str]:
    """The three result lines printed under ``=== hybrid search: <heading>``."""
    block = out.split(f"=== hybrid search: {heading}\n", 1)[1]
    return [ln for ln in block.splitlines() if re.match(r"^\d\. ", ln)][:3]


@pytest.mark.slow
def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    line = _quick_start_line()
    steps = [step.strip() for step in line.split("&&")]
    assert steps[:-1] == ["pip install torch==2.13.0", "pip install ."]  # what CI runs before the tests
    assert steps[-1] == "python examples/quickstart.py"
    shutil.copytree(ROOT / "examples" / "data", tmp_path / "examples" / "data")
    shutil.copy2(ROOT / "examples" / "quickstart.py", tmp_path / "examples" / "quickstart.py")
    before = _files(tmp_path)
    argv = shlex.split(steps[-1])
    assert argv[0] == "python"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    out = proc.stdout
    assert out.startswith(
        "indexed 7 documents (7 new chunks), 0 files skipped; store holds {'documents': 7, 'chunks': 7}\n"
    ), out[:300]

    english = _results_after("How long is a password reset link valid?", out)
    assert len(english) == 3 and "password-reset.txt chunk 1/1" in english[0], english
    assert "vector_rank=1" in english[0] and "keyword_rank=1" in english[0]  # both legs agree on it
    japanese = _results_after("返金はいつまでに申請する必要がありますか？", out)
    assert len(japanese) == 3 and "sla-ja.md chunk 1/1" in japanese[0], japanese
    assert "keyword_rank=1" in japanese[0]  # the English-only model cannot read it: BM25 ranks it
    assert "返金" in out.split("=== hybrid search: 返金", 1)[1].split("=== context", 1)[0]

    context = out.split("=== context for: What does a refund cover and how do I ask for one?\n\n", 1)[1]
    assert context.startswith("[1] (source: examples/data/guides/billing-faq.md, chunk 1/1)\n")
    assert "Requests must be made within 30 days" in context and "[3] (source: " in context
    assert _files(tmp_path) == before  # an in-memory index: nothing written next to the example
