"""The server answers 400 naming the limit for a filter over MAX_FILTER_VALUES values (issue 28: 80,000 values gave
a 500 "too many SQL variables"); the library side is tests/contract/test_filter_limit.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.filters import MAX_FILTER_VALUES
from finderledge.server import ServerConfig, create_app


@pytest.mark.parametrize("kind", ["faiss", "chroma"])
def test_the_server_answers_400_naming_the_limit(kind: str, tmp_path: Path) -> None:
    fl = FinderLedge(
        tmp_path / "index",
        vector_store=kind,
        embedding=DeterministicFakeEmbedding(size=8),
        show_progress=False,
        env_file=None,
    )
    fl.add_texts([f"note {i} about the budget" for i in range(20)], metadatas=[{"n": i} for i in range(20)])
    try:
        with TestClient(create_app(ServerConfig(directory=tmp_path / "index"), ledger=fl)) as client:
            for values in (MAX_FILTER_VALUES + 1, 50_000, 80_000):
                body = {"query": "budget", "filter": {"n": {"$in": list(range(values))}}}
                r = client.post("/api/v1/search", json=body)
                assert r.status_code == 400, r.text
                assert f"limit of {MAX_FILTER_VALUES}" in r.json()["detail"]
            r = client.post(
                "/api/v1/search",
                json={"query": "budget", "filter": {"n": {"$in": list(range(MAX_FILTER_VALUES))}}},
            )
            assert r.status_code == 200 and r.json()["results"]
    finally:
        fl.close()


def test_the_tenants_own_clause_does_not_count_against_the_limit(tmp_path: Path) -> None:
    """Issue 39: with a key, a filter of exactly MAX_FILTER_VALUES values was refused as "10001 values" (the
    tenant's own clause counted); it is answered, and one value more is still refused."""
    from finderledge.server.keys import KeyStore

    fl = FinderLedge(
        tmp_path / "index", embedding=DeterministicFakeEmbedding(size=8), show_progress=False, env_file=None
    )
    fl.add_texts(
        [f"note {i} about the budget" for i in range(6)],
        metadatas=[{"n": i, "tenant": "a" if i < 3 else "b"} for i in range(6)],
    )
    secret = KeyStore(tmp_path / "index" / "server").create("a")[1]
    auth = {"Authorization": f"Bearer {secret}"}
    try:
        with TestClient(create_app(ServerConfig(directory=tmp_path / "index"), ledger=fl)) as client:
            for mode in ("hybrid", "vector", "keyword"):
                body = {
                    "query": "budget",
                    "search_mode": mode,
                    "top_k": 10,
                    "filter": {"n": {"$in": list(range(MAX_FILTER_VALUES))}},
                }
                r = client.post("/api/v1/search", json=body, headers=auth)
                assert r.status_code == 200, (mode, r.text[:300])
                assert {h["metadata"]["n"] for h in r.json()["results"]} == {0, 1, 2}, mode
            over = {"query": "budget", "filter": {"n": {"$in": list(range(MAX_FILTER_VALUES + 1))}}}
            r = client.post("/api/v1/search", json=over, headers=auth)
            assert r.status_code == 400 and f"{MAX_FILTER_VALUES + 1} values" in r.json()["detail"]
            tags = {
                "query": "budget",
                "tags": ["x"],
                "filter": {"n": {"$in": list(range(MAX_FILTER_VALUES))}},
            }
            r = client.post("/api/v1/search", json=tags, headers=auth)  # the request's own clauses do count
            assert r.status_code == 400, r.text[:300]
    finally:
        fl.close()
