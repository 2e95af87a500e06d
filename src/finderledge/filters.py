"""Metadata filters: one filter language with one meaning, evaluated the same way by every search leg.

A filter is a dict in the Mongo/Chroma style::

    {"lang": "ja"}                                   # equality, short for {"lang": {"$eq": "ja"}}
    {"year": {"$gte": 2020, "$lt": 2024}}            # several operators on one field: all must hold
    {"source": {"$in": ["a.md", "b.md"]}}            # membership
    {"tags": {"$contains": "hr"}}                    # list fields
    {"$and": [{"lang": "ja"}, {"year": {"$lt": 2024}}]}
    {"$or": [{"lang": "ja"}, {"lang": "en"}]}

Several keys in one dict must all hold.  The specification (docs/filters.md has it with examples):

* A value has a *kind*: string, number (int or float), bool, list or object (see
  :func:`finderledge.metadata.kind_of`).  A field that is absent or ``None`` is *missing*.
* ``$eq x``: the field has ``x``'s kind and equals it.  Numbers compare by value (``2 == 2.0``); a bool is
  never a number (``True`` does not equal ``1``); a list or object never equals a scalar.
* ``$ne x``: the field is present and does not ``$eq x``.  A missing field never matches, not even
  ``$ne``/``$nin``/``$not_contains``.
* ``$gt $gte $lt $lte x`` (``x`` a number or a string): the field has ``x``'s kind and compares so; strings
  compare by Unicode code point.
* ``$in [x, …]`` / ``$nin [x, …]``: the field is present and does / does not ``$eq`` one of them (kinds may
  be mixed).
* ``$contains x`` / ``$not_contains x``: the field is a list and has / has no element that ``$eq x``.
* A filter holds at most :data:`MAX_FILTER_VALUES` values (operands, each element of a ``$in`` list counting
  one): more raise :class:`~finderledge.errors.FilterTooLargeError` naming the limit, so no backend meets a
  list it cannot take (SQLite refuses more than 32,766 variables in a statement).
* Operands are strings, finite numbers and bools; anything else (``None``, NaN, lists where a scalar is
  expected, unknown operators, non-string field names) is refused with a ``ConfigurationError`` before any
  leg runs.  Objects (dict values) are stored and returned but no operator looks inside them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ConfigurationError, FilterTooLargeError
from .metadata import MAX_DEPTH, kind_of

__all__ = [
    "MAX_FILTER_VALUES",
    "OPERATORS",
    "MetadataFilter",
    "Predicate",
    "ScopedFilter",
    "and_filters",
    "compile_filter",
    "filter_key",
    "filter_values",
    "matches",
]

MetadataFilter = Mapping[str, Any]
Predicate = Callable[[Mapping[str, Any]], bool]

_ORDER = {"$gt", "$gte", "$lt", "$lte"}
_SCALAR_OPS = {"$eq", "$ne", "$contains", "$not_contains"}
_MEMBERSHIP = {"$in", "$nin"}
_LOGICAL = {"$and", "$or"}
OPERATORS = tuple(sorted(_ORDER | _SCALAR_OPS | _MEMBERSHIP))
#: the most values one filter may hold (all operands, each ``$in``/``$nin`` element counting one)
MAX_FILTER_VALUES = 10_000


def _operand(value: Any, where: str, *, ordered: bool = False) -> Any:
    """A checked operand: a string, finite number or bool (numbers or strings only for ordering)."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:  # numpy scalar
        value = item()
    if isinstance(value, bool):
        if ordered:
            raise ConfigurationError(
                f"filter {where}: expected a number or a string to compare with, got {value!r}"
            )
        return value
    if isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"filter {where}: expected a finite number, got {value!r}")
        return value
    expected = "a number or a string" if ordered else "a string, number or bool"
    raise ConfigurationError(f"filter {where}: expected {expected}, got {type(value).__name__} {value!r}")


def _equal(value: Any, operand: Any) -> bool:
    """``$eq``: same kind and equal (numbers by value)."""
    return kind_of(value) == kind_of(operand) and bool(value == operand)


def _condition(field: str, op: str, arg: Any) -> Predicate:
    """The predicate of one operator on one field (``arg`` already checked)."""
    if op == "$eq":
        return lambda md: _equal(md.get(field), arg)
    if op == "$ne":
        return lambda md: md.get(field) is not None and not _equal(md[field], arg)
    if op == "$in":
        return lambda md: md.get(field) is not None and any(_equal(md[field], x) for x in arg)
    if op == "$nin":
        return lambda md: md.get(field) is not None and not any(_equal(md[field], x) for x in arg)
    if op == "$contains":
        return lambda md: isinstance(md.get(field), list) and any(_equal(v, arg) for v in md[field])
    if op == "$not_contains":
        return lambda md: isinstance(md.get(field), list) and not any(_equal(v, arg) for v in md[field])
    compare: Callable[[Any, Any], bool] = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }[op]
    kind = kind_of(arg)
    return lambda md: kind_of(md.get(field)) == kind and bool(compare(md[field], arg))


def _compile_field(field: str, cond: Any) -> Predicate:
    """Compile the condition on one metadata field."""
    if not isinstance(cond, Mapping):
        cond = {"$eq": cond}
    if not cond:
        raise ConfigurationError(f"filter field {field!r}: empty condition")
    preds: list[Predicate] = []
    for op, arg in cond.items():
        where = f"field {field!r} {op}"
        if op in _SCALAR_OPS or op in _ORDER:
            preds.append(_condition(field, op, _operand(arg, where, ordered=op in _ORDER)))
        elif op in _MEMBERSHIP:
            if not isinstance(arg, (list, tuple, set, frozenset)) or not arg:
                raise ConfigurationError(f"filter {where}: expected a non-empty list, got {arg!r}")
            preds.append(_condition(field, op, [_operand(v, where) for v in arg]))
        else:
            raise ConfigurationError(
                f"filter field {field!r}: unknown operator {op!r}; expected one of {list(OPERATORS)}"
            )
    return _all(preds)


def _all(preds: list[Predicate]) -> Predicate:
    return preds[0] if len(preds) == 1 else (lambda md: all(p(md) for p in preds))


def _any(preds: list[Predicate]) -> Predicate:
    return preds[0] if len(preds) == 1 else (lambda md: any(p(md) for p in preds))


def _compile(flt: Any, depth: int) -> Predicate | None:
    if depth > MAX_DEPTH:
        raise ConfigurationError(f"filter: nested more than {MAX_DEPTH} levels deep")
    if not isinstance(flt, Mapping):
        raise ConfigurationError(
            f"filter: expected a dict such as {{'lang': 'ja'}}, got {type(flt).__name__}"
        )
    preds: list[Predicate] = []
    for key, value in flt.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"filter: field names must be non-empty strings, got {key!r}")
        if key in _LOGICAL:
            if not isinstance(value, (list, tuple)) or not value:
                raise ConfigurationError(f"filter {key}: expected a non-empty list of filters, got {value!r}")
            subs = [_compile(v, depth + 1) for v in value]
            if any(s is None for s in subs):
                raise ConfigurationError(f"filter {key}: contains an empty filter")
            checked = [s for s in subs if s is not None]
            preds.append(_all(checked) if key == "$and" else _any(checked))
        elif key.startswith("$"):
            raise ConfigurationError(f"filter: unknown logical operator {key!r}; expected $and or $or")
        else:
            preds.append(_compile_field(key, value))
    return _all(preds) if preds else None


class ScopedFilter(dict[str, Any]):
    """A caller's filter AND-ed with its scope's base filter (see :class:`finderledge.access.AccessPolicy`):
    the base filter's own values (``scope_values``, themselves at most :data:`MAX_FILTER_VALUES`) do not count
    against the caller's limit, so a tenant's own clause never turns a filter at the limit into one over it.
    A plain copy of it counts every value again: the limit only ever applies more strictly."""

    def __init__(self, flt: Mapping[str, Any], scope_values: int) -> None:
        super().__init__(flt)
        self.scope_values = max(0, min(int(scope_values), MAX_FILTER_VALUES))

    def __deepcopy__(self, memo: dict[int, Any]) -> ScopedFilter:
        import copy

        return ScopedFilter(copy.deepcopy(dict(self), memo), self.scope_values)

    def __reduce__(self) -> Any:  # pickled (a process pool) as what it is
        return (ScopedFilter, (dict(self), self.scope_values))


def compile_filter(flt: MetadataFilter | None) -> Predicate | None:
    """Validate ``flt`` and turn it into a predicate over a metadata dict (``None`` for no filter)."""
    if flt is None:
        return None
    pred = _compile(flt, 1)
    values = filter_values(flt) - (flt.scope_values if isinstance(flt, ScopedFilter) else 0)
    if values > MAX_FILTER_VALUES:
        raise FilterTooLargeError(
            f"filter: {values} values is more than the limit of {MAX_FILTER_VALUES} "
            "(finderledge.filters.MAX_FILTER_VALUES); filter on a field the documents share (a tag, a "
            "document group) or split the search"
        )
    return pred


def filter_values(flt: Any) -> int:
    """How many values a validated filter holds (operands; each element of a membership list counts one)."""
    if isinstance(flt, Mapping):
        total = 0
        for key, value in flt.items():
            if key in _LOGICAL:
                total += sum(filter_values(v) for v in value)
            elif isinstance(value, Mapping):
                total += sum(len(a) if op in _MEMBERSHIP else 1 for op, a in value.items())
            else:
                total += 1
        return total
    return 0


def matches(metadata: Mapping[str, Any], flt: MetadataFilter | None) -> bool:
    """True when ``metadata`` satisfies ``flt`` (always true for no filter)."""
    pred = compile_filter(flt)
    return True if pred is None else pred(metadata)


def filter_key(flt: MetadataFilter | None) -> str:
    """A stable string for a (validated) filter, usable as a cache key; ``1`` and ``1.0`` stay apart."""
    return json.dumps(flt or {}, sort_keys=True, default=repr, ensure_ascii=False)


def and_filters(*filters: dict[str, Any] | None) -> dict[str, Any] | None:
    """Every given filter must hold (``None`` and empty ones are skipped): how base filters are narrowed."""
    present = [f for f in filters if f]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    scope = sum(f.scope_values for f in present if isinstance(f, ScopedFilter))
    combined = {"$and": present}  # a scope's own values, narrowed further, still do not count
    return ScopedFilter(combined, scope) if scope else combined
