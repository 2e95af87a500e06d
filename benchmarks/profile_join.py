"""Where a join's seconds go (issue 43): cProfile and every SQL statement of one engine-mode join.

Starts PostgreSQL on ``WORKDIR/pg/pgdata`` (a ``bench_join.py --workdir WORKDIR`` build), then a spawned process
opens an empty local directory with ``keyword_index="engine"`` and answers its first hybrid search under
cProfile, with psycopg's statements timed (``bench_postgres.SqlTimer``); prints the times, the statements of the
open and of the searches, and the profile (cumulative and own time).

    PYTHONPATH=src python benchmarks/profile_join.py /tmp/w100k          # profiled
    PYTHONPATH=src python benchmarks/profile_join.py /tmp/w100k --plain  # timings and statements only
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing as mp
import os
import pstats
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _child(url: str, directory: str, profile: bool, searches: int, conn: Any) -> None:
    sys.path.insert(0, str(HERE))
    from bench_join import SCHEMA, _open  # numpy, psycopg, langchain_core: imported before the timing
    from bench_postgres import SqlTimer, TopicCorpus, TopicEmbeddings

    start = time.perf_counter()
    import finderledge.facade  # noqa: F401

    imported = time.perf_counter() - start
    corpus = TopicCorpus()
    queries = [corpus.query(n) for n in range(searches)]
    timer = SqlTimer().__enter__()
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    t0 = time.perf_counter()
    fl = _open(Path(directory), url, SCHEMA, TopicEmbeddings(corpus), "engine")
    t1 = time.perf_counter()
    at_open = {k: list(v) for k, v in timer.by_statement.items()}
    fl.search(queries[0], k=10)
    t2 = time.perf_counter()
    if prof:
        prof.disable()
    later = []
    for query in queries[1:]:
        t = time.perf_counter()
        fl.search(query, k=10)
        later.append(time.perf_counter() - t)
    fl.close()
    timer.__exit__()

    def table(stats: dict[str, list[float]]) -> list[list[Any]]:
        return sorted(([k, int(v[0]), round(v[1], 4)] for k, v in stats.items()), key=lambda r: -r[2])

    out: dict[str, Any] = {
        "import_s": round(imported, 3),
        "open_s": round(t1 - t0, 3),
        "first_search_s": round(t2 - t1, 3),
        "later_search_p50_s": round(sorted(later)[len(later) // 2], 3) if later else None,
        "open_statements": table(at_open),
        "all_statements": table(timer.by_statement),
    }
    if prof:
        for key, order, lines in (("profile", "cumulative", 60), ("profile_own", "tottime", 25)):
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats(order).print_stats(lines)
            out[key] = text.getvalue()
    conn.send(out)


def main() -> None:
    from bench_postgres import start_postgres

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path, help="a bench_join.py --workdir (its server data)")
    parser.add_argument("--plain", action="store_true", help="no cProfile (timings and statements only)")
    parser.add_argument("--searches", type=int, default=6, help="searches after the open (the first timed)")
    args = parser.parse_args()
    url, server = start_postgres(args.workdir / "pg" / "pgdata")
    try:
        directory = args.workdir / "profile-join"
        shutil.rmtree(directory, ignore_errors=True)
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(url, str(directory), not args.plain, args.searches, child))
        proc.start()
        child.close()
        out = parent.recv()
        proc.join(60)
        shutil.rmtree(directory, ignore_errors=True)
    finally:
        server.cleanup()
    profile, own = out.pop("profile", ""), out.pop("profile_own", "")
    statements = {k: out.pop(k) for k in ("open_statements", "all_statements")}
    print(json.dumps(out))
    for name, rows in statements.items():
        print(f"{name} (statement, count, seconds):")
        for row in rows[:25]:
            print("  ", row)
    print(profile)
    print(own)


if __name__ == "__main__":
    main()
