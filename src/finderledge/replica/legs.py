"""One index replica's leg (the keyword or the vector index) and its record on disk: where checkpoint
records live, what a checkpoint says, how a leg opens from its files, and how damaged files are moved aside.

:class:`~finderledge.replica.core.Replica` holds two legs and makes them follow the ledger and checkpoint;
:mod:`finderledge.replica.policy` says when.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import IndexCorruptError, LedgerCorruptError, StorageFullError
from ..ledgers import Ledger
from ..storage.durable import write_file
from ..storage.locking import LOCK_FILE, WriteLock
from ..storage.seals import UnsealedError
from ..vector_stores import LOCAL, VectorStore
from . import policy
from .policy import BACKLOG_LIMIT

__all__ = [
    "BACKLOG_LIMIT",
    "KEEP_ASIDE",
    "Checkpoint",
    "Leg",
    "LocalRecords",
    "NoFiles",
    "Records",
    "prune_asides",
]

logger = logging.getLogger(__name__)

_OPEN_RETRIES = 5
KEEP_ASIDE = 3  # moved-aside copies of a damaged index kept per folder (the oldest are removed)


class Records(Protocol):
    """Where checkpoint records are kept: ``get_info``/``set_info`` of the ledger, or :class:`LocalRecords`."""

    def get_info(self, key: str) -> str | None: ...

    def set_info(self, key: str, value: str | None) -> None: ...


class LocalRecords:
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


class Leg:
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
        self.replaced = False  # another process replaced its folder (moved aside, rebuilt): reload soon
        self.memory_only = False  # its files could not be opened (a full disk): served from the ledger
        self.moved_at_load: Path | None = None  # where its last load moved damaged files (None: it did not)
        # the folder this index lives in: bm25/ for the keyword leg, chroma/ or faiss/ (the key's last part;
        # qdrant_keyword/ for the keyword leg in a local Qdrant)
        self.folder = "bm25" if key == "index:keyword" else key.rsplit(":", 1)[-1]

    @property
    def location(self) -> str:
        """``local``, ``shared`` or ``ledger`` (see the module docstring)."""
        return str(getattr(self.handle, "location", LOCAL))

    @property
    def backlogged(self) -> bool:
        """See :func:`finderledge.replica.policy.backlogged`."""
        return policy.backlogged(self)

    @property
    def needs_checkpoint(self) -> bool:
        """See :func:`finderledge.replica.policy.needs_checkpoint`."""
        return policy.needs_checkpoint(self)

    def load(self) -> None:
        """Open the handle from disk; the checkpoint is read first, so ``seq`` never overstates the files."""
        self.moved_at_load = None
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
                handle, record, self.memory_only = NoFiles(), None, True
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
            self.moved_at_load = self.move_aside(exc)
            if self.moved_at_load is None:
                raise exc
            return self.opener(), None

    def move_aside(self, exc: IndexCorruptError) -> Path | None:
        """Rename this index's folder to a new ``<folder>.corrupt-<time>-<pid>-<random>`` (caller holds the
        write lock) and forget its checkpoint; returns the new name (the old one if it was removed, or moved by
        another process meanwhile), or None when there is no folder.

        A folder that holds its own lock file (Chroma's ``write.lock``, which other processes hold around each
        call into the library) is renamed only while this process holds that lock too: no process is inside
        the library on those files then, and every later caller finds the lock file gone with the folder and
        takes the new one (see :meth:`WriteLock._in_place <finderledge.storage.locking.WriteLock._in_place>`)."""
        if self.directory is None or self.location != LOCAL:
            return None
        directory = self.directory / self.folder
        if not directory.is_dir() and not directory.is_symlink():
            return None
        with ExitStack() as held:
            if self._keeps_own_lock(directory):
                try:
                    held.enter_context(
                        WriteLock(directory, self.lock.timeout).hold(
                            f"moving the {self.name} index aside", note=False
                        )
                    )
                except FileNotFoundError:  # another process moved it aside meanwhile (and rebuilds it)
                    return directory
            stamp = time.strftime("%Y%m%d-%H%M%S")
            aside = directory.with_name(
                f"{directory.name}.corrupt-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            )
            directory.rename(aside)  # one step: nobody ever sees a half-removed folder at the path
            self.records.set_info(self.key, None)
            if isinstance(exc, UnsealedError):  # left half-written by FinderLedge itself: nothing to keep
                shutil.rmtree(aside, ignore_errors=True)
                logger.warning("%s; removed %s and rebuilding the index from the ledger", exc, directory)
                return directory
        logger.error("%s; moved %s to %s and rebuilding the index from the ledger", exc, directory, aside)
        prune_asides(directory)
        return aside

    @staticmethod
    def _keeps_own_lock(directory: Path) -> bool:
        """Whether the store keeps its own lock file in its folder (a real folder and file, never a link)."""
        try:
            st = os.lstat(directory / LOCK_FILE)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and directory.is_dir() and not directory.is_symlink()


def prune_asides(directory: Path) -> None:
    """Keep the newest :data:`KEEP_ASIDE` moved-aside copies of ``directory`` (real folders only, never a
    link), so that repeated damage cannot fill the disk with copies of an index the ledger can rebuild."""
    found = []
    for entry in os.scandir(directory.parent):
        if entry.name.startswith(f"{directory.name}.corrupt-") and entry.is_dir(follow_symlinks=False):
            found.append((entry.stat(follow_symlinks=False).st_ctime, entry.name))
    for _, name in sorted(found, reverse=True)[KEEP_ASIDE:]:
        logger.info("removing an old moved-aside index %s (keeping the newest %d)", name, KEEP_ASIDE)
        shutil.rmtree(directory.parent / name, ignore_errors=True)


class NoFiles(VectorStore):
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
