"""The checkpoint policy: when a process writes its indexes to disk after changes, in one place.

The ledger holds every change, so a checkpoint never decides what is kept; it bounds the replay a crash costs at
the next open.  The rules, and who applies them:

* **After a commit** (:class:`Checkpointer`, called by the write path): the change is applied in memory at once,
  and written to disk only when :func:`save_due`: the index is small (writing it costs little), the changes not
  yet written reach a share of it, a while passed since this writer last wrote them, or (below) the backlog is
  long.  A bulk build writes the indexes a few dozen times rather than after every batch, and adding one
  document to a large index writes nothing but the ledger.
* **A long backlog or a rebuilt index** (:func:`needs_checkpoint`) is written as soon as the write lock is free,
  also by a process that only follows (:meth:`Replica.maybe_checkpoint
  <finderledge.replica.core.Replica.maybe_checkpoint>`).
* **Per leg** (:func:`leg_due`): a leg whose files already hold what it applied writes nothing; a replica based
  on an older checkpoint than the one on disk writes only when forced or backlogged, reloading first.
* **At close** (:func:`applied`): a replica that applied anything checkpoints if the lock is free; one that only
  read takes no lock and writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence, Sized
from typing import Any, Protocol

from ..errors import IndexCorruptError
from ..ledgers import ChunkRecord
from ..vector_stores import LOCAL

__all__ = [
    "BACKLOG_LIMIT",
    "SAVE_SECONDS",
    "SAVE_SHARE",
    "SAVE_SMALL",
    "Checkpointer",
    "applied",
    "backlogged",
    "leg_due",
    "needs_checkpoint",
    "save_due",
]

logger = logging.getLogger(__name__)


# what the policy reads of a leg, its checkpoint record and the engine: protocols, so that the modules applying
# the policy (legs, core, the engine) import it and it imports none of them
class Leg(Protocol):
    """What the policy reads of a :class:`~finderledge.replica.legs.Leg`."""

    handle: Any
    token: str | None
    seq: int
    pending: int
    rebuilt: bool
    memory_only: bool

    @property
    def location(self) -> str: ...


class Record(Protocol):
    """What the policy reads of a :class:`~finderledge.replica.legs.Checkpoint` record."""

    @property
    def seq(self) -> int: ...

    @property
    def token(self) -> str | None: ...


class Following(Protocol):
    """What the :class:`Checkpointer` uses of an :class:`~finderledge.engine.Engine`."""

    @property
    def replica(self) -> Any: ...

    @property
    def keyword_store(self) -> Sized: ...


# after a commit the indexes are brought up to date in memory at once, but written to disk only when the index
# is small (writing it costs little), when the changes not yet written reach a share of it, when this many
# seconds passed since this writer last wrote them, when the backlog passes BACKLOG_LIMIT changes, and
# at close.  The ledger holds every change meanwhile: a crash costs a replay of that backlog at the next open
# (bounded by the share), a bulk build writes the indexes a few dozen times rather than after every batch, and
# adding one document to a large index writes nothing but the ledger
SAVE_SMALL = 1_000  # chunks: an index this small is written after every commit
SAVE_SHARE = 0.1  # ... a larger one once the changes not yet written reach this share of its chunks
SAVE_SECONDS = 30.0  # ... or this long after the last time

# a stale replica persists anyway (reloading from disk first) once this many changes wait in memory
BACKLOG_LIMIT = 5000


def save_due(size: int, backlog: int, saved_at: float) -> bool:
    """Whether a commit writes the indexes to disk: ``size`` chunks in the index, ``backlog`` changes not yet
    written, last written at ``saved_at`` (``time.monotonic``) by this writer (see :data:`SAVE_SHARE`)."""
    return size < SAVE_SMALL or backlog >= SAVE_SHARE * size or time.monotonic() - saved_at >= SAVE_SECONDS


def backlogged(leg: Leg) -> bool:
    """Over :data:`BACKLOG_LIMIT` changes wait in memory: persist now (even a stale replica, reloading first)."""
    return leg.pending > BACKLOG_LIMIT


def needs_checkpoint(leg: Leg) -> bool:
    """A loaded local leg with files to write that was rebuilt or is backlogged: persist it when the lock is free."""
    return (
        leg.handle is not None
        and leg.location == LOCAL
        and not leg.memory_only
        and (leg.rebuilt or backlogged(leg))
    )


def leg_due(leg: Leg, record: Record | None, force: bool, overlay_empty: bool) -> str:
    """What checkpointing ``leg`` does, given the ``record`` on disk: ``"skip"`` (its files already hold what it
    applied, or it is stale and neither forced nor backlogged), ``"reload"`` (stale: reload from disk, then
    write) or ``"write"``.  ``overlay_empty``: the vector leg's overlay holds nothing (True for the keyword leg)."""
    current = (record.token if record else None) == leg.token
    if current and record is not None and record.seq == leg.seq and leg.pending == 0 and overlay_empty:
        return "skip"
    if not current:
        return "reload" if force or backlogged(leg) else "skip"
    return "write"


def applied(legs: Sequence[Leg], overlay_empty: bool) -> bool:
    """Whether a replica closing with these local ``legs`` applied anything it should checkpoint."""
    return any(leg.pending or leg.rebuilt for leg in legs) or not overlay_empty


class Checkpointer:
    """What follows each commit of a :class:`~finderledge.ingest.write.Writer`: shared indexes updated, this
    process's replicas brought up to date, and written to disk when due (see :data:`SAVE_SHARE`)."""

    def __init__(self, engine: Following) -> None:
        self._engine = engine
        self._saved_at = time.monotonic()  # when this writer last wrote the indexes to disk

    def __call__(self, written: Sequence[ChunkRecord] = ()) -> None:
        """After a commit: update shared indexes, bring this process's replicas up to date, and persist them
        when due (see :data:`SAVE_SHARE`).  ``written``: the chunk rows just committed, applied from memory
        rather than read back.  The change is already safe in the ledger, so a failure here is logged, not
        raised: the next write or open replays it."""
        try:
            self._engine.replica.shared.sync(written)
        except Exception as exc:  # noqa: BLE001 - a shared index (a server) failed; the ledger holds the change
            logger.error(
                "the change is committed to the ledger, but updating the shared vector index failed "
                "(%s: %s); the next write or search applies it",
                type(exc).__name__,
                exc,
            )
        replica = self._engine.replica
        try:
            replica.follow(written=written)  # in memory now (a backlog over BACKLOG_LIMIT is written at once)
            if self._save_due():
                replica.after_commit()
                self._saved_at = time.monotonic()
        except (OSError, IndexCorruptError) as exc:
            logger.error(
                "the change is committed to the ledger, but writing the index checkpoint failed (%s); "
                "it is replayed from the ledger at the next write or open",
                exc,
            )

    def _save_due(self) -> bool:
        """Whether this commit writes the indexes to disk (see :func:`save_due`)."""
        legs = self._engine.replica.local_legs()
        backlog = max((leg.pending for leg in legs), default=0)
        return save_due(len(self._engine.keyword_store), backlog, self._saved_at)
