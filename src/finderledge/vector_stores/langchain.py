"""Any LangChain ``VectorStore`` as FinderLedge's vector leg: our ids, our precomputed vectors, our filter meaning.

What a store must offer: a way to add precomputed vectors (``add_embeddings``, or ``InMemoryVectorStore``'s
documented ``store`` dict), ``delete(ids=...)`` and ``similarity_search_with_score_by_vector``.  Scores are turned
into cosine similarities for the stores whose scale is known (:data:`_SCORES`); for others the replica
rescores the hits from the ledger's vectors.  Filters: ``InMemoryVectorStore`` takes ours exactly (a callable);
stores with a Mongo-style filter (``PGVector`` …) are narrowed by the clauses whose meaning is the same
(strings by ``$eq``/``$in``, under ``$and``) and every hit is checked by :func:`finderledge.filters.compile_filter`;
a store with no known filter language refuses filters with :class:`UnsupportedFilterError`.

Tested: ``langchain_core`` ``InMemoryVectorStore`` and ``langchain_postgres`` ``PGVector`` (cosine distance).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigurationError
from ..filters import compile_filter
from .base import LOCAL, SHARED, VectorStore

__all__ = ["LangChainVectorStore", "UnsupportedFilterError"]

ID_KEY = "_finderledge_id"  # our chunk id in the store's metadata (for stores that do not return Document.id)


class UnsupportedFilterError(ConfigurationError):
    """The vector store has no filter language FinderLedge can translate to."""


def _cosine_from_similarity(score: float) -> float:
    return score


def _cosine_from_distance(score: float) -> float:
    return 1.0 - score


# class name -> how its score becomes a cosine similarity (unit vectors)
_SCORES: dict[str, Callable[[float], float]] = {
    "InMemoryVectorStore": _cosine_from_similarity,
    "PGVector": _cosine_from_distance,  # langchain_postgres with the default cosine distance
}
_MONGO_FILTERS = {"PGVector"}  # stores whose filter dicts read {"field": {"$eq"/"$in": ...}, "$and": [...]}


class LangChainVectorStore(VectorStore):
    """Adapts one LangChain vector store; ``location``: ``local`` for a store inside this process
    (``InMemoryVectorStore``: each process fills its own from the ledger), ``shared`` otherwise."""

    name = "langchain"

    def __init__(self, store: Any, *, shared: bool | None = None) -> None:
        self.store = store
        self.kind = type(store).__name__
        if shared is None:
            shared = self.kind != "InMemoryVectorStore"
        self.location = SHARED if shared else LOCAL
        self.needs_rescoring = self.kind not in _SCORES
        self._ids: set[str] = set()  # what this object added (stores have no standard "list ids")
        self._add = self._adder()
        if not callable(getattr(store, "similarity_search_with_score_by_vector", None)):
            raise ConfigurationError(
                f"vector_store: {self.kind} has no similarity_search_with_score_by_vector; "
                "FinderLedge needs it to search with its own query vectors"
            )

    def _adder(self) -> Callable[[list[str], np.ndarray, list[dict[str, Any]], list[str]], None]:
        store = self.store
        if self.kind == "InMemoryVectorStore":

            def add_in_memory(
                ids: list[str], vectors: np.ndarray, metas: list[dict[str, Any]], texts: list[str]
            ) -> None:
                for i, v, md, text in zip(ids, vectors, metas, texts):  # its documented record layout
                    store.store[i] = {"id": i, "vector": v.tolist(), "text": text, "metadata": md}

            return add_in_memory
        add = getattr(store, "add_embeddings", None)
        if not callable(add):
            raise ConfigurationError(
                f"vector_store: {self.kind} cannot take precomputed vectors (no add_embeddings); "
                "FinderLedge embeds once and gives every leg the same vectors"
            )
        params = inspect.signature(add).parameters
        if "text_embeddings" in params:  # langchain_community FAISS style
            return lambda ids, vectors, metas, texts: add(
                text_embeddings=list(zip(texts, vectors.tolist())), metadatas=metas, ids=ids
            )
        return lambda ids, vectors, metas, texts: add(
            texts=texts, embeddings=vectors.tolist(), metadatas=metas, ids=ids
        )

    def add(
        self,
        ids: Sequence[str],
        embeddings: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str] | None = None,
    ) -> None:
        if len(ids) == 0:
            return
        vectors = np.asarray(embeddings, dtype=np.float32)
        id_list = list(ids)
        self.delete(id_list)  # an upsert: not every store replaces on a known id
        metas = [{**dict(md), ID_KEY: i} for i, md in zip(id_list, metadatas)]
        self._add(id_list, vectors, metas, list(texts) if texts is not None else [""] * len(id_list))
        self._ids.update(id_list)

    def delete(self, ids: Iterable[str]) -> None:
        id_list = list(ids)
        if id_list:
            self.store.delete(ids=id_list)
            self._ids.difference_update(id_list)

    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        if k < 1:
            return []
        pred = compile_filter(filter)
        query = np.asarray(embedding, dtype=np.float32)
        query = (query / (np.linalg.norm(query) or 1.0)).tolist()
        kwargs: dict[str, Any] = {}
        if pred is not None:
            kwargs["filter"] = self._store_filter(filter, pred)
        convert = _SCORES.get(self.kind, _cosine_from_similarity)
        n = k
        while True:  # the store narrows (never too far), compile_filter decides; widen until k pass
            docs = self.store.similarity_search_with_score_by_vector(query, k=n, **kwargs)
            hits = [
                (str(doc.id or doc.metadata.get(ID_KEY)), convert(float(score)))
                for doc, score in docs
                if pred is None or pred(_user_metadata(doc))
            ]
            if pred is None or len(hits) >= k or len(docs) < n:
                return sorted(hits, key=lambda hit: -hit[1])[:k]
            n *= 4

    def _store_filter(self, flt: Mapping[str, Any] | None, pred: Callable[[Mapping[str, Any]], bool]) -> Any:
        if self.kind == "InMemoryVectorStore":
            return lambda doc: pred(_user_metadata(doc))
        if self.kind in _MONGO_FILTERS:
            return _narrowing(flt or {}) or None
        raise UnsupportedFilterError(
            f"filter: FinderLedge cannot translate filters for {self.kind}; search without "
            "a filter, or use a backend that filters (chroma, faiss, pgvector)"
        )

    def ids(self) -> set[str]:
        """Every id in the store where it can be listed (in-memory records, PGVector's collection); otherwise
        the ids this object added (LangChain has no standard way to list a store)."""
        store_ids = getattr(self.store, "store", None)  # InMemoryVectorStore
        if isinstance(store_ids, dict):
            return set(store_ids)
        if self.kind == "PGVector":
            return _pgvector_ids(self.store)
        return set(self._ids)


def _pgvector_ids(store: Any) -> set[str]:
    """The ids in a langchain-postgres ``PGVector`` collection (its own session and table model)."""
    from sqlalchemy import select

    table = store.EmbeddingStore
    with store._make_sync_session() as session:  # noqa: SLF001 - PGVector lists no ids publicly
        collection = store.get_collection(session)
        if collection is None:
            return set()
        rows = session.execute(select(table.id).where(table.collection_id == collection.uuid))
        return {str(r[0]) for r in rows}


def _user_metadata(doc: Any) -> dict[str, Any]:
    """A returned Document's metadata as the caller stored it (without our id key)."""
    return {key: v for key, v in doc.metadata.items() if key != ID_KEY}


def _narrowing(flt: Mapping[str, Any]) -> dict[str, Any]:
    """The clauses of ``flt`` a Mongo-style store evaluates exactly as we do (string equality/membership under
    an implicit or explicit ``$and``); the rest is left to the check after the search."""
    clauses: list[dict[str, Any]] = []
    for key, cond in flt.items():
        if key == "$and":
            clauses.extend(c for c in (_narrowing(sub) for sub in cond) if c)
        elif key.startswith("$"):
            continue
        elif isinstance(cond, str):
            clauses.append({key: {"$eq": cond}})
        elif isinstance(cond, Mapping):
            for op, operand in cond.items():
                if op == "$eq" and isinstance(operand, str):
                    clauses.append({key: {"$eq": operand}})
                elif op == "$in" and operand and all(isinstance(x, str) for x in operand):
                    clauses.append({key: {"$in": list(operand)}})
    if not clauses:
        return {}
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}
