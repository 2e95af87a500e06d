"""A change of very many chunks (one big file) applied to a replica's legs a batch of rows at a time.

Memory holds one batch of rows, not the whole change; the committing writer also spills its legs to their
files as it goes.  :class:`~finderledge.replica.core.Replica` decides when (a change over ``BIG_CHANGE`` chunks).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from ..ingest import memory
from ..ingest.gc_pause import cyclic_gc_paused
from ..ledgers import ChunkRecord, Ledger
from ..storage.locking import ReadWriteLock, WriteLock
from ..vector_stores import LOCAL
from .changes import read_rows
from .legs import Checkpoint, Leg

__all__ = ["CATCH_UP_BATCH", "SPILL_ROWS", "Applying", "apply_in_batches"]

CATCH_UP_BATCH = 5_000  # chunk rows read from the ledger at a time by such a catch-up
SPILL_ROWS = 20_000  # chunks the committing writer applies in memory before writing them to the index files


class Applying(Protocol):
    """What a catch-up uses of the replica it applies to (:class:`~finderledge.replica.core.Replica`)."""

    persistent: bool
    checkpoint_lock: WriteLock
    ledger: Ledger
    rw: ReadWriteLock
    vector: Leg

    def step(self, leg: Leg, rows: list[ChunkRecord], removes: list[str]) -> Callable[[], None]: ...

    def move_overlay(self) -> None: ...


@cyclic_gc_paused()
def apply_in_batches(
    replica: Applying,
    plans: list[tuple[Leg, tuple[list[str], list[str]]]],
    target: int,
    known: Mapping[str, ChunkRecord],
) -> None:
    """Apply a change of very many chunks (one big file) reading :data:`CATCH_UP_BATCH` rows at a time, so
    memory holds one batch of rows, not all (the caller, ``replica``, applies nothing else meanwhile and holds a
    ledger snapshot).

    Added chunks go in batch by batch while every leg still reports its old ``seq``: a search reads texts
    as of that ``seq`` (``get_chunks(visible_at=...)``), so it never returns a chunk of the change early.
    The removals and the new ``seq`` then take effect together under one write lock.  A process that
    holds the checkpoint lock (the committing writer) also writes the vector overlay into the base index
    and both indexes to disk every :data:`SPILL_ROWS` chunks, marking the checkpoint as being written
    first, so neither grows with the change in memory: the vector index's storage is grown once for the whole change
    first (never copied half-way, which held it twice), and the heap freed by each spill's batches is handed
    back to the system."""
    spill = (
        replica.persistent
        and replica.checkpoint_lock.held
        and all(leg.location == LOCAL and not leg.memory_only for leg, _ in plans)
    )
    unspilled = 0
    marked: set[str] = set()
    for leg, (adds, _) in plans:
        if spill and leg is replica.vector:  # its storage grows once, never copied as the spills fill it
            leg.handle.reserve(len(adds))
        for start in range(0, len(adds), CATCH_UP_BATCH):
            rows = read_rows(
                replica.ledger, adds[start : start + CATCH_UP_BATCH], leg is replica.vector, known
            )
            step = replica.step(leg, rows, [])
            with replica.rw.write():
                step()
            leg.pending += len(rows)
            unspilled += len(rows)
            if spill and unspilled >= SPILL_ROWS:
                _spill(replica, leg, marked)
                unspilled = 0
                memory.release_free_memory()  # the batches' freed rows, or the heap keeps growing
    steps = [replica.step(leg, [], removes) for leg, (_, removes) in plans]
    with replica.rw.write():
        for step in steps:
            step()
        for leg, (_, removes) in plans:
            leg.pending += len(removes)
            leg.seq = target


def _spill(replica: Applying, leg: Leg, marked: set[str]) -> None:
    """Mid-way through a big catch-up: write ``leg``'s in-memory additions to its files (the checkpoint
    record is first marked as being written, so no other replica takes those files for its own)."""
    if leg.name not in marked:
        record = Checkpoint.read(leg.records, leg.key)
        token = "writing-" + uuid.uuid4().hex
        Checkpoint(record.seq if record else -1, token).write(leg.records, leg.key)
        leg.token = token  # still ours: the checkpoint that follows the catch-up writes the real one
        marked.add(leg.name)
    if leg is replica.vector:
        replica.move_overlay()
    leg.handle.flush()
