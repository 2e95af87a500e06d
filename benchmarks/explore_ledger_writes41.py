"""Why a build writes ~12x its directory at 1M chunks (issue 41): SQLite B-tree pages rewritten per commit.

    python benchmarks/explore_ledger_writes41.py --rows 300000 --batch 2000 --out /tmp/ledger_writes.json

A table shaped like the ledger's ``chunks`` (an autoincrement rowid, a ``UNIQUE`` text id, a ~1.6 kB body) is
filled in commits of ``--batch`` rows (FinderLedge commits once per write call), in WAL mode with a PASSIVE
checkpoint every 10 commits, once with random ids (content hashes, as FinderLedge's are) and once with
ascending ones, at 16 kB and 4 kB pages.  It reports the bytes the process wrote (``/proc/self/io``,
``write_bytes``, after ``os.sync``) against the file's size.  Random keys land on every leaf of the id index:
each commit rewrites (into the WAL, then by the checkpoint into the file) every leaf page it touched, so the
bytes written per commit grow with the table, not with the batch.  Ascending keys append.
"""

from __future__ import annotations

import argparse
import hashlib
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


def fill(path: Path, rows: int, batch: int, keys: str, page_size: int) -> dict[str, Any]:
    """Fill one table in commits of ``batch`` rows; bytes written, file size and seconds."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size={page_size}")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE chunks (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, body BLOB)"
    )
    before, started, n = written_bytes(), time.perf_counter(), 0
    for commit in range(0, rows, batch):
        ids = range(n + 1, n + 1 + min(batch, rows - commit))
        n += len(ids)
        if keys == "random":
            made = [hashlib.sha256(str(i).encode()).hexdigest()[:32] for i in ids]
        else:
            made = [f"{i:032d}" for i in ids]
        db.execute("BEGIN")
        db.executemany("INSERT INTO chunks(id, body) VALUES (?, ?)", [(k + "-0000", BODY) for k in made])
        db.execute("COMMIT")
        if (commit // batch) % 10 == 9:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    os.sync()
    after = written_bytes()
    size = path.stat().st_size
    wrote = None if before is None or after is None else after - before
    return {
        "keys": keys,
        "page_size": page_size,
        "rows": rows,
        "batch": batch,
        "written_mib": None if wrote is None else round(wrote / 2**20, 1),
        "file_mib": round(size / 2**20, 1),
        "written_per_file": None if wrote is None else round(wrote / size, 2),
        "seconds": round(time.perf_counter() - started, 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--work", type=Path, default=None, help="folder for the test files (a temp one)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        runs = [
            fill(Path(work) / f"{keys}_{page}.db", args.rows, args.batch, keys, page)
            for keys in ("random", "ascending")
            for page in (16384, 4096)
        ]
    result = {"command": " ".join(sys.argv), "load": [round(x, 2) for x in os.getloadavg()], "runs": runs}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
    return result


if __name__ == "__main__":
    main()
