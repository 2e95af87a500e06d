"""Paths as FinderLedge stores them: absolute without resolving links, and valid Unicode."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..metadata import clean_text

__all__ = ["absolute_path", "known_gone", "safe_path"]


def absolute_path(path: str | os.PathLike[str]) -> Path:
    """Absolute, normalised path ("a/../b" -> "/cwd/b", "~" expanded) without resolving symlinks."""
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path))))


def safe_path(path: str | os.PathLike[str]) -> str:
    r"""A path as a storable string: name bytes that are not UTF-8 become ``\xNN`` escapes.

    A name read from disk that is not UTF-8 holds lone surrogates (``surrogateescape``), which SQLite,
    JSON and log files refuse; the escaped form is valid Unicode and :func:`known_gone` maps it back."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # lone surrogates that stand for no bytes: not a name read from disk
        return clean_text(text, "path")


def _disk_paths(source: str) -> list[str]:
    r"""The paths a stored source may stand for: itself and, when it has ``\xNN`` escapes, the raw bytes."""
    paths = [source]
    if "\\x" in source:
        raw = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), source.encode("utf-8"))
        paths.append(os.fsdecode(raw))
    return paths


def known_gone(source: str) -> bool:
    """True only when the file of a stored source surely no longer exists (not merely unreadable now)."""
    for path in _disk_paths(source):
        try:
            os.stat(path)
            return False
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError):  # permission denied, I/O error ...: unknown, so not gone
            return False
    return True
