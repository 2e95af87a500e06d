"""Reading the files of a persist directory that may be damaged or crafted.

Nothing read from an index file is trusted before it is checked: a size declared in a header must fit the
file before anything is allocated; JSON of any depth is parsed without ``RecursionError``; an index's
folders must be real folders inside it.  The segment files themselves are opened and checked by
:mod:`finderledge.storage.segments` (names matching strict patterns, no link followed, regular files only).  A failure raises the store's
:class:`~finderledge.errors.IndexCorruptError` subclass, so the index is moved aside and rebuilt.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IncompatibleIndexError, IndexCorruptError, StorageFullError, UnsafePathError
from .files import library_full_disk_error

__all__ = [
    "PARSE_ERRORS",
    "SEGMENT_NAME",
    "chroma_open_guard",
    "corrupt_on_error",
    "is_inside",
    "is_sqlite_corruption",
    "parse_json",
    "parse_npy",
    "real_folder",
]

logger = logging.getLogger(__name__)

SEGMENT_NAME = re.compile(r"seg-[0-9]{8,}")  # what both stores name their segments
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26

Corrupt = Callable[[Path, str], IndexCorruptError]  # the store's error class: ``error(path, reason)``
# what a damaged or crafted file can make parsing and checking raise
PARSE_ERRORS = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    OverflowError,
    RecursionError,
    OSError,
)


@contextmanager
def corrupt_on_error(where: Path, error: Corrupt) -> Iterator[None]:
    """Turn anything a damaged file makes the block raise (``TypeError``, ``RecursionError`` …) into ``error``."""
    try:
        yield
    except (IndexCorruptError, IncompatibleIndexError, StorageFullError, UnsafePathError):
        raise
    except PARSE_ERRORS as exc:
        raise error(where, f"{type(exc).__name__}: {str(exc)[:300]}") from None


def is_inside(root: Path, path: Path) -> bool:
    """Whether ``path``, with ``..`` and symbolic links resolved, is ``root`` or lies below it."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False


def real_folder(root: Path, name: str, error: Corrupt) -> Path:
    """``root / name`` when it is absent or a real folder inside ``root`` (not a link out, not a file)."""
    path = root / name
    if path.is_symlink() or (path.exists() and not path.is_dir()) or not is_inside(root, path):
        raise error(path, "expected a folder of the index, found a link or a file")
    return path


def parse_json(raw: bytes, path: Path, error: Corrupt) -> Any:
    """JSON from ``raw``; invalid bytes, syntax or nesting too deep to parse raise ``error``."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise error(path, f"not valid JSON ({type(exc).__name__}: {str(exc)[:200]})") from None


def parse_npy(raw: bytes, path: Path, error: Corrupt) -> np.ndarray:
    """A plain array from ``.npy`` bytes; its header must account for exactly the bytes that follow it,
    checked before anything is allocated (``np.load`` allocates the shape the header claims first)."""
    buf = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(buf)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except Exception as exc:  # noqa: BLE001 - a crafted header makes numpy's parser raise anything (TokenError …)
        raise error(path, f"unreadable .npy header ({exc})") from None
    if dtype.hasobject or fortran or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise error(path, f"unexpected .npy array ({dtype}, shape {shape}, fortran order {fortran})")
    count = math.prod(shape)
    have = len(raw) - buf.tell()
    if count * dtype.itemsize != have:
        raise error(
            path, f"the header describes {count * dtype.itemsize} bytes of data, the file holds {have}"
        )
    return np.frombuffer(raw, dtype=dtype, count=count, offset=buf.tell()).reshape(shape).copy()


def is_sqlite_corruption(exc: BaseException) -> bool:
    """Whether an SQLite error says the file is damaged (``SQLITE_CORRUPT``) or not a database (``NOTADB``)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc)
    return "malformed" in text or "not a database" in text


def _schema_problem(db: Path) -> str | None:
    """Why SQLite file ``db`` must not be handed to Chroma (its schema does not parse or decode), or None."""
    if not db.is_file():
        return None
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None  # cannot tell here; Chroma reports it
    try:
        con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    except UnicodeDecodeError as exc:
        return f"its schema is not valid UTF-8 ({exc})"
    except sqlite3.DatabaseError as exc:
        return f"its schema is unreadable ({exc})" if is_sqlite_corruption(exc) else None
    finally:
        con.close()
    return None


def _is_chroma_failure(exc: BaseException) -> bool:
    """A Rust panic from Chroma's core (``pyo3_runtime.PanicException``, a BaseException) or a Chroma error."""
    if type(exc).__name__ == "PanicException" and type(exc).__module__ == "pyo3_runtime":
        return True
    try:
        from chromadb.errors import ChromaError
    except ImportError:  # pragma: no cover - chromadb is installed whenever this runs
        return False
    return isinstance(exc, ChromaError)


@contextmanager
def chroma_open_guard(path: Path | None, alias: str | None) -> Iterator[None]:
    """Open Chroma's files at ``path`` inside the block; damage raises :class:`IndexCorruptError`.

    A schema that does not parse is refused before Chroma reads it (its Rust core aborts the process on
    some of those); a panic or Chroma error while opening becomes the error too.  In memory: no checks.
    """
    if path is None:
        yield
        return
    db = path / "chroma.sqlite3"
    problem = _schema_problem(db)
    if problem is not None:
        raise IndexCorruptError(db, problem)
    try:
        yield
    except BaseException as exc:
        full = library_full_disk_error(exc, path)
        if full is not None:  # Chroma writes as it starts: a full disk is no damage, nothing is moved
            _forget_chroma_system(alias)
            if full is exc:
                raise
            raise full from exc
        if not _is_chroma_failure(exc):
            raise
        _forget_chroma_system(alias)
        raise IndexCorruptError(
            db, f"Chroma cannot open it ({type(exc).__name__}: {str(exc)[:300]})"
        ) from exc


def _forget_chroma_system(alias: str | None) -> None:
    """Drop the half-started Chroma system cached for ``alias`` so that nothing reuses it."""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(alias or "", None)  # noqa: SLF001 - no public way
    except Exception as exc:  # noqa: BLE001 - a cache of a library's internals; never worth failing for
        logger.debug("could not drop Chroma's cached system for %s (%s)", alias, exc)
