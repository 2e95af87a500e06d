"""``finderledge check`` in Postgres mode covers the keyword index the database keeps (``keyword_index="engine"``).

Postings and statistics are put out of step with the chunks by SQL (a live chunk's postings deleted, a chunk
indexed that the ledger does not hold, a wrong length, a missing term, a partition's statistics changed):
``check`` must report each kind, ``check --repair`` (API and CLI) must build them again from the ledger's chunks,
after which the check is clean and searches answer as before the damage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from finderledge import FinderLedge

TEXTS = [
    ("refund invoice ledger refund", {"tenant": "a"}),
    ("warehouse shelf invoice storage", {"tenant": "a"}),
    ("password account backup region", {"tenant": "b"}),
    ("latency cluster node replica index", {"tenant": "b"}),
    ("search query vector keyword ranking score", {}),
    ("customer order shipping delivery payment", {"tenant": "c"}),
]
QUERIES = ["refund invoice", "replica index", "shipping payment", "keyword score", "warehouse"]


def _open(directory: Path, url: str, schema: str, fake: Any, mode: str = "engine") -> FinderLedge:
    where = {"database_url": url, "database_schema": schema, "keyword_index": mode, "partition_key": "tenant"}
    return FinderLedge(directory, embedding=fake, show_progress=False, fusion="rrf", **where)


def _keyword(fl: FinderLedge) -> list[list[tuple[str, float]]]:
    handle = fl.engine.replica.keyword.handle
    return [[(i, round(s, 6)) for i, s in handle.search(q, 10)] for q in QUERIES]


def _damage(fl: FinderLedge) -> None:
    """Put the postings out of step with the chunks, one kind of damage a row."""
    dialect = fl.ledger.dialect  # type: ignore[attr-defined]
    with dialect.writing() as tx:
        tx.execute(  # a live chunk without postings (its statistics left as they were)
            dialect.sql(
                "WITH k AS (DELETE FROM {s}kw_docs WHERE id = ? RETURNING doc)"
                " DELETE FROM {s}kw_postings p USING k WHERE p.doc = k.doc"
            ),
            ("d0-0000",),
        )
        tx.execute(  # an indexed chunk the ledger does not hold
            dialect.sql("INSERT INTO {s}kw_docs (id, parent_id, part, dl) VALUES (?, ?, ?, ?)"),
            ("ghost-0000", "ghost", "=a", 3),
        )
        tx.execute(
            dialect.sql("UPDATE {s}kw_docs SET dl = dl + 4 WHERE id = ?"), ("d2-0000",)
        )  # wrong length
        tx.execute(  # a term gone from a chunk's postings
            dialect.sql(
                "DELETE FROM {s}kw_postings WHERE term = 'node' AND doc = (SELECT doc FROM {s}kw_docs WHERE id = ?)"
            ),
            ("d3-0000",),
        )
        tx.execute(dialect.sql("UPDATE {s}kw_stats SET total_len = total_len + 7 WHERE part = ?"), ("=b",))


def test_check_reports_and_repairs_engine_postings(tmp_path: Path, pg_url: str, fake_embeddings: Any) -> None:
    schema = fresh_schema()
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    try:
        fl.add_texts([t for t, _ in TEXTS], [md for _, md in TEXTS], ids=[f"d{i}" for i in range(len(TEXTS))])
        fl.delete(["d5"])  # removed: its postings go, its chunk rows stay a while
        before = _keyword(fl)
        report = fl.check()
        assert report.clean, report.text()

        _damage(fl)
        assert _keyword(fl) != before
        report = fl.check()
        text = report.text()
        assert not report.clean
        assert "1 live chunks have no postings (d0-0000)" in text
        assert "1 indexed chunks are not live chunks of the ledger (ghost-0000)" in text
        assert "d2-0000 (length" in text and "d3-0000 (its postings are not the terms of its text)" in text
        assert (
            "statistics of 1 partition groups are wrong ('=b': 2 chunks, 16 tokens recorded, 2 and 9 in"
            in text
        )
        assert _keyword(fl) != before  # checking changed nothing

        repaired = fl.check(repair=True)
        assert repaired.repaired == ["engine-side keyword index: rebuilt from the ledger's chunks"]
        assert not repaired.not_repaired
        assert fl.check().clean
        assert _keyword(fl) == before
    finally:
        fl.close()


def test_the_cli_checks_and_repairs_the_database(tmp_path: Path, pg_url: str, fake_embeddings: Any) -> None:
    schema = fresh_schema()
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    env = {**os.environ, "FINDERLEDGE_DATABASE_URL": pg_url, "FINDERLEDGE_DATABASE_SCHEMA": schema}
    command = [sys.executable, "-m", "finderledge", "check", "--dir", str(tmp_path / "cli"), "--json"]

    def check(*extra: str) -> tuple[int, dict[str, Any]]:
        done = subprocess.run(
            [*command, *extra], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.stdout, done.stderr[-2000:]
        return done.returncode, json.loads(done.stdout)

    try:
        fl.add_texts([t for t, _ in TEXTS], [md for _, md in TEXTS], ids=[f"d{i}" for i in range(len(TEXTS))])
        before = _keyword(fl)
        assert check()[0] == 0
        _damage(fl)
        code, found = check()
        assert code == 1 and not found["clean"]
        assert any("live chunks have no postings" in p for p in found["problems"])
        code, fixed = check("--repair")
        assert code == 1 and fixed["repaired"] and not fixed["not_repaired"]
        assert check()[0] == 0
        assert _keyword(fl) == before
        assert not (tmp_path / "cli").exists()  # nothing local: no model, no replica opened
    finally:
        fl.close()


def test_a_ledger_without_engine_postings_is_checked_clean(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    fl = _open(tmp_path / "w", pg_url, fresh_schema(), fake_embeddings, mode="local")
    try:
        fl.add_texts(["alpha beta"], ids=["x"])
        report = fl.check(repair=True)
        assert report.clean and not report.repaired
        assert any("keeps no keyword index" in n for n in report.notes)
    finally:
        fl.close()


@pytest.fixture(autouse=True)
def _needs_pgserver() -> None:
    pytest.importorskip("pgserver")
