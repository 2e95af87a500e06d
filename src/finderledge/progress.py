"""Progress of long work as log lines, for runs whose stderr is not a terminal (no progress bar is drawn).

A build, an ingest or an evaluation writing to a file or a CI log used to print nothing for minutes. Here
long work logs one line every :data:`INTERVAL` seconds through the ``finderledge.progress`` logger (done/total,
rate, elapsed), which the ``finderledge`` command shows by default; a library user sees them by enabling
INFO for that logger. Nothing is logged for work that ends before the first interval.  A bar is drawn only on
a terminal wide enough to show one (:func:`bar_fits`): a terminal reporting 0 columns (some containers and CI
runners) gets the log lines too.  The closing line says how the work ended: ``done``, ``interrupted``
(Ctrl-C), ``failed`` or ``stopped`` (its consumer let go of it before the end).

Background threads of long work (the heartbeat here, the ledger's WAL checkpoints, the server's indexing and
parent watch, the leg calibration, the models' background loads) are started by :func:`start_owned`: each is
registered with how to ask it to stop, and the library's one ``atexit`` hook (:func:`stop_owned`) asks every
one still running to stop and joins it, so no thread outlives its owner at exit either, when the owner was
never closed, and none is left inside native code when the interpreter finalises.  The registry holds no owner alive: a stop given as
a bound method is held by a weak reference, and a thread drops out when it ends.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = [
    "INTERVAL",
    "MIN_BAR_COLUMNS",
    "PROGRESS_LOGGER",
    "ProgressLog",
    "bar_fits",
    "close_at_exit",
    "ending",
    "exiting",
    "heartbeat",
    "logged",
    "start_owned",
    "stop_owned",
]

PROGRESS_LOGGER = "finderledge.progress"
INTERVAL = 5.0  # seconds between two lines
MIN_BAR_COLUMNS = 40  # narrower (a terminal reporting 0 columns): log lines, which wrap, instead of a bar

logger = logging.getLogger(PROGRESS_LOGGER)
T = TypeVar("T")


class ProgressLog:
    """``what: done/total unit (pct), rate unit/s, elapsed s`` every ``interval`` seconds of :meth:`update` calls,
    and a closing line when at least one line was logged (so short work stays silent)."""

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str,
        *,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.interval = INTERVAL if interval is None else interval
        self.done = 0
        self.lines = 0
        self._clock = clock
        self._start = self._last = clock()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done; log a line when ``interval`` seconds passed since the last one."""
        self.done += n
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            self._log(now, "")

    def close(self, note: str = "") -> None:
        """Log the final count if this work was long enough to log anything; ``note`` says how it ended
        (:func:`ending`), by default "done" when every unit is done and "stopped" when some are not."""
        if self.lines:
            finished = self.total is None or self.done >= self.total
            self._log(self._clock(), note or ("done" if finished else "stopped"))

    def _log(self, now: float, note: str) -> None:
        elapsed = max(now - self._start, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100.0 * self.done / self.total:.0f} %)" if self.total else ""
        logger.info(
            "%s: %d%s %s%s, %.1f %s/s, %.0f s%s",
            self.what,
            self.done,
            of,
            self.unit,
            pct,
            self.done / elapsed,
            self.unit,
            elapsed,
            f" ({note})" if note else "",
        )
        self.lines += 1


def bar_fits(stream: Any = None) -> bool:
    """Whether a progress bar can be drawn on ``stream`` (default ``sys.stderr``): a terminal at least
    :data:`MIN_BAR_COLUMNS` wide.  Elsewhere (a file, a pipe, a terminal reporting 0 columns) nothing drawn
    with carriage returns would be seen, so long work logs lines instead."""
    stream = sys.stderr if stream is None else stream
    try:
        if not stream.isatty():
            return False
        return os.get_terminal_size(stream.fileno()).columns >= MIN_BAR_COLUMNS
    except (AttributeError, OSError, ValueError):  # no descriptor, closed, or not a terminal after all
        return False


def ending(exc: BaseException | None) -> str:
    """How work that raised ``exc`` ended, for a closing line: "interrupted" (Ctrl-C), "failed", or "done"
    (None).  A generator closed early sees ``GeneratorExit``: its context says why the consumer stopped."""
    if isinstance(exc, GeneratorExit):
        while isinstance(exc, GeneratorExit):  # a generator closed by one closed while handling the error
            exc = exc.__context__
        if exc is None:  # the consumer let go before the end, without an error
            return "stopped"
    if exc is None:
        return "done"
    # work stopped because Ctrl-C ended the call it was for (a batch embedded ahead: ingest.batches.Stopped)
    return (
        "interrupted"
        if isinstance(exc, KeyboardInterrupt) or isinstance(exc.__cause__, KeyboardInterrupt)
        else "failed"
    )


def logged(items: Sequence[T], what: str, unit: str) -> Iterator[T]:
    """``items`` one by one, with a :class:`ProgressLog` line every few seconds (the closing line too: a
    consumer that closes this generator while handling Ctrl-C gets an "interrupted" line, see :func:`ending`)."""
    log = ProgressLog(what, len(items), unit)
    note = ""
    try:
        for item in items:
            yield item
            log.update()
    except BaseException as exc:
        note = ending(exc)
        raise
    finally:
        log.close(note)


@contextmanager
def heartbeat(what: str, *, interval: float | None = None) -> Iterator[Callable[[str], None]]:
    """Log ``what: step (N s)`` when a step starts and every ``interval`` seconds while it runs (from a thread:
    the work itself, e.g. a torch export, cannot report). The block gets ``step(name)`` to name the next step."""
    interval = INTERVAL if interval is None else interval
    start = time.monotonic()
    current: list[tuple[str, float]] = [("starting", start)]  # the step running and when it started
    stop = threading.Event()

    def step(name: str) -> None:
        current[0] = (name, time.monotonic())
        logger.info("%s: %s (%.0f s so far)", what, name, current[0][1] - start)

    def beat() -> None:
        while not stop.wait(interval):
            name, since = current[0]
            now = time.monotonic()
            logger.info(
                "%s: still %s (%.0f s in this step, %.0f s so far)", what, name, now - since, now - start
            )

    thread = start_owned(beat, "finderledge-heartbeat", stop.set)  # None at exit: no beat, the work goes on
    ended = "failed after"
    try:
        yield step
        ended = "done in"
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        logger.info("%s: %s %.0f s", what, ended, time.monotonic() - start)


# -- background threads: stopped and joined at close (by their owner) and at exit (here) ------------------
_owned_lock = threading.Lock()
#: each running owned thread -> how to ask it to stop (a weak method for a bound one: no owner kept alive)
_owned: dict[threading.Thread, Callable[[], Callable[[], object] | None]] = {}
_groups: dict[threading.Thread, str] = {}  # each running owned thread -> its group (stop_owned(group=...))
_exiting = False


def exiting() -> bool:
    """Whether the interpreter is exiting (the exit hook ran): no owned thread starts any more, and an owner's
    close stops its work rather than finishing it."""
    return _exiting


def start_owned(
    target: Callable[[], None], name: str, stop: Callable[[], object], *, group: str | None = None
) -> threading.Thread | None:
    """Start ``target`` on a daemon thread named ``name``, registered so the process's exit calls ``stop`` (it
    asks the thread to end soon, without waiting) and joins it; ``group`` (default: ``name``) names the kind
    of work, for :func:`stop_owned`.  None once the interpreter is exiting: nothing starts then, the caller
    does without the thread (its owner joins the thread at close as before)."""
    ref: Callable[[], Callable[[], object] | None]
    if hasattr(stop, "__self__") and hasattr(stop, "__func__"):
        ref = weakref.WeakMethod(stop)  # a bound method: its owner may be collected
    else:
        ref = lambda: stop  # a closure or function: held as given

    def run() -> None:
        try:
            target()
        finally:
            with _owned_lock:
                _owned.pop(threading.current_thread(), None)
                _groups.pop(threading.current_thread(), None)

    with _owned_lock:
        if _exiting:
            return None
        thread = threading.Thread(target=run, name=name, daemon=True)
        _owned[thread] = ref
        _groups[thread] = name if group is None else group
        try:
            thread.start()
        except BaseException:  # "can't start new thread": the caller handles it as before
            _owned.pop(thread, None)
            _groups.pop(thread, None)
            raise
    return thread


def stop_owned(timeout: float | None = None, *, group: str | None = None) -> list[str]:
    """Ask every owned thread still running (of ``group`` only, when given) to stop and join each (at most
    ``timeout`` seconds each); the names of those still alive after it (logged)."""
    with _owned_lock:
        running = [(t, ref) for t, ref in _owned.items() if group is None or _groups.get(t) == group]
    for _thread, ref in running:
        stop = ref()
        if stop is not None:
            try:
                stop()
            except Exception:  # one owner's failure never keeps the others running
                logger.debug("asking a background thread to stop failed", exc_info=True)
    left = []
    for thread, _ref in running:
        if thread is not threading.current_thread():
            thread.join(timeout)
        if thread.is_alive():
            left.append(thread.name)
    if left:
        logger.warning("background threads still running: %s", left)
    return left


class _Closer:
    """Runs a ``close`` once, whoever asks first: its owner, the owner's collection, or the exit hook."""

    def __init__(self, close: Callable[[], object]) -> None:
        self._close: Callable[[], object] | None = close

    def __call__(self) -> None:
        with _closers_lock:
            close, self._close = self._close, None
            _closers.discard(self)
        if close is not None:
            close()


_closers: set[_Closer] = set()  # close_at_exit's not run yet
# its own lock, reentrant: a collection that runs a closer (weakref.finalize) can start inside any allocation,
# also one made while this thread holds the lock; _owned_lock (not reentrant) would deadlock there
_closers_lock = threading.RLock()


def close_at_exit(owner: object, close: Callable[[], object]) -> Callable[[], None]:
    """Run ``close`` (which must not hold ``owner``) when ``owner`` is collected or, when it is never closed, at
    exit after the owned threads are stopped: a third-party client is closed while the interpreter can still
    import (qdrant-client's own ``__del__`` at finalisation printed "ImportError: sys.meta_path is None").
    Returns the closer to call instead of ``close``: it runs ``close`` once, and then no more.  (Not a bare
    ``weakref.finalize``: its own exit hook may run first, after which no finalizer runs.)"""
    closer = _Closer(close)
    with _closers_lock:
        _closers.add(closer)
    weakref.finalize(owner, closer).atexit = False  # at exit, _at_exit runs it after the threads stop
    return closer


def _at_exit() -> None:
    """The ``atexit`` hook: no owned thread starts any more, and every one running is stopped and joined
    before the interpreter finalises (it runs while daemon threads still run); then the resources of owners
    never closed are closed (:func:`close_at_exit`)."""
    global _exiting
    with _owned_lock:
        _exiting = True
    stop_owned()
    with _closers_lock:
        closers = list(_closers)
    for closer in closers:
        try:
            closer()
        except Exception:  # one owner's failure never keeps the others open
            logger.debug("closing a resource at exit failed", exc_info=True)


atexit.register(_at_exit)
