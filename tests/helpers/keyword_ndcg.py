"""The engine keyword legs against the local BM25 on a BEIR dataset: one loader, one nDCG@10, one comparison
(the Postgres and the Qdrant keyword-leg nDCG tests assert the same things through it)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from pathlib import Path

from finderledge import FinderLedge

QUERIES = 300  # per dataset (scifact's test split has 300)
#: how both tests open their directories: one chunk a document (nDCG over documents), no progress bars
ONE_CHUNK_A_DOCUMENT = {"chunk_size": 100_000, "chunk_overlap": 0, "fusion": "rrf", "show_progress": False}


def load_beir(folder: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """A BEIR folder's corpus (title and text), its first :data:`QUERIES` test queries that have judgements, and
    the test judgements."""
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


def assert_engine_ranks_as_local(
    name: str, legs: Mapping[str, FinderLedge], queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> None:
    """The ``"engine"`` and ``"local"`` legs' keyword searches (one chunk a document) have the same nDCG@10 (to
    0.001), the same top-10 on >= 95 % of queries, and a real ranking (local nDCG@10 > 0.3)."""
    ndcg: dict[str, list[float]] = {"engine": [], "local": []}
    same = 0
    for qid, text in queries.items():
        tops = {}
        for mode in ("engine", "local"):
            hits = [h.id for h in legs[mode].search(text, k=10, search_mode="keyword")]
            tops[mode] = hits
            ndcg[mode].append(_ndcg([h.rsplit("-", 1)[0] for h in hits], qrels[qid]))
        same += tops["engine"] == tops["local"]
    figures = {mode: statistics.fmean(v) for mode, v in ndcg.items()}
    print(f"{name}: nDCG@10 {figures}, top-10 equal on {same}/{len(queries)}")
    assert abs(figures["engine"] - figures["local"]) <= 0.001, figures
    assert same / len(queries) >= 0.95
    assert figures["local"] > 0.3  # a real ranking, not two empty ones
