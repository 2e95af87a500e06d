"""The documented path of :mod:`finderledge.ranking.reranker`: the same names, re-exported."""

from .ranking.reranker import *
from .ranking.reranker import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
