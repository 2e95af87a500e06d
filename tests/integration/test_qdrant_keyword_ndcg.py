"""``keyword_index="engine"`` with ``vector_store="qdrant"`` (BM25 as sparse vectors) against the local BM25 on
BEIR scifact and jaquad-dev, through FinderLedge: the same nDCG@10 (to 0.001) and the same top-10 on >= 95 % of
queries.  Each directory is loaded the same way, in batches (so the Qdrant leg's average length drifts and is
re-weighted as in use); fake vectors: the keyword leg never reads them, so the local leg's directory keeps them
in FAISS.

qdrant-client's local mode scores a sparse query against every point in Python (~0.35 s a scifact query on an
idle core): the Qdrant leg's 300 queries run in two fresh processes, each on its own copy of the closed
directory (local mode serves one process a folder), so the test takes both cores (CI: ~250 s for scifact
on one)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from keyword_ndcg import (
    ONE_CHUNK_A_DOCUMENT,
    assert_same_ranking,
    keyword_tops,
    keyword_tops_in_processes,
    load_beir,
)
from paths import dataset

from finderledge import FinderLedge
from finderledge.tokenizer import AutoTokenizer

pytest.importorskip("qdrant_client")  # finderledge[qdrant]

WORKERS = 2
ENGINE = {"vector_store": "qdrant", "keyword_index": "engine", **ONE_CHUNK_A_DOCUMENT}
LOCAL = {"vector_store": "faiss", "keyword_index": "local", **ONE_CHUNK_A_DOCUMENT}


@pytest.mark.slow
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("name", ["scifact", "jaquad-dev"])
def test_qdrant_engine_and_local_bm25_have_the_same_ndcg(
    name: str, tmp_path: Path, fake_embeddings: Any
) -> None:
    corpus, queries, qrels = load_beir(dataset(name))
    japanese = name == "jaquad-dev"
    tok = AutoTokenizer(japanese="always") if japanese else None
    settings = {"engine": ENGINE, "local": LOCAL}
    legs = {
        mode: FinderLedge(tmp_path / mode, embedding=fake_embeddings, keyword_tokenizer=tok, **kwargs)
        for mode, kwargs in settings.items()
    }
    try:
        ids = list(corpus)
        for fl in legs.values():
            for at in range(0, len(ids), 1000):
                batch = ids[at : at + 1000]
                fl.add_texts([corpus[i] for i in batch], ids=batch)
        legs.pop("engine").close()
        texts = list(queries.values())
        copies = [tmp_path / "engine"] + [
            Path(shutil.copytree(tmp_path / "engine", tmp_path / f"engine-{n}")) for n in range(1, WORKERS)
        ]
        tops = {
            "engine": keyword_tops_in_processes(copies, texts, fake_embeddings, japanese=japanese, **ENGINE),
            "local": keyword_tops(legs["local"], texts),
        }
        assert_same_ranking(name, tops, queries, qrels)
    finally:
        for fl in legs.values():
            fl.close()
