"""prepare_batch: each chunk gets its own metadata copy, or the one copy of the object it shares."""

from __future__ import annotations

from lazy_metadata import FreshDicts

from finderledge.keyword_store import KeywordStore


def test_each_chunk_keeps_its_metadata_from_a_lazy_sequence() -> None:
    """prepare_batch shares one copy per metadata *object*; a dict freed and its id() reused by the next
    chunk's must not hand that chunk the previous chunk's metadata (main gave 48 of 50 chunks a wrong one)."""
    store = KeywordStore(None)
    store.add([f"c{i}" for i in range(50)], [f"text {i}" for i in range(50)], FreshDicts(50))
    assert [store.get_metadata(f"c{i}") for i in range(50)] == [{"n": i} for i in range(50)]


def test_chunks_without_metadata_get_their_own_empty_dict() -> None:
    store = KeywordStore(None)
    store.add(["a", "b"], ["one text", "two text"])
    assert store.get_metadata("a") == store.get_metadata("b") == {}
    batch = store.prepare(["x", "y"], ["x", "y"])
    assert batch["x"][2] is not batch["y"][2]
    shared = {"source": "f.md"}
    batch = store.prepare(["x", "y", "z"], ["x", "y", "z"], [None, shared, shared])  # type: ignore[list-item]
    assert batch["x"][2] == {} and batch["y"][2] == batch["z"][2] == shared
    assert batch["y"][2] is batch["z"][2] and batch["y"][2] is not shared  # one copy per object given
