"""Issue 42: re-fuse the per-query inputs that ``explore_heldout42.py --dump`` wrote under keyword-coverage rules.

Each dump holds, per query, both legs' rankings, the background cosine and BM25 ceiling, the calibration's gates
and priors, and the *term coverage* of the keyword leg's first hits (the share of the query's idf mass a hit
holds, each term once).  The keyword leg's evidence ``top / ceiling`` is the BM25 coverage the issue names.
A rule maps (evidence, term coverage) to the two legs' weights; the table prints nDCG@10 per set and rule,
with both legs and the shipped rule.  Exploration only (no re-embedding: seconds per set).

    python benchmarks/coverage_rules42.py /tmp/dumps/*.json [--save]   # -> results/heldout42_coverage_rules.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from finderledge.ranking.adaptive import evidence_fusion, leg_weights, top_evidence

OUT = Path(__file__).resolve().parent / "results" / "heldout42_coverage_rules.json"

Rule = Callable[[dict[str, float], list[float], dict[str, Any]], Mapping[str, float]]


def ndcg10(ranked: Sequence[str], gold: Mapping[str, int]) -> float:
    dcg = sum(gold.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(gold.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def scaled(ev: dict[str, float], got: dict[str, Any], kscale: float, vscale: float = 1.0) -> dict[str, float]:
    w = dict(leg_weights(ev, got["gates"], "", got["priors"]).weights)
    w["keyword"] *= kscale
    w["vector"] *= vscale
    return w


def rules() -> dict[str, Rule]:
    out: dict[str, Rule] = {"library": lambda ev, tc, got: scaled(ev, got, 1.0)}
    for p in (1.0, 2.0, 3.0):
        out[f"k x tc^{p:g}"] = lambda ev, tc, got, p=p: scaled(ev, got, (tc[0] if tc else 0.0) ** p)
        out[f"k x c^{p:g}"] = lambda ev, tc, got, p=p: scaled(ev, got, ev["keyword"] ** p)
    for c0 in (0.5, 0.6, 0.75, 0.9):
        # keyword down only when the top hit misses idf mass: min(1, tc / c0)^2
        out[f"k x min(1,tc/{c0:g})^2"] = lambda ev, tc, got, c0=c0: scaled(
            ev, got, min(1.0, (tc[0] if tc else 0.0) / c0) ** 2
        )
    for t in (0.5, 0.75, 0.9, 1.0):
        # the vector leg down when the top keyword hit holds (nearly) every query term
        out[f"v x (1-tc) if tc>={t:g}"] = lambda ev, tc, got, t=t: scaled(
            ev, got, 1.0, (1.0 - tc[0]) if tc and tc[0] >= t - 1e-9 else 1.0
        )
        out[f"v x 0.5 if tc>={t:g}"] = lambda ev, tc, got, t=t: scaled(
            ev, got, 1.0, 0.5 if tc and tc[0] >= t - 1e-9 else 1.0
        )
    for g in (1.0, 2.0):
        # odds: keyword x (tc / (1 - tc))^g-ish, bounded
        out[f"k x (2tc)^{g:g} capped 4"] = lambda ev, tc, got, g=g: scaled(
            ev, got, min(4.0, (2 * (tc[0] if tc else 0.0)) ** g)
        )
    for t0 in (0.5, 0.6, 0.7):
        for g in (2.0, 3.0, 4.0, 6.0):
            # keyword x (tc / t0)^g: up above t0, down below, steeper with g
            out[f"k x (tc/{t0:g})^{g:g}"] = lambda ev, tc, got, t0=t0, g=g: scaled(
                ev, got, ((tc[0] if tc else 0.0) / t0) ** g
            )
    for a in (1.0, 2.0, 4.0, 8.0):
        for depth in (10,):
            # agreement: the legs' top-``depth`` overlap o; the evidence shares sharpened by 1 + a (1 - o)
            out[f"share^(1+{a:g}(1-o{depth}))"] = lambda ev, tc, got, a=a, depth=depth: sharpened(
                ev, got, a, depth
            )
    for t in (0.9, 0.999):
        for f in (2.0, 4.0):
            # the top keyword hit's document holds (nearly) every query term: keyword x f
            out[f"k x {f:g} if dc>={t:g}"] = lambda ev, tc, got, t=t, f=f: scaled(
                ev, got, f if got.get("doc_coverage", 0.0) >= t else 1.0
            )
            # ... and below t the keyword leg x dc^2 as well
            out[f"k x {f:g} if dc>={t:g} else dc^2"] = lambda ev, tc, got, t=t, f=f: scaled(
                ev, got, f if got.get("doc_coverage", 0.0) >= t else got.get("doc_coverage", 0.0) ** 2
            )
    return out


def overlap(got: dict[str, Any], depth: int) -> float:
    r = got["rankings"]
    v = {i for i, _ in r["vector"][:depth]}
    k = {i for i, _ in r["keyword"][:depth]}
    return len(v & k) / depth


def sharpened(ev: dict[str, float], got: dict[str, Any], a: float, depth: int) -> dict[str, float]:
    power = 1.0 + a * (1.0 - overlap(got, depth))
    return dict(
        leg_weights({leg: e**power for leg, e in ev.items()}, got["gates"], "", got["priors"]).weights
    )


def evaluate(dump: dict[str, Any]) -> dict[str, float]:
    parents, qrels = dump["parents"], dump["qrels"]
    sums: dict[str, list[float]] = {}

    def score(ids: Sequence[str], gold: Mapping[str, int]) -> float:
        return ndcg10(list(dict.fromkeys(parents[i] for i in ids if i in parents)), gold)

    for qid, got in dump["queries"].items():
        if "rankings" not in got:
            continue
        r, gold = got["rankings"], qrels[qid]
        ev = top_evidence(r, got["baseline"], got["ceiling"])
        tc = got.get("term_coverage") or []
        for leg in ("vector", "keyword"):
            sums.setdefault(f"leg {leg}", []).append(score([i for i, _ in r[leg]], gold))
        for name, rule in rules().items():
            fused = evidence_fusion(
                r,
                rule(ev, tc, got),
                vector_baseline=got["baseline"],
                keyword_ceiling=got["ceiling"],
                exhaustive=("keyword",) if got["exhaustive"] else (),
            )
            sums.setdefault(name, []).append(score([h.id for h in fused], gold))
        sums.setdefault("mean c", []).append(ev["keyword"])
        sums.setdefault("mean tc", []).append(tc[0] if tc else 0.0)
        sums.setdefault("mean dc", []).append(got.get("doc_coverage", 0.0))
    return {k: round(sum(v) / len(v), 4) for k, v in sums.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dumps", nargs="+", type=Path)
    parser.add_argument("--save", action="store_true")
    args = parser.parse_args(argv)
    table = {p.stem: evaluate(json.loads(p.read_text())) for p in args.dumps}
    names = list(next(iter(table.values())))
    print(f"{'rule':28s}" + "".join(f"{s[:12]:>13s}" for s in table))
    for n in names:
        row = f"{n:28s}"
        for t in table.values():
            v = t[n]
            best = max(t["leg vector"], t["leg keyword"])
            mark = "" if n.startswith(("leg", "mean")) else f"{v - best:+.3f}"[0:6]
            row += f"{v:7.4f}{mark:>6s}"
        print(row)
    if args.save:
        OUT.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
