"""The rows of each partition of a vector index, so a search pinned to one partition costs what that
partition's size costs (issue 28: partitions as the fast path).

A flat index searched through a selector still visits every vector to test it; with 1,000 tenants a tenant's
search paid for the other 999.  :class:`PartitionRows` keeps, per value of the ``partition_key``, the rows'
ids and metadata (built from the index once, on the first pinned search, then updated on every add and
delete), and scores a pinned search by exact dot products over those rows only.

Scores are computed the same way for a partition however many other partitions exist (each row's dot
product by numpy's pairwise float32 sum over the dimension, independent of the number of rows), and ties are
broken by id, so a pinned search returns the same hits, to the last bit, alone or among other partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..partitions import partition_value

__all__ = ["PartitionRows"]

BLOCK_ROWS = 4096  # rows scored at once (bounds the temporary array of a large partition)


class PartitionRows:
    """Partition value -> {row id: metadata} for the live rows of a vector index."""

    def __init__(self, key: str, rows: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
        self.key = key
        self._members: dict[str, dict[int, Mapping[str, Any]]] = {}
        self._part_of: dict[int, str] = {}
        self.add(rows)

    def add(self, rows: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
        """Record rows (row id, metadata); a row without the key (or a non-string value) is in none."""
        for seq, meta in rows:
            value = partition_value(meta, self.key)
            if value is not None:
                self._members.setdefault(value, {})[seq] = meta
                self._part_of[seq] = value

    def remove(self, seqs: Iterable[int]) -> None:
        """Forget deleted rows."""
        for seq in seqs:
            value = self._part_of.pop(seq, None)
            if value is not None:
                members = self._members[value]
                del members[seq]
                if not members:
                    del self._members[value]

    def size(self, value: str) -> int:
        """Live rows in partition ``value``."""
        return len(self._members.get(value, ()))

    def search(
        self,
        value: str,
        query: np.ndarray,
        k: int,
        pred: Callable[[Mapping[str, Any]], bool] | None,
        vectors_of: Callable[[np.ndarray], np.ndarray],
        id_of: Callable[[int], str],
    ) -> list[tuple[str, float]]:
        """The ``k`` rows of partition ``value`` passing ``pred`` with the highest inner product with
        ``query`` (a 1-d float32 unit vector), as ``(id, score)``; ties by id.  ``vectors_of`` returns the
        stored vectors of row ids, ``id_of`` a row's string id."""
        members = self._members.get(value)
        if not members or k < 1:
            return []
        seqs = [seq for seq, meta in members.items() if pred is None or pred(meta)]
        if not seqs:
            return []
        rows = np.array(seqs, dtype=np.int64)
        scores = np.concatenate(
            [_dots(vectors_of(rows[i : i + BLOCK_ROWS]), query) for i in range(0, len(rows), BLOCK_ROWS)]
        )
        if len(scores) > k:  # the k best, and every row tied with the k-th (ties go by id below)
            kth = np.partition(-scores, k - 1)[k - 1]
            keep = np.flatnonzero(-scores <= kth)
            rows, scores = rows[keep], scores[keep]
        hits = sorted(
            ((id_of(int(seq)), float(s)) for seq, s in zip(rows.tolist(), scores.tolist())),
            key=lambda hit: (-hit[1], hit[0]),
        )
        return hits[:k]


def _dots(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Inner product of each row with ``query``: float32 products summed along the row (the same
    operations for a row whatever the number of rows, unlike a BLAS matrix-vector product)."""
    dots: np.ndarray = np.multiply(vectors, query, dtype=np.float32).sum(axis=1, dtype=np.float32)
    return dots


def live_rows(
    segments: Sequence[Any], pending: Iterable[tuple[int, Mapping[str, Any]]]
) -> Iterable[tuple[int, Mapping[str, Any]]]:
    """(row id, metadata) of every live row: the written segments' then the pending ones."""
    for seg in segments:
        metas, seqs = seg.load_metas(), seg.seq.tolist()
        for r in np.flatnonzero(seg.live).tolist():
            yield seqs[r], metas[r]
    yield from pending
