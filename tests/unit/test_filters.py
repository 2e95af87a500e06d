from __future__ import annotations

import pytest

from finderledge.filters import compile_filter, matches
from finderledge.vector_stores.chroma_filter import prefilter_where

MD = {"lang": "ja", "year": 2021, "draft": False, "source": "a.md"}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"lang": "ja"}, True),
        ({"lang": "en"}, False),
        ({"year": {"$gte": 2021}}, True),
        ({"year": {"$gt": 2021}}, False),
        ({"year": {"$lt": 2022, "$gt": 2020}}, True),
        ({"source": {"$in": ["a.md", "b.md"]}}, True),
        ({"source": {"$nin": ["a.md"]}}, False),
        ({"lang": "ja", "year": 1999}, False),
        ({"$or": [{"lang": "en"}, {"year": 2021}]}, True),
        ({"$and": [{"lang": "ja"}, {"draft": False}]}, True),
        ({"draft": 0}, False),  # bool is not int
        ({"missing": {"$ne": "x"}}, False),  # a missing field matches nothing
        ({"year": {"$ne": "2021"}}, True),
    ],
)
def test_semantics(flt: dict, expected: bool) -> None:
    assert matches(MD, flt) is expected


@pytest.mark.parametrize(
    "flt",
    [
        {"lang": {"$like": "j"}},
        {"$not": [{"a": 1}]},
        {"a": {"$in": []}},
        {"a": [1, 2]},
        {"$or": {"a": 1}},
        "lang=ja",
    ],
)
def test_malformed_filters_raise(flt: object) -> None:
    with pytest.raises(ValueError, match="filter"):
        compile_filter(flt)  # type: ignore[arg-type]


def test_chroma_prefilter_only_narrows_where_chroma_agrees() -> None:
    assert prefilter_where({"lang": "ja"}) == {"lang": {"$eq": "ja"}}
    assert prefilter_where({"lang": "ja", "year": {"$gte": 2020}}) == {
        "$and": [{"lang": {"$eq": "ja"}}, {"year": {"$gte": 2020}}]
    }
    # a float bound is widened to a whole number (Chroma truncates it against int fields)
    assert prefilter_where({"year": {"$lt": 2020.5}}) == {"year": {"$lte": 2021}}
    # mixed-type $in is split; $ne cannot narrow (Chroma's $ne matches missing fields)
    assert prefilter_where({"b": {"$in": [1, "1"]}, "c": {"$ne": 1}}) == {
        "$or": [{"b": {"$in": [1]}}, {"b": {"$in": ["1"]}}]
    }
    # an $or with one branch Chroma cannot narrow lets everything through
    assert prefilter_where({"$or": [{"a": 1}, {"b": {"$ne": 2}}]}) is None
    assert prefilter_where(None) is None
