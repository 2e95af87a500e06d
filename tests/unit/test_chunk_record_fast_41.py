"""The SQLite ledger makes the ``ChunkRecord`` of every row it decodes without the frozen dataclass's
``__init__`` (a search decodes k rows, issue 41): the object must be the one ``__init__`` makes."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np

from finderledge.ledgers import ChunkRecord
from finderledge.ledgers.sqlite import chunk_record


def test_chunk_record_is_the_dataclass_its_init_makes() -> None:
    md = {"a": 1, "_finderledge": {"id": "p-0001"}}
    emb = np.arange(4, dtype=np.float32)
    fast, plain = (
        chunk_record("p-0001", "p", 1, "text", md, emb),
        ChunkRecord("p-0001", "p", 1, "text", md, emb),
    )
    assert type(fast) is ChunkRecord
    # every field set, in the dataclass's order (a field added to ChunkRecord must be added there too)
    assert list(vars(fast)) == [f.name for f in dataclasses.fields(ChunkRecord)] == list(vars(plain))
    assert repr(fast) == repr(plain)
    assert dataclasses.astuple(fast)[:5] == dataclasses.astuple(plain)[:5]
    assert fast.embedding is emb
    no_vector = chunk_record("p-0001", "p", 1, "text", md, None)
    assert no_vector == ChunkRecord("p-0001", "p", 1, "text", md)
    assert pickle.loads(pickle.dumps(no_vector)) == no_vector == copy.deepcopy(no_vector)
    assert dataclasses.replace(no_vector, content="other").content == "other"
    try:
        no_vector.content = "x"  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a record made this way must stay frozen")
