from __future__ import annotations

import pytest

from finderledge.filters import compile_filter, matches, to_chroma_where

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
    [{"lang": {"$like": "j"}}, {"$not": [{"a": 1}]}, {"a": {"$in": []}}, {"a": [1, 2]}, {"$or": {"a": 1}}, "lang=ja"],
)
def test_malformed_filters_raise(flt: object) -> None:
    with pytest.raises(ValueError, match="filter"):
        compile_filter(flt)  # type: ignore[arg-type]


def test_chroma_translation_wraps_multiple_keys() -> None:
    assert to_chroma_where({"lang": "ja"}) == {"lang": {"$eq": "ja"}}
    assert to_chroma_where({"lang": "ja", "year": {"$gte": 2020}}) == {
        "$and": [{"lang": {"$eq": "ja"}}, {"year": {"$gte": 2020}}]
    }
    assert to_chroma_where({"$or": [{"a": 1}, {"b": {"$in": [1, 2]}}]}) == {
        "$or": [{"a": {"$eq": 1}}, {"b": {"$in": [1, 2]}}]
    }
    assert to_chroma_where(None) is None
