"""Handing freed heap back to the system after a big batch of work (issue 27: bounded memory for one file).

A big catch-up reads, converts and drops many thousands of rows a batch while the indexes it fills keep growing
in between them, so the C library's heap ends up with large freed holes below live blocks that it keeps for
itself: at 50 MB of text, 100+ MB of a 400 MB peak was such free heap.  glibc's ``malloc_trim`` returns those
pages to the system; elsewhere (another C library, another OS) this does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["release_free_memory"]

logger = logging.getLogger(__name__)


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
