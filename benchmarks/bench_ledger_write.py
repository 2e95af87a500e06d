"""Time ``Ledger.commit_write`` alone: N chunks with given 384-d vectors, committed in writes of a few hundred
documents (as an ingest commits them), into a fresh SQLite ledger file (and PostgreSQL with ``--postgres URL``).

Issue 29 named ~8 % of a 100k build as "five SQL statements per document"; this isolates that cost.  Compare
two trees by running it with each on ``PYTHONPATH`` (``--runs`` interleaving is up to the caller):

    PYTHONPATH=src nice -n 5 python benchmarks/bench_ledger_write.py --n 10000

Each run also times the *floor* of those writes, interleaved: the same rows (a document row, its chunk rows and
one change row per document, every tuple built beforehand) inserted with plain ``sqlite3`` into a ledger file
FinderLedge created (its schema and indexes), one transaction per write, SQLite's default checkpoints.  What the
ledger costs above that is its own Python work (ids, metadata, hashes, the checks of a write).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from finderledge.ledgers import COMPLETE, ChunkRecord, DocumentRecord, SQLiteLedger
from finderledge.ledgers.base import Ledger


def _writes(
    n: int, per_doc: int, docs_per_write: int, dim: int
) -> list[list[tuple[DocumentRecord, list[ChunkRecord]]]]:
    rng = np.random.default_rng(0)
    docs = []
    for d in range(n // per_doc):
        doc_id = f"doc{d:07d}"
        record = DocumentRecord(
            doc_id, f"src/{d % 97}.md", f"h{d}", COMPLETE, f"document {d} " * 20, {"n": d}
        )
        chunks = [
            ChunkRecord(
                f"{doc_id}-{i:04d}",
                doc_id,
                i,
                f"chunk {i} of document {d}: some words about batteries and grids " * 4,
                {"n": d, "_finderledge": {"id": f"{doc_id}-{i:04d}", "parent_id": doc_id, "split_index": i}},
                rng.standard_normal(dim).astype(np.float32),
            )
            for i in range(per_doc)
        ]
        docs.append((record, chunks))
    return [docs[i : i + docs_per_write] for i in range(0, len(docs), docs_per_write)]


def _time(
    ledger: Ledger, writes: list[list[tuple[DocumentRecord, list[ChunkRecord]]]]
) -> tuple[float, float]:
    """Wall-clock and this process's CPU seconds of the writes (CPU time is steadier on a loaded machine)."""
    started, cpu = time.perf_counter(), time.process_time()
    for add in writes:
        ledger.commit_write(add)
    return time.perf_counter() - started, time.process_time() - cpu


def _hash(chunk: ChunkRecord) -> bytes:
    """A chunk's text hash in the 16 bytes the ledger stores (its index then as random as the ledger's)."""
    return hashlib.sha256(chunk.content.encode("utf-8")).digest()[:16]


def _floor(path: Path, writes: list[list[tuple[DocumentRecord, list[ChunkRecord]]]]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of inserting the same rows with plain ``sqlite3`` (see the module docstring)."""
    SQLiteLedger(path).close()  # FinderLedge's schema and indexes, made by the ledger itself
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA cache_size=-65536")  # as the ledger's writer
    rows, seq = [], 0
    for add in writes:
        changes, documents, chunks = [], [], []
        for doc, kids in add:
            seq += 1
            changes.append((seq, "add", doc.id, len(kids)))
            documents.append(
                (
                    doc.id,
                    doc.source,
                    doc.content_hash,
                    doc.state,
                    doc.content,
                    json.dumps(doc.metadata),
                    0.0,
                    seq,
                )
            )
            chunks += [
                (
                    c.id,
                    c.parent_id,
                    c.split_index,
                    c.content,
                    json.dumps(c.metadata),
                    c.embedding.tobytes(),
                    _hash(c),
                )
                for c in kids
                if c.embedding is not None
            ]
        rows.append((changes, documents, chunks))
    started, cpu = time.perf_counter(), time.process_time()
    for changes, documents, chunks in rows:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT INTO changes(seq, op, doc_id, chunk_count) VALUES (?, ?, ?, ?)", changes)
        db.executemany(
            "INSERT INTO documents(id, source, content_hash, state, content, metadata, added_at, added_seq)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            documents,
        )
        db.executemany(
            "INSERT INTO chunks(id, parent_id, split_index, content, metadata, embedding, text_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            chunks,
        )
        db.execute("COMMIT")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    db.close()
    return wall, cpu


def _pgserver() -> str:
    """A local PostgreSQL 16 + pgvector from the ``pgserver`` wheel (stopped when this process exits)."""
    import pgserver
    import psycopg

    server = pgserver.get_server(Path(tempfile.mkdtemp(prefix="bench-pg-")) / "pgdata", cleanup_mode="stop")
    url = str(server.get_uri())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000, help="chunks")
    parser.add_argument("--per-doc", type=int, default=4, help="chunks per document")
    parser.add_argument("--docs-per-write", type=int, default=250)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--postgres", help="a PostgreSQL URL, or 'pgserver' (a throwaway local server): time that ledger too"
    )
    args = parser.parse_args()
    writes = _writes(args.n, args.per_doc, args.docs_per_write, args.dim)
    result: dict[str, object] = {"n_chunks": args.n, "per_doc": args.per_doc, "load_avg": os.getloadavg()}
    times, floors = [], []
    for _ in range(args.runs):  # the ledger, then the floor: interleaved
        with tempfile.TemporaryDirectory() as tmp:
            ledger = SQLiteLedger(Path(tmp) / "ledger.sqlite3")
            times.append(_time(ledger, writes))
            ledger.close()
        with tempfile.TemporaryDirectory() as tmp:
            floors.append(_floor(Path(tmp) / "ledger.sqlite3", writes))
    result["sqlite_s"], result["sqlite_cpu_s"] = [t[0] for t in times], [t[1] for t in times]
    result["sqlite_floor_s"], result["sqlite_floor_cpu_s"] = [t[0] for t in floors], [t[1] for t in floors]
    result["sqlite_over_floor"] = sorted(times)[len(times) // 2][0] / sorted(floors)[len(floors) // 2][0]
    if args.postgres:
        from finderledge.ledgers.postgres import PostgresLedger

        url = _pgserver() if args.postgres == "pgserver" else args.postgres
        times = []
        for _ in range(args.runs):
            ledger = PostgresLedger(url, schema=f"bench_{uuid.uuid4().hex[:8]}")
            times.append(_time(ledger, writes))
            ledger.close()
        result["postgres_s"], result["postgres_cpu_s"] = [t[0] for t in times], [t[1] for t in times]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
