"""Seals: the files a third-party library opens itself are handed to it only as FinderLedge left them.

Chroma's SQLite and HNSW files and qdrant-client's local storage are parsed by code FinderLedge does not own
(qdrant-client unpickles every row of its ``storage.sqlite``; Chroma's HNSW reader trusts the sizes in its
headers), so a crafted or damaged file there could run code or corrupt memory.  Whenever such a library has
written its folder (after it opens, after each write, at close: always under the folder's lock), FinderLedge
records every file in it — relative path, size, SHA-256, a regular file with one name — in ``seal.json``,
with an HMAC-SHA256 over the record keyed by a secret of this user (:func:`key_path`, never in the
directory), so a directory from elsewhere cannot carry a seal that passes.  Before the library opens the
folder again the files are checked against it: anything that does not match (content, size, a symbolic or
hard link, a missing or extra file, no seal, a seal made with another key) raises
:class:`~finderledge.errors.IndexCorruptError`, so the folder is moved aside and rebuilt from the ledger,
never handed over.  A directory copied to another machine or user is therefore rebuilt once there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
import threading
from pathlib import Path

from ..errors import IndexCorruptError, UnsafePathError
from .files import Storage, replaced_by

__all__ = ["KEY_FILE", "SEAL_FILE", "STOPPED", "Seal", "UnsealedError", "key_path", "seal_key"]

logger = logging.getLogger(__name__)

SEAL_FILE = "seal.json"
#: why a folder is not sealed after a FinderLedge process stopped (or found the disk full) while the library wrote it
STOPPED = (
    "a process stopped (killed, crashed, or out of disk space) while the library was writing here: its files "
    "are not sealed"
)
KEY_FILE = "seal.key"
_FORMAT = 1
_BLOCK = 1 << 20
_key_lock = threading.Lock()
_keys: dict[Path, bytes] = {}

Signature = dict[str, tuple[int, int, int]]  # relative path -> (size, mtime_ns, inode)


def key_path() -> Path:
    """``$XDG_CONFIG_HOME/finderledge/seal.key`` (``%APPDATA%`` on Windows), else ``~/.config/finderledge/…``.

    Per user, not per cache folder: every process of the user (a server, the CLI, a script) seals with the
    same key whatever ``FINDERLEDGE_CACHE_DIR`` it runs with."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.environ.get("APPDATA") or "~/.config"
    return Path(base).expanduser() / "finderledge" / KEY_FILE


def seal_key() -> bytes:
    """This user's secret for seals (:func:`key_path`, 32 random bytes, created once, mode 0600).

    Where it cannot be created (a read-only home), a key for this process only: seals then hold within the
    process, and another process rebuilds the sealed folders from the ledger (safe, only slower)."""
    path = key_path()
    with _key_lock:
        if path in _keys:
            return _keys[path]
        try:
            key = _read_or_create_key(path)
        except OSError as exc:
            logger.warning(
                "cannot keep the seal key %s (%s): folders sealed now are rebuilt from the ledger by other "
                "processes",
                path,
                exc,
            )
            key = secrets.token_bytes(32)
        _keys[path] = key
        return key


def _read_or_create_key(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}-{secrets.token_hex(4)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, secrets.token_bytes(32))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # atomic: of two processes creating it at once, one key wins
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            continue
        with os.fdopen(fd, "rb") as fh:
            key = fh.read(64)
        if len(key) == 32:
            return key
        raise OSError(f"{path} holds {len(key)} bytes, expected 32")
    raise OSError(f"{path} could not be created")


class UnsealedError(IndexCorruptError):
    """The folder was left unsealed by FinderLedge itself: a process stopped (killed, crashed) or the disk was
    full while the library wrote it.  Its files are rebuilt from the ledger like damage, but there is nothing
    to keep for inspection, so the folder is removed rather than moved aside."""


class Seal:
    """The seal of one folder a third-party library owns (``folder``); ``own`` names FinderLedge's own files
    in it (lock files, counters, the seal itself), which are read and written through the storage layer and
    so only have to be regular files with one name."""

    def __init__(self, folder: Path, own: frozenset[str] | set[str]) -> None:
        self.folder = Path(folder)
        self.own = frozenset(own) | {SEAL_FILE}
        self._storage = Storage(self.folder)
        self._sealed: Signature | None = None  # what the files looked like when this object last sealed them

    # -- reading the folder -------------------------------------------------------------------------
    def _scan(self) -> tuple[Signature, list[str]]:
        """Every entry below the folder, without following links: files (with their signature) and folders.

        A symbolic link, a hard link (a file with more than one name) or a special file is damage."""
        files: Signature = {}
        folders: list[str] = []
        pending = [""]
        while pending:
            rel = pending.pop()
            with os.scandir(self.folder / rel if rel else self.folder) as entries:
                for entry in entries:
                    name = f"{rel}/{entry.name}" if rel else entry.name
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        folders.append(name)
                        pending.append(name)
                    elif not stat.S_ISREG(st.st_mode):
                        raise IndexCorruptError(
                            self.folder / name, "is a symbolic link or a special file, not a sealed file"
                        )
                    elif st.st_nlink > 1:
                        raise IndexCorruptError(
                            self.folder / name,
                            f"is a hard link (the file has {st.st_nlink} names; expected one)",
                        )
                    else:
                        files[name] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return files, sorted(folders)

    def _digest(self, name: str) -> str:
        """SHA-256 of the file ``name``, opened through the storage layer (no link followed, one name)."""
        try:
            fd = self._storage.open_fd(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except UnsafePathError as exc:
            raise IndexCorruptError(self.folder / name, exc.reason) from None
        except FileNotFoundError:  # the library is not idle (another process writes it): nothing to seal
            raise IndexCorruptError(self.folder / name, "the file vanished while it was read") from None
        digest = hashlib.sha256()
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise IndexCorruptError(self.folder / name, "expected a regular file")
            while block := fh.read(_BLOCK):
                digest.update(block)
        return digest.hexdigest()

    @staticmethod
    def _mac(files: dict[str, dict[str, object]], folders: list[str]) -> str:
        body = json.dumps({"format": _FORMAT, "files": files, "folders": folders}, sort_keys=True)
        return hmac.new(seal_key(), body.encode("utf-8"), hashlib.sha256).hexdigest()

    def _ours(self, name: str) -> bool:
        """Whether ``name`` is one of FinderLedge's own files here, or the temp file of one that a process
        killed inside an atomic replace left behind (the library never opens either)."""
        return name in self.own or replaced_by(name) in self.own

    # -- sealing and checking -----------------------------------------------------------------------
    def write(self) -> None:
        """Record the folder's files as they are now (caller holds the folder's lock; the library is idle)."""
        if not self.folder.is_dir():
            return
        signature, folders = self._scan()
        files = {
            name: {"size": size, "sha256": self._digest(name)}
            for name, (size, _, _) in sorted(signature.items())
            if not self._ours(name)
        }
        record = {"format": _FORMAT, "files": files, "folders": folders, "mac": self._mac(files, folders)}
        self._storage.write_bytes(SEAL_FILE, json.dumps(record, sort_keys=True).encode("utf-8"))
        self._sealed, _ = self._scan()  # the seal file itself included: its own write is no change

    def begin(self) -> None:
        """Mark the folder as being written by the library (caller holds its lock): a process that dies before
        :meth:`write` leaves it unsealed, and the next opener rebuilds it, saying why."""
        if self.folder.is_dir():
            self._storage.write_bytes(
                SEAL_FILE, json.dumps({"format": _FORMAT, "open": os.getpid()}).encode()
            )
            self._sealed = None

    def changed(self) -> bool:
        """Whether any file changed (by size, time or inode) since this object last sealed or verified it."""
        if self._sealed is None:
            return True
        try:
            return self._scan()[0] != self._sealed
        except (OSError, IndexCorruptError):
            return True

    def reseal_if_changed(self) -> None:
        """Seal again if the library wrote anything since the last seal (a few ``stat`` calls otherwise)."""
        if self.changed():
            self.write()

    def verify(self) -> None:
        """Raise :class:`IndexCorruptError` naming the first file that does not match the seal.

        A folder holding no file of the library's (new, or emptied) needs no seal."""
        if not self.folder.is_dir():
            return
        signature, folders = self._scan()
        foreign = sorted(name for name in signature if not self._ours(name))
        if SEAL_FILE not in signature:
            if foreign:
                raise IndexCorruptError(
                    self.folder / foreign[0],
                    "not sealed by FinderLedge (written by an older version, elsewhere, or crafted): "
                    "it is never handed to the library",
                )
            self._sealed = signature
            return
        try:
            record = json.loads(self._storage.read_bytes(SEAL_FILE))
            if isinstance(record, dict) and "open" in record:
                raise UnsealedError(self.folder, STOPPED)
            files = record["files"]
            sealed_folders = record["folders"]
            mac = str(record["mac"])
            if not isinstance(files, dict) or not isinstance(sealed_folders, list):
                raise TypeError("files and folders of another type")
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise IndexCorruptError(self.folder / SEAL_FILE, f"unreadable seal ({exc})") from None
        if not hmac.compare_digest(mac, self._mac(files, sealed_folders)):
            raise IndexCorruptError(
                self.folder / SEAL_FILE,
                "the seal was not made by this user's FinderLedge (another machine or user, or crafted)",
            )
        for name in foreign:
            if name not in files:
                raise IndexCorruptError(self.folder / name, "a file the seal does not record")
        for name in sorted(files):
            entry = files[name]
            if name not in signature:
                raise IndexCorruptError(self.folder / name, "a sealed file is missing")
            if signature[name][0] != entry.get("size"):
                raise IndexCorruptError(
                    self.folder / name, f"{signature[name][0]} bytes, the seal records {entry.get('size')}"
                )
            if self._digest(name) != entry.get("sha256"):
                raise IndexCorruptError(self.folder / name, "its content does not match the seal (SHA-256)")
        if sorted(folders) != sorted(str(f) for f in sealed_folders):
            extra = sorted(set(folders) - {str(f) for f in sealed_folders})
            raise IndexCorruptError(
                self.folder / (extra[0] if extra else ""), "the folders do not match the seal"
            )
        self._sealed = signature
