"""Chroma as a FinderLedge vector store: precomputed vectors, cosine space, native ``where`` filters."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .filters import to_chroma_where
from .vector_store import VectorStore, clean_metadata

__all__ = ["ChromaVectorStore"]

COLLECTION = "finderledge"


class ChromaVectorStore(VectorStore):
    """One Chroma collection (persistent under ``path``, or in memory) holding FinderLedge chunks."""

    name = "chroma"

    def __init__(self, path: str | Path | None = None, *, collection_name: str = COLLECTION) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        if path is None:
            self._client = chromadb.EphemeralClient(settings=settings)
            # in-memory clients of one process share a database: keep each instance apart
            collection_name = f"{collection_name}-{uuid.uuid4().hex}"
        else:
            Path(path).mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(path=str(path), settings=settings)
        self.path = None if path is None else Path(path)
        self._collection = self._client.get_or_create_collection(
            collection_name, metadata={"hnsw:space": "cosine"}, embedding_function=None
        )
        self._max_batch = max(1, int(self._client.get_max_batch_size()))

    def add(
        self,
        ids: Sequence[str],
        embeddings: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str] | None = None,
    ) -> None:
        vectors = np.asarray(embeddings, dtype=np.float32)
        for start in range(0, len(ids), self._max_batch):
            end = start + self._max_batch
            self._collection.upsert(
                ids=list(ids[start:end]),
                embeddings=vectors[start:end],
                metadatas=[clean_metadata(m) or {"_": 0} for m in metadatas[start:end]],
                documents=None if texts is None else list(texts[start:end]),
            )

    def delete(self, ids: Iterable[str]) -> None:
        id_list = list(ids)
        for start in range(0, len(id_list), self._max_batch):
            self._collection.delete(ids=id_list[start : start + self._max_batch])

    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        count = self._collection.count()
        if count == 0 or k < 1:
            return []
        result = self._collection.query(
            query_embeddings=[np.asarray(embedding, dtype=np.float32)],  # type: ignore[arg-type]
            n_results=min(k, count),
            where=to_chroma_where(filter),
            include=["distances"],
        )
        ids = result["ids"][0]
        distances = (result.get("distances") or [[]])[0]
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances)]

    def ids(self) -> set[str]:
        out: set[str] = set()
        offset, page = 0, 10000
        while True:
            got = self._collection.get(include=[], limit=page, offset=offset)["ids"]
            out.update(got)
            if len(got) < page:
                return out
            offset += page

    def __len__(self) -> int:
        return int(self._collection.count())

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()
