"""Issue 31, item 4: one rule for source paths in add, filter, remove, list and count.

``filter={"source": "../mydocs/x.txt"}`` (the path given to ``add_document``) matched nothing because
sources are stored absolute, while ``remove_document("../mydocs/x.txt")`` resolved it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.sources import resolve_source, resolve_source_filter


@pytest.fixture
def fl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "x.txt").write_text("Refunds are paid within thirty days.", encoding="utf-8")
    (docs / "y.txt").write_text("Passwords are reset by mail.", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path))
    ledger = FinderLedge(embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None)
    ledger.add_document("../mydocs")
    ledger.add_document(Document(page_content="A note from the CRM.", metadata={"source": "crm"}))
    yield ledger
    ledger.close()


@pytest.mark.parametrize("written", ["../mydocs/x.txt", "~/mydocs/x.txt", "./../mydocs/x.txt"])
def test_a_source_filter_takes_the_path_as_add_document_took_it(fl: FinderLedge, written: str) -> None:
    stored = str(Path("../mydocs/x.txt").resolve())
    for flt in ({"source": written}, {"source": {"$in": [written]}}, {"$or": [{"source": {"$eq": written}}]}):
        for mode in ("keyword", "vector", "hybrid"):
            found = fl.search("refunds", k=5, search_mode=mode, filter=flt)
            assert [r.source for r in found] == [stored], (flt, mode)
        assert [d.metadata["source"] for d in fl.list_documents(filter=flt)] == [stored]
        assert fl.count(filter=flt)["documents"] == 1
    assert fl.count(filter={"source": {"$ne": written}})["documents"] == 2
    assert [d.metadata["source"] for d in fl.list_documents(source=written)] == [stored]


def test_sources_that_are_not_paths_are_matched_as_written(fl: FinderLedge) -> None:
    assert fl.count(filter={"source": "crm"})["documents"] == 1
    assert resolve_source("crm") == "crm" and resolve_source("jawiki:東大寺") == "jawiki:東大寺"
    assert resolve_source("/abs/x.txt") == "/abs/x.txt"
    assert resolve_source_filter({"lang": "../x"}) == {"lang": "../x"}  # only the source field


def test_remove_uses_the_same_rule(fl: FinderLedge) -> None:
    assert len(fl.remove_document("~/mydocs/x.txt")) == 1
    assert fl.count(filter={"source": "../mydocs/x.txt"})["documents"] == 0
