"""Benchmark of the FAISS store's ``vector_index`` kinds: build time, recall@10 against exact search, query p50,
serving RSS and disk, per kind and corpus size (issue 41, "Beyond float32 in RAM").

The vectors are synthetic: a normalised Gaussian mixture (``--clusters`` centres, points scattered around them)
of ``--dim`` dimensions, queries drawn from the same mixture (not in the corpus).  No model here embeds 1M texts
in the time a run has, and clustered vectors are what real embeddings look like to an index (random uniform
ones would make every approximate index look worse than it is on text).

Each kind is built by one process (``FaissVectorStore`` with ``vector_index=kind``: add in batches, then one
flush, which builds and writes the approximate index) and served by a fresh one (open, then ``--queries``
searches of k=10 one at a time on ``--threads`` FAISS threads), whose RSS is read after the queries.  Recall@10
is measured against the exact top 10 (numpy over all vectors).

    python benchmarks/bench_vector_index.py --n 100000 --out benchmarks/results/vector_index_100k.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

KINDS = ("flat", "hnsw", "ivf", "ivf_sq8", "ivf_pq")
BATCH = 50_000


def mixture(n: int, dim: int, clusters: int, seed: int, spread: float = 0.6) -> np.ndarray:
    """``n`` normalised points of a Gaussian mixture around ``clusters`` random centres (same centres for any
    ``seed``: the corpus and the queries share them)."""
    centres = np.random.default_rng(7).normal(size=(clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, BATCH):
        hi = min(n, lo + BATCH)
        pick = rng.integers(0, clusters, size=hi - lo)
        block = centres[pick] + (spread / np.sqrt(dim)) * rng.normal(size=(hi - lo, dim)).astype(np.float32)
        out[lo:hi] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def exact_top(queries: np.ndarray, corpus: np.ndarray, k: int) -> np.ndarray:
    """Row numbers of the exact ``k`` nearest (inner product) per query."""
    from finderledge.vector_stores.flat_rows import top_inner

    _, found = top_inner(queries, corpus, k)
    return found


def rss_mib() -> tuple[float, float]:
    """This process's resident and peak resident memory, MiB."""
    values = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def disk_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Child: build the store of one kind from the corpus file; returns the build's figures."""
    import faiss

    from finderledge.vector_stores.faiss import FaissVectorStore

    faiss.omp_set_num_threads(args.build_threads)
    corpus = np.load(args.work / "corpus.npy", mmap_mode="r")
    started = time.perf_counter()
    store = FaissVectorStore(
        args.work / args.kind,
        dimension=corpus.shape[1],
        vector_index=args.kind,
        ann_min_rows=args.ann_min_rows,
    )
    store.reserve(len(corpus))
    for lo in range(0, len(corpus), BATCH):
        hi = min(len(corpus), lo + BATCH)
        store.add([f"c{i}" for i in range(lo, hi)], np.asarray(corpus[lo:hi]), [{}] * (hi - lo))
    store.flush()
    seconds = time.perf_counter() - started
    store.close()
    _, peak = rss_mib()
    return {"build_s": seconds, "build_peak_rss_mib": peak, "disk_mib": disk_mib(args.work / args.kind)}


def serve(args: argparse.Namespace) -> dict[str, Any]:
    """Child: open the store of one kind and run the queries; returns recall, latency and memory."""
    import faiss

    from finderledge.vector_stores.faiss import FaissVectorStore

    faiss.omp_set_num_threads(args.threads)
    queries = np.load(args.work / "queries.npy")
    truth = np.load(args.work / "truth.npy")
    dim = queries.shape[1]
    started = time.perf_counter()
    store = FaissVectorStore(
        args.work / args.kind, dimension=dim, vector_index=args.kind, ann_min_rows=args.ann_min_rows
    )
    open_s = time.perf_counter() - started
    times, hits = [], 0
    for query, expected in zip(queries, truth):
        t0 = time.perf_counter()
        found = store.search(query, args.k)
        times.append(time.perf_counter() - t0)
        hits += len({int(cid[1:]) for cid, _ in found} & set(expected.tolist()))
    rss, peak = rss_mib()
    return {
        "open_s": open_s,
        "p50_ms": 1000 * float(np.percentile(times, 50)),
        "p95_ms": 1000 * float(np.percentile(times, 95)),
        f"recall@{args.k}": hits / (len(queries) * args.k),
        "serving_rss_mib": rss,
        "serving_peak_rss_mib": peak,
        "approximate_index": getattr(store, "_ann", None) is not None,
    }


def child(args: argparse.Namespace, role: str, kind: str) -> dict[str, Any]:
    """Run ``role`` for ``kind`` in a fresh interpreter (its RSS is its own)."""
    cmd = [sys.executable, __file__, "--role", role, "--kind", kind, "--work", str(args.work)]
    cmd += ["--threads", str(args.threads), "--build-threads", str(args.build_threads), "--k", str(args.k)]
    cmd += ["--ann-min-rows", str(args.ann_min_rows)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="corpus vectors")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--threads", type=int, default=1, help="FAISS threads while serving (every kind)")
    parser.add_argument("--build-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--ann-min-rows", type=int, default=None, help="default: the store's")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--out", type=Path, default=None, help="write the results here as JSON")
    parser.add_argument("--role", choices=("build", "serve"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--kind", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ann_min_rows is None:
        from finderledge.vector_stores.ann_index import MIN_ROWS

        args.ann_min_rows = MIN_ROWS
    if args.role is not None:
        print(json.dumps(build(args) if args.role == "build" else serve(args)))
        return
    own = args.work is None
    args.work = Path(tempfile.mkdtemp(prefix="bench_vector_index_")) if own else args.work
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        spec = {"n": args.n, "dim": args.dim, "clusters": args.clusters, "queries": args.queries, "k": args.k}
        made = args.work / "data.json"
        if not made.is_file() or json.loads(made.read_text()) != spec:  # a kept --work folder is reused
            corpus = mixture(args.n, args.dim, args.clusters, seed=1)
            queries = mixture(args.queries, args.dim, args.clusters, seed=2)
            np.save(args.work / "corpus.npy", corpus)
            np.save(args.work / "queries.npy", queries)
            np.save(args.work / "truth.npy", exact_top(queries, corpus, args.k))
            made.write_text(json.dumps(spec))
            del corpus
        print(f"data: {args.n} x {args.dim} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        rows = []
        for kind in args.kinds.split(","):
            row = {"kind": kind, "load_before": os.getloadavg()[0]}
            row.update(child(args, "build", kind))
            row.update(child(args, "serve", kind))
            row["load_after"] = os.getloadavg()[0]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
            shutil.rmtree(args.work / kind, ignore_errors=True)
        result = {
            "benchmark": "bench_vector_index",
            "n": args.n,
            "dim": args.dim,
            "clusters": args.clusters,
            "queries": args.queries,
            "k": args.k,
            "threads": args.threads,
            "build_threads": args.build_threads,
            "cpus": os.cpu_count(),
            "vectors": "synthetic normalised Gaussian mixture (no model embeds 1M texts here in time)",
            "rows": rows,
        }
        print(json.dumps(result, indent=1))
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    finally:
        if own and not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
