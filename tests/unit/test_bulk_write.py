"""Issue 29 (build cost): a bulk write does less work per chunk without giving up a guarantee.

* The committing writer brings its indexes up to date from the rows it has just committed, in memory, instead
  of reading them back from the ledger; the result is the same index a rebuild from the ledger makes.
* Documents given in memory go to the ledger up to ``STREAM_DOCUMENTS`` per transaction (files stay at
  ``STREAM_GROUPS``): each transaction rewrites the ledger's index pages it touches.
* Computed vectors reach the embedding cache once per ``CACHE_SECONDS`` of embedding work, not once per batch:
  a cheap model pays no cache writes, a slow one still loses at most that much work to a crash, and a failed
  write keeps what it computed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

import finderledge.ingest.batches
import finderledge.ingest.write
from finderledge import FinderLedge
from finderledge.ledgers.sqlite import SQLiteLedger


def _texts(n: int, start: int = 0) -> list[str]:
    return [
        f"Note {i}: the ferry to island {i % 13} leaves pier {i % 7} at dawn."
        for i in range(start, start + n)
    ]


def _open(directory: Path, embedding: Any, **kwargs: Any) -> FinderLedge:
    return FinderLedge(
        directory, embedding=embedding, vector_store="faiss", show_progress=False, env_file=None, **kwargs
    )


def _count(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(cls, name)

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counting)
    return calls


def test_the_writer_applies_its_own_commit_from_memory_and_gets_the_ledgers_index(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _texts(300)
    metadatas = [{"pier": i % 7, "tags": ["ferry", f"isle-{i % 13}"], "名前": "港"} for i in range(300)]
    with _open(tmp_path / "a", fake_embeddings) as fl:
        fl.add_texts(["warm-up note about the harbour"])  # the indexes exist and follow the ledger
        reads = _count(monkeypatch, SQLiteLedger, "get_chunks")
        fl.add_texts(texts, metadatas)
        assert reads == []  # nothing read back: the rows came from memory
        monkeypatch.undo()
        from_memory = [
            [(h.id, round(h.score, 6)) for h in fl.search(q, k=5, search_mode=mode, filter={"pier": 3})]
            for q in ("ferry island 4 dawn", "pier 3")
            for mode in ("keyword", "vector", "hybrid")
        ]
        assert fl.count()["chunks"] == 301
    with _open(tmp_path / "a", fake_embeddings) as fl:  # rebuilt from the ledger alone
        fl.replica.rebuild_index("keyword", "test: rebuilt from the ledger")
        fl.replica.rebuild_index("vector", "test: rebuilt from the ledger")
        from_ledger = [
            [(h.id, round(h.score, 6)) for h in fl.search(q, k=5, search_mode=mode, filter={"pier": 3})]
            for q in ("ferry island 4 dawn", "pier 3")
            for mode in ("keyword", "vector", "hybrid")
        ]
    assert from_memory == from_ledger and all(from_memory)


def test_documents_in_memory_are_written_in_fewer_larger_transactions(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(finderledge.ingest.write, "STREAM_DOCUMENTS", 400)
    commits = _count(monkeypatch, SQLiteLedger, "commit_write")
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, text in enumerate(_texts(300)):
        (folder / f"n{i:03d}.txt").write_text(text, encoding="utf-8")
    with _open(tmp_path / "ix", fake_embeddings) as fl:
        fl.add_texts(_texts(1000, start=1000))
        assert len(commits) == 3  # 400 + 400 + 200 Documents, where a file-sized batch made 4 of 256
        fl.add_document(folder)
        assert len(commits) == 3 + 2  # files: 256 a transaction, as before
        assert fl.count() == {"documents": 1300, "chunks": 1300}


class _Clock:
    """``time`` for a module under test, whose ``perf_counter`` moves only when a fake model says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _Slow(DeterministicFakeEmbedding):
    """A fake model that takes ``pause`` seconds a batch (on ``clock`` instead, if given) and fails on batch
    ``fail_at`` (1-based; 0: never)."""

    pause: float = 0.0
    fail_at: int = 0
    calls: int = 0
    clock: Any = None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the model failed midway")
        if self.clock is not None:
            self.clock.now += self.pause
        else:
            time.sleep(self.pause)
        return super().embed_documents(texts)


def test_the_cache_is_written_per_second_of_embedding_work_and_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caches = _count(monkeypatch, SQLiteLedger, "cache_embeddings")
    # the embedding loop's clock moves by the model's pauses only, so a loaded machine does not add writes
    clock = _Clock()
    monkeypatch.setattr(finderledge.ingest.batches, "time", clock)
    cheap = _Slow(size=16, clock=clock)
    with _open(tmp_path / "cheap", cheap, embedding_batch_size=10) as fl:
        fl.add_texts(_texts(200))
        assert cheap.calls == 20 and caches == []  # milliseconds of work: no cache writes at all

    monkeypatch.setattr(finderledge.ingest.batches, "CACHE_SECONDS", 0.25)
    slow = _Slow(size=16, pause=0.1, fail_at=9, clock=clock)  # 8 batches of 0.1 s, then a failure
    with _open(tmp_path / "slow", slow, embedding_batch_size=10) as fl:
        with pytest.raises(RuntimeError, match="midway"):
            fl.add_texts(_texts(100))
        assert len(caches) == 3  # after batches 3 and 6 (0.3 s each time), then the rest at the failure
        assert fl.stats()["embedding_cache"]["entries"] == 80  # nothing computed is lost
        slow.fail_at = 0
        report = fl.ingest([Document(page_content=t) for t in _texts(100)])
        assert (report.embeddings_cached, report.embeddings_computed) == (80, 20)
        assert fl.stats()["embedding_cache"]["entries"] == 0  # the chunks hold them now


def test_a_failed_commit_keeps_the_vectors_it_computed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _Slow(size=16)
    with _open(tmp_path / "ix", model, embedding_batch_size=10) as fl:

        def full(*args: Any, **kwargs: Any) -> int:
            raise OSError(28, "disk full")

        monkeypatch.setattr(fl.ledger, "commit_write", full)
        with pytest.raises(OSError, match="disk full"):
            fl.add_texts(_texts(50))
        monkeypatch.undo()
        assert fl.stats()["embedding_cache"]["entries"] == 50
        report = fl.ingest([Document(page_content=t) for t in _texts(50)])
        assert (report.embeddings_cached, report.embeddings_computed) == (50, 0)
