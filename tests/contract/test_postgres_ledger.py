"""The PostgreSQL ledger and the pgvector backend against a real PostgreSQL 16 + pgvector (pgserver wheel).

* a small ledger contract: the same assertions against :class:`SQLiteLedger` (a file) and :class:`PostgresLedger`;
* what only the PostgreSQL ledger promises: vectors written and removed in the ledger's transaction, sequence
  numbers that commit in order under concurrent writers, the dimension rule, the advisory write lock (timeout,
  holder named, released when its process is killed), no secrets in errors or logs;
* the vector-store contract (standalone and inside the ledger), the HNSW path, and a Hypothesis property:
  ``pg_filter.to_sql`` never narrows what :func:`compile_filter` accepts (and is exact on rows ``jsonb`` holds).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import psycopg.sql
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pg_server import StatementCounter, fresh_schema  # the pg_url fixture comes from conftest.py
from test_filter_property import FIELDS, VALUES, _ordered, _scalar
from test_vector_store_contract import DIM, VectorStoreContract, _vectors

from finderledge.errors import ConfigurationError, IncompatibleIndexError, LockTimeoutError
from finderledge.filters import compile_filter
from finderledge.ingest.splitter import child_id  # chunk ids are <parent>-NNNN in every ledger
from finderledge.ledgers import COMPLETE, REMOVED, ChunkRecord, DocumentRecord, Ledger, SQLiteLedger
from finderledge.ledgers.base import SCHEMA_VERSION, content_id
from finderledge.ledgers.postgres import (
    POSTGRES_SCHEMA_VERSION,
    PostgresConnectionError,
    PostgresDialect,
    PostgresLedger,
    advisory_key,
)
from finderledge.ledgers.sqlite import SQLITE_SCHEMA_VERSION
from finderledge.metadata import embedded_text
from finderledge.vector_stores import LEDGER, SHARED, VectorStore, create_vector_store
from finderledge.vector_stores import pgvector as pgv
from finderledge.vector_stores.pg_filter import jsonb_text, to_sql

FL = "_finderledge"


# -- records --------------------------------------------------------------------------------------------
def _doc(
    i: int,
    *,
    chunks: int = 2,
    source: str | None = None,
    content: str | None = None,
    md: dict[str, Any] | None = None,
    dim: int = DIM,
    embed: bool = True,
) -> tuple[DocumentRecord, list[ChunkRecord]]:
    doc_id = f"doc-{i}"
    meta = {"n": i, "document_id": f"D{i % 3}", FL: {"id": doc_id, "is_parent": True}, **(md or {})}
    vectors = _vectors(chunks, seed=i) if dim == DIM else np.ones((chunks, dim), dtype=np.float32)
    record = DocumentRecord(
        doc_id,
        source if source is not None else f"src/{i % 2}.md",
        f"hash-{i}",
        COMPLETE,
        content if content is not None else f"document {i}",
        meta,
    )
    parts = [
        ChunkRecord(
            child_id(doc_id, j),
            doc_id,
            j,
            f"chunk {j} of {i}",
            {"n": i, "j": j, FL: {"id": child_id(doc_id, j), "parent_id": doc_id}},
            vectors[j] if embed else None,
        )
        for j in range(chunks)
    ]
    return record, parts


@pytest.fixture(params=["sqlite", "postgres"])
def make_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A factory of ledgers of one kind over one place (calling it again reopens the same ledger)."""
    opened: list[Ledger] = []
    schema = fresh_schema()

    def make() -> Ledger:
        if request.param == "sqlite":
            ledger: Ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
        else:
            ledger = PostgresLedger(request.getfixturevalue("pg_url"), schema=schema)
        opened.append(ledger)
        return ledger

    yield make
    for ledger in opened:
        ledger.close()


# -- the contract both ledgers meet ---------------------------------------------------------------------
def test_an_empty_ledger(make_ledger: Any) -> None:
    ledger = make_ledger()
    assert ledger.last_seq() == 0 and ledger.changes_since(0) == []
    assert ledger.counts() == {"documents": 0, "chunks": 0}
    assert ledger.get_info("nothing") is None and ledger.get_document("doc-1") is None
    assert ledger.sources() == [] and ledger.list_documents() == []
    # each kind records its own layout: SQLite's stores each fact once (version 5), Postgres's a chunk's text
    # once and each term's df (version 6, issue 43); both read the version 4 layout
    expected = (
        str(SQLITE_SCHEMA_VERSION) if isinstance(ledger, SQLiteLedger) else str(POSTGRES_SCHEMA_VERSION)
    )
    assert (
        ledger.get_info("schema_version") == expected and SCHEMA_VERSION == 4 and SQLITE_SCHEMA_VERSION == 5
    )
    assert POSTGRES_SCHEMA_VERSION == 7


def test_writes_are_logged_and_read_back(make_ledger: Any) -> None:
    ledger = make_ledger()
    assert ledger.commit_write([_doc(i) for i in range(4)]) == 4
    assert [(c.seq, c.op, c.doc_id, c.chunk_count) for c in ledger.changes_since(1, upto=3)] == [
        (2, "add", "doc-1", 2),
        (3, "add", "doc-2", 2),
    ]
    assert ledger.counts() == {"documents": 4, "chunks": 8}
    doc = ledger.get_document("doc-2")
    assert (
        doc is not None
        and doc.content == "document 2"
        and doc.metadata[FL] == {"id": "doc-2", "is_parent": True}
    )
    assert ledger.document_state("doc-2") == COMPLETE and ledger.document_state("nope") is None
    assert ledger.complete_ids(["doc-1", "doc-3", "nope", "doc-1"]) == {"doc-1", "doc-3"}
    assert ledger.document_ids() == ["doc-0", "doc-1", "doc-2", "doc-3"]
    assert ledger.document_ids(source="src/1.md") == ["doc-1", "doc-3"]
    assert ledger.content_hashes(["doc-0", "nope"]) == {"doc-0": "hash-0"}
    assert [d.id for d in ledger.list_documents(offset=1, limit=2)] == ["doc-1", "doc-2"]
    assert [d.id for d in ledger.list_documents(source="src/0.md")] == ["doc-0", "doc-2"]
    assert [d.id for d in ledger.list_documents(where=lambda md: md["n"] > 0, offset=1)] == ["doc-2", "doc-3"]
    assert [i for i, _ in ledger.document_metadata(source="src/1.md")] == ["doc-1", "doc-3"]
    assert ledger.document_ids(where=lambda md: md["n"] % 2 == 0) == ["doc-0", "doc-2"]
    assert ledger.ids_with_document_id("D0") == ["doc-0", "doc-3"] and ledger.ids_with_document_id("D9") == []
    assert ledger.chunk_count(["doc-0", "doc-1", "nope"]) == 4
    chunks = ledger.get_chunks(["doc-1-0001", "unknown", "doc-0-0000"], with_embedding=True)
    assert [c.id for c in chunks] == ["doc-1-0001", "doc-0-0000"]
    assert chunks[0].content == "chunk 1 of 1" and chunks[0].metadata["j"] == 1 and chunks[0].split_index == 1
    assert chunks[0].embedding is not None and chunks[0].embedding.dtype == np.float32
    assert np.array_equal(chunks[0].embedding, _vectors(2, seed=1)[1])  # float32 exactly
    assert ledger.get_chunk("doc-1-0001") is not None and ledger.get_chunk("doc-1-0001").embedding is None  # type: ignore[union-attr]
    assert [c.split_index for c in ledger.chunks_of("doc-3", with_embedding=True)] == [0, 1]
    assert ledger.complete_chunk_ids() == {child_id(f"doc-{i}", j) for i in range(4) for j in range(2)}
    assert ledger.sources() == ["src/0.md", "src/1.md"]
    assert sorted(ledger.sources_under("src/")) == ["src/0.md", "src/1.md"]


def test_removal_keeps_rows_for_the_grace_period_and_readding_replaces_them(make_ledger: Any) -> None:
    ledger = make_ledger()
    ledger.commit_write([_doc(i) for i in range(3)])
    assert ledger.commit_write(remove=["doc-1"]) == 4
    assert (
        ledger.changes_since(3) == [ledger.changes_since(3)[0]] and ledger.changes_since(3)[0].op == "remove"
    )
    assert ledger.changes_since(3)[0].chunk_count == 2
    assert ledger.document_state("doc-1") == REMOVED and ledger.complete_ids(["doc-1"]) == set()
    assert ledger.counts()["documents"] == 2 and "doc-1" not in ledger.document_ids()
    # a search whose indexes reflect seq 3 still finds the texts; one at seq 4 no longer does
    assert [c.id for c in ledger.get_chunks(["doc-1-0000", "doc-0-0000"], visible_at=3)] == [
        "doc-1-0000",
        "doc-0-0000",
    ]
    assert [c.id for c in ledger.get_chunks(["doc-1-0000", "doc-0-0000"], visible_at=4)] == ["doc-0-0000"]
    assert [c.id for c in ledger.get_chunks(["doc-2-0000"], visible_at=2)] == []  # added at seq 3
    assert ledger.collect_removed() == 0 and ledger.chunk_count(["doc-1"]) == 2
    # re-adding the id deletes the removed rows first; it now comes last in insertion order
    assert ledger.commit_write([_doc(1, chunks=1)]) == 5
    assert ledger.chunk_count(["doc-1"]) == 1 and ledger.document_ids() == ["doc-0", "doc-2", "doc-1"]
    ledger.commit_write(remove=["doc-2"])
    assert ledger.collect_removed(older_than=0) == 1
    assert ledger.document_state("doc-2") is None and ledger.get_chunks(["doc-2-0000"], visible_at=5) == []


def test_remove_and_readd_in_one_write(make_ledger: Any) -> None:
    ledger = make_ledger()
    ledger.commit_write([_doc(1)])
    assert ledger.commit_write([_doc(1, chunks=3)], remove=["doc-1"]) == 3
    assert [c.op for c in ledger.changes_since(1)] == ["remove", "add"]
    assert ledger.document_state("doc-1") == COMPLETE and ledger.chunk_count(["doc-1"]) == 3


def test_texts_metadata_and_sources_round_trip_exactly(make_ledger: Any) -> None:
    ledger = make_ledger()
    md = {
        "f": 0.1,
        "big": 2**70,
        "huge": 1e300,
        "neg": -0.0,
        "nul": "a\x00b",
        "ja": "東京",
        "nested": {"x": [1, 2.0]},
        "none": None,
        "document_id": "x y",
    }
    ledger.commit_write(
        [
            _doc(1, content="NUL \x00 inside, 日本語", md=md),
            _doc(2, source="B"),
            _doc(3, source="a"),
            _doc(4, source="東京"),
            _doc(5, source="a_%"),
        ]
    )
    doc = ledger.get_document("doc-1")
    assert doc is not None and doc.content == "NUL \x00 inside, 日本語"
    for key, value in md.items():
        assert doc.metadata[key] == value and type(doc.metadata[key]) is type(value), key
    assert ledger.ids_with_document_id("x y") == ["doc-1"]
    assert ledger.sources() == ["B", "a", "a_%", "src/1.md", "東京"]  # by code point
    assert ledger.sources_under("a_") == ["a_%"] and ledger.sources_under("a%") == []
    assert ledger.ids_with_document_id("\ud800") == []


def test_metadata_with_lone_surrogates_round_trips_in_postgres(pg_ledger: PostgresLedger) -> None:
    """A surrogate-escaped file name in metadata (an undecodable name, as Python reads it): PostgreSQL text
    cannot hold the lone surrogate, so the row's JSON escapes it, and the dict read back is the one written."""
    md = {"path": "/data/caf\udce9.md", "ja": "東京", "nested": {"k": ["\ud800", 1.5]}}
    pg_ledger.commit_write([_doc(1, md=md)])
    doc = pg_ledger.get_document("doc-1")
    assert doc is not None and all(doc.metadata[k] == v for k, v in md.items())


def test_info_and_embedding_cache(make_ledger: Any) -> None:
    ledger = make_ledger()
    ledger.set_info("k", "v1")
    ledger.set_info("k", "v2")
    assert ledger.get_info("k") == "v2"
    ledger.set_info("k", None)
    assert ledger.get_info("k") is None
    vec = np.arange(5, dtype=np.float32) / 3
    ledger.cache_embeddings("m", [("h1", vec), ("h2", vec * 2)])
    ledger.cache_embeddings("m", [("h1", vec * 9)])  # the first vector stays
    got = ledger.cached_embeddings("m", ["h1", "h2", "h3"])
    assert set(got) == {"h1", "h2"} and np.array_equal(got["h1"], vec) and got["h2"].dtype == np.dtype("<f4")
    assert ledger.cached_embeddings("other", ["h1"]) == {}


def test_a_write_lets_go_of_the_recorded_models_cache_entries_only(make_ledger: Any) -> None:
    """Each vector is kept once: a write drops the cache entries of the texts its chunks now hold, for the model
    those vectors are of (the recorded ``embedding_model_id``), by the cache's primary key; another model's
    vector of the same text stays (before, every model's went, and each batch scanned the whole cache)."""
    ledger = make_ledger()
    ledger.set_info("embedding_model_id", "m")
    doc = _doc(1)
    hashes = [content_id(embedded_text(c.content, c.metadata)) for c in doc[1]]
    vec = np.ones(DIM, dtype=np.float32)
    ledger.cache_embeddings("m", [(h, vec) for h in hashes])
    ledger.cache_embeddings("other", [(h, vec * 2) for h in hashes])
    ledger.cache_embeddings("m", [("unrelated", vec)])
    ledger.commit_write([doc])
    assert ledger.embedding_cache_size()["entries"] == 3  # other's two and m's unrelated one
    assert set(ledger.cached_embeddings("other", hashes)) == set(hashes)
    assert set(ledger.cached_embeddings("m", ["unrelated"])) == {"unrelated"}


def test_reopen_keeps_everything(make_ledger: Any) -> None:
    ledger = make_ledger()
    ledger.commit_write([_doc(1), _doc(2)])
    ledger.commit_write(remove=["doc-1"])
    ledger.close()
    again = make_ledger()
    assert again.last_seq() == 3 and again.document_ids() == ["doc-2"]
    assert again.document_state("doc-1") == REMOVED


def test_one_write_of_many_documents_numbers_each_change(make_ledger: Any) -> None:
    """``commit_write`` writes a change set with a few ``executemany`` statements: every document still gets
    its own change, its rows stamped with it, and the numbering continues across writes."""
    ledger = make_ledger()
    ledger.commit_write([_doc(i, chunks=i % 3) for i in range(50)])
    assert ledger.commit_write([_doc(50), _doc(7, chunks=1), _doc(51)], remove=["doc-3", "doc-4"]) == 55
    changes = ledger.changes_since(50)
    assert [(c.seq, c.op, c.doc_id, c.chunk_count) for c in changes] == [
        (51, "remove", "doc-3", 0),
        (52, "remove", "doc-4", 1),
        (53, "add", "doc-50", 2),
        (54, "add", "doc-7", 1),
        (55, "add", "doc-51", 2),
    ]
    # 49 chunks, less doc-4's one, doc-7's one replaced by one, plus 2 + 2
    assert sum(i % 3 for i in range(50)) == 49 and ledger.counts() == {"documents": 50, "chunks": 52}
    # each document's rows carry its own change: visible from that seq on, not before
    assert ledger.get_chunks(["doc-7-0000"], visible_at=53) == []
    assert [c.id for c in ledger.get_chunks(["doc-7-0000", "doc-50-0001"], visible_at=54)] == [
        "doc-7-0000",
        "doc-50-0001",
    ]
    assert [c.id for c in ledger.get_chunks(["doc-49-0000"], visible_at=50)] == ["doc-49-0000"]
    assert ledger.get_chunks(["doc-49-0000"], visible_at=49) == []
    assert ledger.document_state("doc-4") == REMOVED and ledger.last_seq() == 55


def test_a_document_added_twice_in_one_write_keeps_the_later_copy(make_ledger: Any) -> None:
    ledger = make_ledger()
    later = _doc(1, chunks=3, content="later")
    assert ledger.commit_write([_doc(1), _doc(2), later]) == 3
    assert [(c.op, c.doc_id, c.chunk_count) for c in ledger.changes_since(0)] == [
        ("add", "doc-1", 2),
        ("add", "doc-2", 2),
        ("add", "doc-1", 3),
    ]
    doc = ledger.get_document("doc-1")
    assert doc is not None and doc.content == "later" and ledger.chunk_count(["doc-1"]) == 3
    assert ledger.document_ids() == ["doc-2", "doc-1"] and ledger.counts() == {"documents": 2, "chunks": 5}


@pytest.mark.parametrize("recorded", ["8", "99"])  # newer than both: SQLite 5, Postgres 7
def test_a_ledger_of_a_newer_schema_is_refused(make_ledger: Any, recorded: str) -> None:
    ledger = make_ledger()
    ledger.commit_write([_doc(1)])
    ledger.set_info("schema_version", recorded)
    ledger.close()
    with pytest.raises(IncompatibleIndexError, match=f"schema version {recorded} was written by a newer"):
        make_ledger()


@pytest.mark.parametrize("recorded", ["1", "2", "3", "x"])
def test_a_ledger_of_a_development_build_is_refused(make_ledger: Any, recorded: str) -> None:
    """No release wrote schemas 1-3 (their migrations were deleted before the first release)."""
    ledger = make_ledger()
    ledger.commit_write([_doc(1)])
    ledger.set_info("schema_version", recorded)
    ledger.close()
    with pytest.raises(IncompatibleIndexError, match="development build before the first release"):
        make_ledger()


def test_a_snapshot_sees_one_state(make_ledger: Any) -> None:
    ledger = make_ledger()
    other = make_ledger()  # another connection/process-like writer
    ledger.commit_write([_doc(1)])
    with ledger.snapshot():
        assert ledger.last_seq() == 1
        writer = threading.Thread(target=lambda: other.commit_write([_doc(2)]))
        writer.start()
        writer.join()
        with ledger.snapshot():  # nested: the outer one holds
            assert ledger.last_seq() == 1 and ledger.get_document("doc-2") is None
    assert ledger.last_seq() == 2 and ledger.get_document("doc-2") is not None


def test_many_threads_read_at_once(make_ledger: Any) -> None:
    ledger = make_ledger()
    ledger.commit_write([_doc(i, chunks=1) for i in range(20)])
    errors: list[BaseException] = []

    def read(i: int) -> None:
        try:
            for _ in range(20):
                assert ledger.get_document(f"doc-{i}").content == f"document {i}"  # type: ignore[union-attr]
                with ledger.snapshot():
                    assert ledger.counts()["documents"] == 20
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_sample_is_drawn_by_seeks_the_same_every_time_never_of_removed_documents(make_ledger: Any) -> None:
    """Both ledgers run :class:`~finderledge.ledgers.sql.SQLLedger`'s seek (issue 43: PostgreSQL too): spread
    over the whole corpus, the same in every process for one ledger state; a small corpus is read whole."""
    ledger = make_ledger()
    ledger.commit_write([_doc(i, chunks=3, embed=False) for i in range(400)])
    ledger.commit_write(remove=[f"doc-{i}" for i in range(0, 400, 2)])
    complete = ledger.complete_chunk_ids()
    ids = ledger.sample_chunk_ids(32)
    assert len(ids) == 32 and set(ids) <= complete
    assert ids == ledger.sample_chunk_ids(32) == make_ledger().sample_chunk_ids(32)  # another "process"
    numbers = sorted(int(i.split("-")[1]) for i in ids)
    assert numbers[0] < 40 and numbers[-1] > 360 and all(n % 2 == 1 for n in numbers)
    assert sorted(ledger.sample_chunk_ids(1000)) == sorted(complete)  # fewer rows than the seek wants


# -- what only the PostgreSQL ledger promises -----------------------------------------------------------
@pytest.fixture
def pg_ledger(pg_url: str) -> Iterator[PostgresLedger]:
    ledger = PostgresLedger(pg_url, schema=fresh_schema())
    yield ledger
    ledger.close()


def test_vectors_are_written_and_removed_in_the_ledger_transaction(pg_ledger: PostgresLedger) -> None:
    assert pg_ledger.path is None and pg_ledger.dimension is None
    pg_ledger.commit_write([_doc(1), _doc(2, embed=False)])
    assert pg_ledger.dimension == DIM  # recorded by the first vectors
    store = pg_ledger.vector_store(DIM)
    assert store.location == LEDGER and store.ids() == {"doc-1-0000", "doc-1-0001"}
    hits = store.search(_vectors(2, seed=1)[0], 1, {"j": 0})
    assert hits[0][0] == "doc-1-0000" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    pg_ledger.commit_write(remove=["doc-1"])
    assert store.ids() == set()  # gone at once; the chunk rows stay for the grace period
    assert [c.embedding for c in pg_ledger.get_chunks(["doc-1-0000"], with_embedding=True, visible_at=2)] == [
        None
    ]
    # a failing write leaves nothing behind: no document, no change, no vector
    bad = _doc(3)
    with pytest.raises(psycopg.errors.UniqueViolation):
        pg_ledger.commit_write([bad, (DocumentRecord("doc-4", None, "h", COMPLETE, "x", {}), bad[1])])
    assert pg_ledger.last_seq() == 3 and pg_ledger.get_document("doc-3") is None and store.ids() == set()


def test_the_dimension_is_recorded_once(pg_url: str, pg_ledger: PostgresLedger) -> None:
    pg_ledger.vector_store(DIM)
    with pytest.raises(IncompatibleIndexError, match="dimension 16"):
        pg_ledger.vector_store(32)
    with pytest.raises(IncompatibleIndexError, match="dimension 16"):
        pg_ledger.commit_write([_doc(1, dim=8)])
    assert pg_ledger.last_seq() == 0
    with pytest.raises(IncompatibleIndexError, match="dimension 16"):
        PostgresLedger(pg_url, schema=pg_ledger.schema, dimension_hint=32)
    schema = fresh_schema()
    with pytest.raises(IncompatibleIndexError):
        PgVectorStoreFactory(pg_url, schema, DIM).close()
        PgVectorStoreFactory(pg_url, schema, DIM + 1)


def PgVectorStoreFactory(url: str, schema: str, dimension: int) -> VectorStore:
    return create_vector_store("pgvector", None, dimension, url=url, schema=schema)


def test_identity_index_uuid_and_a_foreign_schema(pg_url: str, pg_ledger: PostgresLedger) -> None:
    assert pg_ledger.name.startswith("postgresql://") and pg_ledger.name.endswith(f"#{pg_ledger.schema}")
    assert len(pg_ledger.index_uuid) == 32
    again = PostgresLedger(pg_url, schema=pg_ledger.schema)
    other = PostgresLedger(pg_url, schema=fresh_schema())
    try:
        assert again.index_uuid == pg_ledger.index_uuid != other.index_uuid
    finally:
        again.close()
        other.close()
    foreign = fresh_schema()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{foreign}"; CREATE TABLE "{foreign}".documents (x int)')
    with pytest.raises(IncompatibleIndexError, match="not a FinderLedge ledger"):
        PostgresLedger(pg_url, schema=foreign)


def test_sequence_numbers_commit_in_order_under_concurrent_writers(pg_url: str) -> None:
    """A reader that sees ``last_seq() == s`` sees every change up to ``s`` (what replicas rely on)."""
    schema = fresh_schema()
    writers = [PostgresLedger(pg_url, schema=schema) for _ in range(3)]
    reader = PostgresLedger(pg_url, schema=schema)
    done = threading.Event()
    gaps: list[tuple[int, list[int]]] = []

    def write(w: int) -> None:
        for i in range(25):
            writers[w].commit_write([_doc(1000 * w + i, chunks=1)])

    def read() -> None:
        while not done.is_set():
            with reader.snapshot():
                last = reader.last_seq()
                seen = [c.seq for c in reader.changes_since(0)]
            if seen != list(range(1, last + 1)):
                gaps.append((last, seen))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    watcher = threading.Thread(target=read)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    try:
        assert gaps == [] and reader.last_seq() == 75 and reader.counts()["documents"] == 75
    finally:
        for ledger in [*writers, reader]:
            ledger.close()


# -- the write lock -------------------------------------------------------------------------------------
_HOLDER = """
import sys, time
from finderledge.ledgers.postgres import PostgresLedger
ledger = PostgresLedger(sys.argv[1], schema=sys.argv[2])
with ledger.write_lock(5).hold("indexing in the child"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_write_lock_times_out_naming_the_holder_and_is_reentrant(
    pg_url: str, pg_ledger: PostgresLedger
) -> None:
    mine, theirs = pg_ledger.write_lock(5), pg_ledger.write_lock(5)
    with mine.hold("adding documents"):
        with mine.hold("nested"):
            assert mine.held
        assert mine.held and not theirs.held
        started = time.monotonic()
        with pytest.raises(LockTimeoutError) as caught, theirs.hold("another writer", timeout=0.3):
            pass
        assert 0.25 < time.monotonic() - started < 5
        message = str(caught.value)
        assert f"pid {os.getpid()}" in message and "adding documents" in message and pg_ledger.name in message
        assert "postgres:@" not in message and "host=" not in message
        pg_ledger.commit_write([_doc(1)])  # the commit key is another key: a holder can commit
    assert not mine.held
    with theirs.hold("now free", timeout=1):
        assert theirs.held
    assert advisory_key("write", "s") != advisory_key("commit", "s") != advisory_key("write", "t")


def test_write_lock_is_released_when_its_process_dies(pg_url: str, pg_ledger: PostgresLedger) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, pg_url, pg_ledger.schema], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        lock = pg_ledger.write_lock(5)
        with (
            pytest.raises(LockTimeoutError, match=f"pid {child.pid} .*indexing in the child"),
            lock.hold("waiting", timeout=0.3),
        ):
            pass
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        started = time.monotonic()
        with lock.hold("after the crash", timeout=20):
            assert lock.held
        assert time.monotonic() - started < 20
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


# -- no secrets in errors or logs -----------------------------------------------------------------------
SECRET = "Sup3r-Secr3t-pw"


@pytest.fixture(scope="module")
def password_user(pg_url: str) -> str:
    """A role that must log in with a password (the test server trusts everyone else on its socket)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS fl_pw_user; CREATE ROLE fl_pw_user LOGIN PASSWORD '{SECRET}'")
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])  # type: ignore[index]
        text = hba.read_text()
        if "fl_pw_user" not in text:
            hba.write_text("local all fl_pw_user scram-sha-256\n" + text)
        conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.3)
    return "fl_pw_user"


def test_connection_errors_never_show_the_password(
    pg_url: str, password_user: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    socket_dir = psycopg.conninfo.conninfo_to_dict(pg_url)["host"]
    good = f"postgresql://{password_user}:{SECRET}@/postgres?host={socket_dir}"
    wrong = f"postgresql://{password_user}:{SECRET}-wrong@/postgres?host={socket_dir}"
    refused = f"postgresql://{password_user}:{SECRET}@127.0.0.1:1/postgres"
    messages = []
    for url in (wrong, refused):
        for opener in (lambda u: PostgresLedger(u, schema="x"), lambda u: PgVectorStoreFactory(u, "x", DIM)):
            with pytest.raises(PostgresConnectionError) as caught:
                opener(url)
            messages.append(str(caught.value))
            assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(ConfigurationError) as caught:
        PostgresLedger(f"postgresql://u:{SECRET}@host:notaport/db")
    messages.append(str(caught.value))
    assert all(SECRET not in m for m in messages) and SECRET not in caplog.text, messages
    assert "password authentication failed" in messages[0] and "postgresql://" in messages[0]
    assert "127.0.0.1:1/postgres#x" in messages[2]
    # the right password works, and the name never carries it
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"GRANT CREATE ON DATABASE postgres TO {password_user}")
    ledger = PostgresLedger(good, schema=fresh_schema())
    try:
        lock = ledger.write_lock(1)
        with (
            lock.hold("x"),
            pytest.raises(LockTimeoutError) as timeout,
            ledger.write_lock(1).hold("y", timeout=0.1),
        ):
            pass
        assert (
            SECRET not in ledger.name
            and password_user not in ledger.name
            and SECRET not in str(timeout.value)
        )
    finally:
        ledger.close()


# -- the vector store -----------------------------------------------------------------------------------
class TestPgVector(VectorStoreContract):
    """The standalone store (``vector_store="pgvector"``): one table per test in a shared schema."""

    @pytest.fixture(autouse=True)
    def _server(self, pg_url: str) -> None:
        self.url = pg_url

    @pytest.fixture
    def place(self, tmp_path: Path) -> Path:
        return tmp_path / f"v{uuid.uuid4().hex[:12]}"

    def open_store(self, place: Path) -> VectorStore:
        store = create_vector_store("pgvector", place, DIM, url=self.url, schema="contract", table=place.name)
        assert store.location == SHARED
        return store


def test_metadata_jsonb_cannot_hold_is_decided_on_its_exact_json(pg_url: str) -> None:
    """NUL characters become U+FFFD in ``jsonb``; such rows pass the SQL and compile_filter decides on the exact JSON."""
    store = PgVectorStoreFactory(pg_url, fresh_schema(), DIM)
    try:
        metas = [{"s": "a\x00"}, {"s": "a\ufffd"}, {"s": "a"}, {"s": "a\x00b", "t": ["x\x00"]}, {"s": "b"}]
        store.add([f"r{i}" for i in range(5)], _vectors(5), metas, ["text\x00"] * 5)
        for flt, expected in [
            ({"s": "a\x00"}, {"r0"}),
            ({"s": "a\ufffd"}, {"r1"}),
            ({"s": {"$lt": "a\x01"}}, {"r0", "r2", "r3"}),
            ({"s": {"$gt": "a\x00"}}, {"r1", "r3", "r4"}),
            ({"t": {"$contains": "x\x00"}}, {"r3"}),
            ({"s": {"$ne": "a\x00"}}, {"r1", "r2", "r3", "r4"}),
            ({"s": {"$nin": ["a\ufffd", "b"]}}, {"r0", "r2", "r3"}),
        ]:
            assert {i for i, _ in store.search(_vectors(1, seed=3)[0], 5, flt)} == expected, flt
            assert {i for i, _ in store.search(_vectors(1, seed=3)[0], 1, flt)} <= expected, flt
    finally:
        store.close()


class TestPgVectorInLedger(VectorStoreContract):
    """The ledger's own ``vectors`` table through :meth:`PostgresLedger.vector_store`."""

    @pytest.fixture(autouse=True)
    def _server(self, pg_url: str) -> Iterator[None]:
        self.url = pg_url
        self.ledgers: list[PostgresLedger] = []
        yield
        for ledger in self.ledgers:
            ledger.close()

    @pytest.fixture
    def place(self, tmp_path: Path) -> Path:
        return tmp_path / fresh_schema()

    def open_store(self, place: Path) -> VectorStore:
        ledger = PostgresLedger(self.url, schema=place.name)
        self.ledgers.append(ledger)
        return ledger.vector_store(DIM)


class TestPgVectorThroughHnsw(TestPgVector):
    """The same contract with the table counted as large: the HNSW pass (and its exact fallback) answers."""

    @pytest.fixture(autouse=True)
    def _small_threshold(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(pgv, "EXACT_THRESHOLD", 10)

    def test_the_hnsw_index_is_used(self, filled: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        store, ids, vectors, _ = filled
        efs: list[int | None] = []
        query = pgv.PgVectorStore._query

        def spy(
            self: Any,
            conn: Any,
            literal: str,
            n: int,
            where: str,
            params: list[Any],
            pred: Any,
            ef: int | None,
        ) -> Any:
            efs.append(ef)
            return query(self, conn, literal, n, where, params, pred, ef)

        monkeypatch.setattr(pgv.PgVectorStore, "_query", spy)
        assert store.search(vectors[3], 5)[0][0] == ids[3]
        assert efs == [pgv.MIN_EF_SEARCH]  # one HNSW pass, enough rows
        efs.clear()
        assert len(store.search(vectors[3], 5, {"user": "bob"})) == 5
        assert efs[0] == 200
        # and the plan of that query is an HNSW index scan
        with store._conn() as conn, conn.transaction():
            conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    sql_explain(store._statement("TRUE", False, False)), (pgv.vector_literal(vectors[3]), 5)
                )
            )
        assert f"Index Scan using {store.table}_embedding_hnsw" in plan, plan
        with store._conn() as conn:  # built with it: the GIN index over the metadata
            assert pgv.has_index(conn, "contract", store.table, "gin")

    def test_an_exact_search_is_one_statement_no_hnsw_scan_serves(
        self, filled: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The exact plan needs no transaction switching index scans off (one round trip, not four): its order
        sits outside an ``OFFSET 0`` subquery, which the planner cannot hand to the HNSW index even when
        sequential scans are discouraged, and it finds the exact nearest rows."""
        store, ids, vectors, _ = filled
        literal = pgv.vector_literal(vectors[3])
        with store._conn() as conn, conn.transaction():
            conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
            plan = "\n".join(
                r[0] for r in conn.execute(sql_explain(store._statement("TRUE", False, True)), (literal, 5))
            )
        assert "hnsw" not in plan, plan
        sent: list[str] = []
        real = psycopg.Cursor.execute

        def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(query if isinstance(query, str) else query.as_string(cursor))
            return real(cursor, query, *args, **kwargs)

        monkeypatch.setattr(pgv, "EXACT_THRESHOLD", 10**9)  # counted small: the exact plan answers
        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
        hits = store.search(vectors[3], 5)
        monkeypatch.undo()
        assert hits[0][0] == ids[3]
        searches = [q for q in sent if "<=>" in q]
        assert len(searches) == 1 and not [q for q in sent if "set_config" in q], sent
        order = psycopg.sql.SQL("SELECT id FROM {} ORDER BY embedding <=> %s::vector LIMIT 5").format(
            store._t
        )
        with store._conn() as conn, conn.transaction():  # the same rows as the order computed in SQL, exactly
            conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
            exact = [r[0] for r in conn.execute(order, (literal,))]
        assert [i for i, _ in hits] == exact


def test_a_kept_small_answer_scans_exactly_until_it_expires_then_counts_again(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search that found the table small scans exactly, without counting, for ``SMALL_CACHE_SECONDS``: a
    table another writer grew past the threshold meanwhile is still searched right (exactly, the true nearest
    rows), and once the answer expires the table is counted again and the HNSW index answers."""
    monkeypatch.setattr(pgv, "EXACT_THRESHOLD", 10)
    monkeypatch.setattr(pgv, "SMALL_CACHE_SECONDS", 600.0)
    schema, table = "contract", f"v{uuid.uuid4().hex[:12]}"
    reader = create_vector_store("pgvector", None, DIM, url=pg_url, schema=schema, table=table)
    writer = create_vector_store("pgvector", None, DIM, url=pg_url, schema=schema, table=table)
    efs: list[int | None] = []
    sized: list[int] = []
    query, sized_exact = pgv.PgVectorStore._query, pgv.PgVectorStore._sized_exact

    def spy_query(self: Any, conn: Any, literal: str, n: int, *rest: Any) -> Any:
        efs.append(rest[-1])
        return query(self, conn, literal, n, *rest)

    def spy_sized(self: Any, *args: Any) -> Any:
        sized.append(1)
        return sized_exact(self, *args)

    monkeypatch.setattr(pgv.PgVectorStore, "_query", spy_query)
    monkeypatch.setattr(pgv.PgVectorStore, "_sized_exact", spy_sized)
    try:
        vectors = _vectors(40, seed=5)
        ids = [f"r{i}" for i in range(40)]
        writer.add(ids[:5], vectors[:5], [{} for _ in range(5)])
        assert reader.search(vectors[2], 3)[0][0] == ids[2]
        assert sized == [1] and efs == []  # counted (5 rows): small, scanned in the same statement
        writer.add(ids[5:], vectors[5:], [{} for _ in range(35)])  # another writer: now large, indexed
        hits = reader.search(vectors[30], 5)
        assert sized == [1] and efs == [None]  # the kept answer: an exact scan alone, not counted
        truth = sorted(range(40), key=lambda i: -float(vectors[i] @ vectors[30]) / np.linalg.norm(vectors[i]))
        assert [h for h, _ in hits] == [ids[i] for i in truth[:5]]  # still the true nearest rows
        monkeypatch.setattr(pgv, "SMALL_CACHE_SECONDS", 0.0)
        reader._small_until = 0.0  # the answer expired
        efs.clear()
        assert reader.search(vectors[30], 5)[0][0] == ids[30]
        assert sized == [1, 1] and efs == [pgv.MIN_EF_SEARCH]  # counted again: large, the HNSW index answers
    finally:
        reader.close()
        writer.close()


def sql_explain(statement: Any) -> Any:
    from psycopg import sql

    return sql.SQL("EXPLAIN ") + statement


# -- the filter translation: never narrower than compile_filter ----------------------------------------------
EXTRA: list[Any] = [
    "a\x00",
    "a\x00b",
    "\x00",
    "a\ud800",
    "東京\x00",
    0.1,
    1e300,
    5e-324,
    -0.0,
    2.0**63,
    9007199254740993,
    2**64,
    -(2**63) - 1,
    "",
    "B",
    "a",
]
ROW_VALUES: list[Any] = [*VALUES, *EXTRA, [0.1, "a\x00"], [2**63], {"a": "\x00"}, ["b", ["a"]], [[1]]]
_value = st.one_of(_scalar, st.sampled_from(EXTRA))
_order_value = st.one_of(_ordered, st.sampled_from([e for e in EXTRA if not isinstance(e, bool)]))


def _pg_condition() -> st.SearchStrategy[Any]:
    single = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne", "$contains", "$not_contains"]), _value),
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), _order_value),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(_value, min_size=1, max_size=4)),
    )
    return st.one_of(_value, st.lists(single, min_size=1, max_size=2).map(dict))


pg_filters = st.recursive(
    st.dictionaries(st.sampled_from([*FIELDS, "x\x00"]), _pg_condition(), min_size=1, max_size=2),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda fs: {"$and": fs}),
        st.lists(inner, min_size=1, max_size=3).map(lambda fs: {"$or": fs}),
    ),
    max_leaves=4,
)
N_ROWS = 300
_STATS = {"filters": 0, "exact": 0}


@pytest.fixture(scope="module")
def filter_table(pg_url: str) -> Iterator[tuple[psycopg.Connection[Any], list[dict[str, Any]], set[int]]]:
    import random

    rng = random.Random(11)
    rows = [{f: rng.choice(ROW_VALUES) for f in FIELDS if rng.random() < 0.8} for _ in range(N_ROWS)]
    conn = psycopg.connect(pg_url, autocommit=True)
    conn.execute(
        "CREATE SCHEMA IF NOT EXISTS filters; DROP TABLE IF EXISTS filters.rows;"
        " CREATE TABLE filters.rows (id int PRIMARY KEY, metadata jsonb NOT NULL, lossy boolean NOT NULL)"
    )
    lossy = set()
    with conn.cursor() as cur:
        params = []
        for i, md in enumerate(rows):
            text, is_lossy = jsonb_text(md)
            params.append((i, text, is_lossy))
            if is_lossy:
                lossy.add(i)
        cur.executemany("INSERT INTO filters.rows VALUES (%s, %s::jsonb, %s)", params)
    assert 0 < len(lossy) < N_ROWS // 2
    yield conn, rows, lossy
    conn.close()


@settings(
    max_examples=int(os.environ.get("FINDERLEDGE_FILTER_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@given(flt=pg_filters)
def test_sql_filters_never_narrow_and_are_exact_on_rows_jsonb_holds(
    filter_table: Any, flt: dict[str, Any]
) -> None:
    conn, rows, lossy = filter_table
    pred = compile_filter(flt)
    assert pred is not None
    sql, params = to_sql(flt)
    found = {r[0] for r in conn.execute(f"SELECT id FROM filters.rows WHERE lossy OR ({sql})", params)}  # type: ignore[call-overload]
    expected = {i for i, md in enumerate(rows) if pred(md)}
    assert expected <= found, f"narrowed: {sorted(expected - found)} for {flt!r}"
    assert found - expected <= lossy, f"wrong on exact rows {sorted(found - expected - lossy)} for {flt!r}"
    strict = {r[0] for r in conn.execute(f"SELECT id FROM filters.rows WHERE {sql}", params)}  # type: ignore[call-overload]
    _STATS["filters"] += 1
    _STATS["exact"] += strict == expected
    event("SQL alone exact (lossy rows included)" if strict == expected else "lossy rows decided in Python")


def test_how_often_sql_alone_is_exact() -> None:
    """Reported (run with -s): filters whose SQL alone, lossy rows included, returns exactly the right rows."""
    if _STATS["filters"]:
        share = _STATS["exact"] / _STATS["filters"]
        print(
            f"\npg_filter: SQL alone exact for {_STATS['exact']}/{_STATS['filters']} random filters ({share:.1%});"
            " on rows jsonb holds exactly: all of them"
        )
        assert share > 0.5


@pytest.mark.parametrize(
    ("flt", "matches"),
    [
        ({"v": 2}, [2, 2.0]),
        ({"v": 9.223372036854776e18}, [2**63]),
        ({"v": {"$gt": 2**63}}, [2**63 + 1]),
        ({"v": 0.1}, [0.1]),
        ({"v": {"$lt": 0.1}}, [0.09999999999999999]),
        ({"v": True}, [True]),
        ({"v": {"$gte": "a"}}, ["a", "b", "東京"]),
        ({"v": {"$lt": "a"}}, ["B", ""]),
        ({"v": {"$contains": 2}}, [[2.0]]),
        (
            {"v": {"$ne": 1}},
            [2, 2.0, 2**63, 2**63 + 1, 0.1, 0.09999999999999999, True, "a", "b", "東京", "B", "", [2.0]],
        ),
    ],
)
def test_reported_edge_cases_translate_exactly(pg_url: str, flt: dict[str, Any], matches: list[Any]) -> None:
    values = [
        1,
        2,
        2.0,
        2**63,
        2**63 + 1,
        0.1,
        0.09999999999999999,
        True,
        "a",
        "b",
        "東京",
        "B",
        "",
        [2.0],
        None,
    ]
    sql, params = to_sql(flt)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        got = []
        for value in values:
            text, _ = jsonb_text({"v": value} if value is not None else {})
            row = conn.execute(
                f"WITH t AS (SELECT %s::jsonb AS metadata) SELECT {sql} FROM t",  # type: ignore[call-overload]
                [text, *params],
            ).fetchone()
            if row[0]:
                got.append(value)
    assert got == matches


# -- issue 43: a fresh process's first search reads no more of PostgreSQL as the corpus grows --------------
class _Keyword:
    """What LedgerBackground reads from the keyword store: its size, tokenizer and k1."""

    def __init__(self, size: int) -> None:
        self.size, self.k1 = size, 0.9

    def __len__(self) -> int:
        return self.size

    @staticmethod
    def tokenizer(text: str) -> list[str]:
        return text.split()


class _CountedLedger(PostgresLedger):
    """A probe: every read of all chunk ids is counted."""

    full_reads = 0

    def complete_chunk_ids(self) -> set[str]:
        type(self).full_reads += 1
        return super().complete_chunk_ids()


def _fill_pg(ledger: Ledger, documents: int, per_doc: int = 4) -> None:
    add = [_doc(i, chunks=per_doc, embed=False) for i in range(documents)]
    for start in range(0, len(add), 1000):
        ledger.commit_write(add[start : start + 1000])


def test_postgres_draws_the_background_sample_without_reading_every_id(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, PostgresLedger drew ``sample_chunk_ids`` by fetching every chunk id and sorting them (6.1 s at
    1M chunks on every process's first search).  Counted as rows PostgreSQL returns to the ledger and
    statements: one row per sampled chunk (and two bounds) in three statements, the same at 2,400 and at
    12,000 chunks, while reading every id grows."""
    from finderledge.ranking.relevance import SAMPLE_SIZE, LedgerBackground

    small = _CountedLedger(pg_url, schema=fresh_schema())
    large = _CountedLedger(pg_url, schema=fresh_schema())
    try:
        _fill_pg(small, 600)
        _fill_pg(large, 3000)
        _CountedLedger.full_reads = 0
        background = LedgerBackground(large, _Keyword(12_000)).sample(
            SAMPLE_SIZE
        )  # what a first search draws
        assert _CountedLedger.full_reads == 0 and background.sample_size == SAMPLE_SIZE

        counted = StatementCounter()
        counted.install(monkeypatch)

        def work(call: Any) -> tuple[int, int]:
            counted.rows = counted.statements = 0
            call()
            return counted.rows, counted.statements

        full_small, full_large = work(small.complete_chunk_ids), work(large.complete_chunk_ids)
        sample_small, sample_large = (
            work(lambda: small.sample_chunk_ids(128)),
            work(lambda: large.sample_chunk_ids(128)),
        )
        assert full_small[0] == 2400 and full_large[0] == 12_000  # the probe sees a full read
        assert sample_small[0] <= 130 and sample_large[0] <= 130, (sample_small, sample_large)
        assert sample_small[1] == sample_large[1] == 3  # two bounds, then every seek in one statement
    finally:
        small.close()
        large.close()


def test_the_postgres_seek_is_an_index_scan(pg_ledger: PostgresLedger, pg_url: str) -> None:
    """Every seek reads from the documents' (state, seq) index and the chunks' parent index, in one statement:
    no table scan."""
    _fill_pg(pg_ledger, 2000)
    dialect = pg_ledger.dialect
    assert isinstance(dialect, PostgresDialect)
    with psycopg.connect(pg_url) as conn:
        conn.execute(dialect.sql("ANALYZE {s}documents"))
        conn.execute(dialect.sql("ANALYZE {s}chunks"))
        points = list(range(1, 2000, 100))
        plan = "\n".join(
            r[0] for r in conn.execute("EXPLAIN " + dialect.sql(dialect.seek_sql), (points, COMPLETE))
        )
    assert "Seq Scan" not in plan and "Index" in plan, plan
    # seq 1 + 50, 150, ...: evenly over the documents, the first chunk of each
    assert pg_ledger.sample_chunk_ids(20) == [f"doc-{p}-0000" for p in range(50, 2000, 100)]


def test_vectors_are_read_back_bit_exact_in_binary(pg_url: str) -> None:
    """``get_chunks(with_embedding=True)`` reads pgvector's binary form (``vector_send``): the same float32s
    as ``embedding::real[]``, edge values included, at a fraction of the cost of formatting 384 floats a row as
    text and parsing them (a fresh process reads 512 vectors for the relevance background on its first
    search: 0.1-0.2 s as text on a loaded machine)."""
    dim, n = 384, 512
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors[0, :6] = [0.1, -0.0, 1e-38, 3.4e38, -1.17549435e-38, 1 / 3]
    ledger = PostgresLedger(pg_url, schema=fresh_schema())
    try:
        add = []
        for i in range(n):
            doc_id = f"doc-{i}"
            md = {FL: {"id": doc_id, "is_parent": True}}
            chunk = ChunkRecord(
                child_id(doc_id, 0), doc_id, 0, f"text {i}", {FL: {"id": child_id(doc_id, 0)}}, vectors[i]
            )
            add.append((DocumentRecord(doc_id, None, f"h{i}", COMPLETE, f"text {i}", md), [chunk]))
        ledger.commit_write(add)
        ids = [child_id(f"doc-{i}", 0) for i in range(n)]
        got = ledger.get_chunks(ids, with_embedding=True)
        assert [c.id for c in got] == ids
        for chunk, expected in zip(got, vectors):
            assert chunk.embedding is not None and chunk.embedding.dtype == np.float32
            assert chunk.embedding.tobytes() == expected.tobytes()  # bit for bit, -0.0 and subnormals too
        dialect = ledger.dialect
        assert isinstance(dialect, PostgresDialect)
        with psycopg.connect(pg_url) as conn:
            text_way = dialect.sql(
                f"SELECT c.id, v.embedding::real[] FROM {{s}}chunks c{dialect.embedding_join}"
            )
            as_text = {r[0]: np.asarray(r[1], dtype=np.float32) for r in conn.execute(text_way)}
            assert all(as_text[c.id].tobytes() == c.embedding.tobytes() for c in got)  # type: ignore[union-attr]

            def best(call: Any) -> float:
                times = []
                for _ in range(3):
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
                return min(times)

            text_s = best(
                lambda: [np.asarray(r[1], dtype=np.float32) for r in conn.execute(text_way).fetchall()]
            )
        binary_s = best(lambda: ledger.get_chunks(ids, with_embedding=True))
        assert binary_s < text_s / 2, (binary_s, text_s)  # ~10x apart; the text way read no chunk text
    finally:
        ledger.close()
