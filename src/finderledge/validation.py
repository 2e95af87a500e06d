"""Checks for the public methods' arguments; each failure is a ConfigurationError naming the argument."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .config import SEARCH_MODES
from .errors import ConfigurationError
from .filters import compile_filter
from .metadata import clean_text

__all__ = [
    "SEARCH_OPTIONS",
    "check_flag",
    "check_mapping",
    "check_parallel",
    "check_patterns",
    "check_positive_int",
    "check_search_options",
    "check_texts",
    "clean_text",
    "document_key",
    "query_text",
]

#: the per-call options ``search`` takes (``as_retriever`` accepts the same as defaults)
SEARCH_OPTIONS = ("search_mode", "k", "filter", "return_parents", "candidate_k", "rerank")


def check_positive_int(name: str, value: Any, *, optional: bool = True) -> int | None:
    """``value`` if it is a positive ``int`` (or ``None`` when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        none = " or None" if optional else ""
        raise ConfigurationError(f"{name}: expected a positive integer{none}, got {value!r}")
    return value


def check_flag(name: str, value: Any) -> bool:
    """``value`` if it is a ``bool``."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name}: expected True or False, got {value!r}")
    return value


def check_mapping(name: str, value: Any) -> Mapping[str, Any] | None:
    """``value`` if it is ``None`` or a mapping."""
    if value is not None and not isinstance(value, Mapping):
        raise ConfigurationError(f"{name}: expected a dict or None, got {type(value).__name__}")
    return value


def check_patterns(name: str, value: Any) -> Sequence[str] | None:
    """Glob patterns: ``None``, one string, or a list/tuple of strings."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) for p in value):
        raise ConfigurationError(f"{name}: expected a glob pattern string or a list of them, got {value!r}")
    return value


def check_texts(texts: Any) -> list[str]:
    """``add_texts``' texts: an iterable of non-empty strings (not one string)."""
    if isinstance(texts, (str, bytes)) or not hasattr(texts, "__iter__"):
        raise ConfigurationError(
            f"texts: expected a list of strings, got {type(texts).__name__} (for one text, pass [text])"
        )
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ConfigurationError(f"texts[{i}]: expected a string, got {type(text).__name__}")
        if not text.strip():
            raise ConfigurationError(f"texts[{i}]: empty text has nothing to index")
    return out


def check_parallel(name: str, values: Any, length: int) -> list[Any] | None:
    """A list given alongside ``texts`` (``metadatas``, ``ids``): ``None`` or exactly one item per text."""
    if values is None:
        return None
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
        raise ConfigurationError(
            f"{name}: expected a list with one item per text, got {type(values).__name__}"
        )
    if len(values) != length:
        raise ConfigurationError(f"{name}: expected {length} item(s), one per text, got {len(values)}")
    return list(values)


def query_text(query: Any) -> str:
    """The query as searchable text (a string; lone surrogates replaced)."""
    if not isinstance(query, str):
        raise ConfigurationError(f"query: expected a string, got {type(query).__name__}")
    return clean_text(query, "query")


def check_search_options(options: Mapping[str, Any]) -> None:
    """Validate ``search``'s per-call options (``None`` means "the setting's default")."""
    unknown = set(options) - set(SEARCH_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"unknown search option(s) {sorted(unknown)}; expected {sorted(SEARCH_OPTIONS)}"
        )
    mode = options.get("search_mode")
    if mode is not None and mode not in SEARCH_MODES:
        raise ConfigurationError(f"search_mode: expected one of {list(SEARCH_MODES)} or None, got {mode!r}")
    for name in ("k", "candidate_k"):
        check_positive_int(name, options.get(name))
    for name in ("return_parents", "rerank"):
        if name in options:
            check_flag(name, options[name])
    compile_filter(options.get("filter"))


def document_key(doc_id: Any) -> str:
    """A parent id or source path given to ``remove_document``, as a string."""
    if not isinstance(doc_id, (str, os.PathLike)):
        raise ConfigurationError(
            f"doc_id: expected a document id or a source path, got {type(doc_id).__name__}"
        )
    key = os.fspath(doc_id)
    if not isinstance(key, str) or not key.strip():
        raise ConfigurationError(f"doc_id: expected a non-empty document id or source path, got {doc_id!r}")
    return key
