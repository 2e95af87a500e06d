"""What the views over a FinderLedge use of it, as a Protocol: the retriever, the scope, the LangChain vector
store, query strategies and answers take a :class:`SearchableLedger`, so none of them imports the facade
(which makes them), and the import graph has no cycle.

The one view that makes a FinderLedge itself, LangChain's ``FinderLedgeVectorStore.from_texts`` (given only
settings), opens it with :func:`new_ledger`: the facade gives its class here when it is imported
(:func:`provide_ledger_class`), so the store never imports it, not even by name.

:class:`~finderledge.facade.FinderLedge` is the one implementation; a test may pass any object with these
members.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from ..config import Settings
    from ..results import SearchResults

__all__ = ["SearchableLedger", "new_ledger", "provide_ledger_class"]

#: what :func:`new_ledger` opens (``FinderLedge``, once :mod:`finderledge.facade` is imported)
_ledger_class: list[Callable[..., SearchableLedger]] = []


@runtime_checkable
class SearchableLedger(Protocol):
    """A FinderLedge as its views see it: settings, reranking, the model and the public search-side methods
    (each one's signature is :class:`~finderledge.facade.FinderLedge`'s)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def reranker(self) -> Any: ...

    @property
    def rerank_candidates(self) -> int: ...

    @property
    def embeddings(self) -> Embeddings: ...

    @property
    def search(self) -> Callable[..., SearchResults]: ...

    @property
    def get_context(self) -> Callable[..., str]: ...

    @property
    def answer(self) -> Callable[..., Any]: ...

    @property
    def aanswer(self) -> Callable[..., Any]: ...

    @property
    def as_retriever(self) -> Callable[..., Any]: ...

    @property
    def get_document(self) -> Callable[..., Any]: ...

    @property
    def add_texts(self) -> Callable[..., list[str]]: ...

    @property
    def delete(self) -> Callable[..., list[str]]: ...


def provide_ledger_class(ledger_class: Callable[..., SearchableLedger]) -> None:
    """Make :func:`new_ledger` open ledgers with ``ledger_class``: :mod:`finderledge.facade` gives
    ``FinderLedge`` when it is imported."""
    _ledger_class[:] = [ledger_class]


def new_ledger(**settings: Any) -> SearchableLedger:
    """A new FinderLedge opened with ``settings`` (its keyword arguments), for a view that must make one;
    :class:`ConfigurationError` when no facade was imported in this process."""
    if not _ledger_class:
        raise ConfigurationError(
            "opening a FinderLedge needs the facade: import it first (from finderledge import FinderLedge)"
        )
    return _ledger_class[0](**settings)
