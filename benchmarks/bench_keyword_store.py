"""Benchmark FinderLedge's KeywordStore against bm25s and LangChain's BM25Retriever.

Corpus: N chunks made of the sentences of SciFact (``/work/shared/datasets/scifact/corpus.jsonl``,
read in place), shuffled and repeated as needed to reach N.  Queries: the first 100 SciFact queries.
All three systems get the same tokens (FinderLedge's AutoTokenizer), k=10.

    python benchmarks/bench_keyword_store.py --n 100000 --out bench-100k.json
    python benchmarks/bench_keyword_store.py --n 1000000 --out bench-1m.json

Measured:
* query latency (mean/median over the queries, query tokenization included for every system);
  LangChain is slow, so it runs only ``--langchain-queries`` queries and its per-query mean is used;
* time to add one chunk to the N-chunk index vs rebuilding a bm25s index over N+1 chunks
  (bm25s gets pre-tokenized input, so its rebuild time excludes tokenization);
* time to open the persisted index in a fresh subprocess (constructor + first query, after imports);
* peak and retained RSS while building each index, each in its own subprocess.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from finderledge.keyword_store import KeywordStore
from finderledge.tokenizer import AutoTokenizer

# bm25s runs with the same BM25 parameters as KeywordStore's defaults, so scores can be compared.
_STORE_DEFAULTS = KeywordStore()
K1, B = _STORE_DEFAULTS.k1, _STORE_DEFAULTS.b

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def load_corpus(n: int, seed: int, data: Path = DATA) -> tuple[list[str], list[str]]:
    """N chunk texts (SciFact sentences, shuffled, repeated as needed) and their ids."""
    sentences: list[str] = []
    with open(data / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            for s in _SENT_RE.split(d.get("text") or ""):
                if len(s.split()) >= 4:
                    sentences.append(s.strip())
    rng = random.Random(seed)
    texts: list[str] = []
    while len(texts) < n:
        batch = sentences[:]
        rng.shuffle(batch)
        texts.extend(batch[: n - len(texts)])
    return [f"c{i}" for i in range(n)], texts


def load_queries(count: int, data: Path = DATA) -> list[str]:
    with open(data / "queries.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:count]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """Peak RSS since the last :func:`reset_peak_rss` (VmHWM), or since start as a fallback."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (Linux ``clear_refs`` 5); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def time_queries(fn: Callable[[str], Any], queries: list[str]) -> dict[str, float]:
    fn(queries[0])  # warm-up
    times = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        times.append(time.perf_counter() - t)
    return {
        "queries": len(queries),
        "mean_ms": 1000 * statistics.fmean(times),
        "median_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * float(np.percentile(times, 95)),
    }


def bm25s_search(retriever: Any, tokenizer: AutoTokenizer, query: str, k: int = 10) -> list[int]:
    """Top-k doc indices from bm25s for ``query`` tokenized like ours (score > 0 only)."""
    ids = retriever.get_tokens_ids(tokenizer(query))
    if not ids:
        return []
    scores = retriever.get_scores_from_ids(ids)
    top = np.argpartition(-scores, k)[:k]
    top = top[np.argsort(-scores[top])]
    return [int(i) for i in top if scores[i] > 0]


def build_bm25s(tokens: list[list[str]]) -> Any:
    import bm25s

    retriever = bm25s.BM25(method="lucene", k1=K1, b=B)
    retriever.index(tokens, show_progress=False)
    return retriever


# --------------------------------------------------------------------------------------------------
def memory_child(system: str, n: int, seed: int) -> None:
    """Run in a subprocess: build one index, print RSS figures as JSON."""
    ids, texts = load_corpus(n, seed)
    tok = AutoTokenizer()
    tokens = [tok(t) for t in texts] if system == "bm25s" else None
    gc.collect()
    base = rss_mb()
    reset_ok = reset_peak_rss()  # so corpus loading does not count as the build's peak
    peak_before = peak_rss_mb()
    t = time.perf_counter()
    if system == "ours":
        store = KeywordStore(tokenizer=tok)
        for s in range(0, n, 100_000):
            store.add(ids[s : s + 100_000], texts[s : s + 100_000])
        obj: Any = store
    else:
        assert tokens is not None
        obj = build_bm25s(tokens)
    build_s = time.perf_counter() - t
    gc.collect()
    print(
        json.dumps(
            {
                "system": system,
                "baseline_rss_mb": base,
                "retained_mb": rss_mb() - base,
                "peak_build_mb": peak_rss_mb() - base,
                "peak_reset": reset_ok,
                "peak_rss_before_mb": peak_before,
                "build_s": build_s,
                "alive": obj is not None,
            }
        )
    )


def measure_memory(system: str, n: int, seed: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", system, "--n", str(n), "--seed", str(seed)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_open(path: Path, query: str) -> dict[str, float]:
    code = (
        "import time, json\n"
        "t0 = time.perf_counter()\n"
        "from finderledge.keyword_store import KeywordStore\n"
        "t1 = time.perf_counter()\n"
        f"ks = KeywordStore({str(path)!r})\n"
        "t2 = time.perf_counter()\n"
        f"ks.search({query!r}, k=10)\n"
        "t3 = time.perf_counter()\n"
        "print(json.dumps({'import_s': t1 - t0, 'open_s': t2 - t1, 'first_query_s': t3 - t2, 'chunks': len(ks)}))\n"
    )
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["open_s"] + r["first_query_s"])
    return best


# --------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="number of chunks")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--langchain-queries", type=int, default=5, help="queries timed for LangChain")
    parser.add_argument("--no-langchain", action="store_true", help="skip LangChain BM25Retriever")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    parser.add_argument("--adds", type=int, default=20, help="single-chunk adds timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--memory-child", choices=["ours", "bm25s"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    if args.memory_child:
        memory_child(args.memory_child, args.n, args.seed)
        return 0

    res: dict[str, Any] = {"n": args.n, "seed": args.seed, "python": sys.version.split()[0]}
    t = time.perf_counter()
    ids, texts = load_corpus(args.n, args.seed)
    queries = load_queries(args.queries)
    res["load_s"] = time.perf_counter() - t
    print(f"corpus: {len(texts):,} chunks from SciFact sentences, {len(queries)} queries", flush=True)
    tok = AutoTokenizer()

    # ---- ours: build, queries
    store = KeywordStore(tokenizer=tok)
    t = time.perf_counter()
    for s in range(0, args.n, 100_000):
        store.add(ids[s : s + 100_000], texts[s : s + 100_000])
    res["ours_build_s"] = time.perf_counter() - t
    res["ours_segments"] = len(store.stats()["segments"])
    res["ours_query"] = time_queries(lambda q: store.search(q, k=10), queries)
    print(f"ours built in {res['ours_build_s']:.1f} s (incl. tokenization)", flush=True)

    # ---- bm25s: same tokens
    t = time.perf_counter()
    tokens = [tok(x) for x in texts]
    res["tokenize_s"] = time.perf_counter() - t
    t = time.perf_counter()
    retriever = build_bm25s(tokens)
    res["bm25s_build_s"] = time.perf_counter() - t
    res["bm25s_query"] = time_queries(lambda q: bm25s_search(retriever, tok, q), queries)
    print(
        f"bm25s built in {res['bm25s_build_s']:.1f} s (+{res['tokenize_s']:.1f} s tokenization)", flush=True
    )
    # Sanity: same top-10 id sets, and same top-10 score lists (the corpus repeats sentences, so
    # ties are common and are broken differently: by id here, by position in bm25s).
    same = same_scores = 0
    for q in queries:
        ours_hits = store.search(q, 10)
        theirs = bm25s_search(retriever, tok, q)
        same += {x for x, _ in ours_hits} == {ids[i] for i in theirs}
        ref = retriever.get_scores_from_ids(retriever.get_tokens_ids(tok(q))) if theirs else None
        ours_s = np.array([s / (K1 + 1) for _, s in ours_hits])  # bm25s leaves out (k1 + 1)
        theirs_s = np.array([ref[i] for i in theirs]) if ref is not None else np.zeros(0)
        same_scores += len(ours_s) == len(theirs_s) and bool(np.allclose(ours_s, theirs_s, rtol=1e-5))
    res["same_top10_share"] = same / len(queries)
    res["same_top10_scores_share"] = same_scores / len(queries)

    # ---- add one chunk vs rebuild bm25s
    add_times = []
    for j in range(args.adds):
        text = texts[(j * 7919) % len(texts)]
        t = time.perf_counter()
        store.add([f"new-{j}"], [text])
        add_times.append(time.perf_counter() - t)
    res["ours_add_one_ms"] = 1000 * statistics.median(add_times)
    t = time.perf_counter()
    build_bm25s(tokens + [tokens[0]])
    res["bm25s_rebuild_s"] = time.perf_counter() - t
    res["ours_query_after_adds"] = time_queries(lambda q: store.search(q, k=10), queries[:20])
    retriever = None  # free it before the next measurements
    gc.collect()

    # ---- persistence
    with tempfile.TemporaryDirectory(prefix="kwbench-") as tmp:
        path = Path(tmp) / "index"
        persisted = KeywordStore(path, tokenizer=tok)
        persisted._segments = store._segments  # reuse the built segments (same process, no rebuild)
        persisted._buffer = store._buffer
        persisted._live_count, persisted._total_len = store._live_count, store._total_len
        persisted._next_segment = store._next_segment
        persisted._dirty = True
        t = time.perf_counter()
        persisted.flush()
        res["flush_all_s"] = time.perf_counter() - t
        persisted.add(["flush-probe"], ["a single new sentence about protein folding"])
        t = time.perf_counter()
        persisted.flush()
        res["flush_one_add_s"] = time.perf_counter() - t
        res["index_bytes"] = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        res["open"] = measure_open(path, queries[0])
        for seg in store._segments:  # flush wrote them; keep the in-memory store independent
            seg.persisted = False

    # ---- LangChain
    if not args.no_langchain:
        import warnings

        warnings.filterwarnings("ignore")
        from langchain_community.retrievers import BM25Retriever

        cache = dict(zip(texts, tokens))
        t = time.perf_counter()
        lc = BM25Retriever.from_texts(texts, preprocess_func=lambda x: cache.get(x) or tok(x), k=10)
        res["langchain_build_s"] = time.perf_counter() - t
        lc.preprocess_func = tok  # queries are tokenized for real, as for the other systems
        res["langchain_query"] = time_queries(lc.invoke, queries[: args.langchain_queries])
        del lc, cache
    del tokens
    gc.collect()

    # ---- memory (separate processes)
    if not args.no_memory:
        res["memory"] = {s: measure_memory(s, args.n, args.seed) for s in ("ours", "bm25s")}

    # ---- report
    ours_ms = res["ours_query"]["mean_ms"]
    res["ratios"] = {
        "bm25s_over_ours_latency": res["bm25s_query"]["mean_ms"] / ours_ms,
        "bm25s_rebuild_over_ours_add": 1000 * res["bm25s_rebuild_s"] / res["ours_add_one_ms"],
    }
    if "langchain_query" in res:
        res["ratios"]["langchain_over_ours_latency"] = res["langchain_query"]["mean_ms"] / ours_ms
    print_table(res)
    if args.out:
        args.out.write_text(json.dumps(res, indent=2), encoding="utf-8")
    return 0


def print_table(res: dict[str, Any]) -> None:
    n = res["n"]
    rows = [("metric", "FinderLedge", "bm25s", "LangChain BM25", "ratio")]
    lc = res.get("langchain_query")
    rows.append(
        (
            "query mean ms (k=10)",
            f"{res['ours_query']['mean_ms']:.2f}",
            f"{res['bm25s_query']['mean_ms']:.2f}",
            f"{lc['mean_ms']:.1f} ({lc['queries']} q)" if lc else "-",
            f"bm25s/ours {res['ratios']['bm25s_over_ours_latency']:.2f}x"
            + (f", LC/ours {res['ratios']['langchain_over_ours_latency']:.0f}x" if lc else ""),
        )
    )
    rows.append(
        (
            "query median ms",
            f"{res['ours_query']['median_ms']:.2f}",
            f"{res['bm25s_query']['median_ms']:.2f}",
            f"{lc['median_ms']:.1f}" if lc else "-",
            "",
        )
    )
    rows.append(
        (
            "build s",
            f"{res['ours_build_s']:.1f} (incl. tok)",
            f"{res['bm25s_build_s']:.1f} (+{res['tokenize_s']:.1f} tok)",
            f"{res['langchain_build_s']:.1f} (cached tok)" if lc else "-",
            "",
        )
    )
    rows.append(
        (
            "add 1 chunk / rebuild",
            f"{res['ours_add_one_ms']:.3f} ms",
            f"{res['bm25s_rebuild_s']:.2f} s",
            "-",
            f"{res['ratios']['bm25s_rebuild_over_ours_add']:.0f}x",
        )
    )
    op = res["open"]
    rows.append(
        (
            "open in new process",
            f"{op['open_s']:.3f} s (+{op['first_query_s']:.3f} s 1st query)",
            "-",
            "-",
            f"import {op['import_s']:.2f} s",
        )
    )
    rows.append(
        (
            "flush all / after 1 add",
            f"{res['flush_all_s']:.2f} s / {res['flush_one_add_s']:.3f} s",
            "-",
            "-",
            "",
        )
    )
    if "memory" in res:
        mo, mb = res["memory"]["ours"], res["memory"]["bm25s"]
        rows.append(
            (
                "peak RSS build MB",
                f"{mo['peak_build_mb']:.0f}",
                f"{mb['peak_build_mb']:.0f}",
                "-",
                f"ours/bm25s {mo['peak_build_mb'] / max(mb['peak_build_mb'], 1):.2f}x",
            )
        )
        rows.append(
            (
                "retained RSS MB",
                f"{mo['retained_mb']:.0f}",
                f"{mb['retained_mb']:.0f}",
                "-",
                f"ours/bm25s {mo['retained_mb'] / max(mb['retained_mb'], 1):.2f}x",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    print(
        f"\nKeywordStore benchmark, N = {n:,} chunks; vs bm25s: same top-10 ids on "
        f"{res['same_top10_share']:.0%} of queries, same top-10 scores on "
        f"{res.get('same_top10_scores_share', float('nan')):.0%} (the rest: ties broken differently)"
    )
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(f"index on disk: {res['index_bytes'] / 2**20:.1f} MiB; segments: {res['ours_segments']}")


if __name__ == "__main__":
    sys.exit(main())
