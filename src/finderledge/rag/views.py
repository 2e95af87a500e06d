"""What a FinderLedge hands to prompts and LangChain: a cited context, a retriever, a vector store, a scope.

Functions of a :class:`~finderledge.rag.protocols.SearchableLedger` (a FinderLedge), which the facade uses as
its methods; each view searches through the ledger's public ``search``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic
from langchain_core.documents import Document

from ..errors import ConfigurationError
from ..results import SearchResult
from ..validation import check_positive_int
from .context import DEFAULT_TEMPLATE, Citation, check_format, format_context
from .protocols import SearchableLedger
from .scope import Scope

if TYPE_CHECKING:  # the retriever imports langchain_core.retrievers (and langsmith): only when one is built
    from .retriever import FinderLedgeRetriever
    from .vectorstore import FinderLedgeVectorStore

__all__ = ["as_retriever", "as_vectorstore", "get_context", "scoped"]


def get_context(
    ledger: SearchableLedger,
    query: str | None = None,
    *,
    k: int | None = None,
    search_mode: str | None = None,
    filter: Mapping[str, Any] | None = None,
    return_parents: bool = False,
    max_chars: int | None = None,
    results: Sequence[SearchResult | Document] | None = None,
    start: int = 1,
    citation: Citation = None,
    template: str = DEFAULT_TEMPLATE,
    score_threshold: float | None = None,
    strategy: Any = None,
    llm: Any = None,
    strategy_on_error: str = "fallback",
) -> str:
    """A prompt-ready string: ``[1] (source: …)`` and the passage, for each result of ``query``.

    ``results=`` formats results you already have (``search`` output or retriever Documents) without
    searching again; ``start``, ``citation`` and ``template`` set the layout (see
    :func:`~finderledge.rag.context.format_context`).  When nothing matches it returns
    :data:`~finderledge.rag.context.NO_CONTEXT` (``"[no relevant context found]"``), never an empty string.
    ``strategy``/``llm`` search through a query strategy (see :meth:`FinderLedge.search`).
    """
    check_positive_int("max_chars", max_chars)
    check_format(start=start, citation=citation, template=template)
    if (query is None) == (results is None):
        raise ConfigurationError("get_context: pass a query or results (results you already have), not both")
    if results is None:
        assert query is not None  # exactly one of query and results, checked above
        results = ledger.search(
            query,
            k=k,
            search_mode=search_mode,
            filter=filter,  # type: ignore[arg-type]
            return_parents=return_parents,
            score_threshold=score_threshold,
            strategy=strategy,
            llm=llm,
            strategy_on_error=strategy_on_error,
        )
    else:
        options = {
            "k": k,
            "search_mode": search_mode,
            "filter": filter,
            "return_parents": return_parents or None,
            "score_threshold": score_threshold,
        }
        for name, value in options.items():
            if value is not None:
                raise ConfigurationError(
                    f"get_context: {name!r} applies to a search and cannot be combined with "
                    "results (they are formatted as given)"
                )
    return format_context(results, max_chars=max_chars, start=start, citation=citation, template=template)


def as_retriever(ledger: SearchableLedger, **options: Any) -> FinderLedgeRetriever:
    """A LangChain ``BaseRetriever``: FinderLedge's search options (``k``, ``search_mode``, ``filter`` …) and/or
    LangChain's ``search_type``/``search_kwargs``; ``filter`` is a base filter every call is narrowed by."""
    try:
        from .retriever import FinderLedgeRetriever

        return FinderLedgeRetriever(ledger=ledger, **options)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigurationError(f"as_retriever: {problems}") from None


def as_vectorstore(
    ledger: SearchableLedger, *, base_filter: Mapping[str, Any] | None = None
) -> FinderLedgeVectorStore:
    """This ledger as a LangChain ``VectorStore`` (for ``ParentDocumentRetriever``, ``SelfQueryRetriever`` …);
    ``base_filter`` pins a tenant: AND-ed with every search's filter, and ``get_by_ids``/``delete``/adds see
    and accept only documents it matches."""
    from .vectorstore import FinderLedgeVectorStore

    return FinderLedgeVectorStore(ledger, base_filter=dict(base_filter) if base_filter else None)


def scoped(
    ledger: SearchableLedger,
    base_filter: Mapping[str, Any],
    *,
    writable: bool = False,
    folders: Sequence[str | os.PathLike[str]] | None = None,
    max_file_bytes: int | None = None,
) -> Scope:
    """A view whose searches, contexts and retrievers always apply ``base_filter`` (e.g. a tenant): callers'
    filters narrow it and can never remove it.  Read-only unless ``writable=True``: then its adds carry the base
    filter's fields and it never replaces or removes another scope's document; ``folders`` (when given) are
    the only ones it reads files from, each at most ``max_file_bytes`` (see :class:`~finderledge.rag.scope.Scope`)."""
    return Scope(ledger, base_filter, writable=writable, folders=folders, max_file_bytes=max_file_bytes)
