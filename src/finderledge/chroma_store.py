"""Chroma as a FinderLedge vector store: precomputed vectors, cosine space, native ``where`` filters."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .filters import to_chroma_where
from .vector_store import VectorStore, clean_metadata

__all__ = ["ChromaVectorStore"]

COLLECTION = "finderledge"

_aliases_lock = threading.Lock()
_aliases_in_use: dict[str, set[int]] = {}


def _take_alias(path: Path) -> tuple[str, int]:
    """A spelling of ``path`` no other open store of this process uses (``path``, ``path/.``, ``path/./.`` …).

    Chroma keeps one in-memory index per path string per process; another process's writes never reach
    it.  Each FinderLedge replica needs its own, loaded from the files when it opens (see replica.py)."""
    key = str(path.resolve())
    with _aliases_lock:
        used = _aliases_in_use.setdefault(key, set())
        n = next(i for i in range(len(used) + 1) if i not in used)
        used.add(n)
    return os.path.join(key, *(["."] * n)), n


def _release_alias(path: Path, n: int) -> None:
    with _aliases_lock:
        _aliases_in_use.get(str(path.resolve()), set()).discard(n)


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
        self.path = None if path is None else Path(path)
        self._alias: int | None = None
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            alias, self._alias = _take_alias(self.path)
            self._client = chromadb.PersistentClient(path=alias, settings=settings)
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
        if k < 1:
            return []
        # n_results is not capped by count(): count() reads the shared files, which another process may
        # have changed, while the query runs on this process's in-memory index (see replica.py)
        result = self._collection.query(
            query_embeddings=[np.asarray(embedding, dtype=np.float32)],  # type: ignore[arg-type]
            n_results=k,
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
        if self.path is not None and self._alias is not None:
            _release_alias(self.path, self._alias)
            self._alias = None
