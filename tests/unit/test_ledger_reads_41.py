"""Issue 41: a search's read of its hits from the SQLite ledger, made cheaper without changing what it gives.

A reading connection maps the ledger file (``PRAGMA mmap_size``) and still sees every row a writer adds
after it mapped it; a document's stored metadata is parsed once per process (remembered, bounded), and
every chunk read still gets a dict of its own, equal to the whole stored form, in the same key order.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finderledge.env_names import OTHER_VARIABLES
from finderledge.errors import ConfigurationError, FinderLedgeError
from finderledge.ledgers import SQLiteLedger
from finderledge.ledgers import rows as rows_module
from finderledge.ledgers.base import ChunkRecord, DocumentRecord, content_id
from finderledge.ledgers.rows import RowDamage, decode_chunk_metadata, dumps_metadata
from finderledge.ledgers.sqlite import MMAP_VARIABLE, READER_MMAP_BYTES
from finderledge.metadata import FL_KEY, child_id

DIM = 8


def _doc(doc_id: str, texts: list[str], md: dict[str, Any]) -> tuple[DocumentRecord, list[ChunkRecord]]:
    info = {"doc_type": "text", "id": doc_id, "is_parent": True, "split_count": len(texts)}
    whole = " ".join(texts)
    doc = DocumentRecord(
        doc_id, md.get("source"), content_id(doc_id, whole), "complete", whole, {**md, FL_KEY: info}
    )
    chunks = []
    for i, text in enumerate(texts):
        fl = {
            "doc_type": "text",
            "id": child_id(doc_id, i),
            "is_parent": False,
            "parent_id": doc_id,
            "split_count": len(texts),
            "split_index": i,
        }
        vec = np.full(DIM, i + 1, dtype="float32")
        chunks.append(ChunkRecord(child_id(doc_id, i), doc_id, i, text, {**md, FL_KEY: fl}, vec))
    return doc, chunks


def _expected(chunk: ChunkRecord) -> dict[str, Any]:
    """The metadata as the whole stored JSON gives it (keys sorted, as the ledger stores them)."""
    return json.loads(dumps_metadata(chunk.metadata))  # type: ignore[no-any-return]


def test_a_reading_connection_maps_the_ledger_and_sees_rows_written_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MMAP_VARIABLE, raising=False)
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        ledger.set_info("embedding_dimension", str(DIM))
        first = _doc("first", ["alpha text", "beta text"], {"source": "a.txt"})
        ledger.commit_write(add=[first])
        assert [c.content for c in ledger.get_chunks(["first-0000", "first-0001"])] == [
            "alpha text",
            "beta text",
        ]
        with ledger.dialect.reading() as db:
            mapped = db.execute("PRAGMA mmap_size").fetchone()[0]
        # SQLite's default is 0 (every page copied out with pread); a build may cap it (2 GiB less 64 kB)
        assert 0 < mapped <= READER_MMAP_BYTES
        size = (tmp_path / "ledger.sqlite3").stat().st_size
        # the file grows well past what this reader mapped when it first read: each later read sees all of it
        many = [_doc(f"d{i:03d}", [f"text {i} " + "word " * 400, f"tail {i}"], {"n": i}) for i in range(300)]
        ledger.commit_write(add=many)
        ids = [c.id for _, chunks in many for c in chunks]
        got = ledger.get_chunks(ids, with_embedding=True, visible_at=ledger.last_seq())
        assert [c.content for c in got] == [c.content for _, chunks in many for c in chunks]
        written = [c for _, chunks in many for c in chunks]
        assert all(np.array_equal(g.embedding, w.embedding) for g, w in zip(got, written, strict=True))
        con = sqlite3.connect(tmp_path / "ledger.sqlite3")
        con.execute("PRAGMA wal_checkpoint(PASSIVE)")
        con.close()
        assert (tmp_path / "ledger.sqlite3").stat().st_size > size
        assert len(ledger.get_chunks(ids)) == len(ids)
    finally:
        ledger.close()


@pytest.mark.parametrize("value", ["0", "1048576"])
def test_the_mapped_size_can_be_set_and_zero_reads_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(MMAP_VARIABLE, value)
    assert MMAP_VARIABLE in OTHER_VARIABLES  # a known variable: never warned about as a typo
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        ledger.set_info("embedding_dimension", str(DIM))
        ledger.commit_write(add=[_doc("d", ["some text", "more text"], {})])
        assert [c.content for c in ledger.get_chunks(["d-0000", "d-0001"])] == ["some text", "more text"]
        with ledger.dialect.reading() as db:
            assert db.execute("PRAGMA mmap_size").fetchone()[0] == int(value)
    finally:
        ledger.close()


@pytest.mark.parametrize("value", ["-1", "2GB", "1.5"])
def test_a_wrong_mapped_size_is_refused_at_open_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(MMAP_VARIABLE, value)
    with pytest.raises(ConfigurationError, match=MMAP_VARIABLE) as info:
        SQLiteLedger(tmp_path / "ledger.sqlite3")
    assert repr(value) in str(info.value)
    assert not (tmp_path / "ledger.sqlite3").exists()


LEAVES_ONLY = {"Zeta": 1, "_private": "x", "source": "notes.txt", "flag": True, "none": None, "f": 0.5}


def test_each_chunk_read_of_leaf_metadata_gets_a_dict_of_its_own(tmp_path: Path) -> None:
    """Documents whose values are all immutable leaves: each chunk's dict is one shallow copy, still its own."""
    doc, chunks = _doc("notes", ["one", "two", "three"], LEAVES_ONLY)
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        ledger.commit_write(add=[(doc, chunks)])
        got = ledger.get_chunks([c.id for c in chunks])
        for read, written in zip(got, chunks, strict=True):
            assert read.metadata == _expected(written)
            assert list(read.metadata) == list(_expected(written))
        got[0].metadata["Zeta"] = 2
        got[0].metadata[FL_KEY]["split_count"] = 99
        got[0].metadata["added"] = "x"
        assert [c.metadata for c in ledger.get_chunks([c.id for c in chunks])] == [
            _expected(c) for c in chunks
        ]
        assert got[1].metadata == _expected(chunks[1])
        assert ledger.get_document("notes").metadata == {**LEAVES_ONLY, FL_KEY: doc.metadata[FL_KEY]}
    finally:
        ledger.close()


def test_each_chunk_read_gets_metadata_of_its_own_equal_to_the_whole_form(tmp_path: Path) -> None:
    md = {"Zeta": 1, "_private": "x", "source": "notes.txt", "tags": ["a", "b"], "where": {"shelf": [1, 2]}}
    doc, chunks = _doc("notes", ["one", "two", "three"], md)
    other, other_chunks = _doc("other", ["four", "five"], md)  # another document, the same stored metadata
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    try:
        ledger.set_info("embedding_dimension", str(DIM))
        ledger.commit_write(add=[(doc, chunks), (other, other_chunks)])
        ids = [c.id for c in chunks + other_chunks]
        got = ledger.get_chunks(ids)
        for read, written in zip(got, chunks + other_chunks, strict=True):
            assert read.metadata == _expected(written)
            assert list(read.metadata) == list(_expected(written))  # the same key order
            assert list(read.metadata[FL_KEY]) == sorted(read.metadata[FL_KEY])
        # nothing is shared: changing one chunk's metadata, nested values included, changes no other read
        got[0].metadata["tags"].append("changed")
        got[0].metadata["where"]["shelf"].append(3)
        got[0].metadata[FL_KEY]["split_count"] = 99
        assert got[1].metadata["tags"] == ["a", "b"] and got[3].metadata["where"] == {"shelf": [1, 2]}
        again = ledger.get_chunks(ids)
        assert [c.metadata for c in again] == [_expected(c) for c in chunks + other_chunks]
    finally:
        ledger.close()


def test_the_parse_memo_is_bounded_and_damage_is_never_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rows_module, "_PARSED", {})
    monkeypatch.setattr(rows_module, "_PARSED_MAX", 8)
    for i in range(20):
        stored = '[{"_finderledge": {"doc_type": "text", "split_count": 1}, "n": ' + str(i) + "}]"
        md = decode_chunk_metadata("", stored, "p-0000", "p", 0)
        assert md["n"] == i and md[FL_KEY]["id"] == "p-0000"
        assert len(rows_module._PARSED) <= 8
    long_text = '[{"_finderledge": {"doc_type": "text", "split_count": 1}, "x": "' + "y" * 5000 + '"}]'
    decode_chunk_metadata("", long_text, "p-0000", "p", 0)
    assert long_text not in rows_module._PARSED  # a long text is parsed each time, not held
    broken = '[{"no_fl": 1}]'
    for _ in range(2):  # damaged each time it is read, never remembered as good
        with pytest.raises(RowDamage):
            decode_chunk_metadata("", broken, "p-0000", "p", 0)
    assert broken not in rows_module._PARSED
    assert issubclass(RowDamage, ValueError) and not issubclass(RowDamage, FinderLedgeError)
