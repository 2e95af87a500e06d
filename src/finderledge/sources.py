"""One rule for source paths, wherever a caller names a source: add, filter, remove, list, eval, citations.

``add_document("../mydocs/x.txt")`` stores the file's ``source`` as an absolute, normalised path
(``/home/me/mydocs/x.txt``: ``~`` expanded, ``..`` folded, symlinks not resolved).  A caller naming that
source later may write it the same way it wrote it to ``add_document``: a value is resolved to the stored
form when it is written relative to the working directory (``./x``, ``../x``, ``~/x``) or names a file or
folder that exists there (``docs/faq.md``).  Any other value (an absolute path, a source of your own such as
``"crm"``, ``text:<id>``, ``jawiki:東大寺``) is used as written.  Results and citations always show the
stored (absolute) form.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .document_loader import absolute_path, safe_path
from .filters import ScopedFilter

__all__ = ["SOURCE", "resolve_source", "resolve_source_filter", "source_key"]

SOURCE = "source"
_RELATIVE_PREFIXES = ("~", "./", "../", "." + os.sep, ".." + os.sep)


def source_key(path: str | os.PathLike[str]) -> str:
    """How a file path is stored as ``source``: absolute and normalised, as :meth:`add_document` stores it."""
    return safe_path(absolute_path(path))


def resolve_source(value: str) -> str:
    """``value`` in its stored form when it is a path relative to the working directory (see the module
    docstring), else unchanged."""
    if not isinstance(value, str) or not value or os.path.isabs(value):
        return value
    if value in (".", "..") or value.startswith(_RELATIVE_PREFIXES) or os.path.exists(value):
        return source_key(value)
    return value


def _resolve_condition(cond: Any) -> Any:
    """A condition on ``source`` with its string operands resolved (``$eq``/``$ne``/``$in``/``$nin``)."""
    if isinstance(cond, str):
        return resolve_source(cond)
    if not isinstance(cond, Mapping):
        return cond
    out: dict[str, Any] = {}
    for op, arg in cond.items():
        if op in ("$eq", "$ne") and isinstance(arg, str):
            out[op] = resolve_source(arg)
        elif op in ("$in", "$nin") and isinstance(arg, list):
            out[op] = [resolve_source(a) if isinstance(a, str) else a for a in arg]
        else:
            out[op] = arg
    return out


def resolve_source_filter(flt: Any) -> Any:
    """A copy of a metadata filter whose conditions on ``source`` name paths as they are stored; anything
    malformed is returned as is for :func:`~finderledge.filters.compile_filter` to refuse."""
    if not isinstance(flt, Mapping):
        return flt
    out: dict[Any, Any] = {}
    for key, cond in flt.items():
        if key in ("$and", "$or") and isinstance(cond, list):
            out[key] = [resolve_source_filter(c) for c in cond]
        elif key == SOURCE:
            out[key] = _resolve_condition(cond)
        else:
            out[key] = cond
    if isinstance(flt, ScopedFilter):  # a scope's own clause keeps not counting against the caller's limit
        return ScopedFilter(out, flt.scope_values)
    return out
