"""``keyword_index="engine"``: BM25 scored inside PostgreSQL equals the local replica's BM25.

One corpus (English, Japanese through Sudachi, partitions, metadata filters) is written once into a Postgres
ledger; a process with ``keyword_index="engine"`` and one with ``keyword_index="local"`` search it, and their
top-10 ids and scores must agree.  Removals and replacements keep the engine-side postings exact.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema
from texts import EN_WORDS

from finderledge import FinderLedge
from finderledge.errors import ConfigurationError, IncompatibleIndexError
from finderledge.ledgers.postings import EngineKeywordIndex
from finderledge.tokenizer import AutoTokenizer

JA_SENTENCES = [
    "東京都の倉庫で在庫を管理しています。",
    "請求書の払い戻しは三日以内に処理されます。",
    "パスワードを忘れた場合は管理者に連絡してください。",
    "大阪の支店では新しいサーバーを導入しました。",
    "検索エンジンの索引は毎晩更新されます。",
    "顧客の注文は倉庫から発送されます。",
    "銀行振込の確認には時間がかかります。",
    "京都の観光客は春と秋に増えます。",
]


def _english(rng: random.Random, n: int) -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for i in range(n):
        words = [rng.choice(EN_WORDS) for _ in range(rng.randint(5, 60))]
        md = {"tenant": rng.choice(["a", "b", "c"]), "year": rng.choice([2019, 2020, 2021])}
        if i % 17 == 0:
            md.pop("tenant")  # chunks in no partition
        docs.append((" ".join(words) + ".", md))
    return docs


def _japanese(rng: random.Random, n: int) -> list[tuple[str, dict[str, Any]]]:
    return [("".join(rng.sample(JA_SENTENCES, rng.randint(1, 4))), {"tenant": "ja"}) for _ in range(n)]


def _open(directory: Path, url: str, schema: str, mode: str, fake: Any, **kw: Any) -> FinderLedge:
    return FinderLedge(
        directory,
        database_url=url,
        database_schema=schema,
        embedding=fake,
        keyword_index=mode,
        show_progress=False,
        fusion="rrf",
        **kw,
    )


def _same_top(a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float = 1e-4) -> bool:
    """Whether two top-k lists agree: the same scores rank by rank, and ids that differ only among scores tied
    to ``tol`` (the two legs add the same terms in another precision and order: a tie may break either way)."""
    if len(a) != len(b) or any(abs(sa - sb) > tol for (_, sa), (_, sb) in zip(a, b, strict=True)):
        return False
    floor = a[-1][1] + tol if a else 0.0
    return {i for i, s in a if s > floor} == {i for i, s in b if s > floor} and all(
        ia == ib or abs(sa - sb) <= tol for (ia, sa), (ib, sb) in zip(a, b, strict=True)
    )


def _agree(engine: Any, local: Any, queries: list[str], flt: dict[str, Any] | None) -> float:
    """Share of queries whose top-10 lists agree (ties aside); every common id's score agrees to 1e-4."""
    same = 0
    for q in queries:
        a, b = engine.search(q, 10, flt), local.search(q, 10, flt)
        same += _same_top(a, b)
        scores = dict(b)
        for cid, score in a:
            if cid in scores:
                assert score == pytest.approx(scores[cid], abs=1e-4), (q, cid)
    return same / len(queries)


def test_engine_equals_local(tmp_path: Path, pg_url: str, fake_embeddings: Any) -> None:
    rng = random.Random(7)
    schema = fresh_schema()
    tok = AutoTokenizer(japanese="always")
    writer = _open(
        tmp_path / "w",
        pg_url,
        schema,
        "engine",
        fake_embeddings,
        partition_key="tenant",
        keyword_tokenizer=tok,
    )
    docs = _english(rng, 300) + _japanese(rng, 60)
    texts = [t for t, _ in docs]
    writer.add_texts(texts, [md for _, md in docs], ids=[f"d{i}" for i in range(len(docs))])
    # removals and replacements: the engine-side statistics must follow them exactly
    writer.delete([f"d{i}" for i in range(0, 40, 3)])
    writer.add_texts(
        ["refund refund invoice ledger", "東京の倉庫"],
        [{"tenant": "a"}, {"tenant": "ja"}],
        ids=["d1", "d300"],
    )
    engine = writer.engine.replica.keyword.handle
    assert isinstance(engine, EngineKeywordIndex)
    local_fl = _open(
        tmp_path / "r",
        pg_url,
        schema,
        "local",
        fake_embeddings,
        partition_key="tenant",
        keyword_tokenizer=tok,
    )
    try:
        local_fl.search("refund", k=1)  # brings the replica up to date
        local = local_fl.engine.replica.keyword.handle
        assert len(engine) == len(local)
        queries = [" ".join(rng.sample(EN_WORDS, rng.randint(1, 4))) for _ in range(60)]
        queries += [s[:8] for s in JA_SENTENCES] + ["倉庫 在庫", "東京都庁", "銀行"]
        assert _agree(engine, local, queries, None) >= 0.95
        for flt in (
            {"tenant": "a"},
            {"tenant": {"$in": ["a", "b"]}},
            {"tenant": {"$ne": "a"}},
            {"year": 2020},
            {"$and": [{"tenant": "b"}, {"year": {"$gte": 2020}}]},
            {"tenant": "ja"},
        ):
            assert _agree(engine, local, queries, flt) >= 0.95, flt
        assert engine.partition_sizes() == local.partition_sizes()
        assert engine.partition_size("a") == local.partition_size("a")
        assert sorted(engine.partition_ids("b")) == sorted(local.partition_ids("b"))
        q, text = "refund invoice", "refund shelf invoice invoice"
        assert engine.score_text(q, text) == pytest.approx(local.score_text(q, text), abs=1e-9)
        # a hybrid search in engine mode answers through the engine-side leg
        assert writer.search("refund invoice ledger", k=3)
    finally:
        local_fl.close()
        writer.close()


def test_engine_enables_on_existing_ledger_and_checks_what_it_records(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    schema = fresh_schema()
    first = _open(tmp_path / "a", pg_url, schema, "local", fake_embeddings)
    first.add_texts(["alpha beta gamma", "beta delta"], ids=["x", "y"])
    first.close()
    second = _open(tmp_path / "b", pg_url, schema, "engine", fake_embeddings)  # indexes what is stored
    try:
        handle = second.engine.replica.keyword.handle
        assert len(handle) == 2
        assert [i for i, _ in handle.search("delta")] == ["y-0000"] or handle.search("delta")[0][
            0
        ].startswith("y")
        assert not list((tmp_path / "b").rglob("*.seg*"))  # no local BM25 files
    finally:
        second.close()
    with pytest.raises(IncompatibleIndexError, match="keyword index was built with"):
        _open(tmp_path / "c", pg_url, schema, "engine", fake_embeddings, partition_key="tenant")


def test_engine_needs_database_url(tmp_path: Path, fake_embeddings: Any) -> None:
    with pytest.raises(ConfigurationError, match="keyword_index"):
        FinderLedge(tmp_path, embedding=fake_embeddings, keyword_index="engine")
    with pytest.raises(ConfigurationError, match="keyword_index"):
        FinderLedge(tmp_path, embedding=fake_embeddings, keyword_index="lucene")


_WRITER = """
import sys
from langchain_core.embeddings import DeterministicFakeEmbedding
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[3], database_url=sys.argv[1], database_schema=sys.argv[2], keyword_index="engine",
                 embedding=DeterministicFakeEmbedding(size=16), show_progress=False, fusion="rrf")
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
for n in range(1000):
    fl.add_texts([" ".join(words[(i * 7 + j) % 10] for j in range(i % 9 + 1)) for i in range(200)],
                 ids=[f"b{n}-{i}" for i in range(200)])
    if n % 2:
        fl.delete([f"b{n - 1}-{i}" for i in range(0, 200, 3)])
    print("wrote", n, flush=True)
"""


def test_a_writer_killed_mid_write_leaves_exact_postings(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    schema = fresh_schema()
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, pg_url, schema, str(tmp_path / "child")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        while "wrote 3" not in child.stdout.readline():
            pass
        time.sleep(0.15)  # inside a later write
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    engine_fl = _open(tmp_path / "e", pg_url, schema, "engine", fake_embeddings)
    local_fl = _open(tmp_path / "l", pg_url, schema, "local", fake_embeddings)
    try:
        engine, local = engine_fl.engine.replica.keyword.handle, local_fl.engine.replica.keyword.handle
        chunks = engine_fl.count()["chunks"]
        assert len(engine) == chunks == len(local) and chunks >= 4 * 200 - 2 * 67
        assert engine.ids() == local.ids()
        dialect = engine_fl.ledger.dialect  # type: ignore[attr-defined]
        with dialect.reading() as conn:  # the statistics are the postings' own (nothing half-written)
            row = conn.execute(dialect.sql("SELECT count(*), sum(dl) FROM {s}kw_docs"), ()).fetchone()
            stats = conn.execute(
                dialect.sql("SELECT sum(n_docs), sum(total_len) FROM {s}kw_stats"), ()
            ).fetchone()
        assert tuple(map(int, row)) == tuple(map(int, stats))
        queries = ["alpha", "beta gamma", "kappa iota theta", "zeta zeta eta"]
        assert _agree(engine, local, queries, None) == 1.0
    finally:
        local_fl.close()
        engine_fl.close()
