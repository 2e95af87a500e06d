"""Partitions of the keyword index: each value of the ``partition_key`` scores with its own statistics.

A search whose filter pins one partition (see :mod:`finderledge.partitions`) counts document frequencies,
the chunk count and the average length over that partition only, in time proportional to its size; a filter
that reaches several partitions (``$ne``, ``$in`` ...) counts them over those partitions together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..partitions import MISSING, OTHER, Group, PartitionFilter, partition_group
from .segment import Buffer, Segment

__all__ = ["PartitionView", "Partitions"]


@dataclass
class PartitionView:
    """One partition (or the set of partitions a filter reaches) as a search sees it: its docs per segment, its
    buffered ids and its live totals."""

    code: int
    codes: list[np.ndarray]  # per segment (in ``segments`` order): every doc's partition code
    rows: list[np.ndarray]  # per segment: the partition's docs (live or not), ascending
    buffered: set[str]
    n_live: int
    total_len: int
    table: np.ndarray | None = None  # a set of partitions: membership by ``code + 2`` (None: ``code`` alone)

    def holds(self, segment: int, docs: np.ndarray) -> np.ndarray:
        """Which of ``docs`` (of the ``segment``-th segment) are in the partition (or the set)."""
        codes = self.codes[segment][docs]
        member: np.ndarray = codes == self.code if self.table is None else self.table[codes + 2]
        return member

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

    Codes are interned strings (:data:`~finderledge.partitions.MISSING` ``-1``: no value,
    :data:`~finderledge.partitions.OTHER` ``-2``: not a string); a segment's codes are read from its metadata on the
    first partitioned search (segments are immutable), totals are recounted after a write, per partition."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._codes: dict[str, int] = {}
        self._totals: dict[Group, tuple[int, int, int]] = {}  # group -> (write version, n_live, tokens)
        self._buffered: tuple[int, dict[Group, set[str]]] = (
            -1,
            {},
        )  # (write version, group -> buffered ids)
        self._reached: dict[str, tuple[int, list[Group]]] = {}  # filter text -> (codes known, groups reached)

    def code(self, value: Group) -> int:
        if isinstance(value, int):  # MISSING or OTHER
            return value
        return self._codes.setdefault(value, len(self._codes))

    def codes(self) -> dict[str, int]:
        """Every partition value seen so far and its code."""
        return dict(self._codes)

    def of_segment(self, seg: Segment) -> np.ndarray:
        """Partition code of every doc of ``seg`` (cached on the segment)."""
        if seg.parts is None:
            values = (partition_group(m, self.key) for m in seg.load_metas())
            seg.parts = np.fromiter((self.code(v) for v in values), dtype=np.int32, count=seg.n_docs)
        return seg.parts

    def rows_of(self, seg: Segment, code: int) -> np.ndarray:
        """The docs of ``seg`` in partition ``code``, ascending (one sort per segment, then a lookup)."""
        if seg.part_rows is None:
            codes = self.of_segment(seg)
            order = np.argsort(codes, kind="stable").astype(np.int32)
            values, starts = np.unique(codes[order], return_index=True)
            ends = [*starts[1:].tolist(), len(order)]
            seg.part_rows = {int(v): order[a:b] for v, a, b in zip(values.tolist(), starts.tolist(), ends)}
        return seg.part_rows.get(code, _NO_ROWS)

    def sizes(self, segments: Sequence[Segment], buffer: Buffer) -> dict[str, int]:
        """Live chunks per partition value."""
        sizes: Counter[str] = Counter()
        for d in buffer.docs.values():
            value = partition_group(d.meta, self.key)
            if isinstance(value, str):
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

    def _buffer_index(self, buffer: Buffer, version: int) -> dict[Group, set[str]]:
        """The buffer's ids per group, once per write."""
        if self._buffered[0] != version:
            index: dict[Group, set[str]] = {}
            for cid, d in buffer.docs.items():
                index.setdefault(partition_group(d.meta, self.key), set()).add(cid)
            self._buffered = (version, index)
        return self._buffered[1]

    def _totals_of(
        self,
        group: Group,
        rows: Sequence[np.ndarray],
        segments: Sequence[Segment],
        buffer: Buffer,
        version: int,
    ) -> tuple[int, int]:
        """Live chunks and tokens of ``group`` (its docs per segment: ``rows``), recounted after a write."""
        cached = self._totals.get(group)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        buffered = self._buffer_index(buffer, version).get(group, set())
        n_live = len(buffered)
        total = sum(buffer.docs[cid].length for cid in buffered)
        for seg, inside in zip(segments, rows):
            alive = inside[seg.live[inside]] if seg.n_deleted else inside
            n_live += len(alive)
            total += int(seg.lens[alive].astype(np.int64).sum())
        if len(self._totals) > 4096:
            self._totals.clear()
        self._totals[group] = (version, n_live, total)
        return n_live, total

    def view(self, value: str, segments: Sequence[Segment], buffer: Buffer, version: int) -> PartitionView:
        """Partition ``value`` in the store's current state (``version`` counts its writes)."""
        code = self.code(value)
        codes = [self.of_segment(seg) for seg in segments]
        rows = [self.rows_of(seg, code) for seg in segments]
        buffered = self._buffer_index(buffer, version).get(value, set())
        n_live, total = self._totals_of(value, rows, segments, buffer, version)
        return PartitionView(code, codes, rows, buffered, n_live, total)

    def view_set(
        self, reach: PartitionFilter, segments: Sequence[Segment], buffer: Buffer, version: int
    ) -> PartitionView:
        """The partitions (and groups of chunks in none) ``reach`` holds, together: their docs, their buffered
        ids and the sums of their totals (integers: the same whatever other partitions exist)."""
        codes = [self.of_segment(seg) for seg in segments]  # every segment's values interned first
        index = self._buffer_index(buffer, version)
        for group in index:
            self.code(group)
        known, cached = len(self._codes), self._reached.get(reach.text)
        if cached is not None and cached[0] == known:  # codes only grow: the same ones are reached
            reached = cached[1]
        else:
            groups: list[Group] = [*self._codes, MISSING, OTHER]
            reached = [g for g in groups if reach(g)]
            if len(self._reached) > 256:
                self._reached.clear()
            self._reached[reach.text] = (known, reached)
        table = np.zeros(len(self._codes) + 2, dtype=bool)
        for group in reached:
            table[self.code(group) + 2] = True
        rows = [np.flatnonzero(table[c + 2]).astype(np.int32) for c in codes]
        buffered: set[str] = set()
        n_live = total = 0
        for group in reached:
            buffered |= index.get(group, set())
            own = [self.rows_of(seg, self.code(group)) for seg in segments]
            n, t = self._totals_of(group, own, segments, buffer, version)
            n_live, total = n_live + n, total + t
        return PartitionView(-3, codes, rows, buffered, n_live, total, table)
