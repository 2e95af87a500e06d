"""The server's request fields default to the index's own settings (issue 26), the document-search design's
field names and shapes beside ours (issue 30, seed 002), and its settings by their variable names.

FastAPI's TestClient over a real index with fake embeddings: fast, no model."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from finderledge import FinderLedge
from finderledge.errors import ConfigurationError
from finderledge.server import ServerConfig, create_app
from finderledge.server.config import DESIGN_LLM
from finderledge.server.models import ChatRequest

TEXTS = [f"Policy {i}: the office rule number {i} covers vacation and travel." for i in range(8)]


@pytest.fixture
def keyword_k3(tmp_path: Path, fake_embeddings) -> Iterator[tuple[TestClient, FinderLedge]]:
    """An index whose own settings are k=3 and keyword search."""
    fl = FinderLedge(
        tmp_path / "index", embedding=fake_embeddings, k=3, search_mode="keyword", show_progress=False
    )
    fl.add_texts(
        TEXTS, metadatas=[{"name": f"p{i}.txt", "tags": ["even" if i % 2 == 0 else "odd"]} for i in range(8)]
    )
    with TestClient(create_app(ServerConfig(directory=tmp_path / "index"), ledger=fl)) as client:
        yield client, fl
    fl.close()


def test_search_without_top_k_or_mode_takes_the_index_settings(keyword_k3) -> None:
    client, _ = keyword_k3
    out = client.post("/api/v1/search", json={"query": "office rule vacation"}).json()
    assert out["total"] == len(out["results"]) == 3  # the index's k, not the server's old 10
    assert all(r["vector_rank"] is None and r["keyword_rank"] is not None for r in out["results"])  # keyword
    wider = client.post("/api/v1/search", json={"query": "office rule vacation", "top_k": 6}).json()
    assert wider["total"] == 6  # a value sent wins
    hybrid = client.post(
        "/api/v1/search", json={"query": "office rule vacation", "search_mode": "hybrid"}
    ).json()
    assert any(r["vector_rank"] is not None for r in hybrid["results"])


def test_chat_without_top_k_takes_the_index_k(keyword_k3) -> None:
    client, _ = keyword_k3
    out = client.post("/api/v1/chat", json={"question": "office rule vacation"}).json()
    assert 1 <= len(out["sources"]) <= 3 and out["question"] == "office rule vacation"
    assert all(s["chunk_content"] == s["content"] and "page_number" in s for s in out["sources"])


def test_chat_history_is_the_designs_name_for_history(keyword_k3) -> None:
    client, _ = keyword_k3
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert (
        client.post("/api/v1/chat", json={"question": "vacation", "chat_history": turns}).status_code == 200
    )
    both = client.post("/api/v1/chat", json={"question": "vacation", "chat_history": turns, "history": turns})
    assert both.status_code == 200  # both names: one history, ``history`` first (the schema allows both)
    request = ChatRequest.model_validate({"question": "q", "history": turns[:1], "chat_history": turns[1:]})
    assert [t.content for t in request.turns] == ["hi", "hello"]
    bad = client.post(
        "/api/v1/chat", json={"question": "vacation", "chat_history": [{"role": "bot", "content": "x"}]}
    )
    assert bad.status_code == 422


def test_the_designs_nested_filter(keyword_k3) -> None:
    client, _ = keyword_k3
    even = client.post(
        "/api/v1/search", json={"query": "office rule", "top_k": 8, "filter": {"tags": ["even"]}}
    )
    assert even.status_code == 200
    assert {r["metadata"]["name"] for r in even.json()["results"]} == {f"p{i}.txt" for i in (0, 2, 4, 6)}
    assert all(r["metadata"]["page_number"] is None for r in even.json()["results"])  # not a PDF
    language = client.post(
        "/api/v1/search", json={"query": "office rule", "top_k": 8, "filter": {"tags": {"$contains": "odd"}}}
    )
    assert {r["metadata"]["name"] for r in language.json()["results"]} == {f"p{i}.txt" for i in (1, 3, 5, 7)}
    wrong = client.post("/api/v1/search", json={"query": "x", "filter": {"tags": [{"a": 1}]}})
    assert wrong.status_code == 422


def test_root_answers_json_to_an_api_client_and_the_page_to_a_browser(keyword_k3) -> None:
    client, _ = keyword_k3
    api = client.get("/", headers={"Accept": "application/json"})
    assert api.json()["docs"] == "/docs" and set(api.json()) == {"message", "version", "docs"}
    assert (
        client.get("/", headers={"Accept": "text/html,*/*;q=0.8"})
        .headers["content-type"]
        .startswith("text/html")
    )
    # issue 44: a plain API client (Accept */* or none, as curl and httpx send) gets JSON with links to the docs
    for accept in ("*/*", "", "application/json, */*;q=0.5"):
        plain = client.get("/", headers={"Accept": accept})
        assert plain.headers["content-type"].startswith("application/json"), accept
        assert plain.json() == api.json() and plain.headers["vary"] == "Accept"
        links = plain.headers["link"]
        assert '</docs>; rel="service-doc"' in links and '</openapi.json>; rel="service-desc"' in links
        for target in ("/docs", "/openapi.json", "/redoc"):
            assert client.get(target).status_code == 200, target
    for browser in (  # Chromium's and Firefox's navigation Accept headers: the page
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    ):
        page = client.get("/", headers={"Accept": browser})
        assert page.headers["content-type"].startswith("text/html") and "<title>FinderLedge" in page.text


def test_design_health_names_the_database_and_the_backend(keyword_k3) -> None:
    client, fl = keyword_k3
    health = client.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "healthy"
    assert health.json()["components"]["database"] == "ok" and health.json()["components"]["faiss"] == "ok"
    uploads = fl.persist_directory / "server" / "uploads"
    shutil.rmtree(uploads)  # the first check made it
    uploads.write_text("not a folder")  # the upload area cannot be written
    broken = client.get("/health")
    assert broken.status_code == 503 and broken.json()["status"] == "unhealthy"
    assert broken.json()["components"]["uploads"] != "ok" and broken.json()["components"]["database"] == "ok"


def test_the_designs_variables_set_the_document_search_profile(tmp_path: Path) -> None:
    plain = ServerConfig.document_search(tmp_path, environ={})
    assert plain.extra["k"] == 5 and plain.extra["chunk_size"] == 1000 and plain.extra["chunk_overlap"] == 200
    assert (
        plain.vector_store == "qdrant"
        and plain.extra["qdrant_collection"] == "documents"
        and plain.llm is None
    )
    env = {
        "QDRANT_URL": "http://qdrant:6333",
        "QDRANT_COLLECTION": "docs2",
        "LOG_LEVEL": "debug",
        "OPENAI_API_KEY": "sk-test",
    }
    served = ServerConfig.document_search(tmp_path, environ=env)
    assert served.vector_store == "qdrant" and served.extra["qdrant_url"] == "http://qdrant:6333"
    assert (
        served.extra["qdrant_collection"] == "docs2"
        and served.log_level == "DEBUG"
        and served.llm == DESIGN_LLM
    )
    assert "sk-test" not in json.dumps(served.to_env())  # the key stays in the environment, for the client
    pg = ServerConfig.document_search(tmp_path, environ={"DATABASE_URL": "postgresql+psycopg://u:p@db/x"})
    assert pg.vector_store == "pgvector" and pg.extra["database_url"] == "postgresql+psycopg://u:p@db/x"
    with pytest.raises(ConfigurationError, match="DATABASE_URL and QDRANT_URL"):
        ServerConfig.document_search(tmp_path, environ={"DATABASE_URL": "postgresql://db/x", **env})
    with pytest.raises(ConfigurationError, match="LOG_LEVEL"):
        ServerConfig.document_search(tmp_path, environ={"LOG_LEVEL": "loud"})
    assert (
        ServerConfig.document_search(tmp_path, environ={}, llm="ollama:x").llm == "ollama:x"
    )  # overrides win


def test_the_profile_serves_with_its_settings(tmp_path: Path, fake_embeddings) -> None:
    """create_app over the profile: the index gets 1000/200 character chunks, search 5 results by default."""
    pytest.importorskip("qdrant_client")
    config = ServerConfig.document_search(tmp_path / "index", environ={})
    fl = FinderLedge(
        tmp_path / "index",
        embedding=fake_embeddings,
        show_progress=False,
        vector_store=config.vector_store,
        **config.extra,
    )
    assert (fl.settings.chunk_size, fl.settings.chunk_overlap, fl.settings.k) == (1000, 200, 5)
    fl.add_texts(TEXTS)
    with TestClient(create_app(config, ledger=fl)) as client:
        assert client.post("/api/v1/search", json={"query": "office rule"}).json()["total"] == 5
    fl.close()


def test_serve_profile_document_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``finderledge serve DIR --profile document-search`` starts uvicorn with the profile's settings, the
    design's variables read and command-line options winning."""
    import uvicorn

    from finderledge.cli.commands import main
    from finderledge.server.app import SERVE_ENV
    from finderledge.server.config import ENV_PREFIX

    for name in (ENV_PREFIX + "CONFIG", SERVE_ENV):
        monkeypatch.setenv(name, "")  # restored after the test (cmd_serve writes both)
    monkeypatch.setenv("QDRANT_COLLECTION", "team_docs")
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    started: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: started.append(kw))
    assert main(["serve", str(tmp_path / "idx"), "--profile", "document-search", "--max-upload-mb", "5"]) == 0
    assert started and started[0]["port"] == 8000
    config = ServerConfig.from_env()
    assert config.extra["k"] == 5 and config.extra["chunk_overlap"] == 200 and config.vector_store == "qdrant"
    assert config.extra["qdrant_collection"] == "team_docs" and config.log_level == "WARNING"
    assert config.max_upload_mb == 5
