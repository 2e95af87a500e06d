"""Issue 42: the leg calibration never blocks a search.  It ran lazily in the first search after a write: 70.9 s
for msmarco-5k with a user's sentence-transformers model.  Now a write starts it on a background thread; a search
meanwhile uses the last calibration (or none) and its trace says one is under way; ``wait_for_calibration``
waits for it; ``close()`` finishes and joins it, the interpreter's exit stops it."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from langchain_core.embeddings import DeterministicFakeEmbedding

import finderledge.ranking.calibration as calibration_module
from finderledge import FinderLedge
from finderledge.ranking.calibration import CALIBRATION_LOCK, INFO_KEY, Calibration


class SlowEmbeddings(DeterministicFakeEmbedding):
    """The fake model, costing ``delay`` seconds a text (set after the write: a costly model at calibration)."""

    delay: float = 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        time.sleep(self.delay * len(texts))
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        time.sleep(self.delay)
        return super().embed_query(text)


def _texts(start: int, n: int) -> list[str]:
    return [
        f"Report {i} describes the orchard near river bend {i}. The keeper counted seven old pear trees there."
        for i in range(start, start + n)
    ]


def _open(directory: Path, embedding: Any) -> FinderLedge:
    return FinderLedge(
        directory, embedding=embedding, vector_store="faiss", show_progress=False, env_file=None
    )


def _calibrators() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("finderledge-calibration")]


@pytest.fixture(autouse=True)
def _no_quiet_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibration_module, "QUIET_S", 0.0)  # start as soon as the write is committed


def test_the_first_search_after_a_write_does_not_wait_for_the_calibration(tmp_path: Path) -> None:
    slow = SlowEmbeddings(size=16)
    with _open(tmp_path / "ix", slow) as fl:
        fl.add_texts(_texts(0, 200))  # 40 pseudo-queries + 40 held-out rests to embed: 80 texts
        slow.delay = 0.05  # 4 s of calibration
        start = time.perf_counter()
        first = fl.search("orchard pear trees")
        assert time.perf_counter() - start < 2.0  # blocked, it would take ~4 s
        assert first.trace.calibration_pending
        assert "not calibrated yet" in first.trace.weights_reason
        assert "running in the background" in first.trace.weights_reason
        assert fl.wait_for_calibration(timeout=120)
        after = fl.search("river bend")
        assert not after.trace.calibration_pending
        assert "calibrated on 40 pseudo-queries" in after.trace.weights_reason
        assert _calibrators() == []  # the thread ended with its work


def test_a_search_meanwhile_uses_the_last_calibration(tmp_path: Path) -> None:
    slow = SlowEmbeddings(size=16)
    with _open(tmp_path / "ix", slow) as fl:
        fl.add_texts(_texts(0, 200))
        assert fl.wait_for_calibration(timeout=120)
        fl.add_texts(_texts(200, 200))  # +100 %: measured again
        slow.delay = 0.05
        start = time.perf_counter()
        trace = fl.search("orchard pear trees").trace
        assert time.perf_counter() - start < 2.0  # blocked, it would take ~4 s
        assert trace.calibration_pending and "calibrated on 40 pseudo-queries" in trace.weights_reason
        assert fl.wait_for_calibration(timeout=120)
        trace = fl.search("orchard pear trees").trace
        assert "calibrated on 80 pseudo-queries" in trace.weights_reason


def test_wait_for_calibration_times_out_and_close_finishes_and_joins(tmp_path: Path) -> None:
    slow = SlowEmbeddings(size=16)
    fl = _open(tmp_path / "ix", slow)
    fl.add_texts(_texts(0, 200))
    slow.delay = 0.05
    assert fl.wait_for_calibration(timeout=0.2) is False  # still measuring
    fl.close()  # the writes of this process are calibrated before close returns, as before
    assert _calibrators() == []
    reader = _open(tmp_path / "ix", SlowEmbeddings(size=16))
    try:
        assert Calibration.from_json(reader.engine.ledger.get_info(INFO_KEY)).corpus_size == 200
        assert reader.wait_for_calibration(timeout=0) is True  # nothing written here: nothing due
    finally:
        reader.close()


def test_stop_leaves_no_thread_and_keeps_the_old_gates(tmp_path: Path) -> None:
    """What the interpreter's exit does (``calibration.stop_all``): the measuring stops between two batches."""
    slow = SlowEmbeddings(size=16)
    with _open(tmp_path / "ix", slow) as fl:
        fl.add_texts(_texts(0, 200))
        slow.delay = 0.25  # 20 s of calibration, 1 s a model call
        time.sleep(0.3)  # it started
        start = time.perf_counter()
        assert fl.engine.calibrator.stop(timeout=30)
        assert time.perf_counter() - start < 8.0  # one model call (PROBE_BATCH texts) at most, not 20 s
        assert _calibrators() == []
        assert fl.engine.ledger.get_info(INFO_KEY) is None  # nothing half-measured was stored
        slow.delay = 0.0
    # close() after a stop measures what is still due
    with _open(tmp_path / "ix", SlowEmbeddings(size=16)) as again:
        assert again.engine.ledger.get_info(INFO_KEY) is not None


def test_the_exit_hook_stops_the_calibration_as_an_owned_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library's one ``atexit`` hook (``progress._at_exit``) sees the calibration's thread in its registry,
    stops it between two batches and joins it; no calibration starts after it, and ``close()`` at exit does not
    wait for one (restored after: this process goes on)."""
    from finderledge import progress

    monkeypatch.setattr(progress, "_exiting", False)
    slow = SlowEmbeddings(size=16)
    fl = _open(tmp_path / "ix", slow)
    try:
        fl.add_texts(_texts(0, 200))
        slow.delay = 0.25  # 20 s of calibration, 1 s a model call
        time.sleep(0.3)  # it started
        running = [t for t in threading.enumerate() if t.name.startswith("finderledge-calibration")]
        assert running and set(running) <= set(progress._owned)
        start = time.perf_counter()
        progress._at_exit()
        assert time.perf_counter() - start < 8.0  # one model call (PROBE_BATCH texts) at most, not 20 s
        assert _calibrators() == []
        fl.add_texts(_texts(200, 10))  # the interpreter is exiting: no calibration starts
        assert _calibrators() == []
        assert fl.engine.ledger.get_info(INFO_KEY) is None  # nothing half-measured was stored
        start = time.perf_counter()
    finally:
        fl.close()
    assert time.perf_counter() - start < 8.0  # close() at exit stops, it does not measure (80 texts: 20 s)


def test_another_process_calibrating_is_waited_for_not_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calibration lock in the directory: one process measures, the others read what it stored."""
    measured: list[int] = []
    real = calibration_module.calibrate

    def counting(*args: Any, **kwargs: Any) -> Calibration:
        measured.append(kwargs["corpus_size"])
        return real(*args, **kwargs)

    monkeypatch.setattr(calibration_module, "calibrate", counting)
    fake = DeterministicFakeEmbedding(size=16)
    directory = tmp_path / "ix"
    with _open(directory, fake) as fl:
        other = FileLock(str(directory / CALIBRATION_LOCK))  # as another process holds it
        other.acquire()
        fl.add_texts(_texts(0, 200))
        assert fl.wait_for_calibration(timeout=0.5) is False  # waiting for the other process
        assert measured == []
        # the other process stores its result and lets go
        stored = real(
            [("orchard", "x")] * 30,
            {"vector": lambda _: ["x"], "keyword": lambda _: ["x"]},
            model_id=fl.engine.model_id,
            corpus_size=200,
        )
        fl.engine.ledger.set_info(INFO_KEY, stored.to_json())
        other.release()
        assert fl.wait_for_calibration(timeout=30)
        assert measured == []  # the one stored by "the other process" is current: nothing measured here
        assert "calibrated on 30 pseudo-queries" in fl.search("orchard").trace.weights_reason


def test_a_long_calibration_logs_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """The command line shows the ``finderledge.progress`` lines (also when stderr is not a terminal)."""
    monkeypatch.setattr("finderledge.progress.INTERVAL", 0.0)
    with (
        caplog.at_level(logging.INFO, logger="finderledge.progress"),
        _open(tmp_path / "ix", DeterministicFakeEmbedding(size=16)) as fl,
    ):
        fl.add_texts(_texts(0, 200))
    lines = [r.getMessage() for r in caplog.records if r.name == "finderledge.progress"]
    assert any(line.startswith("calibrating the search legs: ") for line in lines), lines
    assert any("(done)" in line for line in lines), lines


def test_searches_read_the_stored_calibration_once_per_recheck_and_see_another_processs_within_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search used to read the calibration row from the ledger every time (a round trip in Postgres mode);
    now it reads it at most once per :data:`RECHECK_S`, so a calibration another process stored is used
    within that window, and one this process stores at once."""
    monkeypatch.setattr(calibration_module, "RECHECK_S", 60.0)
    fake = DeterministicFakeEmbedding(size=16)
    directory = tmp_path / "ix"
    with _open(directory, fake) as fl, _open(directory, fake) as other:
        fl.add_texts(_texts(0, 40))  # too few chunks to calibrate: no calibration stored
        assert fl.wait_for_calibration(timeout=30)
        assert "not calibrated" in fl.search("orchard").trace.weights_reason
        reads: list[str] = []
        get_info = type(fl.engine.ledger).get_info

        def counted(ledger: Any, key: str) -> Any:
            reads.append(key)
            return get_info(ledger, key)

        monkeypatch.setattr(type(fl.engine.ledger), "get_info", counted)
        for query in ("orchard", "pear trees", "river bend", "keeper"):
            fl.search(query)
        assert INFO_KEY not in reads, reads  # within the window: no read of the calibration row
        stored = calibration_module.calibrate(
            [("orchard", "x")] * 30,
            {"vector": lambda _: ["x"], "keyword": lambda _: ["x"]},
            model_id=fl.engine.model_id,
            corpus_size=40,
        )
        other.engine.ledger.set_info(INFO_KEY, stored.to_json())  # "another process" stores one
        assert "not calibrated" in fl.search("orchard").trace.weights_reason  # not read again yet
        monkeypatch.setattr(calibration_module, "RECHECK_S", 0.0)  # the window has passed
        assert "calibrated on 30 pseudo-queries" in fl.search("orchard").trace.weights_reason
        assert reads.count(INFO_KEY) == 1, reads
        assert fl.calibration == stored  # the facade's calibration always reads the ledger
