"""The filter language (:mod:`finderledge.filters`) as SQL over a ``jsonb`` metadata column (pgvector backend).

The SQL runs inside the vector query (``WHERE`` next to ``ORDER BY embedding <=> q``), so a filtered search
finds its ``k`` rows without a second round trip.  It is exact for rows whose metadata ``jsonb`` can hold as
it is, provided the metadata was written with :func:`jsonb_text`:

* kinds come from ``jsonb_typeof`` (a missing field and JSON ``null`` never match, not even ``$ne``);
* ``$eq``/``$in`` use ``jsonb =``, which compares kinds first (``true`` is not ``1``, a list is never a
  scalar), numbers as ``numeric`` (``2 == 2.0``, integers of any size) and strings byte for byte;
* numbers are exact: :func:`jsonb_text` writes a float as the exact decimal value of the double (``0.1`` as
  ``0.1000000000000000055…``), and a float operand is sent the same way, so int/float comparisons agree with
  Python's exact ones (``2**63 == 9.223372036854776e18``) where a shortest-repr decimal would not;
* string ordering is by code point (``->> … COLLATE "C"``: UTF-8 byte order is code point order);
* ``$contains`` is ``jsonb_typeof = 'array' AND v @> '[x]'`` (top-level elements, the same equality);
* under a ``NOT`` (``$ne``, ``$nin``, ``$not_contains``) every atom is ``COALESCE(…, FALSE)``, so ``NOT`` and
  SQL's three-valued logic never meet; elsewhere NULL and FALSE select the same rows, and ``$eq``/``$in``/
  ``$contains`` also carry the condition they imply, ``metadata @> '{"field": x}'``, which a GIN index
  (``CREATE INDEX ON t USING gin (metadata jsonb_path_ops)``) serves for selective filters (tenants).

``jsonb`` cannot hold NUL characters or lone surrogates.  :func:`jsonb_text` replaces them (U+FFFD) and
reports the row as *lossy*; the store keeps such a row's exact JSON beside it and lets every lossy row pass
the SQL (:func:`to_sql` only ever widens), then decides with :func:`finderledge.filters.compile_filter`.
An operand holding such a character is translated exactly against non-lossy rows (equality never holds;
ordering compares with the longest storable prefix, see :func:`_order_operand`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ..filters import MetadataFilter, compile_filter

__all__ = ["jsonb_text", "to_sql"]

# characters a PostgreSQL text/jsonb value cannot hold: NUL and UTF-16 surrogates (lone ones)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_REPLACEMENT = "\ufffd"
_ORDER_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_PLAIN = (str, int, bool, type(None))  # value types (exactly) whose JSON json.dumps writes as _encode does


def _number_text(value: float) -> str:
    """A JSON number with the exact value of ``value`` (a float as its double's exact decimal)."""
    if isinstance(value, float):
        return str(Decimal(value))  # exact; "E-8" style exponents are valid JSON and numeric input
    return str(int(value))


def _encode(value: Any, lossy: list[bool]) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value)
    if isinstance(value, str):
        if _UNSTORABLE.search(value):
            lossy[0] = True
            value = _UNSTORABLE.sub(_REPLACEMENT, value)
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_encode(str(k), lossy)}:{_encode(v, lossy)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_encode(v, lossy) for v in value) + "]"
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "ndim", None) == 0:
        return _encode(item(), lossy)
    return _encode(str(value), lossy)


def jsonb_text(metadata: Mapping[str, Any]) -> tuple[str, bool]:
    """``(json, lossy)``: the JSON text to store in the ``jsonb`` column (floats exact), and whether it had to
    replace characters ``jsonb`` cannot hold (then the caller keeps the exact JSON as well).  Flat metadata of
    strings, ints, booleans and nulls (the usual) is one ``json.dumps``: the same text as :func:`_encode`'s."""
    if all(type(v) in _PLAIN for v in metadata.values()) and all(type(k) is str for k in metadata):
        text = json.dumps(dict(metadata), ensure_ascii=False, separators=(",", ":"))
        if "\\u0000" not in text and not _UNSTORABLE.search(text):  # NUL is escaped: look for its escape
            return text, False
    lossy = [False]
    return _encode(dict(metadata), lossy), lossy[0]


def _operand_json(value: Any) -> str | None:
    """An operand as a ``jsonb`` literal, or None when it holds a character no stored value can hold."""
    if isinstance(value, str) and _UNSTORABLE.search(value):
        return None
    return _encode(value, [False])


def _order_operand(value: str, op: str) -> tuple[str, str]:
    """``(sql_op, operand)`` comparing storable strings with ``value`` exactly, when ``value`` holds a NUL or a
    surrogate: cut it before the first such character ``c`` (prefix ``p``).  A storable string ``s`` never
    equals ``value``; NUL is the least code point, so ``s > value`` iff ``s > p``; a surrogate lies between
    U+D7FF and U+E000, so ``s > value`` iff ``s >= p + U+E000``."""
    match = _UNSTORABLE.search(value)
    if match is None:
        return _ORDER_SQL[op], value
    prefix = value[: match.start()]
    greater = op in ("$gt", "$gte")
    if match.group() == "\x00":
        return (">", prefix) if greater else ("<=", prefix)
    return (">=", prefix + "\ue000") if greater else ("<", prefix + "\ue000")


class _Builder:
    """Collects SQL text and its ``%s`` parameters."""

    def __init__(self, column: str) -> None:
        self.column = column
        self.params: list[Any] = []

    def field(self, name: str) -> str | None:
        """``column -> name`` (None: no stored row can have that key, so the field is missing)."""
        if _UNSTORABLE.search(name):
            return None
        self.params.append(name)
        return f"({self.column} -> %s)"

    def present(self, name: str) -> str:
        value = self.field(name)
        return "FALSE" if value is None else f"COALESCE(jsonb_typeof({value}) <> 'null', FALSE)"

    def _containment(self, name: str, literal: str) -> str:
        """``column @> {name: literal}``: implied by the exact test it precedes (``jsonb`` containment
        compares scalars as ``=`` does), so it never narrows; a GIN index (``jsonb_path_ops``) can serve it."""
        self.params.append("{" + json.dumps(name, ensure_ascii=False) + ":" + literal + "}")
        return f"{self.column} @> %s::jsonb"

    def equal(self, name: str, operand: Any, positive: bool = False) -> str:
        """``$eq``.  ``positive``: not under a NOT, where NULL and FALSE select the same rows, so the plain
        comparison (with its index-friendly containment) stands; under a NOT it is ``COALESCE``d."""
        literal = _operand_json(operand)
        if literal is None or _UNSTORABLE.search(name):
            return "FALSE"
        if positive:
            contained = self._containment(name, literal)
            value = self.field(name)
            self.params.append(literal)
            return f"({contained} AND {value} = %s::jsonb)"
        value = self.field(name)
        self.params.append(literal)
        return f"COALESCE({value} = %s::jsonb, FALSE)"

    def any_equal(self, name: str, operands: list[Any], positive: bool = False) -> str:
        parts = [self.equal(name, x, positive) for x in operands]
        parts = [p for p in parts if p != "FALSE"]
        return "(" + " OR ".join(parts) + ")" if parts else "FALSE"

    def contains(self, name: str, operand: Any, positive: bool = False) -> str:
        literal = _operand_json(operand)
        if literal is None or _UNSTORABLE.search(name):
            return "FALSE"
        if positive:
            contained = self._containment(name, f"[{literal}]")
            value = self.field(name)
            self.field(name)
            self.params.append(f"[{literal}]")
            return f"({contained} AND jsonb_typeof({value}) = 'array' AND ({self.column} -> %s) @> %s::jsonb)"
        value = self.field(name)
        self.field(name)
        self.params.append(f"[{literal}]")
        return f"COALESCE(jsonb_typeof({value}) = 'array' AND ({self.column} -> %s) @> %s::jsonb, FALSE)"

    def is_array(self, name: str) -> str:
        value = self.field(name)
        return "FALSE" if value is None else f"COALESCE(jsonb_typeof({value}) = 'array', FALSE)"

    def order(self, name: str, op: str, operand: Any) -> str:
        if isinstance(operand, str):
            sql_op, text = _order_operand(operand, op)
            value = self.field(name)
            if value is None:
                return "FALSE"
            self.field(name)
            self.params.append(text)
            return (
                f"COALESCE(jsonb_typeof({value}) = 'string'"
                f' AND ({self.column} ->> %s) COLLATE "C" {sql_op} %s COLLATE "C", FALSE)'
            )
        value = self.field(name)
        if value is None:
            return "FALSE"
        self.field(name)
        self.params.append(_number_text(operand))
        return (
            f"COALESCE(jsonb_typeof({value}) = 'number'"
            f" AND ({self.column} -> %s) {_ORDER_SQL[op]} %s::jsonb, FALSE)"
        )

    def condition(self, name: str, op: str, arg: Any) -> str:
        if op == "$eq":
            return self.equal(name, arg, positive=True)
        if op == "$ne":
            return f"({self.present(name)} AND NOT {self.equal(name, arg)})"
        if op == "$in":
            return self.any_equal(name, list(arg), positive=True)
        if op == "$nin":
            return f"({self.present(name)} AND NOT {self.any_equal(name, list(arg))})"
        if op == "$contains":
            return self.contains(name, arg, positive=True)
        if op == "$not_contains":
            return f"({self.is_array(name)} AND NOT {self.contains(name, arg)})"
        return self.order(name, op, arg)

    def node(self, flt: Mapping[str, Any]) -> str:
        parts: list[str] = []
        for key, value in flt.items():
            if key in ("$and", "$or"):
                subs = [self.node(v) for v in value]
                parts.append("(" + (" AND " if key == "$and" else " OR ").join(subs) + ")")
            else:
                cond = value if isinstance(value, Mapping) else {"$eq": value}
                parts.extend(self.condition(key, op, _plain(arg)) for op, arg in cond.items())
        return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"


def _plain(arg: Any) -> Any:
    """numpy scalars as Python values (the validator accepts them); lists element by element."""
    if isinstance(arg, (list, tuple, set, frozenset)):
        return [_plain(v) for v in arg]
    item = getattr(arg, "item", None)
    if callable(item) and getattr(arg, "ndim", None) == 0:
        return item()
    return arg


def to_sql(flt: MetadataFilter | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """``(sql, params)``: a boolean SQL expression over the ``jsonb`` ``column`` (``%s`` placeholders) that holds
    exactly for the rows :func:`~finderledge.filters.compile_filter` accepts, lossy rows aside (see the module
    docstring).  The filter is validated first (``ConfigurationError``)."""
    if flt is None or compile_filter(flt) is None:
        return "TRUE", []
    builder = _Builder(column)
    sql = builder.node(flt)
    return sql, builder.params
