"""Postgres mode stores each chunk's text once (issue 43): a chunk that is its document's whole text stores none,
a chunk that is an exact slice of it stores its span (code points, as Python's ``str`` and PostgreSQL's
``substr`` in a UTF-8 database count them), any other chunk (re-serialised JSON, a text with NUL) stores its text.

Every read gives back exactly the texts local mode gives (chunks, searches, the engine's keyword postings and
``finderledge check``); a schema the previous release wrote (every text stored) is migrated at open and its
rows read as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.errors import IncompatibleIndexError
from finderledge.ledgers import COMPLETE, ChunkRecord, DocumentRecord, SQLiteLedger
from finderledge.ledgers.base import check_schema_version
from finderledge.ledgers.bulk import COPY_MIN_ROWS
from finderledge.ledgers.postgres import POSTGRES_SCHEMA_VERSION, PostgresLedger
from finderledge.ledgers.rows import SPAN_MAX_END, text_spans

ENGLISH = " ".join(
    f"Paragraph {i}: the refund ledger records invoice {i} for warehouse shelf {i % 7}, and the auditor "
    f"checks latency of replica node {i % 3} before the quarterly report."
    for i in range(12)
)
JAPANESE = "".join(
    f"第{i}章：東京の倉庫では請求書{i}番を確認し、監査役が四半期報告の前に複製ノード{i % 3}の遅延を調べる。🍣\n"
    for i in range(14)
)
SHORT = "one chunk: the whole document text"
RECORDS = {"kind": "records", "rows": [{"id": i, "name": f"名前{i}", "note": "x" * 40} for i in range(12)]}
TEXTS = [
    ("en", ENGLISH, {"tenant": "a", "title": "English report"}),
    ("ja", JAPANESE, {"tenant": "b", "title": "日本語の報告"}),
    ("short", SHORT, {"tenant": "a"}),
    ("json", json.dumps(RECORDS, indent=2), {"tenant": "c", "doc_type_detected": "json"}),
]
QUERIES = ["refund invoice", "warehouse shelf 3", "請求書", "複製ノード", "whole document", "名前3 note"]
SETTINGS: dict[str, Any] = {"chunk_size": 200, "chunk_overlap": 40, "chunk_context": True, "fusion": "rrf"}


def _open(directory: Path, fake: Any, **where: Any) -> FinderLedge:
    return FinderLedge(directory, embedding=fake, show_progress=False, **SETTINGS, **where)


def _add(fl: FinderLedge) -> None:
    fl.add_texts([t for _, t, _ in TEXTS], [md for _, _, md in TEXTS], ids=[i for i, _, _ in TEXTS])


def _stored(url: str, schema: str, spans: str = "text_start, text_length") -> dict[str, tuple[Any, ...]]:
    """Each chunk row's stored text columns: ``id -> (content, text_start, text_length)``."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(f'SELECT id, content, {spans} FROM "{schema}".chunks ORDER BY id').fetchall()
    return {r[0]: r[1:] for r in rows}


def _texts(fl: FinderLedge) -> dict[str, list[tuple[str, str]]]:
    return {i: [(c.id, c.content) for c in fl.ledger.chunks_of(i)] for i, _, _ in TEXTS}


def _search(fl: FinderLedge) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every hit of :data:`QUERIES` (both legs): its text and its metadata without the search's scores."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for q in QUERIES:
        for r in fl.search(q, k=8):
            fl_md = {k: v for k, v in r.document.metadata["_finderledge"].items() if k in _CHUNK_FIELDS}
            found[r.id] = (r.document.page_content, {**r.document.metadata, "_finderledge": fl_md})
    return found


_CHUNK_FIELDS = {
    "context",
    "doc_type",
    "id",
    "is_parent",
    "parent_id",
    "split_count",
    "split_index",
    "headers",
}


def _same_hits(pg: FinderLedge, local: FinderLedge) -> None:
    """Each hit's text and metadata in Postgres mode are exactly the local ledger's for that chunk."""
    hits = _search(pg)
    assert len(hits) >= len(QUERIES)
    want = _search(local)
    for cid, (text, md) in hits.items():
        (chunk,) = local.ledger.get_chunks([cid])
        assert text == chunk.content, cid
        if cid in want:
            assert (text, md) == want[cid], cid


def test_chunk_texts_are_stored_once_and_read_back_exactly(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    local = _open(tmp_path / "local", fake_embeddings)
    schema = fresh_schema()
    pg = _open(
        tmp_path / "pg", fake_embeddings, database_url=pg_url, database_schema=schema, keyword_index="engine"
    )
    try:
        _add(local)
        _add(pg)
        expected = _texts(local)
        assert all(len(expected[i]) > 3 for i in ("en", "ja", "json")) and len(expected["short"]) == 1
        assert sum(map(len, expected.values())) >= COPY_MIN_ROWS  # one write: the chunk rows went in by COPY
        assert _texts(pg) == expected  # chunks_of: every text exactly the splitter's
        ids = [cid for chunks in expected.values() for cid, _ in chunks]
        assert [(c.id, c.content) for c in pg.ledger.get_chunks(ids)] == [
            (c.id, c.content) for c in local.ledger.get_chunks(ids)
        ]
        _same_hits(pg, local)  # texts, metadata (context prefixes included)

        stored = _stored(pg_url, schema)
        by_doc = {i: [stored[cid] for cid, _ in expected[i]] for i in expected}
        assert by_doc["short"] == [(None, None, None)]  # its document's whole text: nothing stored
        for doc in ("en", "ja"):  # slices of the document, overlapping: a span each, no text
            text = {i: t for i, t, _ in TEXTS}[doc]
            for (content, start, length), (_, chunk) in zip(by_doc[doc], expected[doc]):
                assert content is None and text[start : start + length] == chunk
        # the JSON splitter re-serialises: its chunks are not slices and keep their own text
        assert any(content is not None for content, _, _ in by_doc["json"])
        assert pg.check().clean  # the engine's postings match the texts read back (check rebuilds them)

        # bytes: the chunk rows hold no text of the sliced documents
        with psycopg.connect(pg_url) as conn:
            held = conn.execute(
                f"SELECT coalesce(sum(octet_length(content)), 0) FROM \"{schema}\".chunks WHERE parent_id <> 'json'"
            ).fetchone()
        assert held == (0,)

        # removed and added again: still exact; the postings follow the texts
        pg.delete(["en"])
        local.delete(["en"])
        _add(pg)
        _add(local)
        assert _texts(pg) == _texts(local) and pg.check().clean
        _same_hits(pg, local)
    finally:
        pg.close()
        local.close()


def _doc(doc_id: str, text: str, pieces: list[str]) -> tuple[DocumentRecord, list[ChunkRecord]]:
    md = {"_finderledge": {"id": doc_id, "is_parent": True, "split_count": len(pieces), "doc_type": "text"}}
    record = DocumentRecord(doc_id, f"{doc_id}.txt", f"h-{doc_id}", COMPLETE, text, md)
    chunks = [
        ChunkRecord(f"{doc_id}-{j:04d}", doc_id, j, piece, {"_finderledge": {"id": f"{doc_id}-{j:04d}"}})
        for j, piece in enumerate(pieces)
    ]
    return record, chunks


def test_spans_count_code_points_and_only_exact_slices_lose_their_text(pg_url: str, tmp_path: Path) -> None:
    """Multi-byte and astral characters, overlapping slices, a chunk found before the previous one, a chunk
    that is no slice, NUL, and a slice ending past :data:`SPAN_MAX_END`: each read back exactly."""
    mixed = "".join(f"{i}aé日本🍣語b" for i in range(30))  # no repeats: each slice found where it was cut
    long = "x" * SPAN_MAX_END + "tail end"
    docs = [
        _doc("m", mixed, [mixed[0:50], mixed[40:120], mixed[5:9], "not in the text", mixed[100:]]),
        _doc("n", "a\x00b c", ["a\x00b", "b c"]),  # NUL: the document is stored as JSON, chunks keep texts
        _doc("w", "whole", ["whole"]),
        _doc("l", long, [long[:100], long[-8:]]),
    ]
    schema = fresh_schema()
    pg = PostgresLedger(pg_url, schema=schema)
    lite = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        for ledger in (pg, lite):
            ledger.commit_write(docs)
        for doc, chunks in docs:
            want = [(c.id, c.content) for c in chunks]
            assert [(c.id, c.content) for c in pg.chunks_of(doc.id)] == want
            assert [(c.id, c.content) for c in lite.chunks_of(doc.id)] == want
            assert [(c.id, c.content) for c in pg.get_chunks([c.id for c in chunks])] == want
        stored = _stored(pg_url, schema)
        m_chunks = docs[0][1]
        assert [stored[c.id][0] for c in m_chunks] == [None, None, None, "not in the text", None]
        for c in m_chunks:
            _, start, length = stored[c.id]
            assert start is None or (mixed[start : start + length] == c.content and length == len(c.content))
        assert [stored[c.id][1] for c in m_chunks[:2]] == [0, 40]  # code points, not UTF-8 bytes
        assert stored["n-0000"][0] is not None and stored["n-0001"][0] == "b c"
        assert stored["w-0000"] == (None, None, None)
        assert stored["l-0000"] == (None, 0, 100) and stored["l-0001"] == ("tail end", None, None)
    finally:
        pg.close()
        lite.close()
    assert text_spans("abcabc", ["abc", "abc", "bca", "zz"]) == [(0, 3), (3, 3), (1, 3), None]


def _as_version_4(fl: FinderLedge, url: str, schema: str) -> None:
    """Put a schema this release wrote back into the layout the previous release (schema version 4) writes:
    every chunk's own text in ``content NOT NULL``, no span columns (its DDL, ``_ledger_ddl`` before 5)."""
    texts = {c.id: c.content for i, _, _ in TEXTS for c in fl.ledger.chunks_of(i)}
    fl.close()
    with psycopg.connect(url) as conn:
        s = f'"{schema}"'
        for cid, text in texts.items():  # rows stored once hold none: a text with NUL never is (kept as JSON)
            conn.execute(f"UPDATE {s}.chunks SET content = %s WHERE id = %s AND content IS NULL", (text, cid))
        conn.execute(f"ALTER TABLE {s}.chunks DROP COLUMN text_start, DROP COLUMN text_length")
        conn.execute(f"ALTER TABLE {s}.chunks ALTER COLUMN content SET NOT NULL")
        conn.execute(f"UPDATE {s}.info SET value = '4' WHERE key = 'schema_version'")


def test_a_schema_the_previous_release_wrote_is_migrated_at_open(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    schema = fresh_schema()
    writer = _open(
        tmp_path / "old", fake_embeddings, database_url=pg_url, database_schema=schema, keyword_index="engine"
    )
    _add(writer)
    _as_version_4(writer, pg_url, schema)
    old = _stored(pg_url, schema, "NULL, NULL")  # schema version 4 has no span columns
    assert old and all(content is not None for content, _, _ in old.values())  # every text stored

    local = _open(tmp_path / "local", fake_embeddings)
    pg = _open(
        tmp_path / "new", fake_embeddings, database_url=pg_url, database_schema=schema, keyword_index="engine"
    )
    try:
        _add(local)
        assert pg.ledger.get_info("schema_version") == str(POSTGRES_SCHEMA_VERSION)
        assert _texts(pg) == _texts(local)  # old rows read as they are
        _same_hits(pg, local)
        assert pg.check().clean
        extra = ("more", ENGLISH[::-1], {"tenant": "a"})
        for fl in (pg, local):
            fl.add_texts([extra[1]], [extra[2]], ids=[extra[0]])
        assert [c.content for c in pg.ledger.chunks_of("more")] == [
            c.content for c in local.ledger.chunks_of("more")
        ]
        new = _stored(pg_url, schema)
        assert all(new[i] == old[i] for i in old)  # rows of the old release untouched
        assert all(new[i][0] is None for i in new if i.startswith("more-"))  # new rows: text once
        _same_hits(pg, local)
        assert pg.check().clean
    finally:
        pg.close()
        local.close()
    # the previous release (schema version 4) refuses the migrated schema (it would misread its rows)
    with psycopg.connect(pg_url) as conn:
        recorded = conn.execute(
            f"SELECT value FROM \"{schema}\".info WHERE key = 'schema_version'"
        ).fetchone()
    with pytest.raises(IncompatibleIndexError, match="written by a newer FinderLedge"):
        check_schema_version("old", recorded[0] if recorded else None, 4)
    with pytest.raises(IncompatibleIndexError):  # and this one refuses a newer layout still
        with psycopg.connect(pg_url) as conn:
            conn.execute(f"UPDATE \"{schema}\".info SET value = '8' WHERE key = 'schema_version'")
        PostgresLedger(pg_url, schema=schema)
