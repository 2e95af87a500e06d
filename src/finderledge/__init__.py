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
    "Answer": "rag.answer",
    "AnswerPrompts": "rag.answer",
    "AnswerSource": "rag.answer",
    "FinderLedge": "facade",
    "IngestReport": "facade",
    "Finder": "ranking.finder",
    "FinderLedgeRetriever": "rag.retriever",
    "Scope": "rag.scope",
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
    "FinderLedgeVectorStore": "rag.vectorstore",
    "FinderLedgeTranslator": "rag.self_query",
    "Settings": "config",
    "EmbeddingModelFactory": "embeddings",
    "DocumentSplitter": "ingest.splitter",
    "DocumentLoader": "document_loader",
    "KeywordStore": "keyword_store",
    "NO_CONTEXT": "rag.context",
    "compile_filter": "filters",
    "create_reranker": "ranking.reranker",
    "make_chat_model": "rag.llms",
    "reciprocal_rank_fusion": "ranking.fusion",
    "relative_score_fusion": "ranking.fusion",
    "distribution_based_score_fusion": "ranking.fusion",
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
    from .config import Settings
    from .document_loader import DocumentLoader
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
    from .ingest.splitter import DocumentSplitter
    from .keyword_store import KeywordStore
    from .rag.answer import Answer, AnswerPrompts, AnswerSource
    from .rag.context import NO_CONTEXT
    from .rag.llms import make_chat_model
    from .rag.retriever import FinderLedgeRetriever
    from .rag.scope import Scope
    from .rag.self_query import FinderLedgeTranslator
    from .rag.vectorstore import FinderLedgeVectorStore
    from .ranking.finder import Finder
    from .ranking.fusion import distribution_based_score_fusion, reciprocal_rank_fusion, relative_score_fusion
    from .ranking.reranker import create_reranker
    from .results import SearchResult, SearchResults, SearchTrace


# names whose use needs another module imported first: FinderLedgeVectorStore.from_texts opens a FinderLedge,
# whose class the facade gives when it is imported (the store never imports the facade)
_IMPORTED_WITH = {"FinderLedgeVectorStore": "facade"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'finderledge' has no attribute {name!r}")
    if name in _IMPORTED_WITH:
        importlib.import_module(f".{_IMPORTED_WITH[name]}", __name__)
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)


logging.getLogger(__name__).addHandler(logging.NullHandler())
