"""FAISS as a FinderLedge vector store: exact cosine search, persisted incrementally and without pickle.

Search runs on one in-memory ``IndexIDMap2(IndexFlatIP)`` over L2-normalised vectors.  Its ids are insertion
sequence numbers, so rows keep insertion order and results (ties included) are the same after a reopen.

On disk (``faiss/``), so that a flush writes only what changed (layout as in the BM25 store):

* ``manifest.json``: format, dimension, counters, the committed segments with each file's size and CRC32,
  and a checksum of itself.  Each flush replaces it with ``os.replace``.
* ``segments/seg-NNNNNNNN/``: ``vectors.npy`` (float32, normalised), ``seq.npy`` (int64 sequence number per
  row, ascending), ``ids.json`` and ``meta.json`` (the chunks' metadata as JSON, parsed when a filter or merge needs it).
* ``deletes/seg-NNNNNNNN.GGGGGGGG.npy``: a segment's deleted row numbers as of flush generation G.

A flush writes the new rows as one segment and new tombstone files, replaces the manifest, then deletes
the files it does not name.  Committed files are never rewritten, so a crash leaves the previous state
readable.  A tier of ``MERGE_FACTOR`` similar-sized segments is merged and a segment with over
``MAX_DELETED_RATIO`` deleted rows is rewritten: O(log n) segments, each row rewritten O(log n) times.
Opening checks sizes, every file's CRC32 and the vectors' shape, and memory-maps the vectors.  The
format 1 layout (``index.faiss`` + ``entries.json``) is still read and is converted by the next flush.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np

from ..durable import fsync_dir, manifest_checksum, npy_bytes, write_file
from ..errors import IncompatibleIndexError, IndexCorruptError
from ..filters import compile_filter, filter_key
from ..integrity import (
    PARSE_ERRORS,
    SEGMENT_NAME,
    checked_path,
    corrupt_on_error,
    is_inside,
    parse_json,
    parse_npy,
    read_file,
    real_folder,
)
from ..metadata import share_equal
from ..partitions import partition_of
from ..storage import index_folder
from .base import VectorStore
from .partition_rows import PartitionRows, live_rows

__all__ = ["FaissVectorStore", "VectorIndexCorruptError", "open_faiss"]

logger = logging.getLogger(__name__)

FORMAT_NAME = "finderledge.faiss_store"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
SEGMENTS_DIR = "segments"
DELETES_DIR = "deletes"
VECTORS_FILE, SEQ_FILE, IDS_FILE, META_FILE = "vectors.npy", "seq.npy", "ids.json", "meta.json"
SEGMENT_FILES = (VECTORS_FILE, SEQ_FILE, IDS_FILE, META_FILE)
LEGACY_INDEX_FILE = "index.faiss"
LEGACY_ENTRIES_FILE = "entries.json"
LEGACY_FORMAT_VERSION = 1
MERGE_FACTOR = 8
MAX_DELETED_RATIO = 0.3
_SEGMENT_NAME = SEGMENT_NAME
_DELETES_NAME = re.compile(r"seg-[0-9]{8,}\.[0-9]{8,}\.npy")
_CHUNK_BYTES = 8 << 20  # vectors are copied and written in blocks of about this size


#: filters whose allowed rows are kept between writes (one per tenant of a multi-tenant index)
MASK_CACHE_SIZE = 4096


class VectorIndexCorruptError(IndexCorruptError):
    """The FAISS index at ``path`` cannot be read consistently: ``reason`` says why.  Nothing was changed."""


@dataclass(eq=False)
class _Segment:
    """An immutable block of rows.  Only its tombstones (``live``) change.

    ``directory`` is None for the rows added since the last flush, held in memory in ``vectors``.  For a
    written segment ``vectors`` caches the memory map and ``meta_raw`` the checked bytes of ``meta.json``,
    so a reader never needs a file that another process's flush may have deleted since.
    """

    name: str
    seq: np.ndarray  # int64 FAISS id per row, ascending
    live: np.ndarray  # bool per row
    directory: Path | None = None
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    metas: list[dict[str, Any]] | None = None  # None until parsed
    meta_raw: bytes | None = None
    vectors: np.ndarray | None = None
    n_deleted: int = 0
    deletes: dict[str, int] | None = None  # committed tombstone file: gen, count, bytes, crc32
    deletes_dirty: bool = False

    @property
    def rows(self) -> int:
        return len(self.seq)

    @property
    def n_live(self) -> int:
        return self.rows - self.n_deleted

    def load_metas(self) -> list[dict[str, Any]]:
        """The metadata of every row, deleted ones included, read from disk on first use."""
        if self.metas is None:
            assert self.directory is not None
            path = self.directory / META_FILE
            raw = (
                self.meta_raw
                if self.meta_raw is not None
                else _check_file(path, self.files[META_FILE], read=True)
            )
            assert raw is not None
            metas = parse_json(raw, path, VectorIndexCorruptError)
            if (
                not isinstance(metas, list)
                or len(metas) != self.rows
                or not all(isinstance(m, dict) for m in metas)
            ):
                raise VectorIndexCorruptError(path, f"expected a list of {self.rows} metadata objects")
            self.metas, self.meta_raw = share_equal(metas), None
        return self.metas

    def load_vectors(self, dimension: int) -> np.ndarray:
        """The vectors (rows x dimension float32), memory-mapped (once) for a written segment."""
        if self.vectors is not None:
            return self.vectors
        assert self.directory is not None
        path = self.directory / VECTORS_FILE
        _check_file(path, self.files[VECTORS_FILE], read=False)
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise VectorIndexCorruptError(path, f"unreadable .npy ({exc})") from None
        if arr.dtype != np.dtype("<f4") or arr.shape != (self.rows, dimension) or not arr.flags.c_contiguous:
            raise VectorIndexCorruptError(
                path,
                f"expected C-ordered <f4 of shape ({self.rows}, {dimension}), got {arr.dtype} {arr.shape}",
            )
        self.vectors = arr
        return arr


class FaissVectorStore(VectorStore):
    """Exact cosine search (``IndexFlatIP`` over L2-normalised vectors) with an id map and metadata filters.

    Opening checks the CRC32 of every file of every segment (the vectors are all read into the in-memory
    index then anyway); ``verify`` is kept for compatibility and changes nothing.
    """

    name = "faiss"

    def __init__(self, path: str | Path | None = None, *, dimension: int, verify: bool = False) -> None:
        import faiss

        self._faiss: Any = faiss
        self.path = None if path is None else Path(path)
        self.dimension = int(dimension)
        self._lock = threading.RLock()
        self._seq_of: dict[str, int] = {}
        self._str_of: dict[int, str] = {}
        self._pending: dict[str, tuple[int, np.ndarray, dict[str, Any]]] = {}  # not flushed yet, by seq
        self._segments: list[_Segment] = []
        self._next_seq = 0
        self._next_segment = 0
        self._generation = 0
        self._dirty = False
        self._gc_pending = False  # ``_committed`` was written but unused files may remain
        self._committed: dict[str, Any] | None = None  # the manifest on disk
        self._mask_cache: dict[str, np.ndarray] = {}
        self.partition_key: str | None = None  # see set_partition_key
        self._partitions: PartitionRows | None = None  # built on the first pinned search
        self._index: Any = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dimension))
        if self.path is not None:
            index_folder(self.path)  # a link at faiss/ would lead every write elsewhere: refused
            for folder in (SEGMENTS_DIR, DELETES_DIR):  # a flush writes into these: never through a link out
                real_folder(self.path, folder, VectorIndexCorruptError)
            if (self.path / MANIFEST).exists():
                self._open(verify)
            elif (self.path / LEGACY_ENTRIES_FILE).exists():
                self._open_legacy()

    # -- opening ------------------------------------------------------------------------------------
    def _open(self, verify: bool) -> None:
        assert self.path is not None
        with corrupt_on_error(
            self.path / MANIFEST, VectorIndexCorruptError
        ):  # whatever a crafted file raises
            manifest, segments, id_lists = _load_manifest(self.path, self.dimension, verify)
            mpath = self.path / MANIFEST
            for seg, ids in zip(segments, id_lists):
                live_ids = list(compress(ids, seg.live.tolist())) if seg.n_deleted else ids
                live_seq = seg.seq[seg.live].tolist() if seg.n_deleted else seg.seq.tolist()
                self._seq_of.update(zip(live_ids, live_seq))
                self._str_of.update(zip(live_seq, live_ids))
            live = sum(s.n_live for s in segments)
            if len(self._seq_of) != live or len(self._str_of) != live:
                raise VectorIndexCorruptError(mpath, "a chunk id or sequence number occurs twice")
            if live != manifest["live_count"]:
                raise VectorIndexCorruptError(
                    mpath, f"segments hold {live} rows, the manifest says {manifest['live_count']}"
                )
            parts = [(s.load_vectors(self.dimension), np.flatnonzero(s.live)) for s in segments]
            seqs, part_idx, row_idx = _sorted_layout(
                [s.seq[rows] for s, (_, rows) in zip(segments, parts)], [rows for _, rows in parts]
            )
            if len(seqs):
                self._index.add_with_ids(
                    _gather([v for v, _ in parts], part_idx, row_idx, self.dimension), seqs
                )
            self._segments, self._committed = segments, manifest
            self._next_seq = manifest["next_seq"]
            self._next_segment = manifest["next_segment"]
            self._generation = manifest["generation"]

    def _open_legacy(self) -> None:
        """Read the format 1 layout; every row is kept as unflushed, so the next flush converts it."""
        assert self.path is not None
        ids, seqs, vectors, metas, next_seq = _load_legacy(self.path, self.dimension)
        self._index.add_with_ids(vectors, seqs)
        for sid, seq, vec, md in zip(ids, seqs.tolist(), vectors, metas):
            self._seq_of[sid] = seq
            self._str_of[seq] = sid
            self._pending[sid] = (seq, vec, md)
        self._next_seq = next_seq
        self._dirty = True
        logger.info(
            "%s: FAISS index in format %d; it is converted on the next flush",
            self.path,
            LEGACY_FORMAT_VERSION,
        )

    # -- persistence --------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the changes since the last flush (new segment, tombstones, merges), then the manifest."""
        with self._lock:
            if self.path is None or not (self._dirty or self._gc_pending):
                return
            root = self.path
            if not self._dirty:
                assert self._committed is not None
                _collect_garbage(root, self._committed)
                self._gc_pending = False
                return
            created = not (root / SEGMENTS_DIR).is_dir() or not (root / DELETES_DIR).is_dir()
            for folder in (root / SEGMENTS_DIR, root / DELETES_DIR):
                folder.mkdir(parents=True, exist_ok=True)
            if created:
                fsync_dir(root)
            generation, next_segment = self._generation + 1, self._next_segment
            segments = [s for s in self._segments if s.n_live]
            if self._pending:
                segments.append(self._pending_segment())
            final: list[_Segment] = []
            entries: list[dict[str, Any]] = []
            tombstones: list[tuple[_Segment, dict[str, int]]] = []
            for group in _plan_merges(segments):
                seg = group[0]
                if (
                    len(group) == 1
                    and seg.directory is not None
                    and seg.n_deleted <= MAX_DELETED_RATIO * seg.rows
                ):
                    deletes = seg.deletes
                    if seg.deletes_dirty:
                        deletes = self._write_tombstones(seg, generation)
                        tombstones.append((seg, deletes))
                else:
                    seg = self._write_segment(f"seg-{next_segment:08d}", group)
                    next_segment, deletes = next_segment + 1, None
                final.append(seg)
                entries.append({"name": seg.name, "rows": seg.rows, "files": seg.files, "deletes": deletes})
            if tombstones:
                fsync_dir(root / DELETES_DIR)
            body = {
                "format": FORMAT_NAME,
                "version": FORMAT_VERSION,
                "dimension": self.dimension,
                "generation": generation,
                "next_segment": next_segment,
                "next_seq": self._next_seq,
                "live_count": len(self._seq_of),
                "segments": entries,
            }
            manifest = {**body, "checksum": manifest_checksum(body)}
            tmp = root / (MANIFEST + ".tmp")
            write_file(tmp, json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8"))
            os.replace(tmp, root / MANIFEST)
            # committed: from here on the in-memory state must describe the new manifest
            for seg, deletes in tombstones:
                seg.deletes, seg.deletes_dirty = deletes, False
            self._segments, self._generation, self._next_segment = final, generation, next_segment
            self._committed = manifest
            self._pending.clear()
            self._dirty, self._gc_pending = False, True
            fsync_dir(root)
            _collect_garbage(root, manifest)
            self._gc_pending = False

    def close(self) -> None:
        """Release the memory maps (it does not flush); they are mapped again if the store is used."""
        with self._lock:
            for seg in self._segments:
                seg.vectors = None

    def _pending_segment(self) -> _Segment:
        rows = sorted(self._pending.values(), key=lambda r: r[0])
        return _Segment(
            name="",
            seq=np.array([r[0] for r in rows], dtype=np.int64),
            live=np.ones(len(rows), dtype=bool),
            vectors=np.stack([r[1] for r in rows]).astype(np.float32, copy=False),
            metas=[r[2] for r in rows],
        )

    def _write_segment(self, name: str, sources: Sequence[_Segment]) -> _Segment:
        """Write the live rows of ``sources`` in sequence order as segment ``name`` (temp dir + rename)."""
        assert self.path is not None
        final = self.path / SEGMENTS_DIR / name
        tmp = final.with_name(name + ".tmp")
        for stale in (tmp, final):  # left by a failed flush; a committed manifest never names them
            _remove_path(stale)
        tmp.mkdir()
        vectors = [s.load_vectors(self.dimension) for s in sources]
        rows = [np.flatnonzero(s.live) for s in sources]
        seqs, part_idx, row_idx = _sorted_layout([s.seq[r] for s, r in zip(sources, rows)], rows)
        metas_of = [s.load_metas() for s in sources]
        metas = [metas_of[p][r] for p, r in zip(part_idx.tolist(), row_idx.tolist())]
        ids = [self._str_of[q] for q in seqs.tolist()]
        blocks = (block for block, _, _ in _iter_blocks(vectors, part_idx, row_idx, self.dimension))
        files = {
            VECTORS_FILE: _write_vectors(tmp / VECTORS_FILE, (len(seqs), self.dimension), blocks),
            SEQ_FILE: write_file(tmp / SEQ_FILE, npy_bytes(seqs.astype("<i8"))),
            IDS_FILE: write_file(tmp / IDS_FILE, _json_bytes(ids)),
            META_FILE: write_file(tmp / META_FILE, _json_bytes(metas)),
        }
        fsync_dir(tmp)
        os.rename(tmp, final)
        fsync_dir(final.parent)
        logger.debug(
            "%s: wrote segment %s (%d rows from %d source(s))", self.path, name, len(seqs), len(sources)
        )
        return _Segment(
            name=name,
            seq=seqs,
            live=np.ones(len(seqs), dtype=bool),
            directory=final,
            files=files,
            metas=metas,
        )

    def _write_tombstones(self, seg: _Segment, generation: int) -> dict[str, int]:
        """Write the deleted row numbers of ``seg`` to a new file (never one a committed manifest names)."""
        assert self.path is not None
        dead = np.flatnonzero(~seg.live).astype("<i8")
        info = write_file(self.path / DELETES_DIR / _deletes_name(seg.name, generation), npy_bytes(dead))
        return {"gen": generation, "count": len(dead), **info}

    # -- writes -------------------------------------------------------------------------------------
    def add(
        self,
        ids: Sequence[str],
        embeddings: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str] | None = None,
    ) -> None:
        vectors = np.ascontiguousarray(np.asarray(embeddings, dtype=np.float32))
        if len(ids) == 0:
            return
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension or len(vectors) != len(ids):
            raise ValueError(
                f"FAISS add: expected {len(ids)} vectors of dimension {self.dimension}, got {vectors.shape}"
            )
        if len(metadatas) != len(ids):
            raise ValueError(f"FAISS add: {len(ids)} ids but {len(metadatas)} metadata dicts")
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        last = {sid: i for i, sid in enumerate(ids)}  # an id given twice: the last one wins
        if len(last) != len(ids):
            keep = sorted(last.values())
            ids, vectors, metadatas = [ids[i] for i in keep], vectors[keep], [metadatas[i] for i in keep]
        copies: dict[
            int, dict[str, Any]
        ] = {}  # one copy per metadata object given (a file's chunks share one)
        cleaned = [copies.setdefault(id(md), dict(md)) for md in metadatas]
        with self._lock:
            self.delete([i for i in ids if i in self._seq_of])
            seqs = np.arange(self._next_seq, self._next_seq + len(ids), dtype=np.int64)
            self._next_seq += len(ids)
            self._index.add_with_ids(vectors, seqs)
            for sid, seq, vec, md in zip(ids, seqs.tolist(), vectors, cleaned):
                self._seq_of[sid] = seq
                self._str_of[seq] = sid
                self._pending[sid] = (seq, vec, md)
            if self._partitions is not None:
                self._partitions.add(zip(seqs.tolist(), cleaned))
            self._changed()

    def delete(self, ids: Iterable[str]) -> None:
        with self._lock:
            known = [i for i in dict.fromkeys(ids) if i in self._seq_of]
            if not known:
                return
            seqs = [self._seq_of.pop(sid) for sid in known]
            flushed = []
            for sid, seq in zip(known, seqs):
                del self._str_of[seq]
                if self._pending.pop(sid, None) is None:
                    flushed.append(seq)
            if flushed:
                self._tombstone(np.array(flushed, dtype=np.int64))
            self._index.remove_ids(self._faiss.IDSelectorBatch(np.array(seqs, dtype=np.int64)))
            if self._partitions is not None:
                self._partitions.remove(seqs)
            self._changed()

    def _tombstone(self, seqs: np.ndarray) -> None:
        """Mark the rows with these sequence numbers deleted in their segments."""
        remaining = np.sort(seqs)
        for seg in self._segments:
            if len(remaining) == 0:
                break
            pos = np.minimum(np.searchsorted(seg.seq, remaining), seg.rows - 1)
            hit = seg.seq[pos] == remaining
            if hit.any():
                rows = pos[hit]
                seg.n_deleted += int(seg.live[rows].sum())
                seg.live[rows] = False
                seg.deletes_dirty = True
                remaining = remaining[~hit]
        if len(remaining):
            logger.error("%s: %d deleted row(s) were in no segment", self.path, len(remaining))

    def _changed(self) -> None:
        self._dirty = True
        self._mask_cache.clear()

    # -- reads --------------------------------------------------------------------------------------
    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        query = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        with self._lock:
            if self._index.ntotal == 0 or k < 1:
                return []
            params = None
            limit = self._index.ntotal
            value = partition_of(filter, self.partition_key)
            if value is not None and filter is not None:
                return self._search_partition(value, query[0], k, filter)
            if filter:
                allowed = self._allowed(filter)
                if len(allowed) == 0:
                    return []
                params = self._faiss.SearchParameters(sel=self._faiss.IDSelectorBatch(allowed))
                limit = len(allowed)
            scores, found = self._index.search(query, min(k, limit), params=params)
            return [(self._str_of[int(i)], float(s)) for s, i in zip(scores[0], found[0]) if i >= 0]

    def search_many(
        self,
        embeddings: Sequence[Sequence[float]] | np.ndarray,
        k: int,
        filter: Mapping[str, Any] | None = None,
    ) -> list[list[tuple[str, float]]]:
        """Unfiltered searches in one FAISS call (one pass over the index for all queries, no per-query thread
        start-up); a filtered one searches query by query."""
        queries = np.asarray(embeddings, dtype=np.float32)
        if filter or queries.ndim != 2 or len(queries) < 2:  # one query: exactly what search computes
            return super().search_many(embeddings, k, filter)
        queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        with self._lock:
            if self._index.ntotal == 0 or k < 1:
                return [[] for _ in range(len(queries))]
            scores, found = self._index.search(queries, min(k, self._index.ntotal))
            return [
                [(self._str_of[int(i)], float(s)) for s, i in zip(row_scores, row_found) if i >= 0]
                for row_scores, row_found in zip(scores, found)
            ]

    def set_partition_key(self, key: str | None) -> None:
        """Keep the rows of each value of metadata ``key`` (see :mod:`finderledge.partitions`): a search whose
        filter pins one value then scores that partition's rows only, exactly, in time proportional to the
        partition's size rather than the index's."""
        with self._lock:
            if key != self.partition_key:
                self.partition_key, self._partitions = key, None

    def _search_partition(
        self, value: str, query: np.ndarray, k: int, flt: Mapping[str, Any]
    ) -> list[tuple[str, float]]:
        """A search pinned to partition ``value`` (caller holds the lock)."""
        if self._partitions is None:
            assert self.partition_key is not None
            pending = ((seq, md) for seq, _, md in self._pending.values())
            self._partitions = PartitionRows(self.partition_key, live_rows(self._segments, pending))
        return self._partitions.search(
            value, query, k, compile_filter(flt), self._index.reconstruct_batch, self._str_of.__getitem__
        )

    def _allowed(self, flt: Mapping[str, Any]) -> np.ndarray:
        """Sequence numbers of the live rows that pass ``flt``, cached per filter until the next write."""
        key = filter_key(flt)
        cached = self._mask_cache.get(key)
        if cached is None:
            pred = compile_filter(flt)
            assert pred is not None
            allowed: list[int] = []
            for seg in self._segments:
                metas, seqs = seg.load_metas(), seg.seq.tolist()
                allowed.extend(seqs[r] for r in np.flatnonzero(seg.live).tolist() if pred(metas[r]))
            allowed.extend(seq for seq, _, md in self._pending.values() if pred(md))
            cached = np.array(allowed, dtype=np.int64)
            while len(self._mask_cache) >= MASK_CACHE_SIZE:  # least recently used first (a tenant per filter)
                del self._mask_cache[next(iter(self._mask_cache))]
            self._mask_cache[key] = cached
        else:
            self._mask_cache[key] = self._mask_cache.pop(key)  # most recently used last
        return cached

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._seq_of)

    def __len__(self) -> int:
        return len(self._seq_of)


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------
def _load_manifest(
    root: Path, dimension: int, verify: bool
) -> tuple[dict[str, Any], list[_Segment], list[list[str]]]:
    """Read and check the manifest and every segment it names; returns it, the segments and their ids."""
    mpath = root / MANIFEST
    manifest = parse_json(read_file(mpath, VectorIndexCorruptError), mpath, VectorIndexCorruptError)
    if not isinstance(manifest, dict):
        raise VectorIndexCorruptError(mpath, "manifest is not a JSON object")
    if manifest.get("format") != FORMAT_NAME:
        raise VectorIndexCorruptError(
            mpath, f"not a FinderLedge FAISS index (format {manifest.get('format')!r})"
        )
    if manifest.get("version") != FORMAT_VERSION:
        raise VectorIndexCorruptError(mpath, f"unsupported format version {manifest.get('version')!r}")
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    if manifest.get("checksum") != manifest_checksum(body):
        raise VectorIndexCorruptError(mpath, "manifest checksum mismatch")
    for key in ("dimension", "generation", "next_segment", "next_seq", "live_count"):
        _non_negative(manifest.get(key), key, mpath)
    if manifest["dimension"] != dimension:
        raise IncompatibleIndexError(
            f"FAISS index at {root} has dimension {manifest['dimension']}, the embedding model gives {dimension}"
        )
    entries = manifest.get("segments")
    if not isinstance(entries, list):
        raise VectorIndexCorruptError(mpath, "'segments' is not a list")
    segments: list[_Segment] = []
    id_lists: list[list[str]] = []
    names: set[str] = set()
    for entry in entries:
        seg, ids = _load_segment(root, entry, dimension, verify, manifest["next_seq"])
        if seg.name in names:
            raise VectorIndexCorruptError(mpath, f"segment {seg.name} is listed twice")
        # a flush reuses names from next_segment and generations after generation: they must be unused
        if int(seg.name[4:]) >= manifest["next_segment"] or (
            seg.deletes and seg.deletes["gen"] > manifest["generation"]
        ):
            raise VectorIndexCorruptError(mpath, f"segment {seg.name} is newer than the manifest's counters")
        names.add(seg.name)
        segments.append(seg)
        id_lists.append(ids)
    return manifest, segments, id_lists


def _load_segment(
    root: Path, entry: Any, dimension: int, verify: bool, next_seq: int
) -> tuple[_Segment, list[str]]:
    """Check one manifest entry and its files (sizes, CRC32s, shapes); returns the segment and its ids."""
    mpath = root / MANIFEST
    if not isinstance(entry, dict):
        raise VectorIndexCorruptError(mpath, "a segment entry is not an object")
    name = entry.get("name")
    if not isinstance(name, str) or not _SEGMENT_NAME.fullmatch(name):
        raise VectorIndexCorruptError(mpath, f"invalid segment name {name!r}")
    rows = _non_negative(entry.get("rows"), f"{name} rows", mpath)
    files = entry.get("files")
    if rows == 0 or not isinstance(files, dict) or set(files) != set(SEGMENT_FILES):
        raise VectorIndexCorruptError(mpath, f"segment {name}: bad row count or file list")
    infos = {fname: _file_info(files[fname], f"{name}/{fname}", mpath) for fname in SEGMENT_FILES}
    sdir = checked_path(root / SEGMENTS_DIR, name, _SEGMENT_NAME, VectorIndexCorruptError, mpath)
    if not sdir.is_dir():
        raise VectorIndexCorruptError(sdir, "segment directory is missing")
    for fname in SEGMENT_FILES:
        checked_path(sdir, fname, re.compile(re.escape(fname)), VectorIndexCorruptError, mpath)
    ids = _parse_json(sdir / IDS_FILE, infos[IDS_FILE])
    if not isinstance(ids, list) or len(ids) != rows or not set(map(type, ids)) <= {str}:
        raise VectorIndexCorruptError(sdir / IDS_FILE, f"expected a list of {rows} string ids")
    seq = _parse_npy(sdir / SEQ_FILE, infos[SEQ_FILE])
    if seq.dtype != np.dtype("<i8") or seq.shape != (rows,):
        raise VectorIndexCorruptError(
            sdir / SEQ_FILE, f"expected <i8 of shape ({rows},), got {seq.dtype} {seq.shape}"
        )
    if seq[0] < 0 or seq[-1] >= next_seq or (rows > 1 and not bool(np.all(np.diff(seq) > 0))):
        raise VectorIndexCorruptError(sdir / SEQ_FILE, "sequence numbers are not ascending below next_seq")
    meta_raw = _check_file(sdir / META_FILE, infos[META_FILE], read=True)  # parsed when a filter needs it
    # every vector is read into the in-memory index right after this anyway: checking its CRC32 here
    # costs one more pass over bytes just read, and turns a flipped byte into a rebuild instead of NaNs
    if _file_crc(sdir / VECTORS_FILE) != infos[VECTORS_FILE]["crc32"]:
        raise VectorIndexCorruptError(sdir / VECTORS_FILE, "checksum mismatch")
    seg = _Segment(
        name=name, seq=seq, live=np.ones(rows, dtype=bool), directory=sdir, files=infos, meta_raw=meta_raw
    )
    seg.load_vectors(dimension)  # size, dtype and shape
    deletes = entry.get("deletes")
    if deletes is not None:
        if not isinstance(deletes, dict):
            raise VectorIndexCorruptError(mpath, f"segment {name}: 'deletes' is not an object")
        gen = _non_negative(deletes.get("gen"), f"{name} deletes gen", mpath)
        count = _non_negative(deletes.get("count"), f"{name} deletes count", mpath)
        dpath = checked_path(
            root / DELETES_DIR, _deletes_name(name, gen), _DELETES_NAME, VectorIndexCorruptError, mpath
        )
        dead = _parse_npy(dpath, _file_info(deletes, f"{name} deletes", mpath))
        if (
            dead.dtype.kind != "i"
            or dead.shape != (count,)
            or (count and (dead[0] < 0 or dead[-1] >= rows))
            or (count > 1 and not bool(np.all(np.diff(dead) > 0)))
        ):
            raise VectorIndexCorruptError(dpath, "tombstones do not match the manifest")
        seg.live[dead] = False
        seg.n_deleted = count
        seg.deletes = {"gen": gen, "count": count, "bytes": deletes["bytes"], "crc32": deletes["crc32"]}
    return seg, ids


def _load_legacy(
    root: Path, dimension: int
) -> tuple[list[str], np.ndarray, np.ndarray, list[dict[str, Any]], int]:
    """Read format 1 (``index.faiss`` + ``entries.json``): ids, sequence numbers, vectors, metadata, next seq."""
    entries_path, index_path = root / LEGACY_ENTRIES_FILE, root / LEGACY_INDEX_FILE
    entries = parse_json(
        read_file(entries_path, VectorIndexCorruptError), entries_path, VectorIndexCorruptError
    )
    raw = read_file(index_path, VectorIndexCorruptError)
    if (
        not isinstance(entries, dict)
        or entries.get("format") != LEGACY_FORMAT_VERSION
        or entries.get("sha256") != hashlib.sha256(raw).hexdigest()
    ):
        raise VectorIndexCorruptError(
            root, f"{LEGACY_INDEX_FILE} does not match {LEGACY_ENTRIES_FILE} (torn write or corruption)"
        )
    d, id_map, vectors = _parse_legacy_index(raw, index_path)
    if d != dimension:
        raise IncompatibleIndexError(
            f"FAISS index at {root} has dimension {d}, the embedding model gives {dimension}"
        )
    n = len(id_map)
    try:
        ids, int_ids, metas = list(entries["ids"]), list(entries["int_ids"]), list(entries["metadatas"])
        next_seq = int(entries["next"])
        row_of = {int(v): i for i, v in enumerate(id_map.tolist())}
        if not all(isinstance(md, dict) for md in metas) or not all(isinstance(i, str) for i in ids):
            raise VectorIndexCorruptError(entries_path, "ids must be strings and metadata objects")
        if not (len(ids) == len(int_ids) == len(metas) == n == len(row_of) == len(set(ids))) or set(
            row_of
        ) != set(int_ids):
            raise VectorIndexCorruptError(entries_path, f"{len(ids)} ids for {n} vectors")
        order = np.argsort(np.asarray(int_ids, dtype=np.int64), kind="stable")
        seqs = np.asarray(int_ids, dtype=np.int64)[order]
    except PARSE_ERRORS as exc:
        raise VectorIndexCorruptError(entries_path, f"{type(exc).__name__}: {str(exc)[:300]}") from None
    rows = np.array([row_of[q] for q in seqs.tolist()], dtype=np.int64)
    vectors = np.ascontiguousarray(vectors[rows])
    next_seq = max(next_seq, int(seqs[-1]) + 1 if n else 0)
    return [ids[i] for i in order.tolist()], seqs, vectors, [metas[i] for i in order.tolist()], next_seq


_LEGACY_HEADER = struct.Struct("<4siqqq?i")  # fourcc, d, ntotal, two dummies, is_trained, metric type


def _parse_legacy_index(raw: bytes, path: Path) -> tuple[int, np.ndarray, np.ndarray]:
    """Dimension, ids and vectors of a serialised ``IndexIDMap2(IndexFlatIP)``, parsed without FAISS.

    Every count in the headers is checked against the file's length before anything is allocated (FAISS
    itself allocates what a header claims first: 4.6 GB for a crafted 4.7 kB file)."""
    head = _LEGACY_HEADER.size
    if len(raw) < 2 * head + 16:
        raise VectorIndexCorruptError(path, f"{len(raw)} bytes: too short for a FAISS index")
    outer, inner = _LEGACY_HEADER.unpack_from(raw, 0), _LEGACY_HEADER.unpack_from(raw, head)
    if outer[0] != b"IxM2" or inner[0] != b"IxFI" or outer[6] != 0 or inner[6] != 0:
        raise VectorIndexCorruptError(path, "not an IndexIDMap2 over an inner-product IndexFlat")
    d, ntotal = outer[1], outer[2]
    (floats,) = struct.unpack_from("<Q", raw, 2 * head)
    data = 2 * head + 8
    if d <= 0 or ntotal < 0 or (inner[1], inner[2]) != (d, ntotal) or floats != ntotal * d:
        raise VectorIndexCorruptError(path, f"inconsistent header (d={d}, ntotal={ntotal}, {floats} floats)")
    if len(raw) != data + 4 * floats + 8 + 8 * ntotal:
        raise VectorIndexCorruptError(
            path, f"{len(raw)} bytes, the header describes {data + 4 * floats + 8 + 8 * ntotal}"
        )
    (n_ids,) = struct.unpack_from("<Q", raw, data + 4 * floats)
    if n_ids != ntotal:
        raise VectorIndexCorruptError(path, f"{n_ids} ids for {ntotal} vectors")
    vectors = np.frombuffer(raw, dtype="<f4", count=floats, offset=data).reshape(ntotal, d)
    ids = np.frombuffer(raw, dtype="<i8", count=ntotal, offset=data + 4 * floats + 8)
    return d, ids, vectors


def _check_file(path: Path, info: Mapping[str, int], *, read: bool) -> bytes | None:
    """Check a file's size against the manifest; with ``read``, also its CRC32, returning the bytes."""
    if read:
        data = read_file(path, VectorIndexCorruptError, size=info["bytes"])
        if zlib.crc32(data) != info["crc32"]:
            raise VectorIndexCorruptError(path, "checksum mismatch")
        return data
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise VectorIndexCorruptError(path, "file is missing") from None
    except OSError as exc:
        raise VectorIndexCorruptError(path, f"cannot read ({exc})") from None
    if size != info["bytes"]:
        raise VectorIndexCorruptError(
            path, f"file has {size} bytes, the manifest says {info['bytes']} (truncated?)"
        )
    return None


def _file_crc(path: Path) -> int:
    """CRC32 of a file, read in blocks (for ``verify=True`` on files too large to read at once)."""
    crc = 0
    try:
        with open(path, "rb") as fh:
            while block := fh.read(_CHUNK_BYTES):
                crc = zlib.crc32(block, crc)
    except OSError as exc:
        raise VectorIndexCorruptError(path, f"cannot read ({exc})") from None
    return crc


def _parse_json(path: Path, info: Mapping[str, int]) -> Any:
    raw = _check_file(path, info, read=True)
    assert raw is not None
    return parse_json(raw, path, VectorIndexCorruptError)


def _parse_npy(path: Path, info: Mapping[str, int]) -> np.ndarray:
    raw = _check_file(path, info, read=True)
    assert raw is not None
    return parse_npy(raw, path, VectorIndexCorruptError)  # the shape is checked against the size first


def _non_negative(value: Any, what: str, where: Path) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise VectorIndexCorruptError(where, f"{what}: expected a non-negative integer, got {value!r}")
    return value


def _file_info(obj: Any, what: str, where: Path) -> dict[str, int]:
    if not isinstance(obj, dict):
        raise VectorIndexCorruptError(where, f"{what}: expected size and CRC32")
    return {
        "bytes": _non_negative(obj.get("bytes"), f"{what} bytes", where),
        "crc32": _non_negative(obj.get("crc32"), f"{what} crc32", where),
    }


# --------------------------------------------------------------------------------------------------
# Row order, merging and writing
# --------------------------------------------------------------------------------------------------
def _sorted_layout(
    seq_parts: Sequence[np.ndarray], row_parts: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sequence numbers of rows from several parts in ascending order, with each row's part and row number."""
    if not seq_parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    seqs = np.concatenate(seq_parts).astype(np.int64, copy=False)
    parts = np.repeat(np.arange(len(seq_parts), dtype=np.int64), [len(s) for s in seq_parts])
    rows = np.concatenate(row_parts).astype(np.int64, copy=False)
    order = np.argsort(seqs, kind="stable")
    seqs = seqs[order]
    if len(seqs) > 1 and not bool(np.all(np.diff(seqs) > 0)):
        raise ValueError("sequence numbers occur twice")
    return seqs, parts[order], rows[order]


def _iter_blocks(
    vectors: Sequence[np.ndarray], part_idx: np.ndarray, row_idx: np.ndarray, dimension: int
) -> Iterator[tuple[np.ndarray, int, int]]:
    """The rows ``vectors[part_idx[i]][row_idx[i]]`` in blocks: ``(block, start, stop)``, C-contiguous float32.

    A run of consecutive rows of one part is passed as a slice (no copy from a memory map).
    """
    step = max(1, _CHUNK_BYTES // (4 * dimension))
    for lo in range(0, len(part_idx), step):
        parts, rows = part_idx[lo : lo + step], row_idx[lo : lo + step]
        run = _as_run(vectors, parts, rows)
        if run is None:
            run = np.empty((len(rows), dimension), dtype=np.float32)
            _copy_rows(run, vectors, parts, rows)
        yield run, lo, lo + len(rows)


def _gather(
    vectors: Sequence[np.ndarray], part_idx: np.ndarray, row_idx: np.ndarray, dimension: int
) -> np.ndarray:
    """All the rows of :func:`_iter_blocks` as one array (FAISS copies its whole storage on each add)."""
    run = _as_run(vectors, part_idx, row_idx)
    if run is not None:
        return run
    out = np.empty((len(part_idx), dimension), dtype=np.float32)
    step = max(1, _CHUNK_BYTES // (4 * dimension))
    for lo in range(0, len(part_idx), step):
        _copy_rows(out[lo : lo + step], vectors, part_idx[lo : lo + step], row_idx[lo : lo + step])
    return out


def _as_run(vectors: Sequence[np.ndarray], parts: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """The rows as a slice of one part when they are consecutive rows of it (rows ascend within a part)."""
    if len(rows) == 0 or int(rows[-1]) - int(rows[0]) != len(rows) - 1 or not bool(np.all(parts == parts[0])):
        return None
    return np.ascontiguousarray(vectors[int(parts[0])][int(rows[0]) : int(rows[-1]) + 1], dtype=np.float32)


def _copy_rows(dest: np.ndarray, vectors: Sequence[np.ndarray], parts: np.ndarray, rows: np.ndarray) -> None:
    for p in np.unique(parts).tolist():
        mask = parts == p
        dest[mask] = vectors[p][rows[mask]]


def _tier(n: int) -> int:
    """Size tier: 0 for 0-7 rows, 1 for 8-63, 2 for 64-511, ..."""
    tier = 0
    while n >= MERGE_FACTOR:
        n //= MERGE_FACTOR
        tier += 1
    return tier


def _plan_merges(segments: Sequence[_Segment]) -> list[list[_Segment]]:
    """Group segments to be written together: while a tier holds ``MERGE_FACTOR`` groups, merge them."""
    groups = [[s] for s in segments]
    while True:
        by_tier: dict[int, list[int]] = {}
        for i, group in enumerate(groups):
            by_tier.setdefault(_tier(sum(s.n_live for s in group)), []).append(i)
        full = [t for t, members in by_tier.items() if len(members) >= MERGE_FACTOR]
        if not full:
            return groups
        members = by_tier[min(full)]
        merged = [s for i in members for s in groups[i]]
        rest = [g for i, g in enumerate(groups) if i not in set(members)]
        groups = rest[: members[0]] + [merged] + rest[members[0] :]


def _deletes_name(segment: str, generation: int) -> str:
    return f"{segment}.{generation:08d}.npy"


def _collect_garbage(root: Path, manifest: Mapping[str, Any]) -> None:
    """Delete segment directories and tombstone files the committed manifest does not name.

    That covers what only the previous manifest referenced, leftovers of a crashed flush and the format 1
    files.  Only names this store writes are touched.
    """
    keep_segments = {s["name"] for s in manifest["segments"]}
    keep_deletes = {
        _deletes_name(s["name"], s["deletes"]["gen"]) for s in manifest["segments"] if s["deletes"]
    }
    unused = [
        root / name
        for name in (
            LEGACY_INDEX_FILE,
            LEGACY_ENTRIES_FILE,
            LEGACY_INDEX_FILE + ".tmp",
            LEGACY_ENTRIES_FILE + ".tmp",
        )
    ]
    try:
        for folder, pattern, keep in (
            (SEGMENTS_DIR, _SEGMENT_NAME, keep_segments),
            (DELETES_DIR, _DELETES_NAME, keep_deletes),
        ):
            path = real_folder(
                root, folder, VectorIndexCorruptError
            )  # never list (and delete) through a link out
            unused += [
                Path(e.path)
                for e in os.scandir(path)
                if pattern.fullmatch(e.name.removesuffix(".tmp")) and e.name not in keep
            ]
    except (OSError, VectorIndexCorruptError) as exc:
        logger.warning("%s: could not list FAISS files (%s)", root, exc)
    for path in unused:
        if not is_inside(root, path.parent):
            logger.warning("%s: not removing %s, which is outside the index", root, path)
            continue
        try:
            _remove_path(path)
        except OSError as exc:  # the flush is committed; a later one removes what is left
            logger.warning("%s: could not remove unused %s (%s)", root, path.name, exc)


def _remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


class _CrcWriter:
    """A write-only file wrapper that counts bytes and accumulates their CRC32."""

    def __init__(self, fh: Any) -> None:
        self.fh, self.size, self.crc = fh, 0, 0

    def write(self, data: bytes | memoryview) -> int:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        return int(self.fh.write(data))


def _write_vectors(path: Path, shape: tuple[int, int], blocks: Iterable[np.ndarray]) -> dict[str, int]:
    """Stream ``blocks`` into a float32 ``.npy`` of ``shape`` durably; returns its size and CRC32."""
    with open(path, "wb") as fh:
        out = _CrcWriter(fh)
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
            "fortran_order": False,
            "shape": shape,
        }
        np.lib.format.write_array_header_1_0(out, header)  # type: ignore[arg-type]
        written = 0
        for block in blocks:
            out.write(np.ascontiguousarray(block, dtype="<f4").data.cast("B"))
            written += len(block)
        if written != shape[0]:
            raise RuntimeError(f"{path}: wrote {written} rows, expected {shape[0]}")
        fh.flush()
        os.fsync(fh.fileno())
    return {"bytes": out.size, "crc32": out.crc}


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def open_faiss(path: Path | None, dimension: int) -> FaissVectorStore:
    """The registry's factory: a FAISS index under ``path`` (``None``: in memory)."""
    return FaissVectorStore(path, dimension=dimension)
