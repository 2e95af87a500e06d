"""The parts of an open index as the facade shows them: settings, stores, model, splitter, finder, reranker.

:class:`~finderledge.facade.FinderLedge` inherits these; each reads (or replaces) a part of its
:class:`~finderledge.engine.Engine`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from .config import Settings
    from .document_splitter import DocumentSplitter
    from .engine import Engine
    from .finder import Finder
    from .keyword_store import KeywordStore
    from .reranker import Reranker
    from .vector_stores import VectorStore

__all__ = ["EngineParts"]


class EngineParts:
    """The facade's parts, read from (and, for the model, splitter and reranker, set on) its engine."""

    _engine: Engine

    @property
    def engine(self) -> Engine:
        """The open index's parts (ledger, write lock, replica, model, finder, calibrator, reranker): for tools
        and tests that inspect them; the methods of this class are the supported way to change anything."""
        return self._engine

    @property
    def settings(self) -> Settings:
        """The settings in force (arguments, environment, the directory's recorded ones, defaults)."""
        return self._engine.settings

    @property
    def persist_directory(self) -> Path | None:
        """The persist directory (None: in memory, or Postgres mode)."""
        return self._engine.directory

    @property
    def finder(self) -> Finder:
        """The legs and their fusion."""
        return self._engine.finder

    @property
    def reranker(self) -> Reranker | None:
        """The reranker of the fused top ``rerank_candidates`` (None: none); may be replaced."""
        return self._engine.reranker

    @reranker.setter
    def reranker(self, value: Reranker | None) -> None:
        self._engine.reranker = value

    @property
    def rerank_candidates(self) -> int:
        """How many fused candidates the reranker rescores (the setting ``rerank_candidates``)."""
        return self._engine.settings.rerank_candidates

    @rerank_candidates.setter
    def rerank_candidates(self, value: int) -> None:
        """Change the setting for the searches to come; a bad value raises ``ConfigurationError``."""
        engine = self._engine
        engine.settings = dataclasses.replace(engine.settings, rerank_candidates=value)

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model, created on first use (listing or counting loads none)."""
        return self._engine.embeddings

    @embeddings.setter
    def embeddings(self, value: Embeddings) -> None:
        self._engine.embeddings = value

    @property
    def splitter(self) -> DocumentSplitter:
        """The document splitter, created on first use (a search splits nothing)."""
        return self._engine.splitter

    @splitter.setter
    def splitter(self, value: DocumentSplitter) -> None:
        self._engine.splitter = value

    @property
    def vector_store(self) -> VectorStore:
        """The vector backend's base index, opened on first use (FAISS needs the embedding dimension first).

        Changes made since its last checkpoint may still sit in the replica's overlay; searches see both."""
        return self._engine.vector_store

    @property
    def keyword_store(self) -> KeywordStore:
        """The BM25 index of this process (it follows the ledger's change log)."""
        return self._engine.keyword_store

    def refresh(self) -> int:
        """Apply every change other processes committed; returns the ledger ``seq`` now reflected.

        Searches do this themselves; call it to catch up ahead of time."""
        return self._engine.replica.follow()
