"""Issue 26: the ledger records its schema version; no migration exists for the layouts development builds
wrote before the first release, so such a directory (and one a newer release wrote) is refused at open with a
clear :class:`IncompatibleIndexError`, and nothing in it is changed."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge
from finderledge.errors import IncompatibleIndexError
from finderledge.ledgers.sqlite import SQLITE_SCHEMA_VERSION as SCHEMA_VERSION


def _build(directory: Path, embedding: Any) -> None:
    with FinderLedge(directory, embedding=embedding, show_progress=False) as fl:
        fl.add_document(Document(page_content="Refunds take five business days.", metadata={"source": "faq"}))


def _record(directory: Path, version: str) -> str:
    """Record ``version`` in the directory's ledger; returns the ledger's digest afterwards."""
    db = sqlite3.connect(directory / "ledger.sqlite3")
    with db:
        db.execute("UPDATE info SET value=? WHERE key='schema_version'", (version,))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return hashlib.sha256((directory / "ledger.sqlite3").read_bytes()).hexdigest()


def test_a_new_directory_records_the_schema_version(tmp_path: Path, fake_embeddings: Any) -> None:
    _build(tmp_path / "idx", fake_embeddings)
    db = sqlite3.connect(tmp_path / "idx" / "ledger.sqlite3")
    assert db.execute("SELECT value FROM info WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    db.close()
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, show_progress=False) as fl:  # reopens
        assert fl.search("refunds", k=1)[0].content == "Refunds take five business days."


@pytest.mark.parametrize(
    ("recorded", "message"),
    [
        ("2", "development build before the first release"),
        ("3", "development build before the first release"),
        (str(SCHEMA_VERSION + 1), "written by a newer FinderLedge"),
    ],
)
def test_a_directory_of_another_schema_is_refused_unchanged(
    tmp_path: Path, fake_embeddings: Any, recorded: str, message: str
) -> None:
    directory = tmp_path / "idx"
    _build(directory, fake_embeddings)
    digest = _record(directory, recorded)
    with pytest.raises(IncompatibleIndexError, match=message) as caught:
        FinderLedge(directory, embedding=fake_embeddings, show_progress=False)
    assert str(directory / "ledger.sqlite3") in str(caught.value)
    assert hashlib.sha256((directory / "ledger.sqlite3").read_bytes()).hexdigest() == digest
