"""The former path of :mod:`finderledge.embeddings.sentence_transformer`: the same names, re-exported."""

from .embeddings.sentence_transformer import *
from .embeddings.sentence_transformer import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
