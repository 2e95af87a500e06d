"""The live chunks of a keyword index: segments, the buffer, where each id lives and the live totals.

Every write goes through :class:`Corpus` (no lock, no files: :class:`~.store.KeywordStore` holds the lock
and persists it).  Merging follows the shared tiered policy of :mod:`finderledge.storage.segments`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ..storage.segments import needs_rewrite, plan_merges, segment_name
from .files import Opened
from .segment import Buffer, PreparedBatch, Segment, build_segment, merge_segments

__all__ = ["LARGE_BATCH_SEGMENT", "Corpus"]

logger = logging.getLogger(__name__)

LARGE_BATCH_SEGMENT = 500_000  # a large batch becomes segments of at most this many chunks
# a batch of at least this share of the buffer becomes a segment at once: the buffer would cost a dict entry
# per term and chunk, and build the same segment when it fills
DIRECT_SEGMENT_SHARE = 0.5


class Corpus:
    """Segments and the buffer, with the live chunk count and token total kept exact on every write.

    ``version`` counts writes (caches of the buffer's state compare it); ``dirty`` says whether anything
    changed since the last flush."""

    def __init__(self, buffer_size: int, merge_factor: int, max_deleted_ratio: float) -> None:
        self.buffer_size, self.merge_factor, self.max_deleted_ratio = (
            buffer_size,
            merge_factor,
            max_deleted_ratio,
        )
        self.segments: list[Segment] = []
        self.buffer = Buffer()
        self.live_count = self.total_len = self.next_segment = self.version = 0
        self.dirty = False
        self._locator: dict[str, Segment | None] | None = None  # id -> segment (None: buffer)

    def load(self, opened: Opened) -> None:
        """Take the segments and counters an opened index holds."""
        self.segments, self.live_count, self.total_len = opened.segments, opened.live_count, opened.total_len
        self.next_segment = opened.next_segment

    @property
    def stats(self) -> tuple[int, int]:
        """``(live chunks, live tokens)``: the statistics BM25 needs."""
        return self.live_count, self.total_len

    def locator(self) -> dict[str, Segment | None]:
        """The id -> location map, built on first use (opening an index does not need it)."""
        if self._locator is None:
            loc: dict[str, Segment | None] = {}
            for seg in self.segments:
                loc.update((cid, seg) for cid in seg.live_ids())
            loc.update(dict.fromkeys(self.buffer.docs, None))
            self._locator = loc
        return self._locator

    def metadata(self, cid: str) -> dict[str, Any] | None:
        """A copy of chunk ``cid``'s metadata (``None``: no such live chunk)."""
        loc = self.locator()
        if cid not in loc:
            return None
        seg = loc[cid]
        if seg is None:
            return dict(self.buffer.docs[cid].meta)
        return dict(seg.load_metas()[seg.position(cid)])

    # -- writes -------------------------------------------------------------------------------------
    def add(self, batch: PreparedBatch) -> None:
        """Insert tokenized chunks, replacing those with the same ids (a batch of half a buffer or more
        becomes segments directly, skipping the dict buffer), then freeze and merge as needed."""
        self.remove(batch.keys())
        loc = self.locator()
        if len(batch) >= max(1, int(self.buffer_size * DIRECT_SEGMENT_SHARE)):
            items = list(batch.items())
            step = max(self.buffer_size, LARGE_BATCH_SEGMENT)
            for start in range(0, len(items), step):
                part = items[start : start + step]
                seg = build_segment(
                    self._new_name(),
                    [cid for cid, _ in part],
                    [c for _, (c, _, _) in part],
                    [n for _, (_, n, _) in part],
                    [m for _, (_, _, m) in part],
                )
                self.segments.append(seg)
                loc.update(dict.fromkeys(seg.ids, seg))
        else:
            for cid, (counts, n, meta) in batch.items():
                self.buffer.add(cid, counts, n, meta)
                loc[cid] = None
        self.total_len += sum(n for _, n, _ in batch.values())
        self.live_count += len(batch)
        self._changed()
        if len(self.buffer) >= self.buffer_size:
            self.freeze()
        self.merge()

    def remove(self, ids: Iterable[str]) -> int:
        """Tombstone (or drop from the buffer) the given ids where present; returns how many."""
        loc = self.locator()
        removed = 0
        for cid in ids:
            if cid not in loc:
                continue
            seg = loc.pop(cid)
            removed += 1
            self.live_count -= 1
            self.total_len -= self.buffer.remove(cid).length if seg is None else seg.tombstone(cid)
        if removed:
            self._changed()
        return removed

    def freeze(self) -> None:
        """Turn the buffer into an immutable segment."""
        if not self.buffer.docs:
            return
        docs = self.buffer.docs
        seg = build_segment(
            self._new_name(),
            list(docs),
            [d.counts for d in docs.values()],
            [d.length for d in docs.values()],
            [d.meta for d in docs.values()],
        )
        self.buffer.clear()
        self.segments.append(seg)
        if self._locator is not None:
            self._locator.update(dict.fromkeys(seg.ids, seg))
        self._changed()

    def merge(self) -> None:
        """Tombstone compaction, then tiered merging (:func:`finderledge.storage.segments.plan_merges`): bounded
        work, amortised over writes."""
        for seg in list(self.segments):
            if seg.n_docs and seg.n_live == 0:
                self._replace([seg], None)
            elif needs_rewrite(seg.n_docs, seg.n_deleted, self.max_deleted_ratio):
                self._replace([seg], merge_segments(self._new_name(), [seg]))
        segments = list(self.segments)
        for group in plan_merges([s.n_live for s in segments], self.merge_factor, self.buffer_size):
            if len(group) > 1:
                old = [segments[i] for i in group]
                self._replace(old, merge_segments(self._new_name(), old))

    def compact(self) -> None:
        """Merge the buffer and all segments into one segment without tombstones."""
        self.freeze()
        if len(self.segments) > 1 or any(s.n_deleted for s in self.segments):
            self._replace(list(self.segments), merge_segments(self._new_name(), self.segments))

    def clear(self) -> None:
        """Forget everything (the store is closed); open metadata files are closed."""
        for seg in self.segments:
            seg.release()
        self.segments = []
        self.buffer.clear()
        self._locator = None

    def _changed(self) -> None:
        self.dirty = True
        self.version += 1

    def _new_name(self) -> str:
        self.next_segment += 1
        return segment_name(self.next_segment - 1)

    def _replace(self, old: list[Segment], new: Segment | None) -> None:
        """Swap ``old`` segments for ``new`` (at the position of the first old one)."""
        first = min(self.segments.index(s) for s in old)
        keep = [s for s in self.segments if not any(s is o for o in old)]
        if new is not None:
            keep.insert(min(first, len(keep)), new)
            if self._locator is not None:
                self._locator.update(dict.fromkeys(new.ids, new))
        self.segments = keep
        self.dirty = True
        logger.debug("merged %d segment(s) into %s", len(old), new.name if new else "nothing")
