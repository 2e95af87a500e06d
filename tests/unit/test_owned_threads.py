"""The one registry of background threads (``progress.start_owned``): the exit hook asks each running thread to
stop and joins it; an owner is never kept alive by it; nothing starts once the process exits.  And the server's
indexing queue joins its thread at close, after the jobs queued (issue 39: no thread outlives its owner)."""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

import pytest

from finderledge import progress
from finderledge.server.jobs import IndexJob, IndexJobs


class Owner:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread = progress.start_owned(self.run, "finderledge-test-owner", self.ask_to_stop)

    def run(self) -> None:
        self.stop.wait()

    def ask_to_stop(self) -> None:
        self.stop.set()


def test_stop_owned_stops_and_joins_every_running_thread() -> None:
    owners = [Owner(), Owner()]
    stop = threading.Event()
    closure = progress.start_owned(lambda: stop.wait() and None, "finderledge-test-closure", stop.set)
    assert closure is not None and all(o.thread is not None and o.thread.is_alive() for o in owners)
    assert progress.stop_owned(timeout=10) == []
    assert not closure.is_alive() and not any(o.thread.is_alive() for o in owners if o.thread)


def test_a_finished_thread_drops_out_and_no_owner_is_kept_alive() -> None:
    owner = Owner()
    thread = owner.thread
    assert thread is not None
    owner.ask_to_stop()
    thread.join(10)
    gone = [o for o in progress._owned if o is thread]
    assert gone == []  # a thread that ended is no longer registered
    kept = Owner()  # a running thread's stop is a weak method: the registry itself never holds its owner
    ref = progress._owned[kept.thread]  # type: ignore[index]
    assert ref() == kept.ask_to_stop
    kept.ask_to_stop()
    kept.thread.join(10)  # type: ignore[union-attr]


def test_nothing_starts_once_the_process_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_exiting", True)
    assert progress.start_owned(lambda: None, "finderledge-late", lambda: None) is None
    with progress.heartbeat("late work", interval=0.01) as step:  # the work goes on without its beat
        step("one")
        time.sleep(0.05)


class Holder:
    """An owner of a resource closed by ``progress.close_at_exit`` (the Qdrant stores' client)."""

    def __init__(self, closed: list[str], name: str) -> None:
        self.close = progress.close_at_exit(self, lambda: closed.append(name))


def test_a_closer_runs_once_when_called_or_when_its_owner_is_collected() -> None:
    closed: list[str] = []
    called, dropped = Holder(closed, "called"), Holder(closed, "dropped")
    called.close()
    called.close()
    del dropped
    gc.collect()
    assert closed == ["called", "dropped"]
    assert called.close not in progress._closers  # the registry lets go of a closer once it ran


def test_a_collection_inside_the_registry_lock_runs_its_closer_without_deadlock() -> None:
    """A collection (which runs an owner's closer) may start at any allocation, also one made while this
    thread holds the registry's lock: the closer then takes that lock again in the same thread."""
    closed: list[str] = []
    holder = Holder(closed, "collected")

    def collect_inside() -> None:
        with progress._closers_lock:
            holder.close()  # as a finalizer run by a collection at that point would

    worker = threading.Thread(target=collect_inside, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and closed == ["collected"]


def test_the_exit_hook_closes_what_was_never_closed_after_the_threads_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run at exit by the library's own hook, after the owned threads stop (a thread may still be using the
    resource) -- not by ``weakref.finalize``'s exit hook, after which no finalizer runs at all."""
    order: list[str] = []
    owner = Owner()
    monkeypatch.setattr(owner, "ask_to_stop", lambda: (order.append("thread stopped"), owner.stop.set()))
    progress.start_owned(owner.run, "finderledge-test-exit", owner.ask_to_stop)
    kept = Holder(order, "closed")  # never closed by its owner
    monkeypatch.setattr(progress, "_exiting", False)
    progress._at_exit()
    assert order[-1] == "closed" and "thread stopped" in order
    kept.close()  # its owner's later close closes nothing
    assert order.count("closed") == 1


def test_index_jobs_close_runs_the_queued_jobs_then_joins(tmp_path: Path) -> None:
    jobs = IndexJobs(tmp_path / "jobs", lambda _id: None)
    ran: list[int] = []

    def job(n: int) -> IndexJob:
        def run() -> int:
            time.sleep(0.05)
            ran.append(n)
            return n

        return IndexJob(f"{n:032x}", {"id": f"{n:032x}"}, run, str)

    submitted = [jobs.submit(job(n)) for n in range(3)]
    thread = jobs._thread
    assert thread is not None and thread.name == "finderledge-index"
    jobs.close()
    assert not thread.is_alive() and ran == [0, 1, 2] and all(j.done.is_set() for j in submitted)
    again = jobs.submit(job(3))  # a later upload starts another thread
    assert again.done.wait(10) and again.result == 3
    jobs.close()
    gc.collect()


def test_the_library_registers_one_exit_hook() -> None:
    """One ``atexit`` hook for every background thread of the library (``progress._at_exit``): a part keeping
    its own hook and its own bookkeeping stops its threads in an order no one chose, and is missed by the
    registry's callers (the calibration and the model loads each had one)."""
    import ast

    import finderledge

    root = Path(finderledge.__file__).parent
    using = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if "atexit" in names:
                using.append(path.relative_to(root).as_posix())
    assert using == ["progress.py"]
