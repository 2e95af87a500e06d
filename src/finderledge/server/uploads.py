"""Uploaded files: checked before anything is written to the index, stored only inside the upload area.

Each check answers a hostile upload with a clear 4xx: a size over the limit (413), an extension FinderLedge
does not read (400), a declared type that contradicts the extension (415), content that is not what the
extension says (a ``.pdf`` without a PDF header, binary bytes in a text file, a DOCX that is no zip or
unpacks to more than the limit: 400).  Only a plain file name is accepted, and the stored path is
checked to lie inside the upload area, so ``../../etc/passwd`` can never name a place to write.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import shutil
import unicodedata
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "TYPES",
    "StoredUpload",
    "UnpackLimits",
    "UploadArea",
    "UploadError",
    "safe_filename",
    "unpack_limit_problem",
]

CHUNK = 1024 * 1024
#: extension -> (canonical MIME type, the declared types accepted for it besides generic ones)
TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    ".pdf": ("application/pdf", ("application/pdf", "application/x-pdf")),
    ".docx": (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", "application/zip"),
    ),
    ".txt": ("text/plain", ("text/",)),
    ".md": ("text/markdown", ("text/",)),
    ".markdown": ("text/markdown", ("text/",)),
    ".csv": ("text/csv", ("text/", "application/csv", "application/vnd.ms-excel")),
    ".json": ("application/json", ("application/json", "text/")),
    ".jsonl": (
        "application/x-ndjson",
        ("application/x-ndjson", "application/jsonl", "application/json", "text/"),
    ),
    ".html": ("text/html", ("text/html", "application/xhtml+xml", "text/")),
    ".htm": ("text/html", ("text/html", "application/xhtml+xml", "text/")),
}
_GENERIC = ("", "application/octet-stream", "binary/octet-stream", "application/unknown")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class UploadError(Exception):
    """An upload refused; ``status`` is the HTTP code to answer with, the message says why."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason  # for a limit: what was over which limit, without the server's advice


@dataclass(frozen=True)
class StoredUpload:
    document_id: str
    path: Path
    filename: str
    mime_type: str
    size: int


def safe_filename(name: str | None) -> str:
    """``name`` (NFC) when it is a plain file name; a path, control characters, a hidden name or an overlong
    one are refused with 400 (a browser sends a base name: anything else is a mistake or an attack)."""
    base = unicodedata.normalize("NFC", name or "").strip()
    if not base or base in (".", ".."):
        raise UploadError(400, "file: the file name is empty or not a file name")
    if "/" in base or "\\" in base:
        raise UploadError(
            400, f"file: the file name {base[:100]!r} contains a path; send the file's name only"
        )
    if _CONTROL.search(base):
        raise UploadError(400, "file: the file name contains control characters")
    if base.startswith("."):
        raise UploadError(400, f"file: {base[:100]!r} is a hidden file name; rename it")
    if len(base) > 200:
        raise UploadError(400, "file: the file name is longer than 200 characters")
    return base


def _check_declared(ext: str, declared: str | None) -> None:
    """A declared type that contradicts the extension: 415."""
    kind = (declared or "").split(";")[0].strip().lower()
    if kind in _GENERIC:
        return
    if not any(kind == a or (a.endswith("/") and kind.startswith(a)) for a in TYPES[ext][1]):
        raise UploadError(
            415,
            f"file: declared type {kind!r} does not match the extension {ext!r} (expected {TYPES[ext][0]})",
        )


@dataclass(frozen=True)
class UnpackLimits:
    """What one upload may unpack to; each is checked while the file is read, before anything is indexed."""

    unpacked_bytes: int = (
        25 * 1024 * 1024
    )  # a DOCX's entries, as the zip declares them (reads never exceed it)
    rows: int = 50_000  # CSV/TSV records, JSONL lines, JSON items: each becomes a document to embed
    pages: int = 2_000  # PDF pages


def _too_much(what: str, found: str, limit: int, setting: str) -> UploadError:
    """413 naming the limit and the server setting that raises it."""
    shown = f"{limit / 1024 / 1024:g} MB" if setting.endswith("_mb") else str(limit)
    reason = f"{what} {found}, over the limit of {shown}"
    return UploadError(
        413,
        f"file: {reason} (server setting {setting}; raise it with "
        f"'finderledge serve --{setting.replace('_', '-')}' to accept such files)",
        reason,
    )


def unpack_limit_problem(path: Path, limits: UnpackLimits) -> str | None:
    """What in a file of the host is over ``limits`` (the server's upload limits: a DOCX that unpacks to more,
    a PDF's pages, CSV/JSONL rows, JSON items), or ``None``; content the loader cannot read is left to it."""
    ext = path.suffix.lower()
    if ext not in (".pdf", ".docx", ".csv", ".jsonl", ".json"):
        return None
    try:
        _check_content(path, ext, limits)
    except UploadError as exc:
        return exc.reason if exc.status == 413 else None
    return None


def _count_records(path: Path, ext: str, limit: int) -> int:
    """CSV records, JSONL lines or JSON items of ``path``, counting no further than ``limit + 1``."""
    count = 0
    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        if ext == ".csv":
            for _ in csv.reader(fh):
                count += 1
                if count > limit:
                    break
        elif ext == ".jsonl":
            for line in fh:
                count += bool(line.strip())
                if count > limit:
                    break
        else:  # .json: the whole file is one value (bounded by the upload limit)
            try:
                value = json.load(fh)
            except ValueError:
                return 0  # the loader says what is wrong with it
            count = len(value) if isinstance(value, list) else 1
    return count


def _check_content(path: Path, ext: str, limits: UnpackLimits) -> None:
    """Content that is not what the extension says: 400; more than it may unpack to: 413."""
    with path.open("rb") as fh:
        head = fh.read(8192)
    if not head.strip():
        raise UploadError(400, "file: the file is empty")
    if ext == ".pdf":
        if b"%PDF-" not in head[:1024]:
            raise UploadError(400, "file: not a PDF (no %PDF- header)")
        pages = _pdf_pages(path)
        if pages is not None and pages > limits.pages:
            raise _too_much("the PDF has", f"{pages} pages", limits.pages, "max_pages")
    elif ext == ".docx":
        try:
            with zipfile.ZipFile(path) as zf:
                infos = zf.infolist()
                names = {i.filename for i in infos}
                unpacked = sum(i.file_size for i in infos)
        except (zipfile.BadZipFile, OSError, ValueError):
            raise UploadError(400, "file: not a DOCX (not a zip archive)") from None
        if "word/document.xml" not in names:
            raise UploadError(400, "file: not a DOCX (no word/document.xml)")
        if len(infos) > 10_000:
            reason = f"the DOCX has {len(infos)} entries, over the limit of 10000"
            raise UploadError(413, f"file: {reason}", reason)
        if unpacked > limits.unpacked_bytes:
            raise _too_much(
                "the DOCX unpacks to",
                f"{unpacked} bytes (a zip bomb?)",
                limits.unpacked_bytes,
                "max_unpacked_mb",
            )
    elif b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UploadError(400, f"file: binary content in a {ext} file (expected text)")
    elif ext in (".csv", ".jsonl", ".json"):
        rows = _count_records(path, ext, limits.rows)
        if rows > limits.rows:
            found = f"more than {limits.rows} rows" if ext != ".json" else f"{rows} items"
            raise _too_much("the file has", found, limits.rows, "max_rows")


def _pdf_pages(path: Path) -> int | None:
    """The page count a PDF declares (None when it cannot be read: the loader then says why)."""
    try:
        from pypdf import PdfReader

        return len(PdfReader(str(path)).pages)
    except Exception:  # noqa: BLE001 - any parse error is reported by the loader, with its message
        return None


class UploadArea:
    """``<index>/server/uploads/<document id>/<filename>``: where uploaded files are kept."""

    def __init__(
        self, root: Path, max_bytes: int, max_unpacked: int, limits: UnpackLimits | None = None
    ) -> None:
        self.root = root.absolute()
        self.max_bytes = max_bytes
        self.max_unpacked = max_unpacked
        self.limits = dataclasses.replace(limits or UnpackLimits(), unpacked_bytes=max_unpacked)

    def receive(self, stream: BinaryIO, filename: str | None, declared: str | None) -> StoredUpload:
        """Check and store one upload under a new document id; nothing is left behind when a check fails."""
        name = safe_filename(filename)
        ext = os.path.splitext(name)[1].lower()
        if ext not in TYPES:
            raise UploadError(
                400,
                f"file: unsupported type {ext or '(no extension)'!r} of {name!r}; "
                f"expected one of {', '.join(sorted(TYPES))}",
            )
        _check_declared(ext, declared)
        document_id = uuid.uuid4().hex
        folder = self.root / document_id
        target = (folder / name).resolve()
        if not target.is_relative_to(
            self.root.resolve()
        ):  # belt and braces: safe_filename already ensures it
            raise UploadError(400, "file: the filename points outside the upload area")
        folder.mkdir(parents=True)
        try:
            size = 0
            with target.open("xb") as out:
                while block := stream.read(CHUNK):
                    size += len(block)
                    if size > self.max_bytes:
                        raise UploadError(413, f"file: larger than the limit of {self.max_bytes} bytes")
                    out.write(block)
            _check_content(target, ext, self.limits)
        except BaseException:
            self.discard(document_id)
            raise
        return StoredUpload(document_id, target, name, TYPES[ext][0], size)

    def discard(self, document_id: str) -> None:
        """Remove what was stored for ``document_id`` (nothing outside the upload area, ever)."""
        folder = (self.root / document_id).absolute()
        if folder.parent == self.root and re.fullmatch(r"[0-9a-f]{32}", document_id) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
