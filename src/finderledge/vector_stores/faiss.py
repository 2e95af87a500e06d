"""FAISS as a FinderLedge vector store: exact cosine search, persisted incrementally and without pickle.

Search runs on one in-memory ``IndexFlatIP`` over L2-normalised vectors (:class:`~.flat_rows.FlatRows`,
which keeps the row id of each position itself: no ``IndexIDMap2`` reverse map to fill at open).  Row ids are
insertion sequence numbers, so rows keep insertion order and results (ties included) are the same after a
reopen.  A persisted store of an approximate ``vector_index`` kind holds no such copy: its rows are read from
the segments' ``vectors.npy`` read on demand (``os.pread``, :class:`~.flat_rows.MappedRows`) through the
descriptor each file's CRC32 was checked through at opening, so a file renamed over it later is never read;
rows added since opening sit in an in-memory overlay until a flush writes them and they are read from there in
turn.  A file changed in place (same inode) after the check would be read unchecked: segments are immutable and
written by rename, so only someone with write access to the index could do that.

On disk (``faiss/``) the files are kept by the segment layer shared with the BM25 store
(:mod:`finderledge.storage.segments`: manifest, immutable segments, tombstones, tiered merges, garbage collection,
every file opened through it).  A segment here is ``vectors.npy`` (float32, normalised), ``seq.npy`` (int64
sequence number per row, ascending), ``ids.json`` and ``meta.json`` (the chunks' metadata, parsed when a
filter or merge needs it); a tombstone file holds a segment's deleted row numbers (int64).

A flush writes the new rows as one segment, merges a tier of ``MERGE_FACTOR`` similar-sized segments and
rewrites a segment with over ``MAX_DELETED_RATIO`` deleted rows.  The rows it writes are read, a block at a
time, from the in-memory index itself (which holds every live vector), so a flush or merge never holds a
second copy of the matrix.  Opening checks sizes, every file's CRC32 and the vectors' shape; the vectors'
CRC32 is computed over each block while it is read into the index (one read of the bytes, not two; read,
not mapped, so no page of the files stays counted in the process's memory beside the index's copy).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IncompatibleIndexError, IndexCorruptError
from ..filters import compile_filter, filter_key
from ..metadata import copies_per_object, share_equal
from ..partitions import partition_of
from ..storage.files import index_folder
from ..storage.integrity import corrupt_on_error, parse_json
from ..storage.segments import (
    BLOCK_BYTES,
    MANIFEST,
    CrcCheck,
    FileInfo,
    SegmentFiles,
    SegmentWriter,
    deletes_name,
    file_info,
    needs_rewrite,
    non_negative,
    plan_merges,
    segment_name,
    segment_number,
)
from .ann_index import FLAT, MIN_CANDIDATES, MIN_ROWS, VECTOR_INDEXES, AnnIndex
from .base import VectorStore
from .flat_rows import FileRows, FlatRows, MappedRows
from .partition_rows import PartitionRows, live_rows

__all__ = ["FaissVectorStore", "VectorIndexCorruptError", "open_faiss"]

logger = logging.getLogger(__name__)

FORMAT_NAME = "finderledge.faiss_store"
FORMAT_VERSION = 2
VECTORS_FILE, SEQ_FILE, IDS_FILE, META_FILE = "vectors.npy", "seq.npy", "ids.json", "meta.json"
SEGMENT_FILES = (VECTORS_FILE, SEQ_FILE, IDS_FILE, META_FILE)
ANN_FILE = "index.faiss"  # an approximate index (vector_index), in a segment folder of its own
MERGE_FACTOR = 8
RESAVE_SHARE = 0.1  # an approximate index is written again once this share of its rows was added since
MAX_DELETED_RATIO = 0.3

#: filters whose allowed rows are kept between writes (one per tenant of a multi-tenant index)
MASK_CACHE_SIZE = 4096


class VectorIndexCorruptError(IndexCorruptError):
    """The FAISS index at ``path`` cannot be read consistently: ``reason`` says why.  Nothing was changed."""


@dataclass(eq=False)
class _Segment:
    """An immutable block of rows.  Only its tombstones (``live``) change.

    ``name`` is empty for the rows added since the last flush (their vectors live in the FAISS index only).
    A written segment keeps the checked bytes of ``meta.json`` (``meta_raw``), parsed on first use, so a
    reader never needs a file that another process's flush may have deleted since.
    """

    name: str
    seq: np.ndarray  # int64 FAISS id per row, ascending
    live: np.ndarray  # bool per row
    files: dict[str, FileInfo] = field(default_factory=dict)
    metas: list[dict[str, Any]] | None = None  # None until parsed
    meta_raw: bytes | None = None
    meta_path: Path | None = None
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
        """The metadata of every row, deleted ones included, parsed on first use."""
        if self.metas is None:
            assert self.meta_raw is not None and self.meta_path is not None
            metas = parse_json(self.meta_raw, self.meta_path, VectorIndexCorruptError)
            if (
                not isinstance(metas, list)
                or len(metas) != self.rows
                or not all(isinstance(m, dict) for m in metas)
            ):
                raise VectorIndexCorruptError(
                    self.meta_path, f"expected a list of {self.rows} metadata objects"
                )
            self.metas, self.meta_raw = share_equal(metas), None
        return self.metas


class FaissVectorStore(VectorStore):
    """Exact cosine search (``IndexFlatIP`` over L2-normalised vectors) with an id map and metadata filters.

    Opening checks the CRC32 of every file of every segment (the vectors' while they are copied into the
    in-memory index).
    """

    name = "faiss"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        dimension: int,
        vector_index: str = FLAT,
        ann_min_rows: int | None = None,
    ) -> None:
        import faiss

        if vector_index not in VECTOR_INDEXES:
            from ..errors import ConfigurationError

            raise ConfigurationError(
                f"setting 'vector_index': expected one of {list(VECTOR_INDEXES)}, got {vector_index!r}"
            )

        self._faiss: Any = faiss
        self.path = None if path is None else Path(path)
        self.dimension = int(dimension)
        self._lock = threading.RLock()
        self._seq_of: dict[str, int] = {}
        self._pending: dict[str, tuple[int, dict[str, Any]]] = {}  # rows not flushed yet: seq, metadata
        self._segments: list[_Segment] = []
        self._next_seq = 0
        self._next_segment = 0
        self._generation = 0
        self._dirty = False
        self._gc_pending = False  # the manifest was written but unused files may remain
        self._mask_cache: dict[str, np.ndarray] = {}
        self.partition_key: str | None = None  # see set_partition_key
        self._partitions: PartitionRows | None = None  # built on the first pinned search
        # an approximate kind persisted reads its rows from the checked segment files (rescoring reads only
        # the candidates' pages); flat and in-memory stores hold them in the FAISS index
        self._rows: FlatRows = (
            FlatRows(faiss, self.dimension)
            if path is None or vector_index == FLAT
            else MappedRows(faiss, self.dimension)
        )
        self.vector_index = vector_index
        # fewer live rows: exact search only (None: MIN_ROWS)
        self.ann_min_rows = max(1, int(MIN_ROWS if ann_min_rows is None else ann_min_rows))
        self._ann: AnnIndex | None = None  # the approximate index (vector_index other than flat), once built
        self._ann_saved: dict[str, Any] | None = None  # its manifest entry, once written
        self._files: SegmentFiles | None = None
        if self.path is not None:
            index_folder(self.path)  # a link at faiss/ would lead every write elsewhere: refused
            self._files = SegmentFiles(self.path, VectorIndexCorruptError)
            self._files.check_folders()  # a flush writes into them: never through a link out
            if self._files.has_manifest():
                self._open(self._files)

    # -- opening ------------------------------------------------------------------------------------
    def _open(self, files: SegmentFiles) -> None:
        with corrupt_on_error(files.manifest_path, VectorIndexCorruptError):  # whatever a crafted file raises
            mapped = isinstance(self._rows, MappedRows)
            manifest, segments, id_lists, vectors = _load_manifest(files, self.dimension, mapped)
            self._seq_of = _id_map(segments, id_lists, manifest["live_count"], files)
            _fill(self._rows, segments, id_lists, vectors, files)
            self._segments = segments
            self._next_seq = manifest["next_seq"]
            self._next_segment = manifest["next_segment"]
            self._generation = manifest["generation"]
            self._open_ann(files, manifest)

    def _open_ann(self, files: SegmentFiles, manifest: Mapping[str, Any]) -> None:
        """Load the approximate index the manifest names (if it is of this store's ``vector_index``), then add
        the rows written after it; an index of another kind is left to be built again (reindex switched it)."""
        entry = manifest.get("ann")
        if entry is None:
            return
        mpath, err = files.manifest_path, VectorIndexCorruptError
        if not isinstance(entry, dict):
            raise err(mpath, "'ann' is not an object")
        name = files.segment_name(entry.get("name"))
        if segment_number(name) >= self._next_segment or any(s.name == name for s in self._segments):
            raise err(mpath, f"approximate index {name} clashes with the segment counters")
        upto = non_negative(entry.get("upto"), "ann upto", mpath, err)
        trained = non_negative(entry.get("trained_rows"), "ann trained_rows", mpath, err)
        listed = entry.get("files")
        if upto > self._next_seq or not isinstance(listed, dict) or set(listed) != {ANN_FILE}:
            raise err(mpath, f"approximate index {name}: bad counters or file list")
        info = file_info(listed[ANN_FILE], f"{name}/{ANN_FILE}", mpath, err)
        if entry.get("kind") != self.vector_index:
            return  # another kind (vector_index switched): the folder goes at the next flush, built anew
        fname = files.segment_file(name, ANN_FILE)
        data = files.read(fname, info)  # checked against the manifest's size and CRC32 before FAISS parses it
        try:
            ann = AnnIndex.from_bytes(self._faiss, self.vector_index, data, self.dimension, trained)
        except (ValueError, RuntimeError) as exc:
            raise err(files.root / fname, f"not a readable {self.vector_index} index ({exc})") from None
        del data
        seq = self._rows.seq
        older = int(np.searchsorted(seq, upto))
        ann.dead = ann.size - older
        if ann.dead < 0:
            raise err(files.root / fname, f"holds {ann.size} rows, {older} live rows were written before it")
        if older < len(seq):  # rows written after it: added now (and the index written again at a flush)
            ann.add(np.ascontiguousarray(self._rows.matrix()[older:]), seq[older:])
        self._ann, self._ann_saved = ann, dict(entry)

    # -- persistence --------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the changes since the last flush (new segment, tombstones, merges), then the manifest."""
        with self._lock:
            self._maintain_ann()
            files = self._files
            if files is None or not (self._dirty or self._gc_pending):
                return
            if self._dirty:
                self._commit(files)
            self._gc_pending = True
            files.collect_garbage(
                [s.name for s in self._segments] + ([self._ann_saved["name"]] if self._ann_saved else []),
                [deletes_name(s.name, s.deletes["gen"]) for s in self._segments if s.deletes],
                extra=(MANIFEST + ".tmp",),
            )
            self._gc_pending = False

    def _commit(self, files: SegmentFiles) -> None:
        """Write new segments and tombstones, then the manifest (the commit point); caller holds the lock."""
        files.prepare()
        old_names = {s.name for s in self._segments}
        generation, next_segment = self._generation + 1, self._next_segment
        segments = [s for s in self._segments if s.n_live]
        if self._pending:
            segments.append(_pending_segment(self._pending.values()))
        final: list[_Segment] = []
        tombstones: list[tuple[_Segment, dict[str, int]]] = []
        for group in plan_merges([s.n_live for s in segments], MERGE_FACTOR):
            seg = segments[group[0]]
            if len(group) == 1 and seg.name and not needs_rewrite(seg.rows, seg.n_deleted, MAX_DELETED_RATIO):
                if seg.deletes_dirty:
                    dead = np.flatnonzero(~seg.live).astype("<i8")
                    _, info = files.write_tombstones(seg.name, generation, dead)
                    tombstones.append((seg, {"gen": generation, "count": len(dead), **info}))
            else:
                seg = self._write_segment(files, segment_name(next_segment), [segments[i] for i in group])
                next_segment += 1
            final.append(seg)
        new_deletes = {id(seg): deletes for seg, deletes in tombstones}
        entries = [
            {"name": s.name, "rows": s.rows, "files": s.files, "deletes": new_deletes.get(id(s), s.deletes)}
            for s in final
        ]
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
        ann_entry = self._save_ann(files, next_segment)
        if ann_entry is not None:
            body["ann"] = ann_entry
            next_segment = max(next_segment, segment_number(ann_entry["name"]) + 1)
            body["next_segment"] = next_segment
        files.write_manifest(body)
        self._ann_saved = ann_entry
        # committed: from here on the in-memory state must describe the new manifest
        for seg, deletes in tombstones:
            seg.deletes, seg.deletes_dirty = deletes, False
        self._segments, self._generation, self._next_segment = final, generation, next_segment
        self._pending.clear()
        self._dirty = False
        if isinstance(self._rows, MappedRows):
            self._map_written(files, [s for s in final if s.name not in old_names])

    def _map_written(self, files: SegmentFiles, written: Sequence[_Segment]) -> None:
        """Read the rows of segments just written from their files from now on (once their CRC32 was
        checked), so the overlay and the maps of merged segments are released; on failure the rows stay
        where they are (still right) and the error is logged."""
        assert isinstance(self._rows, MappedRows)
        for seg in written:
            try:
                part = _checked_rows(
                    files,
                    files.segment_file(seg.name, VECTORS_FILE),
                    seg.files[VECTORS_FILE],
                    (seg.rows, self.dimension),
                )
            except IndexCorruptError as exc:
                logger.warning("%s: keeping segment %s's rows where they were: %s", self.path, seg.name, exc)
                continue
            self._rows.relocate(seg.seq, part)

    def close(self) -> None:
        """Close an approximate kind's segment files (their descriptors, read on demand); a flat store's vectors
        live in the in-memory index: nothing to release."""
        with self._lock:
            if isinstance(self._rows, MappedRows):
                self._rows.close()

    # -- the approximate index ----------------------------------------------------------------------
    def set_vector_index(self, kind: str) -> None:
        """Search through ``kind`` from now on (``reindex(vector_index=...)``): the old approximate index is
        dropped, the new one built at the next flush (its folder replaces the old one's there)."""
        if kind not in VECTOR_INDEXES:
            from ..errors import ConfigurationError

            raise ConfigurationError(
                f"setting 'vector_index': expected one of {list(VECTOR_INDEXES)}, got {kind!r}"
            )
        with self._lock:
            if kind != self.vector_index:
                self.vector_index, self._ann, self._ann_saved = kind, None, None
                self._dirty = True

    def _maintain_ann(self) -> None:
        """At a flush (a checkpoint): build the approximate index once there are ``ann_min_rows`` live rows,
        and build it again (retrained) when it went stale (see :mod:`.ann_index`); caller holds the lock."""
        if self.vector_index == FLAT:
            return
        live = len(self._rows)
        if live < self.ann_min_rows:
            if self._ann is not None:  # shrunk below the threshold: exact search again
                self._ann, self._dirty = None, True
            return
        if self._ann is not None and not self._ann.stale(live):
            return
        started = time.perf_counter()
        self._ann = AnnIndex.build(self._faiss, self.vector_index, self._rows.matrix(), self._rows.seq.copy())
        self._ann.unsaved = self._ann.size  # written at this flush
        self._dirty = True
        logger.info(
            "%s: built the %s index over %d rows in %.1f s",
            self.path,
            self.vector_index,
            live,
            time.perf_counter() - started,
        )

    def _save_ann(self, files: SegmentFiles, next_segment: int) -> dict[str, Any] | None:
        """The manifest entry of the approximate index, written first as a segment folder of its own when it
        is new or a ``RESAVE_SHARE`` of its rows were added since it was written (else the entry it has)."""
        ann = self._ann
        if ann is None:
            return None
        if self._ann_saved is not None and ann.unsaved <= RESAVE_SHARE * max(ann.size - ann.unsaved, 1):
            return self._ann_saved
        name = segment_name(next_segment)
        data = ann.to_bytes()
        written = files.write_segment(name, lambda out: out.write(ANN_FILE, data.data))
        ann.unsaved = 0
        return {
            "name": name,
            "kind": ann.kind,
            "upto": self._next_seq,
            "trained_rows": ann.trained_rows,
            "rows": ann.size,
            "files": written,
        }

    def _ann_search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> list[list[tuple[str, float]]] | None:
        """The ``k`` best rows per query through the approximate index, rescored exactly from the float32 rows
        (among positions ``allowed`` if given); ``None`` when an exact search should answer instead (no index,
        too few rows or allowed rows for it to pay, or it found fewer than ``k``)."""
        ann = self._ann
        total = len(self._rows) if allowed is None else len(allowed)
        if ann is None:
            return None
        want = max(ann.overfetch * k, MIN_CANDIDATES)
        if total < self.ann_min_rows or want >= total:
            return None
        seq = self._rows.seq
        labels = ann.search(
            queries,
            # deleted rows are still in it (at most MAX_DEAD of them): ask for that share more
            want + (want * ann.dead) // max(ann.size - ann.dead, 1),
            None if allowed is None else seq[allowed],
            self._next_seq,
        )
        matrix, ids = self._rows.matrix(), self._rows.ids
        out: list[list[tuple[str, float]]] = []
        for query, found in zip(queries, labels):
            found = found[found >= 0]
            pos = np.minimum(np.searchsorted(seq, found), len(seq) - 1)
            pos = pos[seq[pos] == found]  # deleted rows are still in the approximate index
            if len(pos) < k:
                return None
            scores = matrix[pos] @ query
            order = np.lexsort((pos, -scores))[:k]  # best first; equal scores: the lower position, as FAISS
            out.append([(ids[p], s) for p, s in zip(pos[order].tolist(), scores[order].tolist())])
        return out

    def _write_segment(self, files: SegmentFiles, name: str, sources: Sequence[_Segment]) -> _Segment:
        """Write the live rows of ``sources`` in sequence order as segment ``name``; the vectors are read
        from the in-memory index a block at a time (no second copy of the matrix)."""
        rows = [np.flatnonzero(s.live) for s in sources]
        seqs, part_idx, row_idx = _sorted_layout([s.seq[r] for s, r in zip(sources, rows)], rows)
        metas_of = [s.load_metas() for s in sources]
        metas = [metas_of[p][r] for p, r in zip(part_idx.tolist(), row_idx.tolist())]
        positions = self._rows.positions(seqs)
        ids = self._rows.ids[positions].tolist()

        def write(out: SegmentWriter) -> None:
            matrix = self._rows.matrix()  # a view of the index's own storage
            out.write_rows(VECTORS_FILE, (len(seqs), self.dimension), _row_blocks(matrix, positions))
            out.write_npy(SEQ_FILE, seqs, "<i8")
            out.write_json(IDS_FILE, ids)
            out.write_json(META_FILE, metas)

        written = files.write_segment(name, write)
        logger.debug(
            "%s: wrote segment %s (%d rows from %d source(s))", self.path, name, len(seqs), len(sources)
        )
        return _Segment(name=name, seq=seqs, live=np.ones(len(seqs), dtype=bool), files=written, metas=metas)

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
        last = {sid: i for i, sid in enumerate(ids)}  # an id given twice: the last one wins
        if len(last) != len(ids):
            keep = sorted(last.values())
            ids, vectors, metadatas = [ids[i] for i in keep], vectors[keep], [metadatas[i] for i in keep]
        cleaned = copies_per_object(metadatas)
        with self._lock:
            self.delete([i for i in ids if i in self._seq_of])
            seqs = np.arange(self._next_seq, self._next_seq + len(ids), dtype=np.int64)
            self._next_seq += len(ids)
            _add_normalised(self._rows, vectors, seqs, ids)
            if self._ann is not None:
                self._ann.add(np.ascontiguousarray(self._rows.matrix()[-len(seqs) :]), seqs)
            for sid, seq, md in zip(ids, seqs.tolist(), cleaned):
                self._seq_of[sid] = seq
                self._pending[sid] = (seq, md)
            if self._partitions is not None:
                self._partitions.add(zip(seqs.tolist(), cleaned))
            self._changed()

    def reserve(self, count: int) -> None:
        """Grow the index's storage now for ``count`` more rows: added later (e.g. 5,000 at a time by a big
        catch-up), they never make the storage reallocate, which copies every row held so far (a 200 MB file
        peaked there, the old and the new storage both held)."""
        if count > 0:
            with self._lock:
                self._rows.reserve(len(self._rows) + count)

    def delete(self, ids: Iterable[str]) -> None:
        with self._lock:
            known = [i for i in dict.fromkeys(ids) if i in self._seq_of]
            if not known:
                return
            seqs = [self._seq_of.pop(sid) for sid in known]
            flushed = [seq for sid, seq in zip(known, seqs) if self._pending.pop(sid, None) is None]
            if flushed:
                self._tombstone(np.array(flushed, dtype=np.int64))
            self._rows.remove(np.sort(np.array(seqs, dtype=np.int64)))
            if self._ann is not None:
                self._ann.dead += len(seqs)
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
            if len(self._rows) == 0 or k < 1:
                return []
            allowed = None
            limit = len(self._rows)
            value = partition_of(filter, self.partition_key)
            if value is not None and filter is not None:
                return self._search_partition(value, query[0], k, filter)
            if filter:
                allowed = self._allowed(filter)
                if len(allowed) == 0:
                    return []
                limit = len(allowed)
            found = self._ann_search(query, k, allowed)
            if found is not None:
                return found[0]
            return self._rows.search(query, min(k, limit), allowed)[0]

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
            if len(self._rows) == 0 or k < 1:
                return [[] for _ in range(len(queries))]
            found = self._ann_search(queries, k, None)
            if found is not None:
                return found
            return self._rows.search(queries, min(k, len(self._rows)))

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
            pending = iter(self._pending.values())
            self._partitions = PartitionRows(self.partition_key, live_rows(self._segments, pending))
        return self._partitions.search(
            value, query, k, compile_filter(flt), self._rows.vectors_of, self._rows.id_of
        )

    def _allowed(self, flt: Mapping[str, Any]) -> np.ndarray:
        """Index positions of the live rows that pass ``flt``, cached per filter until the next write."""
        key = filter_key(flt)
        cached = self._mask_cache.get(key)
        if cached is None:
            pred = compile_filter(flt)
            assert pred is not None
            allowed: list[int] = []
            for seg in self._segments:
                metas, seqs = seg.load_metas(), seg.seq.tolist()
                allowed.extend(seqs[r] for r in np.flatnonzero(seg.live).tolist() if pred(metas[r]))
            allowed.extend(seq for seq, md in self._pending.values() if pred(md))
            cached = self._rows.positions(np.array(allowed, dtype=np.int64))
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
    files: SegmentFiles, dimension: int, mapped: bool = False
) -> tuple[dict[str, Any], list[_Segment], list[list[str]], list[tuple[FileRows, CrcCheck | None]]]:
    """Read and check the manifest and every segment it names; returns it, the segments, their ids and
    their vectors (descriptors read once while the index is filled) with their pending CRC32 checks."""
    mpath, err = files.manifest_path, VectorIndexCorruptError
    manifest = files.read_manifest(FORMAT_NAME, FORMAT_VERSION, "FAISS index")
    for key in ("dimension", "generation", "next_segment", "next_seq", "live_count"):
        non_negative(manifest.get(key), key, mpath, err)
    if manifest["dimension"] != dimension:
        raise IncompatibleIndexError(
            f"FAISS index at {files.root} has dimension {manifest['dimension']}, "
            f"the embedding model gives {dimension}"
        )
    entries = manifest.get("segments")
    if not isinstance(entries, list):
        raise err(mpath, "'segments' is not a list")
    segments: list[_Segment] = []
    id_lists: list[list[str]] = []
    vectors: list[tuple[FileRows, CrcCheck | None]] = []
    for entry in entries:
        seg, ids, vecs = _load_segment(files, entry, dimension, manifest["next_seq"], mapped)
        if any(seg.name == other.name for other in segments):
            raise err(mpath, f"segment {seg.name} is listed twice")
        # a flush reuses names from next_segment and generations after generation: they must be unused
        if segment_number(seg.name) >= manifest["next_segment"] or (
            seg.deletes and seg.deletes["gen"] > manifest["generation"]
        ):
            raise err(mpath, f"segment {seg.name} is newer than the manifest's counters")
        segments.append(seg)
        id_lists.append(ids)
        vectors.append(vecs)
    return manifest, segments, id_lists, vectors


def _add_normalised(rows: FlatRows, vectors: np.ndarray, seqs: np.ndarray, ids: Sequence[str]) -> None:
    """Add ``vectors`` (L2-normalised here) as rows ``seqs``, a block at a time: no normalised copy of the
    whole input, and the index's storage grown once for all of them rather than block by block."""
    rows.reserve(len(rows) + len(vectors))
    step = max(1, BLOCK_BYTES // (4 * max(vectors.shape[1], 1)))
    for lo in range(0, len(vectors), step):
        block = vectors[lo : lo + step]
        block = block / np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
        rows.append(np.ascontiguousarray(block, dtype=np.float32), seqs[lo : lo + step], ids[lo : lo + step])


def _id_map(
    segments: Sequence[_Segment], id_lists: Sequence[list[str]], live_count: int, files: SegmentFiles
) -> dict[str, int]:
    """Chunk id -> sequence number for the live rows; every id must occur once (sequence numbers are
    checked by :func:`_fill`)."""
    seq_of: dict[str, int] = {}
    for seg, ids in zip(segments, id_lists):
        live_ids = list(compress(ids, seg.live.tolist())) if seg.n_deleted else ids
        live_seq = seg.seq[seg.live].tolist() if seg.n_deleted else seg.seq.tolist()
        seq_of.update(zip(live_ids, live_seq))
    live = sum(s.n_live for s in segments)
    if len(seq_of) != live:
        raise VectorIndexCorruptError(files.manifest_path, "a chunk id occurs twice")
    if live != live_count:
        raise VectorIndexCorruptError(
            files.manifest_path, f"segments hold {live} rows, the manifest says {live_count}"
        )
    return seq_of


def _fill(
    rows: FlatRows,
    segments: Sequence[_Segment],
    id_lists: Sequence[list[str]],
    vectors: Sequence[tuple[FileRows, CrcCheck | None]],
    files: SegmentFiles,
) -> None:
    """Copy the live rows of every segment into the empty ``rows`` in sequence order, straight into the
    index's storage (sized once), checking each vectors file's CRC32 over its blocks as they are copied."""
    live = [np.flatnonzero(s.live) for s in segments]
    total = sum(len(r) for r in live)
    seqs = np.concatenate([s.seq[r] for s, r in zip(segments, live)]) if total else np.empty(0, np.int64)
    ids = np.empty(total, dtype=object)
    at = 0
    for seg, id_list, r in zip(segments, id_lists, live):
        ids[at : at + len(r)] = id_list if not seg.n_deleted else [id_list[i] for i in r.tolist()]
        at += len(r)
    order = np.argsort(seqs, kind="stable")
    seqs = seqs[order]
    if len(seqs) > 1 and not bool(np.all(np.diff(seqs) > 0)):
        raise VectorIndexCorruptError(files.manifest_path, "a sequence number occurs twice")
    target = np.empty(total, dtype=np.int64)
    target[order] = np.arange(total, dtype=np.int64)  # the position of each live row, segment by segment
    if isinstance(rows, MappedRows):  # checked already: each row is read from its segment's file
        part_of = np.repeat(np.arange(len(segments), dtype=np.int32), [len(r) for r in live])
        row_of = np.concatenate(live).astype(np.int64) if total else np.empty(0, np.int64)
        rows.fill_mapped(seqs, ids[order], [v for v, _ in vectors], part_of[order], row_of[order])
        return
    matrix = rows.fill(seqs, ids[order])
    at = 0
    for seg, r, (vecs, crc) in zip(segments, live, vectors):
        assert crc is not None
        _copy_checked(matrix, vecs, seg.live, target[at : at + len(r)], crc)
        at += len(r)


def _copy_checked(
    matrix: np.ndarray, vecs: FileRows, live: np.ndarray, target: np.ndarray, crc: CrcCheck
) -> None:
    """Read the live rows of one segment's ``vecs`` into rows ``target`` of ``matrix``, a block at a time
    (a run of live rows straight into the matrix), adding every block (dead rows too) to the file's CRC32,
    which is checked at the end; the descriptor is closed then."""
    step = max(1, BLOCK_BYTES // 8 // (4 * max(vecs.shape[1], 1)))  # a block stays in cache from read to CRC
    scratch: np.ndarray | None = None
    done = 0
    try:
        for lo in range(0, len(vecs), step):
            size = min(step, len(vecs) - lo)
            keep = live[lo : lo + size]
            count = int(np.count_nonzero(keep))
            to = target[done : done + count]
            done += count
            if count == size and int(to[-1]) - int(to[0]) == count - 1:  # a run: read into its rows
                block = matrix[int(to[0]) : int(to[-1]) + 1]
                vecs.read_into(block, lo)
                crc.update(block)
                continue
            if scratch is None:
                scratch = np.empty((step, vecs.shape[1]), dtype=np.float32)
            block = scratch[:size]
            vecs.read_into(block, lo)
            crc.update(block)
            if count:
                matrix[to] = block[keep]
    finally:
        vecs.close()
    crc.verify()


def _pending_segment(rows: Iterable[tuple[int, dict[str, Any]]]) -> _Segment:
    """The rows added since the last flush (sequence number, metadata) as an unwritten segment."""
    ordered = sorted(rows, key=lambda r: r[0])
    return _Segment(
        name="",
        seq=np.array([r[0] for r in ordered], dtype=np.int64),
        live=np.ones(len(ordered), dtype=bool),
        metas=[r[1] for r in ordered],
    )


def _load_segment(
    files: SegmentFiles, entry: Any, dimension: int, next_seq: int, mapped: bool = False
) -> tuple[_Segment, list[str], tuple[FileRows, CrcCheck | None]]:
    """Check one manifest entry and its files (sizes, CRC32s but the vectors', shapes); returns the segment,
    its ids and its vectors (read on demand) with the check of their CRC32, made while they are copied
    (``mapped``: a :class:`FileRows` checked already, through the descriptor it reads; the check is None)."""
    mpath, err = files.manifest_path, VectorIndexCorruptError
    if not isinstance(entry, dict):
        raise err(mpath, "a segment entry is not an object")
    name = files.segment_name(entry.get("name"))
    path_of = {fname: files.segment_file(name, fname) for fname in SEGMENT_FILES}  # checks the name
    rows = non_negative(entry.get("rows"), f"{name} rows", mpath, err)
    listed = entry.get("files")
    if rows == 0 or not isinstance(listed, dict) or set(listed) != set(SEGMENT_FILES):
        raise err(mpath, f"segment {name}: bad row count or file list")
    infos = {fname: file_info(listed[fname], f"{name}/{fname}", mpath, err) for fname in SEGMENT_FILES}
    ids = files.json(path_of[IDS_FILE], infos[IDS_FILE])
    if not isinstance(ids, list) or len(ids) != rows or not set(map(type, ids)) <= {str}:
        raise err(files.root / path_of[IDS_FILE], f"expected a list of {rows} string ids")
    seq = files.npy(path_of[SEQ_FILE], infos[SEQ_FILE])
    if seq.dtype != np.dtype("<i8") or seq.shape != (rows,):
        raise err(
            files.root / path_of[SEQ_FILE], f"expected <i8 of shape ({rows},), got {seq.dtype} {seq.shape}"
        )
    if seq[0] < 0 or seq[-1] >= next_seq or (rows > 1 and not bool(np.all(np.diff(seq) > 0))):
        raise err(files.root / path_of[SEQ_FILE], "sequence numbers are not ascending below next_seq")
    meta_raw = files.read(path_of[META_FILE], infos[META_FILE])  # parsed when a filter needs it
    # every vector is copied into the in-memory index right after this: its CRC32 is computed over the
    # blocks as they are copied (_copy_checked; one read of the file), so a flipped byte is a rebuild, not NaNs
    vectors: Any
    crc: CrcCheck | None = None
    if mapped:
        vectors = _checked_rows(files, path_of[VECTORS_FILE], infos[VECTORS_FILE], (rows, dimension))
    else:  # read (not mapped) while copied: a map's pages stayed counted in memory beside their copies
        fd, offset, head = files.npy_fd(path_of[VECTORS_FILE], infos[VECTORS_FILE], "<f4", (rows, dimension))
        vectors = FileRows(fd, offset, rows, dimension, files.root / path_of[VECTORS_FILE], err)
        crc = CrcCheck(files.root / path_of[VECTORS_FILE], infos[VECTORS_FILE], err, head)
    seg = _Segment(
        name=name,
        seq=seq,
        live=np.ones(rows, dtype=bool),
        files=infos,
        meta_raw=meta_raw,
        meta_path=files.root / path_of[META_FILE],
    )
    deletes = entry.get("deletes")
    if deletes is not None:
        if not isinstance(deletes, dict):
            raise err(mpath, f"segment {name}: 'deletes' is not an object")
        gen = non_negative(deletes.get("gen"), f"{name} deletes gen", mpath, err)
        count = non_negative(deletes.get("count"), f"{name} deletes count", mpath, err)
        info = file_info(deletes, f"{name} deletes", mpath, err)
        dead = files.read_tombstones(files.deletes_file(deletes_name(name, gen)), info, count, rows)
        seg.live[dead] = False
        seg.n_deleted = count
        seg.deletes = {"gen": gen, "count": count, **info}
    return seg, ids, (vectors, crc)


def _checked_rows(files: SegmentFiles, name: str, info: FileInfo, shape: tuple[int, int]) -> FileRows:
    """The rows of vectors file ``name``, read on demand through the descriptor its CRC32 was checked through."""
    fd, offset = files.checked_npy_fd(name, info, "<f4", shape)
    return FileRows(fd, offset, shape[0], shape[1], files.root / name, VectorIndexCorruptError)


# --------------------------------------------------------------------------------------------------
# Row order and blocks
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


def _row_blocks(matrix: np.ndarray, positions: np.ndarray) -> Iterator[np.ndarray]:
    """``matrix[positions]`` a block of about ``BLOCK_BYTES`` at a time (a run of rows is a view)."""
    step = max(1, BLOCK_BYTES // (4 * max(matrix.shape[1], 1)))
    for lo in range(0, len(positions), step):
        rows = positions[lo : lo + step]
        if int(rows[-1]) - int(rows[0]) == len(rows) - 1:
            yield matrix[int(rows[0]) : int(rows[-1]) + 1]
        else:
            yield matrix[rows]


def open_faiss(
    path: Path | None, dimension: int, vector_index: str = FLAT, ann_min_rows: int | None = None
) -> FaissVectorStore:
    """The registry's factory: a FAISS index under ``path`` (``None``: in memory) searched through
    ``vector_index`` (:data:`.ann_index.VECTOR_INDEXES`) once it holds ``ann_min_rows`` rows."""
    return FaissVectorStore(path, dimension=dimension, vector_index=vector_index, ann_min_rows=ann_min_rows)
