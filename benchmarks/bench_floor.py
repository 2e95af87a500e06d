"""FinderLedge against the floor a user hand-wires from the same parts (bm25s + FAISS flat), ratios in one run.

    nice -n 5 python benchmarks/bench_floor.py --n 10000 --out benchmarks/results/floor_10k.json
    nice -n 5 python benchmarks/bench_floor.py --n 100000 --out benchmarks/results/floor_100k.json
    nice -n 5 python benchmarks/bench_floor.py --n 10000 --src /tmp/before/src   # another FinderLedge checkout

Successor of ``bench_scale.py`` (same synthetic corpus and given vectors, built by its children), with a floor
that is not handicapped, and every figure an interleaved ratio recorded with the load (``os.getloadavg``):
on a shared machine absolute times drift, a ratio measured side by side does not.

- **The floor.** bm25s scores (``get_scores``) with a fast top-k (``np.argpartition(-scores, depth)``, not
  ``bm25s.retrieve``'s, which is slow on arrays of tied zeros), the query tokenized as bm25s tokenizes
  (its token pattern and English stopwords); FAISS ``IndexFlatIP`` on the same number of OpenMP threads as
  FinderLedge's vector leg (:func:`finderledge.ranking.finder.leg_thread_cores`); 100 candidates per leg; reciprocal
  rank fusion in plain Python; the texts of the final ``k`` from memory.
- **Builds**, ``--rounds`` of them interleaved (floor, FinderLedge, floor, ...); the floor's ``fsync`` of its
  files is timed apart (``sync_s``) and the ratio given both without and with it.
- **Queries**, one process holding both, query by query (FinderLedge then the floor, the order swapped on
  every other query): keyword and hybrid at k=10 and k=100, p50 of each and their ratio, each against its
  target (hybrid <= 1.3x the floor or within 0.5 ms, keyword <= 1.5x or within 0.3 ms), in wall time and in
  CPU time of the process (``time.process_time``: on a loaded machine the wall p50 mostly says how often a
  search was preempted, the CPU p50 what it cost); warm (after a warm-up pass) and cold (page cache dropped
  just before the process opens the indexes, no warm-up); with ``--serving N`` also the same queries in a
  process that has first answered ``N`` other queries (every figure of each, on both sides): a server's
  steady state, its caches filled by earlier searches rather than by the measured ones.
- **First search** in a fresh process (imports, open, first hybrid query), both sides alternating over
  ``--rounds`` rounds, warm and cold.

FinderLedge's sources are compiled to bytecode first (``compileall``), as ``pip install`` leaves them: where
``PYTHONDONTWRITEBYTECODE`` is set, a source checkout is otherwise compiled again by every fresh process
(0.26 s of each first search here), while the floor's libraries come compiled.

Cold: ``echo 3 > /proc/sys/vm/drop_caches`` where allowed (root), else ``posix_fadvise(DONTNEED)`` on every
file of both indexes (``--cold fadvise`` asks for that directly: it leaves the machine's other files cached);
the method used is in the JSON.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import (  # a sibling script
    DIM,
    _disk,
    _given_embeddings,
    _rss_mib,
    child_build_fl,
    child_build_peer,
    queries,
    write_result,
)

SRC = Path(__file__).resolve().parent.parent / "src"
DEPTH = 100  # candidates per leg, on both sides (FinderLedge's default candidate_k)
RRF_K = 60
FIGURES = (("keyword", 10), ("keyword", 100), ("hybrid", 10), ("hybrid", 100))
#: (ratio, absolute ms) a figure meets when FinderLedge's p50 is within either of the floor's
TARGETS = {"keyword": (1.5, 0.3), "hybrid": (1.3, 0.5)}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def leg_threads(faiss: Any) -> int:
    """The OpenMP threads FinderLedge's vector leg runs on (its own rule, so both sides get the same)."""
    try:
        from finderledge.finder import leg_thread_cores  # the documented path: in every tree --src may name

        return int(leg_thread_cores(faiss))
    except ImportError:  # a FinderLedge without the rule: one core fewer than this process may use
        return max(1, len(os.sched_getaffinity(0)) - 1)


class Floor:
    """bm25s + FAISS flat + RRF, wired by hand as well as a user can: the floor FinderLedge is measured against."""

    def __init__(self, directory: Path) -> None:
        import bm25s
        import faiss
        from bm25s.tokenization import STOPWORDS_EN

        self.bm25 = bm25s.BM25.load(str(directory / "bm25s"), show_progress=False)
        self.index = faiss.read_index(str(directory / "index.faiss"))
        self.texts: list[str] = json.loads((directory / "texts.json").read_text(encoding="utf-8"))
        self.embeddings = _given_embeddings([], np.zeros((0, DIM), np.float32))
        self.threads = leg_threads(faiss)
        faiss.omp_set_num_threads(self.threads)  # this thread's team: the one that searches
        self._vocab: dict[str, int] = self.bm25.vocab_dict
        self._stop = frozenset(STOPWORDS_EN)
        self._pattern = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's default

    def keyword_ids(self, query: str, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``depth`` chunk rows by BM25 (score > 0), best first, and their scores."""
        vocab, stop = self._vocab, self._stop
        ids = [vocab[t] for t in self._pattern.findall(query.lower()) if t in vocab and t not in stop]
        if not ids:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        scores = self.bm25.get_scores(ids)  # token ids: bm25s's own scoring
        if depth < len(scores):
            top = np.argpartition(-scores, depth)[:depth]
        else:
            top = np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        top = top[scores[top] > 0]
        return top, scores[top]

    def vector_ids(self, query: str, depth: int) -> np.ndarray:
        _, found = self.index.search(
            np.asarray([self.embeddings.embed_query(query)], dtype=np.float32), depth
        )
        return found[0][found[0] >= 0]

    def keyword(self, query: str, k: int) -> list[tuple[str, float]]:
        rows, scores = self.keyword_ids(query, k)
        return [(self.texts[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]

    def hybrid(self, query: str, k: int) -> list[tuple[str, float]]:
        depth = max(k, DEPTH)
        fused: dict[int, float] = {}
        for rank, row in enumerate(self.keyword_ids(query, depth)[0].tolist(), start=1):
            fused[row] = 1.0 / (RRF_K + rank)
        for rank, row in enumerate(self.vector_ids(query, depth).tolist(), start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(fused, key=fused.__getitem__, reverse=True)[:k]
        return [(self.texts[r], fused[r]) for r in best]


def _open_finderledge(directory: Path) -> Any:
    from finderledge import FinderLedge

    emb = _given_embeddings([], np.zeros((0, DIM), np.float32))  # queries only: seeded vectors
    return FinderLedge(directory, embedding=emb, show_progress=False, env_file=None)


# -- children (each in a fresh process) -----------------------------------------------------------------
def child_first(side: str, directory: Path, query: str) -> dict[str, Any]:
    """A fresh process's imports, open and first hybrid query (k=10)."""
    t0 = time.perf_counter()
    if side == "fl":
        import finderledge  # noqa: F401
    else:
        import bm25s  # noqa: F401
        import faiss  # noqa: F401
    import_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    if side == "fl":
        fl = _open_finderledge(directory)
        open_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        fl.search(query, k=10)
        first_s = time.perf_counter() - t2
        fl.close()
    else:
        floor = Floor(directory)
        open_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        floor.hybrid(query, 10)
        first_s = time.perf_counter() - t2
    return {
        "import_s": import_s,
        "open_s": open_s,
        "first_hybrid_s": first_s,
        "total_s": import_s + open_s + first_s,
        "peak_rss_mib": _rss_mib(),
    }


def split_queries(count: int, served: int) -> tuple[list[str], list[str]]:
    """The queries answered before the measured ones (5 warm-ups, then ``served`` others) and the ``count``
    measured ones: the same measured queries whatever ``served`` is, none of them among the others."""
    qs = queries(count + 5 + served)
    return qs[:5] + qs[count + 5 :], qs[5 : count + 5]


def child_queries(fl_dir: Path, floor_dir: Path, count: int, warm: bool, served: int = 0) -> dict[str, Any]:
    """Both sides in this one process, query by query; per figure the p50s and their ratio.  ``served``: other
    queries both sides answer first, every figure of each (a serving process's steady state: FinderLedge's
    caches filled by earlier searches); the measured queries are the same whatever it is."""
    warmups, qs = split_queries(count, served)
    fl = _open_finderledge(fl_dir)
    floor = Floor(floor_dir)

    def run_fl(mode: str, q: str, k: int) -> Any:
        return fl.search(q, k=k, search_mode=mode)

    def run_floor(mode: str, q: str, k: int) -> Any:
        return floor.hybrid(q, k) if mode == "hybrid" else floor.keyword(q, k)

    answered = 0  # queries each side answered before the measured ones (every figure of each)
    if warm:
        for q in warmups:
            for mode, k in FIGURES:
                run_fl(mode, q, k)
                run_floor(mode, q, k)
            answered += 1
    names = [f"{m}_k{k}" for m, k in FIGURES]
    times: dict[str, dict[str, list[float]]] = {n: {"fl": [], "floor": []} for n in names}
    cpu: dict[str, dict[str, list[float]]] = {n: {"fl": [], "floor": []} for n in names}
    load_start = _load()
    for i, q in enumerate(qs):
        for mode, k in FIGURES:
            sides = (("fl", run_fl), ("floor", run_floor))
            for name, run in sides if i % 2 == 0 else sides[::-1]:
                c, t = time.process_time(), time.perf_counter()
                run(mode, q, k)
                times[f"{mode}_k{k}"][name].append(time.perf_counter() - t)
                cpu[f"{mode}_k{k}"][name].append(time.process_time() - c)
    load_end = _load()
    stages = _stages(fl, floor, qs)
    fl.close()
    figures = {}
    for mode, k in FIGURES:
        got = times[f"{mode}_k{k}"]
        fl_ms, floor_ms = (1000 * statistics.median(got[s]) for s in ("fl", "floor"))
        per_query = [a / b for a, b in zip(got["fl"], got["floor"])]
        # CPU seconds of the process (every thread): what a search costs, whatever else the machine runs
        fl_cpu, floor_cpu = (1000 * statistics.median(cpu[f"{mode}_k{k}"][s]) for s in ("fl", "floor"))
        ratio, within = TARGETS[mode]
        figures[f"{mode}_k{k}"] = {
            "fl_p50_ms": fl_ms,
            "floor_p50_ms": floor_ms,
            "ratio": fl_ms / floor_ms,
            "median_per_query_ratio": statistics.median(per_query),
            "diff_ms": fl_ms - floor_ms,
            "target": f"<= {ratio}x the floor or within {within} ms",
            "meets": fl_ms <= ratio * floor_ms or fl_ms - floor_ms <= within,
            "fl_cpu_p50_ms": fl_cpu,
            "floor_cpu_p50_ms": floor_cpu,
            "cpu_ratio": fl_cpu / floor_cpu if floor_cpu else None,
            "meets_cpu": fl_cpu <= ratio * floor_cpu or fl_cpu - floor_cpu <= within,
            "load_start_end": [load_start, load_end],
        }
    return {
        "figures": figures,
        "answered_before": answered,
        "stages": stages,
        "floor_faiss_threads": floor.threads,
        "peak_rss_mib": _rss_mib(),
    }


def _stages(fl: Any, floor: Floor, qs: list[str]) -> dict[str, Any] | None:
    """Where a keyword search's CPU goes, per k (p50 ms over the queries, after the figures): FinderLedge's
    BM25 leg alone, its reading of the k hits' texts and metadata from the ledger (one statement, as a search
    does), and the floor's bm25s scoring + top-k and its reading of the k texts from its list in memory.
    None for a FinderLedge without these internals (an older tree given with --src)."""
    try:
        keyword = fl.engine.replica.keyword.handle
        ledger, seq = fl.engine.ledger, fl.engine.replica.seq
    except AttributeError:
        return None

    def p50(run: Any) -> float:
        spent = []
        for q in qs:
            c = time.process_time()
            run(q)
            spent.append(time.process_time() - c)
        return 1000 * statistics.median(spent)

    out: dict[str, Any] = {}
    for k in (10, 100):
        hits = {q: [cid for cid, _ in keyword.search(q, k)] for q in qs}
        rows = {q: floor.keyword_ids(q, k)[0].tolist() for q in qs}
        out[f"k{k}"] = {
            "fl_bm25_leg_cpu_p50_ms": p50(lambda q, k=k: keyword.search(q, k)),
            "fl_read_hits_cpu_p50_ms": p50(lambda q, h=hits: ledger.get_chunks(h[q], visible_at=seq)),
            "floor_bm25_cpu_p50_ms": p50(lambda q, k=k: floor.keyword_ids(q, k)),
            "floor_read_texts_cpu_p50_ms": p50(lambda q, r=rows: [floor.texts[i] for i in r[q]]),
            "hits_p50": statistics.median(len(h) for h in hits.values()),
        }
    return out


# -- the parent -----------------------------------------------------------------------------------------
def evict(directories: list[Path], method: str) -> str:
    """Make the page cache cold for ``directories``; the method that worked (``drop_caches`` or ``fadvise``)."""
    os.sync()
    if method == "drop":
        try:
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            return "drop_caches"
        except OSError:
            pass  # not root: evict our own files only
    for directory in directories:
        for path in directory.rglob("*"):
            if path.is_file():
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
    return "fadvise"


def _child(src: Path, *argv: str) -> dict[str, Any]:
    """Run one child in a fresh interpreter with FinderLedge from ``src``; its last stdout line is its JSON."""
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, __file__, "--child", *argv], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {argv} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _builds(args: argparse.Namespace, fl_dir: Path, floor_dir: Path) -> dict[str, Any]:
    """``--rounds`` builds of each side, interleaved; the last round's directories are kept for serving."""
    rounds = []
    for r in range(args.rounds):
        for d in (fl_dir, floor_dir):
            shutil.rmtree(d, ignore_errors=True)
        row: dict[str, Any] = {"round": r + 1}
        for side, directory in (("floor", floor_dir), ("fl", fl_dir))[:: 1 if r % 2 == 0 else -1]:
            print(f"build round {r + 1}: {side} of {args.n} ...", file=sys.stderr)
            load = _load()
            kind = "build-fl" if side == "fl" else "build-peer"
            row[side] = {**_child(args.src, kind, str(directory), str(args.n)), "load_before": load}
        row["ratio"] = row["fl"]["build_s"] / row["floor"]["build_s"]
        row["ratio_vs_synced"] = row["fl"]["build_s"] / (row["floor"]["build_s"] + row["floor"]["sync_s"])
        rounds.append(row)
    fl_s = statistics.median(r["fl"]["build_s"] for r in rounds)
    floor_s = statistics.median(r["floor"]["build_s"] for r in rounds)
    synced_s = statistics.median(r["floor"]["build_s"] + r["floor"]["sync_s"] for r in rounds)
    return {
        "rounds": rounds,
        "fl_build_s_median": fl_s,
        "floor_build_s_median": floor_s,
        "floor_synced_s_median": synced_s,
        "ratio": fl_s / floor_s,
        "ratio_vs_synced": fl_s / synced_s,
        "ratio_per_round": [r["ratio"] for r in rounds],
    }


def _first_searches(args: argparse.Namespace, fl_dir: Path, floor_dir: Path) -> dict[str, Any]:
    """Open + first query in fresh processes, sides alternating, ``--rounds`` times warm then cold."""
    query = queries(1)[0]
    out: dict[str, Any] = {}
    for cache in ("warm", "cold"):
        if cache == "cold" and args.cold == "none":
            continue
        rows = []
        for r in range(args.rounds):
            row: dict[str, Any] = {}
            for side, directory in (("fl", fl_dir), ("floor", floor_dir))[:: 1 if r % 2 == 0 else -1]:
                if cache == "cold":
                    row["cold_method"] = evict([fl_dir, floor_dir], args.cold)
                row[side] = {**_child(args.src, "first", side, str(directory), query), "load_before": _load()}
            row["ratio"] = row["fl"]["total_s"] / row["floor"]["total_s"]
            rows.append(row)
        fl_s = statistics.median(r["fl"]["total_s"] for r in rows)
        floor_s = statistics.median(r["floor"]["total_s"] for r in rows)
        fl_first = statistics.median(r["fl"]["first_hybrid_s"] for r in rows)
        floor_first = statistics.median(r["floor"]["first_hybrid_s"] for r in rows)
        out[cache] = {
            "rounds": rows,
            "fl_total_s_median": fl_s,
            "floor_total_s_median": floor_s,
            "ratio": fl_s / floor_s,
            "fl_first_hybrid_s_median": fl_first,
            "floor_first_hybrid_s_median": floor_first,
        }
    return out


def main() -> None:
    """Build, search and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved builds and first searches")
    parser.add_argument("--cold", choices=("drop", "fadvise", "none"), default="drop")
    parser.add_argument(
        "--src", type=Path, default=SRC, help="FinderLedge's source folder (default: this one)"
    )
    parser.add_argument("--work", type=Path, default=None, help="folder for the two indexes (a temp one)")
    parser.add_argument(
        "--reuse", action="store_true", help="search the indexes already in --work (no builds)"
    )
    parser.add_argument("--skip", default="", help="comma-separated phases to leave out: first,cold")
    parser.add_argument(
        "--serving",
        type=int,
        default=0,
        help="also measure the queries in a process that has answered this many other queries first",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "build-fl":
            result = child_build_fl(Path(rest[0]), int(rest[1]), False)
        elif kind == "build-peer":
            result = child_build_peer(Path(rest[0]), int(rest[1]))
        elif kind == "first":
            result = child_first(rest[0], Path(rest[1]), rest[2])
        else:
            served = int(rest[4]) if len(rest) > 4 else 0
            result = child_queries(Path(rest[0]), Path(rest[1]), int(rest[2]), rest[3] == "warm", served)
        print(json.dumps(result))
        return
    skip = set(filter(None, args.skip.split(",")))
    # as installed: every fresh child imports bytecode, not the sources (see the module's docstring)
    compiled = compileall.compile_dir(str(args.src / "finderledge"), quiet=1)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_floor_"))
    fl_dir, floor_dir = work / "finderledge", work / "floor"
    result: dict[str, Any] = {
        "command": "python benchmarks/bench_floor.py " + " ".join(sys.argv[1:]),
        "finderledge_src": str(args.src),
        "finderledge_bytecode_compiled": bool(compiled),
        "n_chunks": args.n,
        "queries": args.queries,
        "rounds": args.rounds,
        "candidates_per_leg": DEPTH,
        "cpus": os.cpu_count(),
        "load_start": _load(),
    }
    if not args.reuse:
        result["build"] = _builds(args, fl_dir, floor_dir)
    result["disk_mib"] = {"fl": _disk(fl_dir) / 2**20, "floor": _disk(floor_dir) / 2**20}
    result["disk_mib"]["ratio"] = result["disk_mib"]["fl"] / result["disk_mib"]["floor"]
    print("queries, warm ...", file=sys.stderr)
    result["queries_warm"] = _child(
        args.src, "queries", str(fl_dir), str(floor_dir), str(args.queries), "warm"
    )
    if args.serving > 0:
        print(f"queries, serving (after {args.serving} others) ...", file=sys.stderr)
        result["queries_serving"] = _child(
            args.src, "queries", str(fl_dir), str(floor_dir), str(args.queries), "warm", str(args.serving)
        )
    if args.cold != "none" and "cold" not in skip:
        print("queries, cold ...", file=sys.stderr)
        result["cold_method"] = evict([fl_dir, floor_dir], args.cold)
        result["queries_cold"] = _child(
            args.src, "queries", str(fl_dir), str(floor_dir), str(args.queries), "cold"
        )
    if "first" not in skip:
        print("first searches ...", file=sys.stderr)
        result["first_search"] = _first_searches(args, fl_dir, floor_dir)
    result["load_end"] = _load()
    result["ratios"] = ratios(result)
    write_result(result, args.out)


def ratios(result: dict[str, Any]) -> dict[str, float]:
    """Every ratio of the run (FinderLedge / floor) in one flat table."""
    out = {}
    if "build" in result:
        out["build"] = result["build"]["ratio"]
        out["build_vs_synced"] = result["build"]["ratio_vs_synced"]
    out["disk"] = result["disk_mib"]["ratio"]
    for cache in ("warm", "cold", "serving"):
        for name, figure in result.get(f"queries_{cache}", {}).get("figures", {}).items():
            out[f"{name}_p50_{cache}"] = figure["ratio"]
            if figure.get("cpu_ratio") is not None:
                out[f"{name}_cpu_p50_{cache}"] = figure["cpu_ratio"]
        if cache in result.get("first_search", {}):
            out[f"first_search_{cache}"] = result["first_search"][cache]["ratio"]
    return out


if __name__ == "__main__":
    main()
