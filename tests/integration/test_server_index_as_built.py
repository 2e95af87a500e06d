"""The server over an index built by the CLI and the library, as issue 44 found it: documents listed and titled
however they were added, one passage found in two documents (a file the CLI added, then uploaded) shown and
cited once, answer notes in the question's language.

The index is built by ``finderledge add`` (a real process) and by the library; the server is FastAPI's
TestClient over it, with the real default model.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from files import make_pdf

from finderledge.rag.answer import DEFAULT_PROMPTS, EXTRACTIVE_NOTE
from finderledge.server import ServerConfig, create_app

REFUNDS = "# Refunds\n\nRefunds are accepted within 30 days of purchase. Send the order number to support.\n"
SHIPPING = "We ship worldwide; delivery takes five business days.\n"
LEAVE = "Employees receive twenty days of paid vacation per year.\n"
JAPANESE = "返金の申請期限は購入から30日以内です。注文番号を添えてご連絡ください。"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``finderledge add`` of a folder (Markdown, text, a two-page PDF), then the library's ``add_document``
    (with a title) and ``add_texts`` (raw Japanese text, no source), then the server over that directory."""
    root = tmp_path_factory.mktemp("as-built")
    folder = root / "files"
    folder.mkdir()
    (folder / "refunds.md").write_text(REFUNDS, encoding="utf-8")
    (folder / "shipping.txt").write_text(SHIPPING, encoding="utf-8")
    make_pdf(folder / "manual.pdf", ["Page one explains the password reset.", "Page two covers warranty."])
    index = root / "index"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINDERLEDGE_") or k.endswith("CACHE_DIR")}
    done = subprocess.run(
        [sys.executable, "-m", "finderledge", "add", str(folder), "--dir", str(index)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    leave = root / "leave.md"
    leave.write_text(LEAVE, encoding="utf-8")
    app = create_app(ServerConfig(directory=index))
    with TestClient(app) as client:
        fl = app.state.finderledge.ledger
        fl.add_document(leave, {"title": "Leave policy"})
        fl.add_texts([JAPANESE])
        yield {"client": client, "folder": folder}


def _listing(client: TestClient) -> list[dict[str, Any]]:
    body = client.get("/api/v1/documents", params={"per_page": 100}).json()
    assert body["total"] == len(body["items"])
    return list(body["items"])


def test_every_document_is_listed_and_titled_however_it_was_added(built: dict[str, Any]) -> None:
    client = built["client"]
    listed = _listing(client)
    by_title = {d["title"]: d for d in listed}
    assert list(by_title)[-2:] == ["Leave policy", JAPANESE]  # in the order added; the CLI's first
    assert set(by_title) == {"refunds.md", "shipping.txt", "manual.pdf", "Leave policy", JAPANESE}, listed
    assert by_title["manual.pdf"]["parts"] == 2 and by_title["manual.pdf"]["filename"] == "manual.pdf"
    assert by_title["Leave policy"]["filename"] == "leave.md"
    assert by_title[JAPANESE]["filename"] == ""
    assert all(d["status"] == "indexed" and d["chunk_count"] >= 1 for d in listed)
    assert not any(str(built["folder"]) in str(d) for d in listed)  # no server path shown

    # paging counts every document too
    page = client.get("/api/v1/documents", params={"per_page": 2, "page": 3}).json()
    assert page["total"] == 5 and [d["id"] for d in page["items"]] == [by_title[JAPANESE]["id"]]

    # a listed document opens with its chunks (both pages of the PDF)
    manual = client.get(f"/api/v1/documents/{by_title['manual.pdf']['id']}").json()
    assert manual["title"] == "manual.pdf" and [c["page"] for c in manual["chunks"]] == [1, 2]
    assert "password reset" in manual["chunks"][0]["content"]

    # each search hit names a listed document, with a title
    ids = {d["id"] for d in listed}
    hits = client.post("/api/v1/search", json={"query": "paid vacation days", "top_k": 5}).json()["results"]
    assert hits and hits[0]["title"] == "Leave policy" and hits[0]["filename"] == "leave.md"
    assert all(h["document_id"] in ids and h["title"] for h in hits), hits
    japanese = client.post("/api/v1/search", json={"query": "返金の申請期限", "top_k": 1}).json()["results"]
    assert japanese[0]["title"] == JAPANESE and japanese[0]["document_id"] == by_title[JAPANESE]["id"]


def test_a_file_added_then_uploaded_is_one_passage_with_both_documents(built: dict[str, Any]) -> None:
    client = built["client"]
    uploaded = client.post(
        "/api/v1/documents", files={"file": ("refunds.md", REFUNDS.encode(), "text/markdown")}
    )
    assert uploaded.status_code == 201, uploaded.text
    upload_id = uploaded.json()["id"]
    listed = _listing(client)
    assert [d["title"] for d in listed].count("refunds.md") == 2  # both documents are listed
    cli_id = next(d["id"] for d in listed if d["title"] == "refunds.md" and d["id"] != upload_id)

    body = client.post("/api/v1/search", json={"query": "when are refunds accepted", "top_k": 4}).json()
    contents = [h["content"] for h in body["results"]]
    assert len(contents) == len(set(contents)) == 4, contents  # four distinct passages, none twice
    refund = next(h for h in body["results"] if "Refunds are accepted" in h["content"])
    assert {refund["document_id"], *(a["document_id"] for a in refund["also_in"])} == {cli_id, upload_id}
    assert [h["rank"] for h in body["results"]] == [1, 2, 3, 4]
    assert body["context"].count("Refunds are accepted") == 1, body["context"]

    chat = client.post("/api/v1/chat", json={"question": "When are refunds accepted?", "top_k": 4}).json()
    assert chat["extractive"] and chat["answer"].startswith(EXTRACTIVE_NOTE)
    assert chat["answer"].count("Refunds are accepted") == 1, chat["answer"]
    passages = [s["content"] for s in chat["sources"]]
    assert len(passages) == len(set(passages)), passages
    cited = next(s for s in chat["sources"] if "Refunds are accepted" in s["content"])
    assert {cited["document_id"], *(a["document_id"] for a in cited["also_in"])} == {cli_id, upload_id}

    # deleting the CLI's copy leaves the uploaded one, alone
    assert client.delete(f"/api/v1/documents/{cli_id}").status_code == 204
    assert cli_id not in {d["id"] for d in _listing(client)}
    assert client.get(f"/api/v1/documents/{cli_id}").status_code == 404
    again = client.post("/api/v1/search", json={"query": "when are refunds accepted", "top_k": 4}).json()
    refund = next(h for h in again["results"] if "Refunds are accepted" in h["content"])
    assert refund["document_id"] == upload_id and refund["also_in"] == []


def test_the_answer_note_is_in_the_question_language(built: dict[str, Any]) -> None:
    client = built["client"]
    japanese = client.post("/api/v1/chat", json={"question": "返金の申請期限はいつまでですか？"}).json()
    assert japanese["extractive"] and japanese["answer"].startswith(DEFAULT_PROMPTS["ja"].extractive_note)
    assert "30日以内" in japanese["answer"]
    with client.stream("POST", "/api/v1/chat/stream", json={"question": "返金の申請期限は？"}) as response:
        first = next(line for line in response.iter_lines() if line.startswith("data: "))
    assert DEFAULT_PROMPTS["ja"].extractive_note in first
    english = client.post("/api/v1/chat", json={"question": "How long does delivery take?"}).json()
    assert english["answer"].startswith(EXTRACTIVE_NOTE)
    nothing = client.post(
        "/api/v1/chat", json={"question": "火星の天気は？", "score_threshold": 0.99, "search_mode": "keyword"}
    ).json()
    assert nothing["answer"] == DEFAULT_PROMPTS["ja"].no_answer and nothing["sources"] == []
