"""Keyword searches while another instance writes: p50 per ``k`` with a one-document commit every ``--every``
searches, the trees (``--src``, ``--other-src``) alternated run by run, each in a fresh process.

Every commit moves the searching instance to a later ledger ``seq``; the hits' records it keeps
(``ranking/records.py``) are what this measures: emptied at each commit, or kept but for the documents the
commit changed.  The index is ``bench_scale``'s synthetic corpus with given vectors (``--n`` chunks, built once
into ``--workdir`` and copied for every run, since the runs write into it).

    python benchmarks/bench_search_beside_writes.py --n 10000 --every 10 --src src --other-src /tmp/old/src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_floor import _open_finderledge
from bench_scale import child_build_fl, queries

ROOT = Path(__file__).resolve().parents[1]
WARM = 500  # searches before the timing: the records of their hits fill the cache


def child(index: Path, every: int, k: int, count: int) -> dict[str, Any]:
    """In a copy of ``index``: ``count`` keyword searches at ``k``, another instance writing one document
    before every ``every``-th; the searches' p50 and mean."""
    import finderledge

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "fl"
        shutil.copytree(index, folder)
        reader, writer = _open_finderledge(folder), _open_finderledge(folder)
        qs = queries(WARM + count + 5)[5:]
        for q in qs[:WARM]:
            reader.search(q, k=k, search_mode="keyword")
        spent = []
        for i, q in enumerate(qs[WARM:]):
            if i % every == 0:
                writer.add_texts([f"a new note number {i} about {q}"], ids=[f"new{i}"])
            started = time.perf_counter()
            reader.search(q, k=k, search_mode="keyword")
            spent.append(time.perf_counter() - started)
        reader.close()
        writer.close()
    return {
        "library": str(Path(finderledge.__file__).resolve().parents[1]),
        "k": k,
        "p50_ms": 1000 * statistics.median(spent),
        "mean_ms": 1000 * statistics.mean(spent),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--count", type=int, default=1000, help="timed searches per run")
    parser.add_argument("--k", default="10,100")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--src", default=str(ROOT / "src"))
    parser.add_argument("--other-src", help="a second tree, run alternately with --src")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", nargs=4, metavar=("INDEX", "EVERY", "K", "COUNT"))
    args = parser.parse_args()
    if args.child:
        index, every, k, count = args.child
        print(json.dumps(child(Path(index), int(every), int(k), int(count))))
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="beside_writes_"))
    index = work / f"fl{args.n}"
    if not index.exists():
        child_build_fl(index, args.n, False)
    trees = [args.src] + ([args.other_src] if args.other_src else [])
    runs = []
    for round_no in range(args.rounds):
        for k in (int(x) for x in args.k.split(",")):
            for src in trees if round_no % 2 == 0 else trees[::-1]:
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    str(index),
                    str(args.every),
                    str(k),
                    str(args.count),
                ]
                proc = subprocess.run(
                    cmd, env={**os.environ, "PYTHONPATH": src}, capture_output=True, text=True, check=True
                )
                run = json.loads(proc.stdout.strip().splitlines()[-1])
                run.update(round=round_no + 1, load=list(os.getloadavg()))
                runs.append(run)
                print(json.dumps(run), flush=True)
    result = {"command": " ".join(sys.argv), "n": args.n, "every": args.every, "runs": runs}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
