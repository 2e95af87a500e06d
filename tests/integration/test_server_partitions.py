"""The server scores each API-key tenant within its own partition (issue 28: a BM25 side channel between tenants).

Alice's keyword score for a word only she uses fell from 2.23 to 0.99 once Bob uploaded 5 files containing it:
a tenant could test whether other tenants' documents contain a word.  A real ``finderledge serve`` process,
the real model, real uploads."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
from server_process import running_server

from finderledge.server.keys import KeyStore

logger = logging.getLogger(__name__)

ALICE = [
    "Field notes: the quartzite outcrop on the northern ridge was mapped in May.\n",
    "Budget for the survey season: tents, fuel and two field vehicles.\n",
    "Travel policy: book flights three weeks ahead and keep every receipt.\n",
    "Safety briefing: radios are checked every morning before leaving camp.\n",
]
BOB = "Sample {i}: quartzite quartzite grains, quartzite cement, sorted by size.\n"


def _upload(client: httpx.Client, secret: str, name: str, text: str) -> None:
    r = client.post(
        "/api/v1/documents",
        headers={"Authorization": f"Bearer {secret}"},
        files={"file": (name, text.encode(), "text/plain")},
    )
    assert r.status_code == 201, r.text


def _alice_hits(client: httpx.Client, secret: str) -> dict[str, list[tuple[str, float | None, float]]]:
    out = {}
    for mode in ("keyword", "hybrid", "vector"):
        r = client.post(
            "/api/v1/search",
            headers={"Authorization": f"Bearer {secret}"},
            json={"query": "quartzite", "search_mode": mode, "top_k": 10},
        )
        assert r.status_code == 200, r.text
        out[mode] = [
            (h["chunk_id"], h["keyword_score"], h["vector_score"], h["score"]) for h in r.json()["results"]
        ]
    return out


def test_alices_scores_do_not_move_with_bobs_uploads(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    keys = KeyStore(directory / "server")
    alice, bob = keys.create("alice")[1], keys.create("bob")[1]
    with (
        running_server(directory, workers=1, log=tmp_path / "server.log") as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        for i, text in enumerate(ALICE):
            _upload(client, alice, f"alice-{i}.txt", text)
        before = _alice_hits(client, alice)
        for i in range(5):
            _upload(client, bob, f"bob-{i}.txt", BOB.format(i=i))
        after = _alice_hits(client, alice)
    logger.warning(
        "Alice's keyword_score for 'quartzite': %s without Bob's files, %s with them",
        before["keyword"][0][1],
        after["keyword"][0][1],
    )
    assert before["keyword"] and before["keyword"][0][1] > 0
    assert after == before
