"""The segment layer both on-disk indexes share (``finderledge.storage.segments``): its merge policy, the one door
every index file is opened through, and a FAISS flush that never holds a second copy of the matrix."""

from __future__ import annotations

import gc
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from finderledge.errors import IndexCorruptError
from finderledge.keyword_store import KeywordIndexCorruptError, KeywordStore
from finderledge.storage.segments import plan_merges, tier
from finderledge.vector_stores.faiss import FaissVectorStore, VectorIndexCorruptError


def test_tier_is_the_size_class_of_a_segment() -> None:
    assert [tier(n, 1, 8) for n in (0, 1, 7, 8, 63, 64, 511, 512)] == [0, 0, 0, 1, 1, 2, 2, 3]
    assert [tier(n, 100, 4) for n in (0, 399, 400, 1599, 1600)] == [0, 0, 1, 1, 2]


def test_plan_merges_merges_a_full_tier_in_place_and_cascades() -> None:
    assert plan_merges([5, 5, 5], factor=4) == [[0], [1], [2]]
    # four tier-0 segments after a big one: merged where the first of them was
    assert plan_merges([100, 1, 1, 1, 1], factor=4) == [[0], [1, 2, 3, 4]]
    # the merged group joins three tier-1 segments: a second merge, in the same plan
    assert plan_merges([4, 4, 4, 1, 1, 1, 1], factor=4) == [[0, 1, 2, 3, 4, 5, 6]]


def _faiss_dir(tmp_path: Path) -> Path:
    store = FaissVectorStore(tmp_path / "faiss", dimension=4)
    store.add(["a", "b"], np.eye(2, 4), [{"n": 1}, {"n": 2}])
    store.flush()
    return tmp_path / "faiss"


def _bm25_dir(tmp_path: Path) -> Path:
    with KeywordStore(tmp_path / "bm25") as ks:
        ks.add(["a", "b"], ["glaciers retreat", "tides rise"])
    return tmp_path / "bm25"


@pytest.mark.parametrize("fname", ["ids.json", "meta.json", "seq.npy", "vectors.npy"])
def test_a_faiss_segment_file_that_is_a_link_is_damage_even_inside_the_index(
    tmp_path: Path, fname: str
) -> None:
    root = _faiss_dir(tmp_path)
    segment = next((root / "segments").iterdir())
    shutil.move(segment / fname, root / f"copy-{fname}")  # same bytes, same size and CRC32, inside the index
    os.symlink(root / f"copy-{fname}", segment / fname)
    with pytest.raises(VectorIndexCorruptError, match="link"):
        FaissVectorStore(root, dimension=4)


@pytest.mark.parametrize("fname", ["terms.json", "ids.json", "meta.json", "docs.npy", "indptr.npy"])
def test_a_bm25_segment_file_that_is_a_link_is_damage_even_inside_the_index(
    tmp_path: Path, fname: str
) -> None:
    root = _bm25_dir(tmp_path)
    segment = next((root / "segments").iterdir())
    shutil.move(segment / fname, root / f"copy-{fname}")
    os.symlink(root / f"copy-{fname}", segment / fname)
    with pytest.raises(KeywordIndexCorruptError, match="link"):
        KeywordStore(root)


def test_both_stores_write_the_same_layout(tmp_path: Path) -> None:
    for root in (_faiss_dir(tmp_path), _bm25_dir(tmp_path)):
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        assert sorted(p.name for p in root.iterdir()) == ["deletes", "manifest.json", "segments"]
        assert [p.name for p in (root / "segments").iterdir()] == [manifest["segments"][0]["name"]]
        assert isinstance(manifest["checksum"], int)


def test_a_leftover_segment_folder_is_collected_by_either_store(tmp_path: Path) -> None:
    for root, reopen in (
        (_faiss_dir(tmp_path), lambda r: FaissVectorStore(r, dimension=4)),
        (_bm25_dir(tmp_path), KeywordStore),
    ):
        (root / "segments" / "seg-00000099.tmp").mkdir()  # a crashed flush's temporary segment
        (root / "deletes" / "seg-00000000.00000042.npy").write_bytes(b"x")
        store = reopen(root)
        store.delete(["a"])
        store.flush()
        names = {p.name for p in (root / "segments").iterdir()} | {
            p.name for p in (root / "deletes").iterdir()
        }
        assert "seg-00000099.tmp" not in names and "seg-00000000.00000042.npy" not in names


def _numpy_peak(run: object) -> tuple[int, int]:
    """(bytes still held after, peak bytes during) numpy/Python allocations of ``run()``."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()  # type: ignore[operator]
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return current - base, peak - base


def test_a_faiss_add_flush_and_merge_never_copy_the_whole_matrix(tmp_path: Path) -> None:
    n, d = 40_000, 384  # a 61 MB matrix: over seven times the block a flush copies at most
    matrix_bytes = n * d * 4
    store = FaissVectorStore(tmp_path / "faiss", dimension=d)
    ids = [f"c{i}" for i in range(n)]
    metas = [{}] * n

    rows = np.random.default_rng(3).standard_normal((n, d), dtype=np.float32)
    held, peak = _numpy_peak(lambda: store.add(ids, rows, metas))
    assert held < matrix_bytes / 4, f"the store keeps {held} bytes besides the index after an add"
    assert peak < matrix_bytes / 2, f"an add of {matrix_bytes} bytes of vectors allocated {peak} more"
    _, peak = _numpy_peak(store.flush)  # the pending rows become one segment
    assert peak < matrix_bytes / 2, f"a flush of {matrix_bytes} bytes of vectors allocated {peak}"
    store.delete(ids[::2])  # half of the rows: the segment is rewritten without them
    _, peak = _numpy_peak(store.flush)
    assert peak < matrix_bytes / 2, f"a merge allocated {peak}"
    reopened = FaissVectorStore(tmp_path / "faiss", dimension=d)
    assert len(reopened) == n // 2 and reopened.ids() == set(ids[1::2])
    probe = np.random.default_rng(3).standard_normal((n, d), dtype=np.float32)[1]
    assert reopened.search(probe, 1)[0][0] == "c1"


def test_corrupt_errors_of_both_stores_are_index_corrupt_errors() -> None:
    assert issubclass(VectorIndexCorruptError, IndexCorruptError)
    assert issubclass(KeywordIndexCorruptError, IndexCorruptError)


@pytest.mark.parametrize("store", ["bm25", "faiss"])
def test_a_flipped_byte_in_an_npy_header_is_damage_whatever_numpy_raises(tmp_path: Path, store: str) -> None:
    """``(42,)`` flipped to ``(42,(`` makes numpy's header parser raise ``tokenize.TokenError``."""
    root = _bm25_dir(tmp_path) if store == "bm25" else _faiss_dir(tmp_path)
    segment = next((root / "segments").iterdir())
    path = segment / ("docs.npy" if store == "bm25" else "seq.npy")
    raw = bytearray(path.read_bytes())
    at = raw.index(b",), }")
    raw[at + 1] = ord("(")
    path.write_bytes(bytes(raw))
    with pytest.raises(IndexCorruptError, match="header|checksum"):  # FAISS checks the CRC32 first
        KeywordStore(root) if store == "bm25" else FaissVectorStore(root, dimension=4)
