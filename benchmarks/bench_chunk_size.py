"""Does a larger default chunk size lose quality? (issue 29, "Embedding cost in real use").

With ``chunk_size=1000`` weighted characters a scifact abstract (median 1,427) becomes 2.8 texts to embed
where a hand-wired peer embeds one.  A document no longer than ``chunk_size`` is already kept whole, so a
larger ``chunk_size`` is also "no split of short documents".  For each dataset and chunk size this script
counts the texts the splitter makes over the whole corpus, then runs ``finderledge.evaluation.evaluate``
(``--modes``, default hybrid; in memory, FAISS) on a seeded subset: the sampled queries, their relevant documents, random others
(the subset is written as a BEIR folder under a temporary directory; datasets are never copied into the repo).
Per-query nDCG@10 gives a paired difference (per mode) against the first chunk size, with a bootstrap 95 % interval.

    python benchmarks/bench_chunk_size.py --datasets scifact --sizes 1000,2000 --documents 1000 --queries 300
    python benchmarks/bench_chunk_size.py --datasets jaquad-dev --sizes 1000,2000 --documents 300 --queries 150
    python benchmarks/bench_chunk_size.py --counts-only        # texts per document, every dataset, no model

Each size's overlap is a tenth of it (the default's ratio).  Results merge into
``benchmarks/results/chunk_size.json`` (one entry per dataset and size).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's helpers
from bench_embedding_backends import load_average, now, paired_difference, subset

from finderledge.evaluation import BeirDataset, evaluate, load_beir, ndcg_at_k
from finderledge.ingest.splitter import DocumentSplitter, weighted_length

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1] / "shared" / "datasets"
OUT = HERE / "results" / "chunk_size.json"
DATASETS = ("scifact", "msmarco-5k", "jaquad-dev")
MODELS = {"jaquad-dev": "multilingual"}  # Japanese: the multilingual model; the others the default model


def document_texts(data: BeirDataset) -> list[str]:
    """Each corpus document as ``index_beir`` adds it: ``title``, blank line, ``text``."""
    return [f"{title}\n\n{text}".strip() for title, text in data.corpus.values()]


def counts(data: BeirDataset, sizes: Sequence[int]) -> dict[str, Any]:
    """Texts the default splitter makes per document at each size, and the documents' weighted lengths."""
    texts = document_texts(data)
    lengths = sorted(weighted_length(t) for t in texts)
    row: dict[str, Any] = {
        "documents": len(texts),
        "weighted_length_median": lengths[len(lengths) // 2],
        "weighted_length_p90": lengths[int(0.9 * len(lengths))],
    }
    for size in sizes:
        splitter = DocumentSplitter(size, size // 10, "weighted")
        n = sum(len(splitter.split_text(t)) for t in texts)
        row[str(size)] = {"texts": n, "texts_per_document": round(n / len(texts), 3)}
    return row


def write_beir(data: BeirDataset, folder: Path) -> Path:
    """``data`` as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)."""
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({"_id": did, "title": title, "text": text}, ensure_ascii=False) + "\n"
            for did, (title, text) in data.corpus.items()
        )
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n"
            for qid, text in data.queries.items()
        )
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, grades in data.qrels.items():
            fh.writelines(f"{qid}\t{did}\t{grade}\n" for did, grade in grades.items())
    return folder


def quality(
    data: BeirDataset, size: int, model: str | None, modes: Sequence[str] = ("hybrid",)
) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """Metrics per mode of ``data`` indexed at ``size`` (overlap size/10), and each mode's per-query nDCG@10."""
    load, start = load_average(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chunk-size-") as tmp:
        folder = write_beir(data, Path(tmp) / data.name)
        settings: dict[str, Any] = {"chunk_size": size, "chunk_overlap": size // 10}
        if model:
            settings["embedding"] = model
        report = evaluate(folder, modes=tuple(modes), vector_store="faiss", **settings)
    per_query = {
        m.mode: {q: ndcg_at_k(ranked, data.qrels[q]) for q, ranked in m.run.items()} for m in report.modes
    }
    row = {
        "documents": report.documents,
        "queries": report.queries,
        "chunks": report.chunks,
        "embedding": model or "default (onnx-int8)",
        "metrics": {m.mode: {k: round(v, 4) for k, v in m.metrics.items()} for m in report.modes},
        "index_seconds": round(report.index_seconds or 0.0, 1),
        "embedding_seconds": round(report.embedding_seconds or 0.0, 1),
        "seconds": round(time.perf_counter() - start, 1),
        "load_before": load,
        "load_after": load_average(),
        "at": now(),
    }
    return row, per_query


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument(
        "--sizes", default="1000,1500,2000", help="chunk sizes (weighted); the first is the base"
    )
    parser.add_argument("--documents", type=int, default=1000, help="subset: corpus documents")
    parser.add_argument("--queries", type=int, default=300, help="subset: queries")
    parser.add_argument(
        "--modes", default="hybrid", help="search modes; the first gives the paired difference"
    )
    parser.add_argument("--counts-only", action="store_true", help="texts per document only (no model)")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    for name in args.datasets.split(","):
        full = load_beir(args.root / name)
        entry = results.setdefault(name, {})
        entry["counts_full_corpus"] = counts(full, sizes)
        print(name, json.dumps(entry["counts_full_corpus"]), flush=True)
        if args.counts_only:
            continue
        small = subset(full, args.documents, args.queries)
        runs: dict[int, dict[str, dict[str, float]]] = {}
        for size in sizes:
            row, runs[size] = quality(small, size, MODELS.get(name), args.modes.split(","))
            if size != sizes[0]:
                row["paired_ndcg10_vs_" + str(sizes[0])] = {
                    mode: paired_difference(scores, runs[sizes[0]][mode])
                    for mode, scores in runs[size].items()
                }
            entry.setdefault("quality", {})[str(size)] = row
            print(name, size, json.dumps(row), flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
