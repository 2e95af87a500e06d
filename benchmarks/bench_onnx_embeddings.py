"""ONNX Runtime (int8, fp32) against today's default sentence-transformers fp32, in one interleaved run.

Each round embeds the same N scifact passages with every backend in turn (so machine load hits all of them
alike), then times single-query embedding; figures are medians over rounds, ratios against
sentence-transformers with its default threads.  Cosine agreement is against the sentence-transformers vectors.
``--ndcg`` instead indexes scifact (one chunk per document) and reports nDCG@10 for the given backends.

    python benchmarks/bench_onnx_embeddings.py --passages 200 --rounds 3 --out benchmarks/results/onnx_embeddings.json
    python benchmarks/bench_onnx_embeddings.py --ndcg default    # then --ndcg onnx-int8 (one run each: < 10 min)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from finderledge.embeddings import SentenceTransformerEmbeddings, default_model_path
from finderledge.embeddings.onnx import OnnxEmbeddings

logger = logging.getLogger("bench_onnx_embeddings")
DATASET = Path(__file__).resolve().parents[2] / "shared/datasets/scifact"


def read_passages(dataset: Path, n: int) -> list[str]:
    """The first ``n`` corpus documents as ``title\\n\\ntext`` (as the ingest benchmark writes them)."""
    out: list[str] = []
    with open(dataset / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            out.append(f"{doc.get('title', '')}\n\n{doc.get('text', '')}")
            if len(out) >= n:
                break
    return out


def read_queries(dataset: Path, n: int) -> list[str]:
    with open(dataset / "queries.jsonl", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line, _ in zip(fh, range(n))]


class TorchThreads:
    """sentence-transformers with a fixed torch thread count (torch's setting is global: set before each call)."""

    def __init__(self, model: SentenceTransformerEmbeddings, threads: int | None) -> None:
        import torch

        self.model, self.torch = model, torch
        self.threads = threads or torch.get_num_threads()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.torch.set_num_threads(self.threads)
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.torch.set_num_threads(self.threads)
        return self.model.embed_query(text)


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    """Interleaved rounds: passages/s and query p50 per backend, cosine agreement with sentence-transformers."""
    import torch

    passages, queries = read_passages(args.dataset, args.passages), read_queries(args.dataset, args.queries)
    default_threads = torch.get_num_threads()
    st = SentenceTransformerEmbeddings(default_model_path(), batch_size=64)
    backends: dict[str, Any] = {
        f"st-fp32 (PyTorch default, {default_threads} torch threads)": TorchThreads(st, None),
        "st-fp32 1 thread": TorchThreads(st, 1),
        "onnx-fp32 1 thread": OnnxEmbeddings("fp32", num_threads=1),
        "onnx-fp32 2 threads": OnnxEmbeddings("fp32", num_threads=2),
        "onnx-int8 1 thread": OnnxEmbeddings("int8", num_threads=1),
        "onnx-int8 2 threads": OnnxEmbeddings("int8", num_threads=2),
    }
    baseline = next(iter(backends))
    for model in backends.values():
        model.embed_query("warm-up: load (or export) the model before timing")
    rates: dict[str, list[float]] = {name: [] for name in backends}
    latencies: dict[str, list[float]] = {name: [] for name in backends}
    vectors: dict[str, np.ndarray] = {}
    for rnd in range(args.rounds):
        order = list(backends) if rnd % 2 == 0 else list(reversed(backends))  # no backend always goes first
        for name in order:
            model = backends[name]
            t0 = time.perf_counter()
            out = np.asarray(model.embed_documents(passages))
            rates[name].append(len(passages) / (time.perf_counter() - t0))
            vectors.setdefault(name, out)
            for q in queries:
                t0 = time.perf_counter()
                model.embed_query(q)
                latencies[name].append((time.perf_counter() - t0) * 1000)
            logger.info("round %d %-40s %.1f passages/s", rnd + 1, name, rates[name][-1])
    ref = vectors[baseline]
    rows = []
    for name in backends:
        cos = np.sum(vectors[name] * ref, axis=1)
        rate, p50 = statistics.median(rates[name]), statistics.median(latencies[name])
        rows.append(
            {
                "backend": name,
                "passages_per_s": round(rate, 2),
                "ratio": round(rate / statistics.median(rates[baseline]), 2),
                "query_p50_ms": round(p50, 2),
                "query_p50_ratio": round(p50 / statistics.median(latencies[baseline]), 2),
                "cosine_mean": round(float(cos.mean()), 5),
                "cosine_min": round(float(cos.min()), 5),
                "rounds_passages_per_s": [round(r, 2) for r in rates[name]],
            }
        )
    return {
        "passages": len(passages),
        "queries": len(queries),
        "rounds": args.rounds,
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "rows": rows,
    }


def ndcg(args: argparse.Namespace) -> dict[str, Any]:
    """nDCG@10 on scifact (one chunk per document, in memory) with each backend named in ``--ndcg``."""
    from finderledge.evaluation import evaluate

    out = []
    for embedding in args.ndcg:
        report = evaluate(
            args.dataset,
            modes=args.modes,
            one_chunk=True,
            show_progress=False,
            # "default": the PyTorch MiniLM these figures compare against (the default until ONNX int8)
            embedding="sentence-transformers:all-MiniLM-L6-v2" if embedding == "default" else embedding,
        )
        row: dict[str, Any] = {
            "embedding": embedding,
            "index_seconds": round(report.index_seconds or 0, 1),
            "embedding_seconds": round(report.embedding_seconds or 0, 1),
        }
        for m in report.modes:
            row[f"{m.mode} nDCG@10"] = round(m.metrics["nDCG@10"], 4)
            row[f"{m.mode} query embed p50 ms"] = round(m.embed_ms.get("p50", 0), 2)
        logger.info("%s", row)
        out.append(row)
    return {"dataset": args.dataset.name, "one_chunk": True, "rows": out}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--ndcg", nargs="+", help="backends to evaluate instead: default, onnx-int8, onnx-fp32"
    )
    parser.add_argument("--modes", nargs="+", default=["vector", "hybrid"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("onnxruntime").setLevel(logging.WARNING)
    result = ndcg(args) if args.ndcg else throughput(args)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    logger.info("%s", text)


if __name__ == "__main__":
    main()
