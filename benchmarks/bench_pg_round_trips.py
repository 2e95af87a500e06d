"""Statements and time per search in Postgres mode, both legs in the database, two trees alternated (issue 43).

    python benchmarks/bench_pg_round_trips.py --chunks 20000 --src /tmp/before/src --src src
    python benchmarks/bench_pg_round_trips.py --quick                 # smoke run, this tree only

Every SQL statement a search sends is a round trip to the server, which on a loaded machine costs about as
much as a short query.  One writer fills a schema with ``--chunks`` synthetic one-chunk documents
(bench_postgres.py's topic corpus and its 384-d vectors) with ``keyword_index="engine"`` and the vectors in
pgvector; then, ``--rounds`` times, each ``--src`` tree (its order swapped every round) opens it in a fresh
process and runs ``--queries`` steady hybrid and keyword searches (after 20 warm-up ones), counting the
statements sent (``psycopg.Cursor.execute``) and the transactions opened (``Connection.transaction``), and
timing each search in wall time and in the process's CPU time (on a loaded machine the wall p50 mostly says
how often a search was preempted; the CPU p50 what the client spent).  Results: a JSON with each run and the
load; a table is printed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
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
from bench_postgres import TopicCorpus, TopicEmbeddings, start_postgres  # a sibling script

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "round_trips"
WARM = 20


def _open(url: str, schema: str, corpus: TopicCorpus, folder: str) -> Any:
    """A FinderLedge over ``schema`` with its local folder at ``folder`` (a temporary one, removed by the caller)."""
    from finderledge import FinderLedge

    return FinderLedge(
        folder,
        database_url=url,
        database_schema=schema,
        embedding=TopicEmbeddings(corpus),
        keyword_index="engine",
        show_progress=False,
    )


def build(url: str, schema: str, chunks: int) -> None:
    """The writer: ``chunks`` one-chunk documents in calls of 5,000."""
    corpus = TopicCorpus()
    with tempfile.TemporaryDirectory(prefix="bench-rt-") as folder:
        fl = _open(url, schema, corpus, folder)
        try:
            for lo in range(0, chunks, 5000):
                hi = min(chunks, lo + 5000)
                fl.add_texts(
                    [corpus.text(i) for i in range(lo, hi)], ids=[f"syn{i:07d}" for i in range(lo, hi)]
                )
        finally:
            fl.close()


def measure(url: str, schema: str, queries: int) -> dict[str, Any]:
    """In this process (the tree on ``PYTHONPATH``): statements, transactions and p50s per search, by mode."""
    import psycopg

    import finderledge

    sent = {"statements": 0, "transactions": 0}
    execute, transaction = psycopg.Cursor.execute, psycopg.Connection.transaction

    def counted(cursor: Any, *args: Any, **kwargs: Any) -> Any:
        sent["statements"] += 1
        return execute(cursor, *args, **kwargs)

    def opened(conn: Any, *args: Any, **kwargs: Any) -> Any:
        sent["transactions"] += 1
        return transaction(conn, *args, **kwargs)

    psycopg.Cursor.execute = counted  # type: ignore[method-assign]
    psycopg.Connection.transaction = opened  # type: ignore[method-assign]
    corpus = TopicCorpus()
    asked = [corpus.query(n) for n in range(WARM + queries)]
    folder = tempfile.TemporaryDirectory(prefix="bench-rt-")
    fl = _open(url, schema, corpus, folder.name)
    out: dict[str, Any] = {"library_src": str(Path(finderledge.__file__).resolve().parents[1])}
    try:
        for query in asked[:WARM]:
            fl.search(query, k=10)
        for mode in ("hybrid", "keyword"):
            walls, cpus = [], []
            sent.update(statements=0, transactions=0)
            for query in asked[WARM:]:
                wall, cpu = time.perf_counter(), time.process_time()
                fl.search(query, k=10, search_mode=mode)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
            out[mode] = {
                "statements_per_search": round(sent["statements"] / queries, 2),
                "transactions_per_search": round(sent["transactions"] / queries, 2),
                "wall_p50_ms": round(statistics.median(walls) * 1e3, 3),
                "cpu_p50_ms": round(statistics.median(cpus) * 1e3, 3),
            }
    finally:
        fl.close()
        folder.cleanup()
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    return out


def _child(src: str | None, *args: str) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(src).resolve()), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {args[0]} ({src or 'this tree'}) failed:\n{done.stderr[-3000:]}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def table(result: dict[str, Any]) -> str:
    rows = [
        "run | tree | mode | statements | transactions | wall p50 ms | CPU p50 ms",
        "---|---|---|---|---|---|---",
    ]
    for i, run in enumerate(result["runs"]):
        for mode in ("hybrid", "keyword"):
            m = run[mode]
            rows.append(
                f"{i} | {run['library_src']} | {mode} | {m['statements_per_search']} |"
                f" {m['transactions_per_search']} | {m['wall_p50_ms']} | {m['cpu_p50_ms']}"
            )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", action="append", help="a FinderLedge src folder (repeat; default this tree)")
    parser.add_argument("--workdir", type=Path, default=None, help="server data (a temp folder)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 600 chunks, 20 queries, 1 round")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, url, schema, n = args.child
        result = measure(url, schema, int(n)) if kind == "measure" else (build(url, schema, int(n)) or {})
        sys.stdout.write(json.dumps(result) + "\n")
        return result
    if args.quick:
        args.chunks, args.queries, args.rounds = 600, 20, 1
    srcs: list[str | None] = list(args.src) if args.src else [None]
    own = args.workdir is None  # a temp folder of ours: removed when the run ends
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-rt-"))
    url, server = start_postgres(workdir / "pg" / "pgdata")
    try:
        _child(srcs[-1], "build", url, SCHEMA, str(args.chunks))
        runs = []
        for r in range(args.rounds):
            for src in srcs if r % 2 == 0 else srcs[::-1]:
                runs.append(_child(src, "measure", url, SCHEMA, str(args.queries)))
    finally:
        server.cleanup()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "command": "python benchmarks/bench_pg_round_trips.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "chunks": args.chunks,
        "queries": args.queries,
        "cpus": os.cpu_count(),
        "runs": runs,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    sys.stdout.write(table(result) + "\n")
    return result


if __name__ == "__main__":
    main()
