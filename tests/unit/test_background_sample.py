"""Issue 29: the relevance background is drawn without reading every chunk id (no work at first search that
grows with the corpus): SQLite seeks one rowid per sampled chunk."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finderledge.ledgers.base import COMPLETE, ChunkRecord, DocumentRecord
from finderledge.ledgers.sqlite import SAMPLE_SEEK_FACTOR, SQLiteLedger
from finderledge.ranking.relevance import SAMPLE_SIZE, LedgerBackground

WORDS = ["solar", "battery", "storage", "grid", "wind", "turbine", "panel", "charge", "volt", "load"]


def _fill(ledger: SQLiteLedger, chunks: int, per_doc: int = 10) -> None:
    rng = np.random.default_rng(0)
    add = []
    for d in range(chunks // per_doc):
        doc = DocumentRecord(f"doc{d:06d}", f"s{d}", f"h{d}", COMPLETE, f"document {d}", {})
        rows = [
            ChunkRecord(
                f"doc{d:06d}-{i:04d}",
                doc.id,
                i,
                f"{WORDS[(d + i) % 10]} {WORDS[(d * 3 + i) % 10]} chunk {d} {i}",
                {},
                rng.standard_normal(8).astype(np.float32),
            )
            for i in range(per_doc)
        ]
        add.append((doc, rows))
    for start in range(0, len(add), 500):
        ledger.commit_write(add=add[start : start + 500])


class _Keyword:
    """What LedgerBackground reads from the keyword store: its size, tokenizer and k1."""

    def __init__(self, size: int) -> None:
        self.size, self.k1 = size, 0.9

    def __len__(self) -> int:
        return self.size

    @staticmethod
    def tokenizer(text: str) -> list[str]:
        return text.split()


class _NoFullRead(SQLiteLedger):
    """A counting probe: every read of all chunk ids is counted."""

    full_reads = 0

    def complete_chunk_ids(self) -> set[str]:
        type(self).full_reads += 1
        return super().complete_chunk_ids()


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> _NoFullRead:
    ledger = _NoFullRead(tmp_path_factory.mktemp("big") / "ledger.sqlite3")
    _fill(ledger, 20_000)
    yield ledger
    ledger.close()


def test_a_large_corpus_is_sampled_without_reading_every_id(big: _NoFullRead) -> None:
    _NoFullRead.full_reads = 0
    bg = LedgerBackground(big, _Keyword(20_000)).sample(SAMPLE_SIZE)
    assert _NoFullRead.full_reads == 0
    assert bg.sample_size == SAMPLE_SIZE and bg.corpus_size == 20_000
    assert bg.mean_vector is not None and set(bg.doc_freq) >= set(WORDS)
    ids = big.sample_chunk_ids(SAMPLE_SIZE)
    assert ids == big.sample_chunk_ids(SAMPLE_SIZE)  # the same sample every time (every process)
    docs = sorted(int(i[3:9]) for i in ids)
    assert docs[0] < 50 and docs[-1] > 1950  # spread over the whole corpus, not its first rows


def test_removed_documents_are_never_sampled(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "ledger.sqlite3")
    _fill(ledger, 4_000)
    gone = [f"doc{d:06d}" for d in range(0, 400, 2)]  # every other document
    ledger.commit_write(remove=gone)
    ids = ledger.sample_chunk_ids(64)
    assert len(ids) == 64 and not {i.split("-")[0] for i in ids} & set(gone)
    ledger.close()


def test_a_small_corpus_is_read_whole(tmp_path: Path) -> None:
    ledger = _NoFullRead(tmp_path / "ledger.sqlite3")
    _fill(ledger, 300)
    _NoFullRead.full_reads = 0
    assert 300 <= SAMPLE_SEEK_FACTOR * 100
    assert sorted(ledger.sample_chunk_ids(100)) == sorted(ledger.sample_chunk_ids(100))
    assert len(ledger.sample_chunk_ids(1000)) == 300  # all of them
    assert _NoFullRead.full_reads == 3
    ledger.close()


def test_sampling_work_does_not_grow_with_the_corpus(
    big: _NoFullRead, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A counting probe: SQLite virtual-machine steps (every 100) of each connection the ledgers open."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0  # go on

    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = real_connect(*args, **kwargs)
        db.set_progress_handler(count, 100)
        return db

    _fill(SQLiteLedger(tmp_path / "small.sqlite3"), 6_000)  # above the seek threshold too
    monkeypatch.setattr(sqlite3, "connect", connect)
    small, large = SQLiteLedger(tmp_path / "small.sqlite3"), SQLiteLedger(big.path)

    def work(call: Callable[[], object]) -> int:
        steps[0] = 0
        call()
        return steps[0]

    sample_small = work(lambda: small.sample_chunk_ids(128))
    sample_large = work(lambda: large.sample_chunk_ids(128))
    full_small = work(small.complete_chunk_ids)
    full_large = work(large.complete_chunk_ids)
    # reading every id grows with the corpus (3.3x from 6,000 to 20,000 chunks); a seek per sampled id does not
    assert full_large > 3 * full_small, (full_small, full_large)
    assert sample_large < 1.3 * sample_small, (sample_small, sample_large)
    assert sample_large < full_large / 5, (sample_large, full_large)
    # a write's look-up of its documents' stored hashes seeks them by id, never scans the complete ones
    asked = [f"doc{d:06d}" for d in (1, 7, 250)]
    hashes_small = work(lambda: small.content_hashes(asked))
    hashes_large = work(lambda: large.content_hashes(asked))
    assert hashes_large <= hashes_small + 2, (hashes_small, hashes_large)
    small.close()
    large.close()
