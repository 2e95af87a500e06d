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

from .filters import compile_filter
from .vector_stores import VectorStore

__all__ = ["VectorOverlay"]


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
        copies: dict[
            int, dict[str, Any]
        ] = {}  # one copy per metadata object given (a file's chunks share one)
        for cid, vec, md, text in zip(ids, np.asarray(vectors, dtype=np.float32) / norms, metadatas, texts):
            self._position[cid] = len(self.ids)
            self.ids.append(cid)
            self._rows.append(vec)
            self.metadatas.append(copies.setdefault(id(md), dict(md)))
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
        hidden = self.removed
        hits = (
            [(i, s) for i, s in base.search(embedding, k + len(hidden), filter) if i not in hidden]
            if hidden
            else base.search(embedding, k, filter)
        )
        if self._position:
            query = np.asarray(embedding, dtype=np.float32).reshape(-1)
            query = query / max(float(np.linalg.norm(query)), 1e-12)
            scores = self.vectors() @ query
            pred = compile_filter(filter)
            hits += [
                (cid, float(s))
                for cid, s, md in zip(self.ids, scores.tolist(), self.metadatas)
                if pred is None or pred(md)
            ]
            hits.sort(key=lambda h: -h[1])
        return hits[:k]

    def apply_to(self, base: VectorStore) -> None:
        """Write everything into ``base`` (deletes first, then upserts); the caller then drops this overlay.

        Searches stay right while it runs: an id in both base and overlay is hidden in the base."""
        base.delete(sorted(self.removed - set(self._position)))
        if self._position:
            base.add(self.ids, self.vectors(), self.metadatas, self.texts)
