"""``chroma_collection`` names the collection of a local Chroma directory too (it used to be honoured for a
Chroma server only: on disk the collection was always ``finderledge``), and an index built before that keeps
working (its vectors are rebuilt from the ledger into the named collection)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from finderledge import FinderLedge

chromadb = pytest.importorskip("chromadb")  # issue 29 makes Chroma an extra `finderledge[chroma]`


def _collections(directory: Path) -> dict[str, int]:
    client = chromadb.PersistentClient(path=str(directory / "chroma"))
    try:
        return {c.name: c.count() for c in client.list_collections()}
    finally:
        client.clear_system_cache()


def test_local_chroma_uses_the_named_collection(tmp_path: Path, fake_embeddings) -> None:
    with FinderLedge(
        tmp_path / "idx", vector_store="chroma", chroma_collection="team-docs", embedding=fake_embeddings
    ) as fl:
        fl.add_texts(["FinderLedge keeps one ledger of chunk ids."], metadatas=[{"source": "a.txt"}])
        fl.add_texts(["Chroma keeps the vectors of this index."], metadatas=[{"source": "b.txt"}])
        assert [
            r.metadata["source"]
            for r in fl.search("FinderLedge keeps one ledger of chunk ids.", search_mode="vector", k=1)
        ] == ["a.txt"]
    assert _collections(tmp_path / "idx") == {"team-docs": 2}
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings) as again:  # the recorded collection
        assert [
            r.metadata["source"]
            for r in again.search("Chroma keeps the vectors of this index.", k=1, search_mode="vector")
        ] == ["b.txt"]
    assert _collections(tmp_path / "idx") == {"team-docs": 2}


def test_default_collection_is_unchanged(tmp_path: Path, fake_embeddings) -> None:
    with FinderLedge(tmp_path / "idx", vector_store="chroma", embedding=fake_embeddings) as fl:
        fl.add_texts(["one chunk"], metadatas=[{"source": "a.txt"}])
    assert _collections(tmp_path / "idx") == {"finderledge": 1}


def test_an_index_built_before_the_fix_is_rebuilt_into_the_named_collection(
    tmp_path: Path, fake_embeddings
) -> None:
    """Built with the default collection on disk while ``chroma_collection="old-name"`` was recorded (what the
    bug produced): reopening fills ``old-name`` from the ledger and search still finds every chunk."""
    with FinderLedge(tmp_path / "idx", vector_store="chroma", embedding=fake_embeddings) as fl:
        fl.add_texts(["a chunk about ledgers"], metadatas=[{"source": "a.txt"}])
        fl.add_texts(["a chunk about vectors"], metadatas=[{"source": "b.txt"}])
    db = sqlite3.connect(tmp_path / "idx" / "ledger.sqlite3")
    with db:
        (raw,) = db.execute("SELECT value FROM info WHERE key = 'settings'").fetchone()
        db.execute(
            "UPDATE info SET value = ? WHERE key = 'settings'",
            (json.dumps({**json.loads(raw), "chroma_collection": "old-name"}),),
        )
    db.close()
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings) as fl:
        assert {r.metadata["source"] for r in fl.search("chunk", k=5, search_mode="vector")} == {
            "a.txt",
            "b.txt",
        }
    assert _collections(tmp_path / "idx")["old-name"] == 2
