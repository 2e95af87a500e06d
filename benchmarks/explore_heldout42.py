"""Issue 42: why hybrid falls below its better leg on a held-out-style set — the fusion's inputs per query.

Opens an index of ``bench_heldout42.py`` (or of ``bench_chunk_context.py`` for a shared set), searches every
test query in hybrid mode once while recording what the adaptive fusion was given (both legs' rankings, the
query's background cosine and BM25 ceiling, the calibration's gates and priors), then re-fuses those inputs with
:func:`finderledge.ranking.adaptive.evidence_fusion` under the library's weights and under fixed leg weights,
and prints nDCG@10 of each (the parent-level ranking, as ``evaluate`` scores it).  Exploration only: the
qrels score the variants, they choose nothing in the library.

    python benchmarks/explore_heldout42.py entity-strict --save   # -> benchmarks/results/heldout42_explore.json

Variants: ``library`` (gate x prior x evidence share, as shipped), ``no priors``, ``share power p`` (each leg's
top-hit evidence raised to ``p`` before the shares: sharper per-query weights), ``share above f`` (the
evidence less a floor ``f``), ``fixed vW`` (vector weight W, keyword 1 - W, the same for every query).

``--dump FILE`` writes each query's inputs (with the keyword leg's term coverage: the share of the query's idf
mass its first hits, and its top hit's document, hold) for ``coverage_rules42.py`` to re-fuse under other rules.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from finderledge import FinderLedge
from finderledge.evaluation import load_beir
from finderledge.metadata import embedded_text
from finderledge.ranking import finder as finder_module
from finderledge.ranking.adaptive import evidence_fusion, leg_weights, top_evidence

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "heldout42_explore.json"
sys.path.insert(0, str(HERE))
from bench_heldout42 import CACHE, INDEX_OF, SETS, SHARED
from build_heldout42 import dataset_dir


def ndcg10(ranked: Sequence[str], gold: Mapping[str, int]) -> float:
    dcg = sum(gold.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(gold.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def capture(fl: FinderLedge, queries: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Each query's fusion inputs, recorded from the Finder's adaptive step during a hybrid search."""
    seen: dict[str, Any] = {}
    original = finder_module.Finder._adaptive
    measure = finder_module.Finder._measure

    def spy_measure(self: Any, *a: Any, **kw: Any) -> Any:
        background = measure(self, *a, **kw)
        seen["background"] = background
        return background

    def spy(self: Any, query: str, rankings: Any, exhaustive: bool, timings: Any, *a: Any, **kw: Any) -> Any:
        out = original(self, query, rankings, exhaustive, timings, *a, **kw)
        seen.update(
            rankings={leg: list(r) for leg, r in rankings.items()},
            exhaustive=exhaustive,
            baseline=timings.vector_baseline or 0.0,
            ceiling=timings.keyword_ceiling or 0.0,
            gates=dict(timings.gates),
            priors=dict(timings.priors),
        )
        return out

    finder_module.Finder._adaptive = spy  # type: ignore[method-assign]
    finder_module.Finder._measure = spy_measure  # type: ignore[method-assign]
    out: dict[str, dict[str, Any]] = {}
    try:
        for qid, text in queries.items():
            seen.clear()
            fl.search(text, k=100)
            got = dict(seen)
            background = got.pop("background", None)
            if background is not None and "rankings" in got:
                keyword = got["rankings"].get("keyword", [])
                got["term_coverage"] = term_coverage(fl, text, keyword, background)
                got["doc_coverage"] = doc_coverage(fl, text, keyword, background)
            out[qid] = got
    finally:
        finder_module.Finder._adaptive = original  # type: ignore[method-assign]
        finder_module.Finder._measure = measure  # type: ignore[method-assign]
    return out


def term_coverage(
    fl: FinderLedge, query: str, keyword: Sequence[Any], background: Any, top: int = 3
) -> list[float]:
    """Share of the query's idf mass (the keyword ceiling's terms and idfs) that each of the keyword leg's
    first ``top`` hits holds, each term counted once whatever its frequency (tokenised as the leg does)."""
    tokenize = background.tokenizer
    if tokenize is None or not keyword:
        return []
    idf = {t: background.idf(t) for t in set(tokenize(query))}
    total = sum(idf.values())
    if total <= 0:
        return []
    ids = [i for i, _ in keyword[:top]]
    texts = {c.id: embedded_text(c.content, c.metadata) for c in fl.ledger.get_chunks(ids)}
    out = []
    for i in ids:
        held = set(tokenize(texts.get(i, "")))
        out.append(sum(v for t, v in idf.items() if t in held) / total)
    return out


def doc_coverage(
    fl: FinderLedge, query: str, keyword: Sequence[Any], background: Any, depth: int = 20
) -> float:
    """Share of the query's idf mass held by the keyword leg's top hit's *document*: the union of its chunks
    among the leg's first ``depth`` hits (a document split into chunks spreads its terms over them)."""
    tokenize = background.tokenizer
    if tokenize is None or not keyword:
        return 0.0
    idf = {t: background.idf(t) for t in set(tokenize(query))}
    total = sum(idf.values())
    chunks = fl.ledger.get_chunks([i for i, _ in keyword[:depth]])
    if total <= 0 or not chunks:
        return 0.0
    first = {c.id: c for c in chunks}.get(keyword[0][0])
    if first is None:
        return 0.0
    held: set[str] = set()
    for c in chunks:
        if c.parent_id == first.parent_id:
            held.update(tokenize(embedded_text(c.content, c.metadata)))
    return sum(v for t, v in idf.items() if t in held) / total


def parents(fl: FinderLedge, ids: Sequence[str], cache: dict[str, str]) -> list[str]:
    missing = [i for i in ids if i not in cache]
    for c in fl.ledger.get_chunks(missing):
        cache[c.id] = str(c.metadata.get("beir_id", c.parent_id))
    return list(dict.fromkeys(cache[i] for i in ids if i in cache))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--model", default="unnamed")
    parser.add_argument("--index", type=Path, default=None)
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--save", action="store_true", help=f"add the row to {OUT.name}")
    parser.add_argument(
        "--dump", type=Path, default=None, help="write each query's fusion inputs (JSON) here"
    )
    parser.add_argument("--limit", type=int, default=0, help="the first N queries only (0: all)")
    args = parser.parse_args(argv)
    folder = args.folder or (dataset_dir(args.dataset) if args.dataset in SHARED else SETS / args.dataset)
    data = load_beir(folder, "test")
    if args.limit:
        data.queries = dict(list(data.queries.items())[: args.limit])
    directory = args.index or CACHE / f"{INDEX_OF.get(args.dataset, args.dataset)}-{args.model}"
    if not directory.is_dir():
        raise SystemExit(f"no index at {directory}: run bench_heldout42.py {args.dataset} first")
    settings: dict[str, Any] = {} if args.model == "unnamed" else {"embedding": "all-MiniLM-L6-v2"}
    with FinderLedge(persist_directory=directory, **settings) as fl:
        inputs = capture(fl, data.queries)
        cache: dict[str, str] = {}
        if args.dump:
            for got in inputs.values():
                for ranking in got.get("rankings", {}).values():
                    parents(fl, [i for i, _ in ranking], cache)
            args.dump.write_text(
                json.dumps({"parents": cache, "qrels": {q: data.qrels[q] for q in inputs}, "queries": inputs})
            )
        variants: dict[str, list[float]] = {}
        first = next(iter(inputs.values()))
        print("gates", first.get("gates"), "priors", first.get("priors"))
        for qid, got in inputs.items():
            if "rankings" not in got:
                continue
            r, gold = got["rankings"], data.qrels[qid]
            ev = top_evidence(r, got["baseline"], got["ceiling"])
            lib = leg_weights(ev, got["gates"], "", got["priors"]).weights
            runs: dict[str, Mapping[str, float]] = {
                "library": lib,
                "no priors": leg_weights(ev, got["gates"], "").weights,
            }
            for power in (1.5, 2.0, 3.0):
                sharp = {leg: e**power for leg, e in ev.items()}
                runs[f"share power {power}"] = leg_weights(sharp, got["gates"], "", got["priors"]).weights
            for floor in (0.05, 0.1, 0.15, 0.2):
                above = {leg: max(e - floor, 0.0) for leg, e in ev.items()}
                runs[f"share above {floor}"] = leg_weights(above, got["gates"], "", got["priors"]).weights
            for wv in (0.0, 0.25, 0.5, 0.75, 1.0):
                runs[f"fixed v{wv:.2f}"] = {"vector": wv, "keyword": 1 - wv}
            for name, w in runs.items():
                fused = evidence_fusion(
                    r,
                    w,
                    vector_baseline=got["baseline"],
                    keyword_ceiling=got["ceiling"],
                    exhaustive=("keyword",) if got["exhaustive"] else (),
                )
                variants.setdefault(name, []).append(ndcg10(parents(fl, [h.id for h in fused], cache), gold))
            for leg in ("vector", "keyword"):
                variants.setdefault(f"leg {leg}", []).append(
                    ndcg10(parents(fl, [i for i, _ in r[leg]], cache), gold)
                )
            for leg in ("vector", "keyword"):
                variants.setdefault(f"evidence {leg}", []).append(ev[leg])
            variants.setdefault("share v", []).append(ev["vector"] / max(sum(ev.values()), 1e-9))
        row = {"dataset": args.dataset, "model": args.model, "queries": len(inputs)}
        row.update({k: round(sum(v) / len(v), 4) for k, v in variants.items()})
        print(json.dumps(row, indent=1))
    if args.save:
        rows = json.loads(OUT.read_text()) if OUT.is_file() else []
        rows = [r for r in rows if (r["dataset"], r["model"]) != (row["dataset"], row["model"])] + [row]
        OUT.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
