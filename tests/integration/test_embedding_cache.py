"""Vectors are stored once: chunks hold theirs, the embedding cache only what no stored chunk holds (a failed
write's, for its retry); its size is in ``stats`` and ``gc`` empties it (SQLite and PostgreSQL ledgers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.cli.commands import main


@pytest.fixture(params=["sqlite", "postgres"])
def fl(request: pytest.FixtureRequest, tmp_path: Path, minilm: Any) -> Iterator[FinderLedge]:
    extra = {}
    if request.param == "postgres":
        extra = {"database_url": request.getfixturevalue("pg_url"), "database_schema": fresh_schema()}
    with FinderLedge(tmp_path / "i", embedding=minilm, show_progress=False, **extra) as ledger:
        yield ledger


def test_each_vector_is_stored_once_and_gc_drops_what_no_chunk_holds(
    fl: FinderLedge, monkeypatch: pytest.MonkeyPatch
) -> None:
    fl.add_texts(["The first note about tea.", "The second note about coffee."], ids=["a", "b"])
    assert fl.stats()["embedding_cache"] == {"entries": 0, "bytes": 0}  # the chunks hold the vectors
    # a write that fails after embedding keeps its vectors in the cache, so the retry embeds nothing again
    monkeypatch.setattr(fl.ledger, "commit_write", _fail)
    with pytest.raises(OSError, match="disk full"):
        fl.add_texts(["A third note about cocoa.", "A fourth note about mate."], ids=["c", "d"])
    monkeypatch.undo()
    assert fl.stats()["embedding_cache"] == {"entries": 2, "bytes": 2 * 384 * 4}
    retry = fl.ingest([Document(page_content="A third note about cocoa.", id="c")])
    assert retry.embeddings_computed == 0 and retry.embeddings_cached == 1
    assert (
        fl.stats()["embedding_cache"]["entries"] == 1
    )  # cocoa's vector moved into its chunk; mate's is left
    fl.ledger.cache_embeddings("some-other-model", [("h", fl.embeddings.embed_query("x"))])
    assert fl.gc() == {"removed": 2, "entries": 0, "bytes": 0}
    assert fl.gc()["removed"] == 0
    # a text a stored chunk holds is never embedded again, cache or no cache (a rewrite keeping a chunk)
    again = fl.ingest([Document(page_content="The first note about tea.", id="e")])
    assert again.embeddings_computed == 0 and again.embeddings_cached == 1
    assert fl.search("cocoa", search_mode="vector", k=1)[0].content == "A third note about cocoa."


def _fail(*args: Any, **kwargs: Any) -> int:
    raise OSError(28, "disk full")


def test_gc_and_stats_from_the_command_line(
    tmp_path: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import finderledge.facade

    real = finderledge.facade.FinderLedge
    monkeypatch.setattr(
        finderledge.facade, "FinderLedge", lambda *a, **kw: real(*a, **{**kw, "embedding": minilm})
    )
    note = tmp_path / "note.txt"
    note.write_text("A note about the office plants.", encoding="utf-8")
    assert main(["add", str(note), "--dir", str(tmp_path / "i")]) == 0
    note.write_text("A note about the office plants and the watering rota.", encoding="utf-8")
    assert main(["add", str(note), "--dir", str(tmp_path / "i")]) == 0
    capsys.readouterr()
    assert main(["stats", "--dir", str(tmp_path / "i")]) == 0
    assert "embedding cache: 0 vectors (0.0 MB; finderledge gc empties it)" in capsys.readouterr().out
    with FinderLedge(tmp_path / "i", embedding=minilm) as fl:  # vectors left by a failed write
        fl.ledger.cache_embeddings(fl.model_id, [("h", fl.embeddings.embed_query("x"))])
    assert main(["gc", "--dir", str(tmp_path / "i")]) == 0
    assert "removed 1 cached vectors; the cache holds 0 (0.0 MB)" in capsys.readouterr().out
