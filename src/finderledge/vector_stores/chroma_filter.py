"""Chroma's side of a FinderLedge filter: what metadata Chroma stores, and a ``where`` that can only widen.

Chroma's own filter semantics differ from FinderLedge's (``$ne`` matches a missing field, a float operand
is truncated against an int field, string ordering and mixed-type ``$in`` are refused).  So Chroma never
decides on its own: each chunk's full metadata is stored as JSON under :data:`FULL_KEY`, the ``where``
built here keeps *every* chunk the filter could match (it only narrows by clauses Chroma evaluates at
least as widely as we do), and the store checks each candidate with :func:`finderledge.filters.compile_filter`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .base import FULL_KEY, full_metadata

__all__ = ["FULL_KEY", "chroma_metadata", "prefilter_where", "stored_metadata"]

_INT64 = 2**63
_EXACT = 2**53  # numbers up to this size narrow Chroma; bigger ones are only checked afterwards


def _copyable_key(key: str) -> bool:
    return bool(key) and key != FULL_KEY and not key.startswith(("#", "$", "chroma:"))


def _copyable_scalar(value: Any) -> bool:
    if isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return -_INT64 <= value < _INT64
    return isinstance(value, float) and math.isfinite(value)


def _narrows(operand: Any) -> bool:
    """Whether Chroma can compare ``operand`` with what it stores (numbers only up to 2**53)."""
    if isinstance(operand, (int, float)) and not isinstance(operand, bool):
        return abs(operand) <= _EXACT
    return _copyable_scalar(operand)


def chroma_metadata(md: Mapping[str, Any]) -> dict[str, Any]:
    """What Chroma stores for a chunk: the JSON of ``md`` plus its scalars (and lists' strings) to narrow by."""
    out: dict[str, Any] = {FULL_KEY: json.dumps(dict(md), ensure_ascii=False, sort_keys=True)}
    for key, value in md.items():
        if not _copyable_key(key):
            continue
        if _copyable_scalar(value):
            out[key] = value
        elif isinstance(value, int):  # beyond 64 bits: stored as a float, far from every bound we narrow by
            out[key] = float(value)
        elif isinstance(value, list):
            strings = [v for v in value if isinstance(v, str)]
            if strings:
                out[key] = strings
    return out


def stored_metadata(md: Mapping[str, Any] | None) -> dict[str, Any]:
    """The chunk metadata a Chroma record carries (older records without :data:`FULL_KEY`: as stored)."""
    return full_metadata(md, ("_",))


def _narrowing(field: str, op: str, arg: Any) -> dict[str, Any] | None:
    """A Chroma clause matching at least what ``field op arg`` matches (``None``: cannot narrow)."""
    if not _copyable_key(field):
        return None
    if op == "$eq" and _narrows(arg):
        return {field: {"$eq": arg}}
    if op == "$in":
        values = [v for v in arg if _narrows(v)]
        if len(values) < len(arg):
            return None
        groups: dict[str, list[Any]] = {}
        for v in values:  # Chroma refuses mixed-type $in lists
            groups.setdefault(type(v).__name__, []).append(v)
        clauses = [{field: {"$in": vs}} for vs in groups.values()]
        return clauses[0] if len(clauses) == 1 else {"$or": clauses}
    if op in ("$gt", "$gte", "$lt", "$lte") and not isinstance(arg, (str, bool)):
        # Chroma truncates a float operand against an int field and may round stored floats: widen to an
        # inclusive whole-number bound, and only where every stored number is exact
        if not _narrows(arg):
            return None
        if op in ("$gt", "$gte"):
            return {field: {"$gte": math.floor(arg)}}
        return {field: {"$lte": math.ceil(arg)}}
    if op == "$contains" and isinstance(arg, str):
        return {field: {"$contains": arg}}
    return None  # $ne, $nin, $not_contains, string ordering: Chroma's meaning differs, check afterwards


def _and(clauses: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def prefilter_where(flt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A Chroma ``where`` for a validated filter that never drops a matching chunk (``None``: no narrowing)."""
    if not flt:
        return None
    clauses: list[dict[str, Any]] = []
    for key, value in flt.items():
        if key in ("$and", "$or"):
            subs = [prefilter_where(v) for v in value]
            if key == "$and":
                clauses.extend(s for s in subs if s is not None)
            elif all(s is not None for s in subs):  # one unnarrowed branch lets everything through
                narrowed = [s for s in subs if s is not None]
                clauses.append(narrowed[0] if len(narrowed) == 1 else {"$or": narrowed})
            continue
        cond = value if isinstance(value, Mapping) else {"$eq": value}
        for op, arg in cond.items():
            clause = _narrowing(key, op, list(arg) if op in ("$in", "$nin") else arg)
            if clause is not None:
                clauses.append(clause)
    return _and(clauses)
