"""A filter with more than MAX_FILTER_VALUES values is refused with an error naming the limit, on every backend,
before any leg runs; one at the limit works everywhere (issue 28: a 64,000-value ``$in`` on Chroma dropped the
connection, 80,000 values gave a 500 "too many SQL variables")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.errors import ConfigurationError, FilterTooLargeError
from finderledge.filters import MAX_FILTER_VALUES, filter_values

MODES = ("hybrid", "vector", "keyword")


def make_ledger(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> FinderLedge:
    extra: dict[str, Any] = {}
    if kind == "pgvector":
        extra = {"database_url": request.getfixturevalue("pg_url"), "database_schema": fresh_schema()}
    else:
        extra = {"vector_store": kind}
    fl = FinderLedge(
        tmp_path / "index",
        embedding=DeterministicFakeEmbedding(size=8),
        show_progress=False,
        env_file=None,
        **extra,
    )
    fl.add_texts([f"note {i} about the budget" for i in range(20)], metadatas=[{"n": i} for i in range(20)])
    return fl


@pytest.fixture(params=["faiss", "chroma", "pgvector"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FinderLedge]:
    fl = make_ledger(request.param, tmp_path, request)
    yield fl
    fl.close()


def test_values_are_counted_across_the_filter() -> None:
    assert (
        filter_values(
            {"a": 1, "b": {"$in": [1, 2, 3], "$ne": 4}, "$or": [{"c": "x"}, {"d": {"$nin": [1, 2]}}]}
        )
        == 8
    )


def test_over_the_limit_is_refused_naming_it_on_every_backend(ledger: FinderLedge) -> None:
    too_many = {"n": {"$in": list(range(MAX_FILTER_VALUES + 1))}}
    split = {
        "$or": [{"n": i} for i in range(MAX_FILTER_VALUES // 2 + 1)] + [{"n": {"$in": list(range(5000))}}]
    }
    for flt in (too_many, split, {"$and": [{"x": "y"}, too_many]}):
        for mode in MODES:
            with pytest.raises(FilterTooLargeError, match=f"limit of {MAX_FILTER_VALUES}") as err:
                ledger.search("budget", search_mode=mode, filter=flt)
            assert isinstance(err.value, ConfigurationError)
            assert "MAX_FILTER_VALUES" in str(err.value)
    with pytest.raises(FilterTooLargeError):  # a scope's own filter is limited when the scope is made
        ledger.scoped({"n": {"$in": list(range(MAX_FILTER_VALUES + 1))}})
    scope = ledger.scoped({"n": {"$in": list(range(MAX_FILTER_VALUES))}})
    with pytest.raises(
        FilterTooLargeError, match=f"{MAX_FILTER_VALUES + 1} values"
    ):  # the caller's part alone
        scope.search("budget", filter={"n": {"$in": list(range(MAX_FILTER_VALUES + 1))}})


def test_a_scopes_own_clause_does_not_count_against_the_callers_limit(ledger: FinderLedge) -> None:
    """Issue 39: the tenant's clause made a caller's filter at the limit one over it; a scope's values are
    limited on their own, so scope and caller both at the limit (20,000 values) answer on every backend."""
    tenant = ledger.scoped({"n": {"$lt": 10}})
    at_limit = {"n": {"$in": list(range(MAX_FILTER_VALUES))}}
    wide = ledger.scoped({"n": {"$in": [*range(5, 20), *(f"s{i}" for i in range(MAX_FILTER_VALUES - 15))]}})
    for mode in MODES:
        found = tenant.search("budget", search_mode=mode, filter=at_limit, k=30)
        assert {r.document.metadata["n"] for r in found} == set(range(10)), mode
        found = wide.search("budget", search_mode=mode, filter=at_limit, k=30)
        assert {r.document.metadata["n"] for r in found} == set(range(5, 20)), mode
    assert tenant.count(at_limit)["documents"] == 10
    assert len(tenant.list_documents(filter=at_limit)) == 10


def test_at_the_limit_every_backend_answers(ledger: FinderLedge) -> None:
    at_limit = {"n": {"$in": [*range(3, MAX_FILTER_VALUES + 2)][:MAX_FILTER_VALUES]}}
    for mode in MODES:
        found = ledger.search("budget", search_mode=mode, filter=at_limit, k=30)
        assert found and {r.document.metadata["n"] for r in found} <= set(range(3, 20))
    mixed = {
        "n": {
            "$in": [*range(5, 5 + MAX_FILTER_VALUES // 2), *(f"s{i}" for i in range(MAX_FILTER_VALUES // 2))]
        }
    }
    assert {r.document.metadata["n"] for r in ledger.search("budget", filter=mixed, k=30)} == set(
        range(5, 20)
    )
