"""benchmarks/bench_pg_round_trips.py --quick: statements per steady Postgres-mode search, both legs in the
database (real pgserver), measured in a fresh process; two trees given with --src run alternately.

The bounds are the statements a search needs (issue 43): hybrid, the ledger's seq, the exact vector scan with
the table's size check inside it (600 chunks: a small table), the BM25 query and at most one read of the hits'
rows (the shared calibration: at most once a second, no longer every search); keyword, the seq, the BM25 query
and the rows.  Before, a search asked the seq three times and the corpus size each time,
and wrapped the exact scan in a transaction (about 9.6 and 6.0 statements, and one transaction a hybrid
search)."""

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
def test_quick_run_counts_the_statements_of_each_tree(tmp_path: Path) -> None:
    out = tmp_path / "round_trips.json"
    src = str(ROOT / "src")
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_pg_round_trips.py"), "--quick"]
    done = subprocess.run(
        [*command, "--src", src, "--src", src, "--workdir", str(tmp_path / "w"), "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=580,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["chunks"] == 600 and len(result["runs"]) == 2  # one round, each --src once
    for run in result["runs"]:
        assert Path(run["library_src"]) == Path(src).resolve()
        hybrid, keyword = run["hybrid"], run["keyword"]
        # (a little slack for work another thread of the process may do meanwhile: a background calibration)
        assert hybrid["statements_per_search"] <= 4.5 and hybrid["transactions_per_search"] < 0.5, run
        assert keyword["statements_per_search"] <= 3.5 and keyword["transactions_per_search"] < 0.5, run
        assert hybrid["cpu_p50_ms"] > 0 and keyword["wall_p50_ms"] > 0
