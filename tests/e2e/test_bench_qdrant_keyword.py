"""benchmarks/bench_qdrant_keyword.py --quick: the keyword leg as Qdrant sparse vectors against the local BM25 on
500 scifact documents, loaded in batches (so the average length drifts), then weighted with stale averages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import dataset

pytest.importorskip("qdrant_client")  # finderledge[qdrant]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_qdrant_keyword.py"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_run_reports_the_same_ranking_and_what_a_stale_avgdl_costs(tmp_path: Path) -> None:
    out = tmp_path / "qdrant_keyword.json"
    subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--batch",
            "100",
            "--dataset",
            str(dataset("scifact")),
            "--out",
            str(out),
        ],
        check=True,
        env=dict(os.environ),
        timeout=850,
    )
    result = json.loads(out.read_text(encoding="utf-8"))
    loaded = result["as_loaded"]
    assert result["docs"] == 500 and loaded["queries"] > 20
    assert loaded["ndcg_diff"] <= 0.001 and loaded["top10_equal_share"] >= 0.95
    assert abs(result["avgdl_written"] / result["avgdl_live"] - 1) <= result["drift_limit"]
    exact, stale = result["stale_avgdl"]["0.0"], result["stale_avgdl"]["0.25"]
    assert exact["top10_equal"] == exact["queries"] and exact["max_rel_score_diff"] < 1e-5
    assert stale["max_rel_score_diff"] > 1e-3  # weights written with another avgdl do score differently
