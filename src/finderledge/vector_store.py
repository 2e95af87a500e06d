"""The interface every vector backend implements, and the factory that picks one by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["VectorStore", "create_vector_store"]


class VectorStore(ABC):
    """A vector index over chunk ids: vectors come in precomputed; scores are cosine similarities."""

    name: str = ""

    @abstractmethod
    def add(
        self,
        ids: Sequence[str],
        embeddings: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str] | None = None,
    ) -> None:
        """Insert or replace chunks (upsert by id)."""

    @abstractmethod
    def delete(self, ids: Iterable[str]) -> None:
        """Remove chunks; unknown ids are ignored."""

    @abstractmethod
    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` nearest chunks that pass ``filter``, as ``(id, cosine similarity)`` best first."""

    @abstractmethod
    def ids(self) -> set[str]:
        """Every chunk id in the index."""

    def __len__(self) -> int:
        return len(self.ids())

    def flush(self) -> None:
        """Make every change durable (no-op for backends that write through)."""

    def close(self) -> None:
        """Release files and handles."""


def create_vector_store(kind: str, directory: str | Path | None, dimension: int) -> VectorStore:
    """Open (or create) the named backend under ``directory/<kind>/`` (``None``: in memory)."""
    path = None if directory is None else Path(directory) / kind
    if kind == "chroma":
        from .chroma_store import ChromaVectorStore

        return ChromaVectorStore(path)
    if kind == "faiss":
        from .faiss_store import FaissVectorStore

        return FaissVectorStore(path, dimension=dimension)
    raise ValueError(f"setting 'vector_store': expected 'chroma' or 'faiss', got {kind!r}")
