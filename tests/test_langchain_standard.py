"""LangChain's own standard test suite (``langchain-tests``) run against FinderLedge's retriever."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from langchain_tests.integration_tests import RetrieversIntegrationTests

from finderledge import EmbeddingModelFactory, FinderLedge
from finderledge.retriever import FinderLedgeRetriever

TEXTS = [
    "FinderLedge combines BM25 keyword search with vector search.",
    "Hybrid search fuses the rankings of both legs.",
    "A password reset link is valid for 30 minutes.",
    "Refunds are processed within five business days.",
    "FinderLedge は日本語の文書も検索できます。",
]


@lru_cache(maxsize=1)
def _ledger() -> FinderLedge:
    fl = FinderLedge(embedding=EmbeddingModelFactory.create_embeddings(), show_progress=False)
    fl.add_document(TEXTS)
    return fl


class TestRetrieverByConstructor(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[FinderLedgeRetriever]:
        return FinderLedgeRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"ledger": _ledger()}

    @property
    def retriever_query_example(self) -> str:
        return "how does hybrid search work?"


class TestRetrieverByAsRetriever(TestRetrieverByConstructor):
    @property
    def retriever_constructor(self) -> Any:
        return lambda ledger, **options: ledger.as_retriever(**options)


class TestRetrieverWithLangChainKwargs(TestRetrieverByConstructor):
    @property
    def retriever_constructor(self) -> Any:
        def build(ledger: FinderLedge, **options: Any) -> FinderLedgeRetriever:
            return ledger.as_retriever(search_type="similarity", search_kwargs=options)

        return build
