"""Metadata filters: one filter language, evaluated the same way by every search leg.

A filter is a dict in the Mongo/Chroma style::

    {"lang": "ja"}                                   # equality
    {"year": {"$gte": 2020}}                         # comparison: $eq $ne $gt $gte $lt $lte
    {"source": {"$in": ["a.md", "b.md"]}}            # membership: $in $nin
    {"$and": [{"lang": "ja"}, {"year": {"$lt": 2024}}]}
    {"$or": [{"lang": "ja"}, {"lang": "en"}]}

Several keys in one dict mean all of them must hold.  A chunk that lacks a field never matches a
condition on that field (not even ``$ne``/``$nin``), which is also how Chroma behaves, so every leg
returns the same set.  Values are compared by type: ``True`` does not equal ``1``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ConfigurationError

__all__ = [
    "MetadataFilter",
    "Predicate",
    "compile_filter",
    "matches",
    "to_chroma_where",
    "filter_key",
]

MetadataFilter = Mapping[str, Any]
Predicate = Callable[[Mapping[str, Any]], bool]

_COMPARISONS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}
_MEMBERSHIP = {"$in", "$nin"}
_LOGICAL = {"$and", "$or"}
_SCALARS = (str, int, float, bool)


def _same_kind(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` can be compared: bools only with bools, numbers with numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return True
    return type(a) is type(b)


def _check_scalar(value: Any, where: str) -> None:
    if not isinstance(value, _SCALARS):
        raise ConfigurationError(
            f"filter {where}: expected a string, number or bool, got {type(value).__name__} {value!r}"
        )


def _compile_condition(field: str, cond: Any) -> Predicate:
    """Compile the condition on one metadata field."""
    if not isinstance(cond, Mapping):
        _check_scalar(cond, f"field {field!r}")
        cond = {"$eq": cond}
    if not cond:
        raise ConfigurationError(f"filter field {field!r}: empty condition")
    preds: list[Predicate] = []
    for op, arg in cond.items():
        if op in _COMPARISONS:
            _check_scalar(arg, f"field {field!r} {op}")
            preds.append(_comparison(field, op, arg))
        elif op in _MEMBERSHIP:
            if not isinstance(arg, (list, tuple, set, frozenset)) or not arg:
                raise ConfigurationError(f"filter field {field!r} {op}: expected a non-empty list, got {arg!r}")
            for v in arg:
                _check_scalar(v, f"field {field!r} {op}")
            preds.append(_membership(field, op, list(arg)))
        else:
            raise ConfigurationError(
                f"filter field {field!r}: unknown operator {op!r}; "
                f"expected one of {sorted(_COMPARISONS | _MEMBERSHIP)}"
            )
    if len(preds) == 1:
        return preds[0]
    return lambda md: all(p(md) for p in preds)


def _comparison(field: str, op: str, arg: Any) -> Predicate:
    def pred(md: Mapping[str, Any]) -> bool:
        if field not in md:
            return False
        v = md[field]
        if not _same_kind(v, arg):
            return op == "$ne"
        if op == "$eq":
            return bool(v == arg)
        if op == "$ne":
            return bool(v != arg)
        if op == "$gt":
            return bool(v > arg)
        if op == "$gte":
            return bool(v >= arg)
        if op == "$lt":
            return bool(v < arg)
        return bool(v <= arg)

    return pred


def _membership(field: str, op: str, values: list[Any]) -> Predicate:
    def pred(md: Mapping[str, Any]) -> bool:
        if field not in md:
            return False
        v = md[field]
        found = any(_same_kind(v, x) and v == x for x in values)
        return found if op == "$in" else not found

    return pred


def _combine(preds: list[Predicate], how: Callable[[Any], bool]) -> Predicate:
    """``all`` or ``any`` of several predicates."""
    return lambda md: how(p(md) for p in preds)


def compile_filter(flt: MetadataFilter | None) -> Predicate | None:
    """Validate ``flt`` and turn it into a predicate over a metadata dict (``None`` for no filter)."""
    if flt is None:
        return None
    if not isinstance(flt, Mapping):
        raise ConfigurationError(f"filter: expected a dict such as {{'lang': 'ja'}}, got {type(flt).__name__}")
    if not flt:
        return None
    preds: list[Predicate] = []
    for key, value in flt.items():
        if key in _LOGICAL:
            if not isinstance(value, (list, tuple)) or not value:
                raise ConfigurationError(f"filter {key}: expected a non-empty list of filters, got {value!r}")
            subs = [compile_filter(v) for v in value]
            if any(s is None for s in subs):
                raise ConfigurationError(f"filter {key}: contains an empty filter")
            checked = [s for s in subs if s is not None]
            preds.append(_combine(checked, all if key == "$and" else any))
        elif key.startswith("$"):
            raise ConfigurationError(f"filter: unknown logical operator {key!r}; expected $and or $or")
        else:
            preds.append(_compile_condition(key, value))
    if len(preds) == 1:
        return preds[0]
    return lambda md: all(p(md) for p in preds)


def matches(metadata: Mapping[str, Any], flt: MetadataFilter | None) -> bool:
    """True when ``metadata`` satisfies ``flt`` (always true for no filter)."""
    pred = compile_filter(flt)
    return True if pred is None else pred(metadata)


def to_chroma_where(flt: MetadataFilter | None) -> dict[str, Any] | None:
    """Translate a validated filter to Chroma's ``where`` syntax (which needs explicit ``$and``)."""
    if not flt:
        return None
    compile_filter(flt)  # validate first, so Chroma never sees a malformed filter
    clauses: list[dict[str, Any]] = []
    for key, value in flt.items():
        if key in _LOGICAL:
            subs = [w for w in (to_chroma_where(v) for v in value) if w is not None]
            clauses.append(subs[0] if len(subs) == 1 else {key: subs})
        else:
            cond = value if isinstance(value, Mapping) else {"$eq": value}
            ops = [{key: {op: list(arg) if op in _MEMBERSHIP else arg}} for op, arg in cond.items()]
            clauses.extend(ops)
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def filter_key(flt: MetadataFilter | None) -> str:
    """A stable string for a filter, usable as a cache key."""
    return json.dumps(flt or {}, sort_keys=True, default=str, ensure_ascii=False)
