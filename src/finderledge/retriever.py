"""A LangChain ``BaseRetriever`` over a FinderLedge, for LCEL chains (``invoke``, ``ainvoke``, ``batch``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

if TYPE_CHECKING:
    from .facade import FinderLedge

__all__ = ["FinderLedgeRetriever"]


class FinderLedgeRetriever(BaseRetriever):
    """Returns FinderLedge search results as Documents; ``search_kwargs`` are defaults that a call can override.

    ``retriever.invoke("質問", k=3, filter={"lang": "ja"})`` overrides ``k`` and ``filter`` for that call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    ledger: Any = Field(exclude=True)
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = {**self.search_kwargs, **kwargs}
        finder: FinderLedge = self.ledger
        return [r.document for r in finder.search(query, **options)]
