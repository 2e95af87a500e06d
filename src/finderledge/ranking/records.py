"""The chunk records of recent search hits, kept for the next searches of the same ledger change.

A search reads its hits' texts as of the change its indexes reflected (``get_chunks(visible_at=seq)``): at
k=100 that read was half of a keyword search (~7 us a row, issue 41), while a hand-wired BM25 holds its texts
in memory.  What the ledger returns for one ``seq`` never changes (a later write is a later ``seq``; a
document removed after ``seq`` stays visible at it), so a record read for ``seq`` is served again to searches
at that same ``seq``, and the whole cache is emptied when a search arrives at another one: every search
first follows the change log, so the first search after any commit, of any process, starts afresh (and a
search at an older ``seq``, one that started before the newest commit, or a ledger that starts its
numbering again, never meets records kept for another ``seq``).

Only records whose metadata is flat (every value a string, number, bool or None, FinderLedge's own fields
included) are kept: a caller's result gets a copy of the top-level dicts (:func:`~.search.as_document`), which
would share a nested list or dict with the next caller's.  Bounded by :data:`RECORD_CACHE_SIZE` records, the
oldest dropped first (like tantivy's doc-store block cache, without its decompression).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..ledgers import ChunkRecord
from ..metadata import FL_KEY, JSON_LEAVES

__all__ = ["RECORD_CACHE_SIZE", "RecordCache"]

#: chunk records kept (~2 KB each with a typical chunk's text and metadata: ~16 MB at most)
RECORD_CACHE_SIZE = 8192


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
        self._lock = threading.Lock()

    def read(
        self, ids: Sequence[str], seq: int, load: Callable[[list[str]], list[ChunkRecord]]
    ) -> dict[str, ChunkRecord]:
        """The records of ``ids`` visible at ``seq``: kept ones, the rest from ``load`` (the ledger read at
        ``seq``; ids it leaves out are left out here too)."""
        with self._lock:
            if seq != self._seq:  # another change: nothing kept is known to hold at it
                self._records.clear()
                self._seq = seq
            kept = self._records
            found = {i: kept[i] for i in ids if i in kept}
        if len(found) == len(ids):
            return found
        loaded = load([i for i in ids if i not in found])
        with self._lock:
            if seq == self._seq and self._size > 0:
                records = self._records
                for record in loaded:
                    if record.id in records or not _flat(record):
                        continue
                    if len(records) >= self._size:
                        records.popitem(last=False)  # the oldest kept
                    records[record.id] = record
        for record in loaded:
            found[record.id] = record
        return found

    def __len__(self) -> int:
        return len(self._records)

    def stats(self) -> dict[str, Any]:
        """How many records are kept, for which ``seq`` (for tests and ``explain``-style diagnostics)."""
        with self._lock:
            return {"records": len(self._records), "seq": self._seq, "size": self._size}
