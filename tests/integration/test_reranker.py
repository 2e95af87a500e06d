"""Two-stage retrieval plumbing, with a cross-encoder built locally from the bundled MiniLM weights.

The cross-encoder's classification head is freshly initialised (no pretrained cross-encoder can be
downloaded here), so these tests check that FinderLedge loads a model by path, scores the fused
candidates with it and orders by its scores — not that the scores are good.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from reranker_contract import RerankerContract

from finderledge import FinderLedge, create_reranker
from finderledge.embeddings import default_model_path
from finderledge.ranking.reranker import Reranker

Q = "How long is a password reset link valid?"


@pytest.fixture(scope="module")
def cross_encoder_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    from sentence_transformers import CrossEncoder

    path = tmp_path_factory.mktemp("ce") / "local-cross-encoder"
    CrossEncoder(default_model_path(), num_labels=1, device="cpu").save(str(path))
    return str(path)


@pytest.fixture
def fl(minilm, example_dir: Path):  # type: ignore[no-untyped-def]
    ledger = FinderLedge(embedding=minilm, vector_store="faiss")
    ledger.add_document(example_dir)
    yield ledger
    ledger.close()


def test_cross_encoder_by_path_orders_by_its_scores(
    minilm, example_dir: Path, cross_encoder_path: str
) -> None:  # type: ignore[no-untyped-def]
    from sentence_transformers import CrossEncoder

    fl = FinderLedge(
        embedding=minilm,
        vector_store="faiss",
        reranker=f"cross-encoder:{cross_encoder_path}",
        rerank_candidates=5,
    )
    fl.add_document(example_dir)
    fused = fl.search(Q, k=5, rerank=False)
    results = fl.search(Q, k=3)
    reference = CrossEncoder(cross_encoder_path, device="cpu")
    expected = reference.predict([(Q, r.content) for r in fused])
    order = list(np.argsort(-expected))[:3]
    assert [r.id for r in results] == [fused[i].id for i in order]
    for r, i in zip(results, order):
        assert r.score == pytest.approx(float(expected[i]), abs=1e-4) and 0.0 <= r.score <= 1.0
        assert r.info.get("rerank_score") == pytest.approx(float(expected[i]), abs=1e-4)
        assert r.metadata["_finderledge"]["relevance_score"] == r.score
        assert (
            r.metadata["_finderledge"]["fused_rank"] == i + 1
            and r.metadata["_finderledge"]["fused_score"] == fused[i].score
        )
    assert (
        getattr(fl.reranker, "score_scale", None) == "probability"
    )  # the model applies a sigmoid: kept as is
    fl.close()


def test_cross_encoder_logits_are_shown_in_the_unit_interval(
    fl: FinderLedge, cross_encoder_path: str
) -> None:
    """A cross-encoder that outputs logits (as ms-marco models do): the score is their logistic map, the logit is
    kept as ``rerank_score``, and the retriever and the VectorStore threshold on the same [0, 1] scale."""
    import math
    import warnings

    import torch
    from sentence_transformers import CrossEncoder

    from finderledge.ranking.reranker import CrossEncoderReranker

    def scaled(x: torch.Tensor) -> torch.Tensor:  # an untrained head's logits are tiny: spread them out
        return 400 * x

    fl.reranker = CrossEncoderReranker(cross_encoder_path, activation_fn=scaled)
    fl.rerank_candidates = 6
    fused = fl.search(Q, k=6, rerank=False)
    reference = CrossEncoder(cross_encoder_path, device="cpu", activation_fn=scaled)
    logits = {r.id: float(x) for r, x in zip(fused, reference.predict([(Q, r.content) for r in fused]))}
    assert min(logits.values()) < 0 or max(logits.values()) > 1  # logits, not probabilities
    results = fl.search(Q, k=6)
    assert [r.id for r in results] == sorted(logits, key=lambda i: -logits[i])
    for r in results:
        assert r.info.get("rerank_score") == pytest.approx(logits[r.id], abs=1e-3)
        assert 0.0 <= r.score <= 1.0 and r.score == pytest.approx(1 / (1 + math.exp(-logits[r.id])), abs=1e-6)
    cut = results[2].score
    kept = [r.id for r in results if r.score >= cut]
    assert [r.id for r in fl.search(Q, k=6, score_threshold=cut)] == kept
    assert [d.id for d in fl.as_retriever(k=6, score_threshold=cut).invoke(Q)] == kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # LangChain warns of relevance scores outside [0, 1]
        pairs = fl.as_vectorstore().similarity_search_with_relevance_scores(Q, k=6, score_threshold=cut)
    assert [round(score, 6) for _, score in pairs] == [round(r.score, 6) for r in results if r.score >= cut]
    assert fl.reranker.score_scale == "logit"  # declared by the model's (identity-like) activation


def test_unloadable_model_falls_back_or_raises(
    minilm, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.WARNING, logger="finderledge"):
        fl = FinderLedge(embedding=minilm, reranker=str(tmp_path / "no-such-model"))
    assert fl.reranker is None
    assert "could not be loaded" in caplog.text and "fused order" in caplog.text
    fl.add_texts(["alpha", "beta"])
    assert len(fl.search("alpha", k=2)) == 2
    fl.close()
    with pytest.raises(ValueError, match="reranker"):
        FinderLedge(embedding=minilm, reranker=str(tmp_path / "no-such-model"), reranker_on_error="raise")


class LongestFirst(BaseDocumentCompressor):
    """A user's LangChain compressor: keeps the two longest passages, longest first."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks=None
    ) -> Sequence[Document]:  # type: ignore[no-untyped-def, override]
        return sorted(documents, key=lambda d: -len(d.page_content))[:2]


def test_compressor_and_callable_rerankers(fl: FinderLedge) -> None:
    from finderledge.ranking.reranker import create_reranker

    fl.rerank_candidates = 4  # rerank exactly the fused top 4
    fused = fl.search(Q, k=4, rerank=False)

    fl.reranker = create_reranker(LongestFirst())
    out = fl.search(Q, k=4)
    longest = sorted(fused, key=lambda r: -len(r.content))
    assert [r.id for r in out[:2]] == [r.id for r in longest[:2]]
    assert len(out) == 4  # passages the compressor dropped come last, not lost
    assert [r.score for r in out] == [1.0, 0.5, 0.0, 0.0]  # kept: place 1/n … n/n; dropped: 0

    fl.reranker = create_reranker(lambda query, docs: [float("30 minutes" in d.page_content) for d in docs])
    assert "30 minutes" in fl.search("reset", k=1)[0].content
    fl.reranker = create_reranker(lambda query, docs: [1.0])
    with pytest.raises(ValueError, match="returned 1 scores"):
        fl.search(Q, k=3)
    with pytest.raises(ValueError, match="reranker"):
        create_reranker(42)


class TestCrossEncoderContract(RerankerContract):
    """The contract every reranker keeps (tests/helpers/reranker_contract.py), for the cross-encoder kind: a real
    local model built from the bundled MiniLM weights (its head is freshly initialised: the scores are arbitrary
    but deterministic, which is all the contract asks)."""

    @pytest.fixture
    def reranker(self, cross_encoder_path: str) -> Reranker:
        made = create_reranker(f"cross-encoder:{cross_encoder_path}", on_error="raise")
        assert made is not None
        return made
