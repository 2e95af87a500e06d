"""Indexing jobs: an upload is indexed off the request's worker thread, one job at a time per worker process.

The upload route submits a job and waits up to ``index_wait`` seconds: a file indexed by then answers ``201``
``indexed`` with its chunk count, as before; a larger one answers ``201`` ``processing`` and goes on in the
background.  Each job not yet indexed has a record, ``<index>/server/jobs/<document id>.json`` (status
``processing`` or ``failed`` with the reason, the caller's tenant, the file's name), which every worker reads
for list and detail.  A job that fails has its uploaded file removed (no orphan) and keeps its ``failed``
record until the document is deleted; a job whose process died (killed, or the server stopped mid-indexing) is
marked ``failed`` with its file removed when a worker next starts.  One job at a time per worker bounds the
memory indexing takes to one file's (whose unpacked size, rows and pages the upload checks bounded).  The
indexing thread is an owned thread (:func:`~finderledge.progress.start_owned`): :meth:`IndexJobs.close` (the
app's shutdown, before its index closes) and the process's exit let it finish the jobs queued and join it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..progress import start_owned

__all__ = ["IndexJob", "IndexJobs"]

logger = logging.getLogger(__name__)

_ID = re.compile(r"[0-9a-f]{32}")


@dataclass
class IndexJob:
    """One upload to index; ``record`` is what list/detail show while it is not indexed."""

    document_id: str
    record: dict[str, Any]
    run: Callable[[], Any]  # indexes the file; returns the ingest report or raises
    describe: Callable[[BaseException], str]  # the reason a failure is recorded with (no server path)
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class IndexJobs:
    """The worker process's indexing queue and the job records under ``folder``."""

    def __init__(self, folder: Path, on_failure: Callable[[str], None]) -> None:
        self.folder = folder
        self._on_failure = on_failure  # removes a failed job's uploaded file
        self._queue: queue.Queue[IndexJob | None] = queue.Queue()  # None: the thread ends there
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- records ------------------------------------------------------------------------------------
    def _path(self, document_id: str) -> Path:
        if not _ID.fullmatch(document_id):
            raise ValueError(f"not a document id: {document_id!r}")
        return self.folder / f"{document_id}.json"

    def _write(self, document_id: str, record: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(document_id)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, path)

    def get(self, document_id: str) -> dict[str, Any] | None:
        """The record of a job not (yet) indexed, or None."""
        try:
            data = json.loads(self._path(document_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def records(self) -> list[dict[str, Any]]:
        """Every job record (processing or failed), oldest first."""
        if not self.folder.is_dir():
            return []
        found = [self.get(p.stem) for p in self.folder.glob("*.json") if _ID.fullmatch(p.stem)]
        return sorted((r for r in found if r), key=lambda r: (r.get("created_at", ""), r.get("id", "")))

    def forget(self, document_id: str) -> None:
        """Drop a job's record (its document was indexed or deleted)."""
        self._path(document_id).unlink(missing_ok=True)

    def fail(self, document_id: str, reason: str) -> None:
        """Mark a job failed with ``reason`` and remove its uploaded file."""
        record = self.get(document_id)
        if record is None:
            return
        self._on_failure(document_id)
        self._write(document_id, {**record, "status": "failed", "reason": reason, "pid": None})
        logger.warning("indexing %s (%s) failed: %s", document_id, record.get("filename"), reason)

    # -- running ------------------------------------------------------------------------------------
    def submit(self, job: IndexJob) -> IndexJob:
        """Record the job as ``processing`` and queue it for this process's indexing thread."""
        record = {
            **job.record,
            "status": "processing",
            "pid": os.getpid(),
            "started": _start_token(os.getpid()),
        }
        self._write(job.document_id, record)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                # a daemon thread that `finderledge serve` never waits for (its stopped worker exits within
                # EXIT_SECONDS: the record says what happened); an app embedded in a process joins it
                jobs: queue.Queue[IndexJob | None] = queue.Queue()  # its own queue: None ends it
                thread = start_owned(lambda: self._loop(jobs), "finderledge-index", self._ask_to_stop)
                if thread is not None:
                    self._thread, self._queue = thread, jobs
            if self._thread is not None:
                self._queue.put(job)
                return job
        self._run(job)  # the interpreter is exiting: no thread starts any more, the job runs here
        return job

    def close(self) -> None:
        """Let the indexing thread finish the jobs queued, then join it (before the index it writes closes)."""
        thread = self._ask_to_stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _ask_to_stop(self) -> threading.Thread | None:
        """End the indexing thread after the jobs queued, without waiting (the process's exit joins it); the
        thread, or None when none ran.  A later :meth:`submit` starts another."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(None)
        return thread

    def _loop(self, jobs: queue.Queue[IndexJob | None]) -> None:
        while (job := jobs.get()) is not None:
            self._run(job)

    def _run(self, job: IndexJob) -> None:
        started = time.perf_counter()
        try:
            job.result = job.run()
            self.forget(job.document_id)  # indexed: the ledger has it now
            logger.info("indexed %s in %.1f s", job.document_id, time.perf_counter() - started)
        except BaseException as exc:  # noqa: BLE001 - a job's failure is recorded, never raised here
            job.error = exc
            try:
                self.fail(job.document_id, job.describe(exc))
            except Exception:
                logger.exception("recording the failure of %s failed", job.document_id)
        finally:
            job.done.set()

    def recover(self) -> int:
        """Mark ``failed`` (and remove the file of) every job whose process is gone: killed, or the server was
        stopped while it indexed; returns how many."""
        count = 0
        for record in self.records():
            pid = record.get("pid")
            alive = isinstance(pid, int) and _alive(pid) and _start_token(pid) == record.get("started")
            if record.get("status") == "processing" and not alive:
                self.fail(
                    str(record["id"]),
                    "the server stopped while indexing this file; upload it again",
                )
                count += 1
        return count


def _start_token(pid: int) -> str | None:
    """When process ``pid`` started (Linux: /proc), so a new process that reuses a dead worker's pid is not
    taken for it; None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22, starttime (after the command name)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (another worker of this server, or this one)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
