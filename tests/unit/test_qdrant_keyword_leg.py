"""``keyword_index="engine"`` with ``vector_store="qdrant"``: BM25 as Qdrant sparse vectors (IDF server-side,
term-frequency saturation written) equals the local BM25 replica.

One corpus (English, Japanese through Sudachi, metadata to filter on) is written into a directory searched by
the local leg and into one searched in Qdrant (qdrant-client's local mode); their top-10 ids and scores must
agree, through filters, removals, replacements, reopening and average-length drift.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import pytest
from texts import EN_WORDS

from finderledge import FinderLedge
from finderledge.config import Settings
from finderledge.errors import ConfigurationError, IncompatibleIndexError
from finderledge.keyword_store import KeywordStore
from finderledge.replica.checking import check_directory

pytest.importorskip("qdrant_client")  # finderledge[qdrant]
from finderledge.vector_stores.qdrant_keyword import DRIFT, QdrantKeywordIndex, term_id

EN = EN_WORDS[:27]
JA = [
    "東京の倉庫に在庫があります。",
    "パスワードを忘れた場合は管理者に連絡してください。",
    "請求書は月末に発行されます。",
    "大阪の支店で返金の手続きを行います。",
    "検索エンジンの索引を毎晩更新します。",
    "配送は三営業日以内に行われます。",
    "銀行振込の残高を確認してください。",
    "四半期の売上報告を作成しました。",
]
EN_QUERIES = ["warehouse invoice", "password reset account", "bank transfer balance", "server node", "growth"]
JA_QUERIES = ["倉庫の在庫", "パスワード", "請求書 月末", "返金 手続き", "売上 報告", "銀行"]


def _corpus(n: int = 120, seed: int = 7) -> list[tuple[str, str, dict[str, Any]]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        if i % 3 == 2:
            text = "".join(rnd.choices(JA, k=rnd.randint(1, 4)))
            lang = "ja"
        else:
            text = " ".join(rnd.choices(EN, k=rnd.randint(3, 40))) + "."
            lang = "en"
        out.append((f"doc-{i:03d}", text, {"source": f"{i}.txt", "lang": lang, "year": 2000 + i % 7}))
    return out


def _open(path: Path, fake_embeddings: Any, **kw: Any) -> FinderLedge:
    return FinderLedge(path, vector_store="qdrant", embedding=fake_embeddings, **kw)


def _load(fl: FinderLedge, docs: list[tuple[str, str, dict[str, Any]]]) -> None:
    fl.add_texts([t for _, t, _ in docs], metadatas=[m for _, _, m in docs], ids=[d for d, _, _ in docs])


def _same(local: list[tuple[str, float]], engine: list[tuple[str, float]]) -> None:
    """Same ids and scores rank by rank (Qdrant keeps weights in float32: scores agree to ~1e-6)."""
    assert [i for i, _ in engine] == [i for i, _ in local]
    for (_, a), (_, b) in zip(local, engine):
        assert b == pytest.approx(a, rel=1e-5)


def _agree(a: FinderLedge, b: FinderLedge, flt: dict[str, Any] | None = None) -> None:
    for q in EN_QUERIES + JA_QUERIES:
        _same(a.keyword_store.search(q, 10, flt), b.keyword_store.search(q, 10, flt))


@pytest.fixture
def pair(tmp_path: Path, fake_embeddings: Any) -> Any:
    docs = _corpus()
    local = _open(tmp_path / "local", fake_embeddings)
    engine = _open(tmp_path / "engine", fake_embeddings, keyword_index="engine")
    _load(local, docs)
    _load(engine, docs)
    yield local, engine, docs
    local.close()
    engine.close()


def test_engine_leg_lives_in_qdrant_and_ranks_as_the_local_leg(pair: Any, tmp_path: Path) -> None:
    local, engine, docs = pair
    assert isinstance(engine.keyword_store, QdrantKeywordIndex)
    assert not isinstance(local.keyword_store, QdrantKeywordIndex)
    assert (tmp_path / "engine" / "qdrant_keyword").is_dir() and not (tmp_path / "engine" / "bm25").exists()
    assert len(engine.keyword_store) == len(local.keyword_store) == len(docs)
    assert engine.keyword_store.ids() == local.keyword_store.ids()
    _agree(local, engine)
    assert all(engine.keyword_store.search(q, 10) for q in JA_QUERIES)  # Sudachi's terms matched
    hits = engine.search("password reset account", search_mode="keyword", k=5)
    assert [h.metadata["source"] for h in hits] == [
        h.metadata["source"] for h in local.search("password reset account", search_mode="keyword", k=5)
    ]
    assert engine.keyword_store.get_scores("warehouse invoice") == pytest.approx(
        local.keyword_store.get_scores("warehouse invoice"), rel=1e-5
    )
    assert engine.keyword_store.score_text("bank transfer", "bank bank balance") == pytest.approx(
        local.keyword_store.score_text("bank transfer", "bank bank balance"), rel=1e-5
    )


def test_the_metadata_filter_applies_inside_the_query(pair: Any) -> None:
    local, engine, _ = pair
    for flt in (
        {"lang": "en"},
        {"year": {"$gte": 2003}},
        {"lang": {"$ne": "en"}},  # Qdrant cannot narrow by it: decided afterwards, widening the query
        {"$or": [{"year": 2001}, {"source": "5.txt"}]},
    ):
        _agree(local, engine, flt)
        hits = engine.keyword_store.search("warehouse 倉庫", 10, flt)
        assert hits, flt


def test_removals_and_replacements_keep_it_in_step(pair: Any, tmp_path: Path, fake_embeddings: Any) -> None:
    local, engine, docs = pair
    gone = [d for d, _, _ in docs[:20]]
    for fl in (local, engine):
        fl.delete(gone)
        _load(fl, [(d, "warehouse warehouse refund " + t, m) for d, t, m in docs[20:30]])  # replaced
    assert len(engine.keyword_store) == len(local.keyword_store) == len(docs) - 20
    _agree(local, engine)
    engine.close()
    with _open(tmp_path / "engine", fake_embeddings, keyword_index="engine") as again:  # reopened
        assert isinstance(again.keyword_store, QdrantKeywordIndex)
        assert again.keyword_store.ids() == local.keyword_store.ids()
        _agree(local, again)
        meta = again.keyword_store.meta
        assert abs(meta["total_len"] / meta["n_docs"] / meta["avgdl"] - 1) <= DRIFT


def test_drift_of_the_average_length_is_reweighted() -> None:
    short = [" ".join(["alpha", "beta", "gamma"][: 1 + i % 3]) for i in range(50)]
    longer = [" ".join(random.Random(i).choices(EN, k=60)) + " alpha" for i in range(50)]
    ids = [f"c{i:03d}" for i in range(100)]
    store, index = KeywordStore(), QdrantKeywordIndex()
    for part in (slice(0, 50), slice(50, 100)):
        store.add(ids[part], (short + longer)[part])
        index.add(ids[part], (short + longer)[part])
    first = index.meta["avgdl"]
    assert first == pytest.approx(store.stats()["total_tokens"] / len(store), rel=DRIFT)
    for q in ["alpha", "alpha beta", "warehouse ledger alpha"]:
        _same(store.search(q, 10), index.search(q, 10))
    index.delete(ids[50:])
    store.delete(ids[50:])
    assert index.meta["avgdl"] < first  # shrunk back: re-weighted again
    _same(store.search("alpha beta", 10), index.search("alpha beta", 10))


def test_ties_are_broken_by_id_as_the_local_leg_breaks_them() -> None:
    texts = ["same words here"] * 30 + ["other"]
    ids = [f"t{i:02d}" for i in reversed(range(31))]
    store, index = KeywordStore(), QdrantKeywordIndex()
    store.add(ids, texts)
    index.add(ids, texts)
    _same(store.search("words", 10), index.search("words", 10))


def test_term_ids_are_stable_32_bit_hashes() -> None:
    digest = hashlib.blake2b(b"warehouse", digest_size=4).digest()
    assert term_id("warehouse") == int.from_bytes(digest, "little") < 2**32
    assert term_id("倉庫") != term_id("warehouse")


def test_other_bm25_parameters_are_refused_on_reopen(tmp_path: Path, fake_embeddings: Any) -> None:
    with _open(tmp_path / "idx", fake_embeddings, keyword_index="engine") as fl:
        fl.add_texts(["warehouse shelf"])
    with (
        pytest.raises(IncompatibleIndexError, match="bm25_k1"),
        _open(tmp_path / "idx", fake_embeddings, keyword_index="engine", bm25_k1=1.5) as fl,
    ):
        fl.search("warehouse", search_mode="keyword")


def test_stores_without_an_engine_keyword_leg_are_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="keyword_index.*vector_store"):
        Settings.resolve({"keyword_index": "engine", "vector_store": "faiss"}, environ={}, env_file=None)
    with pytest.raises(ConfigurationError, match="keyword_index.*partition_key"):
        Settings.resolve(
            {"keyword_index": "engine", "vector_store": "qdrant", "partition_key": "team"},
            environ={},
            env_file=None,
        )
    ok = Settings.resolve({"keyword_index": "engine", "vector_store": "qdrant"}, environ={}, env_file=None)
    assert ok.keyword_index == "engine"


def test_a_shared_collection_is_written_after_each_commit(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``qdrant_url`` the keyword collection is every process's (``location = shared``): the writer applies
    its commit to it under the write lock, no replica follows.  A local-mode folder stands in for the server."""
    from finderledge.vector_stores import SHARED, qdrant_keyword

    opened: list[QdrantKeywordIndex] = []

    def as_server(path: Path | None, tokenizer: Any, k1: float, b: float, **_: Any) -> QdrantKeywordIndex:
        index = QdrantKeywordIndex(tmp_path / "server", tokenizer=tokenizer, k1=k1, b=b)
        index.location = SHARED
        opened.append(index)
        return index

    monkeypatch.setattr(qdrant_keyword, "open_qdrant_keyword", as_server)
    docs = _corpus(60)
    with (
        _open(tmp_path / "local", fake_embeddings) as local,
        _open(tmp_path / "engine", fake_embeddings, keyword_index="engine") as engine,
    ):
        _load(local, docs)
        _load(engine, docs)
        assert engine.keyword_store is opened[0] and len(opened[0]) == len(docs)  # written by the commit
        _agree(local, engine)
        for fl in (local, engine):
            fl.delete([d for d, _, _ in docs[:10]])
        assert len(opened[0]) == len(docs) - 10
        _agree(local, engine, {"lang": "ja"})


def test_a_damaged_local_collection_is_moved_aside_and_rebuilt(tmp_path: Path, fake_embeddings: Any) -> None:
    docs = _corpus(30)
    with _open(tmp_path / "idx", fake_embeddings, keyword_index="engine") as fl:
        _load(fl, docs)
        before = fl.keyword_store.search("warehouse 倉庫", 10)
    stored = next((tmp_path / "idx" / "qdrant_keyword").rglob("storage.sqlite"))
    assert not check_directory(tmp_path / "idx").problems  # its seal checked, no local bm25/ expected
    stored.write_bytes(stored.read_bytes()[:-100] + b"\0" * 100)  # not what the seal says
    report = check_directory(tmp_path / "idx")
    assert "keyword" in report.damaged_indexes and any("keyword index" in p for p in report.problems)
    with _open(tmp_path / "idx", fake_embeddings, keyword_index="engine") as again:
        _same(before, again.keyword_store.search("warehouse 倉庫", 10))
        assert len(again.keyword_store) == len(docs)
    assert list((tmp_path / "idx").glob("qdrant_keyword.corrupt-*"))


def test_a_local_directory_switched_to_the_engine_leg_builds_it_from_the_ledger(
    tmp_path: Path, fake_embeddings: Any
) -> None:
    docs = _corpus(40)
    with _open(tmp_path / "idx", fake_embeddings) as local:
        _load(local, docs)
        expected = {q: local.keyword_store.search(q, 10) for q in EN_QUERIES + JA_QUERIES}
    with _open(tmp_path / "idx", fake_embeddings, keyword_index="engine") as engine:
        assert isinstance(engine.keyword_store, QdrantKeywordIndex)
        engine.refresh()
        for q, hits in expected.items():
            _same(hits, engine.keyword_store.search(q, 10))
        engine.delete([docs[0][0]])
    with _open(tmp_path / "idx", fake_embeddings) as back:  # the local replica replays what it missed
        assert len(back.keyword_store) == len(docs) - 1
