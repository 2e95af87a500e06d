"""Issue 42, SciFact routes: fusion variants on a built index, chosen on the train split only.

Reuses an index of ``bench_chunk_context.py`` (``benchmarks/.cache/context/<set>-<off|on>``, default splitter)
and runs the hybrid mode under each variant, by replacing the adaptive fusion's scoring function for the run:

* ``chunk``: the library's fusion (each chunk scored on its own evidence);
* ``parent``: each leg's evidence of a chunk is its parent's best chunk's in that leg (a document whose
  abstract matches the keywords in one chunk and the meaning in another gets both);
* ``parent-half``: halfway between the chunk's own evidence and its parent's best;
* ``rrf``: plain reciprocal-rank fusion of the chunk lists (``fusion="rrf"``), for reference.

    python benchmarks/explore_parent_fusion.py scifact --split train            # decide here
    python benchmarks/explore_parent_fusion.py scifact --split test --variants chunk,parent
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from finderledge import FinderLedge
from finderledge.evaluation import evaluate_modes, load_beir
from finderledge.ranking import adaptive, finder
from finderledge.ranking.fusion import FusedHit, Ranking, first_listed, top_hits, zero_scores

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_chunk_context import CACHE, dataset_dir

OUT = HERE / "results" / "parent_fusion.json"


def parent_of(chunk_id: str) -> str:
    return chunk_id.rpartition("-")[0] or chunk_id


def parent_evidence_fusion(share: float) -> Any:
    """:func:`finderledge.ranking.adaptive.evidence_fusion` with each leg's evidence moved ``share`` of the way from the
    chunk's own to its parent's best chunk's in that leg."""

    def fusion(
        rankings: Mapping[str, Ranking],
        weights: Mapping[str, float],
        *,
        vector_baseline: float,
        keyword_ceiling: float,
        exhaustive: Collection[str] = (),
        limit: int | None = None,
    ) -> list[FusedHit]:
        listed = first_listed(rankings)
        scores = zero_scores(listed)
        for leg, ranking in rankings.items():
            w = weights.get(leg, 1.0)
            if not ranking or w == 0:
                continue
            offset, span = (
                (vector_baseline, 1.0 - vector_baseline) if leg == "vector" else (0.0, keyword_ceiling)
            )
            if span <= 0:
                continue
            missing = 0.0 if leg in exhaustive else (float(ranking[-1][1]) - offset) / span
            by_id = listed[leg]
            best: dict[str, float] = {}
            for doc_id, (_, raw) in by_id.items():
                e = (raw - offset) / span
                p = parent_of(doc_id)
                if e > best.get(p, float("-inf")):
                    best[p] = e
            for doc_id in scores:
                got = by_id.get(doc_id)
                own = missing if got is None else (got[1] - offset) / span
                top = best.get(parent_of(doc_id), own)
                scores[doc_id] += w * (own + share * max(0.0, top - own))
        return top_hits(listed, scores, limit)

    return fusion


VARIANTS = {"chunk": None, "parent": 1.0, "parent-half": 0.5}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--split", default="train")
    parser.add_argument("--index", default="off", help="which cached index: off or on (chunk_context)")
    parser.add_argument("--variants", default="chunk,parent,parent-half,rrf")
    args = parser.parse_args(argv)
    data = load_beir(dataset_dir(args.dataset), args.split)
    results = json.loads(OUT.read_text()) if OUT.is_file() else []
    original = adaptive.evidence_fusion
    for variant in args.variants.split(","):
        fusion = "rrf" if variant == "rrf" else None
        fl = FinderLedge(
            CACHE / f"{args.dataset}-{args.index}", show_progress=False, env_file=None, fusion=fusion
        )
        share = VARIANTS.get(variant)
        finder.evidence_fusion = original if share is None else parent_evidence_fusion(share)  # type: ignore[attr-defined]
        try:
            (report,) = evaluate_modes(fl, data, ["hybrid"], k=100, show_progress=False)
        finally:
            finder.evidence_fusion = original  # type: ignore[attr-defined]
            fl.close()
        row = {
            "dataset": args.dataset,
            "split": args.split,
            "index": args.index,
            "variant": variant,
            "queries": len(data.queries),
            "nDCG@10": round(report.metrics["nDCG@10"], 4),
            "p50_ms": round(report.latency_ms["p50"], 1),
        }
        print(json.dumps(row), flush=True)
        key = (row["dataset"], row["split"], row["index"], row["variant"])
        results = [r for r in results if (r["dataset"], r["split"], r["index"], r["variant"]) != key] + [row]
        OUT.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
