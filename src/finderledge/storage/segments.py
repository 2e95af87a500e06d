"""Immutable segments on disk: the one layer through which the BM25 and FAISS stores keep their files.

Both on-disk indexes (``bm25/`` and ``faiss/``) share one layout and one life cycle, written here once:

* ``manifest.json``: the committed state (format name and version, counters, every segment with the size
  and CRC32 of each of its files, its tombstone file) plus a checksum of itself.  A flush replaces it
  atomically (temporary file, ``fsync``, ``os.replace``, ``fsync`` of the folder): that is the commit point.
* ``segments/seg-NNNNNNNN/``: a segment's files, written into ``seg-NNNNNNNN.tmp`` and renamed when complete.
  A committed segment is never rewritten.
* ``deletes/seg-NNNNNNNN.GGGGGGGG.npy``: a segment's deleted row numbers as of flush generation ``G``.
* Tiered merging (:func:`plan_merges`): when a size tier holds ``factor`` segments they are written as one,
  and a segment with too many tombstones is rewritten (:func:`needs_rewrite`); each row is rewritten
  O(log n) times and the number of segments stays O(log n).
* Garbage collection (:meth:`SegmentFiles.collect_garbage`) deletes, after a commit, every segment folder and
  tombstone file the committed manifest does not name (also leftovers of a crashed flush).

Every file is opened through :class:`~finderledge.storage.files.Storage` (no symbolic link is followed, in any
component) and nothing read is trusted before it is checked (:mod:`finderledge.storage.integrity`): names must match
strict patterns, sizes and CRC32s must match the manifest, ``.npy`` headers must account for exactly the
file's bytes before anything is allocated.  A failure raises the store's
:class:`~finderledge.errors.IndexCorruptError` subclass, so the index is moved aside and rebuilt.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..errors import IndexCorruptError, StorageFullError, UnsafePathError
from .durable import fsync_dir, manifest_checksum, npy_bytes
from .files import Storage, checksum, full_disk_error
from .integrity import SEGMENT_NAME, Corrupt, parse_json, parse_npy, real_folder

__all__ = [
    "DELETES_DIR",
    "DELETES_NAME",
    "MANIFEST",
    "SEGMENTS_DIR",
    "SEGMENT_NAME",
    "CrcCheck",
    "FileInfo",
    "SegmentFiles",
    "SegmentWriter",
    "deletes_name",
    "file_info",
    "needs_rewrite",
    "non_negative",
    "plan_merges",
    "segment_name",
    "segment_number",
    "tier",
]

MANIFEST = "manifest.json"
SEGMENTS_DIR = "segments"
DELETES_DIR = "deletes"
DELETES_NAME = re.compile(r"seg-[0-9]{8,}\.[0-9]{8,}\.npy")
BLOCK_BYTES = 8 << 20  # large files are checked and written in blocks of about this size

logger = logging.getLogger(__name__)

FileInfo = dict[str, int]  # what a manifest records for a file: {"bytes": size, "crc32": crc}


# --------------------------------------------------------------------------------------------------
# Names and the merge policy
# --------------------------------------------------------------------------------------------------
def segment_name(number: int) -> str:
    """The folder name of segment ``number`` (``seg-00000012``)."""
    return f"seg-{number:08d}"


def segment_number(name: str) -> int:
    """The number in a checked segment name (``seg-00000012`` -> 12)."""
    return int(name[4:])


def deletes_name(segment: str, generation: int) -> str:
    """The tombstone file of ``segment`` written by flush ``generation`` (inside ``deletes/``)."""
    return f"{segment}.{generation:08d}.npy"


def tier(rows: int, unit: int, factor: int) -> int:
    """Size tier of a segment of ``rows`` live rows: the largest ``t`` with ``rows >= unit * factor**t``
    (0 below ``unit * factor``)."""
    t, bound = 0, unit * factor
    while rows >= bound:
        t, bound = t + 1, bound * factor
    return t


def plan_merges(sizes: Sequence[int], factor: int, unit: int = 1) -> list[list[int]]:
    """Group segments (given by their live row counts, in order) into the segments to write.

    While a tier holds ``factor`` groups, the lowest such tier's groups become one (at the place of its first
    member), so a merge may cascade into the next tier.  Returns the groups as lists of input positions."""
    groups = [[i] for i in range(len(sizes))]
    while True:
        by_tier: dict[int, list[int]] = {}
        for g, members in enumerate(groups):
            by_tier.setdefault(tier(sum(sizes[i] for i in members), unit, factor), []).append(g)
        full = [t for t, gs in by_tier.items() if len(gs) >= factor]
        if not full:
            return groups
        chosen = by_tier[min(full)]
        merged = [i for g in chosen for i in groups[g]]
        rest = [members for g, members in enumerate(groups) if g not in set(chosen)]
        groups = [*rest[: chosen[0]], merged, *rest[chosen[0] :]]


def needs_rewrite(rows: int, deleted: int, max_deleted_ratio: float) -> bool:
    """Whether a segment with ``deleted`` of ``rows`` rows tombstoned is rewritten without them."""
    return deleted > max_deleted_ratio * rows


# --------------------------------------------------------------------------------------------------
# Values read from a manifest
# --------------------------------------------------------------------------------------------------
def non_negative(value: Any, what: str, where: Path, error: Corrupt) -> int:
    """``value`` if it is a non-negative ``int`` (not a bool), else ``error``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise error(where, f"{what}: expected a non-negative integer, got {str(value)[:100]!r}")
    return value


def file_info(obj: Any, what: str, where: Path, error: Corrupt) -> FileInfo:
    """A manifest's record of one file (``{"bytes": size, "crc32": crc}``), checked."""
    if not isinstance(obj, dict):
        raise error(where, f"{what}: expected size and CRC32")
    return {
        "bytes": non_negative(obj.get("bytes"), f"{what} bytes", where, error),
        "crc32": non_negative(obj.get("crc32"), f"{what} crc32", where, error),
    }


# --------------------------------------------------------------------------------------------------
# Writing one segment
# --------------------------------------------------------------------------------------------------
class _CrcWriter:
    """A write-only file wrapper that counts bytes and accumulates their CRC32."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh, self.size, self.crc = fh, 0, 0

    def write(self, data: bytes | memoryview) -> int:
        self.crc = checksum(data, self.crc)
        self.size += len(data)
        return int(self.fh.write(data))


JSON_ITEMS = 5_000  # list items serialised at a time by SegmentWriter.write_json


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class SegmentWriter:
    """The files of one segment being written (into its temporary folder); ``files`` is what the
    manifest records for them."""

    def __init__(self, storage: Storage, folder: str) -> None:
        self._storage, self._folder = storage, folder
        self.files: dict[str, FileInfo] = {}

    @contextmanager
    def _create(self, fname: str) -> Iterator[_CrcWriter]:
        fd = self._storage.open_fd(f"{self._folder}/{fname}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "wb") as fh:
            out = _CrcWriter(fh)
            yield out
            fh.flush()
            os.fsync(fh.fileno())
        self.files[fname] = {"bytes": out.size, "crc32": out.crc}

    def write(self, fname: str, data: bytes | memoryview) -> None:
        with self._create(fname) as out:
            out.write(data)

    def write_npy(self, fname: str, arr: np.ndarray, dtype: str) -> None:
        """``arr`` as a ``.npy`` of ``dtype`` (never pickled)."""
        self.write(fname, npy_bytes(np.ascontiguousarray(arr, dtype=dtype)))

    def write_json(self, fname: str, obj: Any) -> None:
        """``obj`` as compact JSON; a list is written :data:`JSON_ITEMS` items at a time (the same bytes), so a
        big segment's ids or metadata are never held whole as text beside their bytes (a 200 MB file's
        flush peaked there)."""
        if not isinstance(obj, list) or len(obj) <= JSON_ITEMS:
            self.write(fname, _json_bytes(obj))
            return
        with self._create(fname) as out:
            for lo in range(0, len(obj), JSON_ITEMS):
                part = _json_bytes(obj[lo : lo + JSON_ITEMS])
                out.write(b"[" if lo == 0 else b",")
                out.write(memoryview(part)[1:-1])
            out.write(b"]")

    def write_rows(self, fname: str, shape: tuple[int, int], blocks: Iterable[np.ndarray]) -> None:
        """A float32 ``.npy`` of ``shape`` streamed from ``blocks`` of rows (the matrix is never whole)."""
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
            "fortran_order": False,
            "shape": shape,
        }
        with self._create(fname) as out:
            np.lib.format.write_array_header_1_0(out, header)
            written = 0
            for block in blocks:
                out.write(np.ascontiguousarray(block, dtype="<f4").data.cast("B"))
                written += len(block)
            if written != shape[0]:
                raise RuntimeError(f"{self._folder}/{fname}: wrote {written} rows, expected {shape[0]}")


class CrcCheck:
    """The CRC32 of a file accumulated over its bytes while they are used (e.g. copied into an index), then
    compared with the manifest's: a large file is read once, not once to check and again to use."""

    def __init__(self, path: Path, info: Mapping[str, int], error: Corrupt, head: bytes = b"") -> None:
        self.path, self._want, self._error = path, info["crc32"], error
        self._crc, self._size, self._bytes = checksum(head), len(head), info["bytes"]

    def update(self, data: Any) -> None:
        """Add the next bytes of the file (anything with a C-contiguous buffer: bytes, an array's rows)."""
        view = memoryview(data).cast("B")
        self._crc = checksum(view, self._crc)
        self._size += len(view)

    def verify(self) -> None:
        """Raise the store's error unless every byte was added and the CRC32 is the manifest's."""
        if self._size != self._bytes or self._crc != self._want:
            raise self._error(self.path, "checksum mismatch")


# --------------------------------------------------------------------------------------------------
# The files of one index folder
# --------------------------------------------------------------------------------------------------
class SegmentFiles:
    """The manifest, segments and tombstones of the index folder ``root``; damage raises ``error``."""

    def __init__(self, root: Path, error: Corrupt) -> None:
        self.root = root
        self.error = error
        self._storage = Storage(root)
        self.manifest_path = root / MANIFEST

    # -- opening files --------------------------------------------------------------------------
    def check_folders(self) -> None:
        """Refuse ``segments/`` or ``deletes/`` when it is a link or a file (a flush would write through)."""
        for folder in (SEGMENTS_DIR, DELETES_DIR):
            real_folder(self.root, folder, self.error)

    def has_manifest(self) -> bool:
        return self.manifest_path.exists() or self.manifest_path.is_symlink()

    def segment_name(self, value: Any) -> str:
        """``value`` (a segment name read from the manifest) if it matches the pattern, else ``error``."""
        if not isinstance(value, str) or not SEGMENT_NAME.fullmatch(value):
            raise self.error(self.manifest_path, f"invalid segment name {str(value)[:200]!r}")
        return value

    def segment_file(self, segment: str, fname: str) -> str:
        """The relative name of file ``fname`` of segment ``segment`` (the name checked here again)."""
        return f"{SEGMENTS_DIR}/{self.segment_name(segment)}/{fname}"

    def deletes_file(self, name: Any) -> str:
        """The relative name of tombstone file ``name`` (read from the manifest: checked here)."""
        if not isinstance(name, str) or not DELETES_NAME.fullmatch(name):
            raise self.error(self.manifest_path, f"invalid tombstone file name {str(name)[:200]!r}")
        return f"{DELETES_DIR}/{name}"

    def open(self, name: str, info: Mapping[str, int] | None = None) -> BinaryIO:
        """The regular file ``name`` opened for reading, never through a link (caller closes it); with
        ``info``, its size must be the one the manifest records."""
        path = self.root / name
        try:
            fd = self._storage.open_fd(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except UnsafePathError as exc:
            raise self.error(path, f"is a link or leads outside {self.root} ({exc.reason})") from None
        except FileNotFoundError:
            raise self.error(path, "file is missing") from None
        except OSError as exc:
            raise self.error(path, f"cannot open ({exc})") from None
        fh = os.fdopen(fd, "rb")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self.error(path, "not a regular file")
            self._sized(fh, name, info)
        except BaseException:
            fh.close()
            raise
        return fh

    def _sized(self, fh: BinaryIO, name: str, info: Mapping[str, int] | None) -> int:
        size = os.fstat(fh.fileno()).st_size
        if info is not None and size != info["bytes"]:
            raise self.error(
                self.root / name, f"file has {size} bytes, the manifest says {info['bytes']} (truncated?)"
            )
        return size

    def check_size(self, name: str, info: Mapping[str, int]) -> None:
        """Check that ``name`` is a regular file of the size the manifest records."""
        with self.open(name) as fh:
            self._sized(fh, name, info)

    def read(self, name: str, info: Mapping[str, int] | None = None) -> bytes:
        """The bytes of ``name``, checked against ``info`` (size before reading, then CRC32) when given."""
        path = self.root / name
        with self.open(name) as fh:
            size = self._sized(fh, name, info)
            try:
                data = fh.read(size)
            except OSError as exc:
                raise self.error(path, f"cannot read ({exc})") from None
        if len(data) != size:
            raise self.error(path, f"read {len(data)} of {size} bytes")
        if info is not None and checksum(data) != info["crc32"]:
            raise self.error(path, "checksum mismatch")
        return data

    def verify_crc(self, name: str, info: Mapping[str, int]) -> None:
        """Check the size and CRC32 of a file too large to hold at once (read in blocks)."""
        crc = 0
        with self.open(name) as fh:
            self._sized(fh, name, info)
            try:
                while block := fh.read(BLOCK_BYTES):
                    crc = checksum(block, crc)
            except OSError as exc:
                raise self.error(self.root / name, f"cannot read ({exc})") from None
        if crc != info["crc32"]:
            raise self.error(self.root / name, "checksum mismatch")

    def json(self, name: str, info: Mapping[str, int] | None = None) -> Any:
        return parse_json(self.read(name, info), self.root / name, self.error)

    def npy(self, name: str, info: Mapping[str, int]) -> np.ndarray:
        """A small ``.npy`` read whole (its shape is checked against its size before allocating)."""
        return parse_npy(self.read(name, info), self.root / name, self.error)

    def _npy_layout(
        self, fh: BinaryIO, name: str, info: Mapping[str, int], dtype: str, shape: tuple[int, ...]
    ) -> int:
        """Check that the open ``.npy`` ``fh`` holds exactly a C-ordered ``dtype`` array of ``shape`` and is
        ``info["bytes"]`` long; returns the offset of its data."""
        path = self.root / name
        size = self._sized(fh, name, info)
        try:
            version = np.lib.format.read_magic(fh)
            read_header = {
                (1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0,
            }[version]
            got_shape, fortran, got_dtype = read_header(fh)
        except Exception as exc:  # noqa: BLE001 - a crafted header makes numpy's parser raise anything (TokenError …)
            raise self.error(path, f"unreadable .npy header ({exc})") from None
        want = np.dtype(dtype)
        offset = fh.tell()
        if got_dtype != want or fortran or tuple(got_shape) != tuple(shape):
            raise self.error(
                path, f"expected C-ordered {dtype} of shape {shape}, got {got_dtype} {got_shape}"
            )
        if offset + want.itemsize * int(np.prod(shape)) != size:
            raise self.error(path, f"{size} bytes do not hold a {dtype} array of shape {shape}")
        return offset

    def map_npy(
        self, name: str, info: Mapping[str, int], dtype: str, shape: tuple[int, ...]
    ) -> tuple[np.ndarray, bytes]:
        """A read-only memory map of the ``.npy`` ``name``, which must hold exactly a C-ordered ``dtype``
        array of ``shape`` and be ``info["bytes"]`` long; also returns its header bytes (for a CRC32)."""
        with self.open(name) as fh:
            offset = self._npy_layout(fh, name, info, dtype, shape)
            fh.seek(0)
            head = fh.read(offset)
            if int(np.prod(shape)) == 0:
                return np.zeros(shape, dtype=np.dtype(dtype)), head
            arr = np.memmap(fh, dtype=np.dtype(dtype), mode="r", offset=offset, shape=shape)
        return np.asarray(arr), head

    def npy_fd(
        self, name: str, info: Mapping[str, int], dtype: str, shape: tuple[int, ...]
    ) -> tuple[int, int, bytes]:
        """A descriptor of the ``.npy`` ``name`` (laid out as :meth:`map_npy` requires), the offset of its
        data and its header bytes, for a caller that reads the whole file once and checks its CRC32 over
        what it reads (:class:`CrcCheck`); the caller owns (closes) the descriptor.  Reads, unlike a map,
        leave no page of the file counted in the process's memory after they are copied."""
        with self.open(name) as fh:
            offset = self._npy_layout(fh, name, info, dtype, shape)
            fh.seek(0)
            head = fh.read(offset)
            return os.dup(fh.fileno()), offset, head

    def checked_npy_fd(
        self, name: str, info: Mapping[str, int], dtype: str, shape: tuple[int, ...]
    ) -> tuple[int, int]:
        """A descriptor of the ``.npy`` ``name`` (laid out as :meth:`map_npy` requires) whose whole CRC32 was
        checked through it, and the offset of its data; the caller owns (closes) the descriptor.  Reads made
        through it later read the checked file even if another is renamed over ``name`` meanwhile."""
        path = self.root / name
        with self.open(name) as fh:
            offset = self._npy_layout(fh, name, info, dtype, shape)
            fh.seek(0)
            crc = CrcCheck(path, info, self.error)
            try:
                while block := fh.read(BLOCK_BYTES):
                    crc.update(block)
            except OSError as exc:
                raise self.error(path, f"cannot read ({exc})") from None
            crc.verify()
            return os.dup(fh.fileno()), offset

    def read_manifest(self, format_name: str, version: int, what: str) -> dict[str, Any]:
        """The manifest, checked: a JSON object of ``format_name``/``version`` whose checksum matches."""
        mpath = self.manifest_path
        manifest = parse_json(self.read(MANIFEST), mpath, self.error)
        if not isinstance(manifest, dict):
            raise self.error(mpath, "manifest is not a JSON object")
        if manifest.get("format") != format_name:
            raise self.error(
                mpath, f"not a FinderLedge {what} (format {str(manifest.get('format'))[:100]!r})"
            )
        if manifest.get("version") != version:
            raise self.error(mpath, f"unsupported format version {str(manifest.get('version'))[:100]!r}")
        body = {k: v for k, v in manifest.items() if k != "checksum"}
        if manifest.get("checksum") != manifest_checksum(body):
            raise self.error(mpath, "manifest checksum mismatch")
        return manifest

    def read_tombstones(self, name: str, info: Mapping[str, int], count: int, rows: int) -> np.ndarray:
        """The deleted row numbers in tombstone file ``name``: ``count`` distinct rows below ``rows``."""
        dead = self.npy(name, info)
        if (
            dead.ndim != 1
            or dead.dtype.kind != "i"
            or len(dead) != count
            or (count and (int(dead.min()) < 0 or int(dead.max()) >= rows))
            or len(np.unique(dead)) != count
        ):
            raise self.error(self.root / name, "tombstones do not match the manifest")
        return dead

    # -- writing --------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Create ``segments/`` and ``deletes/`` (never through a link) before a flush writes into them."""
        created = False
        for folder in (SEGMENTS_DIR, DELETES_DIR):
            real_folder(self.root, folder, self.error)
            created = created or not (self.root / folder).is_dir()
            self._guard(partial(self._storage.mkdir, folder))
        if created:
            fsync_dir(self.root)

    def _guard(self, write: Callable[[], Any]) -> Any:
        """Run ``write``; a full disk becomes :class:`StorageFullError` (never a reason to rebuild)."""
        try:
            return write()
        except (StorageFullError, UnsafePathError, IndexCorruptError):
            raise
        except OSError as exc:
            full = full_disk_error(exc, self.root)
            if full is None:
                raise
            raise full from exc

    def write_segment(self, name: str, write: Callable[[SegmentWriter], None]) -> dict[str, FileInfo]:
        """Write segment ``name``: ``write`` fills its temporary folder, which is then synced and renamed.

        Leftovers of a failed flush under the name are removed first (a committed manifest never names a
        segment at or above its ``next_segment``).  Returns the manifest's record of each file."""
        folder = f"{SEGMENTS_DIR}/{name}"
        tmp = f"{folder}.tmp"
        for stale in (tmp, folder):
            self._remove(stale)
        self._guard(lambda: self._storage.mkdir(tmp))
        writer = SegmentWriter(self._storage, tmp)
        try:
            self._guard(lambda: write(writer))
            fsync_dir(self._storage.path(tmp))
            self._guard(lambda: os.rename(self._storage.path(tmp), self._storage.path(folder)))
        except StorageFullError:  # give the space back now (a crash leaves it to the next flush's cleanup)
            self._remove(tmp)
            raise
        fsync_dir(self.root / SEGMENTS_DIR)
        return writer.files

    def write_tombstones(self, segment: str, generation: int, dead: np.ndarray) -> tuple[str, FileInfo]:
        """Write a segment's deleted row numbers to a new file (never one a committed manifest names);
        returns the file's name (inside ``deletes/``) and record."""
        name = deletes_name(segment, generation)
        info = self._guard(lambda: self._storage.write_bytes(f"{DELETES_DIR}/{name}", npy_bytes(dead)))
        return name, info

    def write_manifest(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Commit: replace the manifest atomically with ``body`` plus its checksum; returns the manifest."""
        manifest = {**body, "checksum": manifest_checksum(body)}
        data = json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8")
        self._guard(lambda: self._storage.write_bytes(MANIFEST, data))
        return manifest

    # -- garbage --------------------------------------------------------------------------------
    def collect_garbage(
        self, segments: Iterable[str], deletes: Iterable[str], extra: Sequence[str] = ()
    ) -> None:
        """After a commit: delete every segment folder and tombstone file not in ``segments``/``deletes``
        (the names the committed manifest holds), and the files ``extra`` of an older layout.

        Only names this layer writes are touched, never through a link; a failure is logged, and the next
        flush removes what is left."""
        keep = {SEGMENTS_DIR: set(segments), DELETES_DIR: set(deletes)}
        unused = [name for name in extra if (self.root / name).exists() or (self.root / name).is_symlink()]
        for folder, pattern in ((SEGMENTS_DIR, SEGMENT_NAME), (DELETES_DIR, DELETES_NAME)):
            try:
                path = real_folder(self.root, folder, self.error)
                if not path.is_dir():
                    continue
                unused += [
                    f"{folder}/{e.name}"
                    for e in os.scandir(path)
                    if pattern.fullmatch(e.name.removesuffix(".tmp")) and e.name not in keep[folder]
                ]
            except (OSError, IndexCorruptError) as exc:
                logger.warning("%s: could not list %s (%s)", self.root, folder, exc)
        for name in unused:
            try:
                self._remove(name)
            except (OSError, UnsafePathError) as exc:
                logger.warning("%s: could not remove unused %s (%s)", self.root, name, exc)

    def _remove(self, name: str) -> None:
        """Remove the file or folder ``name`` (a link is removed itself, never followed)."""
        parent, _, leaf = name.rpartition("/")
        path = (self._storage.path(parent) if parent else self.root) / leaf
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
