"""Issue 31, item 2: a ``document_id`` owns only the parents its call added.

A folder ingest and ``add_document(same file, document_id=...)`` hold the same content twice, each under its
own owner; removing one (by document id or by source path) leaves the other's copy searchable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import DocumentNotFoundError, FinderLedge


def _pdf(path: Path, pages: list[str]) -> Path:
    """A real two-page PDF (reportlab), as a user's handbook would be."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    for text in pages:
        c.drawString(72, 720, text)
        c.showPage()
    c.save()
    return path


@pytest.fixture
def fl(tmp_path: Path, store_kind: str):
    ledger = FinderLedge(
        tmp_path / "index",
        vector_store=store_kind,
        embedding=DeterministicFakeEmbedding(size=16),
        show_progress=False,
        env_file=None,
    )
    yield ledger
    ledger.close()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    pytest.importorskip("reportlab")
    docs = tmp_path / "mydocs"
    docs.mkdir()
    _pdf(docs / "handbook.pdf", ["Refunds are paid within thirty days.", "Support answers every weekday."])
    (docs / "notes.txt").write_text("Unrelated notes about the office plants.", encoding="utf-8")
    return docs


def _texts(fl: FinderLedge, **filt: str) -> list[str]:
    return sorted(d.page_content for d in fl.list_documents(filter=filt or None))


def test_removing_a_document_id_keeps_the_folder_ingests_copy(fl: FinderLedge, folder: Path) -> None:
    """The reported sequence: folder ingest, the same PDF under doc-42, remove doc-42."""
    pdf = folder / "handbook.pdf"
    fl.add_document(folder)
    before = _texts(fl, source=str(pdf))
    assert len(before) == 2
    fl.add_document(pdf, document_id="doc-42")
    assert len(_texts(fl, document_id="doc-42")) == 2
    removed = fl.remove_document("doc-42")
    assert len(removed) == 2
    assert _texts(fl, source=str(pdf)) == before  # the folder's copy is still there
    assert any("Refunds" in r.document.page_content for r in fl.search("refunds thirty days", k=5))
    with pytest.raises(DocumentNotFoundError):
        fl.remove_document("doc-42")


def test_a_folder_ingest_after_a_document_id_leaves_it(fl: FinderLedge, folder: Path) -> None:
    """Reverse order: doc-42 first, then the folder (re-ingested twice: nothing of doc-42 is replaced)."""
    pdf = folder / "handbook.pdf"
    fl.add_document(pdf, document_id="doc-42")
    fl.add_document(folder)
    fl.add_document(folder)
    assert len(_texts(fl, document_id="doc-42")) == 2
    assert len(_texts(fl, source=str(pdf))) == 4  # two owners, two pages each
    fl.remove_document("doc-42")
    assert len(_texts(fl, source=str(pdf))) == 2
    fl.remove_document(str(pdf))
    assert _texts(fl, source=str(pdf)) == []


def test_removing_the_source_keeps_the_document_ids_copy(fl: FinderLedge, folder: Path) -> None:
    """Remove by source path first: the path's own (folder) copy goes, doc-42 keeps its pages."""
    pdf = folder / "handbook.pdf"
    fl.add_document(folder)
    fl.add_document(pdf, document_id="doc-42")
    removed = fl.remove_document(str(pdf))
    assert len(removed) == 2
    assert len(_texts(fl, document_id="doc-42")) == 2
    assert len(_texts(fl, source=str(pdf))) == 2
    # the path now names only doc-42's copy: removing it by path again takes that copy (its last name)
    fl.remove_document(str(pdf))
    assert _texts(fl, source=str(pdf)) == []


def test_two_document_ids_for_the_same_content_each_own_a_copy(fl: FinderLedge, folder: Path) -> None:
    pdf = folder / "handbook.pdf"
    fl.add_document(pdf, document_id="doc-1")
    fl.add_document(pdf, document_id="doc-2")
    fl.add_document(pdf, document_id="doc-2")  # unchanged: nothing replaced
    assert len(_texts(fl, document_id="doc-1")) == 2
    assert len(_texts(fl, document_id="doc-2")) == 2
    fl.remove_document("doc-1")
    assert len(_texts(fl, document_id="doc-2")) == 2
    assert any("Refunds" in r.document.page_content for r in fl.search("refunds", k=5))
    fl.remove_document("doc-2")
    assert fl.count()["documents"] == 0


def test_documents_with_a_document_id_do_not_share_parents_with_plain_ones(fl: FinderLedge) -> None:
    """The same LangChain Document added plainly and under a document id: two owners, two parents."""
    doc = Document(page_content="Shared text about refunds.", metadata={"source": "crm"})
    plain = fl.add_document(doc)
    tagged = fl.add_document(doc, document_id="doc-7")
    assert plain != tagged
    fl.remove_document("doc-7")
    assert [d.page_content for d in fl.list_documents()] == ["Shared text about refunds."]


def test_a_document_id_still_replaces_what_it_no_longer_has(fl: FinderLedge, folder: Path) -> None:
    """Ownership does not change the update rule: the same document id again replaces its own parents."""
    pdf = folder / "handbook.pdf"
    fl.add_document(folder)
    fl.add_document(pdf, document_id="doc-42")
    _pdf(pdf, ["Refunds are paid within ten days."])
    fl.add_document(pdf, document_id="doc-42")
    assert _texts(fl, document_id="doc-42") == ["Refunds are paid within ten days."]
    assert len(_texts(fl, source=str(pdf))) == 3  # the folder's two old pages stay until the folder is added


def test_pruning_a_folder_leaves_a_document_ids_copy_of_a_vanished_file(
    fl: FinderLedge, folder: Path
) -> None:
    """prune=True removes the folder ingest's parents of a deleted file, not the copy doc-42 owns."""
    notes = folder / "notes.txt"
    fl.add_document(folder)
    fl.add_document(notes, document_id="doc-42")
    notes.unlink()
    report = fl.ingest(folder, prune=True)
    assert len(report.pruned) == 1
    assert [d.metadata.get("document_id") for d in fl.list_documents(filter={"source": str(notes)})] == [
        "doc-42"
    ]
