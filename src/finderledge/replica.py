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

import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np

from . import memory
from .changes import chunk_metadata, keyword_step, plan_changes, read_rows, vector_step, vectors_of
from .durable import write_file
from .errors import IndexCorruptError, LedgerCorruptError, LockTimeoutError, StorageFullError
from .gc_pause import cyclic_gc_paused
from .keyword_store import KeywordStore
from .ledgers import ChunkRecord, Ledger
from .locking import ReadWriteLock, WriteLock
from .overlay import VectorOverlay
from .vector_stores import LEDGER, LOCAL, SHARED, VectorStore

__all__ = ["Checkpoint", "LocalRecords", "Records", "Replica"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

# a stale replica persists anyway (reloading from disk first) once this many changes wait in memory
BACKLOG_LIMIT = 5000
_OPEN_RETRIES = 5
KEEP_ASIDE = 3  # moved-aside copies of a damaged index kept per folder (the oldest are removed)
NONE_KNOWN: Mapping[str, ChunkRecord] = MappingProxyType({})  # no rows from memory: all read from the ledger
BIG_CHANGE = 20_000  # chunks: a catch-up adding more is applied in batches (see Replicas._apply_in_batches)
CATCH_UP_BATCH = 5_000  # chunk rows read from the ledger at a time by such a catch-up
SPILL_ROWS = 20_000  # chunks the committing writer applies in memory before writing them to the index files


class Records:
    """Where checkpoint records are kept: ``get_info``/``set_info`` of the ledger, or :class:`LocalRecords`."""

    def get_info(self, key: str) -> str | None:
        raise NotImplementedError

    def set_info(self, key: str, value: str | None) -> None:
        raise NotImplementedError


class LocalRecords(Records):
    """Checkpoint records of this machine's replicas, in ``directory/replica.json``, for a shared database ledger.

    The file names the ledger it follows (``ledger_uuid``): records made for another database (or one that
    was dropped and created again) are ignored, so the replica is compared with the ledger and rebuilt."""

    FILE = "replica.json"

    def __init__(self, directory: Path, ledger_uuid: str, folders: tuple[str, ...] = ("bm25",)) -> None:
        self.path = directory / self.FILE
        self.ledger_uuid = ledger_uuid
        directory.mkdir(parents=True, exist_ok=True)
        self._set_aside_foreign(directory, folders)

    def _set_aside_foreign(self, directory: Path, folders: tuple[str, ...]) -> None:
        """Index folders built from another ledger (another database, or this one dropped and created again) are
        renamed aside, never merged: the replica is rebuilt from this ledger."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("ledger_uuid") in (None, self.ledger_uuid):
            return
        stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        for name in folders:
            try:
                (directory / name).rename(directory / f"{name}.other-ledger-{stamp}")
                logger.warning(
                    "%s was built from another ledger; moved it aside and rebuilding", directory / name
                )
            except FileNotFoundError:
                continue
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("ledger_uuid") == self.ledger_uuid else {}

    def get_info(self, key: str) -> str | None:
        value = self._load().get(key)
        return None if value is None else str(value)

    def set_info(self, key: str, value: str | None) -> None:
        """Replace one record (callers hold the local checkpoint lock; the file is replaced atomically)."""
        data = self._load()
        data["ledger_uuid"] = self.ledger_uuid
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
        write_file(self.path, json.dumps(data, sort_keys=True).encode("utf-8"))


@dataclass(frozen=True)
class Checkpoint:
    """What an index's files on disk reflect: the ledger ``seq`` and the token of the replica that wrote them."""

    seq: int
    token: str | None

    @staticmethod
    def read(records: Ledger | Records, key: str) -> Checkpoint | None:
        raw = records.get_info(key)
        if raw is None:
            return None
        data = json.loads(raw)
        return Checkpoint(int(data["seq"]), data.get("token"))

    def write(self, records: Ledger | Records, key: str) -> None:
        records.set_info(key, json.dumps({"seq": self.seq, "token": self.token}))


class _Leg:
    """One index replica: its handle, the checkpoint it was loaded from, and the ``seq`` it reflects."""

    def __init__(
        self,
        name: str,
        key: str,
        opener: Callable[[], Any],
        records: Ledger | Records,
        lock: WriteLock,
        directory: Path | None,
    ) -> None:
        self.name, self.key, self.opener, self.records, self.lock = name, key, opener, records, lock
        self.directory = directory  # where its folder lives (None: in memory)
        self.handle: Any = None
        self.token: str | None = None
        self.seq = -1  # -1: unknown, compare id sets with the ledger (a new, moved-aside or version-1 index)
        self.pending = 0  # changes applied in memory and not yet checkpointed
        self.rebuilt = False  # loaded without a checkpoint record: persist the comparison's result soon
        self.damage: IndexCorruptError | None = None  # found after loading (a lazily read file): rebuild soon
        self.memory_only = False  # its files could not be opened (a full disk): served from the ledger
        # the folder this index lives in: bm25/ for the keyword leg, chroma/ or faiss/ (the key's last part)
        self.folder = "bm25" if key == "index:keyword" else key.rsplit(":", 1)[-1]

    @property
    def location(self) -> str:
        """``local``, ``shared`` or ``ledger`` (see the module docstring)."""
        return str(getattr(self.handle, "location", LOCAL))

    @property
    def needs_checkpoint(self) -> bool:
        return (
            self.handle is not None
            and self.location == LOCAL
            and not self.memory_only
            and (self.rebuilt or self.pending > BACKLOG_LIMIT)
        )

    def load(self) -> None:
        """Open the handle from disk; the checkpoint is read first, so ``seq`` never overstates the files."""
        for attempt in range(_OPEN_RETRIES):
            record = Checkpoint.read(self.records, self.key)
            try:
                handle = self.opener()
            except LedgerCorruptError:
                raise  # the ledger is damaged, not this index: nothing is moved
            except StorageFullError as exc:
                if self.name != "vector":
                    raise
                # the vector library cannot even open its files on a full disk (Chroma writes at start):
                # this process searches the ledger's vectors in memory instead, and never checkpoints them
                logger.warning("%s; the vector index is searched from the ledger's vectors in memory", exc)
                handle, record, self.memory_only = _NoFiles(), None, True
            except IndexCorruptError as exc:
                if attempt < _OPEN_RETRIES - 1 and Checkpoint.read(self.records, self.key) != record:
                    time.sleep(0.05)  # another process checkpointed while we read: read the new files
                    continue
                handle, record = self._open_under_lock(exc)
            self.handle = handle
            self.token = None if record is None else record.token
            self.seq = -1 if record is None else record.seq
            self.pending = 0
            self.rebuilt = record is None
            self.damage = None
            if record is not None and len(handle) == 0:  # its files are gone (a deleted folder or manifest):
                self.seq, self.rebuilt = -1, True  # compare with the ledger rather than trust the record
            return

    def _open_under_lock(self, exc: IndexCorruptError) -> tuple[Any, Checkpoint | None]:
        """Open again under the write lock (no checkpoint is being written then); if the files are still
        unreadable, move them aside (never delete them) and open an empty index, which the ledger refills."""
        with self.lock.hold(f"opening the {self.name} index"):
            record = Checkpoint.read(self.records, self.key)
            try:
                return self.opener(), record  # the first failure was a checkpoint racing our read
            except LedgerCorruptError:
                raise
            except IndexCorruptError as again:
                exc = again
            if self.move_aside(exc) is None:
                raise exc
            return self.opener(), None

    def move_aside(self, exc: IndexCorruptError) -> Path | None:
        """Rename this index's folder to a new ``<folder>.corrupt-<time>-<pid>-<random>`` (caller holds the
        write lock) and forget its checkpoint; returns the new name, or None when there is no folder."""
        if self.directory is None or self.location != LOCAL:
            return None
        directory = self.directory / self.folder
        if not directory.is_dir() and not directory.is_symlink():
            return None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = directory.with_name(f"{directory.name}.corrupt-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        directory.rename(aside)
        self.records.set_info(self.key, None)
        logger.error("%s; moved %s to %s and rebuilding the index from the ledger", exc, directory, aside)
        _prune_asides(directory)
        return aside


def _prune_asides(directory: Path) -> None:
    """Keep the newest :data:`KEEP_ASIDE` moved-aside copies of ``directory`` (real folders only, never a
    link), so that repeated damage cannot fill the disk with copies of an index the ledger can rebuild."""
    found = []
    for entry in os.scandir(directory.parent):
        if entry.name.startswith(f"{directory.name}.corrupt-") and entry.is_dir(follow_symlinks=False):
            found.append((entry.stat(follow_symlinks=False).st_ctime, entry.name))
    for _, name in sorted(found, reverse=True)[KEEP_ASIDE:]:
        logger.info("removing an old moved-aside index %s (keeping the newest %d)", name, KEEP_ASIDE)
        shutil.rmtree(directory.parent / name, ignore_errors=True)


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
    ) -> None:
        """``lock`` serialises the index's writers; ``checkpoint_lock`` (default: the same) guards this machine's
        replica files in ``directory``, whose checkpoints are recorded in ``records`` (default: the ledger)."""
        self.ledger = ledger
        self.lock = lock
        self.checkpoint_lock = checkpoint_lock or lock
        self.persistent = persistent
        self.progress = progress
        self.rw = ReadWriteLock()  # searches read; applying changes writes
        self._sync = threading.Lock()  # one thread applies changes or checkpoints at a time
        where: Ledger | Records = records or ledger
        self.keyword = _Leg("keyword", "index:keyword", open_keyword, where, self.checkpoint_lock, directory)
        self.vector = _Leg("vector", vector_key, open_vector, where, self.checkpoint_lock, directory)
        self.overlay = VectorOverlay()
        self.keyword.load()

    @property
    def seq(self) -> int:
        """The ledger change every loaded leg reflects (call under ``rw.read()`` for a stable answer)."""
        seqs = [leg.seq for leg in self.legs() if leg.location != LEDGER]  # the keyword leg is always one
        return min(seqs) if seqs else self.ledger.last_seq()

    @property
    def vector_loaded(self) -> bool:
        return self.vector.handle is not None

    def legs(self) -> list[_Leg]:
        return [leg for leg in (self.keyword, self.vector) if leg.handle is not None]

    def local_legs(self) -> list[_Leg]:
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
        self._follow_shared(self.ledger.last_seq())
        self.maybe_checkpoint()

    # -- following the log ----------------------------------------------------------------------------
    def follow(self, *, wait: bool = True, written: Sequence[ChunkRecord] = ()) -> int:
        """Apply every change committed since this replica last looked; returns the ``seq`` now reflected.

        With ``wait=False`` a thread that finds another one applying changes goes on without waiting.
        ``written``: the chunk rows the caller has just committed, still holding the write lock; they are
        applied from memory instead of being read back from the ledger (a later copy of an id wins).
        """
        if any(leg.damage is not None for leg in self.local_legs()):
            self._rebuild_damaged(wait)
        target = self.ledger.last_seq()
        self._follow_shared(target)
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

    # -- shared indexes (a server every process uses) ----------------------------------------------------
    def _follow_shared(self, target: int) -> None:
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
                    self.sync_shared()
            except LockTimeoutError:
                logger.debug("%s index is behind; the writer holding the lock brings it up to date", leg.name)

    def sync_shared(self, written: Sequence[ChunkRecord] = ()) -> None:
        """Apply the change log to every shared index and record the ``seq`` it reflects (caller holds ``lock``;
        ``written``: rows it has just committed, see :meth:`follow`).

        Adds are upserts and removals ignore unknown ids, so applying a change twice (after a crash between
        the index write and its record) is harmless."""
        known: dict[str, ChunkRecord] | None = None  # made when a shared index is behind
        assert self.lock.held or not self.persistent, "sync_shared needs the write lock"
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
            for start in range(0, len(adds), CATCH_UP_BATCH):  # one big file: a batch of rows at a time
                if known is None:
                    known = {c.id: c for c in written}
                rows = read_rows(self.ledger, adds[start : start + CATCH_UP_BATCH], True, known)
                if rows:
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

    def after_commit(self) -> None:
        """After a ledger commit (caller holds ``lock``): persist this replica (shared indexes: :meth:`sync_shared`)."""
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

    def _catch_up(self, legs: list[_Leg], known: Mapping[str, ChunkRecord] = NONE_KNOWN) -> None:
        """Bring ``legs`` to the ledger's newest ``seq`` (caller holds ``_sync``; ``known``: rows this process
        has just committed, see :func:`~finderledge.changes.read_rows`).

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
                self._apply_in_batches(plans, target, known)
                return
            steps: list[Callable[[], None]] = []
            for leg, (adds, removes) in plans:
                rows = read_rows(self.ledger, adds, leg is self.vector, known)
                steps.append(self._step(leg, rows, removes))
                leg.pending += len(adds) + len(removes)
        with self.rw.write():
            for step in steps:
                step()
            for leg, _ in plans:
                leg.seq = target

    @cyclic_gc_paused()
    def _apply_in_batches(
        self,
        plans: list[tuple[_Leg, tuple[list[str], list[str]]]],
        target: int,
        known: Mapping[str, ChunkRecord],
    ) -> None:
        """Apply a change of very many chunks (one big file) reading :data:`CATCH_UP_BATCH` rows at a time, so
        memory holds one batch of rows, not all (caller holds ``_sync`` and a ledger snapshot).

        Added chunks go in batch by batch while every leg still reports its old ``seq``: a search reads texts
        as of that ``seq`` (``get_chunks(visible_at=...)``), so it never returns a chunk of the change early.
        The removals and the new ``seq`` then take effect together under one write lock.  A process that
        holds the checkpoint lock (the committing writer) also writes the vector overlay into the base index
        and both indexes to disk every :data:`SPILL_ROWS` chunks, marking the checkpoint as being written
        first, so neither grows with the change in memory: the vector index's storage is grown once for the whole change
        first (never copied half-way, which held it twice), and the heap freed by each spill's batches is handed
        back to the system."""
        spill = (
            self.persistent
            and self.checkpoint_lock.held
            and all(leg.location == LOCAL and not leg.memory_only for leg, _ in plans)
        )
        unspilled = 0
        marked: set[str] = set()
        for leg, (adds, _) in plans:
            if spill and leg is self.vector:  # its storage grows once, never copied as the spills fill it
                leg.handle.reserve(len(adds))
            for start in range(0, len(adds), CATCH_UP_BATCH):
                rows = read_rows(self.ledger, adds[start : start + CATCH_UP_BATCH], leg is self.vector, known)
                step = self._step(leg, rows, [])
                with self.rw.write():
                    step()
                leg.pending += len(rows)
                unspilled += len(rows)
                if spill and unspilled >= SPILL_ROWS:
                    self._spill(leg, marked)
                    unspilled = 0
                    memory.release_free_memory()  # the batches' freed rows, or the heap keeps growing
        steps = [self._step(leg, [], removes) for leg, (_, removes) in plans]
        with self.rw.write():
            for step in steps:
                step()
            for leg, (_, removes) in plans:
                leg.pending += len(removes)
                leg.seq = target

    def _spill(self, leg: _Leg, marked: set[str]) -> None:
        """Mid-way through a big catch-up: write ``leg``'s in-memory additions to its files (the checkpoint
        record is first marked as being written, so no other replica takes those files for its own)."""
        if leg.name not in marked:
            record = Checkpoint.read(leg.records, leg.key)
            token = "writing-" + uuid.uuid4().hex
            Checkpoint(record.seq if record else -1, token).write(leg.records, leg.key)
            leg.token = token  # still ours: the checkpoint that follows the catch-up writes the real one
            marked.add(leg.name)
        if leg is self.vector:
            self._move_overlay()
        leg.handle.flush()

    def _step(self, leg: _Leg, rows: list[ChunkRecord], removes: list[str]) -> Callable[[], None]:
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
        finally:
            self._sync.release()

    def rebuild_index(self, name: str, reason: str) -> None:
        """Move the ``keyword`` or ``vector`` index aside and rebuild it from the ledger now (``check --repair``)."""
        if name == "vector" and self.vector.handle is None:
            self.load_vector()
        leg = self.keyword if name == "keyword" else self.vector
        if leg.location != LOCAL or leg.directory is None:
            return
        with self._sync:
            with self.checkpoint_lock.hold(f"moving the damaged {leg.name} index aside"):
                leg.move_aside(IndexCorruptError(leg.directory / leg.folder, reason))
                self._reload(leg)
            leg.damage = None
        with self.checkpoint_lock.hold("checkpointing the rebuilt index"):
            self.checkpoint(force=True)

    def _rebuild(self, leg: _Leg, exc: IndexCorruptError) -> None:
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
        found damaged meanwhile is moved aside, rebuilt from the ledger, and ``run`` runs once more: the caller
        gets an answer, not the damage of an index the ledger can rebuild (damage found again is raised)."""
        for retry in (False, True):
            self.follow(wait=retry)  # brings every leg up to date; a retry first rebuilds the damaged one
            try:
                with self.rw.read():
                    return run()
            except LedgerCorruptError:
                raise
            except IndexCorruptError:
                if retry or not any(leg.damage is not None for leg in self.local_legs()):
                    raise
        raise AssertionError("unreachable")

    def _guarded(self, leg: _Leg, search: Callable[[], _T]) -> _T:
        """Run a search on ``leg``; a damaged file it reads (lazily) marks the leg to be rebuilt (see :meth:`reading`)."""
        try:
            return search()
        except LedgerCorruptError:
            raise
        except IndexCorruptError as exc:
            leg.damage = exc
            logger.error("%s; the %s index is moved aside and rebuilt from the ledger", exc, leg.name)
            raise

    # -- searching ----------------------------------------------------------------------------------
    def vector_search(self, embedding: Any, k: int, flt: Any) -> list[tuple[str, float]]:
        """The vector leg: the base index and the overlay of changes not yet checkpointed."""
        overlay, handle = self.overlay, self.vector.handle
        if self.vector.location != LOCAL:
            hits = handle.search(embedding, k, flt)
            return self._rescored(embedding, hits) if getattr(handle, "needs_rescoring", False) else hits
        if overlay.empty:
            return self._guarded(self.vector, lambda: handle.search(embedding, k, flt))
        return self._guarded(self.vector, lambda: overlay.search(handle, embedding, k, flt))

    def vector_search_many(self, embeddings: Any, k: int, flt: Any) -> list[list[tuple[str, float]]]:
        """:meth:`vector_search` for several queries at once (one index call where the backend batches)."""
        overlay, handle = self.overlay, self.vector.handle
        if self.vector.location != LOCAL:
            return [self.vector_search(embedding, k, flt) for embedding in embeddings]
        if overlay.empty:
            return self._guarded(self.vector, lambda: handle.search_many(embeddings, k, flt))
        return self._guarded(self.vector, lambda: overlay.search_many(handle, embeddings, k, flt))

    def keyword_search(self, query: str, k: int, flt: Any) -> list[tuple[str, float]]:
        handle = self.keyword.handle
        return self._guarded(self.keyword, lambda: handle.search(query, k, flt))

    def keyword_search_many(self, queries: Sequence[str], k: int, flt: Any) -> list[list[tuple[str, float]]]:
        """:meth:`keyword_search` for several queries at once (terms they share are scored once)."""
        handle = self.keyword.handle
        return self._guarded(self.keyword, lambda: handle.search_many(queries, k, flt))

    def _rescored(self, embedding: Any, hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Cosine similarities from the ledger's vectors, for a store whose own scores are on another scale."""
        rows = {c.id: c.embedding for c in self.ledger.get_chunks([i for i, _ in hits], with_embedding=True)}
        query = np.asarray(embedding, dtype=np.float32)
        query = query / (np.linalg.norm(query) or 1.0)
        scored = []
        for cid, _ in hits:
            vector = rows.get(cid)
            if vector is not None:
                scored.append((cid, float(query @ vector / (np.linalg.norm(vector) or 1.0))))
        return sorted(scored, key=lambda hit: -hit[1])

    # -- checkpoints --------------------------------------------------------------------------------
    def checkpoint(self, *, force: bool = False) -> None:
        """Persist what this replica applied in memory (caller holds the write lock).

        A replica based on an older checkpoint than the one on disk persists only when ``force`` is set or
        its backlog exceeds :data:`BACKLOG_LIMIT`; it then reloads that leg from disk and replays first.
        """
        assert self.checkpoint_lock.held or not self.persistent, "checkpoint needs the write lock"
        with self._sync:
            self._catch_up(self.local_legs())
            for leg in self.local_legs():
                self._checkpoint_leg(leg, force)
        self.ledger.collect_removed()

    def _checkpoint_leg(self, leg: _Leg, force: bool) -> None:
        records = leg.records
        record = Checkpoint.read(records, leg.key)
        current = (record.token if record else None) == leg.token
        if (
            current
            and record is not None
            and record.seq == leg.seq
            and leg.pending == 0
            and (leg is not self.vector or self.overlay.empty)
        ):
            return
        if not current:
            if not (force or leg.pending > BACKLOG_LIMIT):
                return
            logger.info("%s index: another process checkpointed it; reloading before persisting", leg.name)
            self._reload(leg)
        if leg.memory_only:  # nothing to persist to: its changes stay in the overlay
            return
        if not self.persistent:
            if leg is self.vector:
                self._move_overlay()
            leg.pending = 0
            leg.rebuilt = False
            return
        # mark first with a token no replica keeps: whoever loads the files while they are being written
        # (or after this process dies half-way) holds that token, finds it replaced, and reloads
        Checkpoint(record.seq if record else -1, "writing-" + uuid.uuid4().hex).write(records, leg.key)
        if leg is self.vector:
            self._move_overlay()
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

    def _move_overlay(self) -> None:
        """Write the overlay into the base index; searches stay correct while it moves (see VectorOverlay)."""
        if self.overlay.empty:
            return
        self.overlay.apply_to(self.vector.handle)
        with self.rw.write():
            self.overlay = VectorOverlay()

    def _reload(self, leg: _Leg) -> None:
        """Drop this leg's in-memory state and load the checkpoint on disk, then replay the log after it."""
        old = leg.handle
        if leg is self.vector:
            with self.rw.write():
                old.close()
                leg.load()
                self.overlay = VectorOverlay()
        else:
            new_leg = _Leg(leg.name, leg.key, leg.opener, leg.records, leg.lock, leg.directory)
            new_leg.load()
            with self.rw.write():
                leg.handle, leg.token, leg.seq, leg.pending = new_leg.handle, new_leg.token, new_leg.seq, 0
                leg.rebuilt = new_leg.rebuilt
            old.close(flush=False)
        self._catch_up([leg])

    def close(self) -> None:
        """Checkpoint if this replica applied anything (and the lock is free now), then close.  A replica that
        only read takes no lock and writes nothing."""
        applied = any(leg.pending or leg.rebuilt for leg in self.local_legs()) or not self.overlay.empty
        try:
            if applied:
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


class _NoFiles(VectorStore):
    """The base of a vector leg whose files could not be opened: empty, so the ledger's vectors (applied to
    the overlay) answer every search; it holds nothing and writes nothing."""

    name = "unopened"

    def add(self, ids: Any, embeddings: Any, metadatas: Any, texts: Any = None) -> None:
        raise StorageFullError("vector index", "its files could not be opened")

    def delete(self, ids: Any) -> None:
        return None

    def search(self, embedding: Any, k: int, filter: Any = None) -> list[tuple[str, float]]:
        return []

    def ids(self) -> set[str]:
        return set()

    def __len__(self) -> int:
        return 0
