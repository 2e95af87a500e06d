"""A write of several batches splits and embeds the next batch on a worker thread while the one before it commits
(issue 43: the model, or the client's CPU, works while the database writes), and keeps every promise of batches
written one after the other: what failed or was interrupted keeps its vectors for the rerun, an input that
fails to load still leaves the batches before it stored, and no thread outlives the call."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge, LoadError
from finderledge.ingest import write
from finderledge.ledgers.sqlite import SQLiteLedger

TEXTS = [f"passage {i} on refunds and warranty, case {i}" for i in range(12)]
BATCH = 4  # documents per batch here: three batches


class Recording(DeterministicFakeEmbedding):
    """The fake model, noting for each call the thread it ran on and when it ended."""

    calls: list[tuple[str, float, int]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = super().embed_documents(texts)
        self.calls.append((threading.current_thread().name, time.monotonic(), len(texts)))
        return out


@pytest.fixture
def model() -> Recording:
    return Recording(size=16, calls=[])


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write, "STREAM_DOCUMENTS", BATCH)
    monkeypatch.setattr(write, "STREAM_GROUPS", BATCH)


def _commits(
    monkeypatch: pytest.MonkeyPatch, *, ahead: Recording | None = None, fail: BaseException | None = None
) -> list[float]:
    """Wrap the ledger's commit: with ``ahead``, commit *n* first waits (at most 30 s) until that model has
    made *n + 1* calls (up to the call's 3 batches), so the next batch's embedding happens during it however
    the threads are scheduled (without the overlap, the wait runs out and the times show it); the first raises
    ``fail``, if given.  Returns the list of the times the commits ended."""
    real = SQLiteLedger.commit_write
    ended: list[float] = []

    def commit_write(self: SQLiteLedger, *args: Any, **kwargs: Any) -> Any:
        if ahead is not None:
            deadline = time.monotonic() + 30
            while len(ahead.calls) < min(len(ended) + 2, 3) and time.monotonic() < deadline:
                time.sleep(0.002)
        if fail is not None and not ended:
            ended.append(time.monotonic())
            raise fail
        try:
            return real(self, *args, **kwargs)
        finally:
            ended.append(time.monotonic())

    monkeypatch.setattr(SQLiteLedger, "commit_write", commit_write)
    return ended


def _workers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("finderledge-prepare")]


def test_the_next_batch_is_embedded_while_the_one_before_it_commits(
    tmp_path: Path, model: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = _commits(monkeypatch, ahead=model)
    with FinderLedge(tmp_path / "idx", embedding=model, env_file=None, show_progress=False) as fl:
        fl.add_texts(TEXTS)
        assert fl.count()["documents"] == len(TEXTS)
        assert len(ended) == 3  # one transaction per batch, as before
        first, second, third = model.calls  # one model call per batch of 4 chunks
        assert first[0] == threading.current_thread().name  # the first batch: nothing to overlap, no thread
        assert second[0].startswith("finderledge-prepare") and third[0].startswith("finderledge-prepare")
        assert second[1] < ended[0]  # batch 2 was embedded before batch 1's commit ended
        assert third[1] < ended[1]
        assert fl.search("refunds warranty case 7", k=1)[0].document.page_content == TEXTS[7]
    assert _workers() == []  # joined when the call returned


def test_a_call_of_one_batch_uses_no_thread(tmp_path: Path, model: Recording) -> None:
    with FinderLedge(tmp_path / "idx", embedding=model, env_file=None, show_progress=False) as fl:
        fl.add_texts(TEXTS[:BATCH])
    assert [name for name, _, _ in model.calls] == [threading.current_thread().name]


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_commit_stops_the_batch_prepared_ahead_and_keeps_its_vectors(
    tmp_path: Path, model: Recording, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    _commits(monkeypatch, ahead=model, fail=failure)
    with FinderLedge(tmp_path / "idx", embedding=model, env_file=None, show_progress=False) as fl:
        with pytest.raises(type(failure)):
            fl.add_texts(TEXTS)
        assert _workers() == []  # the worker was waited for before the error left the call
        assert fl.count()["documents"] == 0
        # batch 1 (its commit failed) and batch 2 (embedded ahead meanwhile) wait in the cache; batch 3 was never read
        assert fl.stats()["embedding_cache"]["entries"] == 2 * BATCH
        monkeypatch.undo()
        monkeypatch.setattr(write, "STREAM_DOCUMENTS", BATCH)
        report = fl.ingest(
            [Document(page_content=t) for t in TEXTS]
        )  # the rerun embeds only what was never embedded
        assert report.embeddings_cached == 2 * BATCH and report.embeddings_computed == BATCH
        assert fl.count()["documents"] == len(TEXTS)


def test_a_file_that_fails_to_load_leaves_the_batches_before_it_stored(
    tmp_path: Path, model: Recording
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(2 * BATCH):  # two full batches of good files, then a broken one (files load in name order)
        (folder / f"a{i:02d}.txt").write_text(f"note {i} on refunds and warranty\n")
    (folder / "b-broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    with FinderLedge(tmp_path / "idx", embedding=model, env_file=None, show_progress=False) as fl:
        with pytest.raises(LoadError, match="b-broken.pdf"):
            fl.ingest(folder, on_error="raise")
        # batch 2 was prepared, not yet committed, when the broken file was read: it commits as it did before
        assert fl.count()["documents"] == 2 * BATCH
        assert fl.stats()["embedding_cache"]["entries"] == 0
    assert _workers() == []


@pytest.mark.parametrize(
    ("failure", "ending"), [(KeyboardInterrupt(), "interrupted"), (OSError(5, "I/O"), "failed")]
)
def test_a_failed_commit_closes_the_files_progress_line_with_its_reason(
    tmp_path: Path,
    model: Recording,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    failure: BaseException,
    ending: str,
) -> None:
    """The walk over the folder waits at a batch boundary while batches commit: a commit that fails closes it
    then (its last line says why), not when the traceback is let go ("stopped")."""
    from finderledge import progress

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3 * BATCH):
        (folder / f"a{i:02d}.txt").write_text(f"note {i} on refunds and warranty\n")
    _commits(monkeypatch, fail=failure)
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    caplog.set_level(logging.INFO, progress.__name__)
    with FinderLedge(tmp_path / "idx", embedding=model, env_file=None, show_progress=False) as fl:
        with pytest.raises(type(failure)):
            fl.ingest(folder)
        walked = [r.getMessage() for r in caplog.records if r.getMessage().startswith("indexing files")]
        assert walked and walked[-1].endswith(f"({ending})"), walked
