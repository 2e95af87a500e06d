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

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["FileRows", "FlatRows", "MappedRows", "RowView", "grow_storage", "top_inner"]

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


OVERLAY = -1  # the part number of rows held in memory (added since the store was opened)
_SEEK_LOCK = threading.Lock()


def _seek_read(fd: int, size: int, offset: int) -> bytes:
    """``os.pread`` where there is none (Windows): a seek and a read, one thread at a time."""
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)


#: read ``size`` bytes at ``offset`` of a descriptor without moving a position other threads share
pread: Any = getattr(os, "pread", _seek_read)
#: read into given buffers at an offset (None where the system has no ``preadv``: :data:`pread` and a copy)
preadv: Any = getattr(os, "preadv", None)


class FileRows:
    """A segment's ``(rows, dimension)`` float32 vectors read on demand with :data:`pread` from the descriptor
    their CRC32 was checked through (owned here: closed by :meth:`close`, else when this is collected).  Not a memory map: a map's
    page faults bring in the neighbouring pages too (the kernel's fault-around), so rescoring a few thousand
    scattered candidates made a whole 100k-row file resident; a read brings in only the rows asked for."""

    def __init__(self, fd: int, offset: int, rows: int, dimension: int, path: Any, error: Any) -> None:
        self._fd, self._offset, self._path, self._error = fd, offset, path, error
        self.shape = (rows, dimension)
        self._row_bytes = 4 * dimension
        self._closer = weakref.finalize(self, os.close, fd)

    def __len__(self) -> int:
        return self.shape[0]

    def close(self) -> None:
        """Close the descriptor now (once: a later call, or the collection, closes nothing); reads then raise."""
        self._fd = -1
        self._closer()

    def _open_fd(self) -> int:
        """The descriptor to read, or the error naming the file once :meth:`close` closed it (its number may
        name another file by then)."""
        if self._fd < 0:
            raise self._error(self._path, "read after its store was closed")
        return self._fd

    def _read(self, out: np.ndarray, start: int) -> None:
        """Fill ``out`` (C-contiguous rows) with the rows from ``start`` on."""
        want = out.nbytes
        got = pread(self._open_fd(), want, self._offset + start * self._row_bytes)
        if len(got) != want:  # truncated in place after its check
            raise self._error(self._path, f"read {len(got)} of {want} bytes")
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(got, dtype=np.uint8)

    def read_into(self, out: np.ndarray, start: int) -> None:
        """Fill ``out`` (C-contiguous float32 rows, e.g. a run of an index's own storage) with the rows from
        ``start`` on, read straight into it where the system can (``os.preadv``): no copy in between."""
        if preadv is None:
            self._read(out, start)
            return
        want, at, view = (
            out.nbytes,
            self._offset + start * self._row_bytes,
            out.reshape(-1).view(np.uint8).data,
        )
        got = 0
        while got < want:
            n = preadv(self._open_fd(), [view[got:]], at + got)
            if n <= 0:  # truncated in place after its check
                raise self._error(self._path, f"read {got} of {want} bytes")
            got += n

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            lo, hi, _ = key.indices(self.shape[0])
            out = np.empty((max(0, hi - lo), self.shape[1]), dtype=np.float32)
            if len(out):
                self._read(out, lo)
            return out
        rows = np.asarray(key, dtype=np.int64)
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        if not len(rows):
            return out
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        breaks = np.flatnonzero(np.diff(ordered) != 1) + 1  # runs of consecutive rows: one read each
        starts = np.concatenate([[0], breaks])
        lengths = (np.diff(np.append(starts, len(ordered))) * self._row_bytes).tolist()
        offsets = (self._offset + ordered[starts] * self._row_bytes).tolist()
        fd, read = self._open_fd(), pread
        data = b"".join([read(fd, n, at) for n, at in zip(lengths, offsets)])
        if len(data) != out.nbytes:  # truncated in place after its check
            raise self._error(self._path, f"read {len(data)} of {out.nbytes} bytes")
        out[order] = np.frombuffer(data, dtype=np.float32).reshape(out.shape)
        return out


class RowView:
    """Rows of a :class:`MappedRows` read like a ``(rows, dimension)`` float32 matrix: ``view[a:b]`` and
    ``view[positions]`` gather copies, reading only those rows of the segment files."""

    def __init__(self, rows: MappedRows, positions: np.ndarray | None = None) -> None:
        self._rows = rows
        self._positions = positions  # None: every row, in order
        n = len(rows) if positions is None else len(positions)
        self.shape = (n, rows.dimension)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            picked = np.arange(self.shape[0], dtype=np.int64)[key]
        else:
            picked = np.asarray(key, dtype=np.int64)
        if self._positions is not None:
            picked = self._positions[picked]
        return self._rows.gather(picked)


class MappedRows(FlatRows):
    """:class:`FlatRows` whose vectors are not copied into memory: the rows opened from segments are read
    on demand from their ``vectors.npy`` (:class:`FileRows`: through the descriptor each file's CRC32 was
    checked through), and only rows added since opening are held in memory (an overlay).  Row ``i`` is row
    ``_row[i]`` of part ``_part[i]`` (a segment's rows, or :data:`OVERLAY`).

    Used by the approximate kinds (``vector_index``), whose searches read only their candidates' rows: the
    serving process's resident memory is the approximate index plus the pages of the rows it rescored."""

    def __init__(self, faiss: Any, dimension: int) -> None:
        super().__init__(faiss, dimension)
        self.flat = None  # no FAISS storage: nothing here holds every vector
        self._parts: list[
            Any
        ] = []  # (rows, dimension) float32 arrays or FileRows: a slice or rows give a copy
        self._part = np.empty(0, dtype=np.int32)
        self._row = np.empty(0, dtype=np.int64)
        self._overlay = np.empty((0, dimension), dtype=np.float32)
        self._overlay_n = 0

    def reserve(self, rows: int) -> None:
        """Make room in the overlay for ``rows`` rows in all (the mapped rows are not copied), so a big
        catch-up's adds never regrow it, copying the overlay with the old and the new buffer both held."""
        need = self._overlay_n + max(0, rows - self._n)
        if need > len(self._overlay):
            grown = np.empty((need, self.dimension), dtype=np.float32)
            grown[: self._overlay_n] = self._overlay[: self._overlay_n]
            self._overlay = grown

    def fill(self, seqs: np.ndarray, ids: np.ndarray) -> np.ndarray:
        raise RuntimeError("MappedRows: use fill_mapped")

    def fill_mapped(
        self,
        seqs: np.ndarray,
        ids: np.ndarray,
        parts: Sequence[Any],
        part_of: np.ndarray,
        row_of: np.ndarray,
    ) -> None:
        """Hold rows ``seqs`` (ascending) with chunk ids ``ids``: row ``i`` is row ``row_of[i]`` of
        ``parts[part_of[i]]`` (a segment's :class:`FileRows`)."""
        if self._n:
            raise RuntimeError("MappedRows.fill_mapped: rows are held already")
        self._check_ascending(seqs)
        self._parts = list(parts)
        self._seq = np.asarray(seqs, dtype=np.int64).copy()
        self._ids = np.asarray(ids, dtype=object)
        self._part = np.asarray(part_of, dtype=np.int32).copy()
        self._row = np.asarray(row_of, dtype=np.int64).copy()
        self._n = len(self._seq)

    def append(self, vectors: np.ndarray, seqs: np.ndarray, ids: Sequence[str]) -> None:
        """Append normalised ``vectors`` as rows ``seqs`` (ascending above every row held), into the overlay."""
        self._check_ascending(seqs)
        count = len(seqs)
        need = self._overlay_n + count
        if need > len(self._overlay):
            grown = np.empty((max(need, 2 * len(self._overlay), 1024), self.dimension), dtype=np.float32)
            grown[: self._overlay_n] = self._overlay[: self._overlay_n]
            self._overlay = grown
        self._overlay[self._overlay_n : need] = vectors
        rows = np.arange(self._overlay_n, need, dtype=np.int64)
        self._overlay_n = need
        n = self._n
        self._seq = np.concatenate([self._seq[:n], np.asarray(seqs, dtype=np.int64)])
        self._ids = np.concatenate([self._ids[:n], np.array(list(ids) + [None], dtype=object)[:-1]])
        self._part = np.concatenate([self._part[:n], np.full(count, OVERLAY, dtype=np.int32)])
        self._row = np.concatenate([self._row[:n], rows])
        self._n = n + count

    def remove(self, seqs: np.ndarray) -> None:
        """Remove the rows ``seqs`` (each must be held); the others keep their order (an overlay row's
        vector stays in the overlay, unused)."""
        if len(seqs) == 0:
            return
        keep = np.ones(self._n, dtype=bool)
        keep[self.positions(seqs)] = False
        self._seq, self._ids = self.seq[keep], self.ids[keep]
        self._part, self._row = self._part[: self._n][keep], self._row[: self._n][keep]
        self._n = len(self._seq)

    def relocate(self, seqs: np.ndarray, part: Any) -> None:
        """Read rows ``seqs`` (ascending, all held) from now on from ``part`` (a :class:`FileRows` holding exactly
        them, in order: a segment just written from them and checked), then drop what no row reads any more."""
        if len(seqs) == 0:
            return
        positions = self.positions(seqs)
        self._parts.append(part)
        self._part[positions] = len(self._parts) - 1
        self._row[positions] = np.arange(len(seqs), dtype=np.int64)
        self._compact()

    def _compact(self) -> None:
        """Forget (close) segment parts no row reads (their files may be deleted) and shrink an unused overlay."""
        part = self._part[: self._n]
        used = np.unique(part)
        mapped = used[used >= 0]
        renumber = np.full(len(self._parts), -2, dtype=np.int32)
        renumber[mapped] = np.arange(len(mapped), dtype=np.int32)
        self._parts = [self._parts[i] for i in mapped.tolist()]
        in_overlay = part == OVERLAY
        new_part = np.where(in_overlay, OVERLAY, renumber[np.maximum(part, 0)]).astype(np.int32)
        if not bool(np.any(in_overlay)):
            self._overlay, self._overlay_n = np.empty((0, self.dimension), dtype=np.float32), 0
        elif int(np.count_nonzero(in_overlay)) < self._overlay_n // 2:  # mostly dead: copy the live rows
            rows = self._row[: self._n][in_overlay]
            self._overlay = np.ascontiguousarray(self._overlay[rows])
            self._overlay_n = len(rows)
            self._row[: self._n][in_overlay] = np.arange(len(rows), dtype=np.int64)
        self._part = new_part

    def close(self) -> None:
        """Close the segment files' descriptors now (the store's ``close()``); the overlay stays readable."""
        for part in self._parts:
            if isinstance(part, FileRows):
                part.close()

    # -- reading ------------------------------------------------------------------------------------
    def gather(self, positions: np.ndarray) -> np.ndarray:
        """The vectors of rows at ``positions`` (a C-contiguous float32 copy)."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty((len(positions), self.dimension), dtype=np.float32)
        if not len(positions):
            return out
        part, row = self._part[positions], self._row[positions]
        for p in np.unique(part).tolist():
            src = self._overlay if p == OVERLAY else self._parts[p]
            mask = part == p
            picked = row[mask]
            if len(picked) > 1 and int(picked[-1]) - int(picked[0]) == len(picked) - 1 and bool(np.all(mask)):
                out[:] = src[int(picked[0]) : int(picked[-1]) + 1]  # a run: one slice copy
            else:
                out[mask] = src[picked]
        return out

    def matrix(self) -> Any:
        """Every row, read like a matrix (:class:`RowView`: indexing gathers copies)."""
        return RowView(self)

    def vectors_of(self, seqs: np.ndarray) -> np.ndarray:
        return self.gather(self.positions(seqs))

    def search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[list[tuple[str, float]]]:
        """The ``k`` best rows for each of ``queries`` (normalised), among positions ``allowed`` if given: an
        exact scan, a block of rows at a time read from the segment files (the overlay from memory)."""
        view = RowView(self, None if allowed is None else np.asarray(allowed, dtype=np.int64))
        scores, found = top_inner(np.ascontiguousarray(queries, dtype=np.float32), view, k)
        if allowed is not None:
            found = np.where(found >= 0, np.asarray(allowed, dtype=np.int64)[np.maximum(found, 0)], -1)
        ids = self._ids
        return [
            [(ids[p], s) for s, p in zip(row_scores.tolist(), row_found.tolist()) if p >= 0]
            for row_scores, row_found in zip(scores, found)
        ]


def top_inner(queries: np.ndarray, matrix: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
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
