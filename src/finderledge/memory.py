"""Memory of bulk work (a write of many documents, a big catch-up): both the writer and the replica use it.

**The cyclic collector is paused.** Bulk work pauses Python's cyclic garbage collector, which otherwise rescans every long-lived object.

A write of many documents allocates millions of short-lived objects (Documents, metadata dicts, token
lists), and each allocation burst lets the collector run; its full passes walk every container the process
holds, so their cost grows with the index held in memory.  Measured on a 100,000-chunk build: 2.9 s of 12.5 s
(issue 29).  The write path makes no reference cycles, so reference counting frees everything the pause
leaves behind and memory does not grow (peak RSS 650 MiB paused, 654 MiB not).  Loading files is not paused:
parsers (pypdf, lxml) build object graphs with reference cycles, which the collector frees file by file; an
ingest pauses around what it does with the loaded documents (split, embed, commit, index).  The pause is
process-wide while it lasts (as ``gc.disable`` is); nested or concurrent pauses end with the last one, and a
collector the caller had turned off stays off.

**Freed heap is handed back.** Handing freed heap back to the system after a big batch of work (issue 27: bounded memory for one file).

A big catch-up reads, converts and drops many thousands of rows a batch while the indexes it fills keep growing
in between them, so the C library's heap ends up with large freed holes below live blocks that it keeps for
itself: at 50 MB of text, 100+ MB of a 400 MB peak was such free heap.  glibc's ``malloc_trim`` returns those
pages to the system; elsewhere (another C library, another OS) this does nothing.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["cyclic_gc_paused", "release_free_memory"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_depth = 0  # pauses in progress
_resume = False  # whether the last pause to end turns the collector back on


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the ``with`` block (reference counting still frees memory)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


def _malloc_trim() -> Callable[[int], Any] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """Return the heap's free pages to the system; True when the C library could (glibc)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
