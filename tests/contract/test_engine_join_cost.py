"""Joining a Postgres-mode index with ``keyword_index="engine"`` costs the same at any corpus size (issue 43).

A new app server opens an empty local directory over the database and answers its first hybrid search; the
rows PostgreSQL hands it and the statements it sends must not grow with the corpus (no read of every chunk
id, no replica built), and it writes (almost) nothing locally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pg_server import StatementCounter, fresh_schema
from texts import EN_WORDS

from finderledge import FinderLedge
from finderledge.ranking.relevance import SAMPLE_SIZE

WORDS = EN_WORDS[:12]


def _open(directory: Path, url: str, schema: str, fake: Any) -> FinderLedge:
    return FinderLedge(
        directory,
        database_url=url,
        database_schema=schema,
        embedding=fake,
        keyword_index="engine",
        show_progress=False,
        fusion="rrf",
    )


def _fill(directory: Path, url: str, schema: str, fake: Any, chunks: int) -> None:
    writer = _open(directory, url, schema, fake)
    texts = [" ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 3, 5, 7)) + f" n{i}" for i in range(chunks)]
    writer.add_texts(
        texts, [{"tenant": "ab"[i % 2]} for i in range(chunks)], ids=[f"d{i}" for i in range(chunks)]
    )
    writer.close()


def _join(
    directory: Path, url: str, schema: str, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Open on an empty directory and search once (hybrid, with relevance): rows, statements, local bytes."""
    counted = StatementCounter()
    with monkeypatch.context() as patch:
        counted.install(patch)
        fl = _open(directory, url, schema, fake)
        try:
            hits = fl.search("refund invoice ledger", k=10)
            # relevance scores (the background sample) and each hit's text, as a server answers
            assert len(hits) == 10 and all(0.0 <= h.score <= 1.0 and h.document.page_content for h in hits)
        finally:
            fl.close()
    local = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return {"rows": counted.rows, "statements": counted.statements, "local_bytes": local}


@pytest.mark.timeout(600)
def test_joining_reads_a_bounded_sample_whatever_the_corpus_size(
    tmp_path: Path, pg_url: str, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, large = fresh_schema(), fresh_schema()
    _fill(tmp_path / "ws", pg_url, small, fake_embeddings, 2 * SAMPLE_SIZE)
    _fill(tmp_path / "wl", pg_url, large, fake_embeddings, 8 * SAMPLE_SIZE)
    a = _join(tmp_path / "js", pg_url, small, fake_embeddings, monkeypatch)
    b = _join(tmp_path / "jl", pg_url, large, fake_embeddings, monkeypatch)
    # the background sample's seeks and chunks (2 x SAMPLE_SIZE rows), the legs' candidates and postings read
    # to prune: ~1,860 rows at either size, never every id of the large corpus (4,096 rows)
    assert b["rows"] < 6 * SAMPLE_SIZE < 8 * SAMPLE_SIZE, (a, b)
    assert abs(b["rows"] - a["rows"]) <= 50 and abs(b["statements"] - a["statements"]) <= 2, (a, b)
    assert a["local_bytes"] < 1_000_000 and b["local_bytes"] < 1_000_000, (a, b)
