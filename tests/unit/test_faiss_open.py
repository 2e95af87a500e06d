"""Issue 29: opening a FAISS store does no per-row work in FAISS and reads each vectors file once.

A fresh process's first query at 1,000,000 chunks spent 6 s in ``IndexIDMap2.add_with_ids`` filling FAISS's
reverse id map row by row, and 1.5 s reading every ``vectors.npy`` a second time for its CRC32.  The store now
keeps the row id of each position itself over a plain ``IndexFlatIP`` (filled with one copy into storage
sized once) and checks each vectors file's CRC32 over the blocks it copies, so a flipped byte is still found.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest

from finderledge.storage.segments import SegmentFiles
from finderledge.vector_stores.faiss import FaissVectorStore, VectorIndexCorruptError

D = 8


def _filled(root: Path) -> tuple[FaissVectorStore, np.ndarray]:
    """A store of three flushed batches (segments) with deletions in the first, and pending rows."""
    rng = np.random.default_rng(29)
    vecs = rng.standard_normal((130, D)).astype(np.float32)
    store = FaissVectorStore(root, dimension=D)
    for lo, hi in ((0, 60), (60, 100), (100, 120)):
        store.add([f"r{i}" for i in range(lo, hi)], vecs[lo:hi], [{"t": f"t{i % 3}"} for i in range(lo, hi)])
        store.flush()
    store.delete([f"r{i}" for i in range(0, 60, 4)])
    store.flush()
    store.add(
        [f"r{i}" for i in range(120, 130)], vecs[120:130], [{"t": f"t{i % 3}"} for i in range(120, 130)]
    )
    return store, vecs


def _answers(store: FaissVectorStore, vecs: np.ndarray) -> list[Any]:
    out: list[Any] = [store.search(vecs[i], 5) for i in (1, 61, 101, 125)]
    out.append(store.search(vecs[7], 4, {"t": "t1"}))
    out.append(store.search_many(vecs[[3, 70, 110]], 3))
    store.set_partition_key("t")
    out.append(store.search(vecs[9], 4, {"t": "t0"}))
    store.set_partition_key(None)
    return out


class _NoIdMap:
    def __init__(self, *args: object) -> None:
        raise AssertionError("the store must not build a FAISS id map (its reverse map is filled per row)")


def test_the_store_never_builds_a_faiss_id_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected_store, vecs = _filled(tmp_path / "reference")
    expected_store.flush()
    expected = _answers(FaissVectorStore(tmp_path / "reference", dimension=D), vecs)
    monkeypatch.setattr(faiss, "IndexIDMap2", _NoIdMap)
    monkeypatch.setattr(faiss, "IndexIDMap", _NoIdMap)
    store, _ = _filled(tmp_path / "f")
    assert _answers(store, vecs) == expected  # adds, deletes, flushes, merges and every search kind
    store.flush()
    reopened = FaissVectorStore(tmp_path / "f", dimension=D)
    assert _answers(reopened, vecs) == expected
    assert len(reopened) == 130 - 15 and "r4" not in reopened.ids() and "r5" in reopened.ids()
    reopened.delete(["r5", "r125"])
    assert all(hit[0] not in {"r5", "r125"} for hit in reopened.search(vecs[5], 130))


def test_open_reads_each_vectors_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, vecs = _filled(tmp_path / "f")
    store.flush()
    read_whole: list[str] = []
    real_read, real_verify = SegmentFiles.read, SegmentFiles.verify_crc

    def read(self: SegmentFiles, name: str, *args: Any, **kwargs: Any) -> bytes:
        read_whole.append(name)
        return real_read(self, name, *args, **kwargs)

    def verify_crc(self: SegmentFiles, name: str, *args: Any, **kwargs: Any) -> None:
        read_whole.append(name)
        real_verify(self, name, *args, **kwargs)

    monkeypatch.setattr(SegmentFiles, "read", read)
    monkeypatch.setattr(SegmentFiles, "verify_crc", verify_crc)
    reopened = FaissVectorStore(tmp_path / "f", dimension=D)
    assert read_whole and not [n for n in read_whole if n.endswith("vectors.npy")]  # mapped and copied only
    assert reopened.search(vecs[1], 1)[0][0] == "r1"


def test_a_flipped_byte_in_a_deleted_rows_vector_is_still_found(tmp_path: Path) -> None:
    """The CRC32 is computed while the live rows are copied, over every row of the file, dead ones too."""
    store, _ = _filled(tmp_path / "f")
    store.flush()
    manifest = json.loads((tmp_path / "f" / "manifest.json").read_text(encoding="utf-8"))
    seg = next(s for s in manifest["segments"] if s["deletes"])
    path = tmp_path / "f" / "segments" / seg["name"] / "vectors.npy"
    data = bytearray(path.read_bytes())
    data[len(data) - seg["rows"] * D * 4 + 5] ^= 0x10  # row 0 of the segment: deleted (r0)
    path.write_bytes(bytes(data))
    with pytest.raises(VectorIndexCorruptError, match="checksum"):
        FaissVectorStore(tmp_path / "f", dimension=D)


def _storage(store: FaissVectorStore) -> int:
    """The address of the index's vector storage (it changes when the storage is reallocated)."""
    return int(faiss.rev_swig_ptr(store._rows.flat.get_xb(), 1).__array_interface__["data"][0])


def test_the_first_adds_after_open_do_not_move_the_storage(tmp_path: Path) -> None:
    """Opening sizes the storage once, with room to spare: a writer's next adds copy no row already held."""
    store, vecs = _filled(tmp_path / "f")
    store.flush()
    reopened = FaissVectorStore(tmp_path / "f", dimension=D)
    where = _storage(reopened)
    for i in range(200):
        reopened.add([f"n{i}"], vecs[i % 130][None, :], [{}])
    assert _storage(reopened) == where
    assert reopened.search(vecs[3], 1)[0][0] in {"r3", "n3", "n133"}
