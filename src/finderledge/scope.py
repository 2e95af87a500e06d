"""The documented path of :mod:`finderledge.rag.scope`: the same names, re-exported."""

from .rag.scope import *
from .rag.scope import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
