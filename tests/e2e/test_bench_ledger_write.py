"""benchmarks/bench_ledger_write.py at a tiny size, on both ledgers: it times ``commit_write`` alone (issue 29's
"five statements per document") and the same rows inserted with plain sqlite3 (the floor), and prints one JSON
line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tiny_run_times_both_ledgers(pg_url: str) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_ledger_write.py"), "--n", "40", "--runs", "1"]
    command += ["--docs-per-write", "3", "--postgres", pg_url]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["n_chunks"] == 40 and len(result["load_avg"]) == 3
    assert len(result["sqlite_s"]) == 1 and result["sqlite_s"][0] > 0 and result["sqlite_cpu_s"][0] > 0
    assert (
        len(result["sqlite_floor_s"]) == 1
        and result["sqlite_floor_s"][0] > 0
        and result["sqlite_over_floor"] > 0
    )
    assert len(result["postgres_s"]) == 1 and result["postgres_s"][0] > 0
