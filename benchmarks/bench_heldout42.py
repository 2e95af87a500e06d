"""Issue 42: vector / keyword / hybrid nDCG@10 on the held-out-style sets of ``build_heldout42.py``.

Each set (``entity``, ``long``, ``keyword-edge``) is indexed once per model into
``benchmarks/.cache/heldout42/<set>-<model>`` with the default splitter and searched in the three modes; the
row records the calibration the adaptive fusion used (gates and priors) and the hybrid's gap to the better leg.
``--model unnamed`` is FinderLedge's default (no ``embedding``: the bundled MiniLM, ONNX int8); ``named`` passes
``embedding="all-MiniLM-L6-v2"`` (as ``bench_leg_table.py``).  ``--tag`` names the row (``before`` / ``after``
a fusion change); the index is reused, only the search (and a forced calibration) runs again.

    python benchmarks/build_heldout42.py
    python benchmarks/bench_heldout42.py entity long keyword-edge --model unnamed --tag after
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from finderledge.evaluation import evaluate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from build_heldout42 import dataset_dir

CACHE = HERE / ".cache" / "heldout42"
SETS = Path(os.path.expanduser("~/.cache/finderledge-bench/heldout42"))
OUT = HERE / "results" / "heldout42.json"
NAMED = "all-MiniLM-L6-v2"
#: sets that search another set's corpus (the same corpus.jsonl): its index, not embedded again
INDEX_OF = {"entity-names": "entity", "rare-terms": "entity"}
#: the shared sets, measured the same way (before / after a fusion change: hybrid must not drop there)
SHARED = ("scifact", "msmarco-5k", "jaquad-dev")


def run(name: str, model: str, tag: str) -> dict[str, Any]:
    """Evaluate one set in the three modes with the default model ``model`` (unnamed or named)."""
    settings: dict[str, Any] = {} if model == "unnamed" else {"embedding": NAMED}
    folder = dataset_dir(name) if name in SHARED else SETS / name
    if not (folder / "corpus.jsonl").is_file():
        raise SystemExit(f"{folder} is missing: run benchmarks/build_heldout42.py first")
    directory = CACHE / f"{INDEX_OF.get(name, name)}-{model}"
    if directory.is_dir():  # reused: measure the calibration again with the code under test
        from finderledge import FinderLedge

        with FinderLedge(persist_directory=directory, **settings) as fl:
            fl.calibrate()
    report = evaluate(
        folder,
        persist_directory=directory,
        modes=["vector", "keyword", "hybrid"],
        show_progress=False,
        **settings,
    )
    row: dict[str, Any] = {
        "dataset": name,
        "model": model,
        "tag": tag,
        "documents": report.documents,
        "chunks": report.chunks,
        "queries": len(report.modes[0].run) if report.modes else 0,
    }
    for mode in report.modes:
        row[mode.mode] = round(mode.metrics["nDCG@10"], 4)
    row["better_leg_gap"] = round(row["hybrid"] - max(row["vector"], row["keyword"]), 4)
    row["calibration"] = report.settings.get("calibration")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "sets", nargs="+", help="entity, long, keyword-edge (build_heldout42.py) or a shared set"
    )
    parser.add_argument("--model", choices=["unnamed", "named"], default="unnamed")
    parser.add_argument("--tag", default="current")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for name in args.sets:
        row = run(name, args.model, args.tag)
        print(json.dumps(row), flush=True)
        results = json.loads(OUT.read_text()) if OUT.is_file() else []
        key = (row["dataset"], row["model"], row["tag"])
        results = [r for r in results if (r["dataset"], r["model"], r["tag"]) != key] + [row]
        OUT.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
