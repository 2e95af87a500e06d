"""The legs as the :class:`~finderledge.ranking.finder.Finder` sees them: searches of this process's replica.

The keyword leg searches the BM25 replica; the vector leg the base index plus the overlay of changes not yet
checkpointed (a shared index directly).  A local leg's search is guarded: a damaged file it reads (lazily)
marks the leg to be moved aside and rebuilt, which :meth:`~finderledge.replica.core.Replica.reading` does before
it runs the search again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from ..errors import IndexCorruptError, LedgerCorruptError
from ..ledgers import Ledger
from ..replica.core import Replica
from ..replica.legs import Leg
from ..vector_stores import LOCAL

__all__ = ["KeywordLeg", "VectorLeg", "guarded"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


def guarded(leg: Leg, search: Callable[[], _T]) -> _T:
    """Run a search on ``leg``; a damaged file it reads (lazily) marks the leg to be rebuilt."""
    try:
        return search()
    except LedgerCorruptError:
        raise
    except IndexCorruptError as exc:
        leg.damage = exc
        logger.error("%s; the %s index is moved aside and rebuilt from the ledger", exc, leg.name)
        raise


def rescored(ledger: Ledger, embedding: Any, hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Cosine similarities from the ledger's vectors, for a store whose own scores are on another scale."""
    rows = {c.id: c.embedding for c in ledger.get_chunks([i for i, _ in hits], with_embedding=True)}
    query = np.asarray(embedding, dtype=np.float32)
    query = query / (np.linalg.norm(query) or 1.0)
    scored = []
    for cid, _ in hits:
        vector = rows.get(cid)
        if vector is not None:
            scored.append((cid, float(query @ vector / (np.linalg.norm(vector) or 1.0))))
    return sorted(scored, key=lambda hit: -hit[1])


class KeywordLeg:
    """The keyword leg: this process's BM25 replica."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica

    def search(
        self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        leg = self.replica.keyword
        handle = leg.handle
        return guarded(leg, lambda: handle.search(query, k, filter))

    def search_many(
        self, queries: Sequence[str], k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[list[tuple[str, float]]]:
        """Several keyword searches at once (the leg calibration's pseudo-queries share their common words)."""
        leg = self.replica.keyword
        handle = leg.handle
        return guarded(leg, lambda: handle.search_many(queries, k, filter))


class VectorLeg:
    """The vector leg: the base index plus the overlay of changes not yet checkpointed (the replica's vector
    index is opened by its engine first: it needs the embedding dimension)."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica

    def search(
        self, embedding: Any, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        leg, overlay = self.replica.vector, self.replica.overlay
        handle = leg.handle
        if leg.location != LOCAL:
            hits = handle.search(embedding, k, filter)
            if getattr(handle, "needs_rescoring", False):
                return rescored(self.replica.ledger, embedding, hits)
            return hits  # type: ignore[no-any-return]
        if overlay.empty:
            return guarded(leg, lambda: handle.search(embedding, k, filter))
        return guarded(leg, lambda: overlay.search(handle, embedding, k, filter))

    def search_many(
        self, embeddings: Any, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[list[tuple[str, float]]]:
        """Several vector searches in one index call (the leg calibration's pseudo-queries)."""
        leg, overlay = self.replica.vector, self.replica.overlay
        handle = leg.handle
        if leg.location != LOCAL:
            return [self.search(embedding, k, filter) for embedding in embeddings]
        if overlay.empty:
            return guarded(leg, lambda: handle.search_many(embeddings, k, filter))
        return guarded(leg, lambda: overlay.search_many(handle, embeddings, k, filter))
