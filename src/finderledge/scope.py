"""A read-only view of a FinderLedge narrowed by a base filter, e.g. one tenant's documents.

``alice = fl.scoped({"user_id": "alice"})`` gives ``search``, ``get_context``, ``answer`` and ``as_retriever`` that
AND every filter a caller passes with the base filter: a caller can narrow the view, never widen or
remove it (``filter=None`` keeps it).  The base filter is fixed when the scope is built, and so is that
of the retrievers it makes.  Writes go through the FinderLedge itself.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .filters import and_filters, compile_filter

if TYPE_CHECKING:  # the retriever imports langchain_core.retrievers (and langsmith): only when one is built
    from .answer import Answer
    from .protocols import SearchableLedger
    from .results import SearchResults
    from .retriever import FinderLedgeRetriever

__all__ = ["Scope"]


class Scope:
    """``search``/``get_context``/``as_retriever`` of ``ledger`` with ``base_filter`` always applied."""

    def __init__(self, ledger: SearchableLedger, base_filter: Mapping[str, Any]) -> None:
        if compile_filter(base_filter) is None:
            raise ConfigurationError("scoped: expected a non-empty base filter such as {'user_id': 'alice'}")
        self.ledger = ledger
        self._base_filter = copy.deepcopy(dict(base_filter))

    @property
    def base_filter(self) -> dict[str, Any]:
        """The scope's filter (a copy: it cannot be changed after construction)."""
        return copy.deepcopy(self._base_filter)

    def _narrow(self, flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return and_filters(copy.deepcopy(self._base_filter), dict(flt) if flt else None)

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
        return self.ledger.answer(question, llm, filter=self._narrow(filter), **options)

    def as_retriever(self, **options: Any) -> FinderLedgeRetriever:
        """A retriever whose base filter is this scope's (AND-ed with any ``filter`` given here)."""
        search_kwargs = dict(options.pop("search_kwargs", None) or {})
        flt = and_filters(options.pop("filter", None), search_kwargs.pop("filter", None))
        return self.ledger.as_retriever(filter=self._narrow(flt), search_kwargs=search_kwargs, **options)
