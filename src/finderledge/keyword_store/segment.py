"""BM25 segments and the buffer: the keyword index's data, built and merged by pure functions.

A :class:`Segment` is an immutable CSR inverted index (``terms`` -> ``indptr`` -> ``docs``/``tfs``), the
documents' lengths, ids and metadata; only its tombstones (``live``) change.  New chunks go to the
:class:`Buffer` (plain dicts) until it becomes a segment.  :func:`build_segment` and :func:`merge_segments`
make new segments; :func:`prepare_batch` validates and tokenizes chunks before any of that.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, count, filterfalse
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IndexCorruptError
from ..metadata import copies_per_object, share_equal
from ..storage.files import checksum
from ..storage.integrity import parse_json

__all__ = [
    "Buffer",
    "BufferDoc",
    "KeywordIndexCorruptError",
    "PreparedBatch",
    "Segment",
    "build_segment",
    "merge_segments",
    "prepare_batch",
]

# chunk id -> (term counts, token count, metadata): tokenized chunks ready to insert
PreparedBatch = dict[str, tuple[Counter[str], int, dict[str, Any]]]


class KeywordIndexCorruptError(IndexCorruptError):
    """The keyword index at ``path`` cannot be opened: ``reason`` says what is wrong.  Nothing was changed."""


@dataclass(eq=False)
class Segment:
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
            if checksum(np.ascontiguousarray(arr[fname]).data, checksum(head)) != crc:
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
            self.term_index = dict(zip(self.terms, count()))

    @property
    def n_docs(self) -> int:
        return len(self.ids)

    @property
    def n_live(self) -> int:
        return len(self.ids) - self.n_deleted

    def position(self, cid: str) -> int:
        """Row of chunk ``cid`` in this segment (a dict built on first use)."""
        if self.positions is None:
            self.positions = {c: i for i, c in enumerate(self.ids)}
        return self.positions[cid]

    def live_ids(self) -> list[str]:
        """The ids of the live docs, in row order."""
        if not self.n_deleted:
            return self.ids
        live = self.live
        return [cid for i, cid in enumerate(self.ids) if live[i]]

    def tombstone(self, cid: str) -> int:
        """Mark chunk ``cid`` deleted; returns its token count (the live total shrinks by it)."""
        idx = self.position(cid)
        self.live[idx] = False
        self.n_deleted += 1
        self.deletes_dirty = True
        return int(self.lens[idx])

    def release(self) -> None:
        """Close the metadata file kept open since the segment was opened."""
        if self.meta_file is not None:
            self.meta_file.close()
            self.meta_file = None

    def load_metas(self) -> list[dict[str, Any]]:
        """Metadata of every doc (deleted ones included), read from disk on first use."""
        if self.metas is None:
            assert self.meta_path is not None
            if self.meta_file is None:  # a segment opened from disk keeps it open until this first use
                raise KeywordIndexCorruptError(self.meta_path, "the metadata file is no longer open")
            self.meta_file.seek(0)
            raw = self.meta_file.read()
            self.meta_file.close()
            self.meta_file = None
            info = self.files.get("meta.json")
            if info is not None and (len(raw) != info["bytes"] or checksum(raw) != info["crc32"]):
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
class BufferDoc:
    counts: dict[str, int]
    length: int
    meta: dict[str, Any]


class Buffer:
    """Recent chunks in plain dicts: cheap to add to and delete from, searched term by term."""

    def __init__(self) -> None:
        self.docs: dict[str, BufferDoc] = {}
        self.postings: dict[str, dict[str, int]] = {}

    def __len__(self) -> int:
        return len(self.docs)

    def add(self, cid: str, counts: dict[str, int], length: int, meta: dict[str, Any]) -> None:
        self.docs[cid] = BufferDoc(counts, length, meta)
        for term, tf in counts.items():
            post = self.postings.get(term)
            if post is None:
                self.postings[term] = {cid: tf}
            else:
                post[cid] = tf

    def remove(self, cid: str) -> BufferDoc:
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


def stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for keys in ``[0, n_keys)``, by radix sort: numpy sorts 16-bit keys
    stably in linear time (~7x faster than its int32 sort), so wider keys take two passes, low then high half
    (a stable sort by the high half keeps the order of equal high halves: the same permutation)."""
    if n_keys <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    high = (keys[low] >> 16).astype(np.uint16)
    return low[np.argsort(high, kind="stable")]


def build_segment(
    name: str,
    ids: list[str],
    counts: Sequence[Mapping[str, int]],
    lens: Sequence[int],
    metas: list[dict[str, Any]],
) -> Segment:
    """Build a CSR segment from per-doc term counts (cost linear in the postings, plus one sort).

    Terms are numbered in order of first appearance and the postings are put in term order by a stable sort
    (docs stay ascending within a term); the loops over postings run in C (``dict``, ``map``, ``np.fromiter``).
    """
    per_doc = np.fromiter(map(len, counts), dtype=np.int64, count=len(counts))
    n_postings = int(per_doc.sum())
    term_index: defaultdict[str, int] = defaultdict(count().__next__)  # a new term gets the next number
    tid_arr = np.fromiter(
        map(term_index.__getitem__, chain.from_iterable(counts)), dtype=np.int32, count=n_postings
    )
    term_index.default_factory = None  # a plain mapping from now on
    tf_arr = np.fromiter(chain.from_iterable(c.values() for c in counts), dtype=np.int32, count=n_postings)
    doc_arr = np.repeat(np.arange(len(ids), dtype=np.int32), per_doc)
    order = stable_order(tid_arr, len(term_index))  # stable: docs stay ascending within a term
    indptr = np.zeros(len(term_index) + 1, dtype=np.int64)
    np.cumsum(np.bincount(tid_arr, minlength=len(term_index)), out=indptr[1:])
    return Segment(
        name=name,
        terms=list(term_index),
        indptr=indptr,
        docs=doc_arr[order],
        tfs=tf_arr[order],
        lens=np.asarray(lens, dtype=np.int32),
        ids=ids,
        metas=metas,
        live=np.ones(len(ids), dtype=bool),
        term_index=term_index,
    )


def merge_segments(name: str, segs: Sequence[Segment]) -> Segment:
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
        new_terms = list(filterfalse(vocab.__contains__, seg.terms))  # numbered in order of appearance
        vocab.update(zip(new_terms, count(len(vocab))))
        term_map = np.fromiter(map(vocab.__getitem__, seg.terms), dtype=np.int32, count=len(seg.terms))
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
        if len(live_idx) == len(seg.ids):
            ids.extend(seg.ids)
            metas.extend(seg_metas)
        else:
            ids.extend([seg.ids[i] for i in live_idx.tolist()])
            metas.extend([seg_metas[i] for i in live_idx.tolist()])
        lens_parts.append(np.asarray(seg.lens)[live_idx])
        offset += len(live_idx)
    tid_arr = np.concatenate(tid_parts) if tid_parts else np.zeros(0, np.int32)
    counts = np.bincount(tid_arr, minlength=len(vocab))
    terms = list(vocab)
    term_index = vocab
    if (counts == 0).any():  # terms whose every posting was deleted: drop and renumber
        used = counts > 0
        renum = np.cumsum(used, dtype=np.int64) - 1
        tid_arr = renum[tid_arr].astype(np.int32)
        terms = [t for t, u in zip(terms, used) if u]
        counts = counts[used]
        term_index = {}  # built by the segment
    order = stable_order(tid_arr, len(terms))
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Segment(
        name=name,
        terms=terms,
        indptr=indptr,
        docs=np.concatenate(doc_parts)[order] if doc_parts else np.zeros(0, np.int32),
        tfs=np.concatenate(tf_parts)[order] if tf_parts else np.zeros(0, np.int32),
        lens=np.concatenate(lens_parts).astype(np.int32) if lens_parts else np.zeros(0, np.int32),
        ids=ids,
        metas=metas,
        live=np.ones(len(ids), dtype=bool),
        term_index=term_index,
    )


def prepare_batch(
    tokenizer: Callable[[str], list[str]],
    ids: Sequence[str],
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any]] | None = None,
) -> PreparedBatch:
    """Validate and tokenize chunks (the slow part of an add); a repeated id keeps its last text."""
    if isinstance(ids, str) or isinstance(texts, str):
        raise TypeError("ids and texts must be sequences of strings, not a single string")
    if len(ids) != len(texts):
        raise ValueError(f"got {len(ids)} ids but {len(texts)} texts")
    if metadatas is not None and len(metadatas) != len(ids):
        raise ValueError(f"got {len(ids)} ids but {len(metadatas)} metadatas")
    batch: PreparedBatch = {}
    # one copy per metadata object given (a file's chunks share one), each checked once; no metadata: its own {}
    given: Sequence[Mapping[str, Any] | None] = [None] * len(ids) if metadatas is None else metadatas
    metas = copies_per_object({} if md is None else md for md in given)
    checked: set[int] = set()  # ids of the copies checked (``metas`` holds them all)
    for cid, text, meta in zip(ids, texts, metas):
        if not isinstance(cid, str) or not cid:
            raise TypeError(f"chunk ids must be non-empty strings, got {cid!r}")
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, got {type(text).__name__} for id {cid!r}")
        if meta and id(meta) not in checked:
            try:
                json.dumps(meta, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"metadata of chunk {cid!r} is not JSON-serialisable: {exc}") from exc
            checked.add(id(meta))
        tokens = tokenizer(text)
        batch.pop(cid, None)
        batch[cid] = (Counter(tokens), len(tokens), meta)
    return batch
