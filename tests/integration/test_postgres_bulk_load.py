"""Bulk loads in Postgres mode (issue 43): rows go in by COPY, the HNSW index is built once after a large load,
readers stay correct meanwhile, and a loader killed mid-load loses nothing committed and leaves the index to
be rebuilt on the next open.  A real PostgreSQL 16 + pgvector (``pgserver``), each test in its own schema;
the thresholds are lowered so that a few hundred chunks count as a large load."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.ledgers import ChunkRecord, DocumentRecord, bulk
from finderledge.ledgers.postgres import PostgresLedger
from finderledge.vector_stores import pgvector as pgv

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few hundred chunks make a large table and a large load."""
    monkeypatch.setattr(pgv, "EXACT_THRESHOLD", 50)
    monkeypatch.setattr(bulk, "BULK_INDEX_MIN_CHUNKS", 100)


def _hnsw(url: str, schema: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return pgv.has_index(conn, schema, "vectors")


def _state(url: str, schema: str) -> str | None:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT value FROM "{schema}".info WHERE key = %s', (bulk.INDEX_STATE_KEY,)
        ).fetchone()
    return None if row is None else str(row[0])


def test_many_rows_go_in_by_copy_and_read_back_exactly(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    copied: list[str] = []
    real = bulk.copy_rows

    def spy(cur: Any, schema: str, table: str, *args: Any) -> bool:
        copied.append(table)
        return real(cur, schema, table, *args)

    monkeypatch.setattr(bulk, "copy_rows", spy)
    rng = np.random.default_rng(3)
    odd = ["tab\there", "new\nline", "back\\slash", "東京の桜", "nul\x00inside", "quote\"'", "é" * 300]
    add = []
    for i in range(120):
        text = f"document {i} " + odd[i % len(odd)]
        md = {"n": i, "tag": odd[i % len(odd)].replace("\x00", ""), "nested": {"x": [i, None, True]}}
        doc = DocumentRecord(f"d{i}", f"src/{i}", f"h{i}", "complete", text, md)
        chunks = [
            ChunkRecord(
                f"d{i}-{j}", f"d{i}", j, f"{text} part {j}", md, rng.standard_normal(8).astype(np.float32)
            )
            for j in range(2)
        ]
        add.append((doc, chunks))
    ledger = PostgresLedger(pg_url, schema=fresh_schema())
    try:
        ledger.commit_write(add=add)
        assert set(copied) == {"changes", "documents", "chunks", "vectors"}
        for doc, chunks in add[::7]:
            assert ledger.get_document(doc.id).content == doc.content  # type: ignore[union-attr]
            got = ledger.chunks_of(doc.id, with_embedding=True)
            assert [c.content for c in got] == [c.content for c in chunks]
            assert [c.metadata for c in got] == [c.metadata for c in chunks]
            for a, b in zip(got, chunks):
                assert np.array_equal(a.embedding, b.embedding)  # float32 exact
        assert [c.op for c in ledger.changes_since(0)] == ["add"] * 120
        # re-adding replaces (vectors upserted by DELETE + COPY); a duplicate chunk id is refused as before
        ledger.commit_write(add=add[:60], remove=[d.id for d, _ in add[:60]])
        assert ledger.counts() == {"documents": 120, "chunks": 240}
        store = ledger.vector_store(8)
        assert store.search(add[5][1][1].embedding, 1)[0][0] == "d5-1"  # type: ignore[arg-type]
        dup = [(DocumentRecord("x", "x", "hx", "complete", "x", {}), [add[0][1][0]] * 40)]
        with pytest.raises(psycopg.errors.UniqueViolation):
            ledger.commit_write(add=dup)
        assert ledger.counts() == {"documents": 120, "chunks": 240}  # nothing half-written
    finally:
        ledger.close()


def test_a_large_load_builds_the_index_once_and_readers_stay_correct(
    pg_url: str, tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    from finderledge.ingest import write

    monkeypatch.setattr(write, "STREAM_DOCUMENTS", 100)  # several commits in one call
    schema = fresh_schema()
    emb = DeterministicFakeEmbedding(size=16)
    texts = [f"text number {i} about topic {i % 7}" for i in range(400)]
    fl = FinderLedge(tmp_path / "a", database_url=pg_url, database_schema=schema, embedding=emb)
    reader = FinderLedge(tmp_path / "b", database_url=pg_url, database_schema=schema, embedding=emb)
    fl.add_texts(texts[:150])  # a first call: large, the index is built after it
    assert _hnsw(pg_url, schema)
    during: list[tuple[bool, str | None, list[str], list[str]]] = []
    real_begin = bulk.BulkLoad.begin
    query = np.asarray(emb.embed_query(texts[3]), dtype=np.float32)

    def begin(self: bulk.BulkLoad, tx: Any, *args: Any) -> None:
        real_begin(self, tx, *args)
        if self.written > 200:  # a commit of the second call: what another session sees now
            store = reader.engine.ledger.vector_store(16)
            hits = [i for i, _ in store.search(query, 5)]
            with psycopg.connect(pg_url, autocommit=True) as conn:
                rows = conn.execute(
                    f'SELECT id, embedding <=> %s::vector d FROM "{schema}".vectors ORDER BY d LIMIT 5',
                    (pgv.vector_literal(query),),
                ).fetchall()
            during.append((_hnsw(pg_url, schema), _state(pg_url, schema), hits, [r[0] for r in rows]))

    monkeypatch.setattr(bulk.BulkLoad, "begin", begin)
    caplog.set_level(logging.INFO, logger="finderledge")
    fl.add_texts(texts[150:])  # 250 chunks: at least 25 % of the 150 held and the minimum: deferred
    assert during, "the load committed more than once"
    for hnsw, state, hits, exact in during:
        assert not hnsw and state is not None and state.startswith("deferred")
        assert hits == exact  # exact search while the index is away
    assert _hnsw(pg_url, schema) and _state(pg_url, schema) is None
    assert any("vector index ready" in r.getMessage() for r in caplog.records)
    assert sum("built the HNSW index" in r.getMessage() for r in caplog.records) == 1  # once
    assert fl.count()["chunks"] == 400
    assert reader.search(texts[42], k=3)[0].content == texts[42]
    fl.add_texts(["one more small write"])  # small: rows maintained in the index, which stays
    assert _hnsw(pg_url, schema)
    fl.close()
    reader.close()


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from finderledge import FinderLedge
    from finderledge.ingest import write
    from finderledge.ledgers import bulk
    from finderledge.ledgers.postgres import PostgresDialect
    from finderledge.vector_stores import pgvector

    pgvector.EXACT_THRESHOLD = 50
    bulk.BULK_INDEX_MIN_CHUNKS = 100
    write.STREAM_DOCUMENTS = 100
    url, schema, folder = sys.argv[1:4]
    commits = []
    real = PostgresDialect.end_commit

    def end_commit(self, tx, add):
        real(self, tx, add)
        commits.append(len(add))
        if len(commits) == 3:  # the third transaction is written, not committed: die now
            os.kill(os.getpid(), signal.SIGKILL)

    PostgresDialect.end_commit = end_commit
    fl = FinderLedge(folder, database_url=url, database_schema=schema,
                     embedding=DeterministicFakeEmbedding(size=16), show_progress=False)
    fl.add_texts([f"loaded text {i}" for i in range(500)])
    """
)


def test_a_loader_killed_mid_load_loses_nothing_committed_and_the_index_is_rebuilt_on_open(
    pg_url: str, tmp_path: Path, small: None
) -> None:
    schema = fresh_schema()
    emb = DeterministicFakeEmbedding(size=16)
    with FinderLedge(tmp_path / "a", database_url=pg_url, database_schema=schema, embedding=emb) as fl:
        fl.add_texts([f"earlier text {i}" for i in range(120)])  # large: indexed
    assert _hnsw(pg_url, schema)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, pg_url, schema, str(tmp_path / "b")],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    # two transactions of 100 documents committed; the third, killed before its commit, left nothing
    with psycopg.connect(pg_url, autocommit=True) as conn:
        s = f'"{schema}"'
        counts = [
            conn.execute(f"SELECT count(*) FROM {s}.{t}").fetchone()[0]  # type: ignore[index]
            for t in ("documents", "chunks", "vectors", "changes")
        ]
        orphans = conn.execute(
            f"SELECT count(*) FROM {s}.chunks c LEFT JOIN {s}.vectors v ON v.id = c.id WHERE v.id IS NULL"
        ).fetchone()[0]  # type: ignore[index]
    assert counts == [320, 320, 320, 320] and orphans == 0
    assert not _hnsw(pg_url, schema) and _state(pg_url, schema) is not None  # the state is recorded
    with FinderLedge(tmp_path / "c", database_url=pg_url, database_schema=schema, embedding=emb) as fl:
        assert _hnsw(pg_url, schema) and _state(pg_url, schema) is None  # rebuilt on open
        assert fl.count()["chunks"] == 320
        hit = fl.search("loaded text 150", k=1)[0]
        assert hit.content == "loaded text 150"
    assert json.dumps(counts)


@pytest.mark.parametrize(("server", "build"), [("64MB", "512MB"), ("1GB", "1GB")])
def test_the_index_build_raises_maintenance_work_mem_and_never_lowers_it(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, server: str, build: str
) -> None:
    monkeypatch.setattr(pgv, "EXACT_THRESHOLD", 5)
    schema = fresh_schema()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        for statement in pgv.table_ddl(schema, "vectors"):
            conn.execute(statement)
        conn.execute(f'ALTER TABLE "{schema}".vectors ALTER COLUMN embedding TYPE vector(4)')
        for i in range(10):
            conn.execute(
                f'INSERT INTO "{schema}".vectors (id, embedding) VALUES (%s, %s::vector)',
                (str(i), pgv.vector_literal([i, 1, 2, 3])),
            )
        conn.execute(f"SET maintenance_work_mem = '{server}'")  # as a DBA's setting would be
        with conn.transaction():
            pgv.build_index_when_large(conn, schema, "vectors", 4, "test")
            assert conn.execute("SHOW maintenance_work_mem").fetchone()[0] == build  # type: ignore[index]
        assert pgv.has_index(conn, schema, "vectors")


def _reltuples(url: str, schema: str) -> dict[str, float]:
    """The planner's row count of each table of ``schema`` (-1: never analysed or vacuumed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchall()
    return {str(r[0]): float(r[1]) for r in rows}


@pytest.fixture
def counted_by_writes(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, str]]:
    """Postgres mode with the keyword index in the engine, autovacuum off for its tables (only a write's ANALYZE
    can count them), and 50 chunks a large write: the ledger and its schema."""
    monkeypatch.setattr(bulk, "ANALYZE_MIN_CHUNKS", 50)
    schema = fresh_schema()
    fl = FinderLedge(
        tmp_path / "app",
        database_url=pg_url,
        database_schema=schema,
        embedding=DeterministicFakeEmbedding(size=8),
        keyword_index="engine",
        show_progress=False,
    )
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for table in _reltuples(pg_url, schema):
                conn.execute(f'ALTER TABLE "{schema}"."{table}" SET (autovacuum_enabled = false)')
        yield fl, schema
    finally:
        fl.close()


def test_a_large_write_leaves_the_planner_statistics_of_the_tables_it_grew(
    pg_url: str, counted_by_writes: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write call of at least ANALYZE_MIN_CHUNKS chunks, and at least ANALYZE_SHARE of those the last statistics
    counted, ends with an ANALYZE of the tables it grew: the next searches are planned on real counts, not on
    guesses until autovacuum's next round (a keyword search after a 10k load: 55-82 ms for ~45 s, then 4-8 ms).
    A small write later leaves them to autovacuum."""
    fl, schema = counted_by_writes
    fl.add_texts([f"note {i} about refunds and invoices" for i in range(20)])  # below the minimum
    before = _reltuples(pg_url, schema)
    assert before["kw_postings"] < 0 and before["chunks"] < 0, before  # never counted
    fl.add_texts([f"chapter {i} on shipping, returns and store credit" for i in range(120)])
    after = _reltuples(pg_url, schema)
    for table in ("documents", "chunks", "changes", "vectors", "kw_docs", "kw_postings", "kw_terms"):
        assert after[table] > 0, (table, after)
    assert after["chunks"] == 140 and after["kw_postings"] > 140 * 4, after
    fl.add_texts([f"appendix {i}" for i in range(40)])  # 40 of 140: a share, but below the minimum
    assert _reltuples(pg_url, schema)["chunks"] == 140
    monkeypatch.setattr(bulk, "ANALYZE_SHARE", 1.0)
    fl.add_texts([f"part {i} of the handbook" for i in range(100)])  # 100: not 1.0 x the 140 counted
    assert _reltuples(pg_url, schema)["chunks"] == 140


def test_a_busy_table_leaves_the_statistics_to_autovacuum_without_holding_the_write(
    pg_url: str,
    counted_by_writes: tuple[Any, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Another session holding a lock ANALYZE waits for (as an index build does, for as long as it runs): the
    write call's ANALYZE gives up after ANALYZE_LOCK_WAIT_S, the call returns with its rows committed."""
    monkeypatch.setattr(bulk, "ANALYZE_LOCK_WAIT_S", 0.2)
    fl, schema = counted_by_writes
    with psycopg.connect(pg_url) as holder:  # a transaction holding the lock ANALYZE needs, not writes'
        holder.execute(f'LOCK TABLE "{schema}".kw_postings IN SHARE UPDATE EXCLUSIVE MODE')
        with caplog.at_level(logging.INFO, logger="finderledge.ledgers.bulk"):
            ids = fl.add_texts([f"chapter {i} on shipping and returns" for i in range(120)])
        holder.rollback()
    assert len(ids) == 120 and fl.count()["chunks"] == 120
    assert any("left to autovacuum" in r.getMessage() for r in caplog.records), caplog.text
    assert _reltuples(pg_url, schema)["kw_postings"] < 0  # not analysed (the whole ANALYZE rolled back)
    assert fl.search("shipping returns", k=3, search_mode="keyword")


def test_a_large_write_of_chunks_without_vectors_still_counts_as_large(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk load counts every chunk it writes, with a vector or not: a ledger user writing text-only chunks
    in one large call gets the planner's statistics refreshed at its end (before, only embedded chunks were
    counted, so such a call counted 0 and left the tables to autovacuum), and the HNSW index is left alone:
    the call writes no vector to index."""
    monkeypatch.setattr(bulk, "ANALYZE_MIN_CHUNKS", 50)
    monkeypatch.setattr(bulk, "BULK_INDEX_MIN_CHUNKS", 50)
    schema = fresh_schema()
    ledger = PostgresLedger(pg_url, schema=schema)
    try:
        first = DocumentRecord("v", "src/v", "hv", "complete", "a document with a vector", {})
        vector = np.ones(8, dtype=np.float32)
        ledger.commit_write(add=[(first, [ChunkRecord("v-0000", "v", 0, "with a vector", {}, vector)])])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for table in ("documents", "chunks", "changes", "vectors"):
                conn.execute(f'ALTER TABLE "{schema}"."{table}" SET (autovacuum_enabled = false)')
        add = []
        for i in range(40):
            doc = DocumentRecord(f"d{i}", f"src/{i}", f"h{i}", "complete", f"document {i}", {"n": i})
            chunks = [
                ChunkRecord(f"d{i}-{j:04d}", f"d{i}", j, f"part {j} of {i}", {}, None) for j in range(2)
            ]
            add.append((doc, chunks))
        deferred: list[bool] = []
        real_begin = bulk.BulkLoad.begin

        def begin(self: bulk.BulkLoad, tx: Any, *args: Any) -> None:
            real_begin(self, tx, *args)
            deferred.append(self.deferred)

        monkeypatch.setattr(bulk.BulkLoad, "begin", begin)
        with bulk.bulk_load(ledger):
            ledger.commit_write(add=add)
        counted = _reltuples(pg_url, schema)
        assert counted["chunks"] == 81 and counted["documents"] == 41, counted
        assert deferred == [False] and _state(pg_url, schema) is None  # 80 chunks: large, but no vector
        assert ledger.counts() == {"documents": 41, "chunks": 81}
    finally:
        ledger.close()


def _builds(caplog: pytest.LogCaptureFixture) -> int:
    return sum("built the HNSW index" in r.getMessage() for r in caplog.records)


def test_calls_inside_a_bulk_load_block_build_the_index_once_at_its_end(
    pg_url: str, tmp_path: Path, small: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Calls too small to defer the index on their own (30 chunks against 100) count together inside
    ``bulk_load()``: the index is dropped once they reach the threshold, searched exactly meanwhile, and built
    once when the block ends; outside a block the same calls keep the index and maintain it row by row."""
    schema = fresh_schema()
    emb = DeterministicFakeEmbedding(size=16)
    caplog.set_level(logging.INFO, logger="finderledge")
    texts = [f"bulk text {i} on topic {i % 9}" for i in range(450)]
    with FinderLedge(tmp_path / "a", database_url=pg_url, database_schema=schema, embedding=emb) as fl:
        fl.add_texts(texts[:150])  # large: indexed once after it
        assert _hnsw(pg_url, schema) and _builds(caplog) == 1
        for start in range(150, 240, 30):  # small calls, no block: the index stays and takes each row
            fl.add_texts(texts[start : start + 30])
            assert _hnsw(pg_url, schema) and _state(pg_url, schema) is None
        assert _builds(caplog) == 1
        seen: list[tuple[bool, str | None, str]] = []
        with fl.bulk_load():
            for start in range(240, 450, 30):
                fl.add_texts(texts[start : start + 30])
                hit = fl.search(texts[start + 7], k=1, search_mode="vector")[0]
                seen.append((_hnsw(pg_url, schema), _state(pg_url, schema), hit.content))
            assert _builds(caplog) == 1  # nothing built inside the block
        # 30, 60, 90 chunks: below the minimum of 100, maintained; from 120 on the index is away
        assert [h for h, _, _ in seen] == [True, True, True] + [False] * 4
        assert all(s is not None and s.startswith("deferred") for h, s, _ in seen if not h)
        assert [c for _, _, c in seen] == [texts[s + 7] for s in range(240, 450, 30)]  # exact meanwhile
        assert _hnsw(pg_url, schema) and _state(pg_url, schema) is None and _builds(caplog) == 2
        assert fl.count()["chunks"] == 450
        assert fl.search(texts[300], k=1)[0].content == texts[300]


def test_a_bulk_load_told_its_size_defers_at_once_and_an_error_still_builds_the_index(
    pg_url: str, tmp_path: Path, small: None, caplog: pytest.LogCaptureFixture
) -> None:
    schema = fresh_schema()
    emb = DeterministicFakeEmbedding(size=16)
    caplog.set_level(logging.INFO, logger="finderledge")
    with FinderLedge(tmp_path / "a", database_url=pg_url, database_schema=schema, embedding=emb) as fl:
        fl.add_texts([f"held text {i}" for i in range(150)])
        assert _hnsw(pg_url, schema) and _builds(caplog) == 1
        with pytest.raises(RuntimeError, match="the caller's own failure"), fl.bulk_load(chunks=300):
            fl.add_texts([f"told text {i}" for i in range(30)])
            assert not _hnsw(pg_url, schema)  # 300 expected: deferred from the first commit
            fl.add_texts([f"told text {i}" for i in range(30, 60)])
            raise RuntimeError("the caller's own failure")
        assert _hnsw(pg_url, schema) and _state(pg_url, schema) is None and _builds(caplog) == 2
        assert fl.count()["chunks"] == 210  # both calls inside the block are kept
        assert fl.search("told text 42", k=1)[0].content == "told text 42"
