"""The former path of :mod:`finderledge.embeddings.names`: the same names, re-exported."""

from .embeddings.names import *
from .embeddings.names import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
