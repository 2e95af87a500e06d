"""Adding and removing documents, as the facade offers it (LangChain's names included).

:class:`~finderledge.facade.FinderLedge` inherits these; each checks its arguments and hands the work to its
:class:`~finderledge.ingest.Writer`, then lets adaptive fusion know the corpus moved.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.documents import Document

from .errors import ConfigurationError
from .filters import compile_filter
from .ingest import IngestReport, Writer, documents_with_ids, rechunk, text_documents
from .validation import check_flag, check_mapping, check_patterns, document_key

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Source", "Writing"]

Source = str | os.PathLike | Document | Sequence[str | os.PathLike | Document]


class Writing:
    """The facade's writes: files, folders, texts and Documents in; documents out (all through the writer)."""

    _engine: Engine
    _writer: Writer

    # -- ingest -------------------------------------------------------------------------------------
    def add_document(
        self,
        source: Source,
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: str = "skip",
        prune: bool = False,
        follow_symlinks: bool = False,
        document_id: str | None = None,
        within: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Add a file, a directory (recursive), a LangChain ``Document`` or a list of those (raw text:
        :meth:`add_texts`; a string is always a path, and one that does not exist raises
        :class:`~finderledge.errors.SourceNotFoundError`).

        Returns the ids of the parent documents the input is stored as (already-stored identical
        content included, stored once).  A file whose content changed replaces its older version.
        ``metadata`` is added to every document (any key but ``_finderledge``, which holds FinderLedge's own
        fields).  A ``Document`` with an ``id`` is stored under that id: the same id with other content or
        metadata replaces the stored version.
        ``prune=True`` also removes documents of files that no longer exist under a directory given.
        ``on_error="skip"`` (default) reports files that fail to parse and goes on; ``"raise"`` stops.
        Symlinks met inside a directory are not followed (reported as skipped) unless ``follow_symlinks=True``.
        ``document_id`` (yours, e.g. one per uploaded file) is stored as the metadata key ``document_id`` of
        every parent and chunk of this call, so its pages/rows are filtered, listed and removed together;
        adding under the same ``document_id`` again replaces the parents it no longer has.
        Nothing is stored unless the whole call succeeds; vectors computed before a failure are cached,
        so running the same call again does not embed them twice.
        ``within`` (a scope's base filter: a scoped writer's guard) refuses the call with
        :class:`~finderledge.errors.AccessDeniedError`, nothing written, when a document it would replace,
        remove or store does not match it, whatever id names it (another scope's copy of a file is left alone).
        """
        return self.ingest(
            source,
            metadata,
            include=include,
            exclude=exclude,
            on_error=on_error,
            prune=prune,
            follow_symlinks=follow_symlinks,
            document_id=document_id,
            within=within,
        ).ids

    def add_documents(
        self,
        sources: Iterable[str | os.PathLike[str] | Document],
        metadata: Mapping[str, Any] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Batch form of :meth:`add_document`; ``ids`` (LangChain's argument) gives each Document its id."""
        return self.add_document(documents_with_ids(sources, ids), metadata, **kwargs)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add raw texts (LangChain's name and arguments): one document per text, with its metadata and id.

        Returns one stored id per text, in order; a text without an id gets a content id (adding the same
        text again stores nothing, and both get the id of the one stored).  The same id with other content or metadata replaces that document."""
        # each text as the Document it stands for (a TextItem, read like one: see write_batches.TextItem)
        docs = cast(list[Document], text_documents(texts, metadatas, ids))
        return (
            self.ingest(docs, **kwargs).document_ids if docs else []
        )  # one id per text, as LangChain expects

    def ingest(
        self,
        source: Source,
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: str = "skip",
        prune: bool = False,
        follow_symlinks: bool = False,
        document_id: str | None = None,
        max_chunks: int | None = None,
        within: Mapping[str, Any] | None = None,
    ) -> IngestReport:
        """Like :meth:`add_document` but returns the full :class:`IngestReport`.

        ``max_chunks`` bounds the chunks this call may make: more raise :class:`TooManyChunksError` while
        splitting, before the batch that crosses it is embedded (with ``document_id`` the call is one write,
        so nothing is written); a server bounds each upload's work with it."""
        check_mapping("metadata", metadata)
        check_patterns("include", include)
        check_patterns("exclude", exclude)
        check_flag("prune", prune)
        check_flag("follow_symlinks", follow_symlinks)
        self._engine.vector_store  # noqa: B018 - open the vector index first: a write checkpoints both indexes
        report = self._writer.ingest(
            source,
            metadata,
            include=include,
            exclude=exclude,
            on_error=on_error,
            prune=prune,
            follow_symlinks=follow_symlinks,
            document_id=document_id,
            max_chunks=max_chunks,
            within=compile_filter(within),
        )
        self._engine.recalibrate()
        return report

    def reindex(
        self,
        *,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        chunk_unit: str | None = None,
        chunk_context: bool | None = None,
    ) -> IngestReport:
        """Split every stored document again with these chunk settings (the current ones where not given) and
        record them for the directory: the explicit way to change chunking, since an argument on reopening
        only applies to documents added then.  Unchanged chunk texts keep their vectors (nothing re-embedded);
        ``chunk_context`` switches the title and heading path embedded with each chunk (refused on opening)."""
        return rechunk(self._engine, self._writer, chunk_size, chunk_overlap, chunk_unit, chunk_context)

    # -- removal ------------------------------------------------------------------------------------
    def remove_document(
        self, doc_id: str | os.PathLike[str], *, within: Mapping[str, Any] | None = None
    ) -> list[str]:
        """Remove a parent document (by id), every document of a source path, or every parent of a
        ``document_id``, from every store.

        Returns the removed parent ids.  Raises :class:`~finderledge.errors.DocumentNotFoundError` (a
        ``KeyError``) naming the id when nothing matches; nothing is changed then.  With ``within`` (a scope's
        base filter) only documents it matches are removed, or counted as matching.
        """
        key = document_key(doc_id)
        self._engine.vector_store  # noqa: B018 - opened first, as for a write
        removed = self._writer.remove(key, compile_filter(within))
        self._engine.recalibrate()
        return removed

    def delete(self, ids: Sequence[str], *, within: Mapping[str, Any] | None = None) -> list[str]:
        """Remove documents by id (LangChain's ``delete``): unknown ids are ignored, and so are ids of documents
        ``within`` (a scope's base filter) does not match; returns the ids removed."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ConfigurationError(
                f"delete: ids: expected a list of document ids, got {type(ids).__name__}"
            )
        keys = [document_key(i) for i in ids]
        self._engine.vector_store  # noqa: B018 - opened first, as for a write
        removed = self._writer.delete(keys, compile_filter(within))
        self._engine.recalibrate()
        return removed
