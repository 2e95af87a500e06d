"""Keyword searches while another instance writes: p50 per ``k`` with a one-document commit every ``--every``
searches, the trees (``--src``, ``--other-src``) alternated run by run, each in a fresh process.

Every commit moves the searching instance to a later ledger ``seq``; the hits' records it keeps
(``ranking/records.py``) are what this measures: emptied at each commit, or kept but for the documents the
commit changed.  The index is ``bench_scale``'s synthetic corpus with given vectors (``--n`` chunks, built once
into ``--workdir`` and copied for every run, since the runs write into it).  ``--postgres``: the ledger in a
PostgreSQL schema instead (pgserver, in ``--workdir``; ``--keyword-index`` local or engine), both instances
opened on empty local folders as two app servers would be, each run removing the documents it wrote.

    python benchmarks/bench_search_beside_writes.py --n 10000 --every 10 --src src --other-src /tmp/old/src
    python benchmarks/bench_search_beside_writes.py --n 10000 --postgres --keyword-index engine --src src ...
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_floor import _open_finderledge
from bench_scale import BATCH, DIM, _given_embeddings, child_build_fl, corpus, queries, vectors_of

ROOT = Path(__file__).resolve().parents[1]
WARM = 500  # searches before the timing: the records of their hits fill the cache
SCHEMA = "beside_writes"


def _open_postgres(folder: Path, url: str, keyword_index: str, embedding: Any = None) -> Any:
    from finderledge import FinderLedge

    emb = embedding or _given_embeddings([], np.zeros((0, DIM), np.float32))  # queries only: seeded vectors
    return FinderLedge(
        folder,
        database_url=url,
        database_schema=SCHEMA,
        keyword_index=keyword_index,
        embedding=emb,
        show_progress=False,
        env_file=None,
    )


def build_postgres(url: str, n: int, keyword_index: str, folder: Path) -> None:
    texts = corpus(n)
    with _open_postgres(folder, url, keyword_index, _given_embeddings(texts, vectors_of(n))) as fl:
        for at in range(0, n, BATCH):
            fl.add_texts(texts[at : at + BATCH])


def child(
    index: Path, every: int, k: int, count: int, url: str = "", keyword_index: str = ""
) -> dict[str, Any]:
    """In a copy of ``index`` (``url``: in the PostgreSQL schema, from empty local folders): ``count`` keyword
    searches at ``k``, another instance writing one document before every ``every``-th; the searches' p50 and
    mean."""
    import finderledge

    with tempfile.TemporaryDirectory() as tmp:
        if url:
            reader = _open_postgres(Path(tmp) / "reader", url, keyword_index)
            writer = _open_postgres(Path(tmp) / "writer", url, keyword_index)
        else:
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
        if url:  # the next run searches the same corpus
            for i in range(0, count, every):
                writer.remove_document(f"new{i}")
        chunks_after = reader.count()["chunks"]
        reader.close()
        writer.close()
    return {
        "library": str(Path(finderledge.__file__).resolve().parents[1]),
        "k": k,
        "p50_ms": 1000 * statistics.median(spent),
        "mean_ms": 1000 * statistics.mean(spent),
        "chunks_after": chunks_after,
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
    parser.add_argument("--postgres", action="store_true", help="the ledger in PostgreSQL (pgserver)")
    parser.add_argument("--keyword-index", default="engine", choices=("local", "engine"))
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", nargs=6, metavar=("INDEX", "EVERY", "K", "COUNT", "URL", "KEYWORD_INDEX"))
    args = parser.parse_args()
    if args.child:
        index, every, k, count, url, keyword_index = args.child
        url = "" if url == "-" else url
        print(json.dumps(child(Path(index), int(every), int(k), int(count), url, keyword_index)))
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="beside_writes_"))
    index, url, server = work / f"fl{args.n}", "-", None
    if args.postgres:
        from bench_postgres import start_postgres

        url, server = start_postgres(work / "pg" / "data")
        index = work / f"pg{args.n}_{args.keyword_index}"
        if not index.exists():
            build_postgres(url, args.n, args.keyword_index, index)
    elif not index.exists():
        child_build_fl(index, args.n, False)
    trees = [args.src] + ([args.other_src] if args.other_src else [])
    runs = []
    for round_no in range(args.rounds):
        for k in (int(x) for x in args.k.split(",")):
            for src in trees if round_no % 2 == 0 else trees[::-1]:
                cmd = [sys.executable, __file__, "--child", str(index), str(args.every), str(k)]
                cmd += [str(args.count), url, args.keyword_index]
                proc = subprocess.run(
                    cmd, env={**os.environ, "PYTHONPATH": src}, capture_output=True, text=True, check=True
                )
                run = json.loads(proc.stdout.strip().splitlines()[-1])
                run.update(round=round_no + 1, load=list(os.getloadavg()))
                runs.append(run)
                print(json.dumps(run), flush=True)
    result = {"command": " ".join(sys.argv), "n": args.n, "every": args.every, "runs": runs}
    result["ledger"] = f"postgres, keyword_index={args.keyword_index}" if args.postgres else "sqlite"
    if server is not None:
        server.cleanup()
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
