"""Issue 29: the leg calibration is measured lazily — a write marks it due, the writing process measures it once
its writes pause (issue 42: in the background, never in a search) or at close — so a bulk build of many
``add_texts`` calls calibrates once, on the corpus it ends with (it calibrated after every call that moved the
corpus by a quarter: half the build's time)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import finderledge.ranking.calibration as calibration_module
from finderledge import FinderLedge
from finderledge.ranking.calibration import Calibration


def _texts(start: int, n: int) -> list[str]:
    return [
        f"Report {i} describes the orchard near river bend {i}. The keeper counted seven old pear trees there."
        for i in range(start, start + n)
    ]


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = calibration_module.calibrate

    def counting(*args: Any, **kwargs: Any) -> Calibration:
        sizes.append(kwargs["corpus_size"])
        return real(*args, **kwargs)

    monkeypatch.setattr(calibration_module, "calibrate", counting)
    return sizes


def _open(directory: Path, embedding: Any) -> FinderLedge:
    return FinderLedge(
        directory, embedding=embedding, vector_store="faiss", show_progress=False, env_file=None
    )


def test_a_bulk_build_calibrates_once_when_its_writes_pause(
    tmp_path: Path, fake_embeddings: Any, measured: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibration_module, "QUIET_S", 30.0)  # no pause within the build, whatever the load
    with _open(tmp_path / "ix", fake_embeddings) as fl:
        for start in range(0, 1000, 200):  # each call moves the corpus by more than a quarter
            fl.add_texts(_texts(start, 200))
        assert measured == [] and fl.calibration is None
        trace = fl.search("orchard pear trees").trace  # the search does not measure it
        assert measured == [] and trace.calibration_pending
        assert fl.wait_for_calibration(timeout=120)
        trace = fl.search("orchard pear trees").trace
        assert measured == [1000]
        assert "calibrated on 200 pseudo-queries" in trace.weights_reason
        fl.search("river bend")
        fl.add_texts(_texts(1000, 10))  # +1 %: the gates stand, nothing measured
        assert fl.wait_for_calibration(timeout=120)
        fl.search("river bend")
        assert measured == [1000]


def test_the_pause_starts_it_without_a_search_or_a_wait(
    tmp_path: Path, fake_embeddings: Any, measured: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibration_module, "QUIET_S", 0.2)
    with _open(tmp_path / "ix", fake_embeddings) as fl:
        fl.add_texts(_texts(0, 200))
        deadline = time.monotonic() + 60
        while fl.engine.calibrator.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert measured == [200]


def test_a_writer_that_never_searches_calibrates_at_close(
    tmp_path: Path, fake_embeddings: Any, measured: list[int]
) -> None:
    with _open(tmp_path / "ix", fake_embeddings) as fl:
        for start in range(0, 600, 200):
            fl.add_texts(_texts(start, 200))
    assert measured == [600]
    reader = _open(tmp_path / "ix", fake_embeddings)
    try:
        reader.search("orchard")  # another process reads the stored gates; it measures nothing
        assert reader.calibration.corpus_size == 600
    finally:
        reader.close()
    assert measured == [600]
