"""The document-search design (seed 002) run unchanged against FinderLedge: the design's start command
(``uvicorn app.main:app`` in ``examples/doc_search_api``, settings by the design's variable names), then every
request of its section 4 as the design writes it — paths, fields, status codes — with nothing FinderLedge-specific
in the requests, and the example's client (``client.py``) on the same server."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from files import make_pdf
from paths import ROOT
from server_process import free_port

pytest.importorskip("qdrant_client")  # the design's vector database (local mode here)

EXAMPLE = ROOT / "examples" / "doc_search_api"
API = "/api/v1"
LEAVE = (
    "Employees request paid leave through the HR portal at least five business days in advance. "
    "Your manager approves or declines the leave request within two days."
)


def _handbook() -> str:
    """About 9,000 characters: more than five chunks of 1,000 characters (the design's chunk size)."""
    topics = ["expenses", "travel", "security", "equipment", "training", "remote work", "benefits", "ethics"]
    return "\n\n".join(
        f"Chapter {n}: {topic}. "
        + " ".join(f"Rule {n}.{i} about {topic} applies to every office." for i in range(18))
        for n, topic in enumerate(topics, start=1)
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``uvicorn app.main:app --host 127.0.0.1 --port N`` in the example's folder (the design's command)."""
    index = tmp_path_factory.mktemp("doc-search") / "index"
    log = index.parent / "server.log"
    port = free_port()
    env = {
        **os.environ,
        "INDEX_DIR": str(index),
        "LOG_LEVEL": "INFO",  # the design's variables, by their names
        "QDRANT_COLLECTION": "documents",
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
    }
    for name in ("DATABASE_URL", "QDRANT_URL", "OPENAI_API_KEY"):
        env.pop(name, None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port)],
            cwd=EXAMPLE,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=30).status_code == 200:
                        break
                assert time.monotonic() < deadline, "the server did not answer /health within 180 s"
                time.sleep(0.5)
            yield url, index
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="module")
def client(server: tuple[str, Path]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server[0], timeout=120) as http:
        yield http


@pytest.fixture(scope="module")
def uploaded(client: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The design's upload request (4.1) for a PDF and a text file."""
    folder = tmp_path_factory.mktemp("files")
    pdf = make_pdf(folder / "sample.pdf", ["Welcome to the company.", LEAVE])
    handbook = folder / "handbook.txt"
    handbook.write_text(_handbook(), encoding="utf-8")
    out = {}
    for path, title, tags, mime in (
        (pdf, "サンプル文書", ["sample", "test"], "application/pdf"),
        (handbook, "Handbook", ["handbook"], "text/plain"),
    ):
        with path.open("rb") as handle:
            response = client.post(
                f"{API}/documents/upload",
                files={"file": (path.name, handle, mime)},
                data={"title": title, "tags": tags},
            )
        assert response.status_code == 201, response.text
        out[path.name] = {**response.json(), "_bytes": path.stat().st_size}
    return out


def test_root_and_health_as_designed(client: httpx.Client) -> None:
    root = client.get("/", headers={"Accept": "application/json"})
    assert root.status_code == 200 and set(root.json()) == {"message", "version", "docs"}
    assert root.json()["docs"] == "/docs"
    page = client.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})  # a browser
    assert page.headers["content-type"].startswith("text/html")
    health = client.get("/health")
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "healthy"
    assert body["components"]["database"] == "ok" and body["components"]["qdrant"] == "ok"
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert client.get(path).status_code == 200, path


def test_upload_response_fields(uploaded: dict[str, dict], server: tuple[str, Path]) -> None:
    doc = uploaded["sample.pdf"]
    assert doc["filename"] == "sample.pdf" and doc["title"] == "サンプル文書"
    assert doc["file_size"] == doc["_bytes"] and doc["mime_type"] == "application/pdf"
    assert doc["tags"] == ["sample", "test"] and doc["status"] == "indexed" and doc["chunk_count"] >= 2
    assert doc["created_at"].endswith("Z") and doc["updated_at"].endswith("Z")
    assert doc["file_path"].endswith("sample.pdf") and doc["id"] in doc["file_path"]
    assert not doc["file_path"].startswith("/") and str(server[1]) not in doc["file_path"]  # no server path
    assert uploaded["handbook.txt"]["chunk_count"] > 5


def test_unsupported_upload_is_400(client: httpx.Client) -> None:
    response = client.post(
        f"{API}/documents/upload", files={"file": ("sample.exe", b"MZ\x90\x00", "application/octet-stream")}
    )
    assert response.status_code == 400 and "sample.exe" in response.json()["detail"]


def test_list_and_detail_as_designed(client: httpx.Client, uploaded: dict[str, dict]) -> None:
    listing = client.get(f"{API}/documents", params={"page": 1, "per_page": 20})
    assert listing.status_code == 200
    assert {"items", "total", "page", "per_page"} <= set(listing.json()) and listing.json()["total"] == 2
    tagged = client.get(f"{API}/documents", params={"tag": "sample"}).json()
    assert [d["id"] for d in tagged["items"]] == [uploaded["sample.pdf"]["id"]]
    doc_id = uploaded["sample.pdf"]["id"]
    detail = client.get(f"{API}/documents/{doc_id}")
    assert detail.status_code == 200
    chunks = detail.json()["chunks"]
    assert len(chunks) == detail.json()["chunk_count"]
    for chunk in chunks:
        assert {
            "id",
            "document_id",
            "content",
            "chunk_index",
            "page_number",
            "chunk_metadata",
            "created_at",
        } <= set(chunk)
        assert chunk["document_id"] == doc_id
        assert chunk["chunk_metadata"] is None or isinstance(chunk["chunk_metadata"], dict)
    assert [c["page_number"] for c in chunks] == [1, 2]
    assert [c["chunk_index"] for c in chunks] == [0, 1]
    missing = client.get(f"{API}/documents/550e8400-e29b-41d4-a716-446655440000")
    assert missing.status_code == 404 and missing.json()["detail"]


def test_search_as_designed(client: httpx.Client, uploaded: dict[str, dict]) -> None:
    pdf_id = uploaded["sample.pdf"]["id"]
    body = {
        "query": "how do I request paid leave?",
        "top_k": 5,
        "score_threshold": 0.0,
        "filter": {"tags": ["sample", "test"], "document_ids": [pdf_id]},
    }
    response = client.post(f"{API}/search", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["query"] == body["query"] and out["total"] == len(out["results"]) >= 1
    best = out["results"][0]
    assert {"document_id", "chunk_id", "content", "score", "metadata"} <= set(best)
    assert best["document_id"] == pdf_id and "paid leave" in best["content"]
    assert best["metadata"]["filename"] == "sample.pdf" and best["metadata"]["title"] == "サンプル文書"
    assert best["metadata"]["page_number"] == 2 and best["metadata"]["tags"] == ["sample", "test"]
    assert 0.0 <= best["score"] <= 1.0
    other = client.post(f"{API}/search", json={**body, "filter": {"tags": ["handbook"]}}).json()
    assert {r["document_id"] for r in other["results"]} == {uploaded["handbook.txt"]["id"]}
    default = client.post(f"{API}/search", json={"query": "rules about every office"}).json()
    assert default["total"] == 5  # top_k defaults to 5 (the handbook alone has more chunks)
    assert client.post(f"{API}/search", json={"query": ""}).status_code == 422
    assert client.post(f"{API}/search", json={"query": "x", "top_k": 101}).status_code == 422


def test_chat_as_designed(client: httpx.Client, uploaded: dict[str, dict]) -> None:
    body = {
        "question": "How do I request paid leave?",
        "chat_history": [
            {"role": "user", "content": "前の質問"},
            {"role": "assistant", "content": "前の回答"},
        ],
        "top_k": 5,
        "score_threshold": 0.0,
    }
    response = client.post(f"{API}/chat", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["question"] == body["question"] and out["answer"]
    source = out["sources"][0]
    assert {"document_id", "chunk_id", "filename", "title", "chunk_content", "page_number", "score"} <= set(
        source
    )
    assert (
        source["filename"] == "sample.pdf"
        and source["page_number"] == 2
        and "paid leave" in source["chunk_content"]
    )
    with client.stream("POST", f"{API}/chat/stream", json=body) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]
    assert all(e["done"] is False and e["sources"] is None and "content" in e for e in events[:-1])
    assert events[-1]["done"] is True and events[-1]["content"] == "" and events[-1]["sources"]


def test_openapi_documents_both_routes(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {f"{API}/documents", f"{API}/documents/upload", "/health", f"{API}/health", "/"} <= set(paths)


def test_the_example_client_runs_against_the_server(
    server: tuple[str, Path], uploaded: dict[str, dict]
) -> None:
    def run(*args: str) -> dict:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE / "client.py"), "--url", server[0], *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return json.loads(done.stdout)

    assert run("health")["status"] == "healthy"
    hits = run("search", "paid leave", "--tag", "sample")
    assert hits["results"][0]["metadata"]["filename"] == "sample.pdf"
    assert run("chat", "How do I request paid leave?")["sources"]


def test_delete_as_designed(client: httpx.Client, uploaded: dict[str, dict]) -> None:
    doc_id = uploaded["handbook.txt"]["id"]
    assert client.delete(f"{API}/documents/{doc_id}").status_code == 204
    assert client.get(f"{API}/documents/{doc_id}").status_code == 404
    again = client.delete(f"{API}/documents/{doc_id}")
    assert again.status_code == 404 and again.json()["detail"]
    hits = client.post(f"{API}/search", json={"query": "rules about every office", "top_k": 20}).json()
    assert doc_id not in {r["document_id"] for r in hits["results"]}  # its vectors are gone too
