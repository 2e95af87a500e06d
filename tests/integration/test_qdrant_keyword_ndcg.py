"""``keyword_index="engine"`` with ``vector_store="qdrant"`` (BM25 as sparse vectors) against the local BM25 on
BEIR scifact and jaquad-dev, through FinderLedge: the same nDCG@10 (to 0.001) and the same top-10 on >= 95 % of
queries.  Each directory is loaded the same way, in batches (so the Qdrant leg's average length drifts and is
re-weighted as in use); fake vectors: the keyword leg never reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from keyword_ndcg import ONE_CHUNK_A_DOCUMENT, assert_engine_ranks_as_local, load_beir
from paths import dataset

from finderledge import FinderLedge
from finderledge.tokenizer import AutoTokenizer

pytest.importorskip("qdrant_client")  # finderledge[qdrant]


def _open(directory: Path, mode: str, fake: Any, tok: Any) -> FinderLedge:
    return FinderLedge(
        directory,
        vector_store="qdrant",
        embedding=fake,
        keyword_index=mode,
        keyword_tokenizer=tok,
        **ONE_CHUNK_A_DOCUMENT,
    )


@pytest.mark.slow
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("name", ["scifact", "jaquad-dev"])
def test_qdrant_engine_and_local_bm25_have_the_same_ndcg(
    name: str, tmp_path: Path, fake_embeddings: Any
) -> None:
    corpus, queries, qrels = load_beir(dataset(name))
    tok = AutoTokenizer(japanese="always") if name == "jaquad-dev" else None
    legs = {mode: _open(tmp_path / mode, mode, fake_embeddings, tok) for mode in ("engine", "local")}
    try:
        ids = list(corpus)
        for fl in legs.values():
            for at in range(0, len(ids), 1000):
                batch = ids[at : at + 1000]
                fl.add_texts([corpus[i] for i in batch], ids=batch)
        assert_engine_ranks_as_local(name, legs, queries, qrels)
    finally:
        for fl in legs.values():
            fl.close()
