"""The one door through which the files and folders of a persist directory are opened.

A persist directory may come from anywhere (an archive, a shared drive, another user), so nothing in it
is followed blindly: every fixed name (``ledger.sqlite3``, ``write.lock.owner``, ``bm25/``, ``faiss/``,
``chroma/``, ``chroma/generation`` …) is resolved inside the root one component at a time, with
``O_NOFOLLOW`` and ``dir_fd``, so a symbolic link (to a file or a folder outside) is refused with
:class:`~finderledge.errors.UnsafePathError` naming it, before anything is written.  A hard link carries no
link bit, so a file is also refused when it has more than one name (``st_nlink > 1``): writing it in place
(SQLite, a lock file) would change the other name's file, which may lie outside.  Writes are atomic
(temporary file, ``fsync``, ``os.replace``), and a full disk (``ENOSPC``, ``EDQUOT``, SQLite's "database or
disk is full", Chroma's code 13) is told apart from damage: :func:`full_disk_error` turns it into
:class:`~finderledge.errors.StorageFullError`, which is never a reason to move an index aside.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import uuid
import zlib
from collections.abc import Iterable
from pathlib import Path

from ..errors import StorageFullError, UnsafePathError

__all__ = [
    "FIXED_FILES",
    "FIXED_FOLDERS",
    "Storage",
    "checksum",
    "full_disk_error",
    "index_folder",
    "is_full_disk",
    "library_full_disk_error",
    "refuse_hard_link",
    "replaced_by",
]

# the temp file :meth:`Storage.write_bytes` writes before it renames it over ``leaf``
_TEMP_FILE = re.compile(r"\.(?P<leaf>[^/]+)\.tmp-\d+-[0-9a-f]{8}")


def replaced_by(name: str) -> str | None:
    """The file a temp file named ``name`` was written to replace (:meth:`Storage.write_bytes` leaves one
    behind when its process is killed before the rename), or None when ``name`` is no such temp file."""
    match = _TEMP_FILE.fullmatch(name)
    return match["leaf"] if match else None


# every fixed name of a persist directory (relative to it) that FinderLedge or a library it drives opens
FIXED_FOLDERS = ("bm25", "faiss", "chroma")
FIXED_FILES = (
    "ledger.sqlite3",
    "ledger.sqlite3-wal",
    "ledger.sqlite3-shm",
    "ledger.sqlite3-journal",
    "write.lock",
    "write.lock.owner",
    "calibration.lock",
    "replica.json",
    "chroma/chroma.sqlite3",
    "chroma/chroma.sqlite3-wal",
    "chroma/chroma.sqlite3-shm",
    "chroma/chroma.sqlite3-journal",
    "chroma/write.lock",
    "chroma/write.lock.owner",
    "chroma/generation",
    "bm25/manifest.json",
    "faiss/manifest.json",
)
NEARLY_FULL = 4 << 20  # bytes free below which a vector library's own write error is a full disk
_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_SQLITE_FULL = 13
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def checksum(data: bytes | memoryview, previous: int = 0) -> int:
    """CRC32 of ``data`` (continued from ``previous``): what manifests record for each file they name."""
    return zlib.crc32(data, previous)


def is_full_disk(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the user's quota) is full rather than that a file is damaged."""
    if isinstance(exc, StorageFullError):
        return True
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == _SQLITE_FULL:
        return True
    if getattr(exc, "code", None) == _SQLITE_FULL:  # Chroma's Rust core passes SQLite's code on
        return True
    text = str(exc).lower()
    return "database or disk is full" in text or "no space left on device" in text


def full_disk_error(
    exc: BaseException, directory: Path | str | None, *, stored: bool = False
) -> StorageFullError | None:
    """The :class:`StorageFullError` for ``exc`` if it says the disk is full (else ``None``); ``stored``: the
    failure came after the ledger stored the batch (an index's write)."""
    if isinstance(exc, StorageFullError):
        return exc
    if not is_full_disk(exc):
        return None
    return StorageFullError(directory or "index", f"{type(exc).__name__}: {str(exc)[:300]}", stored=stored)


def library_full_disk_error(exc: BaseException, directory: Path) -> StorageFullError | None:
    """:func:`full_disk_error` for a failure inside a vector library (Chroma, qdrant-client), which writes only
    what the ledger already stored.  Chroma's Rust core reports a full disk during its compaction as a bare
    ``InternalError`` ("Error in compaction") without the OS error: a library error while the disk holding
    ``directory`` has less than :data:`NEARLY_FULL` bytes free is taken as a full disk too."""
    full = full_disk_error(exc, directory, stored=True)
    if full is not None or not type(exc).__module__.startswith(("chromadb", "qdrant_client")):
        return full
    try:
        st = os.statvfs(directory if os.path.isdir(directory) else os.path.dirname(directory))
    except (OSError, AttributeError):  # no statvfs on Windows
        return None
    if st.f_bavail * st.f_frsize >= NEARLY_FULL:
        return None
    return StorageFullError(directory, f"{type(exc).__name__}: {str(exc)[:300]}", stored=True)


class Storage:
    """The files of one persist directory (``root``): resolved inside it, never through a link.

    ``name`` arguments are relative paths with ``/`` separators (``"chroma/generation"``); absolute
    names, ``..`` and empty components are refused.  ``root`` itself may be reached through links (the
    caller chose it); what lies under it may not.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    # -- resolving ----------------------------------------------------------------------------------
    def _parts(self, name: str) -> list[str]:
        parts = name.split("/")
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise UnsafePathError(self.root / name, "expected a plain relative name inside the directory")
        return parts

    def path(self, name: str) -> Path:
        """``root / name`` after checking that no existing component of it is a symbolic link (or leads
        outside ``root``); a missing tail is fine (it is created through :meth:`open_fd`)."""
        current = self.root
        for part in self._parts(name):
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                return self.root / name
            except NotADirectoryError:
                raise UnsafePathError(current.parent, "expected a folder, found a file") from None
            if stat.S_ISLNK(st.st_mode):
                raise UnsafePathError(current, f"is a symbolic link (to {_link_target(current)})")
        refuse_hard_link(st, current)
        return current

    def check(self, names: Iterable[str]) -> None:
        """Refuse the directory if any of ``names`` is a link, or a file where a folder belongs (or back)."""
        for name in names:
            path = self.path(name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if name in FIXED_FOLDERS and not stat.S_ISDIR(st.st_mode):
                raise UnsafePathError(path, "expected a folder of the index, found something else")
            if name not in FIXED_FOLDERS and not stat.S_ISREG(st.st_mode):
                raise UnsafePathError(path, "expected a regular file, found a folder or a special file")

    def check_fixed_names(self) -> None:
        """Check every fixed name of a persist directory (see :data:`FIXED_FILES`, :data:`FIXED_FOLDERS`)."""
        self.check(FIXED_FOLDERS + FIXED_FILES)

    def _open_parent(self, name: str, create: bool) -> tuple[int, str]:
        """A descriptor of the folder holding ``name`` (each component opened without following links)."""
        parts = self._parts(name)
        if create:
            self.root.mkdir(parents=True, exist_ok=True)  # the root is the caller's choice, links allowed
        fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for i, part in enumerate(parts[:-1]):
                if create:
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                try:
                    nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafePathError(
                            self.root.joinpath(*parts[: i + 1]), "is a symbolic link or not a folder"
                        ) from None
                    raise
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def open_fd(self, name: str, flags: int, mode: int = 0o666) -> int:
        """``os.open`` of ``root / name`` that never follows a link (any component); caller closes it."""
        dir_fd, leaf = self._open_parent(name, create=bool(flags & os.O_CREAT))
        try:
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):  # before O_TRUNC or a write reaches it
                _refuse_link(dir_fd, leaf, self.root / name)
            fd = os.open(leaf, flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(self.root / name, "is a symbolic link") from None
            raise
        finally:
            os.close(dir_fd)
        try:
            refuse_hard_link(os.fstat(fd), self.root / name)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- reading ------------------------------------------------------------------------------------
    def read_bytes(self, name: str) -> bytes:
        """The bytes of the regular file ``name`` (a link, FIFO or device is refused)."""
        fd = self.open_fd(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UnsafePathError(self.root / name, "expected a regular file")
            return fh.read()

    def read_text(self, name: str, encoding: str = "utf-8") -> str:
        return self.read_bytes(name).decode(encoding)

    # -- writing ------------------------------------------------------------------------------------
    def write_bytes(self, name: str, data: bytes, *, durable: bool = True) -> dict[str, int]:
        """Replace ``name`` atomically with ``data`` (temp file, fsync, rename); returns its size and CRC32.

        A full disk raises :class:`StorageFullError` and leaves the old file and no temp file behind."""
        dir_fd, leaf = self._open_parent(name, create=True)
        tmp = f".{leaf}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            _refuse_link(dir_fd, leaf, self.root / name)
            try:
                fd = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=dir_fd
                )
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    if durable:
                        os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(
                    tmp, leaf, src_dir_fd=dir_fd, dst_dir_fd=dir_fd
                )  # replaces a link, never its target
                if durable:
                    _fsync_fd(dir_fd)
            except BaseException as exc:
                try:
                    os.unlink(tmp, dir_fd=dir_fd)
                except OSError:
                    pass
                full = full_disk_error(exc, self.root)
                if full is not None:
                    raise full from exc
                raise
        finally:
            os.close(dir_fd)
        return {"bytes": len(data), "crc32": checksum(data)}

    def write_text(self, name: str, text: str, *, encoding: str = "utf-8", durable: bool = True) -> None:
        self.write_bytes(name, text.encode(encoding), durable=durable)

    def mkdir(self, name: str) -> Path:
        """Create the folder ``name`` (and its parents) inside ``root``; an existing link there is refused."""
        dir_fd, leaf = self._open_parent(name, create=True)
        try:
            try:
                os.mkdir(leaf, 0o777, dir_fd=dir_fd)
            except FileExistsError:
                pass
            except OSError as exc:
                full = full_disk_error(exc, self.root)
                if full is not None:
                    raise full from exc
                raise
            st = os.stat(leaf, dir_fd=dir_fd, follow_symlinks=False)
        finally:
            os.close(dir_fd)
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePathError(self.root / name, "expected a folder, found a link or a file")
        return self.root / name

    def unlink(self, name: str) -> None:
        """Remove the file ``name`` (a link there is removed itself, never its target); missing: no-op."""
        dir_fd, leaf = self._open_parent(name, create=False)
        try:
            os.unlink(leaf, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        finally:
            os.close(dir_fd)


def index_folder(path: Path) -> Path:
    """``path`` (an index's own folder, e.g. ``…/bm25``) after checking it is no link to elsewhere."""
    Storage(path.parent).path(path.name)
    return path


def refuse_hard_link(st: os.stat_result, path: Path) -> None:
    """Raise :class:`UnsafePathError` if ``st`` is a file with more than one name (a hard link): writing it in
    place would change the file under its other name, which may lie outside the directory."""
    if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
        raise UnsafePathError(path, f"is a hard link (the file has {st.st_nlink} names; expected one)")


def _refuse_link(dir_fd: int, leaf: str, path: Path) -> None:
    """Raise :class:`UnsafePathError` if ``leaf`` (in the folder ``dir_fd``) is a symbolic or a hard link."""
    try:
        st = os.stat(leaf, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(path, f"is a symbolic link (to {_link_target(path)})")
    refuse_hard_link(st, path)


def _fsync_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot sync a directory
        pass


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
