"""One contract every reranker passes (issue 26, "one registry"): each kind registered in
:data:`finderledge.reranker.RERANKERS`, and each object ``create_reranker`` wraps (a callable, a LangChain
compressor), scores a candidate list the way search and the query strategies rely on.

A reranker's test is a subclass of :class:`RerankerContract` with ``make``; the cross-encoder runs a real local
model built from the bundled MiniLM weights (its head is freshly initialised: the scores are arbitrary but
deterministic, which is all the contract asks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor

from finderledge.errors import ConfigurationError
from finderledge.reranker import (
    RERANKERS,
    SCORE_SCALES,
    CallableReranker,
    Reranker,
    create_reranker,
    register,
    rerank_documents,
    unit_score,
)

QUERY = "how long is a refund window"
DOCS = [
    Document(page_content="Refunds are issued within 30 days of purchase."),
    Document(page_content="The warranty covers two years of battery wear."),
    Document(page_content="Passwords are reset from the sign-in page.", metadata={"lang": "en"}),
    Document(page_content="返金は購入から30日以内に申請してください。"),
]


def _overlap(query: str, documents: Sequence[Document]) -> list[float]:
    """A deterministic relevance: the words a document shares with the query."""
    words = set(query.lower().split())
    return [float(len(words & set(d.page_content.lower().split()))) for d in documents]


class _Compressor(BaseDocumentCompressor):
    """Keeps the documents that share a word with the query, best first (as a LangChain reranker does)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Any = None
    ) -> list[Document]:
        scores = _overlap(query, documents)
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
        return [documents[i] for i in order]


class RerankerContract:
    """Subclass with ``make(self) -> Reranker`` (built through :func:`create_reranker`)."""

    def make(self) -> Reranker:
        raise NotImplementedError

    @pytest.fixture
    def reranker(self) -> Reranker:
        made = self.make()
        assert made is not None
        return made

    def test_is_a_reranker_with_a_known_score_scale(self, reranker: Reranker) -> None:
        assert isinstance(reranker, Reranker)
        assert getattr(reranker, "score_scale", "logit") in SCORE_SCALES

    def test_one_finite_or_dropped_score_per_document(self, reranker: Reranker) -> None:
        scores = reranker.score(QUERY, DOCS)
        assert len(scores) == len(DOCS)
        assert all(isinstance(s, float) and (math.isfinite(s) or s == float("-inf")) for s in scores)

    def test_no_documents_no_scores(self, reranker: Reranker) -> None:
        assert list(reranker.score(QUERY, [])) == []

    def test_deterministic_and_independent_of_metadata(self, reranker: Reranker) -> None:
        first = reranker.score(QUERY, DOCS)
        relabelled = [
            Document(page_content=d.page_content, metadata={"other": i}) for i, d in enumerate(DOCS)
        ]
        assert reranker.score(QUERY, DOCS) == pytest.approx(first)
        assert reranker.score(QUERY, relabelled) == pytest.approx(first)
        assert all(
            d.metadata == o.metadata for d, o in zip(DOCS, [*DOCS])
        )  # the caller's documents untouched

    def test_ranked_best_first_and_shown_in_the_unit_interval(self, reranker: Reranker) -> None:
        ranked = rerank_documents(reranker, QUERY, DOCS)
        assert sorted(i for i, _, _ in ranked) == list(range(len(DOCS)))
        raws = [raw for _, raw, _ in ranked]
        shown = [s for _, _, s in ranked]
        assert raws == sorted(raws, reverse=True) and shown == sorted(shown, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in shown)
        scale = getattr(reranker, "score_scale", "logit")
        assert shown == [unit_score(r, scale) for r in raws]


class TestCallableReranker(RerankerContract):
    def make(self) -> Reranker:
        return create_reranker(_overlap)  # type: ignore[return-value]


class TestCompressorReranker(RerankerContract):
    def make(self) -> Reranker:
        return create_reranker(_Compressor())  # type: ignore[return-value]


def _word_overlap_kind(name: str, **_: Any) -> Reranker:
    """A reranker kind as a user registers one: ``"test-overlap:<name>"`` builds it."""
    assert name == "word-overlap"
    return CallableReranker(_overlap)


register("test-overlap", _word_overlap_kind)  # registering an extra name changes nothing for other tests


class TestRegisteredKind(RerankerContract):
    """A kind a user registers is created from ``"<kind>:<name>"`` and keeps the same contract."""

    def make(self) -> Reranker:
        return create_reranker("test-overlap:word-overlap", on_error="raise")  # type: ignore[return-value]


@pytest.fixture(scope="module")
def cross_encoder_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    from sentence_transformers import CrossEncoder

    from finderledge.embeddings import default_model_path

    path = tmp_path_factory.mktemp("ce") / "local-cross-encoder"
    CrossEncoder(default_model_path(), num_labels=1, device="cpu").save(str(path))
    return str(path)


class TestCrossEncoder(RerankerContract):
    @pytest.fixture
    def reranker(self, cross_encoder_path: str) -> Reranker:
        return create_reranker(f"cross-encoder:{cross_encoder_path}", on_error="raise")  # type: ignore[return-value]


def test_every_registered_kind_has_a_contract_class() -> None:
    covered = {"cross-encoder": TestCrossEncoder, "test-overlap": TestRegisteredKind}
    assert "cross-encoder" in RERANKERS and set(RERANKERS.names()) <= set(covered)


@pytest.mark.parametrize("on_error", ["warn", "raise"])
def test_an_unknown_kind_is_a_configuration_error_naming_the_setting_and_choices(on_error: str) -> None:
    with pytest.raises(ConfigurationError, match=r"setting 'reranker': expected one of \[.*'cross-encoder'"):
        create_reranker("cohere:rerank-english-v3.0", on_error=on_error)


def test_a_spec_of_another_type_or_a_bad_policy_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="setting 'reranker'"):
        create_reranker(42)
    with pytest.raises(ConfigurationError, match="setting 'reranker_on_error'"):
        create_reranker(_overlap, on_error="ignore")
    with pytest.raises(ConfigurationError, match="score_scale"):
        CallableReranker(_overlap, score_scale="percent")  # type: ignore[arg-type]
