"""Indexes every process uses (a Chroma or Qdrant server, a LangChain vector store, the keyword leg in a Qdrant
server): their ``location`` is ``shared``.  They are not replicas: the writer applies its commit to them right
after, still under the write lock, and records in the ledger the ``seq`` they reflect; anyone who finds that
record behind (a writer died in between) applies the rest under the lock.  See :mod:`finderledge.replica.core` for the local replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..errors import LockTimeoutError
from ..ledgers import ChunkRecord, Ledger
from ..metadata import embedded_text
from ..storage.locking import ReadWriteLock, WriteLock
from ..vector_stores import SHARED
from . import catch_up
from .changes import chunk_metadata, plan_changes, read_rows, vectors_of
from .legs import Checkpoint, Leg

__all__ = ["SharedIndexes"]

logger = logging.getLogger(__name__)


class SharedIndexes:
    """The shared legs of one replica: how far they are, and bringing them up to date."""

    def __init__(
        self,
        ledger: Ledger,
        lock: WriteLock,
        rw: ReadWriteLock,
        legs: Callable[[], list[Leg]],
        *,
        persistent: bool,
    ) -> None:
        self.ledger, self.lock, self.rw, self.legs, self.persistent = ledger, lock, rw, legs, persistent

    def follow(self, target: int) -> None:
        """Learn how far a shared index is; if it is behind ``target`` (a writer died after its commit) and no
        one is writing, bring it up to date now (whoever writes next does otherwise)."""
        for leg in self.legs():
            if leg.location != SHARED or leg.seq == target:
                continue
            record = Checkpoint.read(self.ledger, leg.key)
            leg.seq = -1 if record is None else record.seq
            if leg.seq == target:
                continue
            try:
                with self.lock.hold("bringing the shared vector index up to date", timeout=0):
                    self.sync()
            except LockTimeoutError:
                logger.debug("%s index is behind; the writer holding the lock brings it up to date", leg.name)

    def sync(self, written: Sequence[ChunkRecord] = ()) -> None:
        """Apply the change log to every shared index and record the ``seq`` it reflects (caller holds ``lock``;
        ``written``: rows it has just committed, applied from memory rather than read back).

        Adds are upserts and removals ignore unknown ids, so applying a change twice (after a crash between
        the index write and its record) is harmless."""
        known: dict[str, ChunkRecord] | None = None  # made when a shared index is behind
        assert self.lock.held or not self.persistent, "syncing a shared index needs the write lock"
        for leg in self.legs():
            if leg.location != SHARED:
                continue
            target = self.ledger.last_seq()
            record = Checkpoint.read(self.ledger, leg.key)
            leg.seq = -1 if record is None else record.seq
            if leg.seq == target:
                continue
            adds, removes = plan_changes(self.ledger, leg.name, leg.seq, leg.handle, target)
            leg.handle.delete(removes)
            batch = catch_up.CATCH_UP_BATCH
            for start in range(0, len(adds), batch):  # one big file: a batch of rows at a time
                if known is None:
                    known = {c.id: c for c in written}
                keyword = leg.name == "keyword"  # a keyword index in the engine (Qdrant's sparse vectors)
                rows = read_rows(self.ledger, adds[start : start + batch], not keyword, known)
                if rows and keyword:
                    leg.handle.add_prepared(
                        leg.handle.prepare(
                            [c.id for c in rows],
                            [embedded_text(c.content, c.metadata) for c in rows],  # as the local leg
                            chunk_metadata(rows),
                        )
                    )
                elif rows:
                    leg.handle.add(
                        [c.id for c in rows],
                        vectors_of(rows, self.ledger),
                        chunk_metadata(rows),
                        [c.content for c in rows],
                    )
            leg.handle.flush()
            Checkpoint(target, None).write(self.ledger, leg.key)
            with self.rw.write():
                leg.seq = target
