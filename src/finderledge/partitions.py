"""Partitions: each value of one metadata key (the ``partition_key`` setting, e.g. ``"tenant"``) is a corpus of
its own for every statistic a score depends on.

With ``partition_key="tenant"``, a search whose filter pins one tenant (``{"tenant": "alice"}``, ``{"tenant":
{"$eq": "alice"}}``, a one-value ``$in``, either inside an ``$and``, or a ``scoped({"tenant": "alice"})`` view)
is scored as if Alice's chunks were the whole index: BM25 document frequencies, the chunk count and the
average length, the relevance background and the calibration gates are all Alice's own.  Such a search returns
the same ranks and scores whether or not other tenants' documents exist, so no score tells one tenant anything
about another's data (docs/partitions.md).

Design: statistics per partition over the shared postings (measured against one index per partition in
docs/partitions.md).  The keyword store keeps one inverted index; for a pinned partition it counts document
frequencies over the partition's live postings only and keeps each partition's chunk count and token total.
Nothing about partitions is stored on disk, so the setting can be turned on for an existing index.

Partition values are strings; a chunk whose value is missing or not a string belongs to no partition (it is
only found by searches that do not pin one).

A filter that restricts the key without pinning one value (``$ne``, ``$nin``, a several-value ``$in``, an
``$or`` of pins, any of them inside an ``$and``) resolves to the set of partitions it can reach
(:func:`partitions_of`): keyword statistics and the relevance background are those partitions' together, so
documents of a partition the filter excludes move no rank and no score.  The chunks without the key and those
whose value is not a string count as two more groups, reached or not as the filter says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from .filters import compile_filter, filter_key

__all__ = [
    "MISSING",
    "OTHER",
    "PartitionFilter",
    "corpus_of",
    "partition_group",
    "partition_of",
    "partition_value",
    "partitions_of",
    "pins_only",
]

#: the group of chunks without the key (absent or None): no partition
MISSING = -1
#: the group of chunks whose value is not a string (a number, a list ...): no partition
OTHER = -2
#: a partition (its string value) or one of the two groups of chunks in none
Group = str | int
_NEVER_OTHER = frozenset({"$eq", "$gt", "$gte", "$lt", "$lte"})  # with a string operand: strings only


def partition_value(metadata: Mapping[str, Any], key: str) -> str | None:
    """The partition a chunk with ``metadata`` belongs to (None: no partition)."""
    value = metadata.get(key)
    return value if isinstance(value, str) else None


def partition_group(metadata: Mapping[str, Any], key: str) -> Group:
    """The partition of a chunk with ``metadata``, or :data:`MISSING` / :data:`OTHER` when it is in none."""
    value = metadata.get(key)
    if isinstance(value, str):
        return value
    return MISSING if value is None else OTHER


@dataclass(frozen=True)
class PartitionFilter:
    """The partitions (and groups) a filter can reach; equal and hashed by the filter's conditions on the key
    (a cache key for the corpus background).  Call it with a :data:`Group`."""

    text: str
    reach: Callable[[Group], bool] = dataclass_field(compare=False, hash=False, repr=False)

    def __call__(self, group: Group) -> bool:
        return self.reach(group)


def partitions_of(flt: Mapping[str, Any] | None, key: str | None) -> PartitionFilter | None:
    """The partitions ``flt`` can reach, or None when it sets no condition on ``key`` that restricts them (the
    whole index's statistics apply).

    A partition is reached when some chunk of it could pass: the conditions on ``key`` are evaluated on the
    partition's value, every other condition is taken as satisfiable (a filter has no negation above its
    fields, so this never leaves out a partition a chunk of which passes)."""
    if not flt or key is None or not isinstance(flt, Mapping):
        return None
    reach = _reacher(flt, key)
    return None if reach is None else PartitionFilter(filter_key(_on_key(flt, key)), reach)


def corpus_of(flt: Mapping[str, Any] | None, key: str | None) -> str | PartitionFilter | None:
    """The corpus a search's statistics describe: the one partition ``flt`` pins, the partitions it reaches, or
    None (the whole index)."""
    pinned = partition_of(flt, key)
    return pinned if pinned is not None else partitions_of(flt, key)


def _on_key(flt: Mapping[str, Any], key: str) -> Any:
    """``flt`` with only what concerns ``key`` (other fields are ``True``): the text of a PartitionFilter."""
    out: dict[str, Any] = {}
    for name, cond in flt.items():
        if name in ("$and", "$or") and isinstance(cond, (list, tuple)):
            out[name] = [_on_key(sub, key) if isinstance(sub, Mapping) else sub for sub in cond]
        elif name == key:
            out[name] = cond
    return out


def _reacher(flt: Mapping[str, Any], key: str) -> Callable[[Group], bool] | None:
    """Whether a chunk of a group can pass ``flt`` (None: every group can, as far as ``key`` is concerned)."""
    parts: list[Callable[[Group], bool]] = []
    for name, cond in flt.items():
        if name in ("$and", "$or") and isinstance(cond, (list, tuple)):
            subs = [_reacher(sub, key) if isinstance(sub, Mapping) else None for sub in cond]
            if name == "$and":
                parts.extend(r for r in subs if r is not None)
            elif all(r is not None for r in subs):  # an $or branch free of the key reaches every group
                branches = [r for r in subs if r is not None]
                parts.append(lambda g, branches=branches: any(r(g) for r in branches))  # type: ignore[misc]
        elif name == key:
            parts.append(_condition_reach(key, cond))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else (lambda g: all(r(g) for r in parts))


def _condition_reach(key: str, cond: Any) -> Callable[[Group], bool]:
    """Whether a chunk of a group can meet the condition ``cond`` on ``key``: exact for a partition (its value)
    and for the chunks without the key; for values that are not strings, false only where no such value can
    meet it (``$eq``/``$in``/an order with string operands)."""
    pred = compile_filter({key: cond})
    assert pred is not None
    ops = cond if isinstance(cond, Mapping) else {"$eq": cond}
    other = not any(
        (op in _NEVER_OTHER and isinstance(arg, str))
        or (op == "$in" and all(isinstance(v, str) for v in arg))
        for op, arg in ops.items()
    )
    missing = pred({})

    def reach(group: Group) -> bool:
        if isinstance(group, str):
            return pred({key: group})
        return missing if group == MISSING else other

    return reach


def pins_only(flt: Mapping[str, Any] | None, key: str | None) -> bool:
    """True when ``flt`` does nothing but pin one partition (``{key: value}`` and its ``$eq``/one-value ``$in``
    forms): every chunk of the partition passes it, so it need not be evaluated chunk by chunk."""
    return isinstance(flt, Mapping) and len(flt) == 1 and key in flt and partition_of(flt, key) is not None


def partition_of(flt: Mapping[str, Any] | None, key: str | None) -> str | None:
    """The one partition ``flt`` restricts a search to, or None when it does not pin one.

    A filter pins a partition when its top level (or an ``$and`` inside it, at any depth) requires
    ``key`` to equal one string: every chunk it lets through is then in that partition."""
    if not flt or key is None or not isinstance(flt, Mapping):
        return None
    for field, cond in flt.items():
        if field == "$and" and isinstance(cond, (list, tuple)):
            for sub in cond:
                found = partition_of(sub, key) if isinstance(sub, Mapping) else None
                if found is not None:
                    return found
        elif field == key:
            if isinstance(cond, str):
                return cond
            if isinstance(cond, Mapping):
                eq = cond.get("$eq")
                if isinstance(eq, str):
                    return eq
                values = cond.get("$in")
                if isinstance(values, (list, tuple)) and len(values) == 1 and isinstance(values[0], str):
                    return values[0]
    return None
