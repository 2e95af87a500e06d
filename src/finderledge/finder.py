"""The documented path of :mod:`finderledge.ranking.finder`: the same names, re-exported."""

from .ranking.finder import *
from .ranking.finder import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
