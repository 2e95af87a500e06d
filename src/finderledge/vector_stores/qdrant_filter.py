"""Qdrant's side of a FinderLedge filter: what a point's payload holds, and a Qdrant filter that can only widen.

Qdrant's matching differs from FinderLedge's in places (a ``match`` on a list field matches any element, a
keyword never equals a number, there is no string ordering, ``must_not`` matches a missing field).  So, as with
Chroma and pgvector, Qdrant never decides alone: each chunk's full metadata is kept as JSON under
:data:`FULL_KEY`, the filter built here keeps *every* point the FinderLedge filter could match (it narrows only
by clauses Qdrant evaluates at least as widely), and the store checks each candidate with
:func:`finderledge.filters.compile_filter`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .base import FULL_KEY, full_metadata

__all__ = ["FULL_KEY", "ID_KEY", "prefilter", "qdrant_payload", "stored_metadata"]

ID_KEY = "_finderledge_id"  # the chunk id (Qdrant's point ids are UUIDs or integers)
_INT64 = 2**63
_EXACT = 2**53  # numbers up to this size narrow Qdrant (its ranges compare as floats); bigger: checked after


def _copyable_key(key: str) -> bool:
    """A key Qdrant reads as a plain field (``.`` and ``[`` would be read as a nested path)."""
    return (
        bool(key)
        and not key.startswith(("$", FULL_KEY))
        and "." not in key
        and "[" not in key
        and key.strip() == key
    )


def _copyable_scalar(value: Any) -> bool:
    if isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return -_INT64 <= value < _INT64
    return isinstance(value, float) and math.isfinite(value)


def qdrant_payload(chunk_id: str, md: Mapping[str, Any]) -> dict[str, Any]:
    """A point's payload: the chunk id, the JSON of ``md``, and its scalars (and lists of scalars) to narrow by,
    with the design's ``chunk_id`` and ``page_number``."""
    out: dict[str, Any] = {
        ID_KEY: chunk_id,
        FULL_KEY: json.dumps(dict(md), ensure_ascii=False, sort_keys=True),
    }
    for key, value in md.items():
        if not _copyable_key(key):
            continue
        if _copyable_scalar(value):
            out[key] = value
        elif isinstance(value, list):
            items = [v for v in value if _copyable_scalar(v)]
            if items:
                out[key] = items
    # the document-search design's payload names (only where the metadata has no field of that name: a filter
    # on them is re-checked against the metadata, so these copies can only widen what Qdrant keeps)
    out.setdefault("chunk_id", chunk_id)
    page = md.get("page")
    if isinstance(page, int) and not isinstance(page, bool) and _copyable_scalar(page):
        out.setdefault("page_number", page)
    return out


def stored_metadata(payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """The chunk metadata a point carries."""
    return full_metadata(payload, (FULL_KEY, ID_KEY))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= _EXACT


def _equal_to(models: Any, field: str, arg: Any) -> Any:
    """A condition matching at least the points whose ``field`` equals ``arg`` (``None``: cannot narrow)."""
    if _number(arg):  # 2021 equals 2021.0: a range compares numbers whatever their type
        return models.FieldCondition(key=field, range=models.Range(gte=arg, lte=arg))
    if isinstance(arg, (bool, str)):
        return models.FieldCondition(key=field, match=models.MatchValue(value=arg))
    return None


def _condition(models: Any, field: str, op: str, arg: Any) -> Any:
    """A Qdrant condition matching at least what ``field op arg`` matches (``None``: cannot narrow)."""
    if not _copyable_key(field):
        return None
    if op == "$eq":
        return _equal_to(models, field, arg)
    if op == "$in":
        conditions = [_equal_to(models, field, v) for v in arg]
        if any(c is None for c in conditions):
            return None
        return conditions[0] if len(conditions) == 1 else models.Filter(should=conditions)
    if op in ("$gt", "$gte", "$lt", "$lte") and _number(arg):
        return models.FieldCondition(key=field, range=models.Range(**{op[1:]: arg}))
    if op == "$contains" and isinstance(arg, (bool, str)):  # a match on a list field: any element
        return models.FieldCondition(key=field, match=models.MatchValue(value=arg))
    return None  # $ne, $nin, $not_contains, string ordering: Qdrant's meaning differs; checked afterwards


def _conditions(models: Any, flt: Mapping[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key, value in flt.items():
        if key in ("$and", "$or"):
            subs = [prefilter(models, v) for v in value]
            if key == "$and":
                out.extend(s for s in subs if s is not None)
            elif all(s is not None for s in subs):  # one unnarrowed branch lets everything through
                out.append(models.Filter(should=subs))
            continue
        cond = value if isinstance(value, Mapping) else {"$eq": value}
        for op, arg in cond.items():
            narrowed = _condition(models, key, op, list(arg) if op in ("$in", "$nin") else arg)
            if narrowed is not None:
                out.append(narrowed)
    return out


def prefilter(models: Any, flt: Mapping[str, Any] | None) -> Any:
    """A Qdrant ``Filter`` for a validated filter that never drops a matching point (``None``: no narrowing);
    ``models`` is ``qdrant_client.models``."""
    if not flt:
        return None
    conditions = _conditions(models, flt)
    return models.Filter(must=conditions) if conditions else None
