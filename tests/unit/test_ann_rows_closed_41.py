"""An approximate FAISS store's segment files are closed by its ``close()``, not left to garbage collection.

The approximate kinds (``ivf_*``, ``hnsw``) read their rows on demand through the descriptor each
``vectors.npy`` was checked through (:class:`~finderledge.vector_stores.flat_rows.FileRows`).  Those descriptors
used to be closed only when the store was collected: a closed store still held them open (a reference kept by a
caller, or a cycle, kept them for the process's life).  A read after ``close()`` raises a clear error instead of
reading whatever file the descriptor number names by then.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

from finderledge.vector_stores.faiss import VECTORS_FILE, FaissVectorStore, VectorIndexCorruptError
from finderledge.vector_stores.flat_rows import FileRows

DIM = 16
pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")


def _vectors(n: int) -> np.ndarray:
    v = np.random.default_rng(0).normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _open_vectors_files(root: Path) -> list[str]:
    """The files of ``root``'s segments this process holds a descriptor of."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used, closed meanwhile
            continue
        if target.startswith(str(root)) and target.endswith(VECTORS_FILE):
            found.append(target)
    return found


@pytest.mark.parametrize("kind", ["ivf_sq8", "hnsw"])
def test_close_closes_the_segment_files(tmp_path: Path, kind: str) -> None:
    root, vectors = tmp_path / "i", _vectors(600)
    store = FaissVectorStore(root, dimension=DIM, vector_index=kind, ann_min_rows=200)
    for lo in range(0, 600, 200):  # three segments
        store.add([f"c{i}" for i in range(lo, lo + 200)], vectors[lo : lo + 200], [{}] * 200)
        store.flush()
    store.close()
    gc.collect()
    assert _open_vectors_files(root) == []

    opened = FaissVectorStore(root, dimension=DIM, vector_index=kind, ann_min_rows=200)
    parts = list(opened._rows._parts)
    assert len(parts) == 3 and all(isinstance(p, FileRows) for p in parts)
    assert opened.search(vectors[7], 3)[0][0] == "c7"
    assert len(_open_vectors_files(root)) == 3
    opened.close()
    # still referenced here (as a caller or a cycle may hold a store): closed all the same
    assert _open_vectors_files(root) == []
    opened.close()  # twice: nothing more to do
    with pytest.raises(VectorIndexCorruptError, match="closed"):
        parts[0][0:2]
    with pytest.raises(VectorIndexCorruptError, match="closed"):
        parts[0][[0, 5]]
    del opened, parts
    gc.collect()  # the finalizers of closed rows close nothing twice (no other descriptor is hit)
    assert _open_vectors_files(root) == []
