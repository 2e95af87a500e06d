"""Changing the chunking of a directory is an explicit act: ``reindex`` splits every stored document again,
records the settings, and embeds only chunk texts it has never seen."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from finderledge import ConfigurationError, FinderLedge

TEXT = "\n\n".join(
    f"Section {i}: the warehouse in zone {i} keeps pallets of item {i * 11} for a week." for i in range(6)
)


def _chunk_counts(fl: FinderLedge) -> dict[str, int]:
    return {d.metadata["source"]: len(fl.get_split_documents(d.id)) for d in fl.list_documents()}


def test_reindex_on_postgres(tmp_path: Path, minilm: Any, pg_url: str) -> None:
    """The same on the PostgreSQL ledger, whose vectors live in the ledger's own table."""
    from pg_server import fresh_schema

    schema = fresh_schema()
    with FinderLedge(
        tmp_path / "a",
        embedding=minilm,
        chunk_size=1000,
        chunk_overlap=0,
        show_progress=False,
        database_url=pg_url,
        database_schema=schema,
    ) as fl:
        fl.add_texts([TEXT], metadatas=[{"source": "long"}])
        fl.reindex(chunk_size=120)
        assert _chunk_counts(fl)["long"] >= 5
        assert fl.search("which zone keeps item 33", k=1, search_mode="vector")[0].content.startswith(
            "Section 3"
        )
    with FinderLedge(
        tmp_path / "b", embedding=minilm, show_progress=False, database_url=pg_url, database_schema=schema
    ) as other:  # another machine: its replica, the recorded settings
        assert other.settings.chunk_size == 120 and _chunk_counts(other)["long"] >= 5
        assert other.search("which zone keeps item 33", k=1, search_mode="keyword")[0].content.startswith(
            "Section 3"
        )


def test_reindex_resplits_every_document_records_the_settings_and_reuses_vectors(
    tmp_path: Path, minilm: Any
) -> None:
    directory = tmp_path / "idx"
    with FinderLedge(
        directory, embedding=minilm, chunk_size=1000, chunk_overlap=0, show_progress=False
    ) as fl:
        fl.add_texts([TEXT, "A short note about tea."], metadatas=[{"source": "long"}, {"source": "short"}])
        assert _chunk_counts(fl) == {"long": 1, "short": 1}
        before = {d.metadata["source"]: d.id for d in fl.list_documents()}
        report = fl.reindex(chunk_size=120)
        assert sorted(report.replaced) == sorted(before.values())
        counts = _chunk_counts(fl)
        assert counts["long"] >= 5 and counts["short"] == 1
        assert (
            report.embeddings_computed == counts["long"] and report.embeddings_cached == 1
        )  # tea: unchanged text
        assert {d.metadata["source"]: d.id for d in fl.list_documents()} == before  # same documents, same ids
        hit = fl.search("which zone keeps item 33", k=1)[0]
        assert hit.content.startswith("Section 3") and len(hit.content) <= 120
        assert (
            fl.vector_store.ids()
            == fl.keyword_store.ids()
            == {c.id for d in fl.list_documents() for c in fl.get_split_documents(d.id)}
        )
        again = fl.reindex(chunk_size=120)  # the same settings: nothing new to embed
        assert again.embeddings_computed == 0
    recorded = json.loads(
        sqlite3.connect(directory / "ledger.sqlite3")
        .execute("SELECT value FROM info WHERE key='settings'")
        .fetchone()[0]
    )
    assert (recorded["chunk_size"], recorded["chunk_overlap"]) == (120, 0)
    with FinderLedge(
        directory, embedding=minilm, show_progress=False
    ) as reopened:  # the directory keeps them
        assert reopened.settings.chunk_size == 120
        reopened.add_texts([TEXT.replace("warehouse", "depot")], metadatas=[{"source": "new"}])
        assert _chunk_counts(reopened)["new"] == _chunk_counts(reopened)["long"]
        assert reopened.add_document(Document(page_content=TEXT, metadata={"source": "long"})) == [
            before["long"]
        ]
        assert reopened.count()["documents"] == 3  # re-adding the original is "unchanged", not a new version


def test_reindex_validates_its_settings(minilm: Any) -> None:
    with FinderLedge(embedding=minilm, show_progress=False) as fl:
        fl.add_texts(["One document."])
        with pytest.raises(ConfigurationError, match="chunk_overlap"):
            fl.reindex(chunk_size=100, chunk_overlap=100)
        with pytest.raises(ConfigurationError, match="chunk_unit"):
            fl.reindex(chunk_unit="words")
        assert fl.settings.chunk_size == 1000 and fl.count()["chunks"] == 1  # nothing changed
