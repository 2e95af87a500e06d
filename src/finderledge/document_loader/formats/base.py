"""What every format reader gets and gives: the file being read, the load's options, and the Document maker.

A reader is any object with a ``binary`` flag (False: a file whose first 8 KiB hold a NUL byte is refused as
binary before the reader sees it) and ``read(file, options) -> list[Document]``.  It raises
:class:`~finderledge.errors.LoadError` (or :class:`EmptyDocumentError`) naming the file for anything it
cannot read; any other exception is reported against the file by the loader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from langchain_core.documents import Document

from ...errors import LoadError
from ...metadata import clean_text
from ..decode import decode_bytes, decode_stream, normalize_newlines
from ..paths import safe_path
from ..results import EmptyDocumentError

__all__ = ["FormatReader", "ReadOptions", "SourceFile", "decode_data", "decode_file", "make_document"]


@dataclass(frozen=True)
class ReadOptions:
    """The loader's settings a reader may use."""

    encoding: str | None = None  # forced text encoding; None: detected
    json_text_field: str | None = None  # JSON/JSONL: the field holding the text; None: the whole record


class SourceFile:
    """One open file being read: its path, extension and first bytes; the rest read on demand, in pieces
    (:meth:`stream`) or whole (:meth:`data`)."""

    def __init__(self, path: Path, handle: BinaryIO, head: bytes) -> None:
        self.path = path
        self.suffix = path.suffix.lower()
        self.head = head
        self._handle = handle

    @property
    def size(self) -> int:
        """Bytes in the file now."""
        return os.fstat(self._handle.fileno()).st_size

    def stream(self) -> BinaryIO:
        """The file's content from its first byte, to read in pieces."""
        self._handle.seek(0)
        return self._handle

    def data(self) -> bytes:
        """The whole content; :class:`EmptyDocumentError` when it holds only white space."""
        try:
            data = self.stream().read()
        except OSError as exc:
            raise LoadError(self.path, f"cannot read file: {exc.strerror or exc}") from exc
        if not data or data.isspace():
            raise EmptyDocumentError(self.path, "empty file")
        return data


class FormatReader(Protocol):
    """Reads one file format into parent Documents (see the module docstring)."""

    @property
    def binary(self) -> bool: ...

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]: ...


def _decode_error(path: Path, forced: str | None, exc: Exception) -> LoadError:
    what = f"not valid {forced}" if forced else "cannot determine the text encoding"
    return LoadError(path, f"{what} ({exc})")


def decode_data(path: Path, data: bytes, encoding: str | None) -> tuple[str, str]:
    """``data`` as text with LF line ends, and its codec; :class:`LoadError` naming ``path`` when impossible."""
    try:
        text, codec = decode_bytes(data, encoding)
    except (UnicodeError, LookupError) as exc:
        raise _decode_error(path, encoding, exc) from exc
    return normalize_newlines(text), codec


def decode_file(file: SourceFile, encoding: str | None) -> tuple[str, str]:
    """The whole file as text with LF line ends, and its codec, decoded in pieces (bounded extra memory)."""
    try:
        return decode_stream(file.stream(), encoding)
    except (UnicodeError, LookupError) as exc:
        raise _decode_error(file.path, encoding, exc) from exc
    except OSError as exc:
        raise LoadError(file.path, f"cannot read file: {exc.strerror or exc}") from exc


def make_document(
    path: Path,
    text: str,
    doc_type: str,
    locator: str = "",
    fields: dict[str, Any] | None = None,
    **extra: Any,
) -> Document:
    """A Document with the core metadata plus ``fields``/``extra`` (None values dropped).

    Lone surrogates (JSON can escape them) are replaced with U+FFFD in the text and string values."""
    name = safe_path(path.name)
    where = safe_path(path)
    text = clean_text(text, where)
    metadata: dict[str, Any] = {
        "source": where,
        "file_name": name,
        "doc_type_detected": doc_type,
        "locator": locator,
        "source_id": f"{name}:{locator}" if locator else name,
    }
    for key, value in {**(fields or {}), **extra}.items():
        if value is not None:
            metadata[key] = clean_text(value, where) if isinstance(value, str) else value
    return Document(page_content=text, metadata=metadata)
