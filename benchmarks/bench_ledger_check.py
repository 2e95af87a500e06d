"""What does checking the ledger at open (``PRAGMA quick_check``) cost?  Figures for docs/architecture.md.

Builds a ledger of ``--chunks`` chunks the way FinderLedge stores them (parents of ten ~800-character chunks,
a 384-d float32 vector per chunk, the embedding cache), then times ``quick_check`` alone and a whole
``Ledger`` open, with the file in the page cache and after evicting it (``posix_fadvise``).

    python benchmarks/bench_ledger_check.py [--chunks 10000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from finderledge.ledgers import ChunkRecord, DocumentRecord, SQLiteLedger

WORDS = [
    "ledger",
    "index",
    "segment",
    "vector",
    "keyword",
    "chunk",
    "parent",
    "query",
    "search",
    "fusion",
    "score",
]


def build(path: Path, chunks: int, rng: np.random.Generator) -> None:
    ledger = SQLiteLedger(path)
    per_doc = 10
    batch = []
    cache = []
    for d in range(chunks // per_doc):
        texts = [" ".join(rng.choice(WORDS, 110)) for _ in range(per_doc)]
        doc_id = hashlib.sha256(f"doc{d}".encode()).hexdigest()[:32]
        doc = DocumentRecord(
            doc_id,
            f"/data/file{d}.md",
            doc_id,
            "complete",
            "\n\n".join(texts),
            {"source": f"/data/file{d}.md", "doc_type_detected": "markdown"},
        )
        vectors = rng.standard_normal((per_doc, 384)).astype(np.float32)
        rows = [
            ChunkRecord(f"{doc_id}-{i:04d}", doc_id, i, t, {"source": doc.source, "split_index": i}, v)
            for i, (t, v) in enumerate(zip(texts, vectors))
        ]
        batch.append((doc, rows))
        cache += [(hashlib.sha256(t.encode()).hexdigest(), v) for t, v in zip(texts, vectors)]
        if len(batch) == 100:
            ledger.commit_write(add=batch)
            ledger.cache_embeddings("minilm", cache)
            batch, cache = [], []
    if batch:
        ledger.commit_write(add=batch)
        ledger.cache_embeddings("minilm", cache)
    ledger.close()


def evict(path: Path) -> None:
    for f in (path, path.with_name(path.name + "-wal")):
        if f.exists():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed(fn, path: Path, cold: bool, repeat: int = 7) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        if cold:
            evict(path)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.sqlite3"
        build(path, args.chunks, np.random.default_rng(0))

        def quick_check() -> None:
            db = sqlite3.connect(path)
            assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
            db.close()

        def open_ledger() -> None:
            SQLiteLedger(path).close()

        out = {
            "chunks": args.chunks,
            "ledger_mb": round(path.stat().st_size / 2**20, 1),
            "quick_check_s_warm": round(timed(quick_check, path, cold=False), 4),
            "quick_check_s_cold": round(timed(quick_check, path, cold=True), 4),
            "ledger_open_s_warm": round(timed(open_ledger, path, cold=False), 4),
            "ledger_open_s_cold": round(timed(open_ledger, path, cold=True), 4),
        }
    print(json.dumps(out, indent=1))
    results = Path(__file__).parent / "results" / "ledger_check.json"
    results.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
