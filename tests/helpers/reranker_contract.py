"""The contract every reranker keeps (issue 26, "one registry"), as a mixin: a test class subclasses
:class:`RerankerContract` and gives ``make`` (or a ``reranker`` fixture). tests/contract/test_reranker_contract.py
runs it for the callable, compressor and registered kinds; tests/integration/test_reranker.py for the
cross-encoder (a real local model: it loads PyTorch)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from langchain_core.documents import Document

from finderledge.ranking.reranker import SCORE_SCALES, Reranker, rerank_documents, unit_score

QUERY = "how long is a refund window"
DOCS = [
    Document(page_content="Refunds are issued within 30 days of purchase."),
    Document(page_content="The warranty covers two years of battery wear."),
    Document(page_content="Passwords are reset from the sign-in page.", metadata={"lang": "en"}),
    Document(page_content="返金は購入から30日以内に申請してください。"),
]


def word_overlap(query: str, documents: Sequence[Document]) -> list[float]:
    """A deterministic relevance: the words a document shares with the query."""
    words = set(query.lower().split())
    return [float(len(words & set(d.page_content.lower().split()))) for d in documents]


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
