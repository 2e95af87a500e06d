"""The FAISS store's vectors: a plain ``IndexFlatIP`` plus, kept here, the row id and chunk id at each position.

Why not FAISS's ``IndexIDMap2``: it keeps a reverse map (an ``unordered_map`` id -> position) that it fills row
by row on every ``add_with_ids`` and rebuilds whole on every ``remove_ids``; filling it while a 1,000,000-row
index was opened took 6 s of a fresh process's first query (issue 29).  The store's row ids (sequence
numbers) ascend with the position: rows are appended in sequence order and a removal keeps the order of the
rest.  So a row's position is found by binary search in :attr:`FlatRows.seq` and no map is needed; a search
maps the positions FAISS returns to chunk ids through :attr:`FlatRows.ids` (one array lookup per hit).

Opening fills the index with :meth:`FlatRows.fill`: the storage is sized once and the caller writes every
vector straight into it (no per-row insert, no second copy of the matrix).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["FlatRows", "grow_storage", "top_inner"]

FILL_ROOM = 32  # an opened index keeps room for 1/32 more rows (3% more memory) ...
MIN_ROOM = 1024  # ... and at least this many
#: an unfiltered search of at least this many queries is scored by one matrix product per block of rows (BLAS):
#: this FAISS build takes its BLAS path only from 128,000 queries (``distance_compute_blas_threshold``), and its
#: query-by-query kernel cost 1.13 s of CPU for 200 queries over 100,000 rows against 0.2 s (issue 29: the
#: calibration at the close of a build)
BATCH_QUERIES = 16
#: stored rows scored at a time: a (queries x BLOCK_ROWS) float32 matrix and its int64 partition in memory
#: (200 queries: 6.6 MB and 13 MB; 32,768 rows raised a 100k build's peak RSS by about 100 MiB)
BLOCK_ROWS = 8192


class FlatRows:
    """Row ``i`` of ``flat`` holds the vector of sequence number ``seq[i]`` (ascending) and chunk ``ids[i]``."""

    def __init__(self, faiss: Any, dimension: int) -> None:
        self._faiss = faiss
        self.dimension = dimension
        self.flat: Any = faiss.IndexFlatIP(dimension)
        self._seq = np.empty(0, dtype=np.int64)  # a buffer: the first ``_n`` entries are used
        self._ids = np.empty(0, dtype=object)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def seq(self) -> np.ndarray:
        """The sequence number of each stored row, ascending (a view)."""
        return self._seq[: self._n]

    @property
    def ids(self) -> np.ndarray:
        """The chunk id of each stored row (a view of an object array)."""
        return self._ids[: self._n]

    # -- filling and changing -----------------------------------------------------------------------
    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in all, so the adds that follow never reallocate the storage."""
        grow_storage(self.flat, rows)

    def fill(self, seqs: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Size the (empty) index for ``len(seqs)`` rows at once and return its storage as a writable
        ``(rows, dimension)`` matrix, which the caller fills with the rows' normalised vectors."""
        if self._n:
            raise RuntimeError("FlatRows.fill: the index already holds rows")
        self._check_ascending(seqs)
        n = len(seqs)
        # room for the adds that follow (a writer's next spill): without it the first add after opening
        # reallocates the storage, copying every row with the old and the new storage both held
        room = n + max(n // FILL_ROOM, MIN_ROOM)
        self.flat.codes.resize(room * self.flat.code_size)
        self.flat.codes.resize(n * self.flat.code_size)  # the capacity stays
        self.flat.ntotal = n
        self._seq = _resized(np.asarray(seqs, dtype=np.int64), room)
        self._ids, self._n = _resized(ids, room), n
        return self.matrix()

    def append(self, vectors: np.ndarray, seqs: np.ndarray, ids: Sequence[str]) -> None:
        """Append normalised ``vectors`` (C-contiguous float32) as rows ``seqs``, which must ascend above every
        row held."""
        self._check_ascending(seqs)
        need = self._n + len(seqs)
        # the id arrays grow by doubling: an add costs its own rows, not the index's
        if need > len(self._seq):
            room = max(need, 2 * len(self._seq), 1024)
            self._seq = _resized(self._seq, room)
            self._ids = _resized(self._ids, room)
        self.flat.add(vectors)
        self._seq[self._n : need] = seqs
        self._ids[self._n : need] = list(ids)
        self._n = need

    def remove(self, seqs: np.ndarray) -> None:
        """Remove the rows ``seqs`` (each must be held); the others keep their order."""
        if len(seqs) == 0:
            return
        positions = self.positions(seqs)
        self.flat.remove_ids(self._faiss.IDSelectorBatch(positions))
        keep = np.ones(self._n, dtype=bool)
        keep[positions] = False
        self._seq, self._ids = self.seq[keep], self.ids[keep]
        self._n = len(self._seq)

    def _check_ascending(self, seqs: np.ndarray) -> None:
        if len(seqs) and (
            (self._n and int(seqs[0]) <= int(self._seq[self._n - 1]))
            or (len(seqs) > 1 and not bool(np.all(np.diff(seqs) > 0)))
        ):
            raise ValueError("rows must be added in ascending sequence order")

    # -- reading ------------------------------------------------------------------------------------
    def positions(self, seqs: np.ndarray) -> np.ndarray:
        """The positions of rows ``seqs`` (each must be held)."""
        seq = self.seq
        wanted = np.asarray(seqs, dtype=np.int64)
        pos = np.minimum(np.searchsorted(seq, wanted), max(self._n - 1, 0))
        if len(wanted) and (self._n == 0 or not bool(np.all(seq[pos] == wanted))):
            raise RuntimeError("FAISS index lost rows it should hold")  # a bug, never damage on disk
        return pos

    def matrix(self) -> np.ndarray:
        """The index's own storage as a ``(rows, dimension)`` float32 matrix (a view: valid until the next
        change of the index)."""
        if self._n == 0:
            return np.empty((0, self.dimension), dtype=np.float32)
        xb: np.ndarray = self._faiss.rev_swig_ptr(self.flat.get_xb(), self._n * self.dimension)
        return xb.reshape(self._n, self.dimension)

    def vectors_of(self, seqs: np.ndarray) -> np.ndarray:
        """The stored vectors of rows ``seqs`` (a copy)."""
        rows: np.ndarray = self.matrix()[self.positions(seqs)]
        return rows

    def id_of(self, seq: int) -> str:
        """The chunk id of row ``seq``."""
        return str(self._ids[int(self.positions(np.array([seq]))[0])])

    def search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[list[tuple[str, float]]]:
        """The ``k`` best rows for each of ``queries`` (normalised), among positions ``allowed`` if given."""
        if allowed is None and len(queries) >= BATCH_QUERIES:
            scores, found = top_inner(queries, self.matrix(), k)
        else:
            params = None
            if allowed is not None:
                params = self._faiss.SearchParameters(sel=self._faiss.IDSelectorBatch(allowed))
            scores, found = self.flat.search(queries, k, params=params)
        ids = self._ids
        return [
            [(ids[p], s) for s, p in zip(row_scores.tolist(), row_found.tolist()) if p >= 0]
            for row_scores, row_found in zip(scores, found)
        ]


def top_inner(queries: np.ndarray, matrix: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest inner products of each query with ``matrix``'s rows: scores and row positions, best
    first, ``-1`` past the rows there are (as FAISS returns them).  The scores are FAISS's to float rounding
    (BLAS sums in another order), so scores that differ by less than that may come in another order."""
    nq = len(queries)
    best_s = np.empty((nq, 0), dtype=np.float32)
    best_i = np.empty((nq, 0), dtype=np.int64)
    for start in range(0, len(matrix), BLOCK_ROWS):
        block = queries @ matrix[start : start + BLOCK_ROWS].T
        cut = block.shape[1] - min(k, block.shape[1])
        picked = np.argpartition(block, cut, axis=1)[:, cut:]  # no negated copy of the block
        cand_s = np.concatenate([best_s, np.take_along_axis(block, picked, axis=1)], axis=1)
        cand_i = np.concatenate([best_i, picked + start], axis=1)
        order = np.lexsort((cand_i, -cand_s), axis=1)[:, :k]  # best first; equal: the lower position
        best_s = np.take_along_axis(cand_s, order, axis=1)
        best_i = np.take_along_axis(cand_i, order, axis=1)
    if best_i.shape[1] < k:  # fewer rows than k: pad as FAISS does
        pad = k - best_i.shape[1]
        best_s = np.pad(best_s, ((0, 0), (0, pad)), constant_values=-np.inf)
        best_i = np.pad(best_i, ((0, 0), (0, pad)), constant_values=-1)
    return best_s, best_i


def grow_storage(flat: Any, rows: int) -> None:
    """Make room for ``rows`` rows in ``flat``'s storage: resized up and back, the room is kept, so the adds
    that follow never reallocate (within the room already made, resizing up copies nothing)."""
    codes = flat.codes
    have, need = codes.size(), rows * flat.code_size
    if need > have:
        codes.resize(need)
        codes.resize(have)


def _resized(arr: np.ndarray, size: int) -> np.ndarray:
    """A buffer of ``size`` entries starting with ``arr``."""
    out = np.empty(size, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out
