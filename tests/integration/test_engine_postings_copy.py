"""A bulk write in engine mode (``keyword_index="engine"``, issue 43) sends its postings by COPY, as the chunk
rows go: ``kw_docs`` and ``kw_postings`` rows by one binary COPY each, the statistics per partition exact, the
same keyword scores as the local replica, ``check()`` clean after it; a write failing after its postings were
copied leaves none of them (one transaction).  A real PostgreSQL 16 + pgvector (``pgserver``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.ledgers import bulk

TENANTS = ("a", "b", "c", None)
WORDS = [
    "refund",
    "invoice",
    "ledger",
    "warehouse",
    "shelf",
    "password",
    "account",
    "backup",
    "latency",
    "cluster",
    "node",
    "replica",
    "café",
    "naïve",
    "東京の桜",
]


def _open(directory: Path, url: str, schema: str, fake: Any, mode: str = "engine") -> FinderLedge:
    where = {"database_url": url, "database_schema": schema, "keyword_index": mode, "partition_key": "tenant"}
    return FinderLedge(directory, embedding=fake, show_progress=False, fusion="rrf", **where)


def _corpus(count: int, offset: int = 0) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    texts = [
        " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 7))
        for i in range(offset, offset + count)
    ]
    mds: list[dict[str, Any]] = [
        {} if TENANTS[i % 4] is None else {"tenant": TENANTS[i % 4]} for i in range(count)
    ]
    return texts, mds, [f"d{i}" for i in range(offset, offset + count)]


def _spy(monkeypatch: pytest.MonkeyPatch, fail_on: str | None = None) -> list[str]:
    copied: list[str] = []
    real = bulk.copy_rows

    def spy(cur: Any, schema: str, table: str, *args: Any) -> bool:
        copied.append(table)
        done = real(cur, schema, table, *args)
        if table == fail_on:
            raise RuntimeError("writer lost after its postings were copied")
        return done

    real_encoded = bulk.copy_encoded

    def spy_encoded(cur: Any, schema: str, table: str, *args: Any) -> None:
        copied.append(table)
        real_encoded(cur, schema, table, *args)
        if table == fail_on:
            raise RuntimeError("writer lost after its postings were copied")

    monkeypatch.setattr(bulk, "copy_rows", spy)
    monkeypatch.setattr(bulk, "copy_encoded", spy_encoded)
    return copied


def _stats(fl: FinderLedge) -> dict[str, tuple[int, int]]:
    dialect = fl.ledger.dialect  # type: ignore[attr-defined]
    with dialect.reading() as conn:
        rows = conn.execute(dialect.sql("SELECT part, n_docs, total_len FROM {s}kw_stats")).fetchall()
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows if int(r[1])}


def test_a_bulk_engine_write_copies_its_postings_and_checks_clean(
    tmp_path: Path, pg_url: str, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = fresh_schema()
    copied = _spy(monkeypatch)
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    texts, mds, ids = _corpus(300)
    try:
        fl.add_texts(texts, mds, ids=ids)
        assert Counter(copied)["kw_docs"] >= 1 and Counter(copied)["kw_postings"] >= 1, copied
        assert fl.check().clean
        postings = fl.ledger.dialect.postings  # type: ignore[attr-defined]
        with fl.ledger.dialect.reading() as conn:  # type: ignore[attr-defined]
            tokens = postings.tokenizer(postings.recorded(conn))
        expected: dict[str, list[int]] = {}
        for text, md in zip(texts, mds):
            part = "=" + md["tenant"] if md else "missing"
            entry = expected.setdefault(part, [0, 0])
            entry[0] += 1
            entry[1] += len(tokens(text))
        assert _stats(fl) == {k: tuple(v) for k, v in expected.items()}  # exact per partition
        # a few more (INSERT path), a replace and a delete: still clean, same scores as the local replica
        copied.clear()
        more = _corpus(5, offset=300)
        fl.add_texts(*more[:2], ids=more[2])
        assert "kw_docs" not in copied  # 5 rows: INSERT … unnest
        fl.add_texts(texts[:40], mds[:40], ids=ids[:40])
        fl.delete(ids[40:60])
        assert fl.check().clean
        local = _open(tmp_path / "r", pg_url, schema, fake_embeddings, mode="local")
        try:
            for query in ("refund invoice", "replica node", "password", "café naïve", "東京の桜"):
                want = local.engine.replica.keyword.handle.search(query, 10)
                got = fl.engine.replica.keyword.handle.search(query, 10)
                assert [i for i, _ in got] == [i for i, _ in want]
                assert [round(s, 6) for _, s in got] == [round(s, 6) for _, s in want]
        finally:
            local.close()
    finally:
        fl.close()


def test_a_write_failing_after_its_postings_were_copied_leaves_nothing(
    tmp_path: Path, pg_url: str, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = fresh_schema()
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    try:
        texts, mds, ids = _corpus(100)
        fl.add_texts(texts, mds, ids=ids)
        before = (_stats(fl), fl.count())
        _spy(monkeypatch, fail_on="kw_postings")
        more = _corpus(200, offset=100)
        with pytest.raises(RuntimeError, match="postings were copied"):
            fl.add_texts(*more[:2], ids=more[2])
        monkeypatch.undo()
        assert (_stats(fl), fl.count()) == before
        assert fl.check().clean
        fl.add_texts(*more[:2], ids=more[2])  # the same write again: goes in whole
        assert fl.count()["chunks"] == 300
        assert fl.check().clean
    finally:
        fl.close()


def _copied_rows(stream: bytes) -> list[tuple[str, int]]:
    """(term, doc) of each row of a binary COPY stream of ``kw_postings`` (header and trailer stripped)."""
    import struct

    rows, at = [], 0
    while at < len(stream):
        (fields,) = struct.unpack_from(">h", stream, at)
        at += 2
        values: list[bytes] = []
        for _ in range(fields):
            (size,) = struct.unpack_from(">i", stream, at)
            values.append(stream[at + 4 : at + 4 + size])
            at += 4 + size
        rows.append((values[0].decode("utf-8"), struct.unpack(">q", values[1])[0]))
    return rows


def test_postings_are_copied_in_term_order_then_doc_order(
    tmp_path: Path, pg_url: str, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each COPY of postings goes in the term index's order (a term's rows together, by doc; a COPY of more
    than one batch of chunks, batch by batch): its pages and the heap's are touched once each, in turn; every
    row sent is stored."""
    schema = fresh_schema()
    streams: list[bytes] = []
    real = bulk.copy_encoded

    def spy(cur: Any, schema: str, table: str, columns: Any, pieces: Any) -> None:
        pieces = list(pieces)  # produced while the COPY runs: taken once here
        if table == "kw_postings":
            streams.append(b"".join(pieces))
        real(cur, schema, table, columns, pieces)

    monkeypatch.setattr(bulk, "copy_encoded", spy)
    fl = _open(tmp_path / "w", pg_url, schema, fake_embeddings)
    try:
        texts, mds, ids = _corpus(300)
        fl.add_texts(texts, mds, ids=ids)
        assert streams
        sent = [row for stream in streams for row in _copied_rows(stream)]
        for stream in streams:
            rows = _copied_rows(stream)
            assert rows == sorted(rows), "a COPY of postings out of (term, doc) order"
            assert len({t for t, _ in rows}) < len(rows)  # terms shared by several chunks: grouped
        dialect = fl.ledger.dialect  # type: ignore[attr-defined]
        with dialect.reading() as conn:
            stored = conn.execute(dialect.sql("SELECT term, doc FROM {s}kw_postings")).fetchall()
        assert sorted(sent) == sorted((str(t), int(d)) for t, d in stored)
        assert {t for t, _ in sent} >= {"refund", "café", "東京"}  # non-ASCII terms in UTF-8 order too
    finally:
        fl.close()


@pytest.fixture(autouse=True)
def _needs_pgserver() -> None:
    pytest.importorskip("pgserver")
