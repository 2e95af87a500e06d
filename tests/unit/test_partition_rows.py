"""A vector search pinned to one partition scores that partition's rows only (issue 28: partitions as the
fast path), with the hits an unpartitioned filtered search gives, kept right through adds, deletes and a
reopen from disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from finderledge.vector_stores.faiss import FaissVectorStore
from finderledge.vector_stores.partition_rows import PartitionRows

DIM = 16


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


def _store(path: Path | None, tenants: int = 5, per: int = 30) -> tuple[FaissVectorStore, np.ndarray]:
    store = FaissVectorStore(path, dimension=DIM)
    vecs = _vectors(tenants * per, 1)
    ids = [f"t{i % tenants}-{i}" for i in range(len(vecs))]
    metas = [{"tenant": f"t{i % tenants}", "n": i % 3} for i in range(len(vecs))]
    store.add(ids, vecs, metas)
    return store, vecs


def _plain(store: FaissVectorStore, query: np.ndarray, k: int, flt: dict) -> list[tuple[str, float]]:
    """The same search through FAISS's selector (the store without a partition key)."""
    key = store.partition_key
    store.set_partition_key(None)
    try:
        return store.search(query, k, flt)
    finally:
        store.set_partition_key(key)


@pytest.mark.parametrize(
    "flt",
    [{"tenant": "t2"}, {"tenant": {"$in": ["t2"]}}, {"$and": [{"tenant": "t2"}, {"n": {"$ne": 1}}]}],
)
def test_pinned_search_matches_the_selector_search(flt: dict) -> None:
    store, _ = _store(None)
    store.set_partition_key("tenant")
    for q in _vectors(5, 2):
        pinned, plain = store.search(q, 7, flt), _plain(store, q, 7, flt)
        assert [i for i, _ in pinned] == [i for i, _ in plain]
        assert all(i.startswith("t2-") for i, _ in pinned)
        np.testing.assert_allclose([s for _, s in pinned], [s for _, s in plain], rtol=0, atol=1e-6)


def test_rows_follow_adds_deletes_and_a_reopen(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "faiss")
    store.set_partition_key("tenant")
    q = _vectors(1, 3)[0]
    first = store.search(q, 100, {"tenant": "t1"})
    assert len(first) == 30
    store.delete([first[0][0]])  # after the rows were built: forgotten
    store.add(["t1-new"], q.reshape(1, -1), [{"tenant": "t1"}])  # the query itself: the best hit
    store.add(["moved"], _vectors(1, 4), [{"tenant": "t9"}])
    hits = store.search(q, 100, {"tenant": "t1"})
    assert hits[0][0] == "t1-new" and hits[0][1] == pytest.approx(1.0, abs=1e-6)
    assert first[0][0] not in dict(hits) and len(hits) == 30
    store.add(["moved"], _vectors(1, 4), [{"tenant": "t1"}])  # an upsert into another partition
    assert "moved" in dict(store.search(q, 100, {"tenant": "t1"}))
    assert store.search(q, 100, {"tenant": "t9"}) == []
    store.flush()
    store.close()
    reopened = FaissVectorStore(tmp_path / "faiss", dimension=DIM)
    reopened.set_partition_key("tenant")
    assert reopened.search(q, 100, {"tenant": "t1"}) == store_hits_after(hits, "moved", q)
    reopened.close()


def store_hits_after(hits: list[tuple[str, float]], added: str, q: np.ndarray) -> list[tuple[str, float]]:
    """``hits`` plus the upserted row, in score order (recomputed as the store does)."""
    vec = _vectors(1, 4)[0]
    vec = vec / np.linalg.norm(vec)
    qn = (q / np.linalg.norm(q)).astype(np.float32)
    score = float(np.multiply(vec.reshape(1, -1), qn, dtype=np.float32).sum(axis=1, dtype=np.float32)[0])
    return sorted([*hits, (added, score)], key=lambda h: (-h[1], h[0]))


def test_only_the_partitions_rows_are_read() -> None:
    """The cost of a pinned search follows the partition's size: no other partition's vector is read."""
    vecs = _vectors(1000, 5)
    rows = PartitionRows("tenant", ((i, {"tenant": f"t{i % 100}"}) for i in range(1000)))
    asked: list[int] = []

    def vectors_of(seqs: np.ndarray) -> np.ndarray:
        asked.extend(seqs.tolist())
        return vecs[seqs]

    hits = rows.search("t7", vecs[7], 3, None, vectors_of, lambda seq: f"id{seq}")
    assert sorted(asked) == list(range(7, 1000, 100))
    assert hits[0][0] == "id7"
    assert rows.size("t7") == 10


def test_ties_break_by_id_whatever_the_row_order() -> None:
    """Equal scores come back by id, so the order does not depend on the rows' layout (alone or among others)."""
    vec = _vectors(1, 6)
    ids = {0: "b", 1: "a", 2: "c"}
    rows = PartitionRows("tenant", ((seq, {"tenant": "x"}) for seq in ids))
    hits = rows.search("x", vec[0], 2, None, lambda seqs: np.repeat(vec, len(seqs), axis=0), ids.__getitem__)
    assert [i for i, _ in hits] == ["a", "b"]
