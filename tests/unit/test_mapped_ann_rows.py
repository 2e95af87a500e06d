"""Approximate ``vector_index`` kinds read their float32 rows from the checked segment files (issue 41).

Checked here: a reopened approximate store holds no in-memory copy of its rows (they are read on demand
from ``vectors.npy``) and answers exactly what a flat store answers for exact searches, and with exact scores for the
approximate ones; a flipped byte is still corruption at opening; a file renamed over a segment after it was
checked is never read; adds, deletes, merges and tombstones keep working, the overlay of unflushed rows is
released once they are written, and the merged segments' files are let go.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from finderledge.vector_stores.faiss import VECTORS_FILE, FaissVectorStore, VectorIndexCorruptError
from finderledge.vector_stores.flat_rows import FileRows, MappedRows

DIM = 16


def _clustered(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(20, DIM))
    v = centres[rng.integers(0, 20, n)] + 0.3 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _add(store: FaissVectorStore, lo: int, hi: int, vectors: np.ndarray) -> None:
    store.add(
        [f"c{i}" for i in range(lo, hi)],
        vectors[lo:hi],
        [{"group": "rare" if i % 7 == 0 else "common"} for i in range(lo, hi)],
    )


def _exact(vectors: np.ndarray, ids: list[str], query: np.ndarray, k: int) -> list[str]:
    scores = vectors @ query
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


def _vectors_files(root: Path) -> list[Path]:
    return sorted(root.glob(f"segments/*/{VECTORS_FILE}"))


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, np.ndarray]:
    vectors = _clustered(600)
    store = FaissVectorStore(tmp_path / "i", dimension=DIM, vector_index="ivf_sq8", ann_min_rows=200)
    for lo in range(0, 600, 200):  # three segments
        _add(store, lo, lo + 200, vectors)
        store.flush()
    return tmp_path / "i", vectors


def _open(root: Path, kind: str = "ivf_sq8") -> FaissVectorStore:
    return FaissVectorStore(root, dimension=DIM, vector_index=kind, ann_min_rows=200)


def test_rows_are_mapped_not_copied_and_answers_are_exact(built: tuple[Path, np.ndarray]) -> None:
    root, vectors = built
    store = _open(root)
    rows = store._rows
    assert isinstance(rows, MappedRows) and rows.flat is None and rows._overlay_n == 0
    assert len(rows._parts) == 3 and all(isinstance(p, FileRows) for p in rows._parts)
    ids = [f"c{i}" for i in range(600)]
    queries = _clustered(20, seed=5)
    for q in queries:
        exact = _exact(vectors, ids, q, 5)
        # the exact scan of the mapped rows (what a selective filter or too few candidates fall back to),
        # whole and among allowed rows, and the approximate search, rescored from them
        assert [c for c, _ in store._rows.search(q[None], 5)[0]] == exact
        rare = [i for i in range(600) if i % 7 == 0]
        allowed = store._allowed({"group": "rare"})
        got_rare = store._rows.search(q[None], 5, allowed)[0]
        assert [c for c, _ in got_rare] == _exact(vectors[rare], [ids[i] for i in rare], q, 5)
        got = store.search(q, 5)
        for cid, score in got:
            assert score == pytest.approx(float(vectors[int(cid[1:])] @ q), abs=1e-5)
    assert store._ann_search(queries[:1], 5, None) is not None  # that search went through the index
    # the flat store reads the same files into memory and agrees
    flat = _open(root, "flat")
    for q in queries:
        assert [c for c, _ in flat.search(q, 5)] == _exact(vectors, ids, q, 5)


def test_a_flipped_byte_is_corruption_at_opening(built: tuple[Path, np.ndarray]) -> None:
    root, _ = built
    victim = _vectors_files(root)[1]
    data = bytearray(victim.read_bytes())
    data[-7] ^= 0x10
    victim.write_bytes(bytes(data))
    with pytest.raises(VectorIndexCorruptError, match="checksum mismatch"):
        _open(root)


def test_a_file_renamed_over_a_checked_segment_is_never_read(built: tuple[Path, np.ndarray]) -> None:
    root, vectors = built
    store = _open(root)
    ids = [f"c{i}" for i in range(600)]
    q = _clustered(1, seed=8)[0]
    before = store.search(q, 5, {"group": "common"})
    for victim in _vectors_files(root):  # same size, other rows: an attacker's or a bad copy's file
        data = bytearray(victim.read_bytes())
        forged = np.frombuffer(bytes(data[-600 * 4 * DIM // 3 :]), dtype=np.float32)[::-1].copy()
        data[-forged.nbytes :] = forged.tobytes()
        tmp = victim.with_suffix(".forged")
        tmp.write_bytes(bytes(data))
        os.replace(tmp, victim)
    assert store.search(q, 5, {"group": "common"}) == before  # still the checked files' rows
    assert [c for c, _ in store._rows.search(q[None], 5)[0]] == _exact(vectors, ids, q, 5)
    with pytest.raises(VectorIndexCorruptError, match="checksum mismatch"):
        _open(root)  # opened again, the replaced files fail their check


def test_writes_merges_and_tombstones_keep_working(built: tuple[Path, np.ndarray]) -> None:
    root, vectors = built
    more = _clustered(2400, seed=3)
    allv = np.concatenate([vectors, more[600:]])
    store = _open(root)
    ids = [f"c{i}" for i in range(len(allv))]
    deleted = {f"c{i}" for i in range(0, len(allv), 5)}
    for lo in range(600, 2400, 300):  # enough segments for a tiered merge
        _add(store, lo, lo + 300, allv)
        assert store._rows._overlay_n >= 300  # unflushed rows live in memory
        store.delete([c for c in deleted if lo <= int(c[1:]) < lo + 300])
        store.flush()
        assert isinstance(store._rows, MappedRows) and store._rows._overlay_n == 0  # written: mapped now
    store.delete([c for c in deleted if int(c[1:]) < 600])  # tombstones on the opened segments
    keep = [i for i in range(len(allv)) if ids[i] not in deleted]
    live_ids, live_vecs = [ids[i] for i in keep], allv[keep]
    queries = _clustered(10, seed=11)

    def check(s: FaissVectorStore) -> None:
        assert len(s) == len(keep)
        for q in queries:
            exact = _exact(live_vecs, live_ids, q, 5)
            assert [c for c, _ in s._rows.search(q[None], 5)[0]] == exact
            got = s.search_many(np.stack([q, q]), 5)[0]
            assert all(c not in deleted for c, _ in got)
            for cid, score in got:
                assert score == pytest.approx(float(allv[int(cid[1:])] @ q), abs=1e-5)

    check(store)
    store.flush()
    segments = {s.name for s in store._segments}
    assert len(store._rows._parts) <= len(segments)  # merged-away segments are no longer read
    check(store)
    check(_open(root))


def test_a_segment_truncated_in_place_after_its_check_is_corruption(built: tuple[Path, np.ndarray]) -> None:
    root, _ = built
    store = _open(root)
    for victim in _vectors_files(root):
        os.truncate(victim, victim.stat().st_size // 2)  # the same file (inode) the store reads
    q = _clustered(1, seed=8)[0]
    with pytest.raises(VectorIndexCorruptError, match="read .* of .* bytes"):
        store._rows.search(q[None], 5)


@pytest.mark.parametrize("where", ["pread", "seek and read"])
def test_file_rows_read_the_rows_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Rows read on demand equal the matrix, with ``os.pread`` and with the fallback where it is missing."""
    from finderledge.vector_stores import flat_rows

    if where != "pread":
        monkeypatch.setattr(flat_rows, "pread", flat_rows._seek_read)
    matrix = np.random.default_rng(7).standard_normal((50, 6)).astype(np.float32)
    path = tmp_path / "rows.bin"
    path.write_bytes(b"HEAD" + matrix.tobytes())
    fd = os.open(path, os.O_RDONLY)
    rows = FileRows(fd, 4, 50, 6, path, VectorIndexCorruptError)
    picked = [3, 4, 5, 40, 0, 49, 4]
    assert np.array_equal(rows[picked], matrix[picked])
    assert np.array_equal(rows[10:20], matrix[10:20])
