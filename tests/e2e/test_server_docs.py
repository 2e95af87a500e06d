"""README's "Run as a service" samples run as written: its commands start a real server (two workers), and
each curl line of the API block must succeed (``curl -f``) against it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT
from server_process import free_port

MARK = "(run by tests/e2e/test_server_docs.py)"


def service_blocks() -> list[str]:
    """The README's bash blocks that start the service and call it."""
    blocks = re.findall(
        r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.DOTALL
    )
    return [b for b in blocks if MARK in b.splitlines()[0]]


@pytest.mark.slow
def test_readme_service_samples_run(tmp_path: Path) -> None:
    start, calls = service_blocks()
    port = str(free_port())
    start = "\n".join(line for line in start.splitlines() if not line.startswith("pip install"))
    script = (
        ('set -euo pipefail\nfinderledge() { "$PYTHON" -m finderledge "$@"; }\n' + start + "\n" + calls)
        .replace(":8000", ":" + port)
        .replace("--port 8000", "--port " + port)
    )
    work = tmp_path / "work"  # only what a fresh clone has: a sample naming a file it lacks fails
    shutil.copytree(EXAMPLES.parent, work / "examples", ignore=shutil.ignore_patterns(".*", "__pycache__"))
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": str(ROOT / "src"),
    }
    with (tmp_path / "out.txt").open("wb") as out_file, (tmp_path / "err.txt").open("wb") as err_file:
        # files, not pipes: the backgrounded server keeps its copy of them open after the script ends
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=work,
            env=env,
            stdout=out_file,
            stderr=err_file,
            start_new_session=True,
        )
    try:
        proc.wait(timeout=600)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the backgrounded server and its workers
        except ProcessLookupError:
            pass
    out = (tmp_path / "out.txt").read_text(encoding="utf-8", errors="replace")
    err = (tmp_path / "err.txt").read_text(encoding="utf-8", errors="replace")
    assert proc.returncode == 0, f"stdout: {out[-3000:]}\nstderr: {err[-3000:]}"
    assert '"total":1' in out and '"filename":"sla-ja.md"' in (work / "upload.json").read_text(
        encoding="utf-8"
    )
    assert '"keyword_rank":1' in out  # the Japanese query found the Japanese document by its keywords
    # the README's questions are Japanese: so is the extractive note (issue 44), as the library's
    assert "抽出回答" in out and '"extractive":true' in out.replace(" ", "")
    assert '"done": true' in out and '"status":"ok"' in out
    assert (work / "index" / "server" / "keys.json").is_file()


def test_readme_curl_lines_show_their_errors() -> None:
    """``curl -sf`` fails silently: every curl line of the README says ``-S`` so a failed call is shown."""
    for block in service_blocks():
        for line in block.splitlines():
            if line.lstrip().startswith(("curl", "DOC=$(curl")) or " curl " in line:
                assert "-fsS" in line, f"README: a curl line that hides its error: {line}"
