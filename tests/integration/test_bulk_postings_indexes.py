"""A bulk load in engine mode (``keyword_index="engine"``, issue 43) defers the two ``kw_postings`` B-trees as
it defers the HNSW index: dropped at its first commit (recorded in ``info``), built once after it with
progress lines; readers in another process get the same keyword results meanwhile; a loader SIGKILLed
mid-load leaves them to the next write or open, with ``check()`` clean.  A real PostgreSQL 16 + pgvector
(``pgserver``); thresholds lowered so that a few hundred chunks make a large load."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.ledgers import bulk
from finderledge.vector_stores import pgvector as pgv

ROOT = Path(__file__).resolve().parents[2]
INDEXES = {"kw_postings_term", "kw_postings_doc"}
KEPT = {"kw_postings_doc"}  # appended to in key order, used by deletes: kept during a load
WORDS = [
    "refund",
    "invoice",
    "ledger",
    "shelf",
    "backup",
    "latency",
    "cluster",
    "replica",
    "café",
    "東京の桜",
]
QUERIES = ("refund invoice", "replica cluster", "backup", "café latency", "東京の桜 ledger")


@pytest.fixture(autouse=True)
def _needs_pgserver() -> None:
    pytest.importorskip("pgserver")


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few hundred chunks make a large table and a large load."""
    monkeypatch.setattr(pgv, "EXACT_THRESHOLD", 50)
    monkeypatch.setattr(bulk, "BULK_INDEX_MIN_CHUNKS", 100)


def _texts(count: int, offset: int = 0) -> list[str]:
    return [
        " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 6)) + f" n{i}"
        for i in range(offset, offset + count)
    ]


def _open(directory: Path, url: str, schema: str, mode: str = "engine") -> FinderLedge:
    return FinderLedge(
        directory,
        database_url=url,
        database_schema=schema,
        embedding=DeterministicFakeEmbedding(size=16),
        keyword_index=mode,
        show_progress=False,
        fusion="rrf",
    )


def _indexes(url: str, schema: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'kw_postings'", (schema,)
        ).fetchall()
    return {str(r[0]) for r in rows}


def _state(url: str, schema: str) -> str | None:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT value FROM "{schema}".info WHERE key = %s', (bulk.POSTINGS_STATE_KEY,)
        ).fetchone()
    return None if row is None else str(row[0])


def _keyword(fl: FinderLedge, query: str) -> list[tuple[str, float]]:
    return [(i, round(s, 9)) for i, s in fl.engine.replica.keyword.handle.search(query, 10)]


def _same_as_local(fl: FinderLedge, folder: Path, url: str, schema: str) -> None:
    """``fl``'s engine-side keyword results are the local replica's (BM25 over the same committed chunks)."""
    with _open(folder, url, schema, mode="local") as local:
        for q in QUERIES:
            want = [(i, round(s, 9)) for i, s in local.engine.replica.keyword.handle.search(q, 10)]
            assert _keyword(fl, q) == want, q


def test_a_bulk_load_builds_the_postings_indexes_once_and_readers_stay_correct(
    pg_url: str, tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    from finderledge.ingest import write

    monkeypatch.setattr(write, "STREAM_DOCUMENTS", 100)  # several commits in one call
    schema = fresh_schema()
    texts = _texts(400)
    fl = _open(tmp_path / "a", pg_url, schema)
    reader = _open(tmp_path / "b", pg_url, schema)
    fl.add_texts(texts[:150], ids=[f"d{i}" for i in range(150)])  # large: deferred, then built
    assert _indexes(pg_url, schema) == INDEXES and _state(pg_url, schema) is None
    before = {q: _keyword(reader, q) for q in QUERIES}
    during: list[tuple[set[str], str | None, dict[str, list[tuple[str, float]]]]] = []
    real_begin = bulk.BulkLoad.begin

    def begin(self: bulk.BulkLoad, tx: Any, *args: Any) -> None:
        real_begin(self, tx, *args)
        if self.written > 200:  # a commit of the second call, the first's rows committed: as others see it
            seen = {q: _keyword(reader, q) for q in QUERIES}
            during.append((_indexes(pg_url, schema), _state(pg_url, schema), seen))

    monkeypatch.setattr(bulk.BulkLoad, "begin", begin)
    caplog.set_level(logging.INFO, logger="finderledge")
    # 250 new chunks and 20 replaced over 150 held: deferred (the replaced postings go by the doc index)
    replaced = [f"{t} revised refund" for t in texts[:20]]
    fl.add_texts(replaced + texts[150:], ids=[f"d{i}" for i in [*range(20), *range(150, 400)]])
    assert during, "the load committed more than once"
    committed = _open(tmp_path / "c", pg_url, schema, mode="local")  # the reference: the local replica
    for indexes, state, seen in during:
        assert indexes == KEPT and state is not None and state.startswith("deferred")
        assert seen != before  # the load's first commit is visible...
        assert all(len(hits) == 10 for hits in seen.values())  # ...and searched by scanning the postings
    assert _indexes(pg_url, schema) == INDEXES and _state(pg_url, schema) is None
    messages = [r.getMessage() for r in caplog.records]
    assert sum("keyword postings indexes ready" in m for m in messages) == 1  # built once
    for q in QUERIES:  # the same results as the local replica's BM25
        want = [(i, round(s, 9)) for i, s in committed.engine.replica.keyword.handle.search(q, 10)]
        assert _keyword(reader, q) == want
    assert fl.check().clean
    fl.add_texts(["one more small write about refund"])  # small: rows maintained in the B-trees, kept
    assert _indexes(pg_url, schema) == INDEXES
    assert reader.search("one more small write about refund", k=1)[0].content.startswith("one more")
    for handle in (fl, reader, committed):
        handle.close()


def test_calls_inside_a_bulk_load_block_build_the_postings_indexes_once_with_the_same_results(
    pg_url: str, tmp_path: Path, small: None, caplog: Any
) -> None:
    """Calls of 40 chunks (too small alone) inside ``bulk_load(chunks=...)``: the term B-tree is dropped at the
    block's first commit and built once at its end, with the HNSW index; the held-back document frequencies
    of every call are added, so keyword results equal the local replica's and ``check()`` is clean."""
    schema = fresh_schema()
    texts = _texts(350)
    caplog.set_level(logging.INFO, logger="finderledge")
    with _open(tmp_path / "a", pg_url, schema) as fl:
        fl.add_texts(texts[:150])  # large: built after it
        assert _indexes(pg_url, schema) == INDEXES
        caplog.clear()
        seen: list[tuple[set[str], str | None]] = []
        with fl.bulk_load(chunks=200):
            for start in range(150, 350, 40):
                fl.add_texts(texts[start : start + 40])
                seen.append((_indexes(pg_url, schema), _state(pg_url, schema)))
            assert not any("indexes ready" in r.getMessage() for r in caplog.records)
        assert all(i == KEPT and s is not None and s.startswith("deferred") for i, s in seen), seen
        assert _indexes(pg_url, schema) == INDEXES and _state(pg_url, schema) is None
        messages = [r.getMessage() for r in caplog.records]
        assert sum("keyword postings indexes ready" in m for m in messages) == 1
        assert sum("built the HNSW index" in m for m in messages) == 1
        _same_as_local(fl, tmp_path / "b", pg_url, schema)
        assert fl.check().clean and fl.count()["chunks"] == 350


def test_readers_meanwhile_score_as_the_indexed_postings_do(pg_url: str, tmp_path: Path, small: None) -> None:
    """With the B-trees dropped (as during a load) every query is answered by scanning the postings: the same
    results, to the last digit, as with them."""
    schema = fresh_schema()
    fl = _open(tmp_path / "a", pg_url, schema)
    fl.add_texts(_texts(300))
    with_indexes = {q: _keyword(fl, q) for q in QUERIES}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in INDEXES:
            conn.execute(f'DROP INDEX "{schema}".{name}')
    assert {q: _keyword(fl, q) for q in QUERIES} == with_indexes
    fl.close()


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
    texts = sys.argv[4:]
    commits = []
    real = PostgresDialect.end_commit

    def end_commit(self, tx, add):
        real(self, tx, add)
        commits.append(len(add))
        if len(commits) == 3:  # the third transaction is written, not committed: die now
            os.kill(os.getpid(), signal.SIGKILL)

    PostgresDialect.end_commit = end_commit
    fl = FinderLedge(folder, database_url=url, database_schema=schema, keyword_index="engine",
                     embedding=DeterministicFakeEmbedding(size=16), show_progress=False, fusion="rrf")
    fl.add_texts(texts, ids=[f"k{i}" for i in range(len(texts))])
    """
)


def _load_killed(url: str, schema: str, folder: Path, texts: list[str]) -> None:
    """Run :data:`_KILLED` in a process of its own: it loads ``texts`` and is SIGKILLed in its third commit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, url, schema, str(folder), *texts],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def test_a_loader_killed_mid_load_leaves_the_postings_indexes_to_the_next_write_and_open(
    pg_url: str, tmp_path: Path, small: None
) -> None:
    schema = fresh_schema()
    earlier = _open(tmp_path / "a", pg_url, schema)
    earlier.add_texts(_texts(120, offset=1000), ids=[f"e{i}" for i in range(120)])
    assert _indexes(pg_url, schema) == INDEXES
    texts = _texts(500)
    _load_killed(pg_url, schema, tmp_path / "b", texts)
    assert _indexes(pg_url, schema) == KEPT and _state(pg_url, schema) is not None  # as the loader left them
    assert _stale_terms(pg_url, schema) > 0  # its two commits' document frequencies were held back
    assert earlier.count()["chunks"] == 320  # two commits of 100 went in, the third left nothing
    meanwhile = {q: _keyword(earlier, q) for q in QUERIES}  # searched meanwhile, by scanning the postings
    assert all(len(hits) == 10 for hits in meanwhile.values())
    # the next write of a process open since before builds them (the loader's key went with its connection)
    earlier.add_texts(["a small write after the loader died"], ids=["after"])
    assert _indexes(pg_url, schema) == INDEXES and _state(pg_url, schema) is None
    assert _stale_terms(pg_url, schema) == 0  # ...and counts them from the postings
    _same_as_local(earlier, tmp_path / "ref1", pg_url, schema)
    assert earlier.check().clean
    earlier.close()
    # killed again: this time the next open builds them, and everything checks clean
    schema2 = fresh_schema()
    with _open(tmp_path / "c", pg_url, schema2) as fl:
        fl.add_texts(_texts(120, offset=1000), ids=[f"e{i}" for i in range(120)])
    _load_killed(pg_url, schema2, tmp_path / "d", texts)
    assert _indexes(pg_url, schema2) == KEPT and _state(pg_url, schema2) is not None
    with _open(tmp_path / "e", pg_url, schema2) as fl:
        assert _indexes(pg_url, schema2) == INDEXES and _state(pg_url, schema2) is None  # rebuilt on open
        assert _stale_terms(pg_url, schema2) == 0
        assert fl.count()["chunks"] == 320
        assert fl.check().clean
        assert fl.search(texts[150], k=1)[0].content == texts[150]
        _same_as_local(fl, tmp_path / "ref2", pg_url, schema2)


def _stale_terms(url: str, schema: str) -> int:
    """Terms whose ``kw_terms`` df differs from their postings' count (0: the frequencies are exact)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT count(*) FROM (SELECT term, part, count(*) AS n FROM "{schema}".kw_postings GROUP BY 1, 2) a'
            f' FULL JOIN (SELECT term, part, df FROM "{schema}".kw_terms WHERE df <> 0) b'
            ' ON b.term = a.term COLLATE "C" AND b.part = a.part WHERE a.n IS DISTINCT FROM b.df'
        ).fetchone()
    return int(row[0]) if row else 0


def _scores(hits: dict[str, list[tuple[str, float]]]) -> dict[str, list[float]]:
    """Each query's scores, rounded (a pruned search adds a chunk's parts in Python: the last bit may differ,
    and so may which of tied chunks are listed)."""
    return {q: [round(s, 9) for _, s in h] for q, h in hits.items()}


def test_a_load_adds_its_document_frequencies_once_and_searches_meanwhile_stay_exact(
    pg_url: str, tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk load holds its ``kw_terms`` additions back and adds them in one upsert after its last commit
    (bulk49): meanwhile (the postings record in ``info``) a pruned search, which reads ``kw_terms``, and
    ``score_text`` count the frequencies from the postings instead, so their results are exact."""
    from finderledge.ingest import write
    from finderledge.ledgers import postings

    monkeypatch.setattr(write, "STREAM_DOCUMENTS", 100)  # several commits in one call
    monkeypatch.setattr(postings, "_PRUNE_MIN_CHUNKS", 0)  # every search of 2+ terms tries to prune
    monkeypatch.setattr(postings, "_PRUNE_MIN_POSTINGS", 1)
    schema = fresh_schema()
    texts = _texts(400)
    fl = _open(tmp_path / "a", pg_url, schema)
    reader = _open(tmp_path / "b", pg_url, schema)
    fl.add_texts(texts[:150], ids=[f"d{i}" for i in range(150)])
    handle = reader.engine.replica.keyword.handle
    tok = handle.tokenizer
    exact = {q: handle._scored(postings.Counter(tok(q)), 10, None, None) for q in QUERIES}
    assert _scores({q: handle.search(q, 10) for q in QUERIES}) == _scores(
        exact
    )  # pruned, as the exact scoring
    upserts: list[int] = []
    real_add_terms = postings.add_terms

    def add_terms(tx: Any, dialect: Any, dfs: Any) -> None:
        upserts.append(len(dfs))
        real_add_terms(tx, dialect, dfs)

    monkeypatch.setattr(postings, "add_terms", add_terms)
    during: list[tuple[int, str | None, bool, bool, bool]] = []
    real_begin = bulk.BulkLoad.begin

    def begin(self: bulk.BulkLoad, tx: Any, *args: Any) -> None:
        real_begin(self, tx, *args)
        if self.written > 200:  # a commit of the second call, earlier ones committed: as others see it
            scored = {q: handle._scored(postings.Counter(tok(q)), 10, None, None) for q in QUERIES}
            pruned = {q: handle.search(q, 10) for q in QUERIES}
            terms = list(postings.Counter(tok(" ".join(QUERIES))))
            with psycopg.connect(pg_url, autocommit=True) as conn:
                counted = dict(
                    conn.execute(
                        f'SELECT term, count(*) FROM "{schema}".kw_postings WHERE term = ANY(%s) GROUP BY term',
                        (terms,),
                    ).fetchall()
                )
            dfs_exact = handle._dfs(terms, None) == {t: int(n) for t, n in counted.items()}
            stale = _stale_terms(pg_url, schema)
            same = _scores(pruned) == _scores(scored)
            during.append((stale, _state(pg_url, schema), same, dfs_exact, scored != exact))

    monkeypatch.setattr(bulk.BulkLoad, "begin", begin)
    replaced = [f"{t} revised refund" for t in texts[:20]]
    fl.add_texts(replaced + texts[150:], ids=[f"d{i}" for i in [*range(20), *range(150, 400)]])
    assert during, "the load committed more than once"
    for stale, state, same, dfs_exact, moved in during:
        assert stale > 0 and state is not None  # the load's frequencies held back, the record says so
        assert moved  # the load's commits are visible to the search...
        assert same and dfs_exact  # ...which stays exact
    assert len(upserts) == 1  # the call's additions in one upsert, after its last commit
    assert _stale_terms(pg_url, schema) == 0 and _state(pg_url, schema) is None
    after = {q: handle._scored(postings.Counter(tok(q)), 10, None, None) for q in QUERIES}
    assert _scores({q: handle.search(q, 10) for q in QUERIES}) == _scores(after)
    assert fl.check().clean
    fl.add_texts(["one more small write about refund"])  # small: its frequencies go in with it
    assert _stale_terms(pg_url, schema) == 0 and len(upserts) == 2
    for each in (fl, reader):
        each.close()
