"""``keyword_index="engine"`` keeps each term's document frequency per partition in ``kw_terms`` (issue 43):
a search reads a term's df with one look-up instead of counting its postings (at 1M chunks a common term's
count took 50-230 ms, most of a keyword search).  The table stays equal to a recount through adds, replaces,
deletes and rebuilds; ``check()`` reports a wrong df and ``--repair`` fixes it; a ledger whose postings
predate the table gets it counted at the next open or write.  A real PostgreSQL 16 + pgvector (``pgserver``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.errors import IncompatibleIndexError
from finderledge.ledgers import postings
from finderledge.ledgers.base import check_schema_version
from finderledge.ledgers.postgres import POSTGRES_SCHEMA_VERSION

COMMON = "ledger"
WORDS = ["refund", "invoice", "warehouse", "shelf", "password", "backup", "café", "東京の桜"]


def _open(directory: Path, url: str, schema: str, fake: Any, mode: str = "engine") -> FinderLedge:
    where = {"database_url": url, "database_schema": schema, "keyword_index": mode, "partition_key": "tenant"}
    return FinderLedge(directory, embedding=fake, show_progress=False, fusion="rrf", **where)


def _corpus(count: int, offset: int = 0) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    texts = [
        " ".join([COMMON] + [WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 5)])
        for i in range(offset, offset + count)
    ]
    mds: list[dict[str, Any]] = [
        {"tenant": "ab"[i % 2]} if i % 3 else {} for i in range(offset, offset + count)
    ]
    return texts, mds, [f"d{i}" for i in range(offset, offset + count)]


def _terms(fl: FinderLedge) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """(kw_terms without its zero rows, a recount of the postings)."""
    dialect = fl.ledger.dialect  # type: ignore[attr-defined]
    with dialect.reading() as conn:
        kept = conn.execute(dialect.sql("SELECT term, part, df FROM {s}kw_terms WHERE df <> 0")).fetchall()
        counted = conn.execute(
            dialect.sql("SELECT term, part, count(*) FROM {s}kw_postings GROUP BY term, part")
        ).fetchall()
    return {(t, p): int(n) for t, p, n in kept}, {(t, p): int(n) for t, p, n in counted}


def _sql(fl: FinderLedge, statement: str) -> None:
    dialect = fl.ledger.dialect  # type: ignore[attr-defined]
    with dialect.writing() as tx:
        tx.execute(dialect.sql(statement))


def _counting_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Statements sent that count postings (``count(`` over ``kw_postings``)."""
    seen: list[str] = []
    real = psycopg.Cursor.execute

    def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else str(query)
        if "count(" in text and "kw_postings" in text:
            seen.append(text)
        return real(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    return seen


def test_document_frequencies_follow_every_write_and_searches_count_no_postings(
    tmp_path: Path, pg_url: str, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postings, "_PRUNE_MIN_POSTINGS", 0)  # a small corpus: the pruned path runs
    monkeypatch.setattr(postings, "_PRUNE_MIN_CHUNKS", 0)
    schema = fresh_schema()
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    try:
        texts, mds, ids = _corpus(400)
        fl.add_texts(texts, mds, ids=ids)  # COPY path
        more = _corpus(6, offset=400)
        fl.add_texts(*more[:2], ids=more[2])  # INSERT path
        fl.add_texts([t + " shelf shelf" for t in texts[:50]], mds[:50], ids=ids[:50])  # replaced
        fl.delete(ids[50:90])
        kept, counted = _terms(fl)
        assert kept == counted and counted[(COMMON, "=a")] > 0
        assert fl.check().clean
        seen = _counting_statements(monkeypatch)
        for query in ("ledger refund invoice", "ledger warehouse", "café ledger 東京"):
            assert fl.search(query, k=5, search_mode="keyword")
            assert fl.search(query, k=5, search_mode="keyword", filter={"tenant": "a"})
            fl.search(query, k=5)  # hybrid: the relevance ceiling reads the dfs too
        assert seen == [], seen[:2]
    finally:
        fl.close()


def test_a_wrong_document_frequency_is_reported_and_repaired(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    schema = fresh_schema()
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    try:
        texts, mds, ids = _corpus(120)
        fl.add_texts(texts, mds, ids=ids)
        want = fl.search("ledger refund", k=10, search_mode="keyword")
        _sql(fl, "UPDATE {s}kw_terms SET df = df + 7 WHERE term = 'refund'")
        report = fl.check()
        assert not report.clean
        assert any("document frequencies" in p for p in report.problems), report.problems
        assert any("rebuilt" in r for r in fl.check(repair=True).repaired)
        assert fl.check().clean
        kept, counted = _terms(fl)
        assert kept == counted
        got = fl.search("ledger refund", k=10, search_mode="keyword")
        assert [(r.document.id, round(r.score, 9)) for r in got] == [
            (r.document.id, round(r.score, 9)) for r in want
        ]
    finally:
        fl.close()


@pytest.mark.parametrize("reopened_as", ["engine", "local"])
def test_postings_from_before_the_table_get_it_counted(
    tmp_path: Path, pg_url: str, fake_embeddings: Any, reopened_as: str
) -> None:
    """A ledger of the previous layout (schema version 5: postings without ``kw_terms``): the next open migrates
    it to the current version, which the previous builds refuse (their writes would leave the frequencies behind); the
    next engine open, or the next write of a process that searches locally, counts them from the postings;
    results stay the same."""
    schema = fresh_schema()
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    texts, mds, ids = _corpus(150)
    try:
        fl.add_texts(texts, mds, ids=ids)
        want = [
            (r.document.id, round(r.score, 9))
            for r in fl.search("ledger backup", k=10, search_mode="keyword")
        ]
        _sql(fl, "DROP TABLE {s}kw_terms")
        _sql(fl, "UPDATE {s}info SET value = '5' WHERE key = 'schema_version'")
    finally:
        fl.close()
    again = _open(tmp_path / "w2", pg_url, schema, fake_embeddings, mode=reopened_as)
    try:
        if reopened_as == "local":  # its write keeps the ledger's postings: the table is made first
            more = _corpus(3, offset=150)
            again.add_texts(*more[:2], ids=more[2])
        kept, counted = _terms(again)
        assert kept == counted and kept
        assert again.check().clean
        recorded = again.ledger.get_info("schema_version")
        assert recorded == str(POSTGRES_SCHEMA_VERSION) == "7"
        for previous in (5, 6):  # what version 5 and version 6 code do at open
            with pytest.raises(IncompatibleIndexError, match="written by a newer FinderLedge"):
                check_schema_version("a previous build", recorded, previous)
    finally:
        again.close()
    engine = _open(tmp_path / "w3", pg_url, schema, fake_embeddings)
    try:
        got = [
            (r.document.id, round(r.score, 9))
            for r in engine.search("ledger backup", k=10, search_mode="keyword")
        ]
        if reopened_as == "engine":
            assert got == want
        else:
            assert got and got != want  # three more chunks: other statistics, still consistent
    finally:
        engine.close()


@pytest.fixture(autouse=True)
def _needs_pgserver() -> None:
    pytest.importorskip("pgserver")


def test_a_version_6_database_is_migrated_to_7_and_refused_by_version_6_code(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    """Version 7 changes what ``kw_terms`` may hold (a bulk load's additions held back, negative counts from
    removals): a version 6 database is migrated at open, nothing rewritten, and version 6 code refuses it."""
    schema = fresh_schema()
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    texts, mds, ids = _corpus(40)
    try:
        fl.add_texts(texts, mds, ids=ids)
        _sql(fl, "UPDATE {s}info SET value = '6' WHERE key = 'schema_version'")
    finally:
        fl.close()
    again = _open(tmp_path / "w2", pg_url, schema, fake_embeddings)
    try:
        recorded = again.ledger.get_info("schema_version")
        assert recorded == "7"
        with pytest.raises(IncompatibleIndexError, match="written by a newer FinderLedge"):
            check_schema_version("version 6 code", recorded, 6)
        kept, counted = _terms(again)
        assert kept == counted and kept
        more = _corpus(3, offset=40)
        again.add_texts(*more[:2], ids=more[2])
        again.delete([ids[0]])
        kept, counted = _terms(again)
        assert kept == counted
        assert again.check().clean
    finally:
        again.close()
