"""Issue 29: the one-time ONNX export of the default model is never silent (its steps, and a line every few
seconds while one runs), whether or not stderr is a terminal."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from finderledge import progress
from finderledge.embeddings.onnx import OnnxEmbeddings
from finderledge.progress import PROGRESS_LOGGER


@pytest.mark.slow
def test_the_first_use_export_logs_each_step_and_beats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FINDERLEDGE_CACHE_DIR", str(tmp_path / "cache"))  # a machine that never exported
    monkeypatch.setattr(progress, "INTERVAL", 1.0)
    caplog.set_level(logging.INFO, PROGRESS_LOGGER)
    assert len(OnnxEmbeddings().embed_query("hello")) == 384
    lines = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    what = "exporting the default model to ONNX (once per machine)"
    for n in range(1, 6):
        assert any(line.startswith(f"{what}: {n}/5 ") for line in lines), (n, lines)
    assert any(line.startswith(f"{what}: still ") for line in lines)  # the torch trace alone takes seconds
    assert lines[-1].startswith(f"{what}: done in ")
    # one line at WARNING says what the wait is, for a script that shows warnings only (issue 44: the
    # quickstart's basicConfig(level=WARNING) showed nothing for the whole export)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [m for m in said if m.startswith("exporting the default model to ONNX once for this machine")]
