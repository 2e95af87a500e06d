"""Issue 27 (bounded memory for one big file): once a big file's text is committed, this process lets it go.

The text is in the ledger after the commit that publishes it; the indexes then catch up (for a 200 MB file, the
moment memory peaks), and nothing may still hold the whole text meanwhile: not the loader, not the write path's
Documents or records.  A probe wrapped around the catch-up looks through every object the garbage collector
knows for a string holding the file's text.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from texts import paragraphs

from finderledge import FinderLedge
from finderledge.ingest import write as ingest
from finderledge.ledgers import DocumentRecord
from finderledge.replica import core as replica

MARKER = "zqxj-start-of-the-big-file "


def _holders(size: int) -> list[str]:
    """What holds a string of more than ``size`` characters starting with MARKER (a type name each)."""
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, Document):
            values: list[object] = [obj.page_content]
        elif isinstance(obj, DocumentRecord):
            values = [obj.content]
        else:
            values = gc.get_referents(obj)
        if any(isinstance(v, str) and len(v) > size and v.startswith(MARKER) for v in values):
            found.append(type(obj).__name__)
    return found


@pytest.mark.parametrize("how", ["file", "folder"])
def test_the_text_is_released_before_the_indexes_catch_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.setattr(ingest, "STREAM_DOCUMENT_CHARS", 5_000)
    monkeypatch.setattr(ingest, "STREAM_WINDOW_CHARS", 3_000)
    folder = tmp_path / "docs"
    folder.mkdir()
    stream = paragraphs(3)
    (folder / "big.txt").write_text(MARKER + "\n\n".join(next(stream) for _ in range(40)), encoding="utf-8")
    (folder / "small.txt").write_text("a small note about the warehouse", encoding="utf-8")
    seen: list[list[str]] = []
    catch_up = replica.Replica.after_commit

    def probe(self: replica.Replica) -> None:
        gc.collect()
        seen.append(_holders(ingest.STREAM_DOCUMENT_CHARS))
        catch_up(self)

    with FinderLedge(
        tmp_path / "index", embedding=DeterministicFakeEmbedding(size=16), show_progress=False
    ) as fl:
        monkeypatch.setattr(replica.Replica, "after_commit", probe)
        report = fl.ingest(folder / "big.txt" if how == "file" else folder)
        monkeypatch.undo()
        assert fl.count()["chunks"] > 3
        assert fl.search("warehouse", k=3)
        stored = [fl.get_document(pid) for pid in report.added]
    assert seen == [[]]  # one commit; nothing held the text while the indexes caught up
    assert any(d is not None and d.page_content.startswith(MARKER) for d in stored)  # the ledger has it whole
