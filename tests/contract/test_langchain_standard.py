"""LangChain's own standard test suites (``langchain-tests``) run against FinderLedge's retriever and VectorStore."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests

from finderledge import EmbeddingModelFactory, FinderLedge
from finderledge.rag.retriever import FinderLedgeRetriever
from finderledge.rag.vectorstore import FinderLedgeVectorStore

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
    fl.add_texts(TEXTS)
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


class TestVectorStoreStandard(VectorStoreIntegrationTests):
    """LangChain's VectorStore suite (sync and async) over an in-memory FinderLedge, hybrid search."""

    @pytest.fixture
    def vectorstore(self) -> Iterator[FinderLedgeVectorStore]:
        fl = FinderLedge(embedding=self.get_embeddings(), show_progress=False)
        try:
            yield fl.as_vectorstore()
        finally:
            fl.close()


class TestVectorStoreStandardPersistentFaiss(VectorStoreIntegrationTests):
    """The same suite over a persistent FAISS directory, searching in vector mode only."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:
        fl = FinderLedge(
            tmp_path / "vs",
            vector_store="faiss",
            search_mode="vector",
            embedding=self.get_embeddings(),
            show_progress=False,
        )
        try:
            yield fl.as_vectorstore()
        finally:
            fl.close()
