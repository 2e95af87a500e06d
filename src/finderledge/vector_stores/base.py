"""The interface every vector backend implements (one module per backend registers itself by name)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["FULL_KEY", "LEDGER", "LOCAL", "SHARED", "VectorStore", "full_metadata"]

# where a backend keeps its vectors, which decides how it follows the ledger (see finderledge.replica.core)
LOCAL = "local"  # files of this process/machine: a replica loaded from a checkpoint, following the change log
SHARED = (
    "shared"  # one store every process uses (a server): written through under the write lock after a commit
)
LEDGER = "ledger"  # inside the ledger's own database, written in the same transaction (nothing to follow)
FULL_KEY = (
    "_finderledge"  # a shared store's copy of the chunk's metadata as JSON: what filters are checked against
)


def full_metadata(record: Mapping[str, Any] | None, drop: tuple[str, ...]) -> dict[str, Any]:
    """The chunk metadata a shared store's record carries: its :data:`FULL_KEY` JSON, or (older records, an
    unreadable copy) the record's own fields less ``drop``."""
    if not record:
        return {}
    full = record.get(FULL_KEY)
    if isinstance(full, str):
        try:
            parsed = json.loads(full)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {k: v for k, v in record.items() if k not in drop}


class VectorStore(ABC):
    """A vector index over chunk ids: vectors come in precomputed; scores are cosine similarities."""

    name: str = ""
    location: str = LOCAL

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

    def search_many(
        self,
        embeddings: Sequence[Sequence[float]] | np.ndarray,
        k: int,
        filter: Mapping[str, Any] | None = None,
    ) -> list[list[tuple[str, float]]]:
        """:meth:`search` for several queries, one hit list per query (a backend that can batch them, FAISS,
        answers in one call: the leg calibration searches hundreds at once)."""
        return [self.search(embedding, k, filter) for embedding in embeddings]

    @abstractmethod
    def ids(self) -> set[str]:
        """Every chunk id in the index."""

    def __len__(self) -> int:
        return len(self.ids())

    def flush(self) -> None:
        """Make every change durable (no-op for backends that write through)."""

    def reserve(self, count: int) -> None:
        """A hint that about ``count`` more vectors are coming (a big catch-up): a store that keeps them in one
        growing buffer makes room once now, so adding them never copies the whole buffer (no-op by default)."""

    def close(self) -> None:
        """Release files and handles."""
