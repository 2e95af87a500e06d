"""``jsonb_text``'s one-``json.dumps`` path for flat metadata (issue 43, bulk50: a bulk load encodes every
vector row's metadata): the same text, byte for byte, as the value-by-value encoder, and the same ``lossy``
flag; anything else (floats, nesting, NUL, surrogates, odd types) still goes value by value."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
import pytest

from finderledge.vector_stores import pg_filter


class Colour(enum.IntEnum):
    RED = 1


CASES: list[dict[str, Any]] = [
    {},
    {"n": 1, "group": 3},
    {"source": "a/b.txt", "tag": 'quote"back\\slash', "flag": True, "none": None, "off": False},
    {"big": 10**30, "neg": -7, "東京": "桜 🎉", "ctl": "tab\tnew\nline\x01"},
    {"nul": "a\x00b"},
    {"sur": "a\ud800b"},
    {"k\x00ey": 1},
    {"f": 0.1, "g": 1e-8},
    {"nested": {"x": [1, None, True]}},
    {"list": ["a", 2]},
    {"enum": Colour.RED},
    {"np": np.int64(5)},
    {"text": "looks like an escape \\u0000 but is not"},
]


def _slow(md: dict[str, Any]) -> tuple[str, bool]:
    lossy = [False]
    return pg_filter._encode(dict(md), lossy), lossy[0]


@pytest.mark.parametrize("md", CASES, ids=range(len(CASES)))
def test_flat_metadata_in_one_dumps_is_the_encoders_text(md: dict[str, Any]) -> None:
    assert pg_filter.jsonb_text(md) == _slow(md)


def test_the_usual_metadata_takes_one_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = pg_filter._encode

    def spy(value: Any, lossy: list[bool]) -> str:
        calls.append(value)
        return real(value, lossy)

    monkeypatch.setattr(pg_filter, "_encode", spy)
    pg_filter.jsonb_text({"n": 1, "group": 3, "source": "x"})
    assert calls == []
    pg_filter.jsonb_text({"f": 0.5})  # a float: its exact decimal, value by value
    assert calls
