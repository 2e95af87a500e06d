"""Issue 27 (bounded memory for one big file): the writer's catch-up of a big change grows the FAISS storage once.

A 200 MB file peaked (1.18 GB) inside ``FaissVectorStore.add`` during a mid-catch-up spill: the index's one
growing buffer reallocated, holding the old rows and their copy at once.  The catch-up knows how many vectors
are coming, so the storage is made room for once, before the first of them, and never copied afterwards; and
the heap the catch-up's batches freed is handed back to the system after each spill.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import tracemalloc
import zlib
from pathlib import Path

import faiss
import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from texts import paragraphs

from finderledge import FinderLedge
from finderledge.ingest import memory
from finderledge.ingest import write as ingest
from finderledge.replica import catch_up
from finderledge.replica import core as replica
from finderledge.replica.overlay import VectorOverlay
from finderledge.storage.files import Storage
from finderledge.storage.segments import SegmentWriter
from finderledge.vector_stores.faiss import FaissVectorStore


def _storage(store: FaissVectorStore) -> int:
    """The address of the index's vector storage (it changes when the storage is reallocated)."""
    return int(faiss.rev_swig_ptr(store._rows.flat.get_xb(), 1).__array_interface__["data"][0])


def test_a_reserved_faiss_store_adds_without_moving_its_storage() -> None:
    store = FaissVectorStore(None, dimension=32)
    rng = np.random.default_rng(0)
    store.add(["a"], rng.standard_normal((1, 32), dtype=np.float32), [{}])
    store.reserve(4_000)
    where = _storage(store)
    for lo in range(0, 4_000, 500):
        store.add(
            [f"c{i}" for i in range(lo, lo + 500)],
            rng.standard_normal((500, 32), dtype=np.float32),
            [{}] * 500,
        )
        assert _storage(store) == where
    assert len(store) == 4_001
    assert store.search(rng.standard_normal(32, dtype=np.float32), 1)  # still searchable


def test_the_writers_big_catch_up_grows_the_faiss_storage_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "STREAM_DOCUMENT_CHARS", 5_000)
    monkeypatch.setattr(ingest, "STREAM_WINDOW_CHARS", 3_000)
    monkeypatch.setattr(replica, "BIG_CHANGE", 10)  # the catch-up reads 7 rows at a time
    monkeypatch.setattr(catch_up, "CATCH_UP_BATCH", 7)
    monkeypatch.setattr(catch_up, "SPILL_ROWS", 15)  # and writes its indexes every 15 chunks
    stream = paragraphs(3)
    big = tmp_path / "big.txt"
    big.write_text("\n\n".join(next(stream) for _ in range(80)), encoding="utf-8")
    places: list[int] = []
    trims: list[int] = []
    real_add = FaissVectorStore.add

    def add(self: FaissVectorStore, *args: object, **kwargs: object) -> None:
        real_add(self, *args, **kwargs)  # type: ignore[arg-type]
        places.append(_storage(self))

    monkeypatch.setattr(FaissVectorStore, "add", add)
    monkeypatch.setattr(memory, "release_free_memory", lambda: trims.append(1) or True)
    with FinderLedge(
        tmp_path / "index",
        embedding=DeterministicFakeEmbedding(size=16),
        vector_store="faiss",
        show_progress=False,
    ) as fl:
        fl.add_texts(["a first small note about the warehouse"])  # the store exists before the big change
        places.clear()
        fl.add_document(big)
        chunks = fl.count()["chunks"]
        assert fl.search("warehouse", k=3)
    assert chunks > 40
    assert len(places) >= 3  # the change went in over several spills
    assert len(set(places)) == 1, f"the storage moved {len(set(places)) - 1} time(s) during one catch-up"
    assert len(trims) >= 3  # freed heap handed back after each spill


def test_release_free_memory_returns_freed_heap_to_the_system() -> None:
    """Many small blocks freed below live ones stay in the process (glibc keeps them) until released."""
    code = textwrap.dedent(
        """
        import ctypes
        from finderledge.ingest.memory import release_free_memory
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096 // 2**20
        libc = ctypes.CDLL(None)
        libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        blocks = [libc.malloc(4000) for _ in range(50_000)]  # ~200 MB on the heap (below the mmap threshold)
        for b in blocks[:-1]:
            libc.free(b)  # freed, but the last one keeps the heap's top in place
        before = rss()
        released = release_free_memory()
        print(before, rss(), released)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    before, after, released = int(out[0]), int(out[1]), out[2] == "True"
    if not released:
        pytest.skip("no malloc_trim in this C library (not glibc): nothing to release")
    assert before - after > 100, f"RSS {before} MB -> {after} MB"


def test_moving_the_overlay_into_the_base_never_stacks_all_its_vectors() -> None:
    """The overlay's rows go into the base a block at a time: no matrix of every row is made for the move
    (with 255k rows that was a 392 MB copy beside the overlay's own and the index's)."""
    n, d = 40_000, 384  # 61 MB of vectors; a move costs a few blocks (~20 MB) whatever their number
    overlay = VectorOverlay()
    for lo in range(0, n, 5_000):  # added in batches, as a catch-up does
        batch = np.random.default_rng(lo).standard_normal((5_000, d), dtype=np.float32)
        overlay.add([f"c{i}" for i in range(lo, lo + 5_000)], batch, [{}] * 5_000, [""] * 5_000)
    del batch
    base = FaissVectorStore(None, dimension=d)
    base.reserve(n)
    gc.collect()
    tracemalloc.start()
    try:
        overlay.apply_to(base)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(base) == n
    assert peak < 0.4 * n * d * 4, f"moving {n * d * 4} bytes of vectors allocated {peak} bytes at once"
    query = np.random.default_rng(5_000).standard_normal((5_000, d), dtype=np.float32)[7]
    assert base.search(query, 1)[0][0] == "c5007"  # the rows kept their ids


def test_a_segments_json_list_is_written_without_holding_all_its_text(tmp_path: Path) -> None:
    """A flush writes a big segment's ids and metadata as JSON: the same bytes as one ``json.dumps``, never the
    whole text and its bytes at once (the 200 MB file's last peak, in a merge's ``meta.json``)."""
    metas = [{"source": "big.txt", "page": i, "title": f"part {i} — " + "é" * 200} for i in range(60_000)]
    whole = json.dumps(metas, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    (tmp_path / "seg").mkdir()
    out = SegmentWriter(Storage(tmp_path), "seg")
    gc.collect()
    tracemalloc.start()
    try:
        out.write_json("meta.json", metas)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "seg" / "meta.json").read_bytes() == whole
    assert out.files["meta.json"] == {"bytes": len(whole), "crc32": zlib.crc32(whole)}
    assert peak < 0.5 * len(whole), f"writing {len(whole)} bytes of JSON held {peak} bytes at once"
    out.write_json("empty.json", [])
    assert (tmp_path / "seg" / "empty.json").read_bytes() == b"[]"
