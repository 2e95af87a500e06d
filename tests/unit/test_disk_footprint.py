"""Bytes on disk per chunk (issue 29: disk <= 2x bm25s + FAISS).  A chunk's ledger row (a 384-d float32
embedding is 1,536 bytes, plus text, metadata, ids) is ~2.2 kB: with SQLite's default 4 kB pages only one
fits a page, so half of every page was empty; a new ledger uses 16 kB pages (7 rows a page)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge

CHUNKS = 600
TEXT = "Glaciers retreat in warm summers and the meltwater feeds the rivers below the valley. " * 4


def test_a_new_ledger_stores_a_chunk_in_about_its_own_size(tmp_path: Path) -> None:
    root = tmp_path / "index"
    texts = [f"Note {i}. {TEXT}" for i in range(CHUNKS)]  # ~350 characters: one chunk each
    with FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=384), show_progress=False, env_file=None
    ) as fl:
        fl.add_texts(texts)
        assert fl.count()["chunks"] == CHUNKS
    con = sqlite3.connect(root / "ledger.sqlite3")
    try:
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
    finally:
        con.close()
    per_chunk = (root / "ledger.sqlite3").stat().st_size / CHUNKS
    assert page_size == 16384
    assert per_chunk < 4000, (
        f"the ledger takes {per_chunk:.0f} bytes per chunk"
    )  # 4 kB pages: 5,086; 16 kB: 3,632


def test_an_existing_ledger_keeps_its_page_size(tmp_path: Path) -> None:
    root = tmp_path / "index"
    root.mkdir()
    con = sqlite3.connect(root / "ledger.sqlite3")
    con.execute("PRAGMA page_size=4096")
    con.execute("CREATE TABLE other_app(x)")  # any existing database: the page size is never rewritten
    con.close()
    con = sqlite3.connect(root / "ledger.sqlite3")
    con.execute("DROP TABLE other_app")
    con.close()
    with FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None
    ) as fl:
        fl.add_texts(["Tides follow the moon."])
    con = sqlite3.connect(root / "ledger.sqlite3")
    try:
        assert con.execute("PRAGMA page_size").fetchone()[0] == 4096
    finally:
        con.close()


def test_a_one_chunk_document_is_stored_once_and_ten_chunk_rows_fit_a_page(tmp_path: Path) -> None:
    """Schema version 5 (issue 29): a one-chunk document's text and metadata are in its document row only,
    and a chunk row (a 384-d vector, 32-character ids, a 16-byte text hash) is small enough that ten fit
    a 16 kB page: 100,000 chunks take 10,000 pages (164 MB), not 11,112 (182 MB) as version 4's did."""
    root = tmp_path / "index"
    texts = [f"{i:032x} {TEXT}" for i in range(CHUNKS)]
    with FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=384), show_progress=False, env_file=None
    ) as fl:
        fl.add_texts(texts)
    con = sqlite3.connect(root / "ledger.sqlite3")
    try:
        stored = con.execute(
            "SELECT DISTINCT typeof(content), length(content), metadata FROM chunks"
        ).fetchall()
        try:
            leaves, cells = con.execute(
                "SELECT COUNT(*), SUM(ncell) FROM dbstat WHERE name='chunks' AND pagetype='leaf'"
            ).fetchone()
        except sqlite3.OperationalError:  # an SQLite built without the dbstat table
            pytest.skip("this SQLite has no dbstat table")
    finally:
        con.close()
    assert stored == [("blob", 0, "")]  # neither the text nor any metadata stored again
    assert cells == CHUNKS and leaves <= CHUNKS // 10 + 1, f"{cells / leaves:.1f} chunk rows a page"
