"""examples/multitenant as the MochiRAG design: login → upload to a dataset → chat with a chosen strategy → an
answer (the LCEL chain, an OpenAI-protocol model) with sources; and the Streamlit UI through the same flow.

The backend runs as a real process; the model is tests/helpers/fake_openai.py on 127.0.0.1, scripted so that
every plan (multi-query rewrites, sub-questions, hypothetical answers) names the OTHER user's secrets and every
answer echoes its whole prompt: a passage of the other user reaching any strategy's context would show in the
answer.  Two users, every strategy of config/strategies.yaml, search and chat: neither ever sees the other's text.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import yaml
from conftest import ROOT
from fake_openai import fake_openai
from server_process import free_port

EXAMPLE = ROOT / "examples" / "multitenant"
SECRET = "mochirag-test-secret-at-least-32-chars"
PASSWORD = "correct horse battery"
MARKERS = {
    "alice": ("Kestrel-7731", "Ken Sato", "7,200,000", "アリスの月給"),
    "bob": ("Marlin-9902", "Yuki Mori", "9,850,000", "ボブの月給"),
}
UPLOADS = {  # user: [(dataset, file name, text)]
    "alice": [
        (
            "hr",
            "salary.md",
            (
                "# Salary\n\nAlice's annual base salary is 7,200,000 yen; her manager Ken Sato "
                "reviews it every April.\n\nアリスの月給は60万円です。The salary is paid on the 25th.\n"
            ),
        ),
        (
            "projects",
            "kestrel.md",
            (
                "# Project Kestrel-7731\n\nAlice leads project Kestrel-7731, a search "
                "engine for the legal team. Its deadline is in June.\n"
            ),
        ),
    ],
    "bob": [
        (
            "hr",
            "salary.md",
            (
                "# Salary\n\nBob's annual base salary is 9,850,000 yen; his manager Yuki Mori "
                "reviews it every October.\n\nボブの月給は82万円です。The salary is paid on the 25th.\n"
            ),
        ),
        (
            "projects",
            "marlin.md",
            (
                "# Project Marlin-9902\n\nBob leads project Marlin-9902, a chat bot for "
                "the support team. Its deadline is in May.\n"
            ),
        ),
    ],
}
QUESTIONS = ("What is my salary and who reviews it?", "When is the project deadline?", "給与はいくら？")
STRATEGIES = list(yaml.safe_load((EXAMPLE / "config" / "strategies.yaml").read_text())["strategies"])


def readme_blocks() -> list[str]:
    """The README's ```sh blocks: how to run the app, and the HTTP walkthrough."""
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)


def backend_command(llm_url: str, directory: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """The README's backend command as written, with the fake model's URL, a temporary index and a free port."""
    [line] = [x for x in readme_blocks()[0].splitlines() if "backend.py" in x]
    words = shlex.split(line)
    env: dict[str, str] = {}
    while re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert env == {"LLM": "openai:local-model", "LLM_BASE_URL": "http://127.0.0.1:8080/v1"}, line
    assert words[:2] == ["python", "examples/multitenant/backend.py"], line
    argv = [sys.executable, str(ROOT / words[1]), *words[2:]]
    argv[argv.index("--dir") + 1] = str(directory)
    argv[argv.index("--port") + 1] = str(port)
    return argv, {**env, "LLM_BASE_URL": llm_url}


def attack_reply(body: dict[str, Any]) -> list[str]:
    """Plans name every user's secrets; an answer (it has a system prompt) echoes the whole prompt."""
    messages = body["messages"]
    if any(m["role"] == "system" for m in messages):
        return [str(m["content"]) + "\n" for m in messages]
    return ["\n".join(f"{' '.join(ms)} salary deadline" for ms in MARKERS.values())]


def other(user: str) -> tuple[str, ...]:
    return MARKERS["bob" if user == "alice" else "alice"]


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The backend as `python examples/multitenant/backend.py` runs it, with the fake model; both users signed up,
    logged in and their files uploaded into datasets."""
    tmp = tmp_path_factory.mktemp("mochirag")
    port = free_port()
    with fake_openai(attack_reply) as (llm_url, handler):
        env = {
            **os.environ,
            "MOCHIRAG_JWT_SECRET": SECRET,
            "LLM": "openai:local-model",
            "LLM_BASE_URL": llm_url,
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        log = tmp / "backend.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(EXAMPLE / "backend.py"),
                    "--dir",
                    str(tmp / "index"),
                    "--port",
                    str(port),
                ],
                env=env,
                stdout=out,
                stderr=out,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 240
            while True:
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
                try:
                    if httpx.get(url + "/api/v1/health", timeout=30).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the backend did not start"
                time.sleep(0.5)
            tokens, files = {}, {}
            for user, uploads in UPLOADS.items():
                r = httpx.post(url + "/users/", json={"username": user, "password": PASSWORD})
                assert r.status_code == 201, r.text
                r = httpx.post(url + "/token", data={"username": user, "password": PASSWORD})
                assert r.status_code == 200 and r.json()["token_type"] == "bearer", r.text
                tokens[user] = r.json()["access_token"]
                for dataset, name, text in uploads:
                    r = httpx.post(
                        url + "/api/v1/documents",
                        headers={"Authorization": f"Bearer {tokens[user]}"},
                        data={"dataset_id": dataset},
                        files={"file": (name, text.encode(), "text/markdown")},
                        timeout=120,
                    )
                    assert r.status_code == 201 and r.json()["status"] == "indexed", r.text
                    files[(user, dataset)] = r.json()["id"]
            yield {"url": url, "tokens": tokens, "files": files, "handler": handler, "llm_url": llm_url}
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def post(backend: dict[str, Any], user: str, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {backend['tokens'][user]}"}
    return httpx.post(backend["url"] + path, headers=headers, json=body, timeout=120)


def test_login_issues_a_jwt_naming_the_user_and_refuses_wrong_passwords(backend: dict[str, Any]) -> None:
    url = backend["url"]
    claims = jwt.decode(backend["tokens"]["alice"], SECRET, algorithms=["HS256"])
    assert claims["sub"] == "alice" and claims["exp"] > time.time()
    assert (
        httpx.post(url + "/token", data={"username": "alice", "password": "wrong password"}).status_code
        == 401
    )
    assert httpx.post(url + "/token", data={"username": "nobody", "password": PASSWORD}).status_code == 401
    assert httpx.post(url + "/users/", json={"username": "alice", "password": PASSWORD}).status_code == 409
    r = httpx.get(url + "/users/me", headers={"Authorization": f"Bearer {backend['tokens']['bob']}"})
    assert r.json() == {"username": "bob"}
    expired = jwt.encode({"sub": "alice", "exp": int(time.time()) - 5}, SECRET, "HS256")
    for path in ("/chat/query/", "/api/v1/search"):
        r = httpx.post(
            url + path, headers={"Authorization": f"Bearer {expired}"}, json={"question": "x", "query": "x"}
        )
        assert r.status_code == 401 and "expired" in r.text, r.text


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_answers_with_sources_and_never_the_other_users_text(
    backend: dict[str, Any], strategy: str
) -> None:
    """The design's /chat/query/ (LCEL chain) and the server's /api/v1/search and /api/v1/chat, both users."""
    handler = backend["handler"]
    for user in MARKERS:
        for question in QUESTIONS:
            before = len(handler.requests)
            r = post(backend, user, "/chat/query/", {"question": question, "strategy": strategy})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["strategy"] == strategy and body["sources"], body
            assert {s["dataset_id"] for s in body["sources"]} <= {"hr", "projects"}
            assert body["sources"][0]["content"] in body["answer"]  # the echoed LCEL prompt holds the context
            prompt = handler.requests[-1]["messages"]
            assert prompt[0]["role"] == "system" and "MochiRAG" in prompt[0]["content"]
            planned = len(handler.requests) - before - 1
            assert planned == (1 if strategy in ("multi_query", "deep_rag", "hyde") else 0), strategy
            leaked = [m for m in other(user) if m in r.text]
            assert not leaked, f"{strategy}: {user} asking {question!r} got {leaked}"
            for path, field in (("/api/v1/search", "query"), ("/api/v1/chat", "question")):
                r = post(backend, user, path, {field: question, "strategy": strategy, "top_k": 20})
                assert r.status_code == 200, r.text
                found = r.json()
                shown = json.dumps(found["results"] if field == "query" else found, ensure_ascii=False)
                leaked = [m for m in other(user) if m in shown]
                assert not leaked, f"{strategy}: {user} {path} {question!r} got {leaked}"


def test_datasets_narrow_the_chat(backend: dict[str, Any]) -> None:
    for strategy in ("basic", "multi_query", "parent_document"):
        r = post(
            backend,
            "alice",
            "/chat/query/",
            {"question": "salary deadline project", "strategy": strategy, "dataset_ids": ["projects"]},
        )
        assert r.status_code == 200, r.text
        assert {s["document_id"] for s in r.json()["sources"]} == {backend["files"][("alice", "projects")]}
        r = post(
            backend,
            "bob",
            "/chat/query/",
            {
                "question": "salary",
                "strategy": strategy,
                "data_source_ids": [backend["files"][("alice", "hr")]],
            },
        )
        assert r.status_code == 200 and r.json()["sources"] == [], r.text  # alice's file id from bob: nothing
        assert "Ken Sato" not in r.text


def test_unknown_strategy_names_the_configured_ones(backend: dict[str, Any]) -> None:
    r = post(backend, "alice", "/chat/query/", {"question": "salary", "strategy": "magic"})
    assert r.status_code == 422 and all(name in r.text for name in STRATEGIES), r.text
    r = post(backend, "alice", "/api/v1/chat", {"question": "salary", "strategy": "magic"})
    assert r.status_code == 422 and "magic" in r.text, r.text
    offered = httpx.get(
        backend["url"] + "/chat/strategies/",
        headers={"Authorization": f"Bearer {backend['tokens']['alice']}"},
    ).json()
    assert [s["name"] for s in offered["strategies"]] == STRATEGIES and offered["default"] == "basic"


def test_streamlit_ui_login_upload_chat(backend: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The UI through streamlit's AppTest against the running backend: sign up, upload into a dataset, chat with
    a chosen strategy, read the answer and its sources; carol never sees alice's or bob's text."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("MOCHIRAG_API_URL", backend["url"])
    at = AppTest.from_file(str(EXAMPLE / "frontend.py"), default_timeout=180)
    at.run()
    assert not at.exception
    at.text_input(key="username").input("carol")
    at.text_input(key="password").input(PASSWORD)
    at.button(key="signup").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state["user"] == "carol"
    assert jwt.decode(at.session_state["token"], SECRET, algorithms=["HS256"])["sub"] == "carol"

    at.text_input(key="dataset").input("support")
    at.get("file_uploader")[0].set_value(
        (
            "refunds.md",
            b"Carol's runbook: refunds are approved within 14 days by ticket RB-4417.",
            "text/markdown",
        )
    )
    at.button[[b.label for b in at.button].index("Upload")].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Uploaded refunds.md to support" in s.value for s in at.success)
    assert any("support" in m.value and "refunds.md" in m.value for m in at.sidebar.markdown)

    at.selectbox(key="strategy").select("contextual_compression").run()
    at.multiselect(key="datasets").select("support").run()
    at.chat_input[0].set_value("How long do refunds take?").run()
    assert not at.exception
    answer = at.chat_message[-1]
    shown = " ".join(m.value for m in answer.markdown) + " ".join(c.value for c in answer.caption)
    assert "RB-4417" in shown and "[1] refunds.md (support)" in shown, shown
    assert not [m for ms in MARKERS.values() for m in ms if m in shown]

    at.selectbox(key="strategy").select("multi_query").run()
    at.chat_input[0].set_value("Who approves refunds?").run()
    shown = " ".join(m.value for m in at.chat_message[-1].markdown)
    assert "RB-4417" in shown and not [m for ms in MARKERS.values() for m in ms if m in shown]
    everything = " ".join(e.value for kind in ("markdown", "caption") for e in at.get(kind))
    assert "RB-4417" in everything and not [m for ms in MARKERS.values() for m in ms if m in everything]


def test_readme_http_walkthrough_runs_as_written(backend: dict[str, Any], tmp_path: Path) -> None:
    """The README's curl block, as written, against the running backend: sign up, log in, upload, chat."""
    block = readme_blocks()[1]
    done = subprocess.run(
        ["bash", "-ec", block],
        cwd=tmp_path,
        env={
            **os.environ,
            "MOCHIRAG_API_URL": backend["url"],
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    replies, text, decoder = [], done.stdout.strip(), json.JSONDecoder()
    while text:  # curl prints each reply without a newline: read the JSON values one after another
        value, end = decoder.raw_decode(text)
        replies.append(value)
        text = text[end:].strip()
    signed_up, upload, answer = replies
    assert signed_up == {"username": "erin"}
    assert upload["dataset_id"] == "ops" and upload["status"] == "indexed"
    assert answer["strategy"] == "multi_query" and answer["sources"][0]["filename"] == "erin-notes.md"
    assert "Sunday at 03:00" in answer["answer"]
    assert not [m for ms in MARKERS.values() for m in ms if m in done.stdout]


def test_the_config_file_drives_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """strategies.yaml's vector_store (the design's ChromaDB), strategy list and options are what the backend uses."""
    from fastapi.testclient import TestClient

    backend_module = load_backend()
    config = yaml.safe_load((EXAMPLE / "config" / "strategies.yaml").read_text())
    config["vector_store"] = "chroma"
    config["default_strategy"] = "parent_document"
    config["strategies"] = {
        "parent_document": {"description": "whole files"},
        "basic": {"search_mode": "keyword"},
    }
    path = tmp_path / "strategies.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.delenv("LLM", raising=False)
    with fake_openai(attack_reply) as (llm_url, _):
        monkeypatch.setenv("LLM_BASE_URL", llm_url)
        app = backend_module.create_backend(tmp_path / "index", secret=SECRET, settings_path=path)
        with TestClient(app) as client:
            assert app.state.finderledge.ledger.settings.vector_store == "chroma"
            client.post("/users/", json={"username": "fay", "password": PASSWORD})
            tok = client.post("/token", data={"username": "fay", "password": PASSWORD}).json()["access_token"]
            headers = {"Authorization": f"Bearer {tok}"}
            text = "# Fay\n\n" + " ".join(
                f"Paragraph {i} of Fay's guide to the orchid house." for i in range(40)
            )
            r = client.post(
                "/api/v1/documents",
                headers=headers,
                data={"dataset_id": "garden"},
                files={"file": ("guide.md", text.encode(), "text/markdown")},
            )
            assert r.status_code == 201 and r.json()["chunk_count"] > 1, r.text
            r = client.post("/chat/query/", headers=headers, json={"question": "orchid house guide"})
            assert r.status_code == 200 and r.json()["strategy"] == "parent_document", r.text
            assert [s["content"].count("Paragraph") for s in r.json()["sources"]] == [40]  # the whole file
            r = client.post("/chat/query/", headers=headers, json={"question": "zebra", "strategy": "basic"})
            assert r.status_code == 200 and r.json()["sources"] == [], r.text  # keyword only: no shared word
            r = client.post(
                "/api/v1/search", headers=headers, json={"query": "zebra", "search_mode": "vector"}
            )
            assert r.json()["results"], r.text  # while a vector search finds the nearest chunk
            r = client.post(
                "/chat/query/", headers=headers, json={"question": "x", "strategy": "multi_query"}
            )
            assert r.status_code == 422 and "parent_document" in r.text  # not offered by this file
    assert (tmp_path / "index" / "chroma").exists() or any((tmp_path / "index").rglob("chroma.sqlite3"))


def load_backend() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("mochirag_backend", EXAMPLE / "backend.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _signed_in(client: Any) -> dict[str, str]:
    client.post("/users/", json={"username": "gil", "password": PASSWORD})
    token = client.post("/token", data={"username": "gil", "password": PASSWORD}).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    r = client.post(
        "/api/v1/documents",
        headers=headers,
        data={"dataset_id": "hr"},
        files={"file": ("leave.md", b"# Leave\n\nGil has twenty days of paid leave.\n", "text/markdown")},
    )
    assert r.status_code == 201, r.text
    return headers


def test_chat_without_an_llm_says_which_setting_to_configure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 001 / issue 44: /chat/query/ without a model is a 503 whose body names the settings to set."""
    from fastapi.testclient import TestClient

    config = yaml.safe_load((EXAMPLE / "config" / "strategies.yaml").read_text())
    config["llm"] = {}
    path = tmp_path / "strategies.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.delenv("LLM", raising=False)
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    app = load_backend().create_backend(tmp_path / "index", secret=SECRET, settings_path=path)
    with TestClient(app) as client:
        headers = _signed_in(client)
        r = client.post("/chat/query/", headers=headers, json={"question": "How many days of leave?"})
        assert r.status_code == 503, r.text
        detail = r.json()["detail"]
        for setting in ("llm.provider", "llm.model", "config/strategies.yaml", "LLM=", "LLM_BASE_URL"):
            assert setting in detail, (setting, detail)
        # and what works without one
        r = client.post("/api/v1/chat", headers=headers, json={"question": "How many days of leave?"})
        assert r.status_code == 200 and r.json()["extractive"] and "twenty days" in r.json()["answer"]


def test_chat_with_an_unreachable_llm_is_a_clear_502_not_a_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: a configured model whose server is down gave an unhandled 500; now a 502 naming the model, its
    URL, what failed and the settings to check, for every strategy (an LLM strategy's plan falls back)."""
    from fastapi.testclient import TestClient

    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    monkeypatch.setenv("LLM", "openai:local-model")
    monkeypatch.setenv("LLM_BASE_URL", dead)
    app = load_backend().create_backend(tmp_path / "index", secret=SECRET)
    with TestClient(app, raise_server_exceptions=False) as client:
        headers = _signed_in(client)
        for strategy in ("basic", "multi_query"):
            r = client.post(
                "/chat/query/",
                headers=headers,
                json={"question": "How many days of leave?", "strategy": strategy},
            )
            assert r.status_code == 502, (strategy, r.status_code, r.text)
            detail = r.json()["detail"]
            assert f"openai:local-model at {dead} could not be reached" in detail, detail
            assert (
                "LLM_BASE_URL" in detail
                and "llm.base_url" in detail
                and "internal server error" not in detail
            )
