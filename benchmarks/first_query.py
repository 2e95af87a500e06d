"""A fresh process's open and first hybrid query over an existing FinderLedge directory (issue 29).

    nice -n 5 python benchmarks/bench_scale.py --n 1000000 --work /tmp/scale   # builds /tmp/scale/finderledge
    PYTHONPATH=src nice -n 5 python benchmarks/first_query.py /tmp/scale/finderledge [--profile]

The directory must come from ``bench_scale.py`` (its queries are embedded by the same seeded stand-in).  Prints
one JSON line: ``open_s``, ``first_hybrid_s`` (which loads the vector index), ``second_s``; ``--profile``
prints a cProfile of the first query to stderr.  Run two checkouts on the same directory, interleaved, to
compare them.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import DIM, _given_embeddings, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--profile", action="store_true", help="cProfile of the first query (stderr)")
    args = parser.parse_args()
    import finderledge
    from finderledge import FinderLedge

    emb = _given_embeddings([], np.zeros((0, DIM), np.float32))
    qs = queries(3)
    start = time.perf_counter()
    fl = FinderLedge(args.directory, embedding=emb, show_progress=False, env_file=None)
    open_s = time.perf_counter() - start
    profiler = cProfile.Profile() if args.profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    fl.search(qs[0], k=10)
    if profiler:
        profiler.disable()
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    fl.search(qs[1], k=10)
    second_s = time.perf_counter() - start
    fl.close()
    if profiler:
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)
    result = {"src": finderledge.__file__, "open_s": open_s, "first_hybrid_s": first_s, "second_s": second_s}
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
