"""Id lists of a Postgres-mode write (issue 43, bulk50): a write's ``= ANY`` look-ups and deletes (earlier copies
of the documents it adds, their chunks, vectors and postings) take many ids as one text the server splits
(``string_to_array``), not as a list psycopg dumps item by item; replacing and removing documents that way
leaves the same rows as before, an id holding the separator falls back to a list, and ``check()`` is clean.
A real PostgreSQL 16 + pgvector (``pgserver``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.ledgers import bulk


@pytest.fixture(autouse=True)
def _needs_pgserver() -> None:
    pytest.importorskip("pgserver")


def _open(directory: Path, url: str, schema: str) -> FinderLedge:
    return FinderLedge(
        directory,
        database_url=url,
        database_schema=schema,
        embedding=DeterministicFakeEmbedding(size=16),
        keyword_index="engine",
        show_progress=False,
        fusion="rrf",
    )


def _texts(count: int, tag: str = "") -> list[str]:
    words = ["refund", "invoice", "ledger", "shelf", "backup", "latency", "café", "東京の桜"]
    return [
        " ".join(words[(i * k) % len(words)] for k in range(1, 3 + i % 5)) + f" n{i}{tag}"
        for i in range(count)
    ]


def _same_as_local(fl: FinderLedge, folder: Path, url: str, schema: str) -> None:
    """``fl``'s engine-side keyword results are a local replica's (BM25 over the same committed chunks)."""
    local = FinderLedge(
        folder,
        database_url=url,
        database_schema=schema,
        embedding=DeterministicFakeEmbedding(size=16),
        keyword_index="local",
        show_progress=False,
        fusion="rrf",
    )
    with local:
        for q in (
            "refund n7 again",
            "café ledger",
            "n70",
            "東京の桜 backup",
        ):  # every match (ties: in either order)
            want = [(i, round(s, 9)) for i, s in local.engine.replica.keyword.handle.search(q, 200)]
            got = [(i, round(s, 9)) for i, s in fl.engine.replica.keyword.handle.search(q, 200)]
            assert sorted(got, key=lambda h: (-h[1], h[0])) == sorted(want, key=lambda h: (-h[1], h[0])), q
            assert got, q


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every statement with ``ANY(`` a cursor executes, with its parameters."""
    seen: list[tuple[str, Any]] = []
    real = psycopg.Cursor.execute

    def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else repr(query)
        if "ANY(" in text:
            seen.append((text, params))
        return real(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    return seen


def _long_lists(seen: list[tuple[str, Any]]) -> list[str]:
    return [
        q
        for q, params in seen
        for p in (params or ())
        if isinstance(p, list) and len(p) >= bulk.COPY_MIN_ROWS
    ]


def _rows(url: str, schema: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            t: int(conn.execute(f'SELECT count(*) FROM "{schema}".{t}').fetchone()[0])  # type: ignore[index]
            for t in ("documents", "chunks", "vectors", "kw_docs")
        }


def test_a_load_of_new_documents_sends_no_id_list(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = fresh_schema()
    with _open(tmp_path / "a", pg_url, schema) as fl:
        fl.add_texts(["seed text"], ids=["seed"])
        seen = _spy(monkeypatch)
        fl.add_texts(_texts(120), ids=[f"d{i}" for i in range(120)])
        assert seen, "the write looks ids up with = ANY"
        assert _long_lists(seen) == []
        assert any("string_to_array" in q for q, _ in seen)
        assert fl.count()["chunks"] == 121


def test_replacing_and_removing_many_documents_by_one_text_leaves_the_same_rows(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = fresh_schema()
    ids = [f"d{i}" for i in range(100)] + [f"odd\x1fid{i}" for i in range(40)]  # the separator: a list
    with _open(tmp_path / "a", pg_url, schema) as fl:
        fl.add_texts(_texts(140), ids=ids)
        seen = _spy(monkeypatch)
        fl.add_texts(_texts(140, " again"), ids=ids)  # every document replaced
        assert any("string_to_array" in q for q, _ in seen)
        assert _long_lists(seen), "ids holding the separator go as a list"
        assert _rows(pg_url, schema) == {"documents": 140, "chunks": 140, "vectors": 140, "kw_docs": 140}
        _same_as_local(fl, tmp_path / "local", pg_url, schema)
        fl.delete(ids[:60])
        fl.delete(ids[100:])
        left = _rows(pg_url, schema)
        assert (left["vectors"], left["kw_docs"]) == (40, 40)  # removed rows' text stays a grace period
        assert fl.count() == {"documents": 40, "chunks": 40}
        assert fl.check().clean
        _same_as_local(fl, tmp_path / "local2", pg_url, schema)


def test_a_large_commit_encodes_its_postings_in_a_thread_joined_whatever_happens(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from finderledge.ledgers import postgres, postings

    monkeypatch.setattr(postings, "THREAD_MIN_CHUNKS", 50)
    started: list[postings.PendingPostings] = []
    real_init = postings.PendingPostings.__init__

    def init(self: postings.PendingPostings, work: Any) -> None:
        real_init(self, work)
        started.append(self)

    monkeypatch.setattr(postings.PendingPostings, "__init__", init)
    real_encode = postings.encode_chunks

    def slow(*args: Any) -> postings.Encoded:
        time.sleep(0.5)  # still encoding when the commit fails: joined before the call returns
        return real_encode(*args)

    monkeypatch.setattr(postings, "encode_chunks", slow)
    schema = fresh_schema()
    with _open(tmp_path / "a", pg_url, schema) as fl:
        real_store = postgres.PostgresDialect.store_vectors

        def failing(self: Any, tx: Any, chunks: Any) -> None:
            raise RuntimeError("injected: the server went away")

        monkeypatch.setattr(postgres.PostgresDialect, "store_vectors", failing)
        with pytest.raises(RuntimeError, match="injected"):
            fl.add_texts(_texts(120), ids=[f"d{i}" for i in range(120)])
        assert started, "the commit's postings were encoded in a thread"
        assert not any(t.name == "finderledge-postings-encode" for t in threading.enumerate())
        assert _rows(pg_url, schema) == {"documents": 0, "chunks": 0, "vectors": 0, "kw_docs": 0}
        monkeypatch.setattr(postgres.PostgresDialect, "store_vectors", real_store)
        count = len(started)
        fl.add_texts(_texts(120), ids=[f"d{i}" for i in range(120)])
        assert len(started) > count
        assert not any(t.name == "finderledge-postings-encode" for t in threading.enumerate())
        assert _rows(pg_url, schema) == {"documents": 120, "chunks": 120, "vectors": 120, "kw_docs": 120}
        assert fl.check().clean
        _same_as_local(fl, tmp_path / "local", pg_url, schema)


def test_a_first_load_defers_the_postings_doc_index_too_and_replaces_documents_without_it(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from finderledge.ingest import write
    from finderledge.vector_stores import pgvector as pgv

    monkeypatch.setattr(pgv, "EXACT_THRESHOLD", 50)
    monkeypatch.setattr(bulk, "BULK_INDEX_MIN_CHUNKS", 100)
    monkeypatch.setattr(write, "STREAM_DOCUMENTS", 100)  # several commits in one call
    schema = fresh_schema()
    seen: list[set[str]] = []
    real_begin = bulk.BulkLoad.begin

    def begin(self: bulk.BulkLoad, tx: Any, *args: Any) -> None:
        real_begin(self, tx, *args)
        rows = tx.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'kw_postings'", (schema,)
        ).fetchall()
        seen.append({str(r[0]) for r in rows})

    with _open(tmp_path / "a", pg_url, schema) as fl:
        fl.add_texts(_texts(30), ids=[f"d{i}" for i in range(30)])  # a small write: indexes kept
        monkeypatch.setattr(bulk.BulkLoad, "begin", begin)
        ids = [f"d{i}" for i in range(10)] + [f"n{i}" for i in range(290)]  # 10 held documents replaced
        fl.add_texts(_texts(300, " again"), ids=ids)
        assert len(seen) >= 3 and all(s == set() for s in seen), seen  # both B-trees deferred
        with psycopg.connect(pg_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'kw_postings'",
                (schema,),
            ).fetchall()
        assert {str(r[0]) for r in rows} == set(bulk.POSTINGS_INDEXES)
        assert _rows(pg_url, schema)["kw_docs"] == 320
        assert fl.check().clean
        _same_as_local(fl, tmp_path / "local", pg_url, schema)
