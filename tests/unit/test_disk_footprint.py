"""Bytes on disk per chunk (issue 29: disk <= 2x bm25s + FAISS).  A chunk's ledger row (a 384-d float32
embedding is 1,536 bytes, plus text, metadata, ids) is ~2.2 kB: with SQLite's default 4 kB pages only one
fits a page, so half of every page was empty; a new ledger uses 16 kB pages (7 rows a page)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
