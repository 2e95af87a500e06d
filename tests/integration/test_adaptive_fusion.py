"""Adaptive fusion (issue 13): leg gates calibrated on the corpus, per-query evidence weights, explicit weights
obeyed, and the two failures the issue reports reproduced.

Failure 1 (a strong dense leg next to a weak keyword leg) is reproduced on the fusion functions with lists of
that shape; failure 2 (an English-only model nobody named, on Japanese text) on real jaquad-dev paragraphs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from paths import (
    DATASETS,
    dataset,
)

import finderledge.ranking.calibration as calibration_module
from finderledge import FinderLedge
from finderledge.evaluation import ndcg_at_k
from finderledge.ranking.adaptive import evidence_fusion, leg_weights, top_evidence
from finderledge.ranking.calibration import (
    MIN_QUERIES,
    Calibration,
    GroupCompetence,
    LedgerCalibrator,
    gate,
    pseudo_queries,
    query_count,
    script_group,
)
from finderledge.ranking.fusion import ANY_SCRIPT, reciprocal_rank_fusion, relative_score_fusion


class Anonymous(Embeddings):
    """A model FinderLedge cannot recognise by name (a user's own wrapper): no model name attribute at all."""

    def __init__(self, inner: Embeddings) -> None:
        self._inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)


# -- calibration pieces --------------------------------------------------------------------------------------
def test_gate_is_off_at_a_quarter_and_full_from_a_half() -> None:
    assert [gate(r) for r in (0.0, 0.25, 0.375, 0.5, 0.9, 3.0)] == [0.0, 0.0, 0.5, 1.0, 1.0, 1.0]


def test_script_groups() -> None:
    assert script_group("How long is a reset link valid?") == "latin"
    assert script_group("東京は日本の首都です。") == "cjk"  # Han and kana together
    assert script_group("ソウルは한국의 수도") == "hangul"
    assert script_group("12 + 3") == "none"


def test_pseudo_queries_are_one_fitting_sentence_per_document_the_same_every_time() -> None:
    chunks = [
        (
            "c1",
            "p1",
            "Title\n\nShort. This sentence has enough words to be searched for. Another one that also fits here.",
        ),
        ("c2", "p1", "The same parent again has a fine sentence of several words in it."),
        ("c3", "p2", "東京は日本の首都であり、人口が最も多い都市です。大阪は西日本の経済の中心です。短い。"),
        ("c4", "p3", "no"),  # nothing that fits
        ("c5", "p4", "A chunk that is one single sentence of enough words finds itself."),  # tells nothing
    ]
    first = pseudo_queries(chunks, 10)
    assert first == pseudo_queries(chunks, 10)  # deterministic (seeded by the chunk id)
    assert [p for _, p in first] == ["p1", "p2"]  # one per parent; p3 has no sentence
    assert first[0][0] in (
        "This sentence has enough words to be searched for.",
        "Another one that also fits here.",
    )
    assert first[1][0] in (
        "東京は日本の首都であり、人口が最も多い都市です。",
        "大阪は西日本の経済の中心です。",
    )
    assert len(pseudo_queries(chunks, 1)) == 1


def test_query_count_scales_with_the_corpus_and_skips_small_ones() -> None:
    assert query_count(50) == 0 and query_count(99) == 0  # 0.2 x chunks below 20: too few to decide
    assert query_count(100) == MIN_QUERIES and query_count(500) == 100 and query_count(100_000) == 200


def test_competence_closes_a_leg_that_finds_little() -> None:
    n = MIN_QUERIES
    weak_vector = GroupCompetence.of({"vector": [0.1] * n, "keyword": [0.9] * n})
    assert weak_vector.gates == {"vector": 0.0, "keyword": 1.0}
    both = GroupCompetence.of({"vector": [0.7] * n, "keyword": [0.9] * n})
    assert both.gates == {"vector": 1.0, "keyword": 1.0}
    assert GroupCompetence.of({"vector": [0.0] * 5, "keyword": [1.0] * 5}).gates == {
        "vector": 1.0,
        "keyword": 1.0,
    }


def test_calibration_round_trips_and_knows_when_it_is_stale(caplog: pytest.LogCaptureFixture) -> None:
    c = Calibration(
        "m",
        1000,
        1.5,
        {"all": GroupCompetence(40, {"vector": 0.1, "keyword": 0.8}, {"vector": 0.0, "keyword": 1.0})},
    )
    assert Calibration.from_json(c.to_json()) == c
    assert (
        not c.is_stale(1200, "m") and c.is_stale(1300, "m") and c.is_stale(700, "m") and c.is_stale(1000, "x")
    )
    with caplog.at_level(logging.WARNING, logger="finderledge.ranking.calibration"):
        assert Calibration.from_json('{"groups": 3}') is None
    assert "unreadable" in caplog.text
    # a query in a script group that was not calibrated on its own takes the corpus's gates
    assert c.competence_for("日本語の質問") == ("all", c.groups["all"])


# -- failure 1: a strong dense leg, a weak keyword leg -------------------------------------------------------
def test_a_weak_legs_top_hit_no_longer_outranks_the_strong_legs() -> None:
    """The shape of the entity-search failure: the vector leg finds ``a`` far above its background; BM25 matches
    a common word in other documents, at 5 % of its attainable score.  Min-max gives BM25's noise full weight."""
    vector = [("a", 0.80), ("b", 0.60), ("c", 0.55), ("d", 0.52), ("e", 0.50)]
    keyword = [("c", 2.0), ("d", 1.9), ("f", 1.8)]
    old = relative_score_fusion({"vector": vector, "keyword": keyword})
    assert old[0].id == "c"  # the failure: the weak leg's top hit wins
    evidence = top_evidence({"vector": vector, "keyword": keyword}, vector_baseline=0.3, keyword_ceiling=40.0)
    assert evidence["vector"] == pytest.approx(0.5 / 0.7) and evidence["keyword"] == pytest.approx(0.05)
    chosen = leg_weights(evidence, {}, "not calibrated")
    assert chosen.weights["vector"] > 0.9 and "share" in chosen.reason
    new = evidence_fusion(
        {"vector": vector, "keyword": keyword}, chosen.weights, vector_baseline=0.3, keyword_ceiling=40.0
    )
    assert [h.id for h in new[:3]] == ["a", "b", "c"]  # the strong leg's order, the weak leg only breaks ties


def test_evidence_fusion_keeps_a_single_legs_order_and_treats_missing_hits_by_list_kind() -> None:
    vector = [("a", 0.9), ("b", 0.8)]
    keyword = [("b", 10.0), ("c", 5.0)]
    w = {"vector": 1.0, "keyword": 1.0}
    # exhaustive keyword list: "a" (not listed) gets keyword evidence 0; otherwise the last listed score's
    exhaustive = {
        h.id: h.score
        for h in evidence_fusion(
            {"vector": vector, "keyword": keyword},
            w,
            vector_baseline=0.5,
            keyword_ceiling=20.0,
            exhaustive=("keyword",),
        )
    }
    cut = {
        h.id: h.score
        for h in evidence_fusion(
            {"vector": vector, "keyword": keyword}, w, vector_baseline=0.5, keyword_ceiling=20.0
        )
    }
    assert exhaustive["a"] == pytest.approx(0.8) and cut["a"] == pytest.approx(0.8 + 0.25)
    assert cut["c"] == pytest.approx(0.6 + 0.25)  # vector: the last listed cosine's evidence
    assert [
        h.id for h in evidence_fusion({"keyword": keyword}, w, vector_baseline=0.5, keyword_ceiling=20.0)
    ] == ["b", "c"]


# -- in the library --------------------------------------------------------------------------------------------
def _texts(n: int) -> list[str]:
    topics = [
        "solar panels convert sunlight into electricity",
        "the river flooded the valley after the storm",
        "a violin has four strings tuned in fifths",
        "proteins fold into shapes that set their function",
        "the central bank raised interest rates again",
        "glaciers carve deep valleys over millennia",
    ]
    return [
        f"Note {i} about {topics[i % 6].split()[1]}. In note {i} we learn that {topics[i % 6]}. "
        f"It also records observation number {i * 7 % 13} of the series."
        for i in range(n)
    ]


def test_calibration_runs_after_writes_that_move_the_corpus_and_is_traced(
    tmp_path: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        calibration_module, "QUIET_S", 60.0
    )  # no pause within the bulk build, whatever the load
    fl = FinderLedge(
        tmp_path / "ix", embedding=minilm, vector_store="faiss", show_progress=False, env_file=None
    )
    try:
        fl.add_texts(_texts(60))
        assert fl.calibration is None  # too small a corpus to measure: gates stay open
        results = fl.search("solar electricity")
        assert results.trace.fusion_method == "adaptive" and "not calibrated" in results.trace.weights_reason
        fl.add_texts(_texts(100)[60:])
        fl.add_texts(_texts(150)[100:])
        assert fl.calibration is None  # measured lazily: not after each write of a bulk build
        assert fl.search("solar electricity").trace.calibration_pending  # a search does not wait for it
        assert fl.wait_for_calibration(timeout=300)  # once, in the background, on the corpus as it is then
        first = fl.calibration
        assert first is not None and first.corpus_size == 150 and first.groups["all"].queries == 30
        fl.add_texts(_texts(170)[150:])  # +13 %: the gates stand
        assert fl.wait_for_calibration(timeout=300)
        assert fl.calibration == first
        fl.add_texts(_texts(200)[170:])  # +33 %: measured again
        assert fl.wait_for_calibration(timeout=300)
        trace = fl.search("How do solar panels make electricity?").trace
        assert set(trace.gates) == {"vector", "keyword"} and set(trace.evidence) == {"vector", "keyword"}
        assert fl.calibration.corpus_size == 200
        assert "calibrated on 40 pseudo-queries" in trace.weights_reason
        assert sum(trace.weights.values()) == pytest.approx(1.0)  # both gates open: the evidence shares
        fl.delete(sorted({r.parent_id for r in fl.search("note", search_mode="keyword", k=200)})[:120])
    finally:
        fl.close()  # settles what this process wrote
    reopened = FinderLedge(tmp_path / "ix", embedding=minilm, show_progress=False, env_file=None)
    try:
        assert reopened.calibration is None  # 80 chunks left: below the minimum, old gates dropped
    finally:
        reopened.close()


def test_explicit_weights_and_fusions_are_obeyed(tmp_path: Path, minilm) -> None:
    texts = _texts(150)
    fixed = FinderLedge(
        embedding=minilm, vector_store="faiss", show_progress=False, env_file=None, keyword_weight=0.5
    )
    try:
        fixed.add_texts(texts)
        assert fixed.calibration is None  # fixed weights: nothing to calibrate
        trace = fixed.search("violin strings").trace
        assert (
            trace.weights == {"vector": 1.0, "keyword": 0.5} and trace.weights_reason == "set by the caller"
        )
        assert trace.gates == {}
    finally:
        fixed.close()
    for fusion, reference in (("rrf", reciprocal_rank_fusion), ("relative_score", relative_score_fusion)):
        fl = FinderLedge(
            embedding=minilm, vector_store="faiss", show_progress=False, env_file=None, fusion=fusion
        )
        try:
            fl.add_texts(texts)
            query = "interest rates of the central bank"
            results = fl.search(query, k=5)
            vector = fl.finder.search(query, mode="vector", k=100)
            keyword = fl.finder.search(query, mode="keyword", k=100)
            legs = {
                "vector": [(h.id, h.score) for h in vector],
                "keyword": [(h.id, h.score) for h in keyword],
            }
            expected = (
                reference(legs)
                if fusion == "rrf"
                else reference(legs, floors={"keyword": 0.0} if len(keyword) < 100 else None)
            )
            assert [r.id for r in results] == [h.id for h in expected[:5]]
            assert results.trace.fusion_method == fusion and results.trace.weights == {
                "vector": 1.0,
                "keyword": 1.0,
            }
        finally:
            fl.close()


def test_a_failed_calibration_never_fails_the_write(
    minilm, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: Any, *, force: bool = False, partition: str | None = None) -> None:
        raise RuntimeError("embedding service down")

    monkeypatch.setattr(LedgerCalibrator, "refresh", broken)
    fl = FinderLedge(embedding=minilm, vector_store="faiss", show_progress=False, env_file=None)
    try:
        with caplog.at_level(logging.WARNING, logger="finderledge"):
            ids = fl.add_texts(_texts(120))
            assert fl.search("glaciers valleys", k=1)
            assert fl.wait_for_calibration(timeout=300)  # measured in the background: failed, logged
        assert len(ids) == 120 and "embedding service down" in caplog.text
    finally:
        fl.close()


def test_an_anonymous_wrapper_turns_the_script_check_off(minilm) -> None:
    fl = FinderLedge(embedding=Anonymous(minilm), show_progress=False, env_file=None)
    try:
        assert (
            fl.finder.vector_scripts == ANY_SCRIPT
        )  # what benchmarks/bench_adaptive.py's "anon" column uses
    finally:
        fl.close()


# -- failure 2: an unnamed English-only model on Japanese (and English) text ----------------------------------
def _rows(name: str, n: int) -> list[dict[str, Any]]:
    rows = []
    with open(DATASETS / name / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) == n:
                break
    return rows


def test_an_unnamed_english_model_no_longer_drags_japanese_below_bm25(tmp_path: Path, minilm) -> None:
    dataset("jaquad-dev")  # skips (CI: fails) when the shared dataset is missing
    dataset("scifact")  # skips (CI: fails) when the shared dataset is missing
    ja, en = _rows("jaquad-dev", 150), _rows("scifact", 150)
    texts = [f"{r['title']}\n\n{r['text']}" for r in ja + en]
    metas = [{"beir_id": r["_id"]} for r in ja + en]
    wanted = {r["_id"] for r in ja}
    qrels: dict[str, set[str]] = {}
    for line in (DATASETS / "jaquad-dev" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        if doc in wanted:
            qrels.setdefault(qid, set()).add(doc)
    queries = {}
    with open(DATASETS / "jaquad-dev" / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if q["_id"] in qrels and len(queries) < 80:
                queries[q["_id"]] = q["text"]

    directory = tmp_path / "mixed"
    fl = FinderLedge(
        directory,
        embedding=Anonymous(minilm),
        vector_store="faiss",
        show_progress=False,
        env_file=None,
        chunk_size=100_000,
        chunk_overlap=0,
    )
    try:
        fl.add_texts(texts, metas)
        assert fl.wait_for_calibration(timeout=600)  # the calibration the write made due (in the background)
        calibration = fl.calibration
        assert calibration is not None and {"all", "cjk", "latin"} <= set(calibration.groups)
        assert calibration.groups["cjk"].gates["vector"] == 0.0  # it finds nothing from a Japanese sentence
        assert calibration.groups["latin"].gates == {"vector": 1.0, "keyword": 1.0}  # English: both legs work

        def mean_ndcg(f: FinderLedge, mode: str) -> float:
            total = 0.0
            for qid, text in queries.items():
                found = [str(r.metadata["beir_id"]) for r in f.search(text, search_mode=mode, k=10)]
                total += ndcg_at_k(found, {d: 1 for d in qrels[qid]})
            return total / len(queries)

        hybrid, keyword = mean_ndcg(fl, "hybrid"), mean_ndcg(fl, "keyword")
        trace = fl.search(next(iter(queries.values()))).trace
        assert trace.gates["vector"] == 0.0 and "cjk-script" in trace.weights_reason
    finally:
        fl.close()
    old = FinderLedge(
        directory, embedding=Anonymous(minilm), show_progress=False, env_file=None, fusion="relative_score"
    )
    try:
        previous = mean_ndcg(old, "hybrid")
    finally:
        old.close()
    # the reported failure (hybrid below BM25 alone; 0.788 vs 0.948 on all of jaquad-dev) and its fix
    assert previous < keyword - 0.005 <= hybrid, (previous, keyword, hybrid)
