"""The documented path of :mod:`finderledge.rag.self_query`: the same names, re-exported."""

from .rag.self_query import *
from .rag.self_query import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
