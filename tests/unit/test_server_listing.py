"""How the server names documents however they were added, collapses identical passages, and tells a browser
from an API client at ``/`` (issue 44): the pure functions behind the Documents panel, search and ``GET /``."""

from __future__ import annotations

from langchain_core.documents import Document

from finderledge.results import SearchResult
from finderledge.server.listing import display_names, document_key, same_passages
from finderledge.server.routes.page import wants_json


def test_a_document_is_titled_from_its_title_else_its_file_else_its_text() -> None:
    assert display_names({"title": "Manual", "filename": "m.pdf"}) == ("m.pdf", "Manual")
    assert display_names({"file_name": "refunds.md", "source": "/srv/files/refunds.md"}) == (
        "refunds.md",
        "refunds.md",
    )
    assert display_names({"source": "/srv/files/notes.txt"}) == ("notes.txt", "notes.txt")
    assert display_names({"source": r"C:\docs\plan.docx"}) == ("plan.docx", "plan.docx")
    assert display_names({"title": "untitled", "file_name": "x.pdf"}) == ("x.pdf", "x.pdf")  # a PDF's default
    assert display_names({}, "\n# Hello there\nmore") == ("", "Hello there")
    long = "word " * 40
    filename, title = display_names({}, long)
    assert filename == "" and title.endswith("…") and len(title) <= 81
    assert display_names({"source": "text:abc"}, "raw") == ("", "raw")


def test_a_document_id_is_the_given_one_else_its_source_hash_else_its_parent() -> None:
    assert document_key({"document_id": "d1", "source": "/a"}, "p1") == "d1"
    by_source = document_key({"source": "/srv/a.md"}, "p1")
    assert by_source == document_key({"source": "/srv/a.md"}, "p2")  # a file's pages are one document
    assert len(by_source) == 32 and by_source != document_key({"source": "/srv/b.md"}, "p1")
    assert document_key({}, "p9") == "p9"


def _result(text: str, chunk: str, rank: int) -> SearchResult:
    return SearchResult(Document(page_content=text, id=chunk, metadata={}), 1.0 / rank, rank)


def test_identical_passages_are_kept_once_with_their_copies() -> None:
    results = [_result("A  b", "c1", 1), _result("other", "c2", 2), _result("A b\n", "c3", 3)]
    kept, copies = same_passages(results)
    assert [r.id for r in kept] == ["c1", "c2"] and [r.id for r in copies["c1"]] == ["c3"]


def test_json_for_an_api_client_the_page_for_a_browser() -> None:
    for accept in ("application/json", "*/*", "", "application/json, */*;q=0.5", "application/*"):
        assert wants_json(accept), accept
    for accept in (
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        "TEXT/HTML",
        "application/xhtml+xml",
    ):
        assert not wants_json(accept), accept
