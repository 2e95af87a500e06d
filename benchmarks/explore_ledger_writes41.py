"""Why a build writes ~12x its directory at 1M chunks (issue 41): SQLite B-tree pages rewritten per commit.

    python benchmarks/explore_ledger_writes41.py --rows 300000 --batch 2000 --out /tmp/ledger_writes.json
    python benchmarks/explore_ledger_writes41.py --rows 1000000 --batch 2000 --page-sizes 16384 --tiers 0.1 0.2 \
        --small 0 20000 --out benchmarks/results/ledger_writes41_tiers_1m.json

A table shaped like the ledger's ``chunks`` (an autoincrement rowid, a ``UNIQUE`` text id, a ~1.6 kB body) is
filled in commits of ``--batch`` rows (FinderLedge commits once per write call), in WAL mode with a PASSIVE
checkpoint every 10 commits, once with random ids (content hashes, as FinderLedge's are) and once with
ascending ones, at 16 kB and 4 kB pages.  Then random ids in tiers, as an LSM keeps them (``--tiers``,
``--small``): the rows never move (ascending rowids), and the id index is two or three ``id -> seq`` tables,
the newest small (each commit touches its few, hot pages), merged into the next one in one transaction, in id
order, when it reaches a share of it (``--tiers``) or a number of ids (``--small``).  It reports the bytes the process wrote (``/proc/self/io``,
``write_bytes``, after ``os.sync``) against the file's size.  Random keys land on every leaf of the id index:
each commit rewrites (into the WAL, then by the checkpoint into the file) every leaf page it touched, so the
bytes written per commit grow with the table, not with the batch.  Ascending keys append.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BODY = b"x" * 1600  # a 384-d float32 vector and a short text


def written_bytes() -> int | None:
    """This process's bytes sent to storage so far (None where ``/proc/self/io`` is not readable)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("write_bytes"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _lookup_us(db: sqlite3.Connection, sql: str, ids: list[str]) -> float:
    """Median microseconds of one id look-up (each of ``ids`` once, a row expected)."""
    times = []
    for key in ids:
        started = time.perf_counter()
        assert db.execute(sql, (key,)).fetchone() is not None
        times.append(time.perf_counter() - started)
    return round(sorted(times)[len(times) // 2] * 1e6, 1)


def fill(
    path: Path, rows: int, batch: int, keys: str, page_size: int, share: float = 0.0, small: int = 0
) -> dict[str, Any]:
    """Fill one table in commits of ``batch`` rows; bytes written, file size and seconds.  ``share`` > 0: the
    id index in tiers (id -> seq tables; the rows never move), the recent ids merged into the main ones when
    they reach ``share`` of them; ``small`` > 0 adds a newest tier of at most that many ids, merged into the
    recent one (an LSM's levels: each commit then touches only the small tier's few pages)."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size={page_size}")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    levels = ["ids"] + (["ids_recent"] if share else []) + (["ids_new"] if share and small else [])
    if share:
        db.execute("CREATE TABLE chunks (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, body BLOB)")
        for table in levels:
            db.execute(f"CREATE TABLE {table} (id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID")
        insert = "INSERT INTO chunks(id, body) VALUES (?, ?)"
        lookup = " UNION ALL ".join(f"SELECT seq FROM {table} WHERE id = ?1" for table in levels)
    else:
        db.execute(
            "CREATE TABLE chunks (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, body BLOB)"
        )
        insert = "INSERT INTO chunks(id, body) VALUES (?, ?)"
        lookup = "SELECT seq FROM chunks WHERE id = ?"
    sizes = dict.fromkeys(levels, 0)
    before, started, n, merges, sample = written_bytes(), time.perf_counter(), 0, 0, []
    for commit in range(0, rows, batch):
        ids = range(n + 1, n + 1 + min(batch, rows - commit))
        n += len(ids)
        if keys == "random":
            made = [hashlib.sha256(str(i).encode()).hexdigest()[:32] for i in ids]
        else:
            made = [f"{i:032d}" for i in ids]
        sample.extend(k + "-0000" for k in made[:5])
        db.execute("BEGIN")
        db.executemany(insert, [(k + "-0000", BODY) for k in made])
        if share:
            db.execute(f"INSERT INTO {levels[-1]} SELECT id, seq FROM chunks WHERE seq > ?", (n - len(made),))
            sizes[levels[-1]] += len(made)
        db.execute("COMMIT")
        for upper, lower in reversed(list(itertools.pairwise(levels))):  # newest first
            limit = small if lower == "ids_new" else max(share * sizes[upper], 4 * batch)
            if sizes[lower] >= limit:
                db.execute("BEGIN")  # one pass over the upper tier's leaves, in key order
                db.execute(f"INSERT INTO {upper} SELECT id, seq FROM {lower} ORDER BY id")
                db.execute(f"DELETE FROM {lower}")
                db.execute("COMMIT")
                sizes[upper], sizes[lower], merges = sizes[upper] + sizes[lower], 0, merges + 1
        if (commit // batch) % 10 == 9:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    lookup_us = _lookup_us(db, lookup, sample[:: max(1, len(sample) // 2000)])
    plan = " / ".join(str(r[-1]) for r in db.execute("EXPLAIN QUERY PLAN " + lookup, ("x",)))
    db.close()
    os.sync()
    after = written_bytes()
    size = path.stat().st_size
    wrote = None if before is None or after is None else after - before
    return {
        "keys": keys,
        "tiers": {"share": share, "small": small, "merges": merges} if share else None,
        "page_size": page_size,
        "rows": rows,
        "batch": batch,
        "written_mib": None if wrote is None else round(wrote / 2**20, 1),
        "file_mib": round(size / 2**20, 1),
        "written_per_file": None if wrote is None else round(wrote / size, 2),
        "seconds": round(time.perf_counter() - started, 2),
        "lookup_us_p50": lookup_us,
        "lookup_plan": plan,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--tiers", type=float, nargs="*", default=[0.1, 0.25], help="recent shares to try")
    parser.add_argument(
        "--small", type=int, nargs="*", default=[0], help="newest tier's sizes to try (0: none)"
    )
    parser.add_argument("--page-sizes", type=int, nargs="*", default=[16384, 4096])
    parser.add_argument("--work", type=Path, default=None, help="folder for the test files (a temp one)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        runs = [
            fill(Path(work) / f"{keys}_{page}.db", args.rows, args.batch, keys, page)
            for keys in ("random", "ascending")
            for page in args.page_sizes
        ]
        runs += [
            fill(
                Path(work) / f"tiered_{share}_{small}.db",
                args.rows,
                args.batch,
                "random",
                16384,
                share,
                small,
            )
            for share in args.tiers
            for small in args.small
        ]
    result = {"command": " ".join(sys.argv), "load": [round(x, 2) for x in os.getloadavg()], "runs": runs}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
    return result


if __name__ == "__main__":
    main()
