"""FinderLedge as a LangChain ``VectorStore``, for components that take one (``ParentDocumentRetriever``,
``SelfQueryRetriever``, ``MultiQueryRetriever`` over ``as_retriever()`` …).

A document added here is one FinderLedge parent (split into chunks as usual) stored under the caller's
id (``ids=`` or ``Document.id``; a content id otherwise).  Searches run FinderLedge's search (hybrid by
default) and return each chunk as a ``Document`` whose ``id`` is its document's id and whose metadata is
exactly what the caller stored; scores are FinderLedge's relevance in [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from .errors import ConfigurationError
from .filters import and_filters
from .metadata import info_of, user_metadata
from .results import SearchResult

if TYPE_CHECKING:
    from .facade import FinderLedge

__all__ = ["FinderLedgeVectorStore"]


class FinderLedgeVectorStore(VectorStore):
    """``FinderLedgeVectorStore(fl)`` or ``fl.as_vectorstore()``: LangChain's vector-store interface over ``fl``.

    Search keyword arguments are FinderLedge's (``filter``, ``search_mode``, ``candidate_k``, ``rerank``,
    ``score_threshold``); ``base_filter`` (e.g. a tenant) is AND-ed with every call's filter.
    """

    def __init__(self, ledger: FinderLedge, *, base_filter: dict[str, Any] | None = None) -> None:
        from .facade import FinderLedge

        if not isinstance(ledger, FinderLedge):
            raise ConfigurationError(f"ledger: expected a FinderLedge, got {type(ledger).__name__}")
        self.ledger = ledger
        self.base_filter = dict(base_filter) if base_filter else None

    @property
    def embeddings(self) -> Embeddings:
        return self.ledger.embeddings  # type: ignore[no-any-return]

    # -- writing ------------------------------------------------------------------------------------
    def add_texts(self, texts: Iterable[str], metadatas: list[dict[str, Any]] | None = None, *,
                  ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Store each text as one document (under ``ids[i]`` when given); returns the ids in order."""
        return self.ledger.add_texts(texts, metadatas, ids=ids, **kwargs)

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store each Document under ``ids[i]``, else its ``id``, else a content id; the inputs are not changed."""
        ids = kwargs.pop("ids", None)
        if ids is None and any(d.id for d in documents):
            ids = [d.id for d in documents]
        return self.add_texts([d.page_content for d in documents], [d.metadata for d in documents], ids=ids,
                              **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Remove documents by id; ids that are not stored are ignored (LangChain's contract)."""
        if ids is None or kwargs:
            raise ConfigurationError("delete: expected ids=[...] and no other argument (deleting everything is "
                                     "not offered; remove the persist directory instead)")
        self.ledger.delete(list(ids))
        return True

    # -- reading ------------------------------------------------------------------------------------
    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents among ``ids``, in that order (unknown ids are left out)."""
        out = []
        for doc_id in ids:
            doc = self.ledger.get_document(doc_id)
            if doc is not None and info_of(doc.metadata).get("is_parent"):
                out.append(Document(page_content=doc.page_content, metadata=user_metadata(doc.metadata), id=doc.id))
        return out

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """FinderLedge's best ``k`` chunks with their relevance in [0, 1] (higher is better)."""
        if self.base_filter:
            kwargs["filter"] = and_filters(self.base_filter, kwargs.get("filter"))
        return [(_plain(r), r.score) for r in self.ledger.search(query, k=k, **kwargs)]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda score: score  # already a relevance in [0, 1]

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict[str, Any]] | None = None,
                   *, ids: list[str] | None = None, **kwargs: Any) -> FinderLedgeVectorStore:
        """A new FinderLedge (``kwargs``: its settings, e.g. ``persist_directory``) holding ``texts``."""
        from .facade import FinderLedge

        store = cls(FinderLedge(embedding=embedding, **kwargs))
        if texts:
            store.add_texts(texts, metadatas, ids=ids)
        return store


def _plain(result: SearchResult) -> Document:
    """A result as LangChain components expect it: the document's id, the caller's metadata only."""
    return Document(page_content=result.content, metadata=user_metadata(result.metadata), id=result.parent_id)
