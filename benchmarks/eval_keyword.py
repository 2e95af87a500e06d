"""nDCG@10 of keyword-only retrieval with FinderLedge's KeywordStore on BEIR-format datasets.

One chunk per corpus document (``title``, blank line, ``text``, as ``finderledge.evaluation.index_beir``);
the dataset is read by ``finderledge.evaluation.load_beir`` (queries in both ``queries.jsonl`` and
``qrels/test.tsv`` with a relevant document); graded relevance; nDCG@10 computed by ir_measures.

    python benchmarks/eval_keyword.py                       # scifact, jaquad-dev, msmarco-5k
    python benchmarks/eval_keyword.py --datasets scifact --split-mode C --out results.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import ir_measures
from ir_measures import nDCG

from finderledge.evaluation import load_beir
from finderledge.keyword_store import KeywordStore
from finderledge.tokenizer import AutoTokenizer

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "datasets"
TARGETS = {"scifact": 0.66, "jaquad-dev": 0.90}


def evaluate(folder: Path, tokenizer: AutoTokenizer, k1: float, b: float) -> dict[str, Any]:
    """Index the corpus, run every test query, return nDCG@10 and timings."""
    data = load_beir(folder)
    corpus = {d: f"{title}\n\n{text}".strip() for d, (title, text) in data.corpus.items()}
    queries, qrels = data.queries, data.qrels
    store = KeywordStore(tokenizer=tokenizer, k1=k1, b=b)
    t0 = time.perf_counter()
    store.add(list(corpus), list(corpus.values()))
    t_index = time.perf_counter() - t0
    run: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    for qid, text in queries.items():
        run[qid] = dict(store.search(text, k=100))
    t_query = time.perf_counter() - t0
    ndcg = ir_measures.calc_aggregate([nDCG @ 10], qrels, run)[nDCG @ 10]
    return {
        "dataset": folder.name,
        "docs": len(corpus),
        "queries": len(queries),
        "ndcg@10": round(float(ndcg), 4),
        "index_s": round(t_index, 2),
        "query_ms": round(1000 * t_query / max(len(queries), 1), 3),
        "tokenizer": tokenizer.to_dict(),
        "k1": k1,
        "b": b,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder holding the datasets")
    parser.add_argument("--datasets", nargs="+", default=["scifact", "jaquad-dev", "msmarco-5k"])
    parser.add_argument("--split-mode", choices=["A", "B", "C"], default=None, help="Sudachi split mode")
    parser.add_argument("--japanese", choices=["auto", "always", "never"], default="auto")
    parser.add_argument("--no-stem", action="store_true")
    parser.add_argument("--no-stopwords", action="store_true")
    parser.add_argument("--min-length", type=int, default=1)
    parser.add_argument("--keep-pronouns", action="store_true", help="keep Japanese pronouns/question words")
    parser.add_argument("--k1", type=float, default=0.9)
    parser.add_argument("--b", type=float, default=0.4)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    kwargs: dict[str, Any] = {
        "stem": not args.no_stem,
        "stopwords": not args.no_stopwords,
        "japanese": args.japanese,
        "min_length": args.min_length,
        "drop_pronouns": not args.keep_pronouns,
    }
    if args.split_mode:
        kwargs["split_mode"] = args.split_mode
    tokenizer = AutoTokenizer(**kwargs)
    results = []
    print(
        f"{'dataset':<12} {'docs':>6} {'queries':>7} {'nDCG@10':>8} {'target':>7} {'index s':>8} {'ms/query':>8}"
    )
    for name in args.datasets:
        res = evaluate(args.root / name, tokenizer, args.k1, args.b)
        res["target"] = TARGETS.get(name)
        results.append(res)
        target = f"{res['target']:.2f}" if res["target"] else "-"
        print(
            f"{name:<12} {res['docs']:>6} {res['queries']:>7} {res['ndcg@10']:>8.4f} {target:>7} "
            f"{res['index_s']:>8.2f} {res['query_ms']:>8.3f}",
            flush=True,
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
