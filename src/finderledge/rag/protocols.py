"""What the views over a FinderLedge use of it, as a Protocol: the retriever, the scope, the LangChain vector
store, query strategies and answers take a :class:`SearchableLedger`, so none of them imports the facade
(which makes them), and the import graph has no cycle.

:class:`~finderledge.facade.FinderLedge` is the one implementation; a test may pass any object with these
members.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings

    from ..config import Settings
    from ..results import SearchResults

__all__ = ["SearchableLedger"]


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
    def get_document(self) -> Callable[..., Document | None]: ...

    @property
    def add_texts(self) -> Callable[..., list[str]]: ...

    @property
    def delete(self) -> Callable[..., list[str]]: ...
