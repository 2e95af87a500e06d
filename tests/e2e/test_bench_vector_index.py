"""benchmarks/bench_vector_index.py at a tiny size: every ``vector_index`` kind is built by one process and served
by another, the approximate ones through their index (built at 500 rows here), with every figure the "pick this
when" table of docs/scaling.md cites in the JSON; flat is exact (recall 1.0) and the others are close to it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("flat", "hnsw", "ivf", "ivf_sq8", "ivf_pq")


@pytest.mark.timeout(600)
def test_tiny_run_measures_every_kind(tmp_path: Path) -> None:
    out = tmp_path / "vector_index.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "bench_vector_index.py"),
        "--n",
        "3000",
        "--dim",
        "32",
    ]
    command += ["--queries", "20", "--clusters", "30", "--ann-min-rows", "500", "--out", str(out)]
    command += ["--work", str(tmp_path / "work")]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert (result["n"], result["dim"], result["k"], result["threads"]) == (3000, 32, 10, 1)
    rows = {row["kind"]: row for row in result["rows"]}
    assert tuple(rows) == KINDS
    for kind, row in rows.items():
        for key in ("build_s", "open_s", "p50_ms", "serving_rss_mib", "disk_mib"):
            assert row[key] > 0, (kind, key)
        assert row["approximate_index"] is (kind != "flat")
        assert row["recall@10"] >= (1.0 if kind == "flat" else 0.5), kind
    assert rows["hnsw"]["disk_mib"] > rows["flat"]["disk_mib"]  # the graph is written beside the rows
    assert not (tmp_path / "work" / "flat").exists()  # each kind's folder is removed after it is measured
