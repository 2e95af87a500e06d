"""The embedding cache: its size is in ``stats``, and ``gc`` drops the vectors no stored chunk uses (SQLite and
PostgreSQL ledgers), without costing a re-embedding of anything still stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.cli import main


@pytest.fixture(params=["sqlite", "postgres"])
def fl(request: pytest.FixtureRequest, tmp_path: Path, minilm: Any) -> Iterator[FinderLedge]:
    extra = {}
    if request.param == "postgres":
        extra = {"database_url": request.getfixturevalue("pg_url"), "database_schema": fresh_schema()}
    with FinderLedge(tmp_path / "i", embedding=minilm, show_progress=False, **extra) as ledger:
        yield ledger


def test_gc_drops_only_vectors_no_chunk_uses(fl: FinderLedge) -> None:
    fl.add_texts(["The first note about tea.", "The second note about coffee."], ids=["a", "b"])
    fl.add_texts(["The first note, rewritten, about green tea."], ids=["a"])  # a's old vector is now unused
    fl.delete(["b"])
    before = fl.stats()["embedding_cache"]
    assert before["entries"] == 3 and before["bytes"] == 3 * 384 * 4
    fl._ledger.cache_embeddings("some-other-model", [("h", fl.embeddings.embed_query("x"))])
    report = fl.gc()
    assert report == {"removed": 3, "entries": 1, "bytes": 384 * 4}
    assert fl.gc()["removed"] == 0
    again = fl.ingest([Document(page_content="The first note, rewritten, about green tea.", id="c")])
    assert again.embeddings_computed == 0 and again.embeddings_cached == 1  # still cached: still stored
    assert fl.search("green tea", search_mode="vector", k=1)[0].content.startswith("The first note, rewritten")


def test_gc_and_stats_from_the_command_line(tmp_path: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    import finderledge.facade

    real = finderledge.facade.FinderLedge
    monkeypatch.setattr(finderledge.facade, "FinderLedge", lambda *a, **kw: real(*a, **{**kw, "embedding": minilm}))
    note = tmp_path / "note.txt"
    note.write_text("A note about the office plants.", encoding="utf-8")
    assert main(["add", str(note), "--dir", str(tmp_path / "i")]) == 0
    note.write_text("A note about the office plants and the watering rota.", encoding="utf-8")
    assert main(["add", str(note), "--dir", str(tmp_path / "i")]) == 0
    capsys.readouterr()
    assert main(["stats", "--dir", str(tmp_path / "i")]) == 0
    assert "embedding_cache: {'entries': 2, 'bytes': 3072}" in capsys.readouterr().out
    assert main(["gc", "--dir", str(tmp_path / "i")]) == 0
    assert "removed 1 cached vectors; the cache holds 1 (0.0 MB)" in capsys.readouterr().out
