"""Leg priors (issue 32): adaptive fusion's per-corpus part says *how much* each leg is worth, from pseudo-queries
whose sentence is taken out of their target chunk, not only whether a leg carries any signal.

Fake embeddings only: a "concept" model that reads two different words as the same concept (a paraphrase),
so a sentence searched for its chunk without that sentence is found by the vector leg and missed by BM25.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from finderledge import FinderLedge
from finderledge.evaluation import evaluate, format_report
from finderledge.keyword_store import KeywordStore
from finderledge.ranking.adaptive import leg_weights
from finderledge.ranking.calibration import (
    MIN_QUERIES,
    PRIOR_MIN,
    Calibration,
    calibrate,
    leg_priors,
    without_sentence,
)

DIM = 256


class ConceptEmbeddings(Embeddings):
    """``alpha<i>`` and ``beta<i>`` are the same concept ``i`` (one dimension each, i < 128); every other word
    adds a little on a hashed dimension of 128-255.  BM25 sees two different words."""

    def _one(self, text: str) -> list[float]:
        v = np.zeros(DIM)
        for word in re.findall(r"\w+", text.lower()):
            m = re.fullmatch(r"(?:alpha|beta)(\d+)", word)
            if m:
                v[int(m.group(1)) % 128] += 1.0
            else:
                v[128 + int(hashlib.md5(word.encode()).hexdigest(), 16) % 128] += 0.2
        n = np.linalg.norm(v)
        return list(v / n) if n else list(v)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def _paraphrasing_corpus(n: int = 120) -> list[str]:
    """Each document says its concept twice, in different words: one sentence with ``alpha<i>``, one with
    ``beta<i>`` (whichever sentence calibration draws, the rest of the chunk holds only the other word)."""
    return [
        f"Record {i} says that alpha{i} was seen near the northern lake this spring. "
        f"Observers later confirmed beta{i} again during the cold months of that year."
        for i in range(n)
    ]


def test_priors_follow_the_held_out_mrr_and_are_bounded() -> None:
    assert leg_priors({"vector": 0.3, "keyword": 0.3}) == {"vector": 1.0, "keyword": 1.0}
    assert leg_priors({"vector": 0.6, "keyword": 0.4}) == {"vector": 1.2, "keyword": 0.8}
    # a leg that finds nothing held out keeps PRIOR_MIN: the gate, not the prior, switches legs off
    assert leg_priors({"vector": 0.9, "keyword": 0.0}) == {
        "vector": 2 * (1 - PRIOR_MIN),
        "keyword": 2 * PRIOR_MIN,
    }
    assert leg_priors({}) == {"vector": 1.0, "keyword": 1.0}  # an old calibration: as before
    assert leg_priors({"vector": 0.0, "keyword": 0.0}) == {"vector": 1.0, "keyword": 1.0}


def test_without_sentence_takes_out_one_copy() -> None:
    assert without_sentence("A b c. Dd e f. A b c.", "A b c.") == "Dd e f. A b c."


def test_calibrate_sets_priors_from_held_out_searches_and_gates_from_copied_ones() -> None:
    queries = [(f"sentence number {i}", f"p{i}") for i in range(MIN_QUERIES)]
    found = {
        "vector": lambda q: [q.replace("sentence number ", "p")],
        "keyword": lambda q: [q.replace("sentence number ", "p")],
    }
    held = {
        "vector": lambda i: [f"p{i}"],  # rank 1
        "keyword": lambda i: ["x", "y", f"p{i}"],  # rank 3
    }
    c = calibrate(queries, found, model_id="m", corpus_size=100, held_out=held)
    g = c.groups["all"]
    assert g.gates == {"vector": 1.0, "keyword": 1.0}
    assert g.held_out_mrr == {"vector": 1.0, "keyword": pytest.approx(1 / 3, abs=1e-4)}
    assert g.priors == {"vector": 1.5, "keyword": 0.5}  # alpha = 0.75, the bound
    assert Calibration.from_json(c.to_json()) == c
    # without held-out legs the priors stay 1 (the gates alone)
    assert calibrate(queries, found, model_id="m", corpus_size=100).groups["all"].priors == {
        "vector": 1.0,
        "keyword": 1.0,
    }


def test_a_version_1_calibration_reads_with_neutral_priors() -> None:
    raw = json.dumps(
        {
            "model_id": "m",
            "corpus_size": 100,
            "seconds": 1.0,
            "version": 1,
            "groups": {
                "all": {
                    "queries": 30,
                    "mrr": {"vector": 0.8, "keyword": 0.9},
                    "gates": {"vector": 1.0, "keyword": 1.0},
                }
            },
        }
    )
    c = Calibration.from_json(raw)
    assert c is not None and c.groups["all"].priors == {"vector": 1.0, "keyword": 1.0}
    assert c.is_stale(100, "m")  # measured again (with priors) after the next write


def test_leg_weights_multiply_gate_prior_and_evidence_share() -> None:
    chosen = leg_weights(
        {"vector": 0.6, "keyword": 0.2},
        {"vector": 1.0, "keyword": 1.0},
        "test",
        {"vector": 1.5, "keyword": 0.5},
    )
    assert chosen.weights == {"vector": pytest.approx(1.5 * 0.75), "keyword": pytest.approx(0.5 * 0.25)}
    assert chosen.priors == {"vector": 1.5, "keyword": 0.5}
    assert "prior 1.50" in chosen.reason and "prior 0.50" in chosen.reason
    plain = leg_weights({"vector": 0.6, "keyword": 0.2}, {"vector": 1.0, "keyword": 1.0}, "test")
    assert plain.weights == {"vector": pytest.approx(0.75), "keyword": pytest.approx(0.25)}


def test_keyword_store_scores_an_unstored_text_as_the_index_would(tmp_path: Path) -> None:
    texts = {f"c{i}": t for i, t in enumerate(_paraphrasing_corpus(40))}
    store = KeywordStore(tmp_path / "kw")
    try:
        store.add(list(texts), list(texts.values()))
        query = "alpha7 was seen near the lake"
        for cid, score in store.search(query, 5):
            assert store.score_text(query, texts[cid]) == pytest.approx(score, rel=1e-9)
        assert store.score_text("alpha7", texts["c7"]) > 0
        store.delete(["c7"])  # a deleted chunk leaves the document frequencies: alpha7 is in no live chunk
        assert store.score_text("alpha7", texts["c7"]) == 0.0
        assert store.score_text(query, "nothing in common") == 0.0
        assert store.score_text("", texts["c1"]) == 0.0
    finally:
        store.close()


def test_a_paraphrasing_corpus_gets_a_vector_prior_visible_in_trace_and_eval(tmp_path: Path) -> None:
    """Copied sentences rate both legs perfect (gates open, as before); held out, BM25 cannot find the chunk
    (its other sentence uses the other word) while the concept model can: the vector leg's prior rises."""
    fl = FinderLedge(
        tmp_path / "ix",
        embedding=ConceptEmbeddings(),
        vector_store="faiss",
        show_progress=False,
        env_file=None,
    )
    try:
        fl.add_texts(_paraphrasing_corpus())
        assert fl.wait_for_calibration(timeout=120)  # the calibration the write made due (in the background)
        calibration = fl.calibration
        assert calibration is not None
        g = calibration.groups["all"]
        assert g.gates == {"vector": 1.0, "keyword": 1.0}
        assert g.held_out_mrr["vector"] > 0.9 and g.held_out_mrr["keyword"] < 0.5
        assert g.priors == {"vector": 2 * (1 - PRIOR_MIN), "keyword": 2 * PRIOR_MIN}
        trace = fl.search("Where was beta42 seen?").trace
        assert trace.priors == g.priors
        assert (
            "prior 1.50" in trace.weights_reason
            and "held out keyword 0.00, vector 1.00" in trace.weights_reason
        )
        questions = tmp_path / "questions.jsonl"
        questions.write_text(
            json.dumps({"question": "Where was beta42 seen?", "gold_sources": ["none"]}) + "\n"
        )
        report = evaluate(questions, ledger=fl, modes=("hybrid",), show_progress=False)
        assert report.settings["calibration"]["all"]["priors"] == g.priors
        printed = format_report(report)
        assert "adaptive fusion, all: pseudo-query MRR@10 keyword 1.00, vector 1.00" in printed
        assert (
            "held out keyword 0.00, vector 1.00" in printed and "priors keyword 0.50, vector 1.50" in printed
        )
    finally:
        fl.close()


def test_a_corpus_where_the_legs_are_alike_keeps_priors_near_one(tmp_path: Path) -> None:
    """No paraphrase: each document's sentences share their rare word, so both legs find held-out targets."""
    texts = [
        f"Record {i} says that alpha{i} was seen near the northern lake this spring. "
        f"Observers later confirmed alpha{i} again during the cold months of that year."
        for i in range(120)
    ]
    fl = FinderLedge(
        tmp_path / "ix",
        embedding=ConceptEmbeddings(),
        vector_store="faiss",
        show_progress=False,
        env_file=None,
    )
    try:
        fl.add_texts(texts)
        assert fl.wait_for_calibration(timeout=120)  # the calibration the write made due (in the background)
        g = fl.calibration.groups["all"]
        assert g.held_out_mrr["keyword"] > 0.9 and g.held_out_mrr["vector"] > 0.9
        assert g.priors["vector"] == pytest.approx(1.0, abs=0.1)
    finally:
        fl.close()


def test_held_out_searches_are_skipped_next_to_a_closed_gate_and_capped() -> None:
    queries = [(f"sentence number {i}", f"p{i}") for i in range(2 * MIN_QUERIES)]
    calls: list[int] = []

    def held(i: int) -> list[str]:
        calls.append(i)
        return [f"p{i}"]

    blind = {"vector": lambda q: ["nothing"], "keyword": lambda q: [q.replace("sentence number ", "p")]}
    closed = calibrate(
        queries, blind, model_id="m", corpus_size=100, held_out={"vector": held, "keyword": held}
    )
    assert closed.groups["all"].gates["vector"] == 0.0 and not calls  # no re-embedding for nothing
    assert closed.groups["all"].priors == {"vector": 1.0, "keyword": 1.0}
    both = {leg: (lambda q: [q.replace("sentence number ", "p")]) for leg in ("vector", "keyword")}
    calibrate(
        queries,
        both,
        model_id="m",
        corpus_size=100,
        held_out={"vector": held, "keyword": held},
        held_out_queries=MIN_QUERIES,
    )
    assert sorted(set(calls)) == list(range(MIN_QUERIES))  # only the first held_out_queries
