"""Encoding ledger rows, each fact once, and decoding them, damaged or not: one bad row quarantines its
document, never every search.

A chunk's stored metadata is JSON, its embedding a float32 blob and its id ``<parent_id>-<split_index>``.
A row that breaks any of that (a 3-byte blob, JSON nested too deep to parse, a ``parent_id`` that is not
its own) is left out of every answer together with the rest of its document, and a warning names it once;
the document comes back when it is written again (``add``/``remove``), or after ``finderledge check
--repair``.

Metadata is stored without what the row's columns or its document already say (the SQLite ledger's
schema version 5; :func:`encode_document_metadata`, :func:`encode_chunk_metadata`):

* a document's: ``"[" + JSON + "]"``, its ``_finderledge`` without ``id`` (its id column) and ``is_parent``
  (true);
* a chunk's: ``""`` when it is its document's user metadata with the ``_finderledge`` fields every chunk has
  (``id``, ``parent_id``, ``split_index`` from its columns; ``doc_type``, ``split_count`` from its
  document's; ``is_parent`` false); else ``"[" + overrides + "," + other _finderledge fields + "]"``.

Anything else that cannot be derived exactly is stored whole, as a JSON object (``{...}``, the only form of
schema version 4, still read as it is).  Decoding gives back exactly the dict the whole JSON gave (same keys,
values and key order: sorted, as stored).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..metadata import FL_KEY, JSON_LEAVES, child_id

__all__ = [
    "Quarantine",
    "RowDamage",
    "decode_chunk_metadata",
    "decode_document_metadata",
    "decode_embedding",
    "decode_metadata",
    "dumps_metadata",
    "encode_chunk_metadata",
    "encode_document_metadata",
    "owner_of",
    "text_spans",
]

logger = logging.getLogger(__name__)


class RowDamage(ValueError):
    """A ledger row cannot be decoded; the message says which field and why."""


def owner_of(chunk_id: str) -> str:
    """The document a chunk id belongs to (``<parent>-NNNN``), whatever its ``parent_id`` column says."""
    head, sep, tail = chunk_id.rpartition("-")
    return head if sep and tail.isdigit() else chunk_id


# what ``json.dumps(md, ensure_ascii=False, sort_keys=True, default=str)`` uses, made once (not per row)
_METADATA_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def dumps_metadata(md: dict[str, Any]) -> str:
    """Metadata as the ledger stores it: JSON text, keys sorted, exact (non-ASCII kept, other values as str)."""
    return _METADATA_JSON.encode(md)


def decode_metadata(text: Any) -> dict[str, Any]:
    """Stored metadata as a dict; invalid or too deeply nested JSON raises :class:`RowDamage`."""
    try:
        md = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise RowDamage(f"metadata is not readable JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(md, dict):
        raise RowDamage(f"metadata is a JSON {type(md).__name__}, expected an object")
    return md


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise RowDamage(f"metadata is not readable JSON ({type(exc).__name__}: {str(exc)[:120]})") from None


def _same(a: Any, b: Any) -> bool:
    """Whether two metadata values are stored as the same JSON (so one can be read in place of the other)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is str or kind is int or kind is bool:  # not float: -0.0 == 0.0, but their JSON differs
        return bool(a == b)
    try:
        return _METADATA_JSON.encode(a) == _METADATA_JSON.encode(b)
    except (TypeError, ValueError, RecursionError):
        return False


def _str_keys(md: dict[str, Any]) -> bool:
    return all(type(k) is str for k in md)


def encode_document_metadata(doc_id: str, md: dict[str, Any]) -> str:
    """A document's metadata as stored: without ``_finderledge.id`` (= ``doc_id``) and ``is_parent`` (true)
    where it has both; otherwise whole."""
    fl = md.get(FL_KEY)
    if (
        isinstance(fl, dict)
        and type(fl.get("id")) is str
        and fl["id"] == doc_id
        and fl.get("is_parent") is True
        and _str_keys(md)
        and _str_keys(fl)
    ):
        rest = {k: v for k, v in fl.items() if k != "id" and k != "is_parent"}
        return "[" + dumps_metadata({**md, FL_KEY: rest}) + "]"
    return dumps_metadata(md)


def decode_document_metadata(doc_id: str, text: Any) -> dict[str, Any]:
    """A document's stored metadata as the dict it was written as; damage raises :class:`RowDamage`."""
    if not isinstance(text, str) or text[:1] != "[":
        return decode_metadata(text)
    md = _stored_document(text)
    fl = md[FL_KEY]
    fl["id"], fl["is_parent"] = doc_id, True
    md[FL_KEY] = dict(sorted(fl.items()))
    return md


def _stored_document(text: str) -> dict[str, Any]:
    """A document's metadata in its stored form ``[object]`` (its ``_finderledge`` without id, is_parent)."""
    stored = _json(text)
    if not (isinstance(stored, list) and len(stored) == 1 and isinstance(stored[0], dict)):
        raise RowDamage("metadata is not a document's stored form ([object])")
    md: dict[str, Any] = stored[0]
    if not isinstance(md.get(FL_KEY), dict):
        raise RowDamage(f"metadata holds no {FL_KEY} object")
    return md


#: a document's stored metadata (its text as stored) -> the parsed, checked form: the chunks a search reads share
#: few documents' metadata texts (often one text for thousands of documents), and parsing it for every chunk
#: was half of decoding a chunk row (issue 41).  Never handed out: each caller gets a copy (:func:`_fresh`).
#: Each entry also says whether every value besides ``_finderledge`` is an immutable leaf (a str, number, bool
#: or None): a chunk's copy is then one shallow ``dict`` copy instead of a copy per value.
_PARSED: dict[str, tuple[dict[str, Any], bool]] = {}
_PARSED_MAX = 4096  # texts remembered (the table is emptied when full)
_PARSED_LONGEST = 4096  # characters: a longer text is parsed each time


def _parsed_entry(text: str) -> tuple[dict[str, Any], bool]:
    """A document's stored metadata text (``[object]`` or a whole object) parsed and checked, and whether its
    values besides ``_finderledge`` are all immutable leaves: the remembered parse, which the caller must not
    change (it copies what it keeps); damage raises :class:`RowDamage`."""
    entry = _PARSED.get(text)
    if entry is None:
        md = _stored_document(text) if text[:1] == "[" else decode_metadata(text)
        entry = (md, all(type(v) in JSON_LEAVES for k, v in md.items() if k != FL_KEY))
        if len(text) <= _PARSED_LONGEST:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[text] = entry
    return entry


def _fresh(value: Any) -> Any:
    """A copy of a parsed JSON value: new dicts and lists, the immutable leaves (str, numbers, None) shared."""
    kind = type(value)
    if kind is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if kind is list:
        return [_fresh(v) for v in value]
    return value


def _chunk_fields(
    chunk_id: str, parent_id: str, split_index: int, parent_fl: dict[str, Any]
) -> dict[str, Any] | None:
    """The ``_finderledge`` fields of a chunk derived from its columns and its document's (None: cannot)."""
    if "doc_type" not in parent_fl or "split_count" not in parent_fl:
        return None
    return {
        "doc_type": parent_fl["doc_type"],
        "id": chunk_id,
        "is_parent": False,
        "parent_id": parent_id,
        "split_count": parent_fl["split_count"],
        "split_index": split_index,
    }


def encode_chunk_metadata(
    chunk_id: str, parent_id: str, split_index: int, md: dict[str, Any], parent: dict[str, Any] | None
) -> str:
    """A chunk's metadata as stored: what differs from its document's metadata ``parent`` and from its own
    columns (``""`` when nothing does); whole when ``parent`` is None (its document row is written later:
    staging) or when it cannot be derived exactly (a user key of the document missing, non-string keys)."""
    fl, parent_fl = md.get(FL_KEY), None if parent is None else parent.get(FL_KEY)
    if not (isinstance(fl, dict) and isinstance(parent_fl, dict) and type(split_index) is int):
        return dumps_metadata(md)
    assert parent is not None
    derived = _chunk_fields(chunk_id, parent_id, split_index, parent_fl)
    if (
        derived is None
        or not all(k in fl and _same(fl[k], v) for k, v in derived.items())
        or not (_str_keys(md) and _str_keys(fl) and _str_keys(parent))
        or not all(k in md for k in parent)
    ):
        return dumps_metadata(md)
    over = {k: v for k, v in md.items() if k != FL_KEY and (k not in parent or not _same(v, parent[k]))}
    rest = {k: v for k, v in fl.items() if k not in derived}
    if not over and not rest:
        return ""
    return "[" + dumps_metadata(over) + "," + dumps_metadata(rest) + "]"


def decode_chunk_metadata(
    text: Any, parent_text: Any, chunk_id: str, parent_id: str, split_index: int
) -> dict[str, Any]:
    """A chunk's stored metadata as the dict it was written as, rebuilt with its document's stored metadata
    ``parent_text`` (None: no document row) where it was stored as a difference; damage raises
    :class:`RowDamage`."""
    if text == "":
        over: Any = {}
        rest: Any = {}
    elif isinstance(text, str) and text[:1] == "[":
        stored = _json(text)
        if not (isinstance(stored, list) and len(stored) == 2 and all(isinstance(d, dict) for d in stored)):
            raise RowDamage("metadata is not a chunk's stored form ([object, object])")
        over, rest = stored
    else:
        return decode_metadata(text)
    if parent_text is None:
        raise RowDamage(
            f"metadata is stored as its document's, and document {parent_id} is not in the ledger"
        )
    # the document's stored JSON parsed once (per process, while remembered); every chunk gets objects of its
    # own: copies of the parsed form's values, its _finderledge (replaced below) read in place
    document, leaves = _parsed_entry(parent_text)
    parent_fl = document.get(FL_KEY)
    # the same dict either way (its _finderledge replaced below, in its place): leaves need no copy of their own
    md = dict(document) if leaves else {k: None if k == FL_KEY else _fresh(v) for k, v in document.items()}
    derived = (
        None
        if not isinstance(parent_fl, dict)
        else _chunk_fields(chunk_id, parent_id, split_index, parent_fl)
    )
    if derived is None:
        raise RowDamage(f"metadata is stored as its document's, whose {FL_KEY} lacks doc_type or split_count")
    # the stored JSON's keys are sorted, and so are a chunk's derived fields: sorted again only when merged
    md[FL_KEY] = dict(sorted({**rest, **derived}.items())) if rest else derived
    if over:
        md.update(over)
        return dict(sorted(md.items()))
    return md


#: a chunk's text is stored as a span of its document's only when it ends within this many characters of the
#: document's start: reading a span decompresses the document's stored text up to the span's end (PostgreSQL
#: TOAST), so a chunk far into a very long document keeps its own text (a read stays ~1 ms at most)
SPAN_MAX_END = 262_144
_SPAN_MISSES = 8  # chunks of one document not found in its text after which the rest are not looked for


def text_spans(document: str, texts: Sequence[str]) -> list[tuple[int, int] | None]:
    """For each chunk text of one document (in split order), ``(start, length)`` in code points (Python's
    ``str`` indices; PostgreSQL's ``substr`` in a UTF-8 database) where ``document[start:start + length]`` is
    exactly that text and ends within :data:`SPAN_MAX_END`; None where it is not a slice of it (normalised
    or re-serialised text: JSON) and must be stored whole.  Chunks come in order and may overlap: each is
    looked for from just after the previous one's start (as the splitter finds sections), then from 0."""
    spans: list[tuple[int, int] | None] = []
    cursor = misses = 0
    for text in texts:
        found = -1
        if misses < _SPAN_MISSES and len(text) <= SPAN_MAX_END:
            found = document.find(text, cursor, SPAN_MAX_END)
            if found < 0 and cursor:
                found = document.find(text, 0, SPAN_MAX_END)
        if found < 0:
            misses += 1
            spans.append(None)
            continue
        cursor = found + 1
        spans.append((found, len(text)))
    return spans


def decode_embedding(blob: Any, dimension: int | None) -> np.ndarray:
    """A stored embedding blob as float32; a size that is not ``4 * dimension`` or a NaN raises."""
    if not isinstance(blob, (bytes, memoryview)) or len(blob) % 4:
        raise RowDamage(f"embedding blob of {len(blob) if blob is not None else 0} bytes is not float32")
    emb = np.frombuffer(blob, dtype="<f4")
    if dimension is not None and len(emb) != dimension:
        raise RowDamage(f"embedding has {len(emb)} values, the ledger's dimension is {dimension}")
    if not bool(np.all(np.isfinite(emb))):
        raise RowDamage("embedding holds NaN or infinite values")
    return emb


def check_chunk_id(chunk_id: str, parent_id: Any, split_index: Any) -> None:
    """A chunk's id must be ``child_id(parent_id, split_index)``: anything else is a damaged row."""
    if type(parent_id) is str and type(split_index) is int and chunk_id == f"{parent_id}-{split_index:04d}":
        return  # the stored columns' usual types, checked without a call (every chunk a search reads)
    try:
        expected = child_id(str(parent_id), int(split_index))
    except (TypeError, ValueError):
        expected = None
    if chunk_id != expected:
        raise RowDamage(f"its parent_id {parent_id!r} and split_index {split_index!r} do not match its id")


class Quarantine:
    """Documents left out of answers because one of their rows cannot be decoded (``id -> reason``)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._ids: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, doc_id: str, row: str, damage: Exception) -> None:
        with self._lock:
            if doc_id in self._ids:
                return
            self._ids[doc_id] = f"{row}: {damage}"
        logger.warning(
            "ledger %s: %s cannot be decoded (%s); document %s is quarantined: left out of results until it "
            "is added again or removed (finderledge remove %s; finderledge check lists every damaged row)",
            self.where,
            row,
            damage,
            doc_id,
            doc_id,
        )

    def release(self, doc_ids: Iterable[str]) -> None:
        """Documents written again: their new rows are decoded afresh."""
        with self._lock:
            for doc_id in doc_ids:
                self._ids.pop(doc_id, None)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._ids

    def __bool__(self) -> bool:
        """Whether any document is quarantined (a read with none skips finding each row's owner)."""
        return bool(self._ids)

    def items(self) -> dict[str, str]:
        with self._lock:
            return dict(self._ids)
