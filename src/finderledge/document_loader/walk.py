"""Walking a folder: which files a load reads, in sorted order, each real file once.

``include``/``exclude`` globs (``**`` supported) are matched against the path relative to the loaded folder;
a pattern without "/" also matches a bare file name at any depth (like .gitignore).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..errors import LoadError
from .paths import safe_path
from .results import SkippedFile

__all__ = ["PatternSet", "WalkOptions", "Walker"]

logger = logging.getLogger(__name__)


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob with ``**`` support into a regex matched against a POSIX relative path.

    ``**/`` matches zero or more directories, a trailing ``/**`` matches the directory itself and
    everything below it, ``*`` and ``?`` never cross "/", ``[...]`` classes are kept.
    """
    pat = pattern.replace("\\", "/").lstrip("/")
    pat = pat.removeprefix("./")
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif pat[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pat[i] == "?":
            out.append("[^/]")
            i += 1
        elif pat[i] == "[":
            end = pat.find("]", i + 2)
            if end == -1:
                out.append(re.escape(pat[i]))
                i += 1
            else:
                body = pat[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(pat[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


class PatternSet:
    """Glob patterns; one without "/" matches a name at any depth (like .gitignore)."""

    def __init__(self, patterns: Sequence[str] | None) -> None:
        if isinstance(patterns, str):
            patterns = [patterns]
        self.patterns = list(patterns or [])
        self._compiled = [(_glob_to_regex(p), "/" not in p.strip("/")) for p in self.patterns]

    def __bool__(self) -> bool:
        return bool(self._compiled)

    def matches(self, rel_path: str) -> bool:
        name = rel_path.rsplit("/", 1)[-1]
        for regex, name_only in self._compiled:
            if regex.match(rel_path) or (name_only and regex.match(name)):
                return True
        return False


class WalkOptions(Protocol):
    """What a walk needs to know (a :class:`~finderledge.document_loader.DocumentLoader` has it)."""

    @property
    def include(self) -> PatternSet: ...
    @property
    def exclude(self) -> PatternSet: ...
    @property
    def on_error(self) -> str: ...
    @property
    def include_hidden(self) -> bool: ...
    @property
    def follow_symlinks(self) -> bool: ...


class Walker:
    """One directory walk of a loader: files in sorted order, each real file once.

    Symlinks are followed only with ``follow_symlinks`` (each real directory once, so loops are harmless);
    otherwise they, and directories that cannot be listed, are recorded in ``skipped``."""

    def __init__(self, loader: WalkOptions, root: Path, skipped: list[SkippedFile]) -> None:
        self.loader, self.skipped = loader, skipped
        self.root, self.real_root = root, os.path.realpath(root)
        self.visited: set[str] = {self.real_root}  # real directories walked
        self.found: dict[str, tuple[bool, Path]] = {}  # real file -> (reached through a symlink, path)
        self.walked: list[tuple[str, Path]] = []  # (real file, path) in walk order

    def files(self) -> list[Path]:
        """The files to load; a file reached twice is kept under a path without symlinks when it has one."""
        self._walk(self.root, "", False)
        return [path for real, path in self.walked if self.found[real][1] is path]

    def _walk(self, directory: Path, rel: str, via_link: bool) -> None:
        loader = self.loader
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            self._skip(directory, f"cannot list directory: {exc.strerror or exc}", "error", exc)
            return
        for entry in entries:
            if entry.name.startswith(".") and not loader.include_hidden:
                continue
            rel_path = f"{rel}{entry.name}"
            try:
                link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=True)
                is_file = not is_dir and entry.is_file(follow_symlinks=True)
            except OSError as exc:
                self._skip(entry.path, f"cannot read its status: {exc.strerror or exc}", "error", exc)
                continue
            if (loader.exclude and loader.exclude.matches(rel_path)) or (
                not is_dir and loader.include and not loader.include.matches(rel_path)
            ):
                continue
            if link and not (loader.follow_symlinks and (is_dir or is_file)):
                self._skip(
                    entry.path, _symlink_reason(entry.path, self.real_root, is_dir or is_file), "symlink"
                )
                continue
            real = os.path.realpath(entry.path)
            if is_dir:
                if real in self.visited:
                    logger.debug("not following %s: %s already visited", entry.path, real)
                    continue
                self.visited.add(real)
                self._walk(Path(entry.path), rel_path + "/", via_link or link)
            elif is_file:
                indirect, path = via_link or link, Path(entry.path)
                self.walked.append((real, path))
                if real not in self.found or (self.found[real][0] and not indirect):
                    self.found[real] = (indirect, path)

    def _skip(
        self, path: str | os.PathLike[str], reason: str, kind: str, cause: OSError | None = None
    ) -> None:
        """Record a path the walk leaves out; an unreadable one raises ``LoadError`` under ``on_error="raise"``."""
        key = safe_path(path)
        if cause is not None and self.loader.on_error == "raise":
            raise LoadError(key, reason) from cause
        (logger.warning if cause is not None else logger.info)("skipping %s: %s", key, reason)
        self.skipped.append(SkippedFile(key, reason, kind))


def _symlink_reason(path: str, real_root: str, resolves: bool) -> str:
    """Why a symlink is not followed: it is broken, or points outside or within the folder."""
    if not resolves:
        return "broken symlink (its target does not exist)"
    target = os.path.realpath(path)
    try:
        inside = os.path.commonpath([target, real_root]) == real_root
    except ValueError:  # another drive (Windows)
        inside = False
    where = "within the folder" if inside else "outside the folder"
    return f"symlink to {safe_path(target)} ({where}) not followed; follow_symlinks=True follows it"
