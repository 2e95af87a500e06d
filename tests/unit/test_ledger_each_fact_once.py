"""Issue 29: the SQLite ledger stores each fact once (schema version 5).

A chunk whose text is its document's whole text stores no copy of it; a chunk's metadata is stored as what
differs from its document's and from its own columns; a document's ``_finderledge.id`` is its id column.
Every read gives back exactly what the whole rows gave (same dicts, same key order), for rows written in
the new form and for rows a version 4 ledger holds (written here as FinderLedge 79f6b67 wrote them), and
damage in the new form still quarantines its document and is reported by ``finderledge check``.
"""

from __future__ import annotations

import datetime
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finderledge.errors import IncompatibleIndexError
from finderledge.ledgers import SQLiteLedger
from finderledge.ledgers.base import ChunkRecord, DocumentRecord, check_schema_version, content_id
from finderledge.ledgers.rows import dumps_metadata
from finderledge.ledgers.sqlite import SQLITE_SCHEMA_VERSION
from finderledge.metadata import FL_KEY, child_id
from finderledge.replica.checking import check_directory

DIM = 8


def _vec(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype("float32")


def _doc(
    doc_id: str, text: str, md: dict[str, Any], count: int, *, fl: dict[str, Any] | None = None
) -> DocumentRecord:
    info = {"id": doc_id, "is_parent": True, "split_count": count, "doc_type": "text"} if fl is None else fl
    full = {**md, FL_KEY: info} if info else dict(md)
    return DocumentRecord(doc_id, md.get("source"), content_id(doc_id, text), "complete", text, full)


def _chunk(
    doc: DocumentRecord, i: int, text: str, md: dict[str, Any] | None = None, **fl: Any
) -> ChunkRecord:
    parent_fl = doc.metadata.get(FL_KEY, {})
    info = {
        "id": child_id(doc.id, i),
        "is_parent": False,
        "parent_id": doc.id,
        "split_index": i,
        "split_count": parent_fl.get("split_count", 1),
        "doc_type": parent_fl.get("doc_type", "text"),
        **fl,
    }
    user = {k: v for k, v in doc.metadata.items() if k != FL_KEY} if md is None else md
    return ChunkRecord(child_id(doc.id, i), doc.id, i, text, {**user, FL_KEY: info}, _vec(hash(text) % 1000))


def corpus() -> list[tuple[DocumentRecord, list[ChunkRecord]]]:
    """Documents whose chunks are every case the stored form must reproduce exactly."""
    out: list[tuple[DocumentRecord, list[ChunkRecord]]] = []
    # one chunk, its text the document's: nothing but the vector and the ids stored again
    d = _doc("one", "Refunds take five business days.", {"source": "faq.md", "tags": ["a", "b"], "n": 1}, 1)
    out.append((d, [_chunk(d, 0, d.content)]))
    # three chunks: one the same metadata, one with a page of its own (an override), one with headers
    text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota."
    d = _doc("multi", text, {"source": "book.txt", "nested": {"z": 1, "a": [1, {"y": 2, "b": 3}]}}, 3)
    out.append(
        (
            d,
            [
                _chunk(d, 0, text[:18]),
                _chunk(
                    d, 1, text[18:37], {**{k: v for k, v in d.metadata.items() if k != FL_KEY}, "page": 2}
                ),
                _chunk(d, 2, text[37:], headers=["H1", "H2"]),
            ],
        )
    )
    # values equal in Python but not in JSON: stored whole or as overrides, never read as the document's
    d = _doc(
        "types",
        "Types differ.",
        {"v": 1, "f": 0.0, "t": (1, 2), "s": "x", "when": datetime.date(2024, 5, 1)},
        2,
    )
    out.append(
        (
            d,
            [
                _chunk(
                    d,
                    0,
                    "Types",
                    {"v": True, "f": -0.0, "t": [1, 2], "s": "x", "when": datetime.date(2024, 5, 1)},
                ),
                _chunk(d, 1, "differ.", {"v": 1, "f": 0.0, "t": (1, 2), "s": "x", "when": "2024-05-01"}),
            ],
        )
    )
    # a chunk lacking a key of its document; one whose split_count is not its document's; an empty text
    d = _doc("lacks", "Secret text here.", {"secret": "yes", "source": "s.txt"}, 3)
    out.append(
        (
            d,
            [
                _chunk(d, 0, "Secret text", {"source": "s.txt"}),
                _chunk(d, 1, "here.", split_count=7),
                _chunk(d, 2, ""),
            ],
        )
    )
    # no _finderledge at all, an id that is not the row's, non-ASCII text and metadata
    d = _doc("bare", "Plain.", {"source": "bare"}, 1, fl={})
    out.append((d, [ChunkRecord("bare-0000", "bare", 0, "Plain.", {"source": "bare"}, _vec(5))]))
    d = _doc("other-id", "日本語のテキスト。", {"title": "日本"}, 1, fl={"id": "x", "is_parent": True})
    out.append((d, [_chunk(d, 0, d.content, split_count=1, doc_type="text")]))
    d = _doc("empty", "", {"document_id": "E1"}, 1)
    out.append((d, [_chunk(d, 0, "")]))
    d = _doc("wrong-parent", "Wrong parent field.", {"document_id": "E1"}, 1)
    out.append((d, [_chunk(d, 0, d.content, parent_id="someone-else")]))
    return out


def _expected(md: dict[str, Any]) -> str:
    """What the whole row gave back: its stored JSON read (dumped again without sorting: keeps the order)."""
    return json.dumps(json.loads(dumps_metadata(md)), ensure_ascii=False)


def _md(md: dict[str, Any]) -> str:
    return json.dumps(md, ensure_ascii=False)


def reads(ledger: SQLiteLedger, chunk_ids: list[str], doc_ids: list[str], seq: int) -> dict[str, Any]:
    """Everything every ledger read method answers, in a comparable form (metadata in its key order)."""

    def chunks(rows: list[ChunkRecord]) -> list[Any]:
        return [
            (
                c.id,
                c.parent_id,
                c.split_index,
                c.content,
                _md(c.metadata),
                None if c.embedding is None else c.embedding.tolist(),
            )
            for c in rows
        ]

    def docs(rows: list[DocumentRecord | None]) -> list[Any]:
        return [
            None if d is None else (d.id, d.source, d.content_hash, d.state, d.content, _md(d.metadata))
            for d in rows
        ]

    return {
        "get_chunks": chunks(ledger.get_chunks(chunk_ids)),
        "get_chunks_embedding": chunks(ledger.get_chunks(chunk_ids, with_embedding=True)),
        "get_chunks_visible": chunks(ledger.get_chunks(chunk_ids, with_embedding=True, visible_at=seq)),
        "get_chunk": chunks([c for i in chunk_ids if (c := ledger.get_chunk(i)) is not None]),
        "chunks_of": {d: chunks(ledger.chunks_of(d, with_embedding=True)) for d in doc_ids},
        "get_document": docs([ledger.get_document(d) for d in doc_ids]),
        "list_documents": docs(list(ledger.list_documents())),
        "list_where": docs(list(ledger.list_documents(where=lambda md: "source" in md, offset=1, limit=3))),
        "list_source": docs(list(ledger.list_documents(source="book.txt"))),
        "document_metadata": [(i, _md(m)) for i, m in ledger.document_metadata()],
        "ids_with_document_id": ledger.ids_with_document_id("E1"),
        "counts": ledger.counts(),
        "chunk_count": ledger.chunk_count(doc_ids),
        "sources": ledger.sources(),
        "complete_chunk_ids": sorted(ledger.complete_chunk_ids()),
        "sample": ledger.sample_chunk_ids(4),
        "content_hashes": ledger.content_hashes(doc_ids),
        "states": [ledger.document_state(d) for d in doc_ids],
    }


def _write_v4(path: Path, add: list[tuple[DocumentRecord, list[ChunkRecord]]]) -> None:
    """A version 4 ledger holding ``add``, its rows as FinderLedge 79f6b67 wrote them (whole)."""
    SQLiteLedger(path).close()
    con = sqlite3.connect(path)
    with con:
        con.execute("DROP INDEX documents_pending")  # version 4's indexes instead
        con.execute("CREATE INDEX IF NOT EXISTS chunks_parent ON chunks(parent_id, split_index)")
        con.execute("CREATE INDEX IF NOT EXISTS documents_state ON documents(state)")
        for seq, (doc, chunks) in enumerate(add, start=1):
            con.execute(
                "INSERT INTO changes(seq, op, doc_id, chunk_count) VALUES (?, 'add', ?, ?)",
                (seq, doc.id, len(chunks)),
            )
            con.execute(
                "INSERT INTO documents(id, source, content_hash, state, content, metadata, added_at, added_seq)"
                " VALUES (?, ?, ?, 'complete', ?, ?, ?, ?)",
                (
                    doc.id,
                    doc.source,
                    doc.content_hash,
                    doc.content,
                    dumps_metadata(doc.metadata),
                    time.time(),
                    seq,
                ),
            )
            con.executemany(
                "INSERT INTO chunks(id, parent_id, split_index, content, metadata, embedding, text_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        c.id,
                        c.parent_id,
                        c.split_index,
                        c.content,
                        dumps_metadata(c.metadata),
                        np.asarray(c.embedding, dtype="<f4").tobytes(),
                        content_id(c.content),
                    )
                    for c in chunks
                ],
            )
        con.execute("UPDATE info SET value='4' WHERE key='schema_version'")
    con.close()


def _stage(ledger: SQLiteLedger) -> tuple[DocumentRecord, list[ChunkRecord]]:
    """A big document written as staged chunks (no document row yet when they are written), then published."""
    doc = _doc("staged", "Staged one. Staged two.", {"source": "big.txt"}, 2)
    chunks = [_chunk(doc, 0, "Staged one."), _chunk(doc, 1, "Staged two.")]
    assert ledger.stage_document(doc.id)
    ledger.stage_chunks(doc.id, chunks)
    ledger.commit_write(publish=[(doc, len(chunks))])
    return doc, chunks


def _ids(add: list[tuple[DocumentRecord, list[ChunkRecord]]]) -> tuple[list[str], list[str]]:
    return [c.id for _, cs in add for c in cs], [d.id for d, _ in add]


def _check_against_input(got: dict[str, Any], add: list[tuple[DocumentRecord, list[ChunkRecord]]]) -> None:
    """The reads give back each input record's text and its metadata as the whole JSON gave it."""
    want_chunks = [
        (c.id, c.parent_id, c.split_index, c.content, _expected(c.metadata)) for _, cs in add for c in cs
    ]
    assert [row[:5] for row in got["get_chunks"]] == want_chunks
    want_docs = [(d.id, d.content, _expected(d.metadata)) for d, _ in add]
    assert [(row[0], row[4], row[5]) for row in got["get_document"]] == want_docs


def test_every_read_gives_back_what_whole_rows_gave(tmp_path: Path) -> None:
    add = corpus()
    new, old = tmp_path / "new" / "ledger.sqlite3", tmp_path / "old" / "ledger.sqlite3"
    ledger = SQLiteLedger(new)
    try:
        ledger.set_info("embedding_dimension", str(DIM))
        ledger.commit_write(add=add)
        staged = _stage(ledger)
        ledger.commit_write(remove=["types"])  # removed: its rows are still read (visible_at an earlier seq)
        chunk_ids, doc_ids = _ids([*add, staged])
        got_new = reads(ledger, chunk_ids, doc_ids, seq=len(add))
    finally:
        ledger.close()
    _write_v4(old, add)
    ledger = SQLiteLedger(old)
    try:
        ledger.set_info("embedding_dimension", str(DIM))
        _stage(ledger)
        ledger.commit_write(remove=["types"])
        got_old = reads(ledger, chunk_ids, doc_ids, seq=len(add))
    finally:
        ledger.close()
    assert got_new == got_old  # the version 4 rows (whole) and version 5 rows read the same
    _check_against_input(got_new, [*add, staged])
    assert got_new["get_chunks_visible"] == [
        r for r in got_new["get_chunks_embedding"] if not r[0].startswith("staged")
    ]
    con = sqlite3.connect(new)
    try:  # and they are stored once: the one-chunk document's chunk holds neither its text nor its metadata
        assert con.execute("SELECT content, metadata FROM chunks WHERE id='one-0000'").fetchone() == (b"", "")
        stored = con.execute("SELECT metadata FROM documents WHERE id='one'").fetchone()[0]
        assert '"id"' not in stored and "is_parent" not in stored
        assert (
            con.execute("SELECT typeof(content) FROM chunks WHERE parent_id='staged'").fetchall()
            == [("text",)] * 2
        )
    finally:
        con.close()


def test_a_version_4_ledger_is_read_written_and_then_refused_by_older_code(tmp_path: Path) -> None:
    add = corpus()
    path = tmp_path / "old" / "ledger.sqlite3"
    _write_v4(path, add[:4])
    ledger = SQLiteLedger(path)  # opening records version 5 (no row is rewritten)
    try:
        ledger.set_info("embedding_dimension", str(DIM))
        assert ledger.get_info("schema_version") == str(SQLITE_SCHEMA_VERSION)
        ledger.commit_write(add=add[4:])  # new rows in the new form next to the old whole ones
        chunk_ids, doc_ids = _ids(add)
        got = reads(ledger, chunk_ids, doc_ids, seq=ledger.last_seq())
    finally:
        ledger.close()
    _check_against_input(got, add)
    with pytest.raises(IncompatibleIndexError, match="newer FinderLedge"):
        check_schema_version(str(path), str(SQLITE_SCHEMA_VERSION))  # what version 4 code does at open
    con = sqlite3.connect(path)
    try:
        whole = con.execute("SELECT metadata FROM chunks WHERE id='one-0000'").fetchone()[0]
        assert json.loads(whole)[FL_KEY]["id"] == "one-0000"  # an old row kept as it was
        assert con.execute("SELECT content FROM chunks WHERE id='empty-0000'").fetchone() == (b"",)
    finally:
        con.close()
    assert check_directory(path.parent).clean


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("DELETE FROM documents WHERE id='one'", "is not in the ledger"),
        ("UPDATE chunks SET content=X'0102' WHERE id='one-0000'", "value, not text"),
        ("UPDATE chunks SET metadata='[1]' WHERE id='multi-0001'", "stored form"),
        ("UPDATE chunks SET metadata='[{}, {}' WHERE id='multi-0001'", "not readable JSON"),
        ("UPDATE documents SET metadata='[{}]' WHERE id='multi'", "holds no _finderledge"),
        ("UPDATE documents SET metadata='[{\"_finderledge\": {}}]' WHERE id='multi'", "lacks doc_type"),
    ],
)
def test_damage_in_the_new_form_quarantines_its_document_and_is_reported(
    tmp_path: Path, how: str, reason: str
) -> None:
    add = corpus()
    path = tmp_path / "index" / "ledger.sqlite3"
    ledger = SQLiteLedger(path)
    ledger.set_info("embedding_dimension", str(DIM))
    ledger.commit_write(add=add)
    ledger.close()
    con = sqlite3.connect(path)
    with con:
        con.execute(how)
    con.close()
    owner = "one" if "'one" in how else "multi"
    report = check_directory(path.parent)
    assert owner in report.damaged_documents and reason in report.damaged_documents[owner]
    ledger = SQLiteLedger(path)
    try:
        chunk_ids, _ = _ids(add)
        found = {c.parent_id for c in ledger.get_chunks(chunk_ids)}
        assert owner not in found and owner in ledger.quarantine.items()
        assert reason in ledger.quarantine.items()[owner]
        assert found == {d.id for d, _ in add} - {owner}  # every other document is still read
    finally:
        ledger.close()


# statements that read every row by design (a whole catalog, every chunk id): a scan is their cost
_WHOLE_READS = ("ORDER BY seq", "JOIN documents d ON d.id = c.parent_id WHERE d.state")


@pytest.mark.parametrize("layout", ["new", "version 4"])
def test_every_query_of_a_document_or_a_state_is_answered_by_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """No chunks_parent or documents_state index in a new ledger: each query they answered seeks the primary
    key (a document's chunk ids are one range) or the partial index of documents not complete instead.
    Every statement the ledger runs (traced) is planned again here: none scans a table it should seek."""
    path = tmp_path / "ledger.sqlite3"
    if layout == "version 4":  # with the indexes a version 4 ledger has
        _write_v4(path, [])
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        con = connect(*args, **kwargs)
        con.set_trace_callback(statements.append)  # each statement with its values
        return con

    monkeypatch.setattr(sqlite3, "connect", traced)
    add = corpus()
    ledger = SQLiteLedger(path)
    try:
        ledger.set_info("embedding_dimension", str(DIM))
        ledger.commit_write(add=add)
        _stage(ledger)
        ledger.commit_write(remove=["types"])
        chunk_ids, doc_ids = _ids(add)
        reads(ledger, chunk_ids, doc_ids, seq=len(add))
        ledger.commit_write(add=add[:2])  # written again: their earlier rows deleted
        assert ledger.stage_document("discarded")
        ledger.discard_staged(["discarded"])
        assert ledger.collect_removed(older_than=0) == 1
    finally:
        ledger.close()
    monkeypatch.undo()
    con = sqlite3.connect(path)
    try:
        indexes = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        plans = {
            sql: [r[3] for r in con.execute("EXPLAIN QUERY PLAN " + sql)]
            for sql in statements
            if sql.lstrip().upper().startswith(("SELECT", "DELETE", "UPDATE"))
            and (" chunks" in sql or " documents" in sql)
        }
    finally:
        con.close()
    if layout == "new":
        assert "chunks_parent" not in indexes and "documents_state" not in indexes
        assert "documents_pending" in indexes
    else:
        assert {"chunks_parent", "documents_state"} <= indexes and "documents_pending" not in indexes
    scans = {
        sql: plan
        for sql, plan in plans.items()
        if not any(w in sql for w in _WHOLE_READS)
        and any(re.fullmatch(r"SCAN (chunks|c|documents|d)", step) for step in plan)
    }
    assert not scans
    by_range = [p for sql, p in plans.items() if "c.id >= " in sql]
    seek = "(id>? AND id<?)" if layout == "new" else "USING INDEX"  # version 4: chunks_parent serves too
    assert len(by_range) >= 4 and all(seek in " ".join(p) for p in by_range)
    collect = [p for sql, p in plans.items() if "removed_at <" in sql]
    assert collect and all(
        ("documents_pending" if layout == "new" else "documents_state") in p[0] for p in collect
    )


def test_stored_vectors_are_found_by_text_hash_in_both_forms(tmp_path: Path) -> None:
    """A chunk's text hash is stored as its 16 bytes (version 5) or as 32 hex characters (version 4 rows):
    the vectors of stored chunks are reused by hash either way, and publishing a staged document drops the
    cache entries of the vectors its chunks now hold."""
    add = corpus()
    path = tmp_path / "ledger.sqlite3"
    _write_v4(path, add[:2])  # whole rows, hex hashes
    ledger = SQLiteLedger(path)
    try:
        ledger.set_info("embedding_model_id", "m")
        ledger.commit_write(add=add[2:])  # new rows, 16-byte hashes
        chunks = [c for _, cs in add for c in cs]
        found = ledger.cached_embeddings("m", [content_id(c.content) for c in chunks] + ["not hex"])
        assert set(found) == {content_id(c.content) for c in chunks}
        for c in chunks:  # equal texts are given equal vectors here (_vec of the text)
            assert np.array_equal(found[content_id(c.content)], c.embedding)
        assert ledger.cached_embeddings("other model", [content_id(chunks[0].content)]) == {}
        staged_texts = ["Staged one.", "Staged two."]
        ledger.cache_embeddings("m", [(content_id(t), _vec(i)) for i, t in enumerate(staged_texts)])
        assert ledger.embedding_cache_size()["entries"] == 2
        _stage(ledger)
        assert ledger.embedding_cache_size()["entries"] == 0  # each vector kept once: in its chunk now
    finally:
        ledger.close()
    con = sqlite3.connect(path)
    try:
        kinds = dict(con.execute("SELECT parent_id, typeof(text_hash) FROM chunks"))
    finally:
        con.close()
    assert kinds["one"] == "text" and kinds["types"] == "blob" and kinds["staged"] == "blob"
