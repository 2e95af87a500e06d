"""A bulk write pauses the cyclic garbage collector (issue 29: its full passes over the in-memory index cost
2.9 s of a 12.5 s build of 100,000 chunks) and always gives it back as the caller had it."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.document_loader import DocumentLoader
from finderledge.ingest import write as ingest
from finderledge.ingest.gc_pause import cyclic_gc_paused


class _Watching(DeterministicFakeEmbedding):
    """Fake embeddings that record whether the collector ran while they were asked for vectors."""

    seen: list[bool] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        type(self).seen.append(gc.isenabled())
        if "boom" in texts:
            raise RuntimeError("the model failed")
        return super().embed_documents(texts)


def test_a_write_runs_with_the_collector_paused_and_gives_it_back(tmp_path: Path) -> None:
    _Watching.seen = []
    assert gc.isenabled()
    with FinderLedge(tmp_path / "idx", embedding=_Watching(size=8), show_progress=False, env_file=None) as fl:
        fl.add_texts([f"text number {i}" for i in range(20)])
        assert gc.isenabled(), "the write left the collector off"
        with pytest.raises(RuntimeError, match="the model failed"):  # a failing write gives it back too
            fl.add_texts(["boom"])
        assert gc.isenabled()
    assert _Watching.seen and not any(_Watching.seen), "embedding ran with the collector on"


def test_files_are_loaded_with_the_collector_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsers build cyclic object graphs (pypdf readers): loading runs unpaused, so each file's are freed as the
    ingest goes, not all at its end; what is done with the loaded documents is paused."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(30):
        (folder / f"f{i}.txt").write_text(f"file number {i} about collectors and cycles", encoding="utf-8")
    loading: list[bool] = []
    real = DocumentLoader.iter_load

    def watched(self: DocumentLoader, *args: Any, **kwargs: Any) -> Any:
        for item in real(self, *args, **kwargs):
            loading.append(gc.isenabled())
            yield item

    monkeypatch.setattr(DocumentLoader, "iter_load", watched)
    monkeypatch.setattr(ingest, "STREAM_GROUPS", 8)  # several write batches between the files
    _Watching.seen = []
    with FinderLedge(tmp_path / "idx", embedding=_Watching(size=8), show_progress=False, env_file=None) as fl:
        assert fl.add_document(folder) and len(loading) == 30
    assert all(loading), "a file was loaded with the collector paused"
    assert len(_Watching.seen) >= 4 and not any(_Watching.seen), "embedding ran with the collector on"


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_end_with_the_last(monkeypatch: Any) -> None:
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with cyclic_gc_paused():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    with cyclic_gc_paused():
        thread.start()
        assert inside.wait(5)
    assert not gc.isenabled(), "the first pause to end turned the collector on under the other"
    leave.set()
    thread.join(5)
    assert gc.isenabled()
