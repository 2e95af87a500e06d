"""The documented path of :mod:`finderledge.rag.answer`: the same names, re-exported."""

from .rag.answer import *
from .rag.answer import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
