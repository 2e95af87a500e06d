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
    args = ["--rows", "3000", "--batch", "500", "--tiers", "0.1", "--small", "0", "1000"]
    result = writes.main([*args, "--work", str(tmp_path), "--out", str(out)])
    assert out.is_file()
    runs = result["runs"]
    assert {(r["keys"], r["page_size"]) for r in runs if not r["tiers"]} == {
        (k, p) for k in ("random", "ascending") for p in (16384, 4096)
    }
    assert [(r["tiers"]["share"], r["tiers"]["small"]) for r in runs if r["tiers"]] == [(0.1, 0), (0.1, 1000)]
    for run in runs:
        assert run["rows"] == 3000 and run["file_mib"] > 3000 * 1600 / 2**20
        assert run["written_mib"] is None or run["written_mib"] >= 0
        assert run["lookup_us_p50"] > 0


def test_tiers_hold_each_id_once_and_merge(tmp_path: Path) -> None:
    """Three tiers: every row's id is in exactly one of them, pointing at its row, after merges of both kinds."""
    path = tmp_path / "tiers.db"
    run = writes.fill(path, 9000, 500, "random", 4096, share=0.1, small=1500)
    assert run["tiers"]["merges"] >= 4
    with sqlite3.connect(path) as db:
        held = [
            db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("ids", "ids_recent", "ids_new")
        ]
        assert sum(held) == 9000
        found = db.execute(
            "SELECT count(*) FROM chunks c JOIN"
            " (SELECT * FROM ids UNION ALL SELECT * FROM ids_recent UNION ALL SELECT * FROM ids_new) t"
            " ON t.seq = c.seq AND t.id = c.id"
        ).fetchone()[0]
        assert found == 9000


def test_a_filled_file_holds_the_rows_with_unique_ids(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    writes.fill(path, 1200, 500, "random", 4096)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert db.execute("SELECT count(*), count(DISTINCT id) FROM chunks").fetchone() == (1200, 1200)
