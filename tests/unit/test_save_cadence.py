"""Issue 29: a write brings the indexes up to date in memory but writes them to disk by a cadence (a small index
after every commit, a larger one once the unwritten changes reach 10 % of it, and at close), so a bulk build
no longer writes both indexes after every 256-document commit and adding one document to a large index
writes nothing but the ledger.  The ledger stays the source of truth: a process killed with changes not yet
written loses none of them (the next open replays them)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finderledge import FinderLedge
from finderledge.ingest.write import SAVE_SHARE, SAVE_SMALL
from finderledge.keyword_store import KeywordStore
from finderledge.replica.core import Checkpoint
from finderledge.replica.overlay import VectorOverlay
from finderledge.vector_stores.faiss import FaissVectorStore

SRC = Path(__file__).resolve().parents[2] / "src"


def _texts(start: int, n: int) -> list[str]:
    return [
        f"Record {i} tells of harbour number {i} and its grey lighthouse keeper."
        for i in range(start, start + n)
    ]


def _open(directory: Path, embedding: Any) -> FinderLedge:
    return FinderLedge(
        directory, embedding=embedding, vector_store="faiss", show_progress=False, env_file=None
    )


def _count_flushes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    flushes: list[str] = []
    for cls in (KeywordStore, FaissVectorStore):
        real = cls.flush

        def counting(self: Any, _real: Any = real, _name: str = cls.__name__) -> None:
            flushes.append(_name)
            _real(self)

        monkeypatch.setattr(cls, "flush", counting)
    return flushes


def test_a_bulk_build_writes_the_indexes_far_less_often_than_it_commits(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushes = _count_flushes(monkeypatch)
    fl = _open(tmp_path / "ix", fake_embeddings)
    try:
        fl.add_texts(_texts(0, 4000))  # 16 commits of 256 documents
        during = flushes.count("KeywordStore")
        assert during < 16, f"the BM25 index was written {during} times for 16 commits (once per commit)"
        backlog = max(leg.pending for leg in fl.replica.local_legs())
        assert backlog < SAVE_SHARE * 4000, "the changes not yet written exceed the share a crash replays"
        top = fl.search("harbour 3999 lighthouse", search_mode="keyword", k=1)[0]
        assert top.document.page_content.startswith("Record 3999 ")
    finally:
        fl.close()  # writes what was left
    reopened = _open(tmp_path / "ix", fake_embeddings)
    try:
        assert Checkpoint.read(reopened.ledger, "index:keyword").seq == reopened.ledger.last_seq()
    finally:
        reopened.close()


def test_one_document_added_to_a_large_index_writes_only_the_ledger_and_close_writes_it(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = SAVE_SMALL + 200
    with _open(tmp_path / "ix", fake_embeddings) as fl:
        fl.add_texts(_texts(0, n))
    flushes = _count_flushes(monkeypatch)
    fl = _open(tmp_path / "ix", fake_embeddings)
    try:
        fl.search("harbour", k=1)  # both legs loaded
        (added,) = fl.add_texts(["A zeppelin moored above the quiet harbour."])
        assert flushes == [], "adding one document to a large index wrote an index"
        record = Checkpoint.read(fl.ledger, "index:keyword")
        assert record is not None and record.seq < fl.ledger.last_seq()
        for mode in ("keyword", "vector", "hybrid"):  # searchable at once, in every leg
            hits = fl.search("zeppelin moored", search_mode=mode, k=n + 1)
            assert added in {h.parent_id for h in hits}, mode
        assert 1 < SAVE_SHARE * n  # the cadence this test relies on
    finally:
        fl.close()
    assert "KeywordStore" in flushes and "FaissVectorStore" in flushes
    reopened = _open(tmp_path / "ix", fake_embeddings)
    try:
        assert Checkpoint.read(reopened.ledger, "index:keyword").seq == reopened.ledger.last_seq()
    finally:
        reopened.close()


KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from langchain_core.embeddings import DeterministicFakeEmbedding
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[1], embedding=DeterministicFakeEmbedding(size=16), vector_store="faiss",
                 show_progress=False, env_file=None)
fl.search("harbour", k=1)
ids = fl.add_texts(["A zeppelin moored above the quiet harbour.", "Walruses sunbathe on the northern pier."])
fl.remove_document(sys.argv[3])
print(" ".join(ids), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # dies with the changes in the ledger only
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_writer_killed_before_writing_the_indexes_loses_nothing(
    tmp_path: Path, fake_embeddings: Any
) -> None:
    directory = tmp_path / "ix"
    with _open(directory, fake_embeddings) as fl:
        first = fl.add_texts(_texts(0, SAVE_SMALL + 200))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_WRITER), str(directory), str(SRC), first[0]],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        check=False,
    )
    assert done.returncode == -9, done.stderr[-2000:]
    added = done.stdout.split()
    assert len(added) == 2
    fl = _open(directory, fake_embeddings)
    try:
        assert fl.count()["documents"] == SAVE_SMALL + 200 - 1 + 2
        for mode in ("keyword", "vector"):
            found = {
                h.parent_id for h in fl.search("zeppelin walruses pier moored", search_mode=mode, k=2000)
            }
            assert set(added) <= found, mode
            assert first[0] not in found, mode
        assert fl.vector_store.ids() | set(fl.replica.overlay.ids) >= set(
            fl.ledger.complete_chunk_ids()
        )  # every chunk in the vector leg (base or replayed overlay)
    finally:
        fl.close()


def test_batched_vector_searches_find_what_single_searches_find(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((300, 8)).astype(np.float32)
    store = FaissVectorStore(tmp_path / "faiss", dimension=8)
    store.add([f"c{i}" for i in range(300)], rows, [{"n": i % 3} for i in range(300)])
    overlay = VectorOverlay()
    overlay.add(
        [f"c{i}" for i in range(250, 320)],
        rng.standard_normal((70, 8)).astype(np.float32),
        [{}] * 70,
        [""] * 70,
    )
    overlay.remove(["c5", "c6"])
    queries = rng.standard_normal((25, 8)).astype(np.float32)
    for flt in (None, {"n": 1}):
        batched = store.search_many(queries, 7, flt)
        single = [store.search(q, 7, flt) for q in queries]
        assert [[i for i, _ in hits] for hits in batched] == [[i for i, _ in hits] for hits in single]
        merged = overlay.search_many(store, queries, 7, flt)
        one_by_one = [overlay.search(store, q, 7, flt) for q in queries]
        assert [[i for i, _ in hits] for hits in merged] == [[i for i, _ in hits] for hits in one_by_one]
        hidden = overlay.removed
        for q, hits in zip(queries, one_by_one):  # the overlay's exact answer: base without hidden ∪ overlay
            base = [(i, s) for i, s in store.search(q, 400, flt) if i not in hidden]
            scores = overlay.vectors() @ (q / np.linalg.norm(q))
            extra = [(i, float(s)) for i, s in zip(overlay.ids, scores) if flt is None]
            want = sorted(base + extra, key=lambda h: -h[1])[:7]
            assert [i for i, _ in hits] == [i for i, _ in want]
