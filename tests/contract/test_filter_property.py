"""One filter meaning on every backend: random filters over random metadata, checked against a reference.

The reference evaluator below is written from the specification in docs/filters.md, independently of
finderledge.filters.  Every backend (Chroma, FAISS, pgvector in Postgres mode) and mode (hybrid, vector, keyword) must return exactly
the documents it accepts: no leak (a result the reference refuses), no shortfall (a match left out), no
error for a filter the validator accepts.  The searches run both in the writing instance and in a second
instance that follows the writes (its vector index answers from base + overlay).

``FINDERLEDGE_FILTER_EXAMPLES`` sets the number of random filters per backend (default 150, about 15 s per
backend here; ``FINDERLEDGE_FILTER_EXAMPLES=1000`` for a longer run).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from pg_server import fresh_schema

from finderledge import ConfigurationError, FinderLedge

BACKENDS = ["chroma", "faiss", "pgvector"]


def _open(
    kind: str, directory: Path, minilm: Any, request: pytest.FixtureRequest, schema: str | None
) -> FinderLedge:
    """An instance over ``directory`` with the ``kind`` backend; pgvector: Postgres mode (``schema`` in the test
    server), ``directory`` then holds only this instance's BM25 replica."""
    if kind == "pgvector":
        return FinderLedge(
            directory,
            database_url=request.getfixturevalue("pg_url"),
            database_schema=schema,
            embedding=minilm,
            show_progress=False,
        )
    return FinderLedge(directory, vector_store=kind, embedding=minilm, show_progress=False)


FIELDS = ["a", "b", "c", "tags"]
SCALARS: list[Any] = [
    -1,
    0,
    1,
    2,
    3,
    2019,
    2020,
    2**63,
    -(2**63) - 1,
    0.5,
    2.0,
    2.5,
    2019.5,
    -1.5,
    1e300,
    "a",
    "b",
    "ab",
    "A",
    "東京",
    "",
    "2",
    True,
    False,
]
VALUES: list[Any] = SCALARS + [None, ["a", "b"], [1, 2], ["a", 1, True], [], [2.0], ["東京"], {"x": 1}, {}]
N_DOCS = 100
EXAMPLES = int(os.environ.get("FINDERLEDGE_FILTER_EXAMPLES", "150"))


# -- the reference: the specification, spelled out -------------------------------------------------------
def _kind(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "list" if isinstance(v, list) else "object"


def _eq(v: Any, x: Any) -> bool:
    return v is not None and _kind(v) == _kind(x) and v == x


def ref_match(md: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
    for key, cond in flt.items():
        if key == "$and":
            ok = all(ref_match(md, f) for f in cond)
        elif key == "$or":
            ok = any(ref_match(md, f) for f in cond)
        else:
            v = md.get(key)
            ops = cond if isinstance(cond, dict) else {"$eq": cond}
            ok = all(_ref_op(v, op, x) for op, x in ops.items())
        if not ok:
            return False
    return True


def _ref_op(v: Any, op: str, x: Any) -> bool:
    if op == "$eq":
        return _eq(v, x)
    if op == "$ne":
        return v is not None and not _eq(v, x)
    if op == "$in":
        return any(_eq(v, y) for y in x)
    if op == "$nin":
        return v is not None and not any(_eq(v, y) for y in x)
    if op == "$contains":
        return isinstance(v, list) and any(_eq(e, x) for e in v)
    if op == "$not_contains":
        return isinstance(v, list) and not any(_eq(e, x) for e in v)
    if _kind(v) != _kind(x):
        return False
    return {
        "$gt": v > x if op == "$gt" else False,
        "$gte": v >= x if op == "$gte" else False,
        "$lt": v < x if op == "$lt" else False,
        "$lte": v <= x if op == "$lte" else False,
    }[op]


# -- random filters ---------------------------------------------------------------------------------------
_near = sorted(
    {x + d for x in (-1, 0, 1, 2, 3, 2019, 2020) for d in (-0.5, 0, 0.5)}
)  # just beside stored values
_numbers = st.one_of(
    st.integers(-3, 2022),
    st.sampled_from(_near),
    st.sampled_from([float(x) for x in _near]),
    st.floats(-3, 2022, allow_nan=False),
    st.sampled_from([2**63, 2**64, -(2**63) - 1, 1e300]),
)
_scalar = st.one_of(st.sampled_from(SCALARS), _numbers, st.text("abA東京2", max_size=2), st.booleans())
_ordered = st.one_of(_numbers, st.text("abA東京2", max_size=2))


def _condition() -> st.SearchStrategy[Any]:
    single = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne", "$contains", "$not_contains"]), _scalar),
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), _ordered),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(_scalar, min_size=1, max_size=4)),
    )
    return st.one_of(_scalar, st.lists(single, min_size=1, max_size=2).map(dict))


_leaf = st.dictionaries(st.sampled_from(FIELDS), _condition(), min_size=1, max_size=2)
filters = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda fs: {"$and": fs}),
        st.lists(inner, min_size=1, max_size=3).map(lambda fs: {"$or": fs}),
    ),
    max_leaves=4,
)


# -- the corpus -------------------------------------------------------------------------------------------
def _corpus(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    metas = []
    for _ in range(N_DOCS):
        md = {f: rng.choice(VALUES) for f in FIELDS if rng.random() < 0.8}
        metas.append(md)
    return metas


@pytest.fixture(scope="module", params=BACKENDS)
def indexes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: Any
) -> Iterator[tuple[str, list[dict[str, Any]], list[FinderLedge]]]:
    """A writer and a follower over one directory; the last 20 documents reach the follower by its overlay."""
    kind = str(request.param)
    directory = tmp_path_factory.mktemp(f"filters-{kind}") / "index"
    metas = _corpus(7)
    docs = [
        Document(page_content=f"common document number {i} word{i % 7}", metadata={**md, "doc_no": i})
        for i, md in enumerate(metas)
    ]
    schema = fresh_schema()
    writer = _open(kind, directory, minilm, request, schema)
    writer.add_document(docs[:80])
    follower = _open(
        kind, directory.with_name("follower") if kind == "pgvector" else directory, minilm, request, schema
    )
    follower.search("common", k=1)  # opens its indexes now, from the checkpoint of the first 80
    writer.add_document(docs[80:])
    yield kind, metas, [writer, follower]
    follower.close()
    writer.close()


def _found(fl: FinderLedge, flt: Mapping[str, Any], mode: str) -> set[int]:
    results = fl.search("common document", k=2 * N_DOCS, search_mode=mode, filter=flt)
    return {int(r.metadata["doc_no"]) for r in results}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(flt=filters)
def test_every_backend_and_mode_agrees_with_the_reference(indexes: Any, flt: dict[str, Any]) -> None:
    kind, metas, instances = indexes
    expected = {i for i, md in enumerate(metas) if ref_match(md, flt)}
    for fl in instances:
        for mode in ("hybrid", "vector", "keyword"):
            found = _found(fl, flt, mode)
            assert found - expected == set(), f"{kind} {mode}: leaks {sorted(found - expected)} for {flt}"
            assert expected - found == set(), f"{kind} {mode}: shortfall {sorted(expected - found)} for {flt}"


# -- the cases reported in the issue, by name ------------------------------------------------------------
@pytest.fixture(scope="module", params=BACKENDS)
def small(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: Any
) -> Iterator[FinderLedge]:
    fl = _open(str(request.param), tmp_path_factory.mktemp("small") / "i", minilm, request, fresh_schema())
    mds: list[dict[str, Any]] = [
        {"year": 2019, "name": "x"},
        {"year": 2020, "n": None},
        {"year": 2020.5, "n": 1},
        {"n": {"k": 1}, "name": "y"},
        {"n": [1, 2], "tags": ["hr", "it"]},
        {"big": 2**64},
    ]
    fl.add_document(
        [Document(page_content=f"common text {i}", metadata={**md, "doc_no": i}) for i, md in enumerate(mds)]
    )
    yield fl
    fl.close()


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"name": {"$ne": "x"}}, {3}),  # chunks without "name" never match $ne
        ({"name": {"$nin": ["x"]}}, {3}),
        ({"year": {"$lt": 2020.5}}, {0, 1}),  # an int field against a float operand: no truncation
        ({"year": {"$gte": 2019.5}}, {1, 2}),
        ({"n": {"$ne": 1}}, {3, 4}),  # None is missing; a dict and a list are present and not 1
        ({"n": 1}, {2}),
        ({"tags": {"$contains": "hr"}}, {4}),
        ({"tags": {"$in": ["hr"]}}, set()),  # a list never equals a scalar: use $contains
        ({"name": {"$gte": "x"}}, {0, 3}),  # string ordering, refused by Chroma itself
        ({"year": {"$in": [2019, "2020", True]}}, {0}),  # mixed-type $in
        ({"big": {"$gte": 2**63}}, {5}),  # integers beyond 64 bits
        ({"big": 2**64}, {5}),
    ],
)
@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_reported_cases(small: FinderLedge, flt: dict[str, Any], expected: set[int], mode: str) -> None:
    assert _found(small, flt, mode) == expected


@pytest.mark.parametrize(
    "flt",
    [
        {1: 2},
        {"": 1},
        {"a": None},
        {"a": {"$eq": None}},
        {"a": float("nan")},
        {"a": {"$gt": math.inf}},
        {"a": {"$gt": False}},
        {"a": {"$in": []}},
        {"a": {"$in": [[1]]}},
        {"a": [1, 2]},
        {"a": {"$like": "x"}},
        {"$not": [{"a": 1}]},
        {"$or": {"a": 1}},
        {"$and": [{}]},
        {"a": {}},
        {"a": {"x": 1}},
        "a=1",
        [("a", 1)],
        {"a": {"$contains": [1]}},
    ],
)
def test_malformed_filters_are_refused_before_any_leg(small: FinderLedge, flt: Any) -> None:
    for mode in ("hybrid", "vector", "keyword"):
        with pytest.raises(ConfigurationError, match="filter"):
            small.search("common", search_mode=mode, filter=flt)


def test_deep_nesting_is_refused_not_a_recursion_error(small: FinderLedge) -> None:
    flt: dict[str, Any] = {"a": 1}
    for _ in range(2000):
        flt = {"$and": [flt]}
    with pytest.raises(ConfigurationError, match="nested"):
        small.search("common", filter=flt)


def test_metadata_is_checked_before_embedding(tmp_path: Path, minilm: Any) -> None:
    import datetime

    import numpy as np

    fl = FinderLedge(tmp_path / "i", embedding=minilm, show_progress=False)
    for bad, hint in [
        ({"when": datetime.datetime(2024, 1, 1)}, "isoformat"),
        ({"s": {1, 2}}, "list"),
        ({"x": float("nan")}, "finite"),
        ({"deep": {"k": object()}}, "deep"),
    ]:
        with pytest.raises(ConfigurationError, match=hint) as info:
            fl.add_document(Document(page_content="text", metadata=bad))
        assert next(iter(bad)) in str(info.value)  # the key is named
    fl.add_document(Document(page_content="numpy values", metadata={"n": np.int64(3), "f": np.float32(0.5)}))
    assert fl.search("numpy", filter={"n": 3})[0].metadata["n"] == 3
    assert fl.count()["documents"] == 1
    fl.close()
