"""The loader: walks a file or folder and hands each file to the reader registered for its extension.

A caller whose access policy restricts folders reads through :func:`opening_with`: while it is active every
file is opened by the policy's opener (no link followed, the opened file the one its check saw), not by name.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, BinaryIO, Literal

from langchain_core.documents import Document

from ..errors import AccessDeniedError, LoadError
from ..progress import bar_fits, logged
from .decode import BINARY_SNIFF_BYTES, looks_binary
from .formats import EXTENSIONLESS, FORMATS, FormatReader, ReadOptions, SourceFile
from .paths import absolute_path, safe_path
from .results import EmptyDocumentError, LoadResult, SkippedFile, UnsupportedFileError
from .walk import PatternSet, Walker

__all__ = ["DocumentLoader", "opening_with"]

logger = logging.getLogger(__name__)

#: how this thread's loads open a file (None: by name); set by :func:`opening_with`
_opener: ContextVar[Callable[[Path], BinaryIO] | None] = ContextVar("finderledge_opener", default=None)


@contextmanager
def opening_with(opener: Callable[[Path], BinaryIO]) -> Iterator[None]:
    """Within the block, every file this thread's loads read is opened by ``opener`` (e.g.
    :meth:`AccessPolicy.opener <finderledge.access.AccessPolicy.opener>`: the file its check saw, or an error)."""
    token = _opener.set(opener)
    try:
        yield
    finally:
        _opener.reset(token)


class DocumentLoader:
    """Turn files and directories into parent ``Document`` objects with uniform metadata.

    ``include``/``exclude`` are glob patterns (``**`` supported) matched against the path relative to
    the loaded directory; a pattern without "/" also matches a bare file name at any depth.  Hidden
    files and directories are skipped unless ``include_hidden`` is True.  ``on_error`` decides what a
    corrupt file of a supported type does inside a directory load: "raise" raises ``LoadError``, "skip"
    records it in ``LoadResult.skipped`` (so does a directory that cannot be listed).  Unsupported, binary
    and empty files are always recorded as skipped in directory loads.  Symlinks inside a directory are
    followed only with ``follow_symlinks=True`` (each real file and directory once); otherwise they are
    recorded as skipped.
    """

    def __init__(
        self,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: Literal["raise", "skip"] = "skip",
        json_text_field: str | None = None,
        encoding: str | None = None,
        show_progress: bool | None = None,
        include_hidden: bool = False,
        follow_symlinks: bool = False,
    ) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        if encoding is not None:
            codecs.lookup(encoding)  # fail early on an unknown codec name
        self.include = PatternSet(include)
        self.exclude = PatternSet(exclude)
        self.on_error = on_error
        self.json_text_field = json_text_field
        self.encoding = encoding
        self.show_progress = show_progress
        self.include_hidden = include_hidden
        self.follow_symlinks = follow_symlinks

    # ------------------------------------------------------------------ public API

    @staticmethod
    def is_supported(path: str | Path) -> bool:
        """True for a registered extension (see ``FORMATS``), or an extensionless file whose first 8 KiB hold no NUL byte."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix:
            return suffix in FORMATS
        try:
            with open(p, "rb") as fh:
                return not looks_binary(fh.read(BINARY_SNIFF_BYTES))
        except (OSError, ValueError):  # ValueError: a NUL byte or an unencodable character in the name
            return False

    def load(self, path: str | Path) -> LoadResult:
        """Load a file or a directory; a single file is accounted for exactly like one in a folder."""
        p = absolute_path(path)
        if p.is_dir():
            return self.load_directory(p)
        if not p.exists():
            raise LoadError(p, "no such file or directory")
        result = LoadResult()
        self._load_into(result, p)
        return result

    def load_directory(self, path: str | Path) -> LoadResult:
        """Recursively load a directory in sorted order, honouring include/exclude and ``on_error``."""
        root = absolute_path(path)
        if not root.is_dir():
            raise LoadError(root, "not a directory")
        result = LoadResult()
        files = Walker(self, root, result.skipped).files()
        for file_path in self._progress(files):
            self._load_into(result, file_path)
        logger.info(
            "loaded %d documents from %d of %d files under %s (%d skipped)",
            len(result.documents),
            result.files_loaded,
            result.files_seen,
            root,
            len(result.skipped),
        )
        return result

    def iter_load(self, path: str | Path, result: LoadResult) -> Iterator[tuple[str, list[Document]]]:
        """Load a file or a directory one file at a time, so a caller can process a large folder in bounded
        memory: yields ``(source, documents)`` per loaded file and accounts for every file in ``result``
        (``files_seen``, ``files_loaded``, ``skipped``; its ``files`` and ``documents`` stay empty)."""
        p = absolute_path(path)
        if p.is_dir():
            files = Walker(self, p, result.skipped).files()
        elif p.exists():
            files = [p]
        else:
            raise LoadError(p, "no such file or directory")
        walked = self._progress(files, "Indexing files") if p.is_dir() else files
        # no local of this frame holds a yielded file's documents: once the caller lets go of them, a big
        # file's text is freed even while this generator waits for the next request
        yield from filter(None, (self._load_one(result, file_path) for file_path in walked))

    def load_file(self, path: str | Path) -> list[Document]:
        """Load one file; raise ``UnsupportedFileError``, ``EmptyDocumentError`` or ``LoadError``."""
        p = absolute_path(path)
        if p.is_dir():
            raise LoadError(p, "is a directory (use load_directory)")
        opener = _opener.get()
        try:
            handle = open(p, "rb") if opener is None else opener(p)  # noqa: SIM115 - closed below
        except AccessDeniedError:  # the caller's opener refused it: the whole call is refused, not one file
            raise
        except FileNotFoundError:
            raise LoadError(p, "no such file") from None
        except OSError as exc:
            raise LoadError(p, f"cannot read file: {exc.strerror or exc}") from exc
        with handle:
            try:
                head = handle.read(BINARY_SNIFF_BYTES)
            except OSError as exc:
                raise LoadError(p, f"cannot read file: {exc.strerror or exc}") from exc
            return self._read(SourceFile(p, handle, head))

    def _read(self, file: SourceFile) -> list[Document]:
        """The documents of one open file, by the reader registered for its extension."""
        p, suffix = file.path, file.suffix
        if suffix and suffix not in FORMATS:
            raise UnsupportedFileError(p, f"unsupported file type '{suffix}'")
        if len(file.head) < BINARY_SNIFF_BYTES and (not file.head or file.head.isspace()):
            raise EmptyDocumentError(p, "empty file")  # (a longer file of white space: its reader says so)
        reader: FormatReader = FORMATS.get(suffix) if suffix else EXTENSIONLESS
        if not reader.binary and looks_binary(file.head):
            raise UnsupportedFileError(p, "binary file")
        options = ReadOptions(encoding=self.encoding, json_text_field=self.json_text_field)
        try:
            docs = reader.read(file, options)
        except LoadError:
            raise
        except Exception as exc:  # parser bugs and odd inputs: report them against the file
            raise LoadError(p, f"{type(exc).__name__}: {exc}") from exc
        if not docs:
            raise EmptyDocumentError(p, "no text content")
        return docs

    # ------------------------------------------------------------------ directory walking

    def _progress(self, files: list[Path], desc: str = "Loading files") -> Any:
        """``files``, wrapped in a progress bar (files/s and ETA) when ``show_progress`` asks for one."""
        show = self.show_progress
        if show is None:
            show = bar_fits()
        if not show:  # no bar: a log line every few seconds of a long walk
            return logged(files, desc.lower(), "file")
        from tqdm.auto import tqdm

        return tqdm(files, desc=desc, unit="file")

    def _load_into(self, result: LoadResult, path: Path) -> None:
        """Load one file into ``result``, applying the skip/raise policy."""
        loaded = self._load_one(result, path)
        if loaded is not None:
            result.files[loaded[0]] = loaded[1]
            result.documents.extend(loaded[1])

    def _load_one(self, result: LoadResult, path: Path) -> tuple[str, list[Document]] | None:
        """One file's ``(source, documents)``, or None for a skipped file (recorded in ``result``)."""
        key = safe_path(path)
        result.files_seen += 1
        try:
            docs = self.load_file(path)
        except UnsupportedFileError as exc:
            kind = "binary" if exc.reason == "binary file" else "unsupported"
            logger.info("skipping %s: %s", key, exc.reason)
            result.skipped.append(SkippedFile(key, exc.reason, kind))
            return None
        except EmptyDocumentError as exc:
            logger.info("skipping %s: %s", key, exc.reason)
            result.skipped.append(SkippedFile(key, exc.reason, "empty"))
            return None
        except LoadError as exc:
            if self.on_error == "raise":
                if key != str(path):
                    raise LoadError(key, exc.reason) from exc
                raise
            logger.warning("skipping %s: %s", key, exc.reason)
            result.skipped.append(SkippedFile(key, exc.reason, "error"))
            return None
        result.files_loaded += 1
        return key, docs

    # ------------------------------------------------------------------ per-format loaders
