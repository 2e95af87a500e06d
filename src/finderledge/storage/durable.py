"""Durable file writes shared by the on-disk indexes (BM25 and FAISS segments, their manifests)."""

from __future__ import annotations

import errno
import io
import json
import os
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UnsafePathError
from .files import full_disk_error, refuse_hard_link

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

__all__ = ["fsync_dir", "manifest_checksum", "npy_bytes", "write_file"]


def npy_bytes(arr: np.ndarray) -> bytes:
    """``arr`` in ``.npy`` format (never pickled)."""
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def write_file(path: Path, data: bytes) -> dict[str, int]:
    """Write ``data`` durably (fsync); returns the size and CRC32 a manifest records for it.

    A link at ``path`` is never followed (:class:`UnsafePathError`); a full disk raises
    :class:`StorageFullError` and removes the partial file."""
    try:
        refuse_hard_link(os.lstat(path), path)  # O_TRUNC would empty the file under its other name
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, "is a symbolic link") from None
        full = full_disk_error(exc, path)
        if full is None:
            raise
        raise full from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        full = full_disk_error(exc, path)
        if full is None:
            raise
        try:
            os.unlink(path)
        except OSError:
            pass
        raise full from exc
    return {"bytes": len(data), "crc32": zlib.crc32(data)}


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new names, renames) durable; a no-op where directories cannot be synced."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def manifest_checksum(body: Mapping[str, Any]) -> int:
    """CRC32 of a manifest's body (keys sorted), stored beside it to detect a damaged manifest."""
    return zlib.crc32(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8"))
