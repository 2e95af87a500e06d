"""A corpus with no sentence to search for (short records: CSV rows, titles) is not re-read on every write: the
calibrator remembers the size at which it found too few pseudo-queries and draws again only once the corpus has
moved by a quarter (issue 29: at 100k chunks each add or remove then cost 8 s in re-reading every chunk id)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from finderledge import FinderLedge
from finderledge.ledgers.sqlite import SQLiteLedger


def test_an_unmeasurable_corpus_is_not_reread_on_every_write(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = SQLiteLedger.complete_chunk_ids

    def counting(self: SQLiteLedger, *args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SQLiteLedger, "complete_chunk_ids", counting)
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        fl.add_texts([f"item-{i} code-{i * 7}" for i in range(400)])  # records, no sentence of 6+ words
        assert fl.wait_for_calibration(timeout=120)  # the calibration due after the write (in the background)
        first = len(reads)
        assert first >= 1, "the first write draws pseudo-queries once"
        for i in range(5):  # small writes: the corpus moves by far less than a quarter
            fl.add_texts([f"extra-{i} code-{i}"])
            assert fl.wait_for_calibration(timeout=120)
        assert len(reads) == first, "a write that leaves the corpus as unmeasurable re-read every chunk id"
        fl.add_texts([f"more-{i} code-{i}" for i in range(200)])  # +50 %: measured again
        assert fl.wait_for_calibration(timeout=120)
        assert len(reads) > first


def test_calibration_draws_a_sample_not_every_chunk_id(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pseudo-queries come from a sample of the ledger (an index seek per chunk drawn), so calibrating a
    large corpus does not read and sort every chunk id (issue 29: 0.4 s at 100k chunks, 4 s at 1M)."""
    from finderledge.ranking import calibration

    monkeypatch.setattr(calibration, "DRAW_FACTOR", 1)  # 200 drawn: seeks from 800 chunks on, not 6,400
    reads: list[int] = []
    real = SQLiteLedger.complete_chunk_ids

    def counting(self: SQLiteLedger, *args: Any, **kwargs: Any) -> Any:
        if any(frame.filename.endswith("ranking/calibration.py") for frame in inspect.stack()):
            reads.append(1)  # by the calibrator (a new index compares id sets once: not counted)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SQLiteLedger, "complete_chunk_ids", counting)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
    ]
    texts = [
        f"Record {i} talks about {words[i % 12]} and {words[(i * 7) % 12]} in some detail here. "
        f"A second sentence adds {words[(i * 5) % 12]} and {words[(i * 3) % 12]} and more words to the text."
        for i in range(1200)
    ]
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        fl.add_texts(texts)
        assert fl.wait_for_calibration(timeout=120)  # the calibration due after the write (in the background)
        stored = fl.calibration
    assert stored is not None, "the corpus was calibrated"
    assert reads == [], "calibrating read every chunk id"
