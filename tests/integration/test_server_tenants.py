"""API keys and tenants: a key sees only its tenant's documents, on every route; keys are stored hashed.

Also the contract every registered route keeps (``finderledge.server.routes.ROUTE_MODULES``): with keys
configured it refuses a missing, wrong or revoked key (unless listed public), and it is in the OpenAPI schema.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from finderledge import FinderLedge
from finderledge.cli.commands import main
from finderledge.server import ServerConfig, create_app
from finderledge.server.keys import KeyStore
from finderledge.server.routes import PUBLIC_PATHS, ROUTE_MODULES, routers

DOC = "The {t} team's travel policy: book flights {n} weeks ahead. Marker {t}-secret.\n"


@pytest.fixture(scope="module")
def tenants(
    tmp_path_factory: pytest.TempPathFactory, minilm
) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    directory = tmp_path_factory.mktemp("tenants") / "index"
    store = KeyStore(directory / "server")
    secrets = {t: store.create(t)[1] for t in ("alice", "bob")}
    fl = FinderLedge(directory, embedding=minilm, show_progress=False)
    fl.add_texts(["Unowned document about the travel policy, added by the library."])  # no tenant: nobody's
    with TestClient(create_app(ServerConfig(directory=directory), ledger=fl)) as client:
        for t, n in (("alice", 2), ("bob", 3)):
            for i in range(2):
                r = client.post(
                    "/api/v1/documents",
                    headers=_auth(secrets[t]),
                    data={"tags": "travel"},
                    files={"file": (f"{t}-{i}.md", DOC.format(t=t, n=n + i).encode(), "text/markdown")},
                )
                assert r.status_code == 201, r.text
        yield client, secrets, directory
    fl.close()


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _ids(client: TestClient, secret: str) -> set[str]:
    return {d["id"] for d in client.get("/api/v1/documents", headers=_auth(secret)).json()["items"]}


def test_each_key_sees_only_its_tenant(tenants) -> None:
    client, secrets, _ = tenants
    alice, bob = _ids(client, secrets["alice"]), _ids(client, secrets["bob"])
    assert len(alice) == 2 and len(bob) == 2 and not alice & bob
    for filt in (
        None,
        {"tenant": "bob"},
        {"$or": [{"tenant": "bob"}, {"tenant": "alice"}]},
        {"tenant": {"$ne": "x"}},
    ):
        for path, body in (
            ("/api/v1/search", {"query": "bob-secret travel policy", "top_k": 50}),
            ("/api/v1/chat", {"question": "bob-secret travel policy", "top_k": 20}),
        ):
            r = client.post(path, headers=_auth(secrets["alice"]), json={**body, "filter": filt})
            assert r.status_code == 200, r.text
            found = r.json()["results" if path.endswith("search") else "sources"]
            assert {h["document_id"] for h in found} <= alice, (path, filt)
            assert bool(found) == (filt != {"tenant": "bob"}), (path, filt)  # narrowed, never widened
            assert "Marker bob" not in r.text and "Unowned" not in r.text
    with client.stream(
        "POST",
        "/api/v1/chat/stream",
        headers=_auth(secrets["alice"]),
        json={"question": "bob-secret", "document_ids": sorted(bob)},
    ) as r:
        assert "Marker bob" not in r.read().decode()
    hits = client.post(
        "/api/v1/search",
        headers=_auth(secrets["alice"]),
        json={"query": "travel", "document_ids": sorted(bob)},
    ).json()["results"]
    assert hits == []


def test_a_key_cannot_read_or_delete_another_tenants_document(tenants) -> None:
    client, secrets, _ = tenants
    bobs = sorted(_ids(client, secrets["bob"]))
    for doc_id in bobs:
        assert client.get(f"/api/v1/documents/{doc_id}", headers=_auth(secrets["alice"])).status_code == 404
        assert (
            client.delete(f"/api/v1/documents/{doc_id}", headers=_auth(secrets["alice"])).status_code == 404
        )
    assert sorted(_ids(client, secrets["bob"])) == bobs
    assert client.get(f"/api/v1/documents/{bobs[0]}", headers=_auth(secrets["bob"])).status_code == 200


def test_writes_are_tagged_with_the_tenant_whatever_the_form_says(tenants) -> None:
    client, secrets, _ = tenants
    r = client.post(
        "/api/v1/documents",
        headers={"X-API-Key": secrets["alice"]},
        data={"tags": "tenant:bob", "title": "bob"},
        files={"file": ("sneaky.txt", b"an attempt to write into bob's space", "text/plain")},
    )
    assert r.status_code == 201
    doc = client.get(f"/api/v1/documents/{r.json()['id']}", headers=_auth(secrets["alice"])).json()
    assert doc["id"] not in _ids(client, secrets["bob"])
    assert client.delete(f"/api/v1/documents/{doc['id']}", headers=_auth(secrets["alice"])).status_code == 204


def _api_routes(app) -> list[APIRoute]:
    """Every route of every registered module (what create_app mounts)."""
    return [r for router in routers() for r in router.routes if isinstance(r, APIRoute)]


def test_every_route_needs_a_valid_key(tenants) -> None:
    client, _, _ = tenants
    routes = _api_routes(client.app)
    assert {r.endpoint.__module__.rsplit(".", 1)[-1] for r in routes} == set(ROUTE_MODULES)
    checked = 0
    for route in routes:
        if route.path in PUBLIC_PATHS:
            continue
        path = route.path.replace("{document_id}", "0" * 32)
        for method in route.methods:
            for headers in ({}, _auth("flk_wrong"), {"X-API-Key": "nope"}, {"Authorization": "Basic YTpi"}):
                r = client.request(method, path, headers=headers, json={})
                assert r.status_code == 401, (method, path, headers, r.status_code)
                assert r.json()["detail"].startswith("a valid API key is required")
                checked += 1
    assert checked >= 4 * 7
    for path in PUBLIC_PATHS:
        assert client.get(path).status_code == 200


def test_every_api_route_is_documented(tenants) -> None:
    client, _, _ = tenants
    schema = client.get("/openapi.json").json()
    for route in _api_routes(client.app):
        if not route.include_in_schema:
            assert route.path == "/"
            continue
        ops = schema["paths"][route.path]
        for method in route.methods:
            op = ops[method.lower()]
            assert op.get("summary") and op.get("description"), route.path
            if route.path not in PUBLIC_PATHS:
                assert op.get("security"), route.path  # the key is documented


def test_keys_cli_create_list_revoke(tenants, capsys: pytest.CaptureFixture[str]) -> None:
    client, _, directory = tenants
    assert main(["keys", "create", "--tenant", "carol", "--dir", str(directory), "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["key"].startswith("flk_") and made["tenant"] == "carol"
    stored = (directory / "server" / "keys.json").read_text()
    assert made["key"] not in stored and made["id"] in stored  # only a hash is kept
    assert client.get("/api/v1/documents", headers=_auth(made["key"])).json()["total"] == 0
    assert main(["keys", "list", "--dir", str(directory)]) == 0
    assert "carol" in capsys.readouterr().out
    assert main(["keys", "revoke", made["id"], "--dir", str(directory)]) == 0
    assert client.get("/api/v1/documents", headers=_auth(made["key"])).status_code == 401
    assert main(["keys", "revoke", "nosuchkey", "--dir", str(directory)]) == 1
    assert main(["keys", "create", "--tenant", "../evil", "--dir", str(directory)]) == 2


def test_revoking_every_key_never_opens_the_server(tmp_path: Path, minilm) -> None:
    store = KeyStore(tmp_path / "index" / "server")
    key, secret = store.create("solo")
    store.revoke(key.id)
    fl = FinderLedge(tmp_path / "index", embedding=minilm, show_progress=False)
    with TestClient(create_app(ServerConfig(directory=tmp_path / "index"), ledger=fl)) as client:
        assert client.get("/api/v1/documents").status_code == 401
        assert client.get("/api/v1/documents", headers=_auth(secret)).status_code == 401
    fl.close()


def test_serve_without_keys_listens_on_loopback_only(tmp_path: Path) -> None:
    run = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [
            sys.executable,
            "-m",
            "finderledge",
            "serve",
            str(tmp_path / "idx"),
            "--host",
            "0.0.0.0",
            "--port",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "no API key exists" in run.stderr
    assert not (tmp_path / "idx").exists()


def test_an_upload_never_replaces_another_tenants_document(
    tmp_path: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39: the server's writes go through the caller's access policy, so even an upload whose document
    id collides with another tenant's (forced here) is refused (403), and that document is left as it was."""
    import uuid

    from finderledge.server import uploads

    directory = tmp_path / "index"
    taken = uuid.UUID("0123456789abcdef0123456789abcdef")
    secret = KeyStore(directory / "server").create("alice")[1]
    fl = FinderLedge(directory, embedding=minilm, show_progress=False)
    fl.add_texts(["Bob's contract: 1,000 EUR."], [{"tenant": "bob"}], document_id=taken.hex)
    monkeypatch.setattr(uploads.uuid, "uuid4", lambda: taken)
    try:
        with TestClient(create_app(ServerConfig(directory=directory), ledger=fl)) as client:
            r = client.post(
                "/api/v1/documents",
                headers=_auth(secret),
                files={"file": ("a.md", b"Alice's text replacing it.", "text/markdown")},
            )
            assert r.status_code == 403, r.text
            assert "outside this scope" in r.json()["detail"] and "1,000 EUR" not in r.text
            assert client.delete(f"/api/v1/documents/{taken.hex}", headers=_auth(secret)).status_code == 404
        docs = fl.list_documents(filter={"document_id": taken.hex})
        assert [(d.page_content, d.metadata["tenant"]) for d in docs] == [
            ("Bob's contract: 1,000 EUR.", "bob")
        ]
    finally:
        fl.close()
