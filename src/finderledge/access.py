"""What one caller may see and do, as one object every entry point enforces: :class:`AccessPolicy`.

A policy holds the caller's base filter (the documents it sees: a tenant, a partition), whether it may write,
the folders it may ingest files from and the size limits of what it brings in.  The Python
:meth:`FinderLedge.scoped <finderledge.facade.FinderLedge.scoped>` view, the HTTP server's callers
(:mod:`finderledge.server.deps`), the MCP server (:mod:`finderledge.mcp.server`) and the LangChain vector
store build one and go through it; the plain facade and the command line act as the directory's owner
(:meth:`AccessPolicy.owner`: every document, writes, files anywhere):

* reads: :meth:`AccessPolicy.narrow` ANDs the caller's filters with the base filter (a caller narrows it,
  never widens it); the base filter's own values do not count against the caller's filter limit;
* writes: :meth:`AccessPolicy.check_write` refuses a read-only caller; :meth:`AccessPolicy.stamp` is the
  metadata every stored document carries so it stays in scope; the writer refuses, under its lock, to replace
  or remove any stored document the base filter does not match (``within=``), whatever id the caller names;
* files: :meth:`AccessPolicy.check_path` lets a path through only under an allowed folder (its real path:
  a symlink leading out is refused), regular files only, each within ``max_file_bytes``; what it saw (each
  file's device and inode) is recorded, and :meth:`AccessPolicy.opener` opens only those files (no link
  followed: a path swapped between the check and the read is refused, never read).
"""

from __future__ import annotations

import copy
import os
import stat
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .errors import AccessDeniedError, ConfigurationError
from .filters import Predicate, ScopedFilter, and_filters, compile_filter, filter_values

if TYPE_CHECKING:
    from .ledgers.base import Ledger

__all__ = ["AccessPolicy", "CheckedFiles", "in_scope", "in_scope_ids", "refuse_outside", "stamp_of"]

#: the files a check let through: normalised absolute path -> (st_dev, st_ino) of its ``lstat``
CheckedFiles = MutableMapping[str, tuple[int, int]]
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # a symbolic link swapped in at the name is not followed: ELOOP
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in never blocks the open (refused as not regular)
    | getattr(os, "O_CLOEXEC", 0)
)


def stamp_of(base_filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metadata a write stamps so what it stores matches ``base_filter``: its top-level equality fields
    (``{"tenant": "a"}`` or ``{"tenant": {"$eq": "a"}}``)."""
    stamp: dict[str, Any] = {}
    for key, cond in (base_filter or {}).items():
        if key.startswith("$"):
            continue
        if isinstance(cond, Mapping):
            if set(cond) == {"$eq"}:
                stamp[key] = cond["$eq"]
        else:
            stamp[key] = cond
    return stamp


@dataclass(frozen=True)
class AccessPolicy:
    """One caller's access: ``base_filter`` (``None``: every document), ``writable``, ``folders`` files may be
    ingested from (``None``: anywhere, for the directory's owner; empty: none), ``max_file_bytes`` per file and
    ``max_chunks`` per call (``None``: no limit); ``label`` names the caller in refusals."""

    base_filter: Mapping[str, Any] | None = None
    writable: bool = False
    folders: Sequence[str | os.PathLike[str]] | None = ()
    max_file_bytes: int | None = None
    max_chunks: int | None = None
    label: str = "this view"
    #: a further check of each file (e.g. the server's unpack limits): why it is refused, or None
    file_check: Callable[[Path], str | None] | None = field(default=None, compare=False)
    _accepts: Predicate | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        base = copy.deepcopy(dict(self.base_filter)) if self.base_filter else None
        object.__setattr__(self, "base_filter", base)
        object.__setattr__(self, "_accepts", compile_filter(base))  # validated (and its size checked) now
        if self.folders is not None:
            object.__setattr__(self, "folders", tuple(_allowed_folder(f) for f in self.folders))
        for name in ("max_file_bytes", "max_chunks"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(
                    f"access policy {name}: expected an integer >= 1 or None, got {value!r}"
                )

    @classmethod
    def owner(cls) -> AccessPolicy:
        """Everything: every document, writes, files anywhere (the directory's owner: Python, the CLI)."""
        return cls(None, writable=True, folders=None, label="the directory's owner")

    # -- reads ----------------------------------------------------------------------------------------
    @property
    def scope(self) -> dict[str, Any] | None:
        """The base filter (a copy: the policy cannot be changed after construction)."""
        return copy.deepcopy(dict(self.base_filter)) if self.base_filter else None

    def narrow(self, *filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The base filter AND ``filters``: the caller's filters (checked on their own against the filter
        limit) narrow the scope and never widen it; the base filter's values do not count against the limit."""
        own = and_filters(*(dict(f) for f in filters if f))
        compile_filter(own)  # the caller's part, validated and limited on its own
        base = self.scope
        if base is None:
            return own
        combined = and_filters(base, own)
        assert combined is not None
        return ScopedFilter(combined, filter_values(base))

    def accepts(self, metadata: Mapping[str, Any]) -> bool:
        """Whether a document with ``metadata`` is inside the scope."""
        return self._accepts is None or self._accepts(metadata)

    # -- writes ---------------------------------------------------------------------------------------
    def stamp(self) -> dict[str, Any]:
        """The metadata every write of this caller carries (the base filter's equality fields)."""
        return stamp_of(self.base_filter)

    @property
    def stampable(self) -> bool:
        """Whether a document stamped with :meth:`stamp` is inside the scope (a ``$in`` or ``$or`` scope is
        not: such a caller cannot write)."""
        return self.accepts(self.stamp())

    def check_write(self, what: str) -> None:
        """Refuse ``what`` (e.g. ``"add"``) when this caller may not write, naming why."""
        if not self.writable:
            raise AccessDeniedError(
                f"{what}: {self.label} is read-only (writes must be allowed when it is made: "
                "scoped(..., writable=True), finderledge mcp --allow-writes)"
            )
        if not self.stampable:
            raise AccessDeniedError(
                f"{what}: {self.label}'s base filter {self.base_filter} has conditions that cannot be stamped "
                "on a document (only equality fields can): writes are refused"
            )

    def write_metadata(self, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        """``metadata`` with the stamp over it: the base filter's fields win, so a document stays in scope."""
        return {**(dict(metadata) if metadata else {}), **self.stamp()}

    # -- files ----------------------------------------------------------------------------------------
    def check_path(
        self, path: str | os.PathLike[str], what: str = "add", *, seen: CheckedFiles | None = None
    ) -> Path:
        """The real path of ``path`` when this caller may ingest it: under an allowed folder (a symlink or a
        ``..`` leading out is refused), regular files only (no hard links to files elsewhere), each within
        ``max_file_bytes``; :class:`AccessDeniedError` naming the path and the rule otherwise.  ``seen``
        receives each file let through (for :meth:`opener`)."""
        given = Path(os.fspath(path)).expanduser()
        if self.folders is None:
            if self.max_file_bytes is not None:
                self._check_sizes(given, given, what, seen)
            return given
        if not self.folders:
            raise AccessDeniedError(
                f"{what}: {self.label} reads no files: no folder is allowed "
                "(finderledge mcp --allow-folder DIR names one)"
            )
        real = Path(os.path.realpath(given))
        folders = [Path(f) for f in self.folders]  # real paths since __post_init__
        folder = next((f for f in folders if real == f or f in real.parents), None)
        if folder is None:
            shown = ", ".join(str(f) for f in self.folders)
            link = " (through a symbolic link)" if str(real) != os.path.abspath(given) else ""
            raise AccessDeniedError(f"{what}: {str(path)!r} is outside the allowed folders{link}: {shown}")
        if not real.exists():
            raise AccessDeniedError(f"{what}: {str(path)!r}: no such file or directory")
        self._check_sizes(real, folder, what, seen)
        return real

    def opener(self, seen: CheckedFiles, what: str = "add") -> Callable[[Path], BinaryIO]:
        """How the loader opens a file this caller's :meth:`check_path` let through (``seen``): without
        following a link at its name, and only when the opened file is the one checked (device and inode
        against the check's ``lstat``; still a regular file with one name, within ``max_file_bytes``).  A path
        swapped between the check and the read (a link, a hard link, another file, a folder replaced by a
        link) raises :class:`AccessDeniedError` naming it; nothing of it is read."""

        def open_checked(path: Path) -> BinaryIO:
            shown = f"{what}: {path} changed after the access check"
            try:
                fd = os.open(path, _OPEN_FLAGS)
            except OSError:
                if os.path.islink(path):  # ELOOP: a symbolic link now stands at the name
                    raise AccessDeniedError(
                        f"{shown} (it is a symbolic link now): refused, not read"
                    ) from None
                raise
            try:
                st = os.fstat(fd)
                if seen.get(os.path.normpath(os.path.abspath(path))) != (st.st_dev, st.st_ino):
                    raise AccessDeniedError(f"{shown} (not the file that was checked): refused, not read")
                if not stat.S_ISREG(st.st_mode):
                    raise AccessDeniedError(f"{shown} (not a regular file now): refused, not read")
                if st.st_nlink > 1:
                    raise AccessDeniedError(f"{shown} (it is a hard link now): refused, not read")
                if self.max_file_bytes is not None and st.st_size > self.max_file_bytes:
                    raise AccessDeniedError(
                        f"{shown} (it is {st.st_size:,} bytes now, over {self.label}'s limit of "
                        f"{self.max_file_bytes:,} bytes per file): refused, not read"
                    )
                return os.fdopen(fd, "rb")
            except BaseException:
                os.close(fd)
                raise

        return open_checked

    def _check_sizes(self, real: Path, folder: Path, what: str, seen: CheckedFiles | None = None) -> None:
        """Every file ``real`` stands for: a regular file with one name, within ``max_file_bytes``."""
        if not real.is_dir():
            self._check_file(real, folder, os.lstat(real) if real.exists() else None, what, seen)
            return
        for root, dirs, files in os.walk(real, followlinks=False):
            for name in files:
                full = Path(root) / name
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):  # not followed by the loader; refused outright when it leads out
                    self._check_link(full, what)
                    continue
                self._check_file(full, folder, st, what, seen)
            for name in [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                dirs.remove(name)  # not followed by the loader; refused outright when it leads out
                self._check_link(Path(root) / name, what)

    def _check_link(self, link: Path, what: str) -> None:
        """A symbolic link met in a folder: refused when it leads outside the allowed folders."""
        target = Path(os.path.realpath(link))
        if self.folders is not None and not any(
            target == f or Path(f) in target.parents for f in self.folders
        ):
            raise AccessDeniedError(f"{what}: {link} is a symbolic link leading outside the allowed folders")

    def _check_file(
        self, path: Path, folder: Path, st: os.stat_result | None, what: str, seen: CheckedFiles | None = None
    ) -> None:
        if st is None:
            return  # the loader names a missing file itself
        if self.folders is not None and not stat.S_ISREG(st.st_mode):
            raise AccessDeniedError(f"{what}: {path} is not a regular file")
        if self.folders is not None and st.st_nlink > 1:
            raise AccessDeniedError(
                f"{what}: {path} is a hard link (it has {st.st_nlink} names, one may be outside {folder})"
            )
        if self.max_file_bytes is not None and st.st_size > self.max_file_bytes:
            raise AccessDeniedError(
                f"{what}: {path} is {st.st_size:,} bytes, over {self.label}'s limit of "
                f"{self.max_file_bytes:,} bytes per file"
            )
        problem = self.file_check(path) if self.file_check is not None else None
        if problem:
            raise AccessDeniedError(f"{what}: {path}: {problem}")
        if seen is not None:
            seen[os.path.normpath(os.path.abspath(path))] = (st.st_dev, st.st_ino)


def _allowed_folder(folder: str | os.PathLike[str]) -> Path:
    """An allowed folder as its real path; it must exist and be a directory."""
    real = Path(os.path.realpath(Path(os.fspath(folder)).expanduser()))
    if not real.is_dir():
        raise ConfigurationError(f"allowed folder {str(folder)!r}: expected an existing directory")
    return real


def refuse_outside(
    ledger: Ledger, ids: Sequence[str], within: Predicate, what: str, document_id: str | None = None
) -> None:
    """Under the write lock: :class:`AccessDeniedError` when a stored parent among ``ids`` (which a write is
    about to replace or remove) is outside the scope ``within`` accepts; the message names the id only."""
    for pid in ids:
        record = ledger.get_document(pid)
        if record is not None and not within(record.metadata):
            named = f"document_id {document_id!r}" if document_id is not None else f"document id {pid!r}"
            raise AccessDeniedError(
                f"{what}: {named} belongs to a document outside this scope; a scoped writer never replaces "
                "or removes another scope's documents (choose another id)"
            )


def in_scope(
    rows: Sequence[tuple[str, dict[str, Any]]], within: Predicate | None
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(id, metadata)`` rows inside the scope ``within`` accepts (all of them without one)."""
    return list(rows) if within is None else [(pid, md) for pid, md in rows if within(md)]


def in_scope_ids(ledger: Ledger, ids: Sequence[str], within: Predicate) -> list[str]:
    """The stored parents among ``ids`` inside the scope ``within`` accepts, in order."""
    kept = []
    for pid in ids:
        record = ledger.get_document(pid)
        if record is not None and within(record.metadata):
            kept.append(pid)
    return kept
