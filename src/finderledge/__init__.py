"""FinderLedge: hybrid (BM25 + vector) retrieval for RAG, with one chunk id across every store.

Quick use::

    from finderledge import FinderLedge
    ledger = FinderLedge("./index")
    ledger.add_document("docs/")
    print(ledger.get_context("What does the warranty cover?"))
"""

from __future__ import annotations

import logging

from .config import Settings
from .context import NO_CONTEXT
from .document_splitter import DocumentSplitter
from .embeddings import EmbeddingModelFactory
from .facade import FinderLedge, IngestReport
from .filters import compile_filter
from .finder import Finder
from .fusion import distribution_based_score_fusion, reciprocal_rank_fusion, relative_score_fusion
from .results import SearchResult
from .retriever import FinderLedgeRetriever

__all__ = [
    "FinderLedge",
    "Finder",
    "FinderLedgeRetriever",
    "SearchResult",
    "IngestReport",
    "Settings",
    "EmbeddingModelFactory",
    "DocumentSplitter",
    "NO_CONTEXT",
    "compile_filter",
    "reciprocal_rank_fusion",
    "relative_score_fusion",
    "distribution_based_score_fusion",
]
__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
