"""How a process's indexes follow the ledger: open from checkpoints, apply the change log, checkpoint.

The concurrency rules of a persist directory, in one place:

* **Writers** commit to the ledger in one SQLite transaction under the directory's write lock (documents,
  chunks and a ``changes`` row each).  That commit is the commit point; nothing else must succeed.
* **Indexes are replicas.**  Each process holds the BM25 index and the vector index in memory, each
  loaded from its last checkpoint on disk, whose ledger ``seq`` and writer token are recorded in the
  ledger's info table (``index:<leg>``).  Before every search the process applies the changes logged
  since the ``seq`` it has seen (``follow``): BM25 in memory, vectors into a :class:`VectorOverlay`.
  A search therefore reflects every commit made before it started, in every leg, and nothing uncommitted.
* **Checkpoints** are written only under the write lock, and only from a replica that is based on the
  checkpoint on disk (its token matches the recorded one).  A replica based on an older checkpoint leaves
  persisting to others unless its backlog is large, in which case it reloads from disk first.  Replaying
  a change is idempotent (upsert / delete), so a checkpoint's recorded ``seq`` may lag its files, never
  lead them: a crash anywhere costs at most a replay on the next open.
* **Where a vector index lives** (its ``location``) decides how it follows.  ``local`` (FAISS, local Chroma):
  a replica as above.  ``shared`` (a Chroma server, a LangChain vector store): one index every process uses;
  the writer applies its commit to it right after, still under the write lock, and records the ``seq`` it
  reflects in the ledger; anyone who finds that record behind (a writer died in between) applies the rest
  under the lock.  ``ledger`` (pgvector in Postgres mode): written in the ledger's own transaction, always
  current.
* **Checkpoint records** live in the ledger (one directory, SQLite) or, when the ledger is a database many
  machines share, in :class:`LocalRecords` next to this machine's replica files.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from ..errors import IndexCorruptError, LedgerCorruptError, LockTimeoutError, StorageFullError
from ..keyword_store import KeywordStore
from ..ledgers import ChunkRecord, Ledger
from ..storage.locking import ReadWriteLock, WriteLock
from ..vector_stores import LEDGER, LOCAL, VectorStore
from .catch_up import apply_in_batches
from .changes import keyword_step, plan_changes, read_rows, vector_step
from .legs import KEEP_ASIDE, Checkpoint, Leg, LocalRecords, Records
from .overlay import VectorOverlay
from .policy import BACKLOG_LIMIT, applied, leg_due
from .shared import SharedIndexes

__all__ = ["BACKLOG_LIMIT", "KEEP_ASIDE", "READ_ATTEMPTS", "Checkpoint", "LocalRecords", "Records", "Replica"]

logger = logging.getLogger(__name__)

#: how many times :meth:`Replica.reading` runs a search whose legs it finds damaged anew each time (another
#: process killed inside a library's write again while this one rebuilt): each rerun first rebuilds them
READ_ATTEMPTS = 4
_T = TypeVar("_T")

NONE_KNOWN: Mapping[str, ChunkRecord] = MappingProxyType({})  # no rows from memory: all read from the ledger
BIG_CHANGE = 20_000  # chunks: a catch-up adding more is applied in batches (see :func:`~finderledge.replica.catch_up.apply_in_batches`)


class Replica:
    """This process's copies of the BM25 and vector indexes, kept in step with the ledger's change log."""

    def __init__(
        self,
        ledger: Ledger,
        lock: WriteLock,
        open_keyword: Callable[[], KeywordStore],
        open_vector: Callable[[], VectorStore],
        vector_key: str,
        *,
        persistent: bool,
        directory: Path | None = None,
        records: Records | None = None,
        checkpoint_lock: WriteLock | None = None,
        progress: bool = False,
        keyword_key: str = "index:keyword",
    ) -> None:
        """``lock`` serialises the index's writers; ``checkpoint_lock`` (default: the same) guards this machine's
        replica files in ``directory``, whose checkpoints are recorded in ``records`` (default: the ledger);
        ``keyword_key``: the keyword leg's record (another kind of keyword index: another key and folder)."""
        self.ledger = ledger
        self.lock = lock
        self.checkpoint_lock = checkpoint_lock or lock
        self.persistent = persistent
        self.progress = progress
        self.rw = ReadWriteLock()  # searches read; applying changes writes
        self._sync = threading.Lock()  # one thread applies changes or checkpoints at a time
        where: Ledger | Records = records or ledger
        self.keyword = Leg("keyword", keyword_key, open_keyword, where, self.checkpoint_lock, directory)
        self.vector = Leg("vector", vector_key, open_vector, where, self.checkpoint_lock, directory)
        self.overlay = VectorOverlay()
        #: this thread's last :meth:`follow` target where every leg is in the ledger (:attr:`seq` without
        #: asking the ledger again: in Postgres mode each ask is a round trip)
        self._followed = threading.local()
        self.shared = SharedIndexes(ledger, lock, self.rw, self.legs, persistent=persistent)
        # called first by each checkpoint: the engine takes up settings another instance switched (vector_index)
        self.before_checkpoint: Callable[[], None] = lambda: None
        self.keyword.load()
        if self.keyword.location != LOCAL:  # a shared or ledger-side keyword index keeps no record here
            self.keyword.rebuilt = False

    @property
    def seq(self) -> int:
        """The ledger change every loaded leg reflects (call under ``rw.read()`` for a stable answer)."""
        seqs = [leg.seq for leg in self.legs() if leg.location != LEDGER]  # the keyword leg is always one
        if seqs:
            return min(seqs)
        followed: int | None = getattr(self._followed, "seq", None)
        return self.ledger.last_seq() if followed is None else followed

    @property
    def vector_loaded(self) -> bool:
        return self.vector.handle is not None

    def legs(self) -> list[Leg]:
        return [leg for leg in (self.keyword, self.vector) if leg.handle is not None]

    def local_legs(self) -> list[Leg]:
        """Loaded legs that are this process's replicas (checkpointed, following the change log)."""
        return [leg for leg in self.legs() if leg.location == LOCAL]

    def load_vector(self) -> None:
        """Open the vector index (deferred: it needs the embedding dimension) and bring it up to date."""
        with self._sync:
            if self.vector.handle is None:
                self.vector.load()
                if self.vector.location != LOCAL:
                    self.vector.rebuilt = False  # a shared index keeps its record in the ledger, not here
                self._catch_up(self.local_legs())  # both legs end at the same seq
        self.shared.follow(self.ledger.last_seq())
        self.maybe_checkpoint()

    # -- following the log ----------------------------------------------------------------------------
    def follow(self, *, wait: bool = True, written: Sequence[ChunkRecord] = ()) -> int:
        """Apply every change committed since this replica last looked; returns the ``seq`` now reflected.

        With ``wait=False`` a thread that finds another one applying changes goes on without waiting.
        ``written``: the chunk rows the caller has just committed, still holding the write lock; they are
        applied from memory instead of being read back from the ledger (a later copy of an id wins).
        """
        if any(leg.damage is not None or leg.replaced for leg in self.local_legs()):
            self._rebuild_damaged(wait)
        target = self.ledger.last_seq()
        self.shared.follow(target)
        if all(leg.location == LEDGER for leg in self.legs()):
            self._followed.seq = target  # every leg reads the ledger itself: this is the seq they reflect
            return target
        if all(leg.seq == target for leg in self.local_legs()):
            return self.seq
        if not self._sync.acquire(blocking=wait):
            return self.seq
        try:
            self._catch_up(self.local_legs(), {c.id: c for c in written})
        finally:
            self._sync.release()
        self.maybe_checkpoint()
        return self.seq

    def after_commit(self) -> None:
        """After a ledger commit (caller holds ``lock``): persist this replica (shared indexes: :meth:`SharedIndexes.sync <finderledge.replica.shared.SharedIndexes.sync>`)."""
        shared_lock = self.checkpoint_lock is self.lock
        try:
            with self.checkpoint_lock.hold("checkpointing the indexes", timeout=None if shared_lock else 0):
                self.checkpoint()
        except LockTimeoutError:
            logger.debug("checkpoint deferred: another process of this machine is checkpointing")

    def maybe_checkpoint(self) -> None:
        """Persist a rebuilt index or a long backlog now if the write lock is free (never waits for it)."""
        if not any(leg.needs_checkpoint for leg in self.legs()):
            return
        try:
            with self.checkpoint_lock.hold("checkpointing the indexes", timeout=0):
                self.checkpoint(force=True)
        except LockTimeoutError:
            logger.debug("checkpoint deferred: another process is writing")
        except StorageFullError as exc:  # searches go on from memory; the next write or open retries
            logger.warning("checkpoint deferred: %s", exc)

    def _catch_up(self, legs: list[Leg], known: Mapping[str, ChunkRecord] = NONE_KNOWN) -> None:
        """Bring ``legs`` to the ledger's newest ``seq`` (caller holds ``_sync``; ``known``: rows this process
        has just committed, see :func:`~finderledge.replica.changes.read_rows`).

        The slow part (reading rows, tokenizing) runs first; then every leg changes under one write lock,
        so a search sees all legs before a commit or all after it — never two versions of a source."""
        with self.ledger.snapshot():  # changes and chunk rows from one consistent state
            target = self.ledger.last_seq()
            plans = [
                (leg, plan_changes(self.ledger, leg.name, leg.seq, leg.handle, target))
                for leg in legs
                if leg.seq != target
            ]
            if not plans:
                return
            if sum(len(adds) for _, (adds, _) in plans) > BIG_CHANGE and not any(
                set(adds) & set(removes) for _, (adds, removes) in plans
            ):
                apply_in_batches(self, plans, target, known)
                return
            steps: list[Callable[[], None]] = []
            for leg, (adds, removes) in plans:
                rows = read_rows(self.ledger, adds, leg is self.vector, known)
                steps.append(self.step(leg, rows, removes))
                leg.pending += len(adds) + len(removes)
        with self.rw.write():
            for step in steps:
                step()
            for leg, _ in plans:
                leg.seq = target

    def step(self, leg: Leg, rows: list[ChunkRecord], removes: list[str]) -> Callable[[], None]:
        """The slow part of applying ``rows`` and ``removes`` to ``leg`` now; the returned step applies them."""
        if leg is self.keyword:
            return keyword_step(leg.handle, rows, removes, self.progress)
        return vector_step(self.overlay, self.ledger, rows, removes)

    def _rebuild_damaged(self, wait: bool) -> None:
        """Move aside and rebuild each leg whose files turned out damaged after it was loaded."""
        if not self._sync.acquire(blocking=wait):
            return
        try:
            for leg in self.local_legs():
                if leg.damage is not None:
                    self._rebuild(leg, leg.damage)
                elif leg.replaced:  # another process rebuilt its folder: load what is there now
                    self._reload(leg)
                leg.replaced = False
        finally:
            self._sync.release()

    def rebuild_index(self, name: str, reason: str) -> None:
        """Move the ``keyword`` or ``vector`` index aside and rebuild it from the ledger now (``check --repair``)."""
        moved = False
        if name == "vector" and self.vector.handle is None:
            self.load_vector()
            moved = self.vector.moved_at_load is not None  # opening found the damage: moved aside, rebuilt
        leg = self.keyword if name == "keyword" else self.vector
        if leg.location != LOCAL or leg.directory is None:
            return
        with self._sync:
            if not moved:  # each damaged index is moved aside once
                with self.checkpoint_lock.hold(f"moving the damaged {leg.name} index aside"):
                    leg.move_aside(IndexCorruptError(leg.directory / leg.folder, reason))
                    self._reload(leg)
            leg.damage = None
        with self.checkpoint_lock.hold("checkpointing the rebuilt index"):
            self.checkpoint(force=True)

    def _rebuild(self, leg: Leg, exc: IndexCorruptError) -> None:
        """Move ``leg``'s files aside unless another process has replaced them since it loaded them, then
        reload it from disk (empty after the move) and refill it from the ledger (caller holds ``_sync``)."""
        with self.checkpoint_lock.hold(f"moving the damaged {leg.name} index aside"):
            record = Checkpoint.read(leg.records, leg.key)
            token = record.token if record else None
            if token == leg.token or (token or "").startswith("writing-"):
                leg.move_aside(exc)
            self._reload(leg)
        leg.damage = None

    def reading(self, run: Callable[[], _T]) -> _T:
        """Run ``run`` (searches of the legs) under the read lock, every leg at one ledger ``seq``.  A local leg
        found damaged meanwhile (by the search, or while catching up) is moved aside, rebuilt from the ledger,
        and ``run`` runs once more, up to :data:`READ_ATTEMPTS` runs in all: the caller gets an answer, not the
        damage of an index the ledger can rebuild, even while other processes are killed inside a library's
        write one after another; damage that outlasts the rebuilds is raised."""
        for attempt in range(READ_ATTEMPTS):
            last = attempt == READ_ATTEMPTS - 1
            try:
                self.follow(wait=attempt > 0)  # a retry first rebuilds the damaged leg
                with self.rw.read():
                    result = run()
                if last or not self._replaced_meanwhile():
                    return result
            except LedgerCorruptError:
                raise
            except IndexCorruptError as exc:
                if last or not self._marked_damaged(exc):
                    raise
        raise AssertionError("unreachable")

    def _marked_damaged(self, exc: IndexCorruptError) -> bool:
        """Whether a local leg is marked to be rebuilt after ``exc``: by the search that found it (see
        :func:`~finderledge.ranking.legs.guarded`), or here when ``exc`` names a local leg's folder (found while
        catching up or checkpointing)."""
        legs = self.local_legs()
        if any(leg.damage is not None or leg.replaced for leg in legs):
            return True
        for leg in legs:
            if leg.directory is not None and exc.path.is_relative_to(leg.directory / leg.folder):
                leg.damage = exc
                return True
        return False

    def _replaced_meanwhile(self) -> bool:
        """Whether a leg's store found its folder replaced by another process (moved aside and rebuilt, maybe
        not refilled yet) while it searched: that leg is reloaded (compared with the ledger) and the search
        runs again."""
        found = False
        for leg in self.local_legs():
            take = getattr(leg.handle, "take_replaced", None)
            if callable(take) and take():
                leg.replaced = found = True
        return found

    # -- checkpoints --------------------------------------------------------------------------------
    def checkpoint(self, *, force: bool = False) -> None:
        """Persist what this replica applied in memory (caller holds the write lock).

        A replica based on an older checkpoint than the one on disk persists only when ``force`` is set or
        its backlog exceeds :data:`BACKLOG_LIMIT`; it then reloads that leg from disk and replays first.
        """
        assert self.checkpoint_lock.held or not self.persistent, "checkpoint needs the write lock"
        self.before_checkpoint()
        with self._sync:
            self._catch_up(self.local_legs())
            for leg in self.local_legs():
                self._checkpoint_leg(leg, force)
        self.ledger.collect_removed()

    def _checkpoint_leg(self, leg: Leg, force: bool) -> None:
        records = leg.records
        record = Checkpoint.read(records, leg.key)
        due = leg_due(leg, record, force, leg is not self.vector or self.overlay.empty)
        if due == "skip":
            return
        if due == "reload":
            logger.info("%s index: another process checkpointed it; reloading before persisting", leg.name)
            self._reload(leg)
        if leg.memory_only:  # nothing to persist to: its changes stay in the overlay
            return
        if not self.persistent:
            if leg is self.vector:
                self.move_overlay()
            leg.pending = 0
            leg.rebuilt = False
            return
        # mark first with a token no replica keeps: whoever loads the files while they are being written
        # (or after this process dies half-way) holds that token, finds it replaced, and reloads
        Checkpoint(record.seq if record else -1, "writing-" + uuid.uuid4().hex).write(records, leg.key)
        if leg is self.vector:
            self.move_overlay()
        try:
            leg.handle.flush()
        except LedgerCorruptError:
            raise
        except (
            IndexCorruptError
        ) as exc:  # a file read lazily (to merge) is damaged: it is ours, we hold the lock
            self._rebuild(leg, exc)
            return
        token = uuid.uuid4().hex
        Checkpoint(leg.seq, token).write(records, leg.key)
        leg.token = token
        leg.pending = 0
        leg.rebuilt = False

    def move_overlay(self) -> None:
        """Write the overlay into the base index; searches stay correct while it moves (see VectorOverlay)."""
        if self.overlay.empty:
            return
        self.overlay.apply_to(self.vector.handle)
        with self.rw.write():
            self.overlay = VectorOverlay()

    def _reload(self, leg: Leg) -> None:
        """Drop this leg's in-memory state and load the checkpoint on disk, then replay the log after it."""
        old = leg.handle
        if leg is self.vector:
            with self.rw.write():
                old.close()
                leg.load()
                self.overlay = VectorOverlay()
        else:
            new_leg = Leg(leg.name, leg.key, leg.opener, leg.records, leg.lock, leg.directory)
            new_leg.load()
            with self.rw.write():
                leg.handle, leg.token, leg.seq, leg.pending = new_leg.handle, new_leg.token, new_leg.seq, 0
                leg.rebuilt = new_leg.rebuilt
            old.close(flush=False)
        self._catch_up([leg])

    def close(self) -> None:
        """Checkpoint if this replica applied anything (and the lock is free now), then close.  A replica that
        only read takes no lock and writes nothing."""
        try:
            if applied(self.local_legs(), self.overlay.empty):
                with self.checkpoint_lock.hold("closing", timeout=0):
                    self.checkpoint()
        except LockTimeoutError:
            logger.info("closing: another process is writing; it (or the next open) checkpoints the indexes")
        except LedgerCorruptError as exc:  # reported when it was found; close the files anyway
            logger.error("closing without a checkpoint: %s", exc)
        except (OSError, IndexCorruptError) as exc:  # a full disk, say: the ledger holds every change
            logger.warning("closing without a checkpoint (%s); the next open replays the ledger", exc)
        if self.keyword.handle is not None:
            self.keyword.handle.close(flush=False)
        if self.vector.handle is not None:
            self.vector.handle.close()
