"""Chat with a real language-model client (langchain-openai) against a local server speaking the OpenAI
chat-completions protocol (scripted replies): the prompt carries the cited sources and the history, the
answer streams piece by piece, and a failing model is a clear 502 (or a final error event when streaming)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import REPLY, FakeOpenAI, fake_openai
from fastapi.testclient import TestClient

from finderledge import ConfigurationError, FinderLedge
from finderledge.server import ServerConfig, create_app
from finderledge.server.answers import make_answerer


@pytest.fixture
def llm() -> Iterator[tuple[str, type[FakeOpenAI]]]:
    with fake_openai() as server:
        yield server


@pytest.fixture
def client(tmp_path: Path, minilm, llm: tuple[str, type[FakeOpenAI]]) -> Iterator[TestClient]:
    llm_url = llm[0]
    fl = FinderLedge(tmp_path / "index", embedding=minilm, show_progress=False)
    config = ServerConfig(
        directory=tmp_path / "index", llm="openai:local-test-model", llm_base_url=llm_url, llm_timeout=30
    )
    with TestClient(create_app(config, ledger=fl)) as c:
        r = c.post(
            "/api/v1/documents",
            files={"file": ("refunds.md", b"# Refunds\n\nRefunds within 30 days.", "text/markdown")},
        )
        assert r.status_code == 201
        yield c
    fl.close()


def test_the_model_answers_from_the_cited_sources_and_the_history(
    client: TestClient, llm: tuple[str, type[FakeOpenAI]]
) -> None:
    r = client.post(
        "/api/v1/chat",
        json={
            "question": "How long is the refund window?",
            "history": [
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi, ask me."},
            ],
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (
        body["answer"] == "".join(REPLY)
        and body["extractive"] is False
        and body["model"] == "openai:local-test-model"
    )
    assert body["sources"][0]["n"] == 1 and body["sources"][0]["filename"] == "refunds.md"
    sent = llm[1].requests[-1]
    assert sent["model"] == "local-test-model"
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert (
        "[1] (source:" in sent["messages"][0]["content"]
        and "Refunds within 30 days" in sent["messages"][0]["content"]
    )
    assert sent["messages"][-1]["content"] == "How long is the refund window?"


def test_the_answer_streams_as_server_sent_events(client: TestClient) -> None:
    with client.stream("POST", "/api/v1/chat/stream", json={"question": "refund window?"}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert [e["content"] for e in events[:-1]] == REPLY
    assert events[-1]["done"] is True and events[-1]["extractive"] is False
    assert events[-1]["sources"][0]["filename"] == "refunds.md"


def test_a_failing_model_is_a_clear_502_or_a_final_error_event(
    client: TestClient, llm: tuple[str, type[FakeOpenAI]]
) -> None:
    llm[1].fail = True
    r = client.post("/api/v1/chat", json={"question": "refund window?"})
    assert r.status_code == 502 and r.json()["detail"].startswith("the language model failed")
    assert "Traceback" not in r.text
    with client.stream("POST", "/api/v1/chat/stream", json={"question": "refund window?"}) as s:
        events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: ")]
    assert events[-1]["done"] is True and events[-1]["error"].startswith("the language model failed")


def test_llm_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="unknown provider"):
        make_answerer("gpt:4")
    with pytest.raises(ConfigurationError, match="llm"):
        ServerConfig(directory=Path("."), llm="nocolon")


def test_chat_models_from_a_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One public function builds the model a setting names; every bad setting is a ConfigurationError."""
    from langchain_openai import ChatOpenAI

    from finderledge.rag.llms import make_chat_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        make_chat_model("openai:gpt-4o-mini")  # the client's own error was a raw openai.OpenAIError
    assert isinstance(make_chat_model("openai:local", base_url="http://127.0.0.1:9/v1"), ChatOpenAI)
    with pytest.raises(ConfigurationError, match="no such model file"):
        make_chat_model(f"llamacpp:{tmp_path / 'missing.gguf'}")
    for bad in ("openai:", "gpt:4", "nocolon"):
        with pytest.raises(ConfigurationError, match="unknown provider"):
            make_chat_model(bad)
