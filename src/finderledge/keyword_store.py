"""BM25 keyword store: the keyword leg of FinderLedge.

Design (Lucene-like, small):

* Immutable **segments**: per segment a CSR inverted index (``terms`` -> ``indptr`` -> ``docs``/``tfs``
  numpy arrays), the document lengths, ids and metadata.  Nothing in a segment changes after it is
  built except its tombstone mask, so it can be memory-mapped from disk.
* A small mutable in-memory **buffer** (plain dicts) takes new chunks; it becomes a segment when it
  reaches ``buffer_size`` chunks or on :meth:`KeywordStore.flush`.
* **Tombstones** mark deleted or replaced chunks; document frequencies are counted over live
  postings only and the live token total / chunk count are maintained on every write, so IDF and
  the average length always describe the live corpus.
* **Tiered merging**: when a size tier holds ``merge_factor`` segments they are merged into one;
  a segment with more than ``max_deleted_ratio`` tombstones is rewritten without them.  Each chunk
  is therefore rewritten O(log n) times over its life and the number of segments stays O(log n).

Scoring is Okapi BM25 with the Lucene IDF::

    idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
    score    = sum over query tokens t of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

(bm25s' "lucene" method and Lucene >= 8 leave out the constant factor ``k1 + 1``; rankings are
identical and our scores are exactly ``(k1 + 1)`` times theirs.)

The on-disk format is documented in ``docs/keyword_store.md``.
"""

from __future__ import annotations

import heapq
import json
import logging
import math
import os
import re
import shutil
import threading
import zlib
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from finderledge.durable import fsync_dir, manifest_checksum, npy_bytes, write_file
from finderledge.errors import IndexCorruptError
from finderledge.filters import Predicate, compile_filter, filter_key
from finderledge.integrity import (
    SEGMENT_NAME,
    checked_path,
    corrupt_on_error,
    is_inside,
    parse_json,
    parse_npy,
    read_file,
    real_folder,
)
from finderledge.metadata import share_equal
from finderledge.partitions import partition_of, partition_value, pins_only
from finderledge.storage import index_folder
from finderledge.tokenizer import AutoTokenizer, Tokenizer, UnknownTokenizerError, tokenizer_from_dict

__all__ = ["KeywordIndexCorruptError", "KeywordStore"]

logger = logging.getLogger(__name__)

FORMAT_NAME = "finderledge.keyword_store"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_SEGMENTS_DIR = "segments"
_DELETES_DIR = "deletes"
# Files of one segment: name -> (dtype, what its length must equal).
_NPY_FILES: dict[str, tuple[str, str]] = {
    "indptr.npy": ("<i8", "n_terms+1"),
    "docs.npy": ("<i4", "n_postings"),
    "tfs.npy": ("<i4", "n_postings"),
    "lens.npy": ("<i4", "n_docs"),
}
_JSON_FILES = ("terms.json", "ids.json", "meta.json")
_SEGMENT_REL = re.compile(r"segments/seg-[0-9]{8,}")
_DELETES_NAME = re.compile(r"deletes/seg-[0-9]{8,}\.[0-9]{8,}\.npy")


class KeywordIndexCorruptError(IndexCorruptError):
    """The keyword index at ``path`` cannot be opened: ``reason`` says what is wrong.  Nothing was changed."""


# --------------------------------------------------------------------------------------------------
# Segments and the buffer
# --------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class _Segment:
    """One immutable slice of the index (only ``live``/``n_deleted`` change, through tombstones)."""

    name: str
    terms: list[str]
    indptr: np.ndarray  # int64, len(terms) + 1
    docs: np.ndarray  # int32, local doc number per posting, ascending within a term
    tfs: np.ndarray  # int32
    lens: np.ndarray  # int32 token count per doc
    ids: list[str]
    metas: list[dict[str, Any]] | None  # None until loaded (lazily, for filters or merges)
    live: np.ndarray  # bool per doc
    n_deleted: int = 0
    persisted: bool = False
    deletes_file: str | None = None  # committed tombstone file (relative path)
    deletes_dirty: bool = False
    files: dict[str, dict[str, int]] = field(default_factory=dict)  # committed file sizes/crcs
    meta_path: Path | None = None
    meta_file: Any = None  # open handle on meta.json: another process's merge may delete the file
    deletes_info: dict[str, int] = field(default_factory=dict)  # size/crc of ``deletes_file``
    term_index: dict[str, int] = field(default_factory=dict)
    positions: dict[str, int] | None = None  # id -> local doc number, built on first delete
    norm: np.ndarray | None = None  # k1 * (1 - b + b * dl / avgdl) per doc, for ``norm_key``
    norm_key: tuple[float, float] | None = None
    parts: np.ndarray | None = None  # partition code per doc (-1: none), built on first partitioned search
    part_rows: dict[int, np.ndarray] | None = (
        None  # partition code -> its docs (ascending), built with ``parts``
    )
    # CRC32s of the mapped arrays still to check (header bytes, expected CRC), done on first use
    unverified: dict[str, tuple[bytes, int]] = field(default_factory=dict)

    def verify(self) -> None:
        """Check the CRC32 of each mapped array the first time the segment is used (not at open, which
        stays O(manifest)); a flipped byte is :class:`KeywordIndexCorruptError`, never a wrong score."""
        while self.unverified:
            fname, (head, crc) = next(iter(self.unverified.items()))
            arr = {
                "indptr.npy": self.indptr,
                "docs.npy": self.docs,
                "tfs.npy": self.tfs,
                "lens.npy": self.lens,
            }
            if zlib.crc32(np.ascontiguousarray(arr[fname]).data, zlib.crc32(head)) != crc:
                where = self.meta_path.parent / fname if self.meta_path is not None else Path(fname)
                raise KeywordIndexCorruptError(where, "checksum mismatch")
            del self.unverified[fname]

    def length_norm(self, c0: float, c1: float) -> np.ndarray:
        """``c0 + c1 * dl`` per doc, cached until avgdl/k1/b change (O(docs) to refresh)."""
        if self.norm_key != (c0, c1) or self.norm is None:
            self.norm = c0 + c1 * np.asarray(self.lens, dtype=np.float64)
            self.norm_key = (c0, c1)
        return self.norm

    def __post_init__(self) -> None:
        if not self.term_index:
            self.term_index = {t: i for i, t in enumerate(self.terms)}

    @property
    def n_docs(self) -> int:
        return len(self.ids)

    @property
    def n_live(self) -> int:
        return len(self.ids) - self.n_deleted

    def load_metas(self) -> list[dict[str, Any]]:
        """Metadata of every doc (deleted ones included), read from disk on first use."""
        if self.metas is None:
            assert self.meta_path is not None
            if self.meta_file is not None:
                self.meta_file.seek(0)
                raw = self.meta_file.read()
                self.meta_file.close()
                self.meta_file = None
            else:
                raw = self.meta_path.read_bytes()
            info = self.files.get("meta.json")
            if info is not None and (len(raw) != info["bytes"] or zlib.crc32(raw) != info["crc32"]):
                raise KeywordIndexCorruptError(self.meta_path, "checksum mismatch")
            metas = parse_json(raw, self.meta_path, KeywordIndexCorruptError)
            if (
                not isinstance(metas, list)
                or len(metas) != self.n_docs
                or not all(isinstance(m, dict) for m in metas)
            ):
                raise KeywordIndexCorruptError(
                    self.meta_path, f"expected a list of {self.n_docs} metadata objects"
                )
            self.metas = share_equal(metas)
        return self.metas


@dataclass
class _BufferDoc:
    counts: dict[str, int]
    length: int
    meta: dict[str, Any]


class _Buffer:
    """Recent chunks in plain dicts: cheap to add to and delete from, searched term by term."""

    def __init__(self) -> None:
        self.docs: dict[str, _BufferDoc] = {}
        self.postings: dict[str, dict[str, int]] = {}

    def __len__(self) -> int:
        return len(self.docs)

    def add(self, cid: str, counts: dict[str, int], length: int, meta: dict[str, Any]) -> None:
        self.docs[cid] = _BufferDoc(counts, length, meta)
        for term, tf in counts.items():
            post = self.postings.get(term)
            if post is None:
                self.postings[term] = {cid: tf}
            else:
                post[cid] = tf

    def remove(self, cid: str) -> _BufferDoc:
        doc = self.docs.pop(cid)
        for term in doc.counts:
            post = self.postings[term]
            del post[cid]
            if not post:
                del self.postings[term]
        return doc

    def clear(self) -> None:
        self.docs.clear()
        self.postings.clear()


def _build_segment(
    name: str,
    ids: list[str],
    counts: Sequence[Mapping[str, int]],
    lens: Sequence[int],
    metas: list[dict[str, Any]],
) -> _Segment:
    """Build a CSR segment from per-doc term counts (cost linear in the postings, plus one sort)."""
    vocab: dict[str, int] = {}
    tids: list[int] = []
    tfs: list[int] = []
    per_doc = np.empty(len(ids), dtype=np.int64)
    for i, c in enumerate(counts):
        tids.extend([vocab.setdefault(t, len(vocab)) for t in c])
        tfs.extend(c.values())
        per_doc[i] = len(c)
    tid_arr = np.asarray(tids, dtype=np.int32)
    doc_arr = np.repeat(np.arange(len(ids), dtype=np.int32), per_doc)
    order = np.argsort(tid_arr, kind="stable")  # stable: docs stay ascending within a term
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(tid_arr, minlength=len(vocab)), out=indptr[1:])
    return _Segment(
        name=name,
        terms=list(vocab),
        indptr=indptr,
        docs=doc_arr[order],
        tfs=np.asarray(tfs, dtype=np.int32)[order],
        lens=np.asarray(lens, dtype=np.int32),
        ids=ids,
        metas=metas,
        live=np.ones(len(ids), dtype=bool),
    )


def _merge_segments(name: str, segs: Sequence[_Segment]) -> _Segment:
    """Merge ``segs`` into one segment without their tombstoned docs and unused terms."""
    for seg in segs:  # a merge copies postings: never damaged ones
        seg.verify()
    vocab: dict[str, int] = {}
    tid_parts: list[np.ndarray] = []
    doc_parts: list[np.ndarray] = []
    tf_parts: list[np.ndarray] = []
    ids: list[str] = []
    metas: list[dict[str, Any]] = []
    lens_parts: list[np.ndarray] = []
    offset = 0
    for seg in segs:
        seg_metas = seg.load_metas()
        live = seg.live
        new_local = np.cumsum(live, dtype=np.int64) - 1 + offset
        term_map = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for t in seg.terms), dtype=np.int32, count=len(seg.terms)
        )
        rows = np.repeat(np.arange(len(seg.terms), dtype=np.int32), np.diff(seg.indptr))
        docs = np.asarray(seg.docs)
        tfs = np.asarray(seg.tfs)
        if seg.n_deleted:
            keep = live[docs]
            rows, docs, tfs = rows[keep], docs[keep], tfs[keep]
        tid_parts.append(term_map[rows])
        doc_parts.append(new_local[docs].astype(np.int32))
        tf_parts.append(tfs)
        live_idx = np.flatnonzero(live)
        ids.extend(seg.ids[i] for i in live_idx)
        metas.extend(seg_metas[i] for i in live_idx)
        lens_parts.append(np.asarray(seg.lens)[live_idx])
        offset += len(live_idx)
    tid_arr = np.concatenate(tid_parts) if tid_parts else np.zeros(0, np.int32)
    counts = np.bincount(tid_arr, minlength=len(vocab))
    terms = list(vocab)
    if (counts == 0).any():  # terms whose every posting was deleted: drop and renumber
        used = counts > 0
        renum = np.cumsum(used, dtype=np.int64) - 1
        tid_arr = renum[tid_arr].astype(np.int32)
        terms = [t for t, u in zip(terms, used) if u]
        counts = counts[used]
    order = np.argsort(tid_arr, kind="stable")
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return _Segment(
        name=name,
        terms=terms,
        indptr=indptr,
        docs=np.concatenate(doc_parts)[order] if doc_parts else np.zeros(0, np.int32),
        tfs=np.concatenate(tf_parts)[order] if tf_parts else np.zeros(0, np.int32),
        lens=np.concatenate(lens_parts).astype(np.int32) if lens_parts else np.zeros(0, np.int32),
        ids=ids,
        metas=metas,
        live=np.ones(len(ids), dtype=bool),
    )


# chunk id -> (term counts, token count, metadata): tokenized chunks ready to insert
PreparedBatch = dict[str, tuple[Counter[str], int, dict[str, Any]]]


def _tokenizer_spec(tok: Any) -> dict[str, Any]:
    """JSON description of a tokenizer (plain callables get a name but cannot be rebuilt)."""
    to_dict = getattr(tok, "to_dict", None)
    if callable(to_dict):
        spec = dict(to_dict())
        spec.setdefault("name", getattr(tok, "name", type(tok).__qualname__))
        return spec
    return {"name": "custom:" + getattr(tok, "__qualname__", type(tok).__qualname__)}


def _stored_tokenizer(path: Path | None, spec: dict[str, Any]) -> Tokenizer:
    """The tokenizer a manifest records; an unregistered name is the caller's to fix (``ValueError``),
    arguments that do not build one mean a damaged manifest (:class:`KeywordIndexCorruptError`)."""
    try:
        return tokenizer_from_dict(spec)
    except UnknownTokenizerError as exc:
        raise ValueError(f"index at {path}: {exc}") from exc
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - whatever a factory raises on crafted arguments
        raise KeywordIndexCorruptError(
            Path(path or ".") / MANIFEST,
            f"its tokenizer {str(spec)[:200]} cannot be rebuilt ({type(exc).__name__}: {str(exc)[:200]})",
        ) from None


def _top_candidates(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores plus any ties with the k-th (so ties break by id later)."""
    if len(scores) <= k:
        return np.arange(len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    kth = scores[part].min()
    return np.flatnonzero(scores >= kth)


@dataclass
class _PartitionView:
    """One partition as a search sees it: its docs per segment, its buffered ids and its live totals."""

    code: int
    codes: list[np.ndarray]  # per segment (in ``segments`` order): every doc's partition code
    rows: list[np.ndarray]  # per segment: the partition's docs (live or not), ascending
    buffered: set[str]
    n_live: int
    total_len: int


_NO_ROWS = np.zeros(0, dtype=np.int32)


class _Partitions:
    """Partition codes of the store's docs, and each partition's live chunk count and token total.

    Codes are interned strings (``-1``: no partition); a segment's codes are read from its metadata on the
    first partitioned search (segments are immutable), totals are recounted after a write, per partition."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._codes: dict[str, int] = {}
        self._totals: dict[str, tuple[int, int, int]] = {}  # partition -> (write version, n_live, tokens)
        self._buffered: tuple[int, dict[str, set[str]]] = (
            -1,
            {},
        )  # (write version, partition -> buffered ids)

    def code(self, value: str) -> int:
        return self._codes.setdefault(value, len(self._codes))

    def codes(self) -> dict[str, int]:
        """Every partition value seen so far and its code."""
        return dict(self._codes)

    def of_segment(self, seg: _Segment) -> np.ndarray:
        """Partition code of every doc of ``seg`` (cached on the segment)."""
        if seg.parts is None:
            values = (partition_value(m, self.key) for m in seg.load_metas())
            seg.parts = np.fromiter(
                (-1 if v is None else self.code(v) for v in values), dtype=np.int32, count=seg.n_docs
            )
        return seg.parts

    def rows_of(self, seg: _Segment, code: int) -> np.ndarray:
        """The docs of ``seg`` in partition ``code``, ascending (one sort per segment, then a lookup)."""
        if seg.part_rows is None:
            codes = self.of_segment(seg)
            order = np.argsort(codes, kind="stable").astype(np.int32)
            values, starts = np.unique(codes[order], return_index=True)
            ends = [*starts[1:].tolist(), len(order)]
            seg.part_rows = {
                int(v): order[a:b] for v, a, b in zip(values.tolist(), starts.tolist(), ends) if v >= 0
            }
        return seg.part_rows.get(code, _NO_ROWS)

    def view(self, value: str, segments: Sequence[_Segment], buffer: _Buffer, version: int) -> _PartitionView:
        """Partition ``value`` in the store's current state (``version`` counts its writes)."""
        code = self.code(value)
        codes = [self.of_segment(seg) for seg in segments]
        rows = [self.rows_of(seg, code) for seg in segments]
        if self._buffered[0] != version:  # the buffer's ids per partition, once per write
            index: dict[str, set[str]] = {}
            for cid, d in buffer.docs.items():
                found = partition_value(d.meta, self.key)
                if found is not None:
                    index.setdefault(found, set()).add(cid)
            self._buffered = (version, index)
        buffered = self._buffered[1].get(value, set())
        cached = self._totals.get(value)
        if cached is not None and cached[0] == version:
            return _PartitionView(code, codes, rows, buffered, cached[1], cached[2])
        n_live = len(buffered)
        total = sum(buffer.docs[cid].length for cid in buffered)
        for seg, inside in zip(segments, rows):
            alive = inside[seg.live[inside]] if seg.n_deleted else inside
            n_live += len(alive)
            total += int(seg.lens[alive].astype(np.int64).sum())
        if len(self._totals) > 4096:
            self._totals.clear()
        self._totals[value] = (version, n_live, total)
        return _PartitionView(code, codes, rows, buffered, n_live, total)


# --------------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------------
class KeywordStore:
    """Incremental, persistent BM25 index over chunks identified by string ids.

    Args:
        path: directory of the index; ``None`` keeps it in memory only.  An existing index there
            is opened (raising :class:`KeywordIndexCorruptError` if it is damaged).
        tokenizer: defaults to :class:`~finderledge.tokenizer.AutoTokenizer` for a new index and
            to the tokenizer recorded in the manifest for an existing one; passing a tokenizer
            whose ``to_dict()`` differs from the recorded one raises ``ValueError``.
        k1, b: BM25 parameters, applied at query time (so they may differ between sessions).  The
            defaults are Anserini's BEIR/MS MARCO baseline values, chosen in docs/evaluation.md.
        buffer_size: chunks kept in the mutable buffer before it becomes a segment.
        merge_factor: segments of one size tier that trigger a merge.
        max_deleted_ratio: tombstone share above which a segment is rewritten.
        verify: check the CRC32 of every file when opening (cheap: sequential reads).
        partition_key: a metadata key whose values are partitions (see :mod:`finderledge.partitions`): a search
            whose filter pins one value scores with that partition's own statistics.  Not stored: it may
            differ between sessions.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        tokenizer: Tokenizer | None = None,
        k1: float = 0.9,
        b: float = 0.4,
        buffer_size: int = 2048,
        merge_factor: int = 8,
        max_deleted_ratio: float = 0.3,
        verify: bool = True,
        partition_key: str | None = None,
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        if merge_factor < 2 or buffer_size < 1:
            raise ValueError("merge_factor must be >= 2 and buffer_size >= 1")
        self.path = Path(path) if path is not None else None
        self.k1 = float(k1)
        self.b = float(b)
        self.buffer_size = int(buffer_size)
        self.merge_factor = int(merge_factor)
        self.max_deleted_ratio = float(max_deleted_ratio)
        self._lock = threading.RLock()
        self._segments: list[_Segment] = []
        self._buffer = _Buffer()
        self._locator: dict[str, _Segment | None] | None = None  # id -> segment (None: buffer)
        self._live_count = 0
        self._total_len = 0
        self._next_segment = 0
        self._generation = 0
        self._dirty = False
        self._committed: dict[str, Any] | None = None  # last manifest read or written
        self._filter_cache: OrderedDict[str, tuple[Predicate, dict[str, np.ndarray], set[str] | None]] = (
            OrderedDict()
        )
        self._closed = False
        self.partition_key = partition_key
        self._partitions = _Partitions(partition_key) if partition_key else None
        self._version = 0  # counts writes (partition totals are recounted after one)
        stored_spec: dict[str, Any] | None = None
        if self.path is not None:
            index_folder(self.path)  # a link at bm25/ would lead every write elsewhere: refused
        if self.path is not None and self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(f"keyword index path {self.path} is a file, not a directory")
        if self.path is not None and self.path.is_dir():
            for folder in (_SEGMENTS_DIR, _DELETES_DIR):
                real_folder(self.path, folder, KeywordIndexCorruptError)
        if self.path is not None and (self.path / MANIFEST).exists():
            stored_spec = self._open(verify)
        if stored_spec is not None:
            if tokenizer is None:
                tokenizer = _stored_tokenizer(self.path, stored_spec)
            elif _tokenizer_spec(tokenizer) != stored_spec:
                raise ValueError(
                    f"index at {self.path} was built with tokenizer {stored_spec}, "
                    f"not {_tokenizer_spec(tokenizer)}; queries would not match its terms"
                )
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else AutoTokenizer()
        self._tokenizer_spec = stored_spec if stored_spec is not None else _tokenizer_spec(self.tokenizer)

    # ---------------------------------------------------------------------------------- basics ---
    def __len__(self) -> int:
        return self._live_count

    def __contains__(self, id: object) -> bool:
        if not isinstance(id, str):
            return False
        with self._lock:
            return id in self._get_locator()

    def ids(self) -> set[str]:
        """Ids of all live chunks."""
        with self._lock:
            return set(self._get_locator())

    def get_metadata(self, id: str) -> dict[str, Any] | None:
        """The stored metadata of chunk ``id`` (a copy), or ``None`` if it is not in the index."""
        with self._lock:
            loc = self._get_locator()
            if id not in loc:
                return None
            seg = loc[id]
            if seg is None:
                return dict(self._buffer.docs[id].meta)
            return dict(seg.load_metas()[self._local_index(seg, id)])

    def stats(self) -> dict[str, Any]:
        """Counts describing the index layout (segments, tombstones, buffer), for monitoring."""
        with self._lock:
            return {
                "chunks": self._live_count,
                "total_tokens": self._total_len,
                "buffered": len(self._buffer),
                "segments": [
                    {"name": s.name, "docs": s.n_docs, "deleted": s.n_deleted, "terms": len(s.terms)}
                    for s in self._segments
                ],
            }

    def _get_locator(self) -> dict[str, _Segment | None]:
        """The id -> location map, built on first use (opening an index does not need it)."""
        if self._locator is None:
            loc: dict[str, _Segment | None] = {}
            for seg in self._segments:
                if seg.n_deleted:
                    live = seg.live
                    loc.update((cid, seg) for i, cid in enumerate(seg.ids) if live[i])
                else:
                    loc.update(dict.fromkeys(seg.ids, seg))
            loc.update(dict.fromkeys(self._buffer.docs, None))
            self._locator = loc
        return self._locator

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("KeywordStore is closed")

    # ---------------------------------------------------------------------------------- writes ---
    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Add chunks, replacing any chunk that has the same id (upsert).

        Cost is proportional to the chunks added (plus amortised O(log n) merging per chunk).
        Within one call a repeated id keeps its last text.
        """
        self.add_prepared(self.prepare(ids, texts, metadatas))

    def prepare(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
    ) -> PreparedBatch:
        """Validate and tokenize chunks without touching the index (the slow part of :meth:`add`)."""
        self._check_open()
        if isinstance(ids, str) or isinstance(texts, str):
            raise TypeError("ids and texts must be sequences of strings, not a single string")
        if len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids but {len(texts)} texts")
        if metadatas is not None and len(metadatas) != len(ids):
            raise ValueError(f"got {len(ids)} ids but {len(metadatas)} metadatas")
        batch: PreparedBatch = {}
        copies: dict[
            int, dict[str, Any]
        ] = {}  # one copy per metadata object given (a file's chunks share one)
        for i, (cid, text) in enumerate(zip(ids, texts)):
            if not isinstance(cid, str) or not cid:
                raise TypeError(f"chunk ids must be non-empty strings, got {cid!r}")
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__} for id {cid!r}")
            given = metadatas[i] if metadatas is not None else None
            meta = copies.get(id(given)) if given is not None else None
            if meta is None:
                meta = dict(given) if given is not None else {}
                try:
                    json.dumps(meta, allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise TypeError(f"metadata of chunk {cid!r} is not JSON-serialisable: {exc}") from exc
                if given is not None:
                    copies[id(given)] = meta
            tokens = self.tokenizer(text)
            batch.pop(cid, None)
            batch[cid] = (Counter(tokens), len(tokens), meta)
        return batch

    def add_prepared(self, batch: PreparedBatch) -> None:
        """Insert a batch made by :meth:`prepare` (fast: no tokenizing)."""
        if not batch:
            return
        with self._lock:
            self._check_open()
            self._remove_ids(batch.keys())
            loc = self._get_locator()
            if len(batch) >= self.buffer_size:
                # Large batch: build segments directly, skipping the dict buffer.
                items = list(batch.items())
                step = max(self.buffer_size, 500_000)
                for start in range(0, len(items), step):
                    part = items[start : start + step]
                    seg = _build_segment(
                        self._new_segment_name(),
                        [cid for cid, _ in part],
                        [c for _, (c, _, _) in part],
                        [n for _, (_, n, _) in part],
                        [m for _, (_, _, m) in part],
                    )
                    self._segments.append(seg)
                    loc.update(dict.fromkeys(seg.ids, seg))
            else:
                for cid, (counts, n, meta) in batch.items():
                    self._buffer.add(cid, counts, n, meta)
                    loc[cid] = None
            for _, n, _ in batch.values():
                self._total_len += n
            self._live_count += len(batch)
            self._after_write()
            if len(self._buffer) >= self.buffer_size:
                self._freeze_buffer()
            self._maybe_merge()

    def delete(self, ids: Iterable[str]) -> None:
        """Delete chunks by id; unknown ids are ignored.  Cost is proportional to ``len(ids)``."""
        self._check_open()
        if isinstance(ids, str):
            raise TypeError("delete() takes a collection of ids, not a single string")
        with self._lock:
            if self._remove_ids(ids):
                self._after_write()
                self._maybe_merge()

    def _remove_ids(self, ids: Iterable[str]) -> int:
        """Tombstone/remove the given ids where present; returns how many were removed."""
        loc = self._get_locator()
        removed = 0
        for cid in ids:
            if cid not in loc:
                continue
            seg = loc.pop(cid)
            removed += 1
            self._live_count -= 1
            if seg is None:
                self._total_len -= self._buffer.remove(cid).length
                continue
            idx = self._local_index(seg, cid)
            seg.live[idx] = False
            seg.n_deleted += 1
            seg.deletes_dirty = True
            self._total_len -= int(seg.lens[idx])
        return removed

    def _local_index(self, seg: _Segment, cid: str) -> int:
        """Position of ``cid`` in ``seg`` (a per-segment dict, built on first delete)."""
        if seg.positions is None:
            seg.positions = {c: i for i, c in enumerate(seg.ids)}
        return seg.positions[cid]

    def _after_write(self) -> None:
        """Bookkeeping shared by every write: dirty flag and buffer parts of filter caches."""
        self._dirty = True
        self._version += 1
        for key, (pred, masks, _buf) in self._filter_cache.items():
            self._filter_cache[key] = (pred, masks, None)

    def _new_segment_name(self) -> str:
        name = f"seg-{self._next_segment:08d}"
        self._next_segment += 1
        return name

    def _freeze_buffer(self) -> None:
        """Turn the buffer into an immutable segment."""
        if not self._buffer.docs:
            return
        docs = self._buffer.docs
        seg = _build_segment(
            self._new_segment_name(),
            list(docs),
            [d.counts for d in docs.values()],
            [d.length for d in docs.values()],
            [d.meta for d in docs.values()],
        )
        self._buffer.clear()
        self._segments.append(seg)
        if self._locator is not None:
            self._locator.update(dict.fromkeys(seg.ids, seg))
        self._after_write()

    def _tier(self, seg: _Segment) -> int:
        size = max(seg.n_live, 1) / self.buffer_size
        return 0 if size < self.merge_factor else int(math.log(size, self.merge_factor) + 1e-9)

    def _maybe_merge(self) -> None:
        """Tiered merging and tombstone compaction (bounded work, amortised over writes)."""
        changed = True
        while changed:
            changed = False
            for seg in list(self._segments):
                if seg.n_docs and seg.n_live == 0:
                    self._replace([seg], None)
                    changed = True
                elif seg.n_deleted > self.max_deleted_ratio * seg.n_docs:
                    self._replace([seg], _merge_segments(self._new_segment_name(), [seg]))
                    changed = True
            tiers: dict[int, list[_Segment]] = {}
            for seg in self._segments:
                tiers.setdefault(self._tier(seg), []).append(seg)
            for tier in sorted(tiers):
                group = tiers[tier]
                if len(group) >= self.merge_factor:
                    self._replace(group, _merge_segments(self._new_segment_name(), group))
                    changed = True
                    break

    def _replace(self, old: list[_Segment], new: _Segment | None) -> None:
        """Swap ``old`` segments for ``new`` (at the position of the first old one)."""
        first = min(self._segments.index(s) for s in old)
        keep = [s for s in self._segments if not any(s is o for o in old)]
        if new is not None:
            keep.insert(min(first, len(keep)), new)
            if self._locator is not None:
                self._locator.update(dict.fromkeys(new.ids, new))
        self._segments = keep
        self._dirty = True
        logger.debug("merged %d segment(s) into %s", len(old), new.name if new else "nothing")

    def freeze(self) -> None:
        """Turn the in-memory buffer into an in-memory segment now (nothing is written): a caller about to run
        many searches (the leg calibration) gets them scored vectorised rather than posting by posting."""
        self._check_open()
        with self._lock:
            self._freeze_buffer()
            self._maybe_merge()

    def compact(self) -> None:
        """Merge the buffer and all segments into one segment without tombstones."""
        self._check_open()
        with self._lock:
            self._freeze_buffer()
            if len(self._segments) > 1 or any(s.n_deleted for s in self._segments):
                self._replace(list(self._segments), _merge_segments(self._new_segment_name(), self._segments))

    # ---------------------------------------------------------------------------------- search ---
    def search(
        self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best chunks for ``query`` as ``(id, score)``, best first; only scores > 0.

        ``filter`` (see :mod:`finderledge.filters`) restricts the candidates before top-k
        selection; IDF and average length still describe the whole live corpus, or (with a
        ``partition_key``) the partition the filter pins.  Ties are broken by id, so results do
        not depend on the segment layout.
        """
        self._check_open()
        if k <= 0:
            return []
        with self._lock:
            return self._score(query, k, filter)

    def get_scores(self, query: str, filter: Mapping[str, Any] | None = None) -> dict[str, float]:
        """BM25 score of every chunk that matches ``query`` (chunks with score 0 are left out)."""
        self._check_open()
        with self._lock:
            return dict(self._score(query, None, filter))

    def score_text(self, query: str, text: str) -> float:
        """The BM25 score ``text`` would get for ``query`` as a chunk of this corpus (the corpus's idf and
        average length; ``text`` itself is not counted in them).  Calibration uses it to score a chunk with
        one of its sentences taken out, without writing that chunk."""
        self._check_open()
        qcounts = Counter(self.tokenizer(query))
        dcounts = Counter(self.tokenizer(text))
        with self._lock:
            for seg in self._segments:
                seg.verify()  # postings are read: checked as a search checks them
            n_docs = self._live_count
            if n_docs == 0 or not qcounts or not dcounts or self._total_len <= 0:
                return 0.0
            avgdl = self._total_len / n_docs
            norm = self.k1 * (1.0 - self.b + self.b * sum(dcounts.values()) / avgdl)
            score = 0.0
            for term, qtf in qcounts.items():
                tf = dcounts.get(term, 0)
                df = self._doc_freq(term) if tf else 0
                if df:
                    idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
                    score += qtf * idf * (self.k1 + 1.0) * tf / (tf + norm)
            return score

    def _doc_freq(self, term: str) -> int:
        """Live chunks holding ``term`` (caller holds the lock)."""
        df = len(self._buffer.postings.get(term) or ())
        for seg in self._segments:
            row = seg.term_index.get(term)
            if row is None:
                continue
            d = seg.docs[int(seg.indptr[row]) : int(seg.indptr[row + 1])]
            df += int(seg.live[d].sum()) if seg.n_deleted else len(d)
        return df

    def partition_size(self, value: str) -> int:
        """Live chunks in partition ``value`` (needs a ``partition_key``)."""
        with self._lock:
            return self._partition_view(value).n_live

    def partition_ids(self, value: str) -> list[str]:
        """Ids of the live chunks in partition ``value`` (needs a ``partition_key``)."""
        with self._lock:
            view = self._partition_view(value)
            out = sorted(view.buffered)
            for seg, inside in zip(self._segments, view.rows):
                alive = inside[seg.live[inside]] if seg.n_deleted else inside
                out.extend(seg.ids[i] for i in alive.tolist())
            return out

    def partition_sizes(self) -> dict[str, int]:
        """Live chunks per partition (needs a ``partition_key``)."""
        if self._partitions is None:
            raise ValueError("partition_sizes: this keyword store has no partition_key")
        with self._lock:
            sizes: Counter[str] = Counter()
            key = self._partitions.key
            for d in self._buffer.docs.values():
                value = partition_value(d.meta, key)
                if value is not None:
                    sizes[value] += 1
            names = {code: name for name, code in self._partitions_codes().items()}
            for seg in self._segments:
                codes = self._partitions.of_segment(seg)
                live = codes[seg.live] if seg.n_deleted else codes
                counts = np.bincount(live[live >= 0], minlength=0)
                for code in np.flatnonzero(counts).tolist():
                    sizes[names[code]] += int(counts[code])
            return dict(sizes)

    def _partitions_codes(self) -> dict[str, int]:
        assert self._partitions is not None
        for seg in self._segments:  # intern every segment's values first
            self._partitions.of_segment(seg)
        return self._partitions.codes()

    def _partition_view(self, value: str) -> _PartitionView:
        if self._partitions is None:
            raise ValueError("this keyword store has no partition_key")
        return self._partitions.view(value, self._segments, self._buffer, self._version)

    def _partition_allowed(
        self, flt: Mapping[str, Any], part: _PartitionView
    ) -> tuple[list[np.ndarray | None], set[str]]:
        """The docs of the pinned partition that pass ``flt``, per segment (ascending; None: all of them, the
        filter only pinning the partition), and its buffered ids that pass: O(partition), never O(index)."""
        if pins_only(flt, self.partition_key):
            return [None] * len(self._segments), part.buffered
        pred = compile_filter(flt)
        assert pred is not None  # a filter that pins a partition has a condition
        rows: list[np.ndarray | None] = []
        for seg, inside in zip(self._segments, part.rows):
            metas = seg.load_metas()
            keep = np.fromiter((pred(metas[i]) for i in inside.tolist()), bool, len(inside))
            rows.append(inside[keep])
        docs = self._buffer.docs
        return rows, {cid for cid in part.buffered if pred(docs[cid].meta)}

    def _filter_masks(self, flt: Mapping[str, Any] | None) -> tuple[dict[str, np.ndarray], set[str]] | None:
        """Allowed-doc masks per segment plus the allowed buffer ids, cached per filter key."""
        key = filter_key(flt)
        entry = self._filter_cache.get(key)
        if entry is None:
            pred = compile_filter(flt)
            if pred is None:
                return None
            entry = (pred, {}, None)
            self._filter_cache[key] = entry
            while len(self._filter_cache) > 64:
                self._filter_cache.popitem(last=False)
        else:
            self._filter_cache.move_to_end(key)
        pred, masks, buf = entry
        names = {s.name for s in self._segments}
        for stale in [n for n in masks if n not in names]:
            del masks[stale]
        for si, seg in enumerate(self._segments):
            if seg.name not in masks:
                metas = seg.load_metas()
                masks[seg.name] = np.fromiter((pred(m) for m in metas), dtype=bool, count=len(metas))
        if buf is None:
            docs = self._buffer.docs
            buf = {cid for cid in docs if pred(docs[cid].meta)}
            self._filter_cache[key] = (pred, masks, buf)
        return masks, buf

    def _score(self, query: str, k: int | None, flt: Mapping[str, Any] | None) -> list[tuple[str, float]]:
        for seg in self._segments:
            seg.verify()
        value = partition_of(flt, self.partition_key) if self._partitions is not None else None
        part = self._partition_view(value) if value is not None else None
        allowed = self._filter_masks(flt) if flt and part is None else None
        in_part: list[np.ndarray | None] = []
        part_buffered: set[str] = set()
        if part is not None:
            assert flt is not None
            in_part, part_buffered = self._partition_allowed(flt, part)
        n_docs = self._live_count if part is None else part.n_live
        total_len = self._total_len if part is None else part.total_len
        if n_docs == 0:
            return []
        qcounts = Counter(self.tokenizer(query))
        if not qcounts:
            return []
        avgdl = total_len / n_docs
        if avgdl <= 0:
            return []
        k1, b = self.k1, self.b
        c0 = k1 * (1.0 - b)
        c1 = k1 * b / avgdl
        segs = self._segments
        seg_docs: list[list[np.ndarray]] = [[] for _ in segs]
        seg_contrib: list[list[np.ndarray]] = [[] for _ in segs]
        buf_scores: dict[str, float] = {}
        buf_allowed = allowed[1] if allowed is not None else (part_buffered if part is not None else None)
        for term, qtf in qcounts.items():
            # 1) live postings of the term in every segment and the buffer -> live df.
            found: list[tuple[int, np.ndarray, np.ndarray]] = []
            df = 0
            for si, seg in enumerate(segs):
                row = seg.term_index.get(term)
                if row is None:
                    continue
                start, end = int(seg.indptr[row]), int(seg.indptr[row + 1])
                d = seg.docs[start:end]
                t = seg.tfs[start:end]
                if seg.n_deleted:
                    keep = seg.live[d]
                    d, t = d[keep], t[keep]
                if part is not None:  # the partition's postings only: its df, then what the filter allows
                    inside = part.codes[si][d] == part.code
                    d, t = d[inside], t[inside]
                    df += len(d)
                    rows = in_part[si]
                    if rows is not None and len(d):
                        at = np.minimum(np.searchsorted(rows, d), max(len(rows) - 1, 0))
                        keep = rows[at] == d if len(rows) else np.zeros(len(d), dtype=bool)
                        d, t = d[keep], t[keep]
                    if len(d):
                        found.append((si, d, t))
                elif len(d):
                    df += len(d)
                    found.append((si, d, t))
            bpost = self._buffer.postings.get(term)
            if bpost:
                df += len(bpost) if part is None else sum(1 for cid in bpost if cid in part.buffered)
            if df == 0:
                continue
            w = qtf * math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) * (k1 + 1.0)
            # 2) BM25 contributions of the allowed postings.
            for si, d, t in found:
                if allowed is not None:
                    m = allowed[0][segs[si].name][d]
                    d, t = d[m], t[m]
                    if not len(d):
                        continue
                if part is None:  # the whole segment's norms, cached until avgdl changes
                    norm_d = segs[si].length_norm(c0, c1)[d]
                else:  # a partition's avgdl is its own: the same values, for these docs only
                    norm_d = c0 + c1 * segs[si].lens[d].astype(np.float64)
                seg_docs[si].append(d)
                # Same float64 operations, in the same order, as the buffer path below.
                seg_contrib[si].append((w * t) / (t + norm_d))
            if bpost:
                bdocs = self._buffer.docs
                for cid, tfi in bpost.items():
                    if buf_allowed is not None and cid not in buf_allowed:
                        continue
                    tf_f = float(tfi)
                    s = w * tf_f / (tf_f + (c0 + c1 * bdocs[cid].length))
                    buf_scores[cid] = buf_scores.get(cid, 0.0) + s
        # 3) accumulate per segment, keep the best candidates, merge.
        cand_ids: list[str] = []
        cand_scores: list[np.ndarray] = []
        for si, seg in enumerate(segs):
            if not seg_docs[si]:
                continue
            docs = np.concatenate(seg_docs[si]) if len(seg_docs[si]) > 1 else seg_docs[si][0]
            contrib = np.concatenate(seg_contrib[si]) if len(seg_contrib[si]) > 1 else seg_contrib[si][0]
            if len(docs) * 16 >= seg.n_docs:  # dense accumulation: O(docs + postings), no sort
                dense = np.bincount(docs, weights=contrib, minlength=seg.n_docs)
                local = np.flatnonzero(dense > 0)  # contributions are > 0 (bool scan is fastest)
                scores = dense[local]
            else:
                local, inverse = np.unique(docs, return_inverse=True)
                scores = np.bincount(inverse, weights=contrib)
                pos = scores > 0
                local, scores = local[pos], scores[pos]
            if k is not None:
                top = _top_candidates(scores, k)
                local, scores = local[top], scores[top]
            ids = seg.ids
            cand_ids.extend(ids[i] for i in local.tolist())
            cand_scores.append(scores)
        buffered = [(cid, s) for cid, s in buf_scores.items() if s > 0]
        if k is not None and len(buffered) > k:  # the buffer's own k best (same order as the final sort)
            buffered = heapq.nsmallest(k, buffered, key=lambda p: (-p[1], p[0]))
        if buffered:
            cand_ids.extend(cid for cid, _ in buffered)
            cand_scores.append(np.array([s for _, s in buffered], dtype=np.float64))
        if not cand_ids:
            return []
        all_scores = np.concatenate(cand_scores).tolist()
        pairs = sorted(zip(cand_ids, all_scores), key=lambda p: (-p[1], p[0]))
        return pairs if k is None else pairs[:k]

    # ----------------------------------------------------------------------------- persistence ---
    def flush(self) -> None:
        """Persist changes atomically (no-op in memory or when nothing changed).

        Writes only new segments, changed tombstone files and the manifest; the manifest is
        replaced with ``os.replace``; files the new manifest no longer needs are deleted after.
        """
        self._check_open()
        if self.path is None:
            return
        with self._lock:
            if not self._dirty and self._committed is not None:
                return
            self._freeze_buffer()
            self._maybe_merge()
            root = self.path
            for folder in (_SEGMENTS_DIR, _DELETES_DIR):
                real_folder(root, folder, KeywordIndexCorruptError).mkdir(parents=True, exist_ok=True)
            self._generation += 1
            for seg in self._segments:
                if not seg.persisted:
                    self._write_segment(seg)
            for seg in self._segments:
                if seg.deletes_dirty or (seg.n_deleted and seg.deletes_file is None):
                    self._write_deletes(seg)
            manifest = self._manifest_body()
            manifest["checksum"] = manifest_checksum(manifest)
            data = json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8")
            tmp = root / (MANIFEST + ".tmp")
            write_file(tmp, data)
            os.replace(tmp, root / MANIFEST)
            fsync_dir(root)
            old = self._committed
            self._committed = manifest
            self._dirty = False
            if old is not None:
                self._collect_garbage(old, manifest)

    def close(self, *, flush: bool = True) -> None:
        """Flush (when persistent, unless ``flush=False``) and release the index; further use raises
        ``RuntimeError``."""
        if self._closed:
            return
        if flush:
            self.flush()
        with self._lock:
            for seg in self._segments:
                if seg.meta_file is not None:
                    seg.meta_file.close()
            self._segments = []
            self._buffer.clear()
            self._locator = None
            self._filter_cache.clear()
            self._closed = True

    def __enter__(self) -> KeywordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _manifest_body(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "generation": self._generation,
            "next_segment": self._next_segment,
            "k1": self.k1,
            "b": self.b,
            "tokenizer": self._tokenizer_spec,
            "live_count": self._live_count,
            "total_length": self._total_len,
            "segments": [
                {
                    "name": s.name,
                    "n_docs": s.n_docs,
                    "n_terms": len(s.terms),
                    "n_postings": len(s.docs),
                    "files": s.files,
                    "deletes": (
                        {"file": s.deletes_file, "count": s.n_deleted, **s.deletes_info}
                        if s.n_deleted
                        else None
                    ),
                }
                for s in self._segments
            ],
        }

    def _write_segment(self, seg: _Segment) -> None:
        """Write ``seg`` into ``segments/<name>/`` via a temporary directory and a rename."""
        assert self.path is not None
        final = self.path / _SEGMENTS_DIR / seg.name
        tmp = self.path / _SEGMENTS_DIR / (seg.name + ".tmp")
        for stale in (tmp, final):  # leftovers of a crashed flush; never part of a committed manifest
            if stale.is_symlink():
                stale.unlink()
            elif stale.exists():
                shutil.rmtree(stale)
        tmp.mkdir()
        files: dict[str, dict[str, int]] = {}
        arrays = {"indptr.npy": seg.indptr, "docs.npy": seg.docs, "tfs.npy": seg.tfs, "lens.npy": seg.lens}
        for fname, arr in arrays.items():
            dtype = _NPY_FILES[fname][0]
            files[fname] = write_file(tmp / fname, npy_bytes(np.ascontiguousarray(arr, dtype=dtype)))
        payloads = {"terms.json": seg.terms, "ids.json": seg.ids, "meta.json": seg.load_metas()}
        for fname, obj in payloads.items():
            data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            files[fname] = write_file(tmp / fname, data)
        fsync_dir(tmp)
        os.rename(tmp, final)
        fsync_dir(final.parent)
        seg.files = files
        seg.meta_path = final / "meta.json"
        seg.persisted = True

    def _write_deletes(self, seg: _Segment) -> None:
        """Write the tombstones of ``seg`` (sorted local doc numbers) to a new file."""
        assert self.path is not None
        rel = f"{_DELETES_DIR}/{seg.name}.{self._generation:08d}.npy"
        dead = np.flatnonzero(~seg.live).astype("<i4")
        info = write_file(self.path / rel, npy_bytes(dead))
        seg.deletes_file = rel
        seg.deletes_info = info
        seg.deletes_dirty = False

    def _collect_garbage(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """Delete segment directories and tombstone files only the old manifest referenced."""
        assert self.path is not None
        new_segs = {s["name"] for s in new["segments"]}
        new_dels = {s["deletes"]["file"] for s in new["segments"] if s["deletes"]}
        unused: list[str] = []
        for s in old["segments"]:
            if s["name"] not in new_segs:
                unused.append(f"{_SEGMENTS_DIR}/{s['name']}")
            if s["deletes"] and s["deletes"]["file"] not in new_dels:
                unused.append(s["deletes"]["file"])
        for rel in unused:  # checked on open; checked again: nothing outside the index is ever deleted
            path = self.path / rel
            if not (_SEGMENT_REL.fullmatch(rel) or _DELETES_NAME.fullmatch(rel)) or not is_inside(
                self.path, path.parent
            ):
                logger.warning("%s: not deleting %r, which is not a file of this index", self.path, rel)
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def _open(self, verify: bool) -> dict[str, Any]:
        """Load the manifest and segments (arrays memory-mapped); returns the tokenizer spec.

        Every parse or validation failure, of any kind, raises :class:`KeywordIndexCorruptError`."""
        assert self.path is not None
        with corrupt_on_error(self.path / MANIFEST, KeywordIndexCorruptError):
            return self._load(verify)

    def _load(self, verify: bool) -> dict[str, Any]:
        assert self.path is not None
        root = self.path
        mpath = root / MANIFEST

        def corrupt(reason: str, where: Path = mpath) -> KeywordIndexCorruptError:
            return KeywordIndexCorruptError(where, reason)

        manifest = parse_json(read_file(mpath, KeywordIndexCorruptError), mpath, KeywordIndexCorruptError)
        if not isinstance(manifest, dict):
            raise corrupt("manifest is not a JSON object")
        if manifest.get("format") != FORMAT_NAME:
            raise corrupt(f"not a FinderLedge keyword index (format {str(manifest.get('format'))[:100]!r})")
        if manifest.get("version") != FORMAT_VERSION:
            raise corrupt(f"unsupported format version {str(manifest.get('version'))[:100]!r}")
        body = {k: v for k, v in manifest.items() if k != "checksum"}
        if manifest.get("checksum") != manifest_checksum(body):
            raise corrupt("manifest checksum mismatch")
        if not isinstance(manifest["segments"], list) or not isinstance(manifest["tokenizer"], dict):
            raise corrupt("'segments' must be a list and 'tokenizer' an object")
        segments: list[_Segment] = []
        total_len = 0
        live_count = 0
        for entry in manifest["segments"]:
            seg = _open_segment(root, entry, verify)
            if any(seg.name == other.name for other in segments):
                raise corrupt(f"segment {seg.name} is listed twice")
            segments.append(seg)
            live_count += seg.n_live
            total_len += int(np.asarray(seg.lens, dtype=np.int64)[seg.live].sum())
        if live_count != manifest["live_count"] or total_len != manifest["total_length"]:
            raise corrupt(
                f"segments hold {live_count} chunks / {total_len} tokens but the manifest says "
                f"{manifest['live_count']} / {manifest['total_length']}"
            )
        next_segment = int(manifest["next_segment"])
        generation = int(manifest["generation"])
        if any(int(seg.name[4:]) >= next_segment for seg in segments):
            raise corrupt("a segment is newer than the manifest's next_segment")  # a flush would overwrite it
        spec = dict(manifest["tokenizer"])
        self._segments = segments
        self._live_count = live_count
        self._total_len = total_len
        self._next_segment = next_segment
        self._generation = generation
        self._committed = manifest
        return spec


def _open_segment(root: Path, entry: Mapping[str, Any], verify: bool) -> _Segment:
    """Open one segment listed in the manifest, checking its name, sizes, shapes and (optionally) CRCs."""
    mpath = root / MANIFEST
    name = entry["name"]
    sdir = checked_path(root / _SEGMENTS_DIR, name, SEGMENT_NAME, KeywordIndexCorruptError, mpath)
    n_docs, n_terms, n_postings = int(entry["n_docs"]), int(entry["n_terms"]), int(entry["n_postings"])
    files: dict[str, dict[str, int]] = entry["files"]
    if not isinstance(files, dict) or not all(
        isinstance(files.get(f), dict) for f in (*_NPY_FILES, *_JSON_FILES)
    ):
        raise KeywordIndexCorruptError(mpath, f"segment {name}: bad file list")
    expected_len = {"n_terms+1": n_terms + 1, "n_postings": n_postings, "n_docs": n_docs}

    def check_file(path: Path, info: Mapping[str, int], full: bool) -> bytes | None:
        if not is_inside(root, path):
            raise KeywordIndexCorruptError(path, f"leads outside {root} (a symbolic link?)")
        if not (verify or full):
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                raise KeywordIndexCorruptError(path, "file is missing") from None
            if size != info["bytes"]:
                raise KeywordIndexCorruptError(
                    path, f"file has {size} bytes, manifest says {info['bytes']} (truncated?)"
                )
            return None
        data = read_file(path, KeywordIndexCorruptError, size=int(info["bytes"]))
        if zlib.crc32(data) != info["crc32"]:
            raise KeywordIndexCorruptError(path, "checksum mismatch")
        return data

    arrays: dict[str, np.ndarray] = {}
    unverified: dict[str, tuple[bytes, int]] = {}
    for fname, (dtype, length_key) in _NPY_FILES.items():
        fpath = sdir / fname
        check_file(fpath, files[fname], False)
        try:
            arr = np.load(fpath, mmap_mode="r", allow_pickle=False)  # a map: never larger than the file
        except (ValueError, OSError, EOFError) as exc:
            raise KeywordIndexCorruptError(fpath, f"unreadable .npy ({exc})") from None
        if arr.dtype != np.dtype(dtype) or arr.shape != (expected_len[length_key],):
            raise KeywordIndexCorruptError(
                fpath,
                f"expected {dtype} of shape ({expected_len[length_key]},), got {arr.dtype} {arr.shape}",
            )
        arrays[fname] = np.asarray(arr)  # plain ndarray view of the map: cheaper slicing
        if not verify:  # the header now, the data's CRC32 when the segment is first used
            head_len = int(files[fname]["bytes"]) - arr.nbytes
            with open(fpath, "rb") as fh:
                unverified[fname] = (fh.read(head_len), int(files[fname]["crc32"]))
    parsed: dict[str, Any] = {}
    for fname in ("terms.json", "ids.json"):
        fpath = sdir / fname
        data = check_file(fpath, files[fname], True)
        assert data is not None
        parsed[fname] = parse_json(data, fpath, KeywordIndexCorruptError)
    check_file(sdir / "meta.json", files["meta.json"], False)
    terms, ids = parsed["terms.json"], parsed["ids.json"]
    if not isinstance(terms, list) or len(terms) != n_terms or not all(isinstance(t, str) for t in terms):
        raise KeywordIndexCorruptError(sdir / "terms.json", f"expected {n_terms} terms")
    if not isinstance(ids, list) or len(ids) != n_docs or not all(isinstance(i, str) for i in ids):
        raise KeywordIndexCorruptError(sdir / "ids.json", f"expected {n_docs} ids")
    indptr = arrays["indptr.npy"]
    if n_terms + 1 and (indptr[0] != 0 or indptr[-1] != n_postings):
        raise KeywordIndexCorruptError(sdir / "indptr.npy", "offsets do not span the postings")
    live = np.ones(n_docs, dtype=bool)
    deletes = entry.get("deletes")
    dead: np.ndarray | None = None
    if deletes:
        rel = deletes["file"]
        dpath = checked_path(root, rel, _DELETES_NAME, KeywordIndexCorruptError, mpath)
        if not rel.startswith(f"{_DELETES_DIR}/{name}."):
            raise KeywordIndexCorruptError(
                mpath, f"segment {name}: tombstones {rel!r} belong to another segment"
            )
        data = check_file(dpath, deletes, True)
        assert data is not None
        dead = parse_npy(data, dpath, KeywordIndexCorruptError)
        if (
            dead.ndim != 1
            or dead.dtype.kind != "i"
            or len(dead) != deletes["count"]
            or (len(dead) and (dead.min() < 0 or dead.max() >= n_docs))
        ):
            raise KeywordIndexCorruptError(dpath, "tombstones do not match the manifest")
    try:
        meta_file = open(sdir / "meta.json", "rb")  # noqa: SIM115 - kept open until the metadata is read
    except OSError as exc:
        raise KeywordIndexCorruptError(sdir / "meta.json", f"cannot open ({exc})") from None
    seg = _Segment(
        name=name,
        terms=terms,
        indptr=indptr,
        docs=arrays["docs.npy"],
        tfs=arrays["tfs.npy"],
        lens=arrays["lens.npy"],
        ids=ids,
        metas=None,
        live=live,
        persisted=True,
        files=files,
        meta_path=sdir / "meta.json",
        meta_file=meta_file,
        unverified=unverified,
    )
    if dead is not None and deletes:
        live[dead] = False
        seg.n_deleted = int(n_docs - live.sum())
        seg.deletes_file = str(deletes["file"])
        seg.deletes_info = {"bytes": int(deletes["bytes"]), "crc32": int(deletes["crc32"])}
    return seg
