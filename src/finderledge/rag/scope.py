"""A view of a FinderLedge narrowed by a base filter, e.g. one tenant's documents; read-only unless made writable.

``alice = fl.scoped({"user_id": "alice"})`` gives ``search``, ``get_context``, ``answer``, ``as_retriever``,
``list_documents`` and ``count`` that AND every filter a caller passes with the base filter: a caller can
narrow the view, never widen or remove it (``filter=None`` keeps it).  The base filter is fixed when the scope
is built, and so is that of the retrievers it makes.  ``fl.scoped(..., writable=True)`` also adds, replaces
and removes documents, only inside the scope: what it stores carries the base filter's fields, and it never
replaces or removes another scope's document, whatever id it names (:class:`~finderledge.errors.
AccessDeniedError`).  What the view may do is one :class:`~finderledge.access.AccessPolicy` (``.policy``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from ..access import AccessPolicy, CheckedFiles
from ..errors import AccessDeniedError, ConfigurationError
from ..filters import and_filters

if TYPE_CHECKING:  # the retriever imports langchain_core.retrievers (and langsmith): only when one is built
    from ..ingest.write import IngestReport
    from ..results import SearchResults
    from .answer import Answer
    from .protocols import SearchableLedger
    from .retriever import FinderLedgeRetriever

__all__ = ["Scope"]


class Scope:
    """``search``/``get_context``/``as_retriever`` of ``ledger`` with ``base_filter`` always applied, and its
    writes when ``writable`` (files only under ``folders`` when given, each within ``max_file_bytes``)."""

    def __init__(
        self,
        ledger: SearchableLedger,
        base_filter: Mapping[str, Any] | None = None,
        *,
        writable: bool = False,
        folders: Sequence[str | os.PathLike[str]] | None = None,
        max_file_bytes: int | None = None,
        policy: AccessPolicy | None = None,
    ) -> None:
        """``policy`` (instead of the other arguments): an entry point's own, e.g. the MCP server's."""
        if policy is None:
            if not base_filter or not isinstance(base_filter, Mapping):
                raise ConfigurationError(
                    "scoped: expected a non-empty base filter such as {'user_id': 'alice'}"
                )
            policy = AccessPolicy(
                base_filter,
                writable=writable,
                folders=folders,
                max_file_bytes=max_file_bytes,
                label=f"the scoped view {dict(base_filter)}",
            )
        self.ledger = ledger
        self.policy = policy

    @property
    def base_filter(self) -> dict[str, Any]:
        """The scope's filter (a copy: it cannot be changed after construction)."""
        return self.policy.scope or {}

    @property
    def writable(self) -> bool:
        """Whether this view adds and removes documents (inside its scope)."""
        return self.policy.writable

    def _narrow(self, flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return self.policy.narrow(flt)

    # -- reads ----------------------------------------------------------------------------------------
    def search(self, query: str, *, filter: Mapping[str, Any] | None = None, **options: Any) -> SearchResults:
        """:meth:`FinderLedge.search` within the scope."""
        return self.ledger.search(query, filter=self._narrow(filter), **options)

    def get_context(self, query: str, *, filter: Mapping[str, Any] | None = None, **options: Any) -> str:
        """:meth:`FinderLedge.get_context` within the scope."""
        return self.ledger.get_context(query, filter=self._narrow(filter), **options)

    def answer(
        self, question: str, llm: Any = None, *, filter: Mapping[str, Any] | None = None, **options: Any
    ) -> Answer:
        """:meth:`FinderLedge.answer` within the scope: only the scope's documents are cited."""
        # SearchableLedger cannot name Answer or FinderLedgeRetriever: rag.answer imports it, rag.retriever too
        # (through strategies), so naming them there would be an import cycle
        answer: Answer = self.ledger.answer(question, llm, filter=self._narrow(filter), **options)
        return answer

    def as_retriever(self, **options: Any) -> FinderLedgeRetriever:
        """A retriever whose base filter is this scope's (AND-ed with any ``filter`` given here)."""
        search_kwargs = dict(options.pop("search_kwargs", None) or {})
        flt = and_filters(options.pop("filter", None), search_kwargs.pop("filter", None))
        retriever: FinderLedgeRetriever = self.ledger.as_retriever(
            filter=self._narrow(flt), search_kwargs=search_kwargs, **options
        )
        return retriever

    def list_documents(self, *, filter: Mapping[str, Any] | None = None, **options: Any) -> list[Document]:
        """:meth:`FinderLedge.list_documents` within the scope."""
        owner: Any = self.ledger
        docs: list[Document] = owner.list_documents(filter=self._narrow(filter), **options)
        return docs

    def count(self, filter: Mapping[str, Any] | None = None) -> dict[str, int]:
        """:meth:`FinderLedge.count` within the scope."""
        owner: Any = self.ledger
        counts: dict[str, int] = owner.count(self._narrow(filter))
        return counts

    # -- writes (writable=True) -----------------------------------------------------------------------
    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **options: Any,
    ) -> list[str]:
        """:meth:`FinderLedge.add_texts` inside the scope: each text's metadata carries the base filter's fields;
        an id naming another scope's document is refused (nothing stored)."""
        self.policy.check_write("add_texts")
        texts = list(texts) if not isinstance(texts, str) else texts
        if metadatas is None:
            stamped = [self.policy.write_metadata(None) for _ in texts]
        else:
            stamped = [self.policy.write_metadata(md) for md in metadatas]
        return self.ledger.add_texts(texts, stamped, ids=ids, within=self.policy.scope, **options)

    def ingest(self, source: Any, metadata: Mapping[str, Any] | None = None, **options: Any) -> IngestReport:
        """:meth:`FinderLedge.ingest` inside the scope (files checked by the policy: folders, sizes)."""
        self.policy.check_write("add_document")
        if self.policy.folders is not None and options.get("follow_symlinks"):
            raise AccessDeniedError(f"add_document: {self.policy.label} never follows symbolic links")
        from ..document_loader.loader import opening_with

        seen: CheckedFiles = {}  # what the check let through: the only files the loader opens (folders set)
        if isinstance(source, (list, tuple)):
            source = [
                self.policy.check_path(s, "add_document", seen=seen) if _is_path(s) else s for s in source
            ]
        elif _is_path(source):  # the checked real path is what is read
            source = self.policy.check_path(source, "add_document", seen=seen)
        if self.policy.max_chunks is not None:
            options.setdefault("max_chunks", self.policy.max_chunks)
        owner: Any = self.ledger
        opening = (
            opening_with(self.policy.opener(seen, "add_document"))
            if self.policy.folders is not None
            else nullcontext()
        )
        with opening:  # a path swapped between the check and the read is refused, never read
            report: IngestReport = owner.ingest(
                source, self.policy.write_metadata(metadata), within=self.policy.scope, **options
            )
        return report

    def add_document(
        self, source: Any, metadata: Mapping[str, Any] | None = None, **options: Any
    ) -> list[str]:
        """:meth:`FinderLedge.add_document` inside the scope; returns the stored parent ids."""
        return self.ingest(source, metadata, **options).ids

    def remove_document(self, doc_id: str | os.PathLike[str]) -> list[str]:
        """:meth:`FinderLedge.remove_document` inside the scope: another scope's documents are never removed
        (``DocumentNotFoundError`` when the scope has none of that id, source or ``document_id``)."""
        self.policy.check_write("remove_document")
        owner: Any = self.ledger
        removed: list[str] = owner.remove_document(doc_id, within=self.policy.scope)
        return removed

    def delete(self, ids: Sequence[str]) -> list[str]:
        """:meth:`FinderLedge.delete` inside the scope: ids of other scopes' documents are ignored, as unknown
        ones are."""
        self.policy.check_write("delete")
        return self.ledger.delete(ids, within=self.policy.scope)


def _is_path(item: Any) -> bool:
    return isinstance(item, (str, os.PathLike))
