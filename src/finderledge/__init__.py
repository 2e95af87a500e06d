"""FinderLedge: hybrid (BM25 + vector) retrieval for RAG, with one chunk id across every store.

Quick use::

    from finderledge import FinderLedge
    ledger = FinderLedge("./index")
    ledger.add_document("docs/")
    context = ledger.get_context("What does the warranty cover?")

Names are imported lazily, so ``import finderledge`` (and ``finderledge.keyword_store`` on its own)
does not pay for LangChain, Chroma or torch until they are used.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AccessPolicy": "access",
    "AccessDeniedError": "errors",
    "Answer": "answer",
    "AnswerPrompts": "answer",
    "AnswerSource": "answer",
    "FinderLedge": "facade",
    "IngestReport": "facade",
    "Finder": "finder",
    "FinderLedgeRetriever": "retriever",
    "Scope": "scope",
    "SearchResult": "results",
    "SearchResults": "results",
    "SearchTrace": "results",
    "FinderLedgeError": "errors",
    "ConfigurationError": "errors",
    "DocumentNotFoundError": "errors",
    "IncompatibleIndexError": "errors",
    "IndexCorruptError": "errors",
    "LedgerCorruptError": "errors",
    "LockTimeoutError": "errors",
    "LoadError": "errors",
    "SourceNotFoundError": "errors",
    "StorageFullError": "errors",
    "UnsafePathError": "errors",
    "FinderLedgeVectorStore": "langchain_vectorstore",
    "FinderLedgeTranslator": "self_query",
    "Settings": "config",
    "EmbeddingModelFactory": "embeddings",
    "DocumentSplitter": "document_splitter",
    "DocumentLoader": "document_loader",
    "KeywordStore": "keyword_store",
    "NO_CONTEXT": "context",
    "compile_filter": "filters",
    "create_reranker": "reranker",
    "make_chat_model": "llms",
    "reciprocal_rank_fusion": "fusion",
    "relative_score_fusion": "fusion",
    "distribution_based_score_fusion": "fusion",
}
__all__ = [
    "NO_CONTEXT",
    "AccessDeniedError",
    "AccessPolicy",
    "Answer",
    "AnswerPrompts",
    "AnswerSource",
    "ConfigurationError",
    "DocumentLoader",
    "DocumentNotFoundError",
    "DocumentSplitter",
    "EmbeddingModelFactory",
    "Finder",
    "FinderLedge",
    "FinderLedgeError",
    "FinderLedgeRetriever",
    "FinderLedgeTranslator",
    "FinderLedgeVectorStore",
    "IncompatibleIndexError",
    "IndexCorruptError",
    "IngestReport",
    "KeywordStore",
    "LedgerCorruptError",
    "LoadError",
    "LockTimeoutError",
    "Scope",
    "SearchResult",
    "SearchResults",
    "SearchTrace",
    "Settings",
    "SourceNotFoundError",
    "StorageFullError",
    "UnsafePathError",
    "compile_filter",
    "create_reranker",
    "distribution_based_score_fusion",
    "make_chat_model",
    "reciprocal_rank_fusion",
    "relative_score_fusion",
]

if TYPE_CHECKING:
    from .access import AccessPolicy
    from .answer import Answer, AnswerPrompts, AnswerSource
    from .config import Settings
    from .context import NO_CONTEXT
    from .document_loader import DocumentLoader
    from .document_splitter import DocumentSplitter
    from .embeddings import EmbeddingModelFactory
    from .errors import (
        AccessDeniedError,
        ConfigurationError,
        DocumentNotFoundError,
        FinderLedgeError,
        IncompatibleIndexError,
        IndexCorruptError,
        LedgerCorruptError,
        LoadError,
        LockTimeoutError,
        SourceNotFoundError,
        StorageFullError,
        UnsafePathError,
    )
    from .facade import FinderLedge, IngestReport
    from .filters import compile_filter
    from .finder import Finder
    from .fusion import distribution_based_score_fusion, reciprocal_rank_fusion, relative_score_fusion
    from .keyword_store import KeywordStore
    from .langchain_vectorstore import FinderLedgeVectorStore
    from .llms import make_chat_model
    from .reranker import create_reranker
    from .results import SearchResult, SearchResults, SearchTrace
    from .retriever import FinderLedgeRetriever
    from .scope import Scope
    from .self_query import FinderLedgeTranslator


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'finderledge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)


logging.getLogger(__name__).addHandler(logging.NullHandler())
