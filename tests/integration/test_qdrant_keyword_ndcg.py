"""``keyword_index="engine"`` with ``vector_store="qdrant"`` (BM25 as sparse vectors) against the local BM25 on
BEIR scifact and jaquad-dev, through FinderLedge: the same nDCG@10 (to 0.001) and the same top-10 on >= 95 % of
queries.  Each directory is loaded the same way, in batches (so the Qdrant leg's average length drifts and is
re-weighted as in use); fake vectors: the keyword leg never reads them."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from paths import dataset

from finderledge import FinderLedge
from finderledge.tokenizer import AutoTokenizer

pytest.importorskip("qdrant_client")  # finderledge[qdrant]

QUERIES = 300  # per dataset (scifact's test split has 300)


def _load(folder: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    corpus = {}
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        corpus[row["_id"]] = (row.get("title", "") + "\n" + row["text"]).strip()
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["_id"] in qrels and len(queries) < QUERIES:
            queries[row["_id"]] = row["text"]
    return corpus, queries, qrels


def _ndcg(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sum(r / math.log2(i + 2) for i, r in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def _open(directory: Path, mode: str, fake: Any, tok: Any) -> FinderLedge:
    return FinderLedge(
        directory,
        vector_store="qdrant",
        embedding=fake,
        keyword_index=mode,
        keyword_tokenizer=tok,
        chunk_size=100_000,  # one chunk a document: nDCG over documents
        chunk_overlap=0,
        fusion="rrf",
        show_progress=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("name", ["scifact", "jaquad-dev"])
def test_qdrant_engine_and_local_bm25_have_the_same_ndcg(
    name: str, tmp_path: Path, fake_embeddings: Any
) -> None:
    corpus, queries, qrels = _load(dataset(name))
    tok = AutoTokenizer(japanese="always") if name == "jaquad-dev" else None
    legs = {mode: _open(tmp_path / mode, mode, fake_embeddings, tok) for mode in ("engine", "local")}
    try:
        ids = list(corpus)
        for fl in legs.values():
            for at in range(0, len(ids), 1000):
                batch = ids[at : at + 1000]
                fl.add_texts([corpus[i] for i in batch], ids=batch)
        ndcg: dict[str, list[float]] = {"engine": [], "local": []}
        same = 0
        for qid, text in queries.items():
            tops = {}
            for mode, fl in legs.items():
                hits = [h.id for h in fl.search(text, k=10, search_mode="keyword")]
                tops[mode] = hits
                ndcg[mode].append(_ndcg([h.rsplit("-", 1)[0] for h in hits], qrels[qid]))
            same += tops["engine"] == tops["local"]
        figures = {mode: statistics.fmean(v) for mode, v in ndcg.items()}
        print(f"{name}: nDCG@10 {figures}, top-10 equal on {same}/{len(queries)}")
        assert abs(figures["engine"] - figures["local"]) <= 0.001, figures
        assert same / len(queries) >= 0.95
        assert figures["local"] > 0.3  # a real ranking, not two empty ones
    finally:
        for fl in legs.values():
            fl.close()
