"""benchmarks/bench_join.py --quick: a fresh process joins a Postgres-mode index both ways (real pgserver).

Checks the JSON it writes: the engine-side join read a fixed sample, not every chunk, wrote nothing to its local
directory, and its keyword top-10 equals the local replica's."""

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
def test_quick_join_run_writes_the_results(tmp_path: Path) -> None:
    out = tmp_path / "join_quick.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "bench_join.py"),
        "--quick",
        "--repeat",
        "2",
        "--workdir",
        str(tmp_path / "w"),
    ]
    done = subprocess.run(
        [*command, "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=580,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["finderledge_bytecode_compiled"] is True  # joins import bytecode, as after pip install
    local, engine = result["join"]["local"], result["join"]["engine"]
    assert result["ingest"]["chunks"] == 1500 == local["keyword_chunks"] == engine["keyword_chunks"]
    assert engine["local_disk_bytes"] == 0 < local["local_disk_bytes"]
    assert engine["rows_read_to_join"] < local["rows_read_to_join"]
    assert result["keyword_top10_equal_share"] >= 0.95
    assert engine["keyword_p50_ms"] > 0 and engine["hybrid_p50_ms"] > 0
    # the import timed apart from the open; the CPU seconds beside the wall-clock ones
    assert engine["join_s"] >= engine["import_s"] + engine["join_after_import_s"] - 0.002
    assert 0 < engine["first_hybrid_search_cpu_s"] and 0 < engine["open_cpu_s"]
    # with --repeat: every join's p50s and rows, not only the first (coldest) one's, and their medians
    repeats = result["join_repeats"]["engine"]
    assert (
        len(repeats["keyword_p50_ms"])
        == 2
        == len(repeats["hybrid_p50_ms"])
        == len(repeats["rows_read_to_join"])
    )
    assert repeats["keyword_p50_ms"][0] == engine["keyword_p50_ms"]
    assert result["join_medians"]["engine"]["keyword_p50_ms"] > 0
