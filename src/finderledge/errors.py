"""One error hierarchy, so callers, the CLI and a server can tell bad input from a damaged directory.

Every error FinderLedge raises on purpose is a :class:`FinderLedgeError`; each also subclasses the
built-in exception callers already catch (``ValueError``, ``KeyError``, ``TimeoutError``), so code
written against the built-ins keeps working.
"""

from __future__ import annotations

import errno
from pathlib import Path

__all__ = [
    "AccessDeniedError",
    "ConfigurationError",
    "DocumentNotFoundError",
    "FilterTooLargeError",
    "FinderLedgeError",
    "IncompatibleIndexError",
    "IndexCorruptError",
    "LedgerCorruptError",
    "LoadError",
    "LockTimeoutError",
    "MissingExtraError",
    "StorageFullError",
    "TooManyChunksError",
    "UnsafePathError",
]


class FinderLedgeError(Exception):
    """Base class of every error FinderLedge raises on purpose."""


class ConfigurationError(FinderLedgeError, ValueError):
    """A setting, argument or filter is invalid; the message names it and what was expected."""


class AccessDeniedError(FinderLedgeError, PermissionError):
    """An access policy (a scoped view, an MCP or HTTP caller) does not allow this: a write to a read-only
    view, a document outside the caller's scope, a path outside the allowed folders, a file over the size
    limit.  The message says what was refused and why, never what the refused document holds."""


class FilterTooLargeError(ConfigurationError):
    """A filter holds more values than :data:`finderledge.filters.MAX_FILTER_VALUES` (the message names the limit)."""


class TooManyChunksError(FinderLedgeError, ValueError):
    """An ingest call splits into more chunks than its ``max_chunks`` allows; raised while splitting, before
    anything is embedded or written (the message names the limit)."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class DocumentNotFoundError(FinderLedgeError, KeyError):
    """No document or chunk has the given id or source."""

    def __str__(self) -> str:  # KeyError quotes its argument; show the message as written
        return str(self.args[0]) if self.args else ""


class SourceNotFoundError(FinderLedgeError, FileNotFoundError):
    """A path given to ``add_document`` does not exist (text goes to ``add_texts``, never guessed)."""


class IncompatibleIndexError(FinderLedgeError, ValueError):
    """The persist directory was built differently (another embedding model, schema or dimension)."""


class IndexCorruptError(FinderLedgeError):
    """An index's files (BM25, FAISS) cannot be read consistently; nothing was changed.

    FinderLedge moves such an index aside and rebuilds it from the ledger, which holds every text and vector.
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"corrupt index at {self.path}: {reason}")


class LedgerCorruptError(IndexCorruptError):
    """The ledger (``ledger.sqlite3``) is missing, empty or damaged; nothing was changed.

    Unlike an index it is never moved aside or rebuilt: it is the source of truth. Restore it from a backup.
    """

    def __init__(
        self,
        path: str | Path,
        reason: str,
        advice: str = "restore it from a backup; the indexes next to it were left as they are",
    ) -> None:
        self.path = Path(path)
        self.reason = reason
        FinderLedgeError.__init__(self, f"ledger {self.path}: {reason}; {advice}")


class LockTimeoutError(FinderLedgeError, TimeoutError):
    """The directory's write lock was not free within the timeout; the message names the holder."""


class LoadError(FinderLedgeError):
    """A file could not be loaded; ``path`` names it and ``reason`` says why."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class MissingExtraError(FinderLedgeError, ImportError):
    """An optional feature's package is not installed; the message names the ``pip install`` extra to add."""

    def __init__(self, feature: str, package: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            f'{feature} needs the {package} package, which is not installed: pip install "finderledge[{extra}]"',
            name=package,
        )


class StorageFullError(FinderLedgeError, OSError):
    """The disk (or quota) holding ``directory`` is full: nothing is damaged and nothing was moved aside.

    Free some space and retry the write; searches keep working meanwhile.  Also an ``OSError`` (``ENOSPC``).
    """

    def __init__(self, directory: str | Path, detail: str, *, stored: bool = False) -> None:
        self.directory = Path(directory)
        self.detail = detail
        self.stored = stored  # True: an index failed after the ledger had stored the batch
        OSError.__init__(self, errno.ENOSPC, f"no space left for {self.directory} ({detail})")

    def __str__(self) -> str:
        if self.stored:
            return (
                f"{self.directory}: the disk is full ({self.detail}); the batch was stored in the ledger, and "
                "the index catches up from it at the next write or open; nothing was moved aside; free some space"
            )
        return (
            f"{self.directory}: the disk is full ({self.detail}); nothing was changed or moved aside; "
            "free some space and retry"
        )


class UnsafePathError(FinderLedgeError):
    """A fixed-name file or folder of a persist directory is a symbolic link (or leads outside it, or is
    not the kind of file expected); the directory is refused before anything is read as ours or written."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(
            f"{self.path}: {reason}; FinderLedge never opens a persist directory's files through links "
            "(replace it with a real file or folder, or remove it)"
        )
