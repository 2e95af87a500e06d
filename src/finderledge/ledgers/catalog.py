"""Reading back what a FinderLedge stores: documents and chunks by id, listings, counts and stats.

:class:`Catalog` reads an :class:`~finderledge.engine.Engine`'s ledger, the source of truth, never an index;
:class:`~finderledge.facade.FinderLedge`'s reading methods delegate to it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from ..document_loader import safe_path
from ..errors import ConfigurationError
from ..filters import MetadataFilter, compile_filter
from ..metadata import DOCUMENT_ID
from ..ranking.search import as_document
from ..sources import resolve_source, resolve_source_filter
from . import COMPLETE

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["Catalog"]


logger = logging.getLogger(__name__)


class Catalog:
    """``get_document``, ``get_parent_document``, ``get_split_documents``, ``list_documents``, ``list_sources``,
    ``count``, ``stats``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def get_document(self, doc_id: str) -> Document | None:
        """A parent document or a chunk by id (``None`` if unknown)."""
        record = self._engine.ledger.get_document(doc_id)
        if record is not None and record.state == COMPLETE:
            return as_document(record)
        chunk = self._engine.ledger.get_chunk(doc_id)
        if chunk is not None and self._engine.ledger.document_state(chunk.parent_id) == COMPLETE:
            return as_document(chunk)
        return None

    def get_parent_document(self, child_id: str) -> Document | None:
        """The parent of a chunk (``None`` if the chunk is unknown)."""
        chunk = self._engine.ledger.get_chunk(child_id)
        return None if chunk is None else self.get_document(chunk.parent_id)

    def get_split_documents(self, parent_id: str) -> list[Document]:
        """The chunks of a parent, in order."""
        if self._engine.ledger.document_state(parent_id) != COMPLETE:
            return []
        return [as_document(c) for c in self._engine.ledger.chunks_of(parent_id)]

    def list_documents(
        self,
        *,
        source: str | None = None,
        filter: MetadataFilter | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Document]:
        """Parent documents in the order they were added: of one ``source``, matching ``filter`` (the search
        filter language, on the parent's metadata), the first ``offset`` skipped, at most ``limit``."""
        source = None if source is None else safe_path(resolve_source(source))
        offset = _count_argument("offset", offset, 0)
        limit = None if limit is None else _count_argument("limit", limit, 0)
        records = self._engine.ledger.list_documents(
            source=source, where=compile_filter(resolve_source_filter(filter)), offset=offset, limit=limit
        )
        return [as_document(r) for r in records]

    def list_document_ids(
        self, *, filter: MetadataFilter | None = None, offset: int = 0, limit: int | None = None
    ) -> list[str]:
        """The application document ids (``document_id=`` of :meth:`add_document`) of the parents matching
        ``filter``, each once, in the order first added; ``offset``/``limit`` page through them."""
        offset = _count_argument("offset", offset, 0)
        limit = None if limit is None else _count_argument("limit", limit, 0)
        pred = compile_filter(resolve_source_filter(filter))
        ids = list(
            dict.fromkeys(
                md[DOCUMENT_ID]
                for _, md in self._engine.ledger.document_metadata()
                if isinstance(md.get(DOCUMENT_ID), str) and (pred is None or pred(md))
            )
        )
        return ids[offset:] if limit is None else ids[offset : offset + limit]

    def list_sources(self) -> list[str]:
        """Every source (file path or given ``source``) that has documents."""
        return self._engine.ledger.sources()

    def count(self, filter: MetadataFilter | None = None) -> dict[str, int]:
        """``{"documents": …, "chunks": …}`` — parents and chunks stored (those of parents matching ``filter``)."""
        if filter is None:
            counts = self._engine.ledger.counts()
            return {"documents": counts["documents"], "chunks": counts["chunks"]}
        ids = self._engine.ledger.document_ids(where=compile_filter(resolve_source_filter(filter)))
        return {"documents": len(ids), "chunks": self._engine.ledger.chunk_count(ids)}

    def stats(self) -> dict[str, Any]:
        """Counts per store and the settings in force (for ``finderledge stats``)."""
        return {
            **self.count(),
            "keyword_index_chunks": len(self._engine.keyword_store),
            "vector_index_chunks": len(self._engine.vector_store),
            "embedding_model": self._engine.model_id,
            "embedding_cache": self._engine.ledger.embedding_cache_size(),
            "persist_directory": str(self._engine.directory) if self._engine.directory else None,
            "settings": self._engine.settings.to_dict(),
        }

    def gc(self) -> dict[str, int]:
        """Empty the embedding cache: stored chunks hold their own vectors, so what it keeps are vectors of
        writes that failed or were interrupted (or of other models).  Returns how many were removed and the
        size left.  An ingest running elsewhere at the same time loses only its resume-after-crash shortcut."""
        with self._engine.write_lock.hold("pruning the embedding cache"):
            removed = self._engine.ledger.prune_embedding_cache()
        size = self._engine.ledger.embedding_cache_size()
        logger.info(
            "gc: removed %d cached vectors; %d left (%d bytes)", removed, size["entries"], size["bytes"]
        )
        return {"removed": removed, **size}


def _count_argument(name: str, value: object, minimum: int) -> int:
    """``value`` as a whole number of at least ``minimum``, or :class:`ConfigurationError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name}: expected a whole number >= {minimum}, got {value!r}")
    return value
