"""``keyword_index="engine"`` against the local BM25 on BEIR scifact and jaquad-dev: the same nDCG@10 (to 0.001)
and the same top-10 on >= 95 % of queries.  One ledger holds the corpus; an engine process and a local-replica
process search it (keyword leg only; fake vectors: the keyword leg never reads them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from keyword_ndcg import ONE_CHUNK_A_DOCUMENT, assert_engine_ranks_as_local, load_beir
from paths import dataset
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.tokenizer import AutoTokenizer


def _open(directory: Path, url: str, schema: str, mode: str, fake: Any, tok: Any) -> FinderLedge:
    return FinderLedge(
        directory,
        database_url=url,
        database_schema=schema,
        embedding=fake,
        keyword_index=mode,
        keyword_tokenizer=tok,
        **ONE_CHUNK_A_DOCUMENT,
    )


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", ["scifact", "jaquad-dev"])
def test_engine_and_local_bm25_have_the_same_ndcg(
    name: str, tmp_path: Path, pg_url: str, fake_embeddings: Any
) -> None:
    corpus, queries, qrels = load_beir(dataset(name))
    tok = AutoTokenizer(japanese="always") if name == "jaquad-dev" else None
    schema = fresh_schema()
    engine = _open(tmp_path / "engine", pg_url, schema, "engine", fake_embeddings, tok)
    ids = list(corpus)
    for at in range(0, len(ids), 2000):
        batch = ids[at : at + 2000]
        engine.add_texts([corpus[i] for i in batch], ids=batch)
    local = _open(tmp_path / "local", pg_url, schema, "local", fake_embeddings, tok)
    try:
        assert_engine_ranks_as_local(name, {"engine": engine, "local": local}, queries, qrels)
    finally:
        local.close()
        engine.close()
