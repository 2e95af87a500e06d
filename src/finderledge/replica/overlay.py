"""A vector index's overlay: chunks added and removed since its last checkpoint, searched beside it.

A process follows other processes' writes without touching the vector backend's files (Chroma's are not
safe to write from two processes; a stale FAISS copy must not overwrite a newer one): new chunks go into
this small exact index, removed ids into a set, and a search merges both with the backend's answer.
A checkpoint (under the directory's write lock) moves the overlay into the backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..filters import compile_filter
from ..metadata import copies_per_object
from ..vector_stores import VectorStore

__all__ = ["VectorOverlay"]

MOVE_ROWS = 5_000  # rows written into the base index at a time when the overlay moves there


class VectorOverlay:
    """Exact cosine search over chunks not yet in the base index, and the ids removed from it."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.metadatas: list[dict[str, Any]] = []
        self.texts: list[str] = []
        self._rows: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None
        self._position: dict[str, int] = {}
        self.removed: set[str] = set()  # ids the base may hold that are gone

    def __len__(self) -> int:
        return len(self._position)

    @property
    def empty(self) -> bool:
        return not self._position and not self.removed

    def add(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str],
    ) -> None:
        """Upsert chunks (an id also hides the base's older version of it)."""
        self.remove(ids)
        norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        copies = copies_per_object(metadatas)  # one per metadata object given (a file's chunks share one)
        for cid, vec, md, text in zip(ids, np.asarray(vectors, dtype=np.float32) / norms, copies, texts):
            self._position[cid] = len(self.ids)
            self.ids.append(cid)
            self._rows.append(vec)
            self.metadatas.append(md)
            self.texts.append(text)
            self.removed.add(cid)  # the base's copy (if any) is replaced by this one
        self._matrix = None

    def remove(self, ids: Iterable[str]) -> None:
        """Hide ids from the base and drop them from the overlay."""
        dropped = False
        for cid in ids:
            self.removed.add(cid)
            pos = self._position.pop(cid, None)
            if pos is not None:
                self.ids[pos] = ""  # a hole; compacted below
                dropped = True
        if dropped:
            keep = [i for i, cid in enumerate(self.ids) if cid]
            self.ids = [self.ids[i] for i in keep]
            self._rows = [self._rows[i] for i in keep]
            self.metadatas = [self.metadatas[i] for i in keep]
            self.texts = [self.texts[i] for i in keep]
            self._position = {cid: i for i, cid in enumerate(self.ids)}
            self._matrix = None

    def vectors(self) -> np.ndarray:
        """The rows as one matrix; the rows become views of it, so the arrays they came from are freed and
        the overlay holds its vectors once (a big catch-up held them twice while FAISS took a third copy)."""
        if self._matrix is None:
            self._matrix = np.stack(self._rows) if self._rows else np.zeros((0, 0), dtype=np.float32)
            self._rows = list(self._matrix)
        return self._matrix

    def search(
        self,
        base: VectorStore,
        embedding: Sequence[float] | np.ndarray,
        k: int,
        filter: Mapping[str, Any] | None,
    ) -> list[tuple[str, float]]:
        """The ``k`` best of base ∪ overlay, without removed ids (scores are cosine in both)."""
        return self.search_many(base, np.asarray(embedding, dtype=np.float32).reshape(1, -1), k, filter)[0]

    def search_many(
        self,
        base: VectorStore,
        embeddings: Sequence[Sequence[float]] | np.ndarray,
        k: int,
        filter: Mapping[str, Any] | None,
    ) -> list[list[tuple[str, float]]]:
        """:meth:`search` for several queries: the base answers them in one call, the overlay in one product."""
        queries = np.asarray(embeddings, dtype=np.float32)
        queries = queries.reshape(len(queries), -1)
        out = self._base_hits(base, queries, k, filter)
        if self._position:
            matrix = self.vectors()
            pred = compile_filter(filter)
            passing = None if pred is None else np.array([pred(md) for md in self.metadatas], dtype=bool)
            for hits, query in zip(out, queries):
                query = query / max(float(np.linalg.norm(query)), 1e-12)
                # one product per query, as a single search computes it: the same scores to the last bit
                hits += self._best(matrix @ query, passing, k)
                hits.sort(key=lambda h: -h[1])
        return [hits[:k] for hits in out]

    def _base_hits(
        self, base: VectorStore, queries: np.ndarray, k: int, filter: Mapping[str, Any] | None
    ) -> list[list[tuple[str, float]]]:
        """The base's ``k`` best per query without the hidden ids.  Most hidden ids are new chunks the base does
        not hold, so the base is asked a little deeper than ``k`` first, and deeper (up to ``k`` + every hidden
        id) only for a query that lost too many of its hits: the cost stays near a plain search's while the
        overlay grows."""
        hidden = self.removed
        if not hidden:
            return base.search_many(queries, k, filter)
        most = k + len(hidden)
        depth = min(2 * k + 10, most)
        out: list[list[tuple[str, float]]] = [[] for _ in range(len(queries))]
        todo = list(range(len(queries)))
        while todo:
            found = base.search_many(queries[todo], depth, filter)
            again = []
            for row, hits in zip(todo, found):
                kept = [(i, s) for i, s in hits if i not in hidden]
                if len(kept) >= k or len(hits) < depth or depth >= most:
                    out[row] = kept
                else:
                    again.append(row)
            todo, depth = again, min(4 * depth, most)
        return out

    def _best(self, scores: np.ndarray, passing: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        """The overlay rows that can be among the ``k`` best for one query (every row tied with the k-th
        included), in row order: the candidates a full sort of all rows would pick from."""
        if passing is not None:
            scores = np.where(passing, scores, -np.inf)
        n = len(scores)
        rows = np.arange(n) if k >= n else np.flatnonzero(scores >= np.partition(scores, n - k)[n - k])
        if passing is not None:
            rows = rows[passing[rows]]
        return [(self.ids[r], float(scores[r])) for r in rows.tolist()]

    def apply_to(self, base: VectorStore) -> None:
        """Write everything into ``base`` (deletes first, then upserts) :data:`MOVE_ROWS` rows at a time, so
        no matrix of every row is made for the move; the caller then drops this overlay.

        Searches stay right while it runs: an id in both base and overlay is hidden in the base."""
        base.delete(sorted(self.removed - set(self._position)))
        for lo in range(0, len(self._position), MOVE_ROWS):
            hi = lo + MOVE_ROWS
            block = self._matrix[lo:hi] if self._matrix is not None else np.stack(self._rows[lo:hi])
            base.add(self.ids[lo:hi], block, self.metadatas[lo:hi], self.texts[lo:hi])
