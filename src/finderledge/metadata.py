"""Metadata values FinderLedge stores: JSON values, checked before any work, and the kinds filters compare.

Every leg stores and filters the same values, so what a chunk may carry is decided once, here, when a
document is added (before it is split or embedded):

* keys are non-empty strings;
* values are strings, booleans, integers, finite floats, ``None``, lists of values and dicts of values
  (nested at most :data:`MAX_DEPTH` levels);
* numpy scalars become the Python number they hold; anything else (dates, sets, bytes, NaN, infinity,
  objects) is refused with an error naming the key and saying what to store instead.

What FinderLedge itself records about a document or chunk (its id, parent, position, detected type,
and on search results the scores) lives in one dict under :data:`FL_KEY` (``"_finderledge"``), so a
caller's metadata may use every other key, ``id`` included.

For filters a value has one of the kinds ``string``, ``number`` (int or float; ``1 == 1.0``), ``bool``,
``list`` or ``object``; ``None`` counts as a missing field (see :mod:`finderledge.filters`).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import ConfigurationError

__all__ = [
    "DOCUMENT_ID",
    "FL_KEY",
    "JSON_LEAVES",
    "MAX_DEPTH",
    "TEXT_SOURCE_PREFIX",
    "child_id",
    "clean_text",
    "copies_per_object",
    "embedded_text",
    "info_of",
    "kind_of",
    "normalize_metadata",
    "share_equal",
    "source_of",
    "user_metadata",
]

logger = logging.getLogger(__name__)

MAX_DEPTH = 32

FL_KEY = "_finderledge"
"""The one metadata key FinderLedge owns: a dict of its own fields (``id``, ``parent_id``, ``split_index``,
``split_count``, ``is_parent``, ``doc_type``, ``headers``, ``context``; on search results also the scores)."""

#: the types of a parsed JSON value that are immutable leaves (shared by copies of metadata, never copied)
JSON_LEAVES = frozenset({str, int, float, bool, type(None)})

DOCUMENT_ID = "document_id"
"""The metadata key of an application's document id (``add_document(..., document_id=...)``): it groups the
parents one input produced (a PDF's pages, a CSV's rows) so they are listed, filtered and removed together."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str, what: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (logged as a warning); surrogate pairs are joined."""
    if _SURROGATE.search(text) is None:
        return text
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    replaced = fixed.count("\ufffd") - text.count("\ufffd")
    if replaced:
        logger.warning(
            "%s: replaced %d lone surrogate(s) with U+FFFD (text must be valid Unicode)", what, replaced
        )
    return fixed


def kind_of(value: Any) -> str | None:
    """The filter kind of a stored value (``None`` for a missing one)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _value(value: Any, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ConfigurationError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return clean_text(value, where)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(
                f"{where}: expected a finite number, got {value!r} (store None or leave it out)"
            )
        return value
    if isinstance(value, (list, tuple)):
        return [_value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigurationError(f"{where}: keys must be strings, got {type(key).__name__} {key!r}")
            out[clean_text(key, where)] = _value(item, f"{where}.{key}", depth + 1)
        return out
    item = getattr(value, "item", None)  # numpy scalars and 0-d arrays
    if callable(item) and getattr(value, "ndim", None) == 0:
        return _value(item(), where, depth)
    hint = {
        "datetime": "an ISO 8601 string (value.isoformat())",
        "date": "an ISO 8601 string (value.isoformat())",
        "set": "a list",
        "frozenset": "a list",
        "bytes": "a string",
        "ndarray": "a list (value.tolist())",
    }
    expected = hint.get(type(value).__name__, "a string, number, bool, None, list or dict")
    raise ConfigurationError(f"{where}: cannot store {type(value).__name__} {value!r}; store {expected}")


def normalize_metadata(md: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A JSON-ready copy of a caller's ``md``, or :class:`ConfigurationError` naming ``where`` and the bad key
    (:data:`FL_KEY` included: it is FinderLedge's)."""
    if not isinstance(md, Mapping):
        raise ConfigurationError(f"{where}: expected a dict, got {type(md).__name__}")
    out: dict[str, Any] = {}
    for key, value in md.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"{where}: keys must be non-empty strings, got {key!r}")
        if key == FL_KEY:
            raise ConfigurationError(f"{where}: key {FL_KEY!r} holds FinderLedge's own fields; rename yours")
        out[clean_text(key, where)] = _value(value, f"{where} key {key!r}", 1)
    return out


def info_of(md: Mapping[str, Any]) -> dict[str, Any]:
    """FinderLedge's fields of a document's or result's metadata (empty when it has none)."""
    info = md.get(FL_KEY)
    return info if isinstance(info, dict) else {}


TEXT_SOURCE_PREFIX = "text:"
"""The source shown for raw text added without a ``source``: ``text:<parent id>`` (see :func:`source_of`)."""


def source_of(md: Mapping[str, Any], document_id: str | None = None) -> str:
    """Where a document's or chunk's text came from, the same on every surface (results, citations, ``list``):
    its ``source`` metadata, else ``text:<parent id>`` for raw text added without one.

    The default is computed, never stored: the metadata stays exactly what the caller gave.  ``document_id``
    (e.g. a LangChain ``Document.id``) is used when the metadata holds no FinderLedge ids."""
    source = md.get("source")
    if source not in (None, ""):
        return str(source)
    info = info_of(md)
    parent = info.get("parent_id") or info.get("id") or document_id
    return f"{TEXT_SOURCE_PREFIX}{parent}" if parent not in (None, "") else TEXT_SOURCE_PREFIX.rstrip(":")


def user_metadata(md: Mapping[str, Any]) -> dict[str, Any]:
    """``md`` without FinderLedge's fields: what the caller and the loader stored."""
    return {k: v for k, v in md.items() if k != FL_KEY}


def embedded_text(content: str, metadata: Mapping[str, Any]) -> str:
    """The text a chunk's vector and BM25 entry are made from: its ``context`` (the parent's title and section
    path, ``chunk_context``) above its text; the text itself is what results and citations show."""
    context = info_of(metadata).get("context")
    return f"{context}\n\n{content}" if isinstance(context, str) and context else content


def child_id(parent_id: str, index: int) -> str:
    """The id of the ``index``-th chunk of a parent: stable, readable and the same in every store."""
    return f"{parent_id}-{index:04d}"


def copies_per_object(metadatas: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A dict copy of each of ``metadatas``, one per object given (a file's chunks share one).  Keyed by ``id()``
    with the object held until the end: a lazy sequence's dict, freed after its chunk, would otherwise hand its
    id, and its copy, to a later chunk's new dict."""
    held: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
    out = []
    for md in metadatas:
        hit = held.get(id(md))
        if hit is None or hit[0] is not md:
            hit = held[id(md)] = (md, dict(md))
        out.append(hit[1])
    return out


def share_equal(dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``dicts`` with equal flat dicts replaced by one shared object: a big file's many chunks carry the same
    metadata, and an index then holds one copy of it instead of one per chunk.  Callers never mutate them."""
    shared: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    out = []
    for d in dicts:
        try:
            key = tuple(sorted(d.items()))
            hash(key)
        except TypeError:  # a nested value (list, dict): kept as it is
            out.append(d)
            continue
        out.append(shared.setdefault(key, d))
    return out
