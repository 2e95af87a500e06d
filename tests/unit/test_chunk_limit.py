"""``ingest(max_chunks=...)`` refuses an input that splits into too many chunks while splitting, before any
chunk is embedded or written (issue 28: memory and time per indexing job bounded; the server's
``--max-chunks``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from finderledge import FinderLedge
from finderledge.errors import TooManyChunksError


class CountingEmbeddings(Embeddings):
    """Wraps the fake model, counting the texts it is asked to embed."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _paragraphs(n: int) -> str:
    return "\n\n".join(f"Paragraph {i} about topic {i % 7}. " + "filler words here " * 40 for i in range(n))


def test_too_many_chunks_stop_before_embedding(tmp_path: Path, fake_embeddings: Any) -> None:
    model = CountingEmbeddings(fake_embeddings)
    fl = FinderLedge(
        tmp_path / "idx", embedding=model, chunk_size=200, chunk_overlap=0, show_progress=False, env_file=None
    )
    big = tmp_path / "big.md"
    big.write_text(_paragraphs(200), encoding="utf-8")
    with pytest.raises(TooManyChunksError, match=r"max_chunks.*limit of 25") as caught:
        fl.ingest(big, document_id="big", on_error="raise", max_chunks=25)
    assert caught.value.limit == 25
    assert model.embedded == 0  # refused while splitting: nothing embedded
    assert fl.list_document_ids() == []  # and nothing written
    small = tmp_path / "small.md"
    small.write_text(_paragraphs(3), encoding="utf-8")
    report = fl.ingest(small, document_id="small", on_error="raise", max_chunks=25)
    assert 0 < report.chunks_written <= 25
    fl.close()


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10"])
def test_a_bad_limit_is_refused(tmp_path: Path, fake_embeddings: Any, bad: Any) -> None:
    fl = FinderLedge(embedding=fake_embeddings, show_progress=False, env_file=None)
    with pytest.raises(ValueError, match="max_chunks"):
        fl.ingest(tmp_path, max_chunks=bad)
    fl.close()


def test_a_streamed_big_file_is_refused_in_its_counting_pass(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long plain text is written window by window; the limit stops it while its chunks are counted, before
    any window is embedded or staged."""
    from finderledge.ingest import write as ingest

    monkeypatch.setattr(ingest, "STREAM_DOCUMENT_CHARS", 5_000)
    monkeypatch.setattr(ingest, "STREAM_WINDOW_CHARS", 3_000)
    model = CountingEmbeddings(fake_embeddings)
    fl = FinderLedge(
        tmp_path / "idx", embedding=model, chunk_size=200, chunk_overlap=0, show_progress=False, env_file=None
    )
    big = tmp_path / "big.txt"
    big.write_text(" ".join(f"plain words number {i} of a long text." for i in range(3000)), encoding="utf-8")
    with pytest.raises(TooManyChunksError, match="limit of 30"):
        fl.ingest(big, document_id="big", on_error="raise", max_chunks=30)
    assert model.embedded == 0
    assert fl.list_document_ids() == []
    fl.close()
