"""Cost of drawing the relevance background (issue 29): rowid seeks vs reading every chunk id, by corpus size.

    python benchmarks/bench_background.py [--sizes 1000,20000,100000]

Builds SQLite ledgers of synthetic chunks (ten per document, 8-d vectors), then in a fresh ledger handle per
measurement times ``LedgerBackground.sample(512)`` (what the first search of a fresh process runs) against
the former method (every complete chunk id read, the 512 smallest hashes kept), and prints both in ms.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from finderledge.ledgers.base import COMPLETE, ChunkRecord, DocumentRecord
from finderledge.ledgers.sqlite import SQLiteLedger
from finderledge.ranking.relevance import SAMPLE_SIZE, LedgerBackground, sample_background, sample_key


class _Keyword:
    """What LedgerBackground reads from the keyword store: its size, tokenizer and k1."""

    def __init__(self, size: int) -> None:
        self.size, self.k1 = size, 0.9

    def __len__(self) -> int:
        return self.size

    @staticmethod
    def tokenizer(text: str) -> list[str]:
        return text.split()


def build(path: Path, chunks: int) -> None:
    """A ledger of ``chunks`` synthetic chunks, ten per document."""
    rng = np.random.default_rng(0)
    ledger = SQLiteLedger(path)
    add = []
    for d in range(chunks // 10):
        doc = DocumentRecord(f"doc{d:07d}", f"s{d}", f"h{d}", COMPLETE, f"document {d}", {})
        rows = [
            ChunkRecord(
                f"{doc.id}-{i:04d}", doc.id, i, f"chunk {d} {i} word{d % 97}", {}, rng.random(8, "f4")
            )
            for i in range(10)
        ]
        add.append((doc, rows))
    for start in range(0, len(add), 1000):
        ledger.commit_write(add=add[start : start + 1000])
    ledger.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,20000,100000")
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        path = Path(tempfile.mkdtemp()) / "ledger.sqlite3"
        build(path, n)
        ledger = SQLiteLedger(path)
        start = time.perf_counter()
        LedgerBackground(ledger, _Keyword(n)).sample(SAMPLE_SIZE)
        new = time.perf_counter() - start
        ledger.close()
        ledger = SQLiteLedger(path)
        start = time.perf_counter()
        ids = sorted(ledger.complete_chunk_ids(), key=sample_key)[:SAMPLE_SIZE]
        rows = ledger.get_chunks(ids, with_embedding=True)
        sample_background(
            (c.content for c in rows), (c.embedding for c in rows), n, tokenizer=str.split, k1=0.9
        )
        old = time.perf_counter() - start
        ledger.close()
        print(f"{n:>9,} chunks: rowid seeks {new * 1000:7.1f} ms, every id read {old * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
