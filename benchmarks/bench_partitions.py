"""Partitions as the fast path: hybrid search latency inside one tenant of many vs. an index holding that tenant only.

Builds (in memory, FAISS) one index of ``--tenants`` x ``--docs`` documents with ``partition_key="tenant"`` and
one index of ``--docs`` documents (one tenant), then runs the same hybrid queries, each pinned to a tenant
(``scoped({"tenant": t})``), and reports p50/p95 latency of both and their ratio (issue 28 asks p50 <= 2 at
1,000 x 100).  Embeddings are fake (``DeterministicFakeEmbedding``, 384 dimensions): the figure is the cost of
the index and the statistics, not of a model (a real model adds the same query embedding time to both sides).

    python benchmarks/bench_partitions.py --tenants 1000 --docs 100 --queries 300
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge

WORDS = [f"w{i}" for i in range(3000)]


def _texts(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + "." for _ in range(n)]


def _build(tenants: int, docs: int, seed: int, fixed_weights: bool) -> tuple[FinderLedge, float]:
    weights: dict[str, Any] = {"vector_weight": 1.0, "keyword_weight": 1.0} if fixed_weights else {}
    fl = FinderLedge(
        vector_store="faiss",
        embedding=DeterministicFakeEmbedding(size=384),
        partition_key="tenant",
        show_progress=False,
        env_file=None,
        **weights,
    )
    rng = random.Random(seed)
    started = time.perf_counter()
    batch_texts: list[str] = []
    batch_meta: list[dict[str, Any]] = []
    for t in range(tenants):
        batch_texts += _texts(rng, docs)
        batch_meta += [{"tenant": f"t{t}"}] * docs
        if len(batch_texts) >= 5000 or t == tenants - 1:
            fl.add_texts(batch_texts, metadatas=batch_meta)
            batch_texts, batch_meta = [], []
    return fl, time.perf_counter() - started


def _latencies(fl: FinderLedge, tenants: int, queries: list[str], seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for q in queries:
        view = fl.scoped({"tenant": f"t{rng.randrange(tenants)}"})
        started = time.perf_counter()
        view.search(q, search_mode="hybrid", k=10)
        out.append(time.perf_counter() - started)
    return out


def _one_ingest(fl: FinderLedge, tenants: int, seed: int) -> float:
    """Seconds to add one document to one tenant (median of 5)."""
    rng = random.Random(seed)
    took = []
    for i in range(5):
        text = _texts(rng, 1)[0]
        started = time.perf_counter()
        fl.add_texts([text], metadatas=[{"tenant": f"t{rng.randrange(tenants)}"}], ids=[f"extra-{i}"])
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--fixed-weights", action="store_true", help="no calibration (fusion weights 1, 1)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rng = random.Random(7)
    queries = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))) for _ in range(args.queries)]
    result: dict[str, Any] = {"tenants": args.tenants, "docs": args.docs, "queries": args.queries}
    sides = {"one_tenant": 1, "many_tenants": args.tenants}
    built = {name: _build(tenants, args.docs, 1, args.fixed_weights) for name, tenants in sides.items()}
    for name, (fl, _) in built.items():
        for t in range(
            sides[name]
        ):  # warm-up: each tenant searched once (its relevance background is sampled)
            fl.scoped({"tenant": f"t{t}"}).search(queries[t % len(queries)], k=10)
    lat: dict[str, list[float]] = {name: [] for name in sides}
    for i, q in enumerate(queries):  # interleaved, so both sides see the same machine load
        for name, (fl, _) in built.items():
            lat[name] += _latencies(fl, sides[name], [q], 5 + i)
    for name, (fl, seconds) in built.items():
        ordered = sorted(lat[name])
        result[name] = {
            "build_s": round(seconds, 1),
            "p50_ms": round(1000 * statistics.median(ordered), 2),
            "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 2),
            "ingest_one_doc_ms": round(1000 * _one_ingest(fl, sides[name], 9), 1),
        }
        fl.close()
        print(name, result[name], flush=True)
    result["p50_ratio"] = round(result["many_tenants"]["p50_ms"] / result["one_tenant"]["p50_ms"], 2)
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
