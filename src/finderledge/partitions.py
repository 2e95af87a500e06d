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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["partition_of", "partition_value"]


def partition_value(metadata: Mapping[str, Any], key: str) -> str | None:
    """The partition a chunk with ``metadata`` belongs to (None: no partition)."""
    value = metadata.get(key)
    return value if isinstance(value, str) else None


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
