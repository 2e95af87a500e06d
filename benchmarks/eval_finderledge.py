"""nDCG@10 (and Recall, MRR, latency) of FinderLedge's hybrid, vector and keyword modes on BEIR folders.

Default settings (in-memory, Chroma, offline MiniLM, RRF k=60); ``--one-chunk`` indexes each corpus
document as a single chunk (chunk_size large enough), otherwise the default splitter is used and
chunks map back to their document (first occurrence wins).

    python benchmarks/eval_finderledge.py ../shared/datasets/scifact --one-chunk --out results.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from finderledge import FinderLedge  # noqa: E402
from finderledge.evaluation import evaluate_modes, index_beir, load_beir  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--one-chunk", action="store_true", help="one chunk per corpus document")
    parser.add_argument("--vector-store", default="chroma", choices=["chroma", "faiss"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    for folder in args.datasets:
        data = load_beir(folder)
        options = {"chunk_size": 1_000_000, "chunk_overlap": 0} if args.one_chunk else {}
        t0 = time.perf_counter()
        fl = FinderLedge(vector_store=args.vector_store, show_progress=False, env_file=None, **options)
        load_s = time.perf_counter() - t0
        index_s = index_beir(fl, data)
        counts = fl.count()
        for report in evaluate_modes(fl, data):
            rows.append({"dataset": data.name, "mode": report.mode, **report.metrics,
                         "latency_ms": report.latency_ms, "index_s": index_s, "model_load_s": load_s,
                         "documents": counts["documents"], "chunks": counts["chunks"],
                         "queries": len(data.queries), "vector_store": args.vector_store,
                         "one_chunk": args.one_chunk})
        fl.close()
    print(f"{'dataset':12} {'mode':8} {'nDCG@10':>8} {'R@10':>6} {'R@100':>6} {'MRR@10':>7} {'p50 ms':>7} "
          f"{'index s':>8} {'chunks':>7}")
    for r in rows:
        print(f"{r['dataset']:12} {r['mode']:8} {r['nDCG@10']:8.4f} {r['Recall@10']:6.3f} {r['Recall@100']:6.3f} "
              f"{r['MRR@10']:7.4f} {r['latency_ms']['p50']:7.1f} {r['index_s']:8.1f} {r['chunks']:7d}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
