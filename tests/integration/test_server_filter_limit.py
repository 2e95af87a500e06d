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
