"""benchmarks/bench_search_beside_writes.py at a tiny size: every run in the JSON, alternating the trees, with
its p50, mean and load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_tiny_run_records_each_tree_and_k(tmp_path: Path) -> None:
    out = tmp_path / "beside.json"
    src = str(ROOT / "src")
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_search_beside_writes.py"), "--n", "300"]
    command += ["--every", "3", "--count", "12", "--k", "5,20", "--rounds", "2", "--src", src]
    command += ["--other-src", src, "--workdir", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["n"] == 300 and result["every"] == 3
    runs = result["runs"]
    assert [(r["round"], r["k"]) for r in runs] == [
        (1, 5),
        (1, 5),
        (1, 20),
        (1, 20),
        (2, 5),
        (2, 5),
        (2, 20),
        (2, 20),
    ]
    for run in runs:
        assert 0 < run["p50_ms"] and 0 < run["mean_ms"] and len(run["load"]) == 3
        assert Path(run["library"]) == ROOT / "src"


@pytest.mark.timeout(600)
def test_tiny_postgres_run_leaves_the_corpus_as_it_found_it(tmp_path: Path) -> None:
    pytest.importorskip("pgserver")
    out = tmp_path / "beside.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_search_beside_writes.py"), "--n", "300"]
    command += ["--postgres", "--every", "3", "--count", "9", "--k", "5", "--rounds", "2"]
    command += ["--workdir", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["ledger"] == "postgres, keyword_index=engine" and len(result["runs"]) == 2
    for run in result["runs"]:
        assert run["p50_ms"] > 0 and run["chunks_after"] == 300  # each run removed the documents it wrote
