"""Reading stored documents back, as the facade offers it (see :mod:`finderledge.ledgers.catalog`).

:class:`~finderledge.facade.FinderLedge` inherits these; each asks its :class:`~finderledge.ledgers.catalog.Catalog`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from .filters import MetadataFilter
    from .ledgers.catalog import Catalog

__all__ = ["ReadingBack"]


class ReadingBack:
    """Documents, chunks, sources and counts of the index, read from the ledger."""

    _catalog: Catalog

    def get_document(self, doc_id: str) -> Document | None:
        """A parent document or a chunk by id (``None`` if unknown)."""
        return self._catalog.get_document(doc_id)

    def get_parent_document(self, child_id: str) -> Document | None:
        """The parent of a chunk (``None`` if the chunk is unknown)."""
        return self._catalog.get_parent_document(child_id)

    def get_split_documents(self, parent_id: str) -> list[Document]:
        """The chunks of a parent, in order."""
        return self._catalog.get_split_documents(parent_id)

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
        return self._catalog.list_documents(source=source, filter=filter, offset=offset, limit=limit)

    def list_document_ids(
        self, *, filter: MetadataFilter | None = None, offset: int = 0, limit: int | None = None
    ) -> list[str]:
        """The application document ids (``document_id=`` of :meth:`add_document`) of the parents matching
        ``filter``, each once, in the order first added; ``offset``/``limit`` page through them."""
        return self._catalog.list_document_ids(filter=filter, offset=offset, limit=limit)

    def list_sources(self) -> list[str]:
        """Every source (file path or given ``source``) that has documents."""
        return self._catalog.list_sources()

    def count(self, filter: MetadataFilter | None = None) -> dict[str, int]:
        """``{"documents": …, "chunks": …}`` — parents and chunks stored (those of parents matching ``filter``)."""
        return self._catalog.count(filter)

    def stats(self) -> dict[str, Any]:
        """Counts per store and the settings in force (for ``finderledge stats``)."""
        return self._catalog.stats()

    def gc(self) -> dict[str, int]:
        """Empty the embedding cache of vectors no stored chunk needs (see :meth:`Catalog.gc
        <finderledge.ledgers.catalog.Catalog.gc>`); returns how many were removed and the size left."""
        return self._catalog.gc()

    def __len__(self) -> int:
        return self._catalog.count()["documents"]
