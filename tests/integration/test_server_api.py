"""The HTTP API end to end (FastAPI's TestClient over a real index): documents, search, chat, health, version.

Uploads and deletes run on both vector stores; every response is checked against what the index holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from files import make_pdf

from finderledge import FinderLedge
from finderledge.server import ServerConfig, create_app
from finderledge.server.answers import EXTRACTIVE_NOTE, NO_ANSWER

FAQ = "# Refunds\n\nA refund must be requested within 30 days of purchase. Refunds go to the original card.\n"
JA = "返金の申請期限は購入から30日以内です。返金は元のカードに戻ります。\n"


@pytest.fixture
def api(tmp_path: Path, minilm, store_kind: str) -> Iterator[tuple[TestClient, FinderLedge]]:
    fl = FinderLedge(tmp_path / "index", vector_store=store_kind, embedding=minilm, show_progress=False)
    app = create_app(ServerConfig(directory=tmp_path / "index"), ledger=fl)
    with TestClient(app) as client:
        yield client, fl
    fl.close()


def _upload(client: TestClient, name: str, data: bytes, mime: str = "application/octet-stream", **form: str):
    return client.post("/api/v1/documents", files={"file": (name, data, mime)}, data=form)


def test_upload_list_detail_delete(api, tmp_path: Path) -> None:
    client, fl = api
    pdf = make_pdf(
        tmp_path / "manual.pdf", ["Page one explains the password reset.", "Page two covers refunds."]
    )
    created = _upload(
        client, "manual.pdf", pdf.read_bytes(), "application/pdf", title="Manual", tags="hr, it"
    )
    assert created.status_code == 201, created.text
    doc = created.json()
    assert doc["filename"] == "manual.pdf" and doc["title"] == "Manual" and doc["tags"] == ["hr", "it"]
    assert doc["mime_type"] == "application/pdf" and doc["size"] == pdf.stat().st_size and doc["parts"] == 2
    assert doc["status"] == "indexed" and doc["chunk_count"] >= 2 and doc["created_at"].endswith("Z")
    other = _upload(client, "faq.md", FAQ.encode(), "text/markdown", tags="support").json()

    listing = client.get("/api/v1/documents", params={"per_page": 1}).json()
    assert listing["total"] == 2 and [d["id"] for d in listing["items"]] == [doc["id"]]
    assert (
        client.get("/api/v1/documents", params={"page": 2, "per_page": 1}).json()["items"][0]["id"]
        == other["id"]
    )
    assert [d["id"] for d in client.get("/api/v1/documents", params={"tag": "support"}).json()["items"]] == [
        other["id"]
    ]

    detail = client.get(f"/api/v1/documents/{doc['id']}").json()
    assert [c["page"] for c in detail["chunks"]] == [1, 2]
    assert [c["chunk_index"] for c in detail["chunks"]] == [0, 1]
    assert "password reset" in detail["chunks"][0]["content"]

    assert client.delete(f"/api/v1/documents/{doc['id']}").status_code == 204
    assert client.get(f"/api/v1/documents/{doc['id']}").status_code == 404
    assert client.delete(f"/api/v1/documents/{doc['id']}").status_code == 404
    assert fl.count(filter={"document_id": doc["id"]}) == {"documents": 0, "chunks": 0}
    for mode in ("vector", "keyword"):  # gone from every store
        found = fl.search("password reset", search_mode=mode, k=10)
        assert all(r.document.metadata.get("document_id") != doc["id"] for r in found)
    assert not (fl.persist_directory / "server" / "uploads" / doc["id"]).exists()


def test_search_explains_ranks_and_filters(api) -> None:
    client, _ = api
    en = _upload(client, "faq.md", FAQ.encode(), tags="support").json()
    ja = _upload(client, "返金.txt", JA.encode("utf-8"), "text/plain", tags="ja").json()
    body = client.post("/api/v1/search", json={"query": "返金の申請期限", "top_k": 3}).json()
    top = body["results"][0]
    assert top["document_id"] == ja["id"] and top["filename"] == "返金.txt"
    assert top["keyword_rank"] == 1 and top["keyword_score"] > 0 and 0 < top["score"] <= 1
    assert body["context"].startswith("[1]")
    hits = client.post(
        "/api/v1/search", json={"query": "refund", "tags": ["support"], "search_mode": "vector"}
    ).json()
    assert {h["document_id"] for h in hits["results"]} == {en["id"]}
    assert all(h["vector_rank"] is not None for h in hits["results"])
    only = client.post("/api/v1/search", json={"query": "refund", "document_ids": [ja["id"]]}).json()
    assert {h["document_id"] for h in only["results"]} == {ja["id"]}
    where = client.post(
        "/api/v1/search", json={"query": "refund", "filter": {"filename": {"$ne": "faq.md"}}}
    ).json()
    assert {h["filename"] for h in where["results"]} == {"返金.txt"}
    none = client.post(
        "/api/v1/search", json={"query": "zebra quantum violin nebula", "score_threshold": 0.9}
    ).json()
    assert none["results"] == [] and none["context"] == "[no relevant context found]"


@pytest.mark.parametrize(
    "body, status",
    [
        ({"query": ""}, 422),
        ({"query": "x", "top_k": 0}, 422),
        ({"query": "x", "top_k": 101}, 422),
        ({"query": "x", "score_threshold": 1.5}, 422),
        ({"query": "x", "search_mode": "fuzzy"}, 422),
        ({"query": "x", "filter": {"year": {"$regex": "2"}}}, 422),
        ({"query": "x", "unknown": 1}, 422),
    ],
)
def test_bad_search_requests_are_clear_4xx(api, body, status) -> None:
    client, _ = api
    response = client.post("/api/v1/search", json=body)
    assert response.status_code == status
    assert "detail" in response.json() and "Traceback" not in response.text


def test_chat_extractive_and_streamed(api) -> None:
    client, _ = api
    doc = _upload(client, "faq.md", FAQ.encode()).json()
    answer = client.post("/api/v1/chat", json={"question": "How long do I have to ask for a refund?"}).json()
    assert answer["extractive"] is True and answer["model"] is None
    assert (
        answer["answer"].startswith(EXTRACTIVE_NOTE)
        and "[1]" in answer["answer"]
        and "30 days" in answer["answer"]
    )
    assert answer["sources"][0]["n"] == 1 and answer["sources"][0]["document_id"] == doc["id"]
    with client.stream(
        "POST",
        "/api/v1/chat/stream",
        json={
            "question": "refund deadline",
            "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        },
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1]["done"] is True and events[-1]["sources"][0]["document_id"] == doc["id"]
    assert all(e["done"] is False for e in events[:-1]) and len(events) >= 2
    assert "".join(e["content"] for e in events[:-1]).startswith(EXTRACTIVE_NOTE)
    nothing = client.post("/api/v1/chat", json={"question": "x", "filter": {"filename": "none.md"}}).json()
    assert nothing == {
        "answer": NO_ANSWER,
        "sources": [],
        "question": "x",
        "extractive": True,
        "model": None,
        "strategy": "basic",
    }


def test_health_version_page_and_docs(api) -> None:
    client, _ = api
    health = client.get("/api/v1/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert set(health.json()["components"]) >= {
        "ledger",
        "vector_index",
        "keyword_index",
        "embedding",
        "uploads",
    }
    assert client.get("/api/v1/version").json()["api"] == "v1"
    assert client.get("/", headers={"Accept": "text/html"}).headers["content-type"].startswith("text/html")
    assert client.get("/").json()["docs"] == "/docs"  # an API client (Accept */*): JSON
    schema = client.get("/openapi.json").json()
    assert {"/api/v1/documents", "/api/v1/search", "/api/v1/chat", "/api/v1/chat/stream"} <= set(
        schema["paths"]
    )
    docs = client.get("/docs")
    assert (
        docs.status_code == 200 and "cdn" not in docs.text
    )  # Swagger UI is served locally (no network needed)
    assert client.get("/static-offline-docs/swagger-ui-bundle.js").status_code == 200


def test_health_reports_a_broken_component(api) -> None:
    client, fl = api
    fl.keyword_store  # noqa: B018
    uploads = fl.persist_directory / "server" / "uploads"
    uploads.parent.mkdir(parents=True, exist_ok=True)
    uploads.write_text("not a folder")  # the upload area cannot be written
    health = client.get("/api/v1/health")
    assert health.status_code == 503 and health.json()["components"]["uploads"]["ok"] is False


def test_an_oversized_json_request_is_413(api) -> None:
    client, _ = api
    huge = {"query": "x", "filter": {"n": {"$in": list(range(200_000))}}}
    r = client.post("/api/v1/search", json=huge)
    assert r.status_code == 413 and "limit" in r.json()["detail"]
