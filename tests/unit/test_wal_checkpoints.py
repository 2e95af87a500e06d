"""The SQLite ledger's commits leave checkpointing the write-ahead log to a thread (issue 29: the copy and its two
fsyncs were about 0.5 s of a 10 s build of 100,000 chunks, waited for by the committing writer)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from finderledge.ledgers import sqlite as sqlite_ledger
from finderledge.ledgers import wal_checkpoints
from finderledge.ledgers.base import ChunkRecord, DocumentRecord, content_id
from finderledge.ledgers.sqlite import SQLiteLedger


def _docs(start: int, count: int, chars: int = 2000) -> list[tuple[DocumentRecord, list[ChunkRecord]]]:
    rng = np.random.default_rng(start)
    out = []
    for i in range(start, start + count):
        text = f"document {i} " + "x" * chars
        doc_id = content_id(text)
        doc = DocumentRecord(doc_id, None, content_id(doc_id, text), "complete", text, {})
        vec = rng.standard_normal(384).astype(np.float32)
        out.append((doc, [ChunkRecord(f"{doc_id}-0000", doc_id, 0, text, {}, vec)]))
    return out


def _db_bytes(path: Path) -> int:
    return path.stat().st_size


def _checkpointers(path: Path) -> list[threading.Thread]:
    """The checkpoint threads of the ledger at ``path`` (other tests may leave ledgers of their own open)."""
    return [t for t in threading.enumerate() if t.name == f"finderledge-wal-checkpoint {path}"]


def test_a_commit_leaves_the_checkpoint_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "INTERVAL_S", 2.0)
    path = tmp_path / "ledger.sqlite3"
    ledger = SQLiteLedger(path)
    try:
        ledger.commit_write(add=_docs(0, 1))  # starts the thread, which checkpoints at once
        deadline = time.monotonic() + 10
        while _db_bytes(path) < 16384 * 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        before = _db_bytes(path)
        # ~40 MB in one commit: SQLite's own automatic checkpoint (1,000 pages) would copy it in this COMMIT
        ledger.commit_write(add=_docs(1, 10_000))
        wal = path.with_name(path.name + "-wal")
        assert wal.stat().st_size > 30 * 2**20
        assert _db_bytes(path) < before + 2**20, "the committing writer copied the log itself"
        deadline = time.monotonic() + 30
        while _db_bytes(path) < 30 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _db_bytes(path) > 30 * 2**20, "the thread never copied the log into the database"
        assert len(_checkpointers(path)) == 1
    finally:
        ledger.close()
    assert not _checkpointers(path), "close left the thread running"
    assert not path.with_name(path.name + "-wal").exists()
    reopened = SQLiteLedger(path)
    try:
        assert reopened.counts()["documents"] == 10_001
    finally:
        reopened.close()


def test_without_its_thread_the_writer_checkpoints_as_sqlite_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = sqlite_ledger._connect

    def failing(target: str, on_disk: bool) -> sqlite3.Connection:
        if threading.current_thread().name.startswith("finderledge-wal-checkpoint"):
            raise sqlite3.OperationalError("unable to open database file")
        return real(target, on_disk)

    monkeypatch.setattr(sqlite_ledger, "_connect", failing)
    path = tmp_path / "ledger.sqlite3"
    ledger = SQLiteLedger(path)
    try:
        with caplog.at_level(logging.WARNING, logger="finderledge.ledgers.wal_checkpoints"):
            ledger.commit_write(add=_docs(0, 1))
            deadline = time.monotonic() + 10
            while _checkpointers(path) and time.monotonic() < deadline:
                time.sleep(0.02)
        assert "background checkpoints unavailable" in caplog.text
        ledger.commit_write(add=_docs(1, 1))  # gives the writer its automatic checkpoints back
        before = _db_bytes(path)
        ledger.commit_write(add=_docs(2, 10_000))
        assert _db_bytes(path) > before + 30 * 2**20, "nobody copied the log into the database"
    finally:
        ledger.close()


def test_a_ledger_in_memory_has_no_thread() -> None:
    ledger = SQLiteLedger(None)
    try:
        ledger.commit_write(add=_docs(0, 3))
        assert not _checkpointers(Path(":memory:"))
        assert not [t for t in threading.enumerate() if t.name.endswith(":memory:")]
    finally:
        ledger.close()


def test_a_thread_that_cannot_start_never_fails_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name.startswith("finderledge-wal-checkpoint"):
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    path = tmp_path / "ledger.sqlite3"
    ledger = SQLiteLedger(path)
    try:
        with caplog.at_level(logging.WARNING, logger="finderledge.ledgers.wal_checkpoints"):
            ledger.commit_write(add=_docs(0, 1))  # committed, not raised
        assert "background checkpoints unavailable" in caplog.text
        assert ledger.counts()["documents"] == 1
        before = _db_bytes(path)
        ledger.commit_write(add=_docs(1, 10_000))
        assert _db_bytes(path) > before + 30 * 2**20, "nobody copied the log into the database"
    finally:
        ledger.close()


def test_an_idle_thread_ends_and_the_next_commit_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "IDLE_S", 0.2)
    monkeypatch.setattr(wal_checkpoints, "INTERVAL_S", 0.0)
    # threads counted as they start: the first may have ended again before a look at the running ones
    started: list[str] = []
    run = wal_checkpoints.WalCheckpointer._run

    def counted(self: wal_checkpoints.WalCheckpointer) -> None:
        started.append(threading.current_thread().name)
        run(self)

    monkeypatch.setattr(wal_checkpoints.WalCheckpointer, "_run", counted)
    path = tmp_path / "ledger.sqlite3"
    ledger = SQLiteLedger(path)
    try:
        ledger.commit_write(add=_docs(0, 1))
        deadline = time.monotonic() + 10
        while not started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(started) == 1
        deadline = time.monotonic() + 10
        while _checkpointers(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _checkpointers(path), "an idle thread kept running"
        before = _db_bytes(path)
        ledger.commit_write(add=_docs(1, 10_000))  # starts another, which copies this commit
        deadline = time.monotonic() + 30
        while _db_bytes(path) < before + 30 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _db_bytes(path) > before + 30 * 2**20, "no thread copied the log after the first one ended"
        assert len(started) == 2
    finally:
        ledger.close()
    assert not _checkpointers(path)
