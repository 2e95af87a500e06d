"""Issue 42: vector / keyword / hybrid nDCG@10 of each shared set with the default model unnamed and named.

"Unnamed" is FinderLedge's default (no ``embedding`` given: the bundled MiniLM through ONNX int8, the index of
``bench_chunk_context.py``, ``benchmarks/.cache/context/<set>-off``); "named" passes
``embedding="all-MiniLM-L6-v2"`` explicitly (the same weights through sentence-transformers: another model
id, so its own index, ``<set>-named``, embedded again).  Both with the default splitter, on the test split.

    python benchmarks/bench_leg_table.py msmarco-5k --model named
    python benchmarks/bench_leg_table.py scifact --model unnamed
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from finderledge.evaluation import evaluate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_chunk_context import CACHE, dataset_dir

OUT = HERE / "results" / "leg_table.json"
NAMED = "all-MiniLM-L6-v2"  # the bundled MiniLM by its model name (sentence-transformers backend)


def run(name: str, model: str) -> dict[str, Any]:
    """Evaluate one set in the three modes with the default model ``model`` (unnamed or named)."""
    settings: dict[str, Any] = {} if model == "unnamed" else {"embedding": NAMED}
    directory = CACHE / f"{name}-{'off' if model == 'unnamed' else 'named'}"
    report = evaluate(
        dataset_dir(name),
        persist_directory=directory,
        modes=["vector", "keyword", "hybrid"],
        show_progress=False,
        **settings,
    )
    row: dict[str, Any] = {
        "dataset": name,
        "model": model,
        "documents": report.documents,
        "chunks": report.chunks,
    }
    for mode in report.modes:
        row[mode.mode] = round(mode.metrics["nDCG@10"], 4)
    row["better_leg_gap"] = round(row["hybrid"] - max(row["vector"], row["keyword"]), 4)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["scifact", "msmarco-5k", "jaquad-dev"])
    parser.add_argument("--model", choices=["unnamed", "named"], default="unnamed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    results = json.loads(OUT.read_text()) if OUT.is_file() else []
    row = run(args.dataset, args.model)
    print(json.dumps(row), flush=True)
    results = [r for r in results if (r["dataset"], r["model"]) != (row["dataset"], row["model"])] + [row]
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
