"""Decoding ledger rows that may be damaged: one bad row quarantines its document, never every search.

A chunk's stored metadata is JSON, its embedding a float32 blob and its id ``<parent_id>-<split_index>``.
A row that breaks any of that (a 3-byte blob, JSON nested too deep to parse, a ``parent_id`` that is not
its own) is left out of every answer together with the rest of its document, and a warning names it once;
the document comes back when it is written again (``add``/``remove``), or after ``finderledge check
--repair``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..metadata import child_id

__all__ = [
    "Quarantine",
    "RowDamage",
    "decode_embedding",
    "decode_metadata",
    "dumps_metadata",
    "owner_of",
]

logger = logging.getLogger(__name__)


class RowDamage(ValueError):
    """A ledger row cannot be decoded; the message says which field and why."""


def owner_of(chunk_id: str) -> str:
    """The document a chunk id belongs to (``<parent>-NNNN``), whatever its ``parent_id`` column says."""
    head, sep, tail = chunk_id.rpartition("-")
    return head if sep and tail.isdigit() else chunk_id


def dumps_metadata(md: dict[str, Any]) -> str:
    """Metadata as the ledger stores it: JSON text, keys sorted, exact (non-ASCII kept, other values as str)."""
    return json.dumps(md, ensure_ascii=False, sort_keys=True, default=str)


def decode_metadata(text: Any) -> dict[str, Any]:
    """Stored metadata as a dict; invalid or too deeply nested JSON raises :class:`RowDamage`."""
    try:
        md = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise RowDamage(f"metadata is not readable JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(md, dict):
        raise RowDamage(f"metadata is a JSON {type(md).__name__}, expected an object")
    return md


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
            "is added again or removed (finderledge check --repair removes it)",
            self.where,
            row,
            damage,
            doc_id,
        )

    def release(self, doc_ids: Iterable[str]) -> None:
        """Documents written again: their new rows are decoded afresh."""
        with self._lock:
            for doc_id in doc_ids:
                self._ids.pop(doc_id, None)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._ids

    def items(self) -> dict[str, str]:
        with self._lock:
            return dict(self._ids)
