"""Locks: the persist directory's inter-process write lock, and a readers-writer lock for one process.

Writers of one directory are serialised across processes by an OS file lock (``filelock``: ``fcntl.flock``
on POSIX, ``msvcrt.locking`` on Windows).  The OS releases it when its process dies, so a crashed writer
never leaves the directory locked, and whoever holds it knows no live process is half-way through a write.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import LockTimeoutError, UnsafePathError
from .files import Storage

__all__ = ["LOCK_FILE", "ReadWriteLock", "WriteLock"]

LOCK_FILE = "write.lock"
_OWNER_SUFFIX = ".owner"


class WriteLock:
    """Exclusive, re-entrant write lock of one persist directory (``directory=None``: this process only).

    The holder is written to ``write.lock.owner`` (pid, host, what it does, since when) so that a caller
    who times out learns who holds it; a hold that only reads passes ``note=False`` and writes nothing.
    """

    def __init__(self, directory: Path | None, timeout: float) -> None:
        self.directory = directory
        self.timeout = float(timeout)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._storage = None if directory is None else Storage(directory)
        self._file_lock = (
            None if directory is None else FileLock(str(directory / LOCK_FILE), thread_local=False)
        )

    @contextmanager
    def hold(self, what: str, timeout: float | None = None, *, note: bool = True) -> Iterator[None]:
        """Hold the lock for the block; raise :class:`LockTimeoutError` naming the holder after ``timeout`` s.

        ``note=False`` leaves ``write.lock.owner`` untouched (a read hold: reading never writes to the
        directory); a waiter that times out meanwhile names the last holder that wrote a note."""
        wait = self.timeout if timeout is None else float(timeout)
        if not self._thread_lock.acquire(timeout=wait if wait >= 0 else -1):
            raise LockTimeoutError(
                f"{self.directory or 'index'}: another thread of this process holds the write "
                f"lock for more than {wait:g} s"
            )
        try:
            if self._depth == 0 and self._file_lock is not None:
                self._acquire_file(what, wait, note)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._file_lock is not None:
                    self._file_lock.release()
        finally:
            self._thread_lock.release()

    @property
    def held(self) -> bool:
        """Whether this object (in this thread's process) holds the lock."""
        return self._depth > 0

    def _acquire_file(self, what: str, wait: float, note: bool = True) -> None:
        assert self._file_lock is not None and self._storage is not None
        # the lock file is opened (and truncated) by filelock, which follows links: refuse one first
        self._storage.check((LOCK_FILE, LOCK_FILE + _OWNER_SUFFIX))
        deadline = time.monotonic() + wait
        while True:
            try:
                self._file_lock.acquire(timeout=max(0.0, deadline - time.monotonic()) if wait >= 0 else -1)
            except Timeout:
                raise LockTimeoutError(
                    f"{self.directory}: the write lock is held by {self.holder() or 'another process'} "
                    f"(waited {wait:g} s; raise lock_timeout to wait longer)"
                ) from None
            if self._in_place():
                break
            # the lock file was moved away (with its folder) or removed while we waited: the lock we got guards
            # nothing any more; take the one at the path now (a folder gone for good: FileNotFoundError)
            self._file_lock.release()
            assert self.directory is not None
            if not self.directory.is_dir():
                raise FileNotFoundError(errno.ENOENT, "the locked folder was moved away", str(self.directory))
            time.sleep(0.01)
        if not note:
            return
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "what": what, "since": time.time()}
        try:
            self._storage.write_text(LOCK_FILE + _OWNER_SUFFIX, json.dumps(owner), durable=False)
        except OSError:  # the owner note is for messages only (a full disk included)
            pass
        except UnsafePathError:
            self._file_lock.release()
            raise

    def _in_place(self) -> bool:
        """Whether the file this process just locked is still the one at ``directory/write.lock``.

        A store that keeps its lock file inside its own folder (Chroma) has that folder moved aside (or
        removed) by whoever holds the lock; a process that opened the old file just before then locks a file
        that no longer guards the folder at the path."""
        assert self._file_lock is not None and self.directory is not None
        fd = getattr(getattr(self._file_lock, "_context", None), "lock_file_fd", None)
        if not isinstance(fd, int):  # another filelock: no descriptor to compare (the old behaviour)
            return True
        try:
            held = os.fstat(fd)
            here = os.lstat(self.directory / LOCK_FILE)
        except OSError:
            return False
        return held.st_nlink > 0 and os.path.samestat(held, here)

    def holder(self) -> str | None:
        """Who last took the lock, as ``"pid 123 on host (what) since 12:00:00"``, if recorded."""
        if self._storage is None:
            return None
        try:
            owner = json.loads(self._storage.read_text(LOCK_FILE + _OWNER_SUFFIX))
            since = time.strftime("%H:%M:%S", time.localtime(float(owner["since"])))
            return f"pid {owner['pid']} on {owner['host']} ({owner['what']}) since {since}"
        except (OSError, ValueError, KeyError, TypeError, UnsafePathError):
            return None


class ReadWriteLock:
    """Many readers or one writer, within one process (writers are not starved: new readers wait for them)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer: int | None = None
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer != me:  # a writer may read what it holds
                while self._writer is not None or self._writers_waiting:
                    self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            self._writers_waiting += 1
            while self._writer is not None or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = me
        try:
            yield
        finally:
            with self._cond:
                self._writer = None
                self._cond.notify_all()
