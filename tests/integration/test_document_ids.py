"""Application document ids and document listings: what an upload service needs from the library.

One uploaded file becomes several parents (PDF pages, CSV rows); ``document_id=`` groups them so they are
filtered (in every leg of every backend), listed, counted, replaced and removed together.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import ConfigurationError, DocumentNotFoundError, FinderLedge


def _csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["name", "text"])
        writer.writerows(rows)
    return path


@pytest.fixture
def fl(tmp_path: Path, minilm, store_kind: str):
    ledger = FinderLedge(tmp_path / "index", vector_store=store_kind, embedding=minilm, show_progress=False)
    yield ledger
    ledger.close()


def test_a_document_id_groups_a_files_rows_in_every_leg(fl: FinderLedge, tmp_path: Path) -> None:
    rows = _csv(
        tmp_path / "plans.csv",
        [
            ("basic", "The basic plan costs ten euros."),
            ("pro", "The pro plan adds priority support."),
            ("team", "The team plan shares one invoice."),
        ],
    )
    other = _csv(tmp_path / "other.csv", [("x", "The pro plan is also described in the brochure.")])
    ids = fl.add_document(rows, {"tags": ["pricing"]}, document_id="doc-plans")
    fl.add_document(other, document_id="doc-other")
    assert len(ids) == 3
    assert {d.metadata["document_id"] for d in fl.list_documents(filter={"document_id": "doc-plans"})} == {
        "doc-plans"
    }
    for mode in ("hybrid", "vector", "keyword"):
        found = fl.search("pro plan", k=10, search_mode=mode, filter={"document_id": "doc-plans"})
        assert found and {r.document.metadata["document_id"] for r in found} == {"doc-plans"}, mode
        assert {r.parent_id for r in found} <= set(ids)
    assert fl.count(filter={"document_id": "doc-plans"}) == {"documents": 3, "chunks": 3}
    assert fl.list_document_ids() == ["doc-plans", "doc-other"]
    assert fl.list_document_ids(filter={"tags": {"$contains": "pricing"}}) == ["doc-plans"]


def test_adding_under_the_same_document_id_replaces_what_it_no_longer_has(
    fl: FinderLedge, tmp_path: Path
) -> None:
    v1 = _csv(tmp_path / "v1.csv", [("a", "Alpha row about refunds."), ("b", "Beta row about invoices.")])
    v2 = _csv(tmp_path / "v2.csv", [("c", "Gamma row about passwords.")])
    fl.add_document(v1, document_id="manual")
    report = fl.ingest(v2, document_id="manual")
    assert len(report.replaced) == 2 and len(report.added) == 1
    assert [d.page_content for d in fl.list_documents(filter={"document_id": "manual"})] == [
        "name: c\ntext: Gamma row about passwords."
    ]
    assert list(fl.search("refunds", search_mode="keyword", filter={"document_id": "manual"}, k=5)) == []
    assert all(
        "Gamma" in r.document.page_content for r in fl.search("refunds", filter={"document_id": "manual"})
    )
    assert fl.count() == {"documents": 1, "chunks": 1}


def test_remove_document_takes_a_document_id(fl: FinderLedge, tmp_path: Path) -> None:
    fl.add_document(_csv(tmp_path / "r.csv", [("a", "one"), ("b", "two")]), document_id="grouped")
    fl.add_texts(["kept text"])
    assert len(fl.remove_document("grouped")) == 2
    assert fl.count()["documents"] == 1
    assert list(fl.search("one two", search_mode="keyword", filter={"document_id": "grouped"})) == []
    with pytest.raises(DocumentNotFoundError):
        fl.remove_document("grouped")


def test_list_documents_pages_and_filters(fl: FinderLedge) -> None:
    ids = fl.add_texts(
        [f"text number {i}" for i in range(7)],
        metadatas=[{"n": i, "tags": ["even" if i % 2 == 0 else "odd"]} for i in range(7)],
    )
    assert [d.id for d in fl.list_documents()] == ids
    assert [d.id for d in fl.list_documents(offset=2, limit=3)] == ids[2:5]
    assert [d.id for d in fl.list_documents(offset=6, limit=3)] == ids[6:]
    assert [d.metadata["n"] for d in fl.list_documents(filter={"tags": {"$contains": "even"}}, offset=1)] == [
        2,
        4,
        6,
    ]
    assert fl.count(filter={"n": {"$gte": 5}}) == {"documents": 2, "chunks": 2}
    for bad in ({"offset": -1}, {"limit": -2}, {"offset": 1.5}, {"filter": {"n": {"$bad": 1}}}):
        with pytest.raises(ConfigurationError):
            fl.list_documents(**bad)


def test_document_id_conflicts_are_refused(fl: FinderLedge) -> None:
    with pytest.raises(ConfigurationError, match="document_id"):
        fl.add_document(Document(page_content="x", metadata={"document_id": "a"}), document_id="b")
    with pytest.raises(ConfigurationError, match="document_id"):
        fl.add_document(Document(page_content="x"), {"document_id": "a"}, document_id="b")
    for bad in ("", "a\x00b", 7):
        with pytest.raises(ConfigurationError, match="document_id"):
            fl.add_document(Document(page_content="x"), document_id=bad)  # type: ignore[arg-type]
    assert fl.count()["documents"] == 0


def test_re_adding_a_file_with_other_metadata_updates_it(fl: FinderLedge, tmp_path: Path) -> None:
    """Metadata given again is never silently dropped: the file's parents are replaced."""
    path = tmp_path / "note.md"
    path.write_text("# Note\n\nThe refund window is 30 days.", encoding="utf-8")
    fl.add_document(path, {"tags": ["old"]})
    report = fl.ingest(path, {"tags": ["new"]})
    assert report.files_replaced == 1 and report.replaced
    assert fl.list_documents()[0].metadata["tags"] == ["new"]
    hits = fl.search("refund window", k=3, filter={"tags": {"$contains": "new"}})
    assert hits and all(r.document.metadata["tags"] == ["new"] for r in hits)
    assert list(fl.search("refund window", k=3, filter={"tags": {"$contains": "old"}})) == []
    assert fl.ingest(path, {"tags": ["new"]}).files_unchanged == 1


def test_cli_list_pages_and_filters(tmp_path: Path, minilm, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from finderledge.cli.commands import main

    with FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False) as fl:
        ids = fl.add_texts([f"note {i}" for i in range(4)], metadatas=[{"n": i} for i in range(4)])
    assert (
        main(
            [
                "list",
                "--dir",
                str(tmp_path / "idx"),
                "--filter",
                '{"n": {"$gte": 1}}',
                "--offset",
                "1",
                "--limit",
                "2",
                "--json",
            ]
        )
        == 0
    )
    assert [d["id"] for d in json.loads(capsys.readouterr().out)] == ids[2:4]
    assert main(["list", "--dir", str(tmp_path / "idx"), "--offset", "-1"]) == 2
