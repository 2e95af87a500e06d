"""Issue 42, SciFact routes: RM3-style pseudo-relevance feedback for the keyword leg, chosen on the train split.

Reuses an index of ``bench_chunk_context.py`` (``benchmarks/.cache/context/<set>-<tag>``) and replaces the
keyword leg's search for the run: a first BM25 pass takes the ``fb_docs`` best chunks, each term of theirs gets
``p(t|R) = Σ_D w_D · tf(t, D) / |D|`` (``w_D``: the chunk's share of the first pass's scores; terms in more than
``max_df`` of the chunks left out), the ``fb_terms`` best are normalised and mixed with the query's own term
distribution, ``λ · p(t|Q) + (1 − λ) · p(t|R)``, and that weighted query is scored by BM25 again.  The second pass's
scores are rescaled to the original query's attainable score (``(k1 + 1) Σ qtf · idf``), so the adaptive fusion's
keyword evidence stays on its scale.

    python benchmarks/explore_query_expansion.py scifact --split train --modes keyword,hybrid \
        --grid "10:10:0.5,10:20:0.5,5:10:0.7"      # fb_docs:fb_terms:lambda, "none" = the library's leg
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from finderledge import FinderLedge
from finderledge.evaluation import evaluate_modes, load_beir
from finderledge.keyword_store.scoring import doc_freq, idf, score_query
from finderledge.ranking.finder import Finder

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_chunk_context import CACHE, dataset_dir

OUT = HERE / "results" / "query_expansion.json"


class Rm3:
    """A keyword leg search with RM3 feedback over one open FinderLedge's BM25 store and ledger."""

    def __init__(self, fl: FinderLedge, fb_docs: int, fb_terms: int, lam: float, max_df: float = 0.1) -> None:
        self.fl, self.fb_docs, self.fb_terms, self.lam, self.max_df = fl, fb_docs, fb_terms, lam, max_df
        self.store: Any = fl.replica.keyword.handle
        self.tokens: dict[str, Counter[str]] = {}
        self.dfs: dict[str, int] = {}

    def df(self, term: str) -> int:
        got = self.dfs.get(term)
        if got is None:
            corpus = self.store._corpus
            got = self.dfs[term] = doc_freq(corpus.segments, corpus.buffer, term)
        return got

    def counts(self, ids: list[str]) -> list[Counter[str]]:
        missing = [i for i in ids if i not in self.tokens]
        if missing:
            for c in self.fl.ledger.get_chunks(missing):
                self.tokens[c.id] = Counter(self.store.tokenizer(c.content))
        return [self.tokens.get(i, Counter()) for i in ids]

    def expanded(self, query: str) -> tuple[dict[str, float], float]:
        """The weighted query and the factor that puts its scores on the original query's scale."""
        store = self.store
        corpus = store._corpus
        qcounts = Counter(store.tokenizer(query))
        n_docs = corpus.stats[0]
        first = store.search(query, self.fb_docs)
        if not first or not qcounts:
            return dict(qcounts), 1.0
        total = sum(s for _, s in first) or 1.0
        rel: Counter[str] = Counter()
        for (_, s), counts in zip(first, self.counts([i for i, _ in first])):
            length = sum(counts.values()) or 1
            for t, tf in counts.items():
                rel[t] += (s / total) * tf / length
        limit = self.max_df * n_docs
        picked = [(t, p) for t, p in rel.most_common() if self.df(t) <= limit][: self.fb_terms]
        mass = sum(p for _, p in picked) or 1.0
        qlen = sum(qcounts.values())
        weights: dict[str, float] = {t: self.lam * c / qlen for t, c in qcounts.items()}
        for t, p in picked:
            weights[t] = weights.get(t, 0.0) + (1.0 - self.lam) * p / mass
        weights = {t: w * qlen for t, w in weights.items()}  # original terms near their own counts

        def ceiling(q: Mapping[str, float]) -> float:
            return sum(w * idf(n_docs, self.df(t)) for t, w in q.items() if self.df(t))

        orig, new = ceiling(qcounts), ceiling(weights)
        return weights, (orig / new if new > 0 else 1.0)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        weights, scale = self.expanded(query)
        store = self.store
        with store._lock:
            scope = store._scope(None)
            hits = score_query(
                store._corpus.segments,
                store._corpus.buffer,
                weights,
                scope,
                (store.k1, store.b),
                k,  # type: ignore[arg-type]
            )
        return [(i, s * scale) for i, s in hits]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--split", default="train")
    parser.add_argument("--index", default="off", help="cached index tag: off, on, off-fake, ...")
    parser.add_argument("--modes", default="keyword,hybrid")
    parser.add_argument(
        "--bm25", default="", help="k1:b to set on the open keyword store (default: the index's)"
    )
    parser.add_argument(
        "--set", default="", help="other settings for the run, name=value;... (e.g. vector_weight=1)"
    )
    parser.add_argument(
        "--grid", default="none,10:10:0.5", help="fb_docs:fb_terms:lambda[:max_df], comma-separated"
    )
    args = parser.parse_args(argv)
    data = load_beir(dataset_dir(args.dataset), args.split)
    results = json.loads(OUT.read_text()) if OUT.is_file() else []
    original = Finder._keyword_leg
    for spec in args.grid.split(","):
        extra: dict[str, Any] = {}
        if args.index.endswith("-fake"):
            from langchain_core.embeddings import DeterministicFakeEmbedding

            extra["embedding"] = DeterministicFakeEmbedding(size=16)
        if (
            args.bm25
        ):  # query-time settings: the keyword store and the fusion's attainable score both read them
            k1, b = args.bm25.split(":")
            extra["bm25_k1"], extra["bm25_b"] = float(k1), float(b)
        for pair in filter(None, args.set.split(";")):
            name, _, value = pair.partition("=")
            extra[name] = float(value)
        fl = FinderLedge(CACHE / f"{args.dataset}-{args.index}", show_progress=False, env_file=None, **extra)
        if spec != "none":
            parts = spec.split(":")
            rm3 = Rm3(
                fl, int(parts[0]), int(parts[1]), float(parts[2]), float(parts[3]) if len(parts) > 3 else 0.1
            )

            def leg(self: Finder, query: str, depth: int, flt: Any, timings: Any, rm3: Rm3 = rm3) -> Any:
                start = time.perf_counter()
                hits = rm3.search(query, depth)
                timings.keyword = time.perf_counter() - start
                return hits

            Finder._keyword_leg = leg  # type: ignore[method-assign]
        try:
            reports = evaluate_modes(fl, data, args.modes.split(","), k=100, show_progress=False)
        finally:
            Finder._keyword_leg = original  # type: ignore[method-assign]
            fl.close()
        for report in reports:
            row = {
                "dataset": args.dataset,
                "split": args.split,
                "index": args.index,
                "rm3": spec,
                "bm25": args.bm25 or "index",
                "settings": args.set or "default",
                "mode": report.mode,
                "queries": len(data.queries),
                "nDCG@10": round(report.metrics["nDCG@10"], 4),
                "p50_ms": round(report.latency_ms["p50"], 1),
            }
            print(json.dumps(row), flush=True)
            key = tuple(row.get(f) for f in ("dataset", "split", "index", "rm3", "bm25", "settings", "mode"))
            results = [
                r
                for r in results
                if tuple(
                    r.get(f, {"bm25": "index", "settings": "default"}.get(f))
                    for f in ("dataset", "split", "index", "rm3", "bm25", "settings", "mode")
                )
                != key
            ]
            results.append(row)
        OUT.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
