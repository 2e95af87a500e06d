"""Scores that mean something across queries: absolute relevance in [0, 1], thresholds, and an unchanged ranking."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run_doc_samples
from paths import DATASETS, dataset

from finderledge import NO_CONTEXT, FinderLedge
from finderledge.errors import ConfigurationError
from finderledge.ranking.fusion import FusedHit
from finderledge.ranking.relevance import (
    BackgroundCache,
    CorpusBackground,
    LedgerBackground,
    keyword_evidence,
    sample_background,
    score_hits,
    vector_evidence,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "data"

GOOD = [
    "How long is a password reset link valid?",
    "retry backoff",
    "upload large files resume",
    "返金の申請期限はいつまでですか",
]
NONSENSE = [
    "zebra quantum violin nebula",
    "pancake glacier saxophone lantern",
    "シマウマ 量子 バイオリン 星雲",
]
MODES = ("hybrid", "vector", "keyword")


@pytest.fixture(scope="module")
def fl(minilm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinderLedge]:  # type: ignore[no-untyped-def]
    ledger = FinderLedge(
        tmp_path_factory.mktemp("scores") / "index",
        vector_store="faiss",
        embedding=minilm,
        show_progress=False,
        env_file=None,
    )
    ledger.add_document(EXAMPLES)
    yield ledger
    ledger.close()


@pytest.mark.parametrize("mode", MODES)
def test_scores_are_in_unit_interval_fall_with_rank_and_keep_leg_scores(fl: FinderLedge, mode: str) -> None:
    for query in GOOD + NONSENSE:
        results = fl.search(query, search_mode=mode, k=10)
        scores = [r.score for r in results]
        assert all(0.0 <= s <= 1.0 for s in scores), (query, scores)
        assert scores == sorted(scores, reverse=True), (query, scores)  # monotone with rank
        for r in results:
            assert r.metadata["_finderledge"]["relevance_score"] == r.score
            assert "fusion_score" in r.info
            legs = {"hybrid": ("vector", "keyword"), "vector": ("vector",), "keyword": ("keyword",)}[mode]
            assert any(f"{leg}_score" in r.info for leg in legs)  # the raw leg scores are still there


def test_nonsense_scores_clearly_below_a_good_match(fl: FinderLedge) -> None:
    for mode in MODES:
        good = fl.search("How long is a password reset link valid?", search_mode=mode, k=1)[0]
        assert good.metadata["source"].endswith("password-reset.txt")
        for query in NONSENSE:
            found = fl.search(query, search_mode=mode, k=1)
            top = found[0].score if found else 0.0
            assert top < good.score - 0.2 and top < 0.2, (mode, query, top, good.score)
    # the old score gave every query's best hit the maximum, nonsense included
    assert fl.search("zebra quantum violin nebula", k=1)[0].score < 0.2


def test_japanese_query_is_scored_by_the_leg_that_reads_it(fl: FinderLedge) -> None:
    good = fl.search("返金の申請期限はいつまでですか", k=1)[0]  # MiniLM cannot read it: keyword evidence only
    assert good.metadata["source"].endswith("sla-ja.md") and good.score > 0.3
    assert fl.search("シマウマ 量子 バイオリン 星雲", k=1)[0].score < 0.05


@pytest.mark.parametrize("mode", MODES)
def test_ordering_is_the_fusions(fl: FinderLedge, mode: str) -> None:
    for query in GOOD + NONSENSE:
        results = fl.search(query, search_mode=mode, k=10, score_threshold=None)
        background = LedgerBackground(
            fl.ledger, fl.keyword_store
        )  # adaptive fusion reads the corpus background
        reference = fl.finder.search(query, mode=mode, k=10, background=background)
        assert [r.id for r in results] == [h.id for h in reference]
        assert [r.metadata["_finderledge"]["fusion_score"] for r in results] == pytest.approx(
            [h.score for h in reference]
        )


def test_score_threshold_keeps_the_prefix_that_passes(fl: FinderLedge) -> None:
    for query in GOOD + NONSENSE:
        everything = fl.search(query, k=10)
        for threshold in (0.0, 0.1, 0.3, 0.45, 1.0):
            kept = fl.search(query, k=10, score_threshold=threshold)
            expected = [r for r in everything if r.score >= threshold]
            assert [r.id for r in kept] == [r.id for r in expected]
            assert [r.rank for r in kept] == list(range(1, len(kept) + 1))
    assert fl.search("zebra quantum violin nebula", score_threshold=0.3) == []
    assert len(fl.search("retry backoff", score_threshold=0.3)) >= 1


@pytest.mark.parametrize("bad", [True, "0.5", float("nan"), float("inf"), [0.5]])
def test_score_threshold_is_checked(fl: FinderLedge, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="score_threshold"):
        fl.search("retry", score_threshold=bad)  # type: ignore[arg-type]


def test_get_context_says_no_context_when_nothing_passes(fl: FinderLedge) -> None:
    assert fl.get_context("zebra quantum violin nebula", score_threshold=0.3) == NO_CONTEXT
    assert (
        fl.get_context("zebra quantum violin nebula") != NO_CONTEXT
    )  # without a threshold: whatever is nearest
    context = fl.get_context("How long is a password reset link valid?", score_threshold=0.3)
    assert context.startswith("[1]") and "password-reset.txt" in context and "[2]" not in context


def test_vector_score_of_an_identical_text_is_one(fl: FinderLedge) -> None:
    chunk = fl.search("retry backoff", search_mode="keyword", k=1)[0]
    same = fl.search(chunk.content, search_mode="vector", k=1)[0]
    assert same.id == chunk.id and same.score == pytest.approx(1.0, abs=0.01)


def test_reranked_scores_lie_in_the_unit_interval_and_keep_the_raw_score(minilm, example_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """A reranker's raw scores (here logits of either sign) order the results; the score shown is their
    logistic map in [0, 1], the raw one is ``rerank_score``: one threshold scale for search, retriever, store."""
    import math
    import warnings

    def logits(query: str, docs: Any) -> list[float]:
        return [(len(d.page_content) - 400) / 100 for d in docs]

    ledger = FinderLedge(
        embedding=minilm, vector_store="faiss", reranker=logits, rerank_candidates=5, env_file=None
    )
    ledger.add_document(example_dir)
    first = {r.id: r.score for r in ledger.search("password reset", k=5, rerank=False)}
    results = ledger.search("password reset", k=5)
    assert all(0.0 <= r.score <= 1.0 for r in results), [r.score for r in results]
    raw = [r.info.get("rerank_score") for r in results]
    assert raw == sorted(raw, reverse=True) and raw == [(len(r.content) - 400) / 100 for r in results]
    assert min(raw) < 0 < max(raw) or max(raw) > 1  # the raw scores are not in [0, 1] themselves
    for r in results:
        assert 0.0 <= r.score <= 1.0 and r.score == pytest.approx(1 / (1 + math.exp(-r.info["rerank_score"])))
        assert r.info["relevance_score"] == r.score
        assert r.info["fused_score"] == first[r.id] and 0.0 <= r.info["fused_score"] <= 1.0
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)

    cut = results[1].score  # the same threshold keeps the same prefix everywhere
    assert [r.id for r in ledger.search("password reset", k=5, score_threshold=cut)] == [
        r.id for r in results[:2]
    ]
    retriever = ledger.as_retriever(k=5, score_threshold=cut)
    assert [d.id for d in retriever.invoke("password reset")] == [r.id for r in results[:2]]
    for bad in (-3.0, 1.5):
        with pytest.raises(ConfigurationError, match=r"score_threshold: expected a number in \[0, 1\]"):
            ledger.search("password reset", score_threshold=bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # LangChain warns of relevance scores outside [0, 1]
        pairs = ledger.as_vectorstore().similarity_search_with_relevance_scores("password reset", k=5)
    assert pairs and all(0.0 <= score <= 1.0 for _, score in pairs)
    ledger.close()


def test_empty_corpus_and_blank_queries(minilm) -> None:  # type: ignore[no-untyped-def]
    ledger = FinderLedge(embedding=minilm, vector_store="faiss", env_file=None)
    for mode in MODES:
        assert ledger.search("anything", search_mode=mode) == []
    assert ledger.get_context("anything", score_threshold=0.5) == NO_CONTEXT
    ledger.add_texts(["one lonely document about glaciers"])
    assert 0.0 <= ledger.search("glaciers", k=1)[0].score <= 1.0
    ledger.close()


def test_background_is_deterministic_and_resampled_when_the_corpus_grows(minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    texts = [
        f"Note {i}: the {w} report covers {w} figures for quarter {i % 4}."
        for i, w in enumerate(
            ["sales", "travel", "hiring", "energy", "rent", "support", "cloud", "legal"] * 3
        )
    ]
    a = FinderLedge(tmp_path / "i", embedding=minilm, vector_store="faiss", env_file=None)
    a.add_texts(texts[:20])
    first = a.search("energy figures", k=5)
    assert first.trace.background > 0.0 and first.trace.vector_baseline is not None
    assert a.search("energy figures", k=5).trace.background == 0.0  # cached
    b = FinderLedge(tmp_path / "i", embedding=minilm, env_file=None)  # another instance draws the same sample
    assert [(r.id, r.score) for r in b.search("energy figures", k=5)] == [(r.id, r.score) for r in first]
    b.close()
    a.add_texts([texts[20]])  # +5 %: the background is kept
    assert a.search("energy figures", k=5).trace.background == 0.0
    a.add_texts(texts[21:])  # +20 % since it was sampled: sampled again
    assert a.search("energy figures", k=5).trace.background > 0.0
    a.close()


# -- the pieces -------------------------------------------------------------------------------------------
def test_evidence_functions() -> None:
    assert vector_evidence(1.0, 0.3) == 1.0 and vector_evidence(0.3, 0.3) == 0.0
    assert vector_evidence(0.1, 0.3) == 0.0 and vector_evidence(0.65, 0.3) == pytest.approx(0.5)
    assert vector_evidence(0.9, 1.0) == 0.0
    assert keyword_evidence(5.0, 10.0) == 0.5 and keyword_evidence(3.0, 0.0) == 0.0
    assert keyword_evidence(12.0, 10.0) == 1.0


def test_score_hits_averages_counted_legs_and_never_rises() -> None:
    hits = [
        FusedHit("a", 2.0, {"vector": 1, "keyword": 1}, {"vector": 0.8, "keyword": 6.0}),
        FusedHit("b", 1.0, {"vector": 2}, {"vector": 0.9}),  # the keyword leg did not find it: adds 0
        FusedHit("c", 0.5, {"keyword": 2}, {"keyword": 2.0}),
    ]
    score_hits(hits, {"vector": 1.0, "keyword": 1.0}, vector_baseline=0.0, keyword_ceiling=10.0)
    assert hits[0].relevance == pytest.approx((0.8 + 0.6) / 2)  # the top hit: its own evidence
    assert hits[1].relevance == pytest.approx(
        0.45 * 1.0 / 2.0
    )  # its evidence x its share of the top fused score
    assert hits[2].relevance == pytest.approx(0.1 * 0.5 / 2.0)
    score_hits(hits, {"vector": 1.0, "keyword": 1.0}, vector_baseline=0.0, keyword_ceiling=1.0)
    assert hits[2].relevance == pytest.approx(
        0.45 * 0.5 / 2.0
    )  # evidence 1.0, capped by the hit above (0.45)
    score_hits(
        hits, {"keyword": 1.0, "vector": 0.0}, vector_baseline=0.0, keyword_ceiling=10.0
    )  # vector only fills
    assert [h.relevance for h in hits] == pytest.approx([0.6, 0.0, 0.0])
    score_hits(hits, {"vector": 3.0, "keyword": 1.0}, vector_baseline=0.5, keyword_ceiling=10.0)
    assert hits[0].relevance == pytest.approx((3 * 0.6 + 0.6) / 4)
    negative = [FusedHit("x", -0.2, {"vector": 1}, {"vector": -0.2})]  # vector mode: a cosine may be negative
    score_hits(negative, {"vector": 1.0}, vector_baseline=-0.5, keyword_ceiling=0.0)
    assert negative[0].relevance == 0.0


def test_background_idf_and_baseline() -> None:
    texts = ["cats purr", "dogs bark", "cats and dogs", "fish swim"] * 5
    vectors = [np.array([1.0, 0.0]), np.array([0.0, 2.0]), None, np.array([1.0, 1.0])] * 5
    bg = sample_background(texts, vectors, 20, tokenizer=str.split, k1=0.9)
    assert bg.sample_size == 20 and bg.doc_freq["cats"] == 10
    assert bg.idf("cats") == pytest.approx(np.log(1 + (20 - 10 + 0.5) / 10.5))
    assert bg.idf("unseen") == pytest.approx(np.log(1 + 20.5 / 0.5))  # the whole corpus sampled: df 0
    assert bg.keyword_ceiling("cats cats unseen") == pytest.approx(
        1.9 * (2 * bg.idf("cats") + bg.idf("unseen"))
    )
    mean = np.array([1 + 1 / np.sqrt(2), 1 + 1 / np.sqrt(2)]) / 3  # of the unit vectors
    # the mean cosine between two different chunks (15 vectors: |mean|² less each chunk's cosine with itself)
    pairs = (15 * float(mean @ mean) - 1) / 14
    assert bg.vector_baseline([1.0, 0.0]) == pytest.approx(pairs)  # chunk-to-chunk is the higher
    assert bg.vector_baseline([1.0, 0.0]) > float(
        np.mean([1.0, 0.0, 1 / np.sqrt(2)])
    )  # the query's mean cosine
    assert bg.vector_baseline([0.0, -1.0]) == pytest.approx(pairs)
    near = sample_background(
        ["a", "b"], [np.array([1.0, 0.0]), np.array([0.0, 1.0])], 2, tokenizer=None, k1=0.9
    )
    assert near.vector_baseline([1.0, 1.0]) == pytest.approx(
        1 / np.sqrt(2)
    )  # above the chunks' mean cosine 0 (they are orthogonal)
    partial = CorpusBackground(corpus_size=1000, sample_size=100, doc_freq={"cats": 10})
    assert partial.idf("cats") == pytest.approx(
        np.log(1 + (1000 - 100 + 0.5) / 100.5)
    )  # scaled to the corpus
    assert partial.idf("dogs") == pytest.approx(
        np.log(1 + (1000 - 5 + 0.5) / 5.5)
    )  # unseen: half a sampled hit
    assert partial.vector_baseline([1.0, 0.0]) == 0.0 and partial.keyword_ceiling("cats") == 0.0


def test_background_cache_refreshes_on_a_tenth() -> None:
    class Source:
        def __init__(self) -> None:
            self.n, self.sampled = 100, 0

        def size(self) -> int:
            return self.n

        def sample(self, size: int) -> CorpusBackground:
            self.sampled += 1
            return CorpusBackground(self.n, min(self.n, size))

    source, cache = Source(), BackgroundCache(sample_size=50)
    assert cache.get(source)[0].sample_size == 50 and source.sampled == 1
    source.n = 110
    assert cache.get(source)[1] == 0.0 and source.sampled == 1
    source.n = 111
    assert cache.get(source)[0].corpus_size == 111 and source.sampled == 2


def test_background_cache_asks_the_size_once_per_seq() -> None:
    """A source that says which ledger change it reflects is asked its size once per change (in Postgres mode
    each ask is a round trip); one without ``seq`` every time."""

    class Source:
        def __init__(self) -> None:
            self.n, self.asked, self.seq = 100, 0, 7

        def size(self) -> int:
            self.asked += 1
            return self.n

        def sample(self, size: int) -> CorpusBackground:
            return CorpusBackground(self.n, min(self.n, size))

    source, cache = Source(), BackgroundCache(sample_size=50)
    for _ in range(3):
        cache.get(source)
    assert source.asked == 1
    source.n, source.seq = 200, 8  # a write: asked again, and sampled again (more than a tenth)
    assert cache.get(source)[0].corpus_size == 200 and source.asked == 2
    assert cache.get(source)[0].corpus_size == 200 and source.asked == 2
    source.seq = None  # type: ignore[assignment]
    cache.get(source)
    cache.get(source)
    assert source.asked == 4


# -- on a real dataset -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_queries_outscore_foreign_and_nonsense_ones_on_scifact(minilm) -> None:  # type: ignore[no-untyped-def]
    dataset("scifact")  # skips (CI: fails) when the shared dataset is missing
    dataset("msmarco-5k")
    from finderledge.evaluation import load_beir

    data = load_beir(DATASETS / "scifact", "test")
    queries = list(data.queries.items())[:40]
    gold = {d for q, _ in queries for d, s in data.qrels[q].items() if s > 0}
    rng = np.random.default_rng(0)
    others = [d for d in data.corpus if d not in gold]
    keep = sorted(gold) + [others[i] for i in rng.choice(len(others), 300, replace=False)]
    ledger = FinderLedge(
        embedding=minilm, vector_store="faiss", chunk_size=1_000_000, chunk_overlap=0, env_file=None
    )
    from langchain_core.documents import Document

    ledger.add_documents([Document(page_content=f"{data.corpus[d][0]}\n\n{data.corpus[d][1]}") for d in keep])
    real = [ledger.search(t, k=1)[0].score for _, t in queries]
    msmarco = [json.loads(line)["text"] for line in (DATASETS / "msmarco-5k" / "queries.jsonl").open()][:40]
    foreign = [(r[0].score if (r := ledger.search(t, k=1)) else 0.0) for t in msmarco]
    nonsense = [(r[0].score if (r := ledger.search(t, k=1)) else 0.0) for t in NONSENSE[:2]]
    pairs = [(x > y) + 0.5 * (x == y) for x in real for y in foreign]
    assert sum(pairs) / len(pairs) > 0.85  # AUC of the top-1 score, real vs foreign queries
    assert max(nonsense) < np.median(real) - 0.2
    ledger.close()


def test_the_scores_page_sample_runs(minilm: Any) -> None:
    """docs/scores.md's sample, with the ``ledger`` and ``question`` it refers to."""
    import finderledge

    ledger = FinderLedge(embedding=minilm, show_progress=False)
    ledger.add_texts(
        [
            "To reset your password, open Settings and choose Reset password.",
            "Refunds are processed within five business days.",
        ]
    )
    namespace = run_doc_samples(
        "scores.md", {"ledger": ledger, "question": "zebra quantum violin nebula", "finderledge": finderledge}
    )
    assert namespace["results"] and namespace["answer"] == "I found nothing about that in the documents."
    ledger.close()
