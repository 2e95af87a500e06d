"""FinderLedge as a LangChain ``VectorStore``, for components that take one (``ParentDocumentRetriever``,
``SelfQueryRetriever``, ``MultiQueryRetriever`` over ``as_retriever()`` …).

A document added here is one FinderLedge parent (split into chunks as usual) stored under the caller's
id (``ids=`` or ``Document.id``; a content id otherwise).  Searches run FinderLedge's search (hybrid by
default) and return each chunk as a ``Document`` whose ``id`` is its document's id and whose metadata is
exactly what the caller stored; scores are FinderLedge's relevance in [0, 1].

With a ``base_filter`` (e.g. one tenant) the store is pinned to the documents that filter accepts, for every
operation: searches AND it with their filter; ``get_by_ids`` and ``delete`` see only accepted documents
(others are treated as unknown ids); adds refuse metadata it would not accept, refuse an id held by a
document it does not accept, and derive content ids from the base filter too, so two tenants adding the
same text get two documents instead of one replacing the other.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from ..access import AccessPolicy
from ..engine import Engine
from ..errors import ConfigurationError
from ..filters import compile_filter, filter_key, matches
from ..ledgers import content_id
from ..metadata import DOCUMENT_ID, info_of, normalize_metadata, user_metadata
from ..results import SearchResult
from ..validation import check_parallel, check_texts, document_key
from .protocols import SearchableLedger, new_ledger

__all__ = ["FinderLedgeVectorStore"]


class FinderLedgeVectorStore(VectorStore):
    """``FinderLedgeVectorStore(fl)`` or ``fl.as_vectorstore()``: LangChain's vector-store interface over ``fl``.

    Search keyword arguments are FinderLedge's (``filter``, ``search_mode``, ``candidate_k``, ``rerank``,
    ``score_threshold``).  ``base_filter`` (e.g. a tenant) pins the store: every search's filter is AND-ed with
    it, reads and deletes see only documents it accepts and adds must satisfy it (see the module docstring).
    It is fixed when the store is built.
    """

    def __init__(self, ledger: SearchableLedger, *, base_filter: Mapping[str, Any] | None = None) -> None:
        if not isinstance(getattr(ledger, "engine", None), Engine):  # a FinderLedge (a subclass, a wrapper)
            raise ConfigurationError(f"ledger: expected a FinderLedge, got {type(ledger).__name__}")
        self.ledger = ledger
        self._base_filter = copy.deepcopy(dict(base_filter)) if base_filter else None
        self._accepts = compile_filter(self._base_filter)  # validated now, not at the first search
        self._policy = AccessPolicy(self._base_filter, writable=True, folders=None, label="this vector store")

    @property
    def base_filter(self) -> dict[str, Any] | None:
        """The filter every operation is pinned to (a copy: it cannot be changed after construction)."""
        return copy.deepcopy(self._base_filter)

    @property
    def embeddings(self) -> Embeddings:
        return self.ledger.embeddings  # type: ignore[no-any-return]

    def _visible(self, doc_id: str) -> Document | None:
        """The stored parent ``doc_id`` if it exists and the base filter accepts it, else ``None``."""
        doc = self.ledger.get_document(doc_id)
        if doc is None or not info_of(doc.metadata).get("is_parent"):
            return None
        if self._accepts is not None and not self._accepts(user_metadata(doc.metadata)):
            return None
        return doc

    # -- writing ------------------------------------------------------------------------------------
    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store each text as one document (under ``ids[i]`` when given); returns the ids in order."""
        if self._accepts is None:
            return self.ledger.add_texts(texts, metadatas, ids=ids, **kwargs)
        texts = check_texts(texts)
        given_metadatas = check_parallel("metadatas", metadatas, len(texts))
        given_ids = check_parallel("ids", ids, len(texts))
        if kwargs.get(DOCUMENT_ID) is not None:
            raise ConfigurationError(
                f"add_texts: {DOCUMENT_ID}= replaces every stored document with that "
                "document id, which may lie outside this store's base filter; give ids= instead"
            )
        extra = normalize_metadata(kwargs.get("metadata") or {}, "metadata argument")
        final_ids: list[str] = []
        for i, text in enumerate(texts):
            md = {
                **normalize_metadata(
                    user_metadata((given_metadatas[i] if given_metadatas else None) or {}), f"metadatas[{i}]"
                ),
                **extra,
            }
            if not self._accepts(md):
                fields = ", ".join(repr(f) for f in _failing_fields(self._base_filter or {}, md))
                raise ConfigurationError(
                    f"add_texts: metadatas[{i}] field(s) {fields} do not satisfy this store's "
                    f"base filter {self._base_filter!r}: a document added here must be one "
                    f"its searches can return"
                )
            chosen = given_ids[i] if given_ids and given_ids[i] is not None else None
            final_ids.append(
                chosen
                if chosen is not None
                else content_id("scoped", filter_key(self._base_filter), str(md.get("source") or ""), text)
            )
        for doc_id in dict.fromkeys(final_ids):
            if self.ledger.get_document(doc_id) is not None and self._visible(doc_id) is None:
                raise ConfigurationError(
                    f"add_texts: id {doc_id!r} is taken by a document outside this store's "
                    "base filter; choose another id"
                )
        # checked again by the writer under its lock (within=): no other writer slips a document in between
        return self.ledger.add_texts(
            texts, given_metadatas, ids=final_ids, within=self._base_filter, **kwargs
        )

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store each Document under ``ids[i]``, else its ``id``, else a content id; the inputs are not changed."""
        ids = kwargs.pop("ids", None)
        if ids is None and any(d.id for d in documents):
            ids = [d.id for d in documents]
        return self.add_texts(
            [d.page_content for d in documents], [d.metadata for d in documents], ids=ids, **kwargs
        )

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Remove documents by id; ids that are not stored (or, with a base filter, that it does not accept)
        are ignored (LangChain's contract)."""
        if ids is None or kwargs:
            raise ConfigurationError(
                "delete: expected ids=[...] and no other argument (deleting everything is "
                "not offered; remove the persist directory instead)"
            )
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ConfigurationError(
                f"delete: ids: expected a list of document ids, got {type(ids).__name__}"
            )
        keys = [document_key(i) for i in ids]
        if self._accepts is not None:
            keys = [k for k in keys if self._visible(k) is not None]
        if keys:
            self.ledger.delete(keys, within=self._base_filter)
        return True

    # -- reading ------------------------------------------------------------------------------------
    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents among ``ids``, in that order (unknown ids, and with a base filter the ids of
        documents it does not accept, are left out)."""
        out = []
        for doc_id in ids:
            doc = self._visible(doc_id)
            if doc is not None:
                out.append(
                    Document(page_content=doc.page_content, metadata=user_metadata(doc.metadata), id=doc.id)
                )
        return out

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """FinderLedge's best ``k`` chunks with their relevance in [0, 1] (higher is better)."""
        if self._base_filter:  # the access policy's narrowing: the base filter's values do not count
            kwargs["filter"] = self._policy.narrow(kwargs.get("filter"))
        return [(_plain(r), r.score) for r in self.ledger.search(query, k=k, **kwargs)]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def max_marginal_relevance_search(
        self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        """The best ``k`` chunks that do not repeat each other, chosen among ``fetch_k`` fused candidates
        (FinderLedge's ``search(mmr=True)``: the chunks' stored vectors measure redundancy)."""
        if self._base_filter:  # the access policy's narrowing: the base filter's values do not count
            kwargs["filter"] = self._policy.narrow(kwargs.get("filter"))
        results = self.ledger.search(
            query, k=k, mmr=True, fetch_k=max(fetch_k, k), lambda_mult=lambda_mult, **kwargs
        )
        return [_plain(r) for r in results]

    async def amax_marginal_relevance_search(
        self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search` in a worker thread."""
        return await asyncio.to_thread(
            self.max_marginal_relevance_search, query, k, fetch_k, lambda_mult, **kwargs
        )

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda score: score  # already a relevance in [0, 1]

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> FinderLedgeVectorStore:
        """A new FinderLedge (``kwargs``: its settings, e.g. ``persist_directory``) holding ``texts``; it is
        opened by :func:`~finderledge.rag.protocols.new_ledger`, the class the facade gave (this module never
        imports the facade, which makes this store in ``as_vectorstore``)."""
        store = cls(new_ledger(embedding=embedding, **kwargs))
        if texts:
            store.add_texts(texts, metadatas, ids=ids)
        return store


def _plain(result: SearchResult) -> Document:
    """A result as LangChain components expect it: the document's id, the caller's metadata only."""
    return Document(page_content=result.content, metadata=user_metadata(result.metadata), id=result.parent_id)


def _failing_fields(flt: Mapping[str, Any], metadata: Mapping[str, Any]) -> list[str]:
    """The metadata fields named by the top-level conditions of ``flt`` that ``metadata`` fails (for messages)."""
    out: list[str] = []
    for key, cond in flt.items():
        if not matches(metadata, {key: cond}):
            out.extend(_fields_of({key: cond}))
    return list(dict.fromkeys(out))


def _fields_of(flt: Mapping[str, Any]) -> list[str]:
    """Every field a filter names, inside ``$and``/``$or`` too."""
    out: list[str] = []
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            for sub in cond:
                out.extend(_fields_of(sub))
        else:
            out.append(key)
    return out
