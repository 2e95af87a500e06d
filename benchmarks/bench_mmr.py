"""What MMR costs and buys: ``search(mmr=True)`` against the plain hybrid search on a scifact subset.

Indexes the first ``--docs`` corpus documents with the default model (in memory), keeps the test queries
whose judged documents are all in the subset, and reports for k=10: recall and nDCG (what diversity costs in
relevance; whole documents, ``return_parents=True``), the mean pairwise cosine among the results (how much they repeat each other), and the median
search time.

    python benchmarks/bench_mmr.py [--docs 1000] [--lambda-mult 0.5] [--fetch-k 20]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def _load(folder: Path, limit: int) -> tuple[list[dict], dict[str, str], dict[str, set[str]]]:
    corpus = [json.loads(line) for _, line in zip(range(limit), (folder / "corpus.jsonl").open())]
    ids = {d["_id"] for d in corpus}
    queries = {q["_id"]: q["text"] for q in map(json.loads, (folder / "queries.jsonl").open())}
    qrels: dict[str, set[str]] = {}
    for line in list((folder / "qrels" / "test.tsv").open())[1:]:
        qid, did, score = line.split()
        if int(score) > 0:
            qrels.setdefault(qid, set()).add(did)
    kept = {q: g for q, g in qrels.items() if g <= ids}
    return corpus, {q: queries[q] for q in kept}, kept


def _ndcg(ranked: list[str], gold: set[str], k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--fetch-k", type=int, default=20)
    parser.add_argument("--lambda-mult", type=float, default=0.5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "mmr_scifact.json"))
    args = parser.parse_args()
    from finderledge import FinderLedge

    corpus, queries, qrels = _load(DATA, args.docs)
    fl = FinderLedge(vector_store="faiss", show_progress=False)
    started = time.perf_counter()
    fl.add_texts(
        [f"{d.get('title', '')}\n{d['text']}" for d in corpus],
        [{"source": d["_id"]} for d in corpus],
        ids=[d["_id"] for d in corpus],
    )
    build = time.perf_counter() - started
    runs: dict[str, dict[str, list[float]]] = {}
    for name, options in (
        ("plain", {}),
        ("mmr", {"mmr": True, "fetch_k": args.fetch_k, "lambda_mult": args.lambda_mult}),
    ):
        figures: dict[str, list[float]] = {"recall": [], "ndcg": [], "redundancy": [], "seconds": []}
        for qid, text in queries.items():
            t0 = time.perf_counter()
            results = fl.search(text, k=args.k, return_parents=True, **options)
            figures["seconds"].append(time.perf_counter() - t0)
            ranked = [r.parent_id for r in results]
            figures["recall"].append(len(set(ranked) & qrels[qid]) / len(qrels[qid]))
            figures["ndcg"].append(_ndcg(ranked, qrels[qid], args.k))
            vectors = np.array(fl.embeddings.embed_documents([r.content for r in results]))
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            sims = vectors @ vectors.T
            n = len(vectors)
            figures["redundancy"].append(float((sims.sum() - n) / (n * (n - 1))) if n > 1 else 0.0)
        runs[name] = figures
    summary = {
        "docs": len(corpus),
        "queries": len(queries),
        "k": args.k,
        "fetch_k": args.fetch_k,
        "lambda_mult": args.lambda_mult,
        "build_seconds": round(build, 1),
        **{
            name: {
                "recall@k": round(statistics.mean(f["recall"]), 4),
                "ndcg@k": round(statistics.mean(f["ndcg"]), 4),
                "mean_pairwise_cosine": round(statistics.mean(f["redundancy"]), 4),
                "median_ms": round(1000 * statistics.median(f["seconds"]), 1),
            }
            for name, f in runs.items()
        },
    }
    print(json.dumps(summary, indent=2))
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    fl.close()


if __name__ == "__main__":
    main()
