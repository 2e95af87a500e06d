"""Per-request strategies, dataset filters and JWT tenants on /api/v1/search and /api/v1/chat (issue 30, 001).

Two tenants (alice, bob) log in with JWTs and upload files into datasets; the language model is a local
OpenAI-protocol server (tests/helpers/fake_openai.py) whose every plan asks for the OTHER tenant's secrets and
whose answers echo the whole prompt, so a passage leaked into any search, source or answer would show as that
tenant's marker text in the response.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fake_openai import fake_openai
from fastapi.testclient import TestClient
from server_process import running_server

from finderledge import ConfigurationError, FinderLedge
from finderledge.server import ServerConfig, create_app
from finderledge.server.answers import ExtractiveAnswerer, make_answerer
from finderledge.server.keys import KeyStore
from finderledge.server.models import StrategyName
from finderledge.server.strategies import ALIASES, STRATEGY_NAMES

SECRET = "test-secret-of-at-least-32-characters!"
MARKERS = {
    "alice": ("Kestrel-7731", "Ken Sato", "7,200,000", "アリス"),
    "bob": ("Marlin-9902", "Yuki Mori", "9,850,000", "ボブ"),
}
FILES = {  # (user, dataset, file name): text
    ("alice", "hr", "salary.md"): "# Salary\n\nAlice's annual base salary for 2024 is 7,200,000 yen. "
    "Her manager Ken Sato reviews it every April.\n\nThe salary is paid on the 25th of each month. "
    "アリスの通勤手当は月1万円です。\n",
    ("alice", "projects", "kestrel.md"): "# Project Kestrel-7731\n\nAlice leads project Kestrel-7731, "
    "a search engine for the legal team. The deadline is in June.\n",
    ("bob", "hr", "salary.md"): "# Salary\n\nBob's annual base salary for 2024 is 9,850,000 yen. "
    "His manager Yuki Mori reviews it every October.\n\nThe salary is paid on the 25th of each month. "
    "ボブの通勤手当は月2万円です。\n",
    ("bob", "projects", "marlin.md"): "# Project Marlin-9902\n\nBob leads project Marlin-9902, "
    "a chat bot for the support team. The deadline is in May.\n",
}
QUESTIONS = ("What is my salary and who reviews it?", "When is the project deadline?", "通勤手当はいくら？")
ATTACKS = ("Bob Marlin-9902 9,850,000 Yuki Mori", "Alice Kestrel-7731 7,200,000 Ken Sato")


def token(tenant: str, *, secret: str = SECRET, seconds: int = 600, claim: str = "sub", **extra: Any) -> str:
    return jwt.encode({claim: tenant, "exp": int(time.time()) + seconds, **extra}, secret, algorithm="HS256")


def auth(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def attack_reply(body: dict[str, Any]) -> list[str]:
    """Plans (one user message) name every tenant's secrets; answers (with a system prompt) echo the prompt."""
    messages = body["messages"]
    if any(m["role"] == "system" for m in messages):
        return [str(m["content"]) + "\n" for m in messages]
    return ["\n".join(f"{' '.join(ms)} salary deadline" for ms in MARKERS.values())]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Iterator[dict[str, Any]]:
    """The app with JWTs (HS256) and an API key for carol, the attacking model, each file uploaded by its owner."""
    directory = tmp_path_factory.mktemp("strategies") / "index"
    carol_key = KeyStore(directory / "server").create("carol")[1]
    fl = FinderLedge(
        directory,
        embedding=minilm,
        partition_key="tenant",
        chunk_size=120,
        chunk_overlap=0,
        show_progress=False,
    )
    with fake_openai(attack_reply) as (url, handler):
        answerer = make_answerer("openai:local-model", base_url=url)
        config = ServerConfig(directory=directory, jwt_secret=SECRET)
        with TestClient(create_app(config, ledger=fl, answerer=answerer)) as client:
            ids: dict[tuple[str, str, str], str] = {}
            for (user, dataset, name), text in FILES.items():
                r = client.post(
                    "/api/v1/documents",
                    headers=auth(token(user)),
                    data={"dataset_id": dataset},
                    files={"file": (name, text.encode(), "text/markdown")},
                )
                assert r.status_code == 201, r.text
                assert r.json()["dataset_id"] == dataset and r.json()["data_source_id"] == r.json()["id"]
                ids[(user, dataset, name)] = r.json()["id"]
            yield {"client": client, "ids": ids, "handler": handler, "fl": fl, "carol": carol_key}
    fl.close()


def _other(user: str) -> str:
    return "bob" if user == "alice" else "alice"


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_no_strategy_returns_another_tenants_text(server: dict[str, Any], strategy: str) -> None:
    """Every strategy, both tenants, search and chat, plain and attacking questions: never the other's text."""
    client, handler = server["client"], server["handler"]
    for user in MARKERS:
        theirs = MARKERS[_other(user)]
        for question in (*QUESTIONS, *ATTACKS):
            before = len(handler.requests)
            r = client.post(
                "/api/v1/search",
                headers=auth(token(user)),
                json={"query": question, "top_k": 20, "strategy": strategy},
            )
            assert r.status_code == 200, r.text
            assert r.json()["strategy"] == strategy and r.json()["results"], (user, question)
            shown = json.dumps(r.json()["results"], ensure_ascii=False)  # "query" echoes the attack itself
            leaked = [m for m in theirs if m in shown]
            assert not leaked, f"{strategy}: {user} searching {question!r} sees {leaked}"
            assert {h["metadata"]["tenant"] for h in r.json()["results"]} == {user}
            planned = len(handler.requests) - before
            assert planned == (1 if strategy in ("multi_query", "hyde", "decompose") else 0), strategy
        for question in QUESTIONS:
            r = client.post(
                "/api/v1/chat",
                headers=auth(token(user)),
                json={"question": question, "top_k": 10, "strategy": strategy},
            )
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["sources"] and not body["extractive"] and body["strategy"] == strategy
            assert body["sources"][0]["content"] in body["answer"]  # the echoed prompt: a leak would show
            leaked = [m for m in theirs if m in r.text]
            assert not leaked, f"{strategy}: {user} chatting {question!r} sees {leaked}"
        with client.stream(
            "POST",
            "/api/v1/chat/stream",
            headers=auth(token(user)),
            json={"question": QUESTIONS[0], "strategy": strategy},
        ) as response:
            events = [json.loads(x[6:]) for x in response.iter_lines() if x.startswith("data: ")]
        assert events[-1]["done"] and events[-1]["strategy"] == strategy and events[-1]["sources"]
        assert not [m for m in theirs if m in json.dumps(events, ensure_ascii=False)], strategy


def test_the_attack_plans_do_reach_the_other_tenant_without_the_filter(server: dict[str, Any]) -> None:
    """The control: the searches the model asks for find the other tenant's text when nothing scopes them."""
    for user, theirs in MARKERS.items():
        found = " ".join(r.content for r in server["fl"].search(" ".join(theirs), k=20))
        assert any(m in found for m in theirs), user


def test_parent_document_and_compression_change_what_comes_back(server: dict[str, Any]) -> None:
    client = server["client"]
    question = "When is the salary paid?"

    def contents(strategy: str) -> list[str]:
        r = client.post(
            "/api/v1/search",
            headers=auth(token("alice")),
            json={"query": question, "top_k": 3, "strategy": strategy},
        )
        assert r.status_code == 200, r.text
        return [h["content"] for h in r.json()["results"]]

    basic, parents, compressed = contents("basic"), contents("parent_document"), contents("compression")
    whole = FILES[("alice", "hr", "salary.md")]
    assert " ".join(whole.split()) in [" ".join(p.split()) for p in parents]  # the whole file of the match
    assert len(whole) > max(len(c) for c in basic)
    assert len(compressed) == len(basic)
    for short, full in zip(compressed, basic):
        assert len(short) <= len(full)
        assert all(piece.strip() in full for piece in short.split(". "))  # only the chunk's own sentences
    assert any("paid on the 25th" in c for c in compressed), (basic, compressed)
    assert any("Ken Sato" in c for c in basic) and not any("Ken Sato" in c for c in compressed)
    assert not any(c.startswith("#") for c in compressed)


def test_strategy_names_are_checked(server: dict[str, Any], tmp_path: Path) -> None:
    client = server["client"]
    for path, body in (
        ("/api/v1/search", {"query": "salary"}),
        ("/api/v1/chat", {"question": "salary"}),
        ("/api/v1/chat/stream", {"question": "salary"}),
    ):
        r = client.post(path, headers=auth(token("alice")), json={**body, "strategy": "magic"})
        assert r.status_code == 422, r.text
        assert "magic" in r.text and all(name in r.text for name in STRATEGY_NAMES), r.text
    assert set(get_args(StrategyName)) == {*STRATEGY_NAMES, *ALIASES}  # the schema lists every name
    for alias, name in ALIASES.items():
        r = client.post(
            "/api/v1/search", headers=auth(token("alice")), json={"query": "salary", "strategy": alias}
        )
        assert r.status_code == 200 and r.json()["strategy"] == name, r.text


def test_llm_strategies_without_a_model_say_so(server: dict[str, Any]) -> None:
    config = ServerConfig(directory=Path(server["fl"].persist_directory), jwt_secret=SECRET)
    app = create_app(config, ledger=server["fl"], answerer=ExtractiveAnswerer())
    with TestClient(app) as client:
        for strategy in ("multi_query", "hyde", "decompose", "deep_rag"):
            r = client.post(
                "/api/v1/search",
                headers=auth(token("alice")),
                json={"query": "salary", "strategy": strategy},
            )
            assert r.status_code == 422 and "--llm" in r.json()["detail"], r.text
        r = client.post(
            "/api/v1/chat",
            headers=auth(token("alice")),
            json={"question": "salary", "strategy": "contextual_compression"},
        )
        assert r.status_code == 200 and r.json()["extractive"], r.text


def test_dataset_ids_and_data_source_ids_narrow_inside_the_tenant(server: dict[str, Any]) -> None:
    client, ids = server["client"], server["ids"]

    def sources(user: str, **narrow: Any) -> set[tuple[str, str]]:
        found = set()
        for strategy in ("basic", "multi_query", "parent_document"):
            r = client.post(
                "/api/v1/search",
                headers=auth(token(user)),
                json={"query": "salary project deadline", "top_k": 20, "strategy": strategy, **narrow},
            )
            assert r.status_code == 200, r.text
            found |= {(h["metadata"]["tenant"], h["metadata"].get("dataset_id")) for h in r.json()["results"]}
        return found

    assert sources("alice") == {("alice", "hr"), ("alice", "projects")}
    assert sources("alice", dataset_ids=["hr"]) == {("alice", "hr")}  # bob's "hr" has the same name
    assert sources("bob", dataset_ids=["projects", "travel"]) == {("bob", "projects")}
    kestrel = ids[("alice", "projects", "kestrel.md")]
    assert sources("alice", data_source_ids=[kestrel]) == {("alice", "projects")}
    assert sources("bob", data_source_ids=[kestrel]) == set()  # alice's file id from bob: nothing
    r = client.post(
        "/api/v1/chat",
        headers=auth(token("alice")),
        json={"question": "deadline", "dataset_ids": ["projects"], "strategy": "hyde"},
    )
    assert r.status_code == 200 and {s["document_id"] for s in r.json()["sources"]} == {kestrel}
    r = client.get("/api/v1/documents", params={"dataset_id": "hr"}, headers=auth(token("bob")))
    assert [(d["dataset_id"], d["filename"]) for d in r.json()["items"]] == [("hr", "salary.md")]
    assert r.json()["items"][0]["id"] == ids[("bob", "hr", "salary.md")]
    listed = client.get("/api/v1/documents", headers=auth(token("alice"))).json()["items"]
    assert {(d["dataset_id"], d["filename"]) for d in listed} == {
        ("hr", "salary.md"),
        ("projects", "kestrel.md"),
    }


def test_jwt_refusals_are_401_and_api_keys_keep_working(server: dict[str, Any]) -> None:
    client = server["client"]
    header, _, sig = token("alice").rpartition(".")
    refused = {
        "expired": token("alice", seconds=-30),
        "wrong secret": token("alice", secret="another-secret-of-at-least-32-chars!!"),
        "no exp": jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256"),
        "no tenant claim": token("alice", claim="name"),
        "a path as tenant": token("../bob"),
        "alg none": jwt.encode({"sub": "alice", "exp": int(time.time()) + 60}, None, algorithm="none"),
        "tampered": header + "." + sig[::-1],
        "garbage": "a.b.c",
    }
    for why, value in refused.items():
        r = client.post("/api/v1/search", headers=auth(value), json={"query": "salary"})
        assert r.status_code == 401, (why, r.text)
        assert "Kestrel" not in r.text
    assert (
        "expired"
        in client.post("/api/v1/search", headers=auth(refused["expired"]), json={"query": "salary"}).json()[
            "detail"
        ]
    )
    assert client.post("/api/v1/search", json={"query": "salary"}).status_code == 401
    r = client.post("/api/v1/search", headers=auth(server["carol"]), json={"query": "salary", "top_k": 20})
    assert r.status_code == 200 and r.json()["results"] == []  # carol's key works; carol has no documents
    r = client.post(
        "/api/v1/search", headers={"X-API-Key": server["carol"]}, json={"query": "salary", "top_k": 20}
    )
    assert r.status_code == 200 and r.json()["results"] == []


def test_rs256_public_key_and_a_configured_claim(server: dict[str, Any], tmp_path: Path) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    key_file = tmp_path / "public.pem"
    key_file.write_bytes(pem)
    config = ServerConfig(
        directory=Path(server["fl"].persist_directory),
        jwt_public_key=str(key_file),
        jwt_claim="tenant",
        jwt_audience="mochirag",
    )
    app = create_app(config, ledger=server["fl"], answerer=ExtractiveAnswerer())
    exp = int(time.time()) + 60
    good = jwt.encode({"tenant": "bob", "sub": "alice", "aud": "mochirag", "exp": exp}, private, "RS256")
    wrong_aud = jwt.encode({"tenant": "bob", "aud": "other", "exp": exp}, private, "RS256")
    hs_with_public = jwt.encode({"tenant": "bob", "aud": "mochirag", "exp": exp}, SECRET, "HS256")
    with TestClient(app) as client:
        r = client.post("/api/v1/search", headers=auth(good), json={"query": "salary", "top_k": 20})
        assert r.status_code == 200, r.text
        assert {h["metadata"]["tenant"] for h in r.json()["results"]} == {"bob"}  # the claim, not sub
        for bad in (wrong_aud, hs_with_public):
            assert client.post("/api/v1/search", headers=auth(bad), json={"query": "x"}).status_code == 401


def test_jwt_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="jwt_secret: expected at least 32"):
        ServerConfig(directory=tmp_path, jwt_secret="short")
    with pytest.raises(ConfigurationError, match="got both"):
        ServerConfig(directory=tmp_path, jwt_secret=SECRET, jwt_public_key="key.pem")
    with pytest.raises(ConfigurationError, match="neither a PEM key nor a readable key file"):
        create_app(ServerConfig(directory=tmp_path, jwt_public_key=str(tmp_path / "missing.pem")))
    assert not (tmp_path / "server").exists() and not any(
        tmp_path.iterdir()
    )  # refused before the index opened


def test_finderledge_serve_takes_jwts_from_its_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`finderledge serve` as a process: the secret from FINDERLEDGE_JWT_SECRET, the claim from --jwt-claim."""
    monkeypatch.setenv("FINDERLEDGE_JWT_SECRET", SECRET)
    with running_server(tmp_path / "index", args=["--jwt-claim", "tenant"]) as url:
        good = token("dora", claim="tenant")
        r = httpx.post(
            url + "/api/v1/documents",
            headers=auth(good),
            data={"dataset_id": "notes"},
            files={"file": ("n.md", b"Dora's note: the door code is 5151.", "text/markdown")},
            timeout=120,
        )
        assert r.status_code == 201 and r.json()["dataset_id"] == "notes", r.text
        r = httpx.post(url + "/api/v1/search", headers=auth(good), json={"query": "door code"}, timeout=60)
        assert r.status_code == 200 and "5151" in r.text
        for bad in (token("dora"), token("dora", claim="tenant", seconds=-5), "not-a-key"):
            r = httpx.post(url + "/api/v1/search", headers=auth(bad), json={"query": "door code"}, timeout=60)
            assert r.status_code == 401 and "5151" not in r.text, r.text
