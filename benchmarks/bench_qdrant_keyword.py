"""The keyword leg in Qdrant (sparse vectors, ``keyword_index="engine"``) against the local BM25 on a BEIR dataset.

Both legs index one chunk per document (``title``, blank line, ``text``) with the same tokenizer, ``k1``/``b``;
the Qdrant one is qdrant-client's local mode in memory (a server computes the same scores), loaded in batches
as FinderLedge's catch-up writes it, so its average length drifts and it re-weights as it would.  Reported:

* nDCG@10 both ways, the share of queries whose top-10 ids are equal, the largest score difference;
* the re-weights the load made (the average length moved more than ``DRIFT`` from the one written);
* what a stale average length costs: every point weighted with ``avgdl * (1 + d)`` for a few ``d``;
* per-query latency both ways (local mode scores in Python: a server is much faster, not measured here).

    python benchmarks/bench_qdrant_keyword.py --out benchmarks/results/qdrant_keyword_scifact.json
    python benchmarks/bench_qdrant_keyword.py --dataset ../shared/datasets/jaquad-dev --japanese always
    python benchmarks/bench_qdrant_keyword.py --quick       # 500 documents, 50 queries
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from finderledge.evaluation import load_beir
from finderledge.keyword_store import KeywordStore
from finderledge.tokenizer import AutoTokenizer
from finderledge.vector_stores.qdrant_keyword import DRIFT, QdrantKeywordIndex

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
STALE = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25)


def ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    """nDCG@10 with graded relevance (the BEIR definition, as ir_measures computes it)."""
    dcg = sum((2 ** rel.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    best = sorted(rel.values(), reverse=True)[:10]
    ideal = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(best))
    return dcg / ideal if ideal else 0.0


def compare(
    local: KeywordStore, engine: QdrantKeywordIndex, queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> dict[str, Any]:
    """nDCG@10 both ways, top-10 equality, the largest relative score difference, per-query latency."""
    n_local, n_engine, same, worst = [], [], 0, 0.0
    t_local, t_engine = [], []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        a = local.search(text, 10)
        t1 = time.perf_counter()
        b = engine.search(text, 10)
        t2 = time.perf_counter()
        t_local.append(t1 - t0)
        t_engine.append(t2 - t1)
        n_local.append(ndcg10([i for i, _ in a], qrels[qid]))
        n_engine.append(ndcg10([i for i, _ in b], qrels[qid]))
        same += [i for i, _ in a] == [i for i, _ in b]
        for (_, x), (_, y) in zip(a, b):
            worst = max(worst, abs(x - y) / max(abs(x), 1e-12))
    return {
        "ndcg@10_local": round(statistics.fmean(n_local), 4),
        "ndcg@10_engine": round(statistics.fmean(n_engine), 4),
        "ndcg_diff": round(abs(statistics.fmean(n_local) - statistics.fmean(n_engine)), 5),
        "top10_equal": same,
        "queries": len(queries),
        "top10_equal_share": round(same / max(len(queries), 1), 4),
        "max_rel_score_diff": worst,
        "p50_ms_local": round(1000 * statistics.median(t_local), 3),
        "p50_ms_engine": round(1000 * statistics.median(t_engine), 3),
    }


def run(
    folder: Path,
    docs: int | None,
    n_queries: int | None,
    batch: int,
    tokenizer: AutoTokenizer,
    stale: tuple[float, ...] = STALE,
) -> dict[str, Any]:
    data = load_beir(folder)
    corpus = {d: f"{title}\n\n{text}".strip() for d, (title, text) in data.corpus.items()}
    ids = list(corpus)[:docs] if docs else list(corpus)
    keep = set(ids)
    qrels = {q: r for q, r in data.qrels.items() if docs is None or any(d in keep for d in r)}
    queries = {q: t for q, t in data.queries.items() if q in qrels}
    if n_queries:
        queries = dict(list(queries.items())[:n_queries])
    local = KeywordStore(tokenizer=tokenizer)
    local.add(ids, [corpus[i] for i in ids])
    engine = QdrantKeywordIndex(tokenizer=tokenizer)
    t0 = time.perf_counter()
    for at in range(0, len(ids), batch):  # as a catch-up writes it: the first batch fixes avgdl
        part = ids[at : at + batch]
        engine.add(part, [corpus[i] for i in part])
    load_s = time.perf_counter() - t0
    live = engine.meta["total_len"] / engine.meta["n_docs"]
    out: dict[str, Any] = {
        "dataset": folder.name,
        "docs": len(ids),
        "batch": batch,
        "drift_limit": DRIFT,
        "reweights_during_load": engine.reweights,
        "load_s": round(load_s, 1),
        "avgdl_live": round(live, 3),
        "avgdl_written": round(float(engine.meta["avgdl"]), 3),
        "as_loaded": compare(local, engine, queries, qrels),
        "stale_avgdl": {},
    }
    print(json.dumps({k: v for k, v in out.items() if k != "stale_avgdl"}, indent=1), flush=True)
    for d in stale:
        engine.reweight(avgdl=live * (1 + d))
        res = compare(local, engine, queries, qrels)
        out["stale_avgdl"][str(d)] = res
        print(f"avgdl off by {d:+.1%}: {res}", flush=True)
    engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", type=Path, default=DEFAULT)
    parser.add_argument("--docs", type=int, default=None, help="the first N documents only")
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--batch", type=int, default=1000, help="documents per write while loading")
    parser.add_argument("--japanese", choices=["auto", "always", "never"], default="auto")
    parser.add_argument("--quick", action="store_true", help="500 documents, 50 queries")
    parser.add_argument(
        "--stale", type=float, nargs="*", default=list(STALE), help="relative errors of avgdl to weight with"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    docs, queries = (500, 50) if args.quick else (args.docs, args.queries)
    result = run(
        args.dataset, docs, queries, args.batch, AutoTokenizer(japanese=args.japanese), tuple(args.stale)
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
