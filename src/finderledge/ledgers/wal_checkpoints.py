"""Background WAL checkpoints: a commit of the SQLite ledger never waits for the log to be copied and synced.

SQLite's automatic checkpoint runs inside the ``COMMIT`` that fills its log past 1,000 pages: that writer copies
the log into the database file and waits for two ``fsync`` calls.  In a bulk build this was most of what a
commit cost (about 0.5 s of a 10 s build of 100,000 chunks, far more at 1,000,000, where each commit rewrites
pages of the random-key id indexes).  The writing connection turns it off; after each commit it wakes a thread
of this module, which runs the same checkpoint (``PASSIVE``: it never blocks a reader or the writer) on a
connection of its own, at most every :data:`INTERVAL_S`.  What a checkpoint does, and so what survives a crash or
a power cut, is unchanged: only the thread that waits for it.

If that thread cannot open its connection, the writer's automatic checkpoint is turned back on (SQLite's own
behaviour); an error of one checkpoint is logged and the next commit tries again.  The thread is an owned
thread (:func:`~finderledge.progress.start_owned`): joined at :meth:`WalCheckpointer.close` and, for a ledger
never closed, at the process's exit; a commit after that exit began checkpoints itself.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable

from ..progress import start_owned

__all__ = ["AUTOCHECKPOINT_PAGES", "IDLE_S", "INTERVAL_S", "WalCheckpointer"]

logger = logging.getLogger(__name__)

#: SQLite's default automatic-checkpoint threshold, restored on the writer if the thread cannot work
AUTOCHECKPOINT_PAGES = 1000
#: a checkpoint at most this often (the commits in between are copied together: pages they all rewrote once)
INTERVAL_S = 0.5
#: the thread ends after this long without a commit (the next commit starts another)
IDLE_S = 30.0


class WalCheckpointer:
    """Checkpoints one database's write-ahead log on a daemon thread, woken by :meth:`committed`.

    ``connect`` opens the thread's own connection (called on that thread).  The thread starts at the first
    commit and ends after :data:`IDLE_S` without one (its connection closed), so a ledger that only reads, or
    stopped writing, holds neither; the next commit starts it again."""

    def __init__(self, name: str, connect: Callable[[], sqlite3.Connection]) -> None:
        self._name = name
        self._connect = connect
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.unavailable = False  # the thread could not open its connection: the writer checkpoints itself
        self._restored = False  # ... and its automatic checkpoints are back on
        self.checkpoints = 0  # checkpoints run (for tests and logs)

    def take_over(self, writer: sqlite3.Connection) -> None:
        """Turn the writer connection's automatic checkpoints off: this object runs them from now on."""
        writer.execute("PRAGMA wal_autocheckpoint=0")

    def committed(self, writer: sqlite3.Connection) -> None:
        """After a commit on ``writer``: wake the thread (started if none runs).  Never raises: the commit is
        done, and a thread that cannot start gives the writer its automatic checkpoints back."""
        if not self.unavailable:
            try:
                with self._lock:  # woken under the lock: a thread ending for idleness sees it
                    if self._stopping.is_set():
                        return
                    if self._thread is None:
                        self._thread = start_owned(
                            self._run, f"finderledge-wal-checkpoint {self._name}", self._ask_to_stop
                        )
                    if self._thread is not None:
                        self._wake.set()
                        return
                    self.unavailable = True  # the interpreter is exiting: no thread starts any more
            except RuntimeError as exc:  # "can't start new thread"
                logger.warning(
                    "ledger %s: background checkpoints unavailable (%s); commits run them", self._name, exc
                )
                self.unavailable = True
        if not self._restored:
            try:
                writer.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
                self._restored = True
            except sqlite3.Error as exc:  # tried again after the next commit
                logger.warning("ledger %s: could not turn automatic checkpoints back on: %s", self._name, exc)

    def close(self) -> None:
        """Stop the thread after the checkpoint it is running (the closing writer checkpoints the rest)."""
        with self._lock:
            thread = self._thread
        self._ask_to_stop()
        if thread is not None:
            thread.join()

    def _ask_to_stop(self) -> None:
        """End the thread after the checkpoint it is running, without waiting (the process's exit joins it)."""
        with self._lock:
            self._stopping.set()
        self._wake.set()

    def _run(self) -> None:
        try:
            db = self._connect()
        except Exception as exc:  # noqa: BLE001 - the writer takes checkpoints back (see committed)
            logger.warning(
                "ledger %s: background checkpoints unavailable (%s); commits run them", self._name, exc
            )
            with self._lock:
                self.unavailable = True
                self._thread = None
            return
        last = 0.0
        try:
            while self._idle_wait():
                # commits in the meantime are copied by the same checkpoint (a closing writer ends the wait)
                self._stopping.wait(last + INTERVAL_S - time.monotonic())
                self._wake.clear()
                if self._stopping.is_set():
                    return
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error as exc:  # e.g. a full disk: the log keeps every commit; the next retries
                    logger.warning("ledger %s: checkpointing the write-ahead log failed: %s", self._name, exc)
                last = time.monotonic()
        finally:
            db.close()

    def _idle_wait(self) -> bool:
        """Wait for a commit; False when closing, or after :data:`IDLE_S` without one (the thread then ends)."""
        while not self._wake.wait(IDLE_S):
            with self._lock:
                if not self._wake.is_set():
                    self._thread = None
                    return False
        return not self._stopping.is_set()
