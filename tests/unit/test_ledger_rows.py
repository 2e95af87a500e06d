"""One ledger row that cannot be decoded is quarantined, never a failure of every search.

A chunk whose embedding is 3 bytes long, whose metadata is JSON nested 200,000 deep, or whose
``parent_id`` does not match its id: its document is left out (with a warning naming it) and every
other document is still found, in every search mode, with the indexes as they are or rebuilt.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge

TOPICS = ["glaciers", "passwords", "tides", "volcanoes", "orchards", "lighthouses"]


def _open(root: Path, **kwargs: object) -> FinderLedge:
    return FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None, **kwargs
    )  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("rows") / "index"
    with _open(root, vector_store="faiss") as fl:
        ids = fl.add_texts([f"A note about {t}: {t} are worth a visit." for t in TOPICS])
    return root, dict(zip(TOPICS, ids))


def _damage(db: Path, chunk_of: str, how: str, other: str) -> None:
    con = sqlite3.connect(db)
    chunk = con.execute("SELECT id FROM chunks WHERE parent_id=?", (chunk_of,)).fetchone()[0]
    if how == "3-byte embedding":
        con.execute("UPDATE chunks SET embedding=? WHERE id=?", (b"\x01\x02\x03", chunk))
    elif how == "deep metadata":
        con.execute("UPDATE chunks SET metadata=? WHERE id=?", ("[" * 200_000 + "]" * 200_000, chunk))
    elif how == "deep document metadata":
        con.execute("UPDATE documents SET metadata=? WHERE id=?", ("[" * 200_000 + "]" * 200_000, chunk_of))
    elif how == "wrong parent_id":
        con.execute("UPDATE chunks SET parent_id=? WHERE id=?", (other, chunk))
    con.commit()
    con.close()


@pytest.mark.parametrize("rebuilt", [False, True], ids=["indexes kept", "indexes rebuilt"])
@pytest.mark.parametrize(
    "how", ["3-byte embedding", "deep metadata", "deep document metadata", "wrong parent_id"]
)
def test_an_undecodable_row_is_quarantined_and_everything_else_is_found(
    template: tuple[Path, dict[str, str]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    how: str,
    rebuilt: bool,
) -> None:
    source, ids = template
    root = tmp_path / "index"
    shutil.copytree(source, root)
    _damage(root / "ledger.sqlite3", ids["glaciers"], how, ids["tides"])
    if rebuilt:
        shutil.rmtree(root / "faiss")
        shutil.rmtree(root / "bm25")
    caplog.set_level(logging.WARNING)
    with _open(root) as fl:
        listed = [d.id for d in fl.list_documents()]  # reads every document row
        for _ in range(2):  # again after the warning
            for mode in ("keyword", "vector", "hybrid"):
                for topic in TOPICS:
                    hits = fl.search(f"{topic} worth a visit", search_mode=mode, k=10)
                    found = any(ids["glaciers"] in str(h.id) for h in hits)
                    assert not (found), (mode, topic)
                    if mode == "keyword" and topic != "glaciers":
                        assert any(ids[topic] in str(h.id) for h in hits), (mode, topic)
        listed = [d.id for d in fl.list_documents()]
        assert ids["glaciers"] not in listed and ids["volcanoes"] in listed
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(ids["glaciers"] in w and "quarantined" in w for w in warnings), warnings


def test_a_quarantined_documents_chunks_kept_by_the_record_cache_are_left_out_too(tmp_path: Path) -> None:
    """A document is quarantined when a search first reads its damaged chunk; its sibling chunks that earlier
    searches of the same ledger change kept in the record cache are left out from then on too (they were
    served from the cache until the next commit)."""
    root = tmp_path / "index"
    glaciers = "Glaciers carve valleys over centuries of slow motion. " * 3
    tides = "Tides follow the moon and rise twice a day on most coasts. " * 3
    with _open(root, vector_store="faiss", chunk_size=200, chunk_overlap=0) as fl:
        [doc] = fl.add_texts([glaciers + "\n\n" + tides])
        con = sqlite3.connect(root / "ledger.sqlite3")
        query = "SELECT id FROM chunks WHERE parent_id=? ORDER BY split_index"
        chunk_ids = [r[0] for r in con.execute(query, (doc,)).fetchall()]
        assert len(chunk_ids) == 2
        first = fl.search("glaciers carve valleys", search_mode="keyword", k=1)
        assert [h.id for h in first] == [chunk_ids[0]]  # decoded, and kept in the record cache
        # the tides chunk damaged on disk while the index is open (no ledger change: the same seq)
        con.execute("UPDATE chunks SET metadata=? WHERE id=?", ("[" * 200_000 + "]" * 200_000, chunk_ids[1]))
        con.commit()
        con.close()
        # reading the damaged chunk quarantines the document
        assert fl.search("tides follow the moon", search_mode="keyword", k=1) == []
        again = fl.search("glaciers carve valleys", search_mode="keyword", k=1)
        assert [h.id for h in again] == [], "a quarantined document's chunk was served from the record cache"
