"""Issue 39, no native crash at exit: a model's background load is stopped between steps and joined by
``FinderLedge.close()`` (and at exit), and a query the model cannot read starts no load at all.  The
fresh-process exit codes are in tests/integration/test_clean_exit.py."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from finderledge import FinderLedge
from finderledge.embeddings import stop_prefetch
from finderledge.embeddings.loading import BackgroundLoad, LoadStopped


class LoadingModel(Embeddings):
    """A fake model whose background load takes steps until it is stopped (a load that never ends alone)."""

    def __init__(self) -> None:
        self.fake = DeterministicFakeEmbedding(size=16)
        self.prefetched = 0
        self.steps = 0
        self.background = BackgroundLoad(self._load)

    def _load(self) -> None:
        while True:
            self.background.checkpoint()
            self.steps += 1
            time.sleep(0.005)

    def prefetch(self) -> None:
        self.prefetched += 1
        self.background.start()

    def stop_prefetch(self, timeout: float | None = None) -> bool:
        return self.background.stop(timeout)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.fake.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.fake.embed_query(text)


def _load_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "finderledge-model-load"]


def test_a_stopped_load_ends_at_its_next_step_and_is_joined() -> None:
    model = LoadingModel()
    model.prefetch()
    model.prefetch()  # no-op while it runs: one thread
    deadline = time.monotonic() + 10
    while model.steps == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert model.background.running and len(_load_threads()) == 1
    assert stop_prefetch(model, timeout=10)
    assert not model.background.running and _load_threads() == []
    model.background.checkpoint()  # on the caller's own thread a stop never interrupts a load
    model.prefetch()  # a stopped load starts again when asked
    assert model.background.running
    assert model.stop_prefetch(timeout=10)


def test_a_failed_load_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def fail() -> None:
        raise OSError("no model here")

    load = BackgroundLoad(fail)
    with caplog.at_level("DEBUG", logger="finderledge.embeddings.loading"):
        load.start()
        assert load.stop(timeout=10)
    assert "no model here" in caplog.text


def test_stop_without_a_start_and_a_model_without_background_loads() -> None:
    assert BackgroundLoad(lambda: None).stop()
    assert stop_prefetch(DeterministicFakeEmbedding(size=4))  # nothing to stop
    with pytest.raises(LoadStopped):  # the exception a checkpoint raises on the load's thread
        raise LoadStopped


def _open(model: Embeddings, **extra: Any) -> FinderLedge:
    return FinderLedge(embedding=model, vector_store="faiss", env_file=None, show_progress=False, **extra)


def test_close_stops_and_joins_the_models_background_load() -> None:
    model = LoadingModel()
    fl = _open(model)
    fl.add_texts(["Refunds are issued within 30 days of purchase."], ids=["a"])
    assert fl.search("refunds", k=1)[0].id == "a-0000"  # a hybrid search prefetches the model
    assert model.prefetched >= 1 and model.background.running
    fl.close()
    assert not model.background.running and _load_threads() == []


def test_a_query_the_model_cannot_read_starts_no_load() -> None:
    """A Japanese query and an English-only model: BM25 answers alone and no model load is started (nothing is
    left to stop at exit, and the search does not pay for the load)."""
    model = LoadingModel()
    fl = _open(model, vector_scripts="latin")
    try:
        fl.add_texts(
            ["返金は商品到着から30日以内に申請できます。", "Refunds within 30 days."], ids=["ja", "en"]
        )
        assert model.background.running is False
        found = fl.search("返金の申請期限", k=1)
        assert [r.id for r in found] == ["ja-0000"]
        assert model.prefetched == 0 and not model.background.running
        fl.search("refunds", k=1, search_mode="keyword")
        assert model.prefetched == 0
        fl.search("refunds", k=1)
        assert model.prefetched == 1
    finally:
        fl.close()
    assert not model.background.running


def test_the_exit_hook_stops_every_load_and_starts_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the library's one ``atexit`` hook (``progress._at_exit``) runs before the interpreter finalises: a
    load's thread is an owned thread of that registry (restored after: this process goes on)."""
    from finderledge import progress

    monkeypatch.setattr(progress, "_exiting", False)
    first, second = LoadingModel(), LoadingModel()
    first.prefetch()
    second.prefetch()
    assert first.background.running and second.background.running
    assert set(_load_threads()) <= set(progress._owned)  # the registry the exit hook stops sees them
    progress._at_exit()
    assert not first.background.running and not second.background.running and _load_threads() == []
    first.prefetch()  # the interpreter is exiting: no load starts
    assert not first.background.running
