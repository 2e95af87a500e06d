"""Each chunk keeps its own metadata when a lazy sequence builds a new dict per access: the vector store and
the overlay copy one dict per metadata object, and a freed dict's ``id()`` reused by a later one must not hand
that later chunk the earlier chunk's copy (the keyword store had this bug: 48 of 50 chunks wrong)."""

from __future__ import annotations

import numpy as np
from lazy_metadata import FreshDicts

from finderledge.metadata import copies_per_object
from finderledge.replica.overlay import VectorOverlay
from finderledge.vector_stores.faiss import FaissVectorStore


def test_one_copy_per_object_held_while_copying() -> None:
    shared = {"source": "f.md"}
    out = copies_per_object([shared, shared, {"a": 1}])
    assert out[0] is out[1] and out[0] == shared and out[0] is not shared and out[2] == {"a": 1}
    assert copies_per_object(FreshDicts(50)) == [{"n": i} for i in range(50)]


def test_faiss_store_and_overlay_keep_each_chunks_metadata_from_a_lazy_sequence(tmp_path) -> None:
    ids = [f"c{i}" for i in range(50)]
    vectors = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    store = FaissVectorStore(None, dimension=4)
    store.add(ids, vectors, FreshDicts(50))
    for i in range(50):  # a filter on each chunk's own value finds that chunk alone
        assert [cid for cid, _ in store.search(vectors[i], 3, {"n": i})] == [f"c{i}"]
    overlay = VectorOverlay()
    overlay.add(ids, vectors, FreshDicts(50), [""] * 50)
    assert overlay.metadatas == [{"n": i} for i in range(50)]
