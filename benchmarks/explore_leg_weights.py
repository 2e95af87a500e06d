"""How much is each leg worth on a corpus?  A per-corpus convex leg weight from pseudo-queries (issue 32).

Adaptive fusion scores ``Σ_leg gate_leg · w_leg · e_leg(d)`` (:mod:`finderledge.ranking.adaptive`); the per-corpus part,
``gate``, only says whether a leg carries *any* signal.  This script measures, offline, a per-corpus prior
``α`` (vector) / ``1 − α`` (keyword) that multiplies the gates, chosen by pseudo-query MRR@10 over a grid,
for several kinds of pseudo-query (none hands the keyword leg every word of its target):

* ``sent``    — a sentence of the chunk, as the library's calibration draws it (every word is in the target);
* ``drop``    — the same sentence with a seeded half of its words removed;
* ``mask``    — the same sentence without its rarer half of content words (highest idf: the words BM25 keys on);
* ``removed`` — the sentence searched for its chunk *with the sentence taken out of the chunk* (the chunk is
  re-embedded and re-scored by BM25 without it): the target is about the query but does not contain it.

Step 1 (``--prepare``; minutes per index): for the prebuilt MiniLM indexes of ``benchmarks/score_separation.py``
(``benchmarks/.cache/scores/<dataset>``) record both legs' top-100 for the test queries (jaquad-dev: a seeded
1000), scifact's train queries, the dense-dominant sets of ``benchmarks/build_dense_dominant.py`` built on that
corpus, and the pseudo-queries -> ``benchmarks/.cache/legweights/<dataset>.pkl``.

Step 2 (default; seconds): fuse every set with the library's own :func:`finderledge.ranking.adaptive.evidence_fusion`
for each ``α`` and each way of choosing it, named (MiniLM known as English-only) and anonymous, and print
nDCG@10 next to each leg alone.  Choices are made on pseudo-queries (label-free) and judged on the dev sets
(scifact train and ``dev-*``); test and ``heldout-*`` figures are reported, not used.

    python benchmarks/build_dense_dominant.py
    python benchmarks/explore_leg_weights.py --prepare
    python benchmarks/explore_leg_weights.py          # -> benchmarks/results/leg_weights.json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import pickle
import random
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_dense_dominant import OUT as DD_ROOT
from explore_adaptive_fusion import MAX_TEST, ROOT, _sample, ndcg10, rr10

from finderledge.evaluation import load_beir
from finderledge.ranking.adaptive import evidence_fusion, top_evidence
from finderledge.ranking.calibration import MAX_HELD_OUT, gate, leg_priors, pseudo_queries, query_count
from finderledge.ranking.fusion import model_scripts, vector_leg_share
from finderledge.ranking.relevance import LedgerBackground, sample_key

logger = logging.getLogger("explore_leg_weights")
INDEXES = HERE / ".cache" / "scores"
CACHE = HERE / ".cache" / "legweights"
OUT = HERE / "results" / "leg_weights.json"
DATASETS = ("scifact", "msmarco-5k", "jaquad-dev")
KINDS = ("sent", "drop", "mask", "removed")
DEPTH = 100
GRID = tuple(round(0.1 * i, 1) for i in range(1, 10))
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


# ---------------------------------------------------------------------------------------------------------
# step 1
# ---------------------------------------------------------------------------------------------------------
def _variants(sentence: str, target_text: str, key: str, tokenizer: Any, idf: Mapping[str, float]) -> dict:
    rng = random.Random(key)
    words = sentence.split()
    if len(words) >= 2:
        keep = sorted(rng.sample(range(len(words)), max(3, len(words) // 2)))
        drop = " ".join(words[j] for j in keep)
    else:  # a script without spaces: a random half of the characters in one run
        half = max(len(sentence) // 2, 6)
        start = rng.randrange(0, max(len(sentence) - half, 0) + 1)
        drop = sentence[start : start + half]
    if len(words) >= 2:
        rarity = {w: max((idf.get(t, 0.0) for t in tokenizer(w)), default=-1.0) for w in words}
        content = sorted({w for w in words if rarity[w] >= 0}, key=lambda w: -rarity[w])
        gone = set(content[: len(content) // 2])
        mask = " ".join(w for w in words if w not in gone)
    else:
        toks = tokenizer(sentence)
        gone = set(sorted(set(toks), key=lambda t: -idf.get(t, 0.0))[: len(set(toks)) // 2])
        mask = sentence
        for t in gone:
            mask = mask.replace(t, " ")
    return {"drop": drop, "mask": mask, "removed_target": target_text.replace(sentence, " ")}


def _bm25(
    query_tokens: Counter,
    doc_tokens: Counter,
    dl: int,
    idf: Mapping[str, float],
    k1: float,
    b: float,
    avgdl: float,
) -> float:
    s = 0.0
    for t, qtf in query_tokens.items():
        tf = doc_tokens.get(t, 0)
        if tf and t in idf:
            s += qtf * idf[t] * (k1 + 1.0) * tf / (tf + k1 * (1 - b + b * dl / avgdl))
    return s


def _insert(ranking: list[tuple[str, float]], doc: str, score: float, keep: bool) -> list[tuple[str, float]]:
    out = [(d, s) for d, s in ranking if d != doc]
    if keep and (len(out) < DEPTH or score > out[-1][1]):
        out.append((doc, score))
        out.sort(key=lambda x: -x[1])
    return out[:DEPTH]


def prepare(name: str) -> Path:
    from bench_adaptive import open_index

    path = CACHE / f"{name}.pkl"
    if path.is_file():
        return path
    fl = open_index(name, "minilm", "named", cache_queries=False)
    try:
        ledger, kw, vs = fl.engine.ledger, fl.keyword_store, fl.finder.vector_store
        ids = sorted(ledger.complete_chunk_ids())
        chunks = ledger.get_chunks(ids, with_embedding=True)
        beir_of = {c.id: str(c.metadata.get("beir_id")) for c in chunks}
        text_of = {c.id: c.content for c in chunks}
        background = LedgerBackground(ledger, kw).sample(512)
        tok = kw.tokenizer
        doc_toks = {c.id: Counter(tok(c.content)) for c in chunks}
        dfs: Counter = Counter()
        for counts in doc_toks.values():
            dfs.update(counts.keys())
        n = len(chunks)
        idf = {t: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for t, df in dfs.items()}
        avgdl = sum(sum(c.values()) for c in doc_toks.values()) / n
        emb = fl.embeddings

        def record(items: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
            qv = np.asarray(emb.embed_documents([t for _, t in items]), dtype=np.float32)
            rows = []
            for (qid, text), vec in zip(items, qv):
                rows.append(
                    {
                        "qid": qid,
                        "text": text,
                        "vector": [(beir_of[i], float(s)) for i, s in vs.search(vec, DEPTH)],
                        "keyword": [(beir_of[i], float(s)) for i, s in kw.search(text, DEPTH)],
                        "vbase": background.vector_baseline(vec),
                        "kceil": background.keyword_ceiling(text),
                        "qvec": vec,
                    }
                )
            return rows

        sets: dict[str, list[dict[str, Any]]] = {}
        qrels: dict[str, dict[str, dict[str, int]]] = {}
        splits = ["test", "train"] if (ROOT / name / "qrels" / "train.tsv").is_file() else ["test"]
        folders = [(s, ROOT / name) for s in splits] + [
            (f.name, f) for f in sorted(DD_ROOT.glob(f"*-{name}")) if (f / "queries.jsonl").is_file()
        ]
        for set_name, folder in folders:
            data = load_beir(folder, set_name if set_name in ("test", "train") else "test")
            items = [(q, t) for q, t in data.queries.items() if q in data.qrels]
            if set_name == "test":
                items = _sample(items, MAX_TEST)
            sets[set_name] = record(items)
            qrels[set_name] = {q: data.qrels[q] for q, _ in items}
            logger.info("%s %s: %d queries", name, set_name, len(items))
        # pseudo-queries: the library's own draw, then the variants of each sentence
        ordered = sorted(ids, key=sample_key)
        pq = pseudo_queries(((i, i, text_of[i]) for i in ordered), query_count(n))
        items = {k: [] for k in KINDS}
        targets = []
        for j, (sentence, cid) in enumerate(pq):
            var = _variants(sentence, text_of[cid], f"{name}:{j}", tok, idf)
            items["sent"].append((f"p{j}", sentence))
            items["drop"].append((f"p{j}", var["drop"]))
            items["mask"].append((f"p{j}", var["mask"]))
            items["removed"].append((f"p{j}", sentence))
            targets.append((cid, var["removed_target"]))
        for kind in ("sent", "drop", "mask"):
            sets[f"pseudo-{kind}"] = record(items[kind])
        rows = [dict(r) for r in sets["pseudo-sent"]]
        reduced = np.asarray(emb.embed_documents([t for _, t in targets]), dtype=np.float32)
        for row, (cid, rest), rvec in zip(rows, targets, reduced):
            target = beir_of[cid]
            q = np.asarray(row["qvec"], dtype=np.float64)
            cos = float(q @ rvec / (np.linalg.norm(q) * np.linalg.norm(rvec) + 1e-12))
            rest_toks = Counter(tok(rest))
            bm = _bm25(Counter(tok(row["text"])), rest_toks, sum(rest_toks.values()), idf, kw.k1, kw.b, avgdl)
            row["vector"] = _insert(row["vector"], target, cos, True)
            row["keyword"] = _insert(row["keyword"], target, bm, bm > 0)
        sets["pseudo-removed"] = rows
        for kind in KINDS:
            qrels[f"pseudo-{kind}"] = {f"p{j}": {beir_of[cid]: 1} for j, (_, cid) in enumerate(pq)}
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            pickle.dump({"dataset": name, "chunks": n, "sets": sets, "qrels": qrels}, fh)
        return path
    finally:
        fl.close()


# ---------------------------------------------------------------------------------------------------------
# step 2
# ---------------------------------------------------------------------------------------------------------
def fused(row: Mapping[str, Any], alpha: float, gates: Mapping[str, float], named: bool) -> list[str]:
    """The library's adaptive fusion of one recorded query with the prior ``alpha`` (vector) / ``1 - alpha``."""
    if named and vector_leg_share(row["text"], model_scripts(MINILM)) < 0.5:
        return [d for d, _ in row["keyword"]] or [d for d, _ in row["vector"]]
    rankings = {"vector": row["vector"], "keyword": row["keyword"]}
    ev = top_evidence(rankings, row["vbase"], row["kceil"])
    total = sum(ev.values())
    share = {leg: (e / total if total > 0 else 0.5) for leg, e in ev.items()}
    prior = {"vector": alpha, "keyword": 1.0 - alpha}
    weights = {leg: gates.get(leg, 1.0) * prior[leg] * share[leg] for leg in rankings}
    hits = evidence_fusion(
        rankings,
        weights,
        vector_baseline=row["vbase"],
        keyword_ceiling=row["kceil"],
        exhaustive=("keyword",) if len(row["keyword"]) < DEPTH else (),
    )
    return [h.id for h in hits[:10]]


def metric(rows, qrels, how, **kw) -> float:
    f = ndcg10 if how == "ndcg" else rr10
    return float(np.mean([f(fused(r, **kw), qrels[r["qid"]]) for r in rows])) if rows else 0.0


def leg(rows, qrels, which: str) -> float:
    return float(np.mean([ndcg10([d for d, _ in r[which]], qrels[r["qid"]]) for r in rows])) if rows else 0.0


def current_gates(blob: Mapping[str, Any]) -> dict[str, float]:
    rows, qrels = blob["sets"]["pseudo-sent"], blob["qrels"]["pseudo-sent"]
    v = float(np.mean([rr10([d for d, _ in r["vector"]], qrels[r["qid"]]) for r in rows]))
    k = float(np.mean([rr10([d for d, _ in r["keyword"]], qrels[r["qid"]]) for r in rows]))
    return {"vector": gate(v / k) if k else 1.0, "keyword": gate(k / v) if v else 1.0}


def analyse(name: str, show_heldout: bool = False) -> dict[str, Any]:
    with open(CACHE / f"{name}.pkl", "rb") as fh:
        blob = pickle.load(fh)
    gates = current_gates(blob)
    out: dict[str, Any] = {"dataset": name, "gates_sent": gates, "pseudo_mrr": {}, "sets": {}}
    for kind in KINDS:
        rows, qrels = blob["sets"][f"pseudo-{kind}"], blob["qrels"][f"pseudo-{kind}"]
        curve = {a: metric(rows, qrels, "mrr", alpha=a, gates=gates, named=False) for a in GRID}
        out["pseudo_mrr"][kind] = {
            "vector": float(np.mean([rr10([d for d, _ in r["vector"]], qrels[r["qid"]]) for r in rows])),
            "keyword": float(np.mean([rr10([d for d, _ in r["keyword"]], qrels[r["qid"]]) for r in rows])),
            "fused_by_alpha": curve,
        }
    rows, qrels = blob["sets"]["pseudo-removed"][:MAX_HELD_OUT], blob["qrels"]["pseudo-removed"]
    held = {
        leg: float(np.mean([rr10([d for d, _ in r[leg]], qrels[r["qid"]]) for r in rows]))
        for leg in ("vector", "keyword")
    }  # the first MAX_HELD_OUT, as the library measures them
    out["held_out_mrr"] = held
    alpha = leg_priors(held)["vector"] / 2
    out["alpha_rule"] = alpha  # the library's rule: alpha = MRR_v / (MRR_v + MRR_k) held out, bounded
    for set_name, rows in blob["sets"].items():
        if set_name.startswith("pseudo-") or (set_name.startswith("heldout-") and not show_heldout):
            continue
        qrels = blob["qrels"][set_name]
        row = {
            "queries": len(rows),
            "vector": leg(rows, qrels, "vector"),
            "keyword": leg(rows, qrels, "keyword"),
        }
        for named in (True, False):
            row["named" if named else "anon"] = {
                a: metric(rows, qrels, "ndcg", alpha=a, gates=gates, named=named) for a in GRID
            }
            row[f"{'named' if named else 'anon'}_rule"] = metric(
                rows, qrels, "ndcg", alpha=alpha, gates=gates, named=named
            )
        out["sets"][set_name] = row
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prepare", action="store_true")
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--heldout", action="store_true", help="also the held-out sets (after choosing)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.prepare:
        for name in args.datasets:
            logger.info("prepared %s", prepare(name))
        return 0
    results = [analyse(name, args.heldout) for name in args.datasets]
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    for r in results:
        print(f"\n{r['dataset']}: gates {r['gates_sent']}, alpha (rule) {r['alpha_rule']:.3f}")
        for kind, p in r["pseudo_mrr"].items():
            curve = " ".join(f"{v:.3f}" for v in p["fused_by_alpha"].values())
            print(f"  pseudo-{kind:8s} v {p['vector']:.3f} k {p['keyword']:.3f} | fused by alpha {curve}")
        for set_name, s in r["sets"].items():
            for ident in ("named", "anon"):
                curve = " ".join(f"{v:.3f}" for v in s[ident].values())
                print(
                    f"  {set_name:32s} {ident:5s} n={s['queries']:4d} v {s['vector']:.3f} k {s['keyword']:.3f} "
                    f"| before {s[ident][0.5]:.3f} rule {s[ident + '_rule']:.3f} | {curve}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
