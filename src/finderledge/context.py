"""The documented path of :mod:`finderledge.rag.context`: the same names, re-exported."""

from .rag.context import *
from .rag.context import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
