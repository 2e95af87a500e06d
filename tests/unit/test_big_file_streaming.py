"""Issue 27, item 5: one big file is split, embedded and written window by window, and stays all-or-nothing.

The thresholds are lowered so that a small file takes the streaming path: its chunks are staged in several
transactions that nothing reads, and one short commit publishes them.  An exception midway leaves nothing
visible (no chunk, no count, no search hit, no staged row) and a rerun finishes the file; a file that fits
both ways gives the same chunks and the same search results either way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from texts import paragraphs

from finderledge import FinderLedge
from finderledge.ingest import write as ingest
from finderledge.ledgers import SQLiteLedger
from finderledge.replica import catch_up
from finderledge.replica import core as replica


def _text(count: int, seed: int = 7) -> str:
    """A plain text file of ``count`` paragraphs."""
    stream = paragraphs(seed)
    return "\n\n".join(next(stream) for _ in range(count)) + "\n"


@pytest.fixture
def streaming(monkeypatch: pytest.MonkeyPatch) -> None:
    """A document over 5,000 characters is streamed, 3,000 characters at a time."""
    monkeypatch.setattr(ingest, "STREAM_DOCUMENT_CHARS", 5_000)
    monkeypatch.setattr(ingest, "STREAM_WINDOW_CHARS", 3_000)


class FailingEmbedding(DeterministicFakeEmbedding):
    """Fake embeddings that raise on the ``fail_at``-th ``embed_documents`` call (a model failing midway)."""

    fail_at: int = 3
    calls: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("model failed midway")
        return super().embed_documents(texts)


def _rows(index: Path) -> dict[str, int]:
    """What the ledger file holds: document, chunk, change rows and staging marks (read directly)."""
    con = sqlite3.connect(index / "ledger.sqlite3")
    try:
        return {
            "documents": con.execute("SELECT COUNT(*) FROM documents").fetchone()[0],
            "chunks": con.execute("SELECT COUNT(*) FROM chunks").fetchone()[0],
            "changes": con.execute("SELECT COUNT(*) FROM changes").fetchone()[0],
            "staged": con.execute("SELECT COUNT(*) FROM info WHERE key LIKE 'staged:%'").fetchone()[0],
        }
    finally:
        con.close()


def _open(index: Path, embedding: DeterministicFakeEmbedding) -> FinderLedge:
    return FinderLedge(
        index,
        embedding=embedding,
        vector_store="faiss",
        show_progress=False,
        env_file=None,
        embedding_batch_size=8,
    )


def test_an_exception_midway_leaves_nothing_and_a_rerun_finishes(tmp_path: Path, streaming: None) -> None:
    big = tmp_path / "big.txt"
    big.write_text(_text(60), encoding="utf-8")
    assert len(big.read_text(encoding="utf-8")) > 3 * ingest.STREAM_DOCUMENT_CHARS
    index = tmp_path / "index"
    failing = FailingEmbedding(size=16)
    with _open(index, failing) as fl:
        fl.add_texts(["a small note about the warehouse"])  # stored before: must stay, alone
        with pytest.raises(RuntimeError, match="midway"):
            fl.add_document(big)
        assert failing.calls >= failing.fail_at  # it failed after windows were staged
        assert fl.count() == {"documents": 1, "chunks": 1}
        hits = fl.search("warehouse invoice refund", k=10)
        assert {h.document.metadata.get("source") for h in hits} == {None} or all(
            "big.txt" not in str(h.document.metadata.get("source")) for h in hits
        )
    rows = _rows(index)
    assert rows == {"documents": 1, "chunks": 1, "changes": 1, "staged": 0}
    failing.fail_at = -1  # the model works again
    with _open(index, failing) as fl:  # a reopened directory sees the same
        assert fl.count()["documents"] == 1
        report = fl.ingest(big)
        assert report.files_added == 1
        assert report.embeddings_cached > 0  # the windows embedded before the failure are not embedded again
        whole = fl.count()
        assert whole["documents"] == 2 and whole["chunks"] > 10
        assert any("big.txt" in str(h.document.metadata.get("source")) for h in fl.search("warehouse", k=5))
    assert _rows(index)["staged"] == 0


def test_a_failure_while_staging_rows_leaves_nothing(
    tmp_path: Path, streaming: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.txt"
    big.write_text(_text(60), encoding="utf-8")
    index = tmp_path / "index"
    calls = {"n": 0}
    real = SQLiteLedger.stage_chunks

    def failing_stage(self: SQLiteLedger, parent_id: str, chunks: list) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk went away")
        real(self, parent_id, chunks)

    monkeypatch.setattr(SQLiteLedger, "stage_chunks", failing_stage)
    with _open(index, DeterministicFakeEmbedding(size=16)) as fl:
        with pytest.raises(OSError, match="went away"):
            fl.add_document(big)
        assert fl.count() == {"documents": 0, "chunks": 0}
        assert fl.search("warehouse", k=5) == []
    assert _rows(index) == {"documents": 0, "chunks": 0, "changes": 0, "staged": 0}


def test_staged_rows_are_invisible_until_the_commit(tmp_path: Path, streaming: None) -> None:
    """Rows staged by a write that never committed (a crash) are seen by nothing and dropped by gc."""
    index = tmp_path / "index"
    with _open(index, DeterministicFakeEmbedding(size=16)) as fl:
        fl.add_texts(["one stored note"])
    ledger = SQLiteLedger(index / "ledger.sqlite3")
    try:
        from finderledge.ledgers import ChunkRecord

        assert ledger.stage_document("p" * 32)
        ledger.stage_chunks(
            "p" * 32,
            [
                ChunkRecord(f"{'p' * 32}-{i:04d}", "p" * 32, i, f"staged warehouse {i}", {}, None)
                for i in range(3)
            ],
        )
        assert ledger.counts()["chunks"] == 1
        assert (
            ledger.complete_chunk_ids() == {c for c in ledger.complete_chunk_ids()}
            and len(ledger.complete_chunk_ids()) == 1
        )
        assert ledger.get_chunks([f"{'p' * 32}-0000"], visible_at=ledger.last_seq()) == []
        assert ledger.discard_staged(older_than=3600) == 0  # a write still under way is left alone
        assert ledger.discard_staged(older_than=0) == 1  # gc: untouched past the grace period
    finally:
        ledger.close()
    assert _rows(index) == {"documents": 1, "chunks": 1, "changes": 1, "staged": 0}


def test_streamed_and_whole_file_give_the_same_chunks_and_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.txt"
    big.write_text(_text(80, seed=3), encoding="utf-8")
    embedding = DeterministicFakeEmbedding(size=16)

    queries = ("warehouse invoice", "password backup region", "latency of the ledger")

    def results(fl: FinderLedge) -> list[list[tuple[str, str]]]:
        return [[(h.document.page_content, f"{h.score:.6f}") for h in fl.search(q, k=5)] for q in queries]

    def build(name: str) -> tuple[list[tuple[str, str, dict]], list[list[tuple[str, str]]], int]:
        index = tmp_path / name
        with _open(index, embedding) as fl, _open(index, embedding) as reader:
            note = reader.add_texts(["opened before the big write"])
            fl.add_document(big)
            hits = results(fl)
            assert results(reader) == hits  # another instance catches the change up (in batches) the same
            fl.delete(note)
        con = sqlite3.connect(index / "ledger.sqlite3")
        ids = [r[0] for r in con.execute("SELECT id FROM chunks ORDER BY id")]
        staged = con.execute("SELECT COUNT(*) FROM info WHERE key LIKE 'staged:%'").fetchone()[0]
        con.close()
        ledger = SQLiteLedger(index / "ledger.sqlite3")  # read as every reader does: staged rows are stored
        try:  # whole, the others as what differs from their document
            chunks = [(c.id, c.content, c.metadata) for c in ledger.get_chunks(ids)]
        finally:
            ledger.close()
        return chunks, hits, staged

    whole, whole_hits, _ = build("whole")
    monkeypatch.setattr(ingest, "STREAM_DOCUMENT_CHARS", 5_000)
    monkeypatch.setattr(ingest, "STREAM_WINDOW_CHARS", 3_000)
    monkeypatch.setattr(replica, "BIG_CHANGE", 10)  # the catch-up reads and applies 7 rows at a time
    monkeypatch.setattr(catch_up, "CATCH_UP_BATCH", 7)
    monkeypatch.setattr(catch_up, "SPILL_ROWS", 15)  # and the writer writes its indexes every 15 chunks
    windows = []
    real = SQLiteLedger.stage_chunks
    monkeypatch.setattr(
        SQLiteLedger,
        "stage_chunks",
        lambda self, pid, chunks: (windows.append(len(chunks)), real(self, pid, chunks)),
    )
    streamed, streamed_hits, staged = build("streamed")
    assert len(windows) > 3 and sum(windows) == len(whole) - 1  # the streaming path (all but the note)
    assert len(whole) > 20
    assert streamed == whole  # same ids, texts and metadata (split_count included)
    assert streamed_hits == whole_hits
    assert staged == 0
