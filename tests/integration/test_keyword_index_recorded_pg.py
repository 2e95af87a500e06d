"""Postgres mode records ``keyword_index`` in the database's settings too: a process that opens it without the
setting scores BM25 where the database was built to (``engine``: the postings it keeps), and one that asks for
the other leg gets it (processes may mix) and records it for the next."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.keyword_store import KeywordStore
from finderledge.ledgers.postings import EngineKeywordIndex

TEXTS = ["refund invoice ledger refund", "warehouse shelf invoice storage", "password account backup region"]


def _open(directory: Path, url: str, schema: str, fake: Any, **kw: Any) -> FinderLedge:
    return FinderLedge(
        directory, database_url=url, database_schema=schema, embedding=fake, show_progress=False, **kw
    )


def _recorded(fl: FinderLedge) -> Any:
    return json.loads(fl.ledger.get_info("settings") or "{}").get("keyword_index")


def test_a_process_opening_without_keyword_index_scores_where_the_database_records(
    tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    schema = fresh_schema()
    with _open(tmp_path / "w", pg_url, schema, fake_embeddings, keyword_index="engine") as writer:
        writer.add_texts(TEXTS)
        expected = writer.engine.replica.keyword.handle.search("refund invoice", 10)
        assert _recorded(writer) == "engine"
    with _open(tmp_path / "joining", pg_url, schema, fake_embeddings) as joining:  # no keyword_index given
        assert joining.settings.keyword_index == "engine"
        handle = joining.engine.replica.keyword.handle
        assert isinstance(handle, EngineKeywordIndex)
        assert handle.search("refund invoice", 10) == expected
        assert not (tmp_path / "joining" / "bm25").exists()  # nothing built on this machine
    with _open(tmp_path / "local", pg_url, schema, fake_embeddings, keyword_index="local") as local:
        assert isinstance(local.engine.replica.keyword.handle, KeywordStore)
        assert _recorded(local) == "local"
    with _open(tmp_path / "next", pg_url, schema, fake_embeddings) as following:
        assert following.settings.keyword_index == "local"
        assert isinstance(following.engine.replica.keyword.handle, KeywordStore)
