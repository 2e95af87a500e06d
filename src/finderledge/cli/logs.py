"""Where the ``finderledge`` command sends log records and Python warnings: stderr, one line each, once.

The library itself only attaches a ``NullHandler``; this module is the command line's (the application's)
logging set-up.  Levels: ``finderledge.*`` loggers at WARNING (INFO with ``-v``, DEBUG with ``--debug``,
ERROR with ``-q``), except ``finderledge.progress`` (long work's progress lines) at INFO unless ``-q``;
every other logger at WARNING (ERROR with ``-q``), so third-party INFO (faiss's loader,
sentence-transformers, pypdf) never shows.  A log record never prints as ``error:``: that word is
kept for the line of a command that failed (``finderledge <command>: error: …``), so something the library
logged as an error and recovered from (a damaged index moved aside and rebuilt) is a ``warning:`` line of a
command that succeeds.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..progress import PROGRESS_LOGGER

__all__ = ["PROG", "stderr_logging"]

PROG = "finderledge"
LIBRARY_LOGGER = "finderledge"


def _one_line(text: str) -> str:
    """``text`` with its lines joined by single spaces."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


class _Formatter(logging.Formatter):
    """``finderledge: warning: message``; a third-party record names its package: ``pypdf: message``."""

    def __init__(self, with_tracebacks: bool) -> None:
        super().__init__()
        self.with_tracebacks = with_tracebacks

    def format(self, record: logging.LogRecord) -> str:
        """One line (plus the traceback a record carries, with ``--debug`` only)."""
        message = _one_line(record.getMessage())
        package = record.name.split(".", 1)[0]
        if package not in (LIBRARY_LOGGER, "py"):  # py.warnings: the message names its category
            message = f"{package}: {message}"
        level = (
            "warning" if record.levelno >= logging.ERROR else record.levelname.lower()
        )  # see the module doc
        line = f"{PROG}: {level}: {message}"
        if self.with_tracebacks and record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _StderrHandler(logging.Handler):
    """Writes to the ``sys.stderr`` of the moment (so a test's captured stderr gets the lines)."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write one formatted record and flush."""
        try:
            stream: TextIO = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


class _Once(logging.Filter):
    """Drops a record whose line was already printed in this run (pypdf repeats itself per object).  Progress
    lines always pass: two batches of equal size and speed log the same line, and each is news."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__()
        self.formatter = formatter
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        """True the first time a line is seen, and for every progress line."""
        if record.name == PROGRESS_LOGGER:
            return True
        line = self.formatter.format(record)
        if line in self.seen:
            return False
        self.seen.add(line)
        return True


def _printed_on_the_way(record: logging.LogRecord) -> bool:
    """Whether a logger between the record's and the root has its own console handler (it printed it)."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None and logger is not logging.root:
        for handler in logger.handlers:
            if (
                isinstance(handler, logging.StreamHandler)
                and not isinstance(handler, logging.FileHandler)
                and getattr(handler, "stream", None) in (sys.stderr, sys.__stderr__, sys.stdout)
            ):
                return True
        logger = logger.parent
    return False


def _listed_in_the_report(record: logging.LogRecord) -> bool:
    """A loader's "skipping <path>: <reason>": ``finderledge add`` prints each skip in its report."""
    return record.name.startswith(f"{LIBRARY_LOGGER}.document_loader") and str(record.msg).startswith(
        "skipping "
    )


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` replacement: one WARNING record, ``Category: message``."""
    logging.getLogger("py.warnings").warning("%s: %s", category.__name__, message)


def _levels(verbosity: int, debug: bool) -> tuple[int, int]:
    """(level of ``finderledge.*`` loggers, level of every other logger)."""
    if verbosity < 0:
        return logging.ERROR, logging.ERROR
    if debug:
        return logging.DEBUG, logging.WARNING
    return (logging.INFO if verbosity > 0 else logging.WARNING), logging.WARNING


@contextmanager
def stderr_logging(verbosity: int = 0, debug: bool = False) -> Iterator[None]:
    """Route log records and Python warnings to stderr for one command; undo it all on exit.

    ``verbosity``: -1 quiet (errors only), 0 warnings, 1 ``finderledge`` INFO too.  ``debug`` shows
    ``finderledge`` DEBUG records with their tracebacks.
    """
    root, library = logging.getLogger(), logging.getLogger(LIBRARY_LOGGER)
    progress = logging.getLogger(PROGRESS_LOGGER)
    saved: dict[str, Any] = {
        "root": root.level,
        "library": library.level,
        "progress": progress.level,
        "show": warnings.showwarning,
    }
    library_level, other_level = _levels(verbosity, debug)
    formatter = _Formatter(with_tracebacks=debug)
    handler = _StderrHandler()
    handler.setFormatter(formatter)
    handler.addFilter(lambda r: not _printed_on_the_way(r) and not _listed_in_the_report(r))
    handler.addFilter(_Once(formatter))
    root.addHandler(handler)
    root.setLevel(other_level)
    library.setLevel(library_level)
    # long work's progress lines (a line every few seconds when no bar is drawn) show unless -q
    progress.setLevel(min(library_level, logging.INFO) if verbosity >= 0 else logging.ERROR)
    warnings.showwarning = _show_warning
    try:
        yield
    finally:
        warnings.showwarning = saved["show"]
        library.setLevel(saved["library"])
        progress.setLevel(saved["progress"])
        root.setLevel(saved["root"])
        root.removeHandler(handler)
