"""Issue 42: nDCG@10 of each search mode with and without contextual chunk prefixes (``chunk_context``).

Each shared BEIR set is indexed with the default splitter into ``benchmarks/.cache/context/<set>-<off|on>``
(reused when it exists, so a second run only searches), then evaluated in the three modes with
:func:`finderledge.evaluation.evaluate` — the same code as ``finderledge eval``.  The ``on`` index is seeded with
the vectors of the ``off`` one (same model): a chunk whose embedded text is unchanged (a first chunk, which
already starts with its title; every chunk of an untitled corpus) is not embedded twice.

``--model fake`` indexes with a deterministic fake model (no model cost): only the keyword leg's figures mean
anything then, which is what it is for (the BM25 side of the prefix, on a machine without time to embed).

    python benchmarks/bench_chunk_context.py scifact                   # default model, off and on
    python benchmarks/bench_chunk_context.py scifact --model fake --modes keyword
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
from pathlib import Path
from typing import Any

from finderledge import FinderLedge
from finderledge.evaluation import evaluate

HERE = Path(__file__).resolve().parent
DATASETS = HERE.parent.parent / "shared" / "datasets"
CACHE = HERE / ".cache" / "context"
OUT = HERE / "results" / "chunk_context.json"
logger = logging.getLogger("bench_chunk_context")


def dataset_dir(name: str) -> Path:
    """A shared set, from the worktree layout (``../shared/datasets``) or the main checkout's."""
    for root in (DATASETS, Path("/work/wt/shared/datasets"), HERE.parent / ".." / "shared" / "datasets"):
        if (root / name).is_dir():
            return root / name
    raise SystemExit(f"dataset {name} not found under ../shared/datasets")


def seed(target: Path, source: Path) -> int:
    """Copy ``source``'s chunk vectors into ``target``'s embedding cache (created empty first); returns how many."""
    src = source / "ledger.sqlite3"
    if not src.is_file():
        return 0
    FinderLedge(target, show_progress=False, env_file=None, chunk_context=True).close()
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as a:
        model = a.execute("SELECT value FROM info WHERE key='embedding_model_id'").fetchone()[0]
        rows = a.execute("SELECT text_hash, embedding FROM chunks WHERE embedding IS NOT NULL").fetchall()
    rows = [(model, h.hex() if isinstance(h, bytes) else h, v) for h, v in rows]
    with sqlite3.connect(target / "ledger.sqlite3") as b:
        b.executemany(
            "INSERT OR IGNORE INTO embedding_cache(model, text_hash, vector) VALUES (?, ?, ?)", rows
        )
    return len(rows)


def run(name: str, model: str, modes: list[str], context: bool, fusion: str | None) -> dict[str, Any]:
    """Evaluate one set with chunk_context ``context``; the index is built once per model and setting."""
    tag = f"{name}-{'on' if context else 'off'}" + ("-fake" if model == "fake" else "")
    directory = CACHE / tag
    settings: dict[str, Any] = {"chunk_context": context}
    if model == "fake":
        from langchain_core.embeddings import DeterministicFakeEmbedding

        settings["embedding"] = DeterministicFakeEmbedding(size=16)
    elif context and not (directory / "ledger.sqlite3").is_file():
        logger.info("seeded %d vectors from the off index", seed(directory, CACHE / f"{name}-off"))
    if fusion:
        settings["fusion"] = fusion
    report = evaluate(
        dataset_dir(name), persist_directory=directory, modes=modes, show_progress=False, **settings
    )
    row = {
        "dataset": name,
        "model": model,
        "chunk_context": context,
        "fusion": fusion or "adaptive",
        "documents": report.documents,
        "chunks": report.chunks,
        "index_seconds": report.index_seconds,
    }
    for mode in report.modes:
        row[mode.mode] = round(mode.metrics["nDCG@10"], 4)
        row[f"{mode.mode}_p50_ms"] = round(mode.latency_ms["p50"], 1)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["scifact", "msmarco-5k", "jaquad-dev"])
    parser.add_argument("--model", choices=["default", "fake"], default="default")
    parser.add_argument("--modes", default="hybrid,vector,keyword")
    parser.add_argument("--context", choices=["off", "on", "both"], default="both")
    parser.add_argument("--fusion", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    results = json.loads(OUT.read_text()) if OUT.is_file() else []
    for context in {"off": [False], "on": [True], "both": [False, True]}[args.context]:
        row = run(args.dataset, args.model, args.modes.split(","), context, args.fusion)
        print(json.dumps(row), flush=True)
        results = [
            r
            for r in results
            if (r["dataset"], r["model"], r["chunk_context"], r.get("fusion"))
            != (row["dataset"], row["model"], row["chunk_context"], row["fusion"])
        ] + [row]
        OUT.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
