"""The engine keyword legs against the local BM25 on a BEIR dataset: one loader, one nDCG@10, one comparison
(the Postgres and the Qdrant keyword-leg nDCG tests assert the same things through it)."""

from __future__ import annotations

import json
import math
import multiprocessing
import statistics
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

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


def keyword_tops(fl: FinderLedge, texts: list[str]) -> list[list[str]]:
    """The chunk ids of each text's top-10 keyword search."""
    return [[h.id for h in fl.search(text, k=10, search_mode="keyword")] for text in texts]


def keyword_tops_in_processes(
    directories: list[Path], texts: list[str], embedding: Any, *, japanese: bool = False, **settings: Any
) -> list[list[str]]:
    """:func:`keyword_tops` split over one fresh process per directory (copies of one closed index, as
    qdrant-client's local mode serves one process a folder), in query order: a leg whose engine scores in
    Python (Qdrant's local mode) is then timed by the cores, not one.  ``embedding`` (picklable: the test's
    fake) and ``settings`` go to ``FinderLedge``; ``japanese=True`` gives it Sudachi's tokenizer."""
    share = -(-len(texts) // len(directories))
    parts = [texts[at : at + share] for at in range(0, len(texts), share)]
    context = multiprocessing.get_context("spawn")  # the test process has threads: no fork
    with ProcessPoolExecutor(max_workers=len(parts), mp_context=context) as pool:
        done = pool.map(
            partial(_tops_in, embedding=embedding, japanese=japanese, settings=settings), directories, parts
        )
        return [top for part in done for top in part]


def _tops_in(
    directory: Path, texts: list[str], *, embedding: Any, japanese: bool, settings: dict[str, Any]
) -> list[list[str]]:
    from finderledge.tokenizer import AutoTokenizer

    tok = AutoTokenizer(japanese="always") if japanese else None
    fl = FinderLedge(directory, embedding=embedding, keyword_tokenizer=tok, **settings)
    try:
        return keyword_tops(fl, texts)
    finally:
        fl.close()


def assert_engine_ranks_as_local(
    name: str, legs: Mapping[str, FinderLedge], queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> None:
    """The ``"engine"`` and ``"local"`` legs' keyword searches (one chunk a document) rank alike: see
    :func:`assert_same_ranking`."""
    texts = list(queries.values())
    assert_same_ranking(
        name, {mode: keyword_tops(legs[mode], texts) for mode in ("engine", "local")}, queries, qrels
    )


def assert_same_ranking(
    name: str, tops: Mapping[str, list[list[str]]], queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> None:
    """The ``"engine"`` and ``"local"`` top-10 lists (one per query, in ``queries``' order; one chunk a
    document) have the same nDCG@10 (to 0.001), are equal on >= 95 % of queries, and rank for real (local
    nDCG@10 > 0.3)."""
    ndcg: dict[str, list[float]] = {"engine": [], "local": []}
    for mode in ndcg:
        assert len(tops[mode]) == len(queries), (mode, len(tops[mode]))
        ndcg[mode] = [
            _ndcg([h.rsplit("-", 1)[0] for h in hits], qrels[qid]) for qid, hits in zip(queries, tops[mode])
        ]
    same = sum(e == loc for e, loc in zip(tops["engine"], tops["local"]))
    figures = {mode: statistics.fmean(v) for mode, v in ndcg.items()}
    print(f"{name}: nDCG@10 {figures}, top-10 equal on {same}/{len(queries)}")
    assert abs(figures["engine"] - figures["local"]) <= 0.001, figures
    assert same / len(queries) >= 0.95
    assert figures["local"] > 0.3  # a real ranking, not two empty ones
