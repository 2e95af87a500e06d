"""The chunk records of recent search hits, kept for the next searches while their documents do not change.

A search reads its hits' texts as of the change its indexes reflected (``get_chunks(visible_at=seq)``): at
k=100 that read was half of a keyword search (~7 us a row, issue 41), while a hand-wired BM25 holds its texts
in memory.  What the ledger returns for one ``seq`` never changes (a later write is a later ``seq``; a
document removed after ``seq`` stays visible at it), so a record read for ``seq`` is served again to searches
at that same ``seq``.  When a search arrives at a later ``seq``, the records of the documents the change log
lists in between are dropped and the rest kept: a document no change touched reads the same at both (the
replica follows the same log to keep its indexes).  Every search first follows the log, so the first search
after any commit, of any process, reads the documents that commit wrote or removed again.  The whole cache is
emptied instead when more than :data:`MOVE_MAX_CHANGES` changes lie in between, when no ``changed`` reader is
given, and when a search arrives at an older ``seq`` (one that started before the newest commit, or a ledger
that starts its numbering again): it never meets records kept for another ``seq`` it cannot vouch for.

Only records whose metadata is flat (every value a string, number, bool or None, FinderLedge's own fields
included) are kept: a caller's result gets a copy of the top-level dicts (:func:`~.search.as_document`), which
would share a nested list or dict with the next caller's.  Bounded by :data:`RECORD_CACHE_SIZE` records, the
oldest dropped first (like tantivy's doc-store block cache, without its decompression).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import Any

from ..ledgers import ChunkRecord
from ..metadata import FL_KEY, JSON_LEAVES

__all__ = ["MOVE_MAX_CHANGES", "RECORD_CACHE_SIZE", "RecordCache"]

#: chunk records kept (~2 KB each with a typical chunk's text and metadata: ~16 MB at most)
RECORD_CACHE_SIZE = 8192
#: changes between two ``seq`` s above which the cache is emptied rather than the change log read (its ``seq`` s
#: are unique, so a later ``seq`` at most this much higher lists at most this many)
MOVE_MAX_CHANGES = 1024


def _flat(record: ChunkRecord) -> bool:
    """Whether a record's metadata holds only immutable leaves (its ``_finderledge`` dict's values too)."""
    for key, value in record.metadata.items():
        if type(value) in JSON_LEAVES:
            continue
        if key != FL_KEY or type(value) is not dict:
            return False
        if not all(type(v) in JSON_LEAVES for v in value.values()):
            return False
    return True


class RecordCache:
    """Chunk records by id for searches at one ledger ``seq`` (see the module docstring); thread-safe."""

    def __init__(self, size: int = RECORD_CACHE_SIZE) -> None:
        self._size = int(size)
        self._seq = -1
        #: insertion-ordered; ``popitem(last=False)`` drops the oldest in O(1) (``del d[next(iter(d))]`` on a
        #: plain dict walks the slots its earlier deletions left: ~6 us an eviction when full at 8,192)
        self._records: OrderedDict[str, ChunkRecord] = OrderedDict()
        self._by_parent: dict[str, set[str]] = {}  # the kept chunk ids of each document, to drop them at once
        self._lock = threading.Lock()

    def read(
        self,
        ids: Sequence[str],
        seq: int,
        load: Callable[[list[str]], list[ChunkRecord]],
        changed: Callable[[int, int], Collection[str]] | None = None,
    ) -> dict[str, ChunkRecord]:
        """The records of ``ids`` visible at ``seq``: kept ones, the rest from ``load`` (the ledger read at
        ``seq``; ids it leaves out are left out here too).  ``changed(a, b)``: the ids of the documents the
        change log lists with ``a < seq <= b`` (the records of the others are kept when ``seq`` moves on)."""
        with self._lock:
            kept_seq = self._seq
        if seq != kept_seq:
            self._move(kept_seq, seq, changed)
        with self._lock:
            kept = self._records if seq == self._seq else {}  # another search moved it on meanwhile
            found = {i: kept[i] for i in ids if i in kept}
        if len(found) == len(ids):
            return found
        loaded = load([i for i in ids if i not in found])
        with self._lock:
            if seq == self._seq and self._size > 0:
                records, by_parent = self._records, self._by_parent
                for record in loaded:
                    if record.id in records or not _flat(record):
                        continue
                    if len(records) >= self._size:
                        _, oldest = records.popitem(last=False)  # the oldest kept
                        siblings = by_parent[oldest.parent_id]
                        siblings.discard(oldest.id)
                        if not siblings:
                            del by_parent[oldest.parent_id]
                    records[record.id] = record
                    by_parent.setdefault(record.parent_id, set()).add(record.id)
        for record in loaded:
            found[record.id] = record
        return found

    def _move(self, old: int, new: int, changed: Callable[[int, int], Collection[str]] | None) -> None:
        """Serve ``new`` from now on: keep the records of documents no change in ``(old, new]`` touched when
        that is known (read outside the lock: a ledger statement), else drop everything."""
        touched: Collection[str] | None = None
        if changed is not None and 0 <= old < new and new - old <= MOVE_MAX_CHANGES and self._records:
            touched = changed(old, new)
        with self._lock:
            if self._seq == new:  # another search moved it here meanwhile
                return
            if touched is None or self._seq != old:
                self._records.clear()
                self._by_parent.clear()
            else:
                for parent in touched:
                    for cid in self._by_parent.pop(parent, ()):
                        del self._records[cid]
            self._seq = new

    def __len__(self) -> int:
        return len(self._records)

    def stats(self) -> dict[str, Any]:
        """How many records are kept, for which ``seq`` (for tests and ``explain``-style diagnostics)."""
        with self._lock:
            return {"records": len(self._records), "seq": self._seq, "size": self._size}
