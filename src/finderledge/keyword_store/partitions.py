"""Partitions of the keyword index: each value of the ``partition_key`` scores with its own statistics.

A search whose filter pins one partition (see :mod:`finderledge.partitions`) counts document frequencies,
the chunk count and the average length over that partition only, in time proportional to its size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..partitions import partition_value
from .segment import Buffer, Segment

__all__ = ["PartitionView", "Partitions"]


@dataclass
class PartitionView:
    """One partition as a search sees it: its docs per segment, its buffered ids and its live totals."""

    code: int
    codes: list[np.ndarray]  # per segment (in ``segments`` order): every doc's partition code
    rows: list[np.ndarray]  # per segment: the partition's docs (live or not), ascending
    buffered: set[str]
    n_live: int
    total_len: int

    def live_ids(self, segments: Sequence[Segment]) -> list[str]:
        """Ids of the partition's live chunks: the buffered ones (sorted), then per segment in row order."""
        out = sorted(self.buffered)
        for seg, inside in zip(segments, self.rows):
            alive = inside[seg.live[inside]] if seg.n_deleted else inside
            out.extend(seg.ids[i] for i in alive.tolist())
        return out


_NO_ROWS = np.zeros(0, dtype=np.int32)


class Partitions:
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

    def of_segment(self, seg: Segment) -> np.ndarray:
        """Partition code of every doc of ``seg`` (cached on the segment)."""
        if seg.parts is None:
            values = (partition_value(m, self.key) for m in seg.load_metas())
            seg.parts = np.fromiter(
                (-1 if v is None else self.code(v) for v in values), dtype=np.int32, count=seg.n_docs
            )
        return seg.parts

    def rows_of(self, seg: Segment, code: int) -> np.ndarray:
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

    def sizes(self, segments: Sequence[Segment], buffer: Buffer) -> dict[str, int]:
        """Live chunks per partition value."""
        sizes: Counter[str] = Counter()
        for d in buffer.docs.values():
            value = partition_value(d.meta, self.key)
            if value is not None:
                sizes[value] += 1
        for seg in segments:  # intern every segment's values first
            self.of_segment(seg)
        names = {code: name for name, code in self._codes.items()}
        for seg in segments:
            codes = self.of_segment(seg)
            live = codes[seg.live] if seg.n_deleted else codes
            counts = np.bincount(live[live >= 0], minlength=0)
            for code in np.flatnonzero(counts).tolist():
                sizes[names[code]] += int(counts[code])
        return dict(sizes)

    def view(self, value: str, segments: Sequence[Segment], buffer: Buffer, version: int) -> PartitionView:
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
            return PartitionView(code, codes, rows, buffered, cached[1], cached[2])
        n_live = len(buffered)
        total = sum(buffer.docs[cid].length for cid in buffered)
        for seg, inside in zip(segments, rows):
            alive = inside[seg.live[inside]] if seg.n_deleted else inside
            n_live += len(alive)
            total += int(seg.lens[alive].astype(np.int64).sum())
        if len(self._totals) > 4096:
            self._totals.clear()
        self._totals[value] = (version, n_live, total)
        return PartitionView(code, codes, rows, buffered, n_live, total)
