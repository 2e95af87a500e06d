"""benchmarks/bench_bulk_load.py on a tiny load (real pgserver): both sides write every chunk, the other side in
calls of ``--other-batch`` chunks (issue 43's "today" shape), this side in one call or (``--block``) in calls of
``--batch`` inside one ``bulk_load()`` block, and the JSON records what each side did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pgserver")
pytest.importorskip("psycopg")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("keyword_index", "block"), [("engine", False), ("local", True)])
def test_a_tiny_paired_bulk_load_writes_the_results(tmp_path: Path, keyword_index: str, block: bool) -> None:
    """Both sides in the mode asked for (``local``: the keyword leg a replica beside the database, the mode of a
    tree from before the engine leg), each side's mode recorded, and whether this side's calls were a block."""
    out = tmp_path / "bulk.json"
    src = str(ROOT / "src")
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "bench_bulk_load.py"),
        "--chunks",
        "300",
        "--src",
        src,
        "--other-src",
        src,
        "--other-batch",
        "100",
        "--workdir",
        str(tmp_path / "w"),
        "--out",
        str(out),
        "--keyword-index",
        keyword_index,
    ]
    if block:
        command += ["--batch", "100", "--block"]
    done = subprocess.run(
        command,
        check=False,
        capture_output=True,
        text=True,
        timeout=580,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    runs = {r["side"]: r for r in result["runs"]}
    assert set(runs) == {"this", "other"}
    assert runs["this"]["chunks"] == runs["other"]["chunks"] == 300
    assert (
        runs["this"]["chunks_per_call"] == (100 if block else 300) and runs["other"]["chunks_per_call"] == 100
    )
    assert runs["this"]["bulk_load_block"] is block and runs["other"]["bulk_load_block"] is False
    assert runs["this"]["keyword_index"] == runs["other"]["keyword_index"] == keyword_index
    assert all(v > 0 for side in result["chunks_per_s"].values() for v in side)
