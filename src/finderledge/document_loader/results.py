"""What a load returns: the documents, every file considered, and the errors a file can raise."""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.documents import Document

from ..errors import LoadError

__all__ = ["EmptyDocumentError", "LoadError", "LoadResult", "SkippedFile", "UnsupportedFileError"]


@dataclass
class SkippedFile:
    """A file that produced no documents, and why.

    ``kind`` is one of "unsupported", "binary", "empty" (nothing to index: empty file, header-only CSV),
    "symlink" (not followed) or "error" (corrupt or unreadable file of a supported type, unlistable directory).
    """

    path: str
    reason: str
    kind: str = "error"


@dataclass
class LoadResult:
    """Documents from one ``load``/``load_directory`` call plus an account of every file considered."""

    documents: list[Document] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    files_seen: int = 0
    files_loaded: int = 0  # files that produced at least one document
    files: dict[str, list[Document]] = field(default_factory=dict)  # absolute path -> its documents


class UnsupportedFileError(LoadError):
    """The file type is not supported (unknown extension or binary content)."""


class EmptyDocumentError(LoadError):
    """The file is readable but holds nothing to index (empty file, CSV with only a header, ...)."""
