"""One contract every reranker passes (issue 26, "one registry"): each kind registered in
:data:`finderledge.ranking.reranker.RERANKERS`, and each object ``create_reranker`` wraps (a callable, a LangChain
compressor), scores a candidate list the way search and the query strategies rely on.

The contract is tests/helpers/reranker_contract.py; the cross-encoder (a real local model: it loads PyTorch)
passes it in tests/integration/test_reranker.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from registries import built_in_names
from reranker_contract import RerankerContract, word_overlap

from finderledge.errors import ConfigurationError
from finderledge.ranking.reranker import (
    RERANKERS,
    CallableReranker,
    Reranker,
    create_reranker,
    register,
)


class _Compressor(BaseDocumentCompressor):
    """Keeps the documents that share a word with the query, best first (as a LangChain reranker does)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Any = None
    ) -> list[Document]:
        scores = word_overlap(query, documents)
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
        return [documents[i] for i in order]


class TestCallableReranker(RerankerContract):
    def make(self) -> Reranker:
        return create_reranker(word_overlap)  # type: ignore[return-value]


class TestCompressorReranker(RerankerContract):
    def make(self) -> Reranker:
        return create_reranker(_Compressor())  # type: ignore[return-value]


def _word_overlap_kind(name: str, **_: Any) -> Reranker:
    """A reranker kind as a user registers one: ``"test-overlap:<name>"`` builds it."""
    assert name == "word-overlap"
    return CallableReranker(word_overlap)


register("test-overlap", _word_overlap_kind)  # registering an extra name changes nothing for other tests


class TestRegisteredKind(RerankerContract):
    """A kind a user registers is created from ``"<kind>:<name>"`` and keeps the same contract."""

    def make(self) -> Reranker:
        return create_reranker("test-overlap:word-overlap", on_error="raise")  # type: ignore[return-value]


def test_every_registered_kind_has_a_contract_class() -> None:
    covered = {"cross-encoder"}  # tests/integration/test_reranker.py::TestCrossEncoderContract
    assert built_in_names("finderledge.ranking.reranker", "RERANKERS") == covered
    assert "test-overlap" in RERANKERS  # TestRegisteredKind


@pytest.mark.parametrize("on_error", ["warn", "raise"])
def test_an_unknown_kind_is_a_configuration_error_naming_the_setting_and_choices(on_error: str) -> None:
    with pytest.raises(ConfigurationError, match=r"setting 'reranker': expected one of \[.*'cross-encoder'"):
        create_reranker("cohere:rerank-english-v3.0", on_error=on_error)


def test_a_spec_of_another_type_or_a_bad_policy_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="setting 'reranker'"):
        create_reranker(42)
    with pytest.raises(ConfigurationError, match="setting 'reranker_on_error'"):
        create_reranker(word_overlap, on_error="ignore")
    with pytest.raises(ConfigurationError, match="score_scale"):
        CallableReranker(word_overlap, score_scale="percent")  # type: ignore[arg-type]
