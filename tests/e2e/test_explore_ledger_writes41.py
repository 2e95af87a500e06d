"""Issue 41's ledger-writes exploration (benchmarks/explore_ledger_writes41.py) runs small and reports each
layout: the rows it was asked for, in files of the page size asked."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import explore_ledger_writes41 as writes


def test_each_layout_is_filled_and_reported(tmp_path: Path) -> None:
    out = tmp_path / "writes.json"
    result = writes.main(["--rows", "3000", "--batch", "500", "--work", str(tmp_path), "--out", str(out)])
    assert out.is_file()
    runs = result["runs"]
    assert {(r["keys"], r["page_size"]) for r in runs} == {
        (k, p) for k in ("random", "ascending") for p in (16384, 4096)
    }
    for run in runs:
        assert run["rows"] == 3000 and run["file_mib"] > 3000 * 1600 / 2**20
        assert run["written_mib"] is None or run["written_mib"] >= 0


def test_a_filled_file_holds_the_rows_with_unique_ids(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    writes.fill(path, 1200, 500, "random", 4096)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert db.execute("SELECT count(*), count(DISTINCT id) FROM chunks").fetchone() == (1200, 1200)
