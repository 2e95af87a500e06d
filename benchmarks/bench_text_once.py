"""Reading chunks back from the Postgres ledger when their text is stored once (issue 43), against a tree that
stores it twice.

A PostgreSQL 16 + pgvector from the ``pgserver`` wheel; each tree (``--baseline-src``, then this one, in
alternating order per repeat) writes the same ``--docs`` documents of ``--chunks-per-doc`` overlapping chunks
(slices of the document, English and Japanese) into its own schema, then times ``get_chunks`` of ``--k`` random
ids as a search reads them (``visible_at``) and as the vector leg does (no ``visible_at``), and ``chunks_of``.
Reports p50/p90 per call in microseconds and the chunk table's bytes per chunk.

    python benchmarks/bench_text_once.py --baseline-src /work/main/src --out benchmarks/results/text_once43_reads.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]


def _texts(docs: int, per: int) -> list[str]:
    out = []
    for i in range(docs):
        if i % 2:
            parts = [
                f"第{i}文書の{j}節：東京の倉庫で請求書{j}番を確認し、監査役が遅延を調べる。" * 3
                for j in range(per)
            ]
        else:
            parts = [
                f"Document {i} section {j}: the refund ledger records invoice {j} for shelf {i}. " * 3
                for j in range(per)
            ]
        out.append("\n\n".join(parts))
    return out


def worker(spec: str) -> None:
    """In a process of one tree: write, then time the reads; prints a JSON line."""
    import random

    import psycopg

    from finderledge.ledgers import COMPLETE, ChunkRecord, DocumentRecord
    from finderledge.ledgers.postgres import PostgresLedger

    url, schema, docs, per, k, reps = json.loads(spec)
    ledger = PostgresLedger(url, schema=schema)
    batch: list[tuple[DocumentRecord, list[ChunkRecord]]] = []
    ids: list[str] = []
    for i, text in enumerate(_texts(docs, per)):
        doc_id = f"d{i}"
        md = {"_finderledge": {"id": doc_id, "is_parent": True, "split_count": per, "doc_type": "text"}}
        pieces = text.split("\n\n")
        cursor, chunks = 0, []
        for j, piece in enumerate(pieces):
            start = text.index(piece, cursor)
            cursor = start + 1
            piece = text[max(0, start - 40) : start + len(piece)]  # overlapping, as the splitter's chunks
            cid = f"{doc_id}-{j:04d}"
            chunks.append(ChunkRecord(cid, doc_id, j, piece, {"_finderledge": {"id": cid}}))
            ids.append(cid)
        batch.append((DocumentRecord(doc_id, None, f"h{i}", COMPLETE, text, md), chunks))
        if len(batch) == 500:
            ledger.commit_write(batch)
            batch = []
    if batch:
        ledger.commit_write(batch)
    seq = ledger.last_seq()
    rng = random.Random(7)
    timings: dict[str, list[float]] = {"get_chunks_visible_at": [], "get_chunks": [], "chunks_of": []}
    for _ in range(reps):
        pick = rng.sample(ids, k)
        t = time.perf_counter()
        got = ledger.get_chunks(pick, visible_at=seq)
        timings["get_chunks_visible_at"].append(time.perf_counter() - t)
        assert len(got) == k
        t = time.perf_counter()
        ledger.get_chunks(pick)
        timings["get_chunks"].append(time.perf_counter() - t)
        t = time.perf_counter()
        ledger.chunks_of(pick[0].rsplit("-", 1)[0])
        timings["chunks_of"].append(time.perf_counter() - t)
    explained = _explain(ledger, url, rng.sample(ids, k), seq)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'VACUUM ANALYZE "{schema}".chunks')
        size = conn.execute(f"SELECT pg_total_relation_size('\"{schema}\".chunks')").fetchone()[0]
    ledger.close()
    out = {
        name: {
            "p50_us": round(statistics.median(v) * 1e6, 1),
            "p90_us": round(sorted(v)[int(len(v) * 0.9)] * 1e6, 1),
        }
        for name, v in timings.items()
    }
    print(
        json.dumps(
            {"reads": out, "explain": explained, "chunks_table_bytes_per_chunk": round(int(size) / len(ids))}
        )
    )


def _explain(ledger: Any, url: str, pick: list[str], seq: int) -> dict[str, Any]:
    """The server's own cost of ``get_chunks(pick, visible_at=seq)``'s statement, as ``SQLLedger.get_chunks``
    builds it: buffers touched (independent of the machine's load) and execution time, the median of 50."""
    import psycopg

    d = ledger.dialect
    join = (
        " JOIN {s}documents d ON d.id = c.parent_id AND COALESCE(d.added_seq, 0) <= ?"
        " AND (d.state = 'complete' OR d.removed_seq > ?)"
    )
    where, args = d.any_of("c.id", pick)
    query = d.sql(
        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT {d.chunk_read} FROM {{s}}chunks c{join} WHERE {where}"
    )
    plain = d.sql(
        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT {d.chunk_read} FROM {{s}}chunks c{d.document_join} WHERE {where}"
    )
    out: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name, q, params in (("visible_at", query, [seq, seq, *args]), ("plain", plain, args)):
            runs = [conn.execute(q, params).fetchone()[0][0] for _ in range(50)]
            out[name] = {
                "shared_buffers_hit": runs[-1]["Plan"]["Shared Hit Blocks"]
                + runs[-1]["Plan"]["Shared Read Blocks"],
                "execution_ms_p50": round(statistics.median(r["Execution Time"] for r in runs), 4),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--chunks-per-doc", type=int, default=5)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    from bench_postgres import start_postgres

    trees = {"baseline": args.baseline_src.resolve(), "this": ROOT / "src"}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-text-once-") as tmp:
        url, server = start_postgres(Path(tmp) / "pg" / "pgdata")
        try:
            for rep in range(args.repeats):
                for name in list(trees) if rep % 2 == 0 else list(trees)[::-1]:
                    spec = json.dumps(
                        [url, f"t_{name}_{rep}", args.docs, args.chunks_per_doc, args.k, args.reps]
                    )
                    env = {**os.environ, "PYTHONPATH": str(trees[name])}
                    done = subprocess.run(
                        [sys.executable, __file__, "--baseline-src", str(trees[name]), "--worker", spec],
                        env=env,
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                    runs.append({"tree": name, "repeat": rep, **result})
                    print(name, rep, json.dumps(result), flush=True)
        finally:
            server.cleanup()
    report = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "trees": {k: str(v) for k, v in trees.items()},
        "docs": args.docs,
        "chunks_per_doc": args.chunks_per_doc,
        "k": args.k,
        "reps": args.reps,
        "load": os.getloadavg(),
        "runs": runs,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
