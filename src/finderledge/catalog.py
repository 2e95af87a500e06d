"""Reading back what a FinderLedge stores: documents and chunks by id, listings, counts and stats.

A mixin of :class:`~finderledge.facade.FinderLedge` (kept apart so each part of the facade stays small);
every method reads the ledger, the source of truth, never an index.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from .document_loader import safe_path
from .ledger import COMPLETE
from .searching import as_document

if TYPE_CHECKING:
    from .config import Settings
    from .keyword_store import KeywordStore
    from .ledger import Ledger
    from .vector_store import VectorStore

__all__ = ["Catalog"]


class Catalog:
    """``get_document``, ``get_parent_document``, ``get_split_documents``, ``list_documents``, ``list_sources``,
    ``count``, ``stats``."""

    if TYPE_CHECKING:  # provided by FinderLedge
        _ledger: Ledger
        _model_id: str
        persist_directory: Path | None
        settings: Settings

        @property
        def keyword_store(self) -> KeywordStore: ...

        @property
        def vector_store(self) -> VectorStore: ...

    def get_document(self, doc_id: str) -> Document | None:
        """A parent document or a chunk by id (``None`` if unknown)."""
        record = self._ledger.get_document(doc_id)
        if record is not None and record.state == COMPLETE:
            return as_document(record)
        chunk = self._ledger.get_chunk(doc_id)
        if chunk is not None and self._ledger.document_state(chunk.parent_id) == COMPLETE:
            return as_document(chunk)
        return None

    def get_parent_document(self, child_id: str) -> Document | None:
        """The parent of a chunk (``None`` if the chunk is unknown)."""
        chunk = self._ledger.get_chunk(child_id)
        return None if chunk is None else self.get_document(chunk.parent_id)

    def get_split_documents(self, parent_id: str) -> list[Document]:
        """The chunks of a parent, in order."""
        if self._ledger.document_state(parent_id) != COMPLETE:
            return []
        return [as_document(c) for c in self._ledger.chunks_of(parent_id)]

    def list_documents(self, *, source: str | None = None, limit: int | None = None) -> list[Document]:
        """Parent documents in the order they were added (optionally only those of one source)."""
        source = None if source is None else safe_path(source)
        return [as_document(r) for r in self._ledger.list_documents(source=source, limit=limit)]

    def list_sources(self) -> list[str]:
        """Every source (file path or given ``source``) that has documents."""
        return self._ledger.sources()

    def count(self) -> dict[str, int]:
        """``{"documents": …, "chunks": …}`` — parents and chunks stored."""
        counts = self._ledger.counts()
        return {"documents": counts["documents"], "chunks": counts["chunks"]}

    def stats(self) -> dict[str, Any]:
        """Counts per store and the settings in force (for ``finderledge stats``)."""
        return {
            **self.count(),
            "keyword_index_chunks": len(self.keyword_store),
            "vector_index_chunks": len(self.vector_store),
            "embedding_model": self._model_id,
            "persist_directory": str(self.persist_directory) if self.persist_directory else None,
            "settings": self.settings.to_dict(),
        }

    def __len__(self) -> int:
        return self.count()["documents"]
