"""The former path of :mod:`finderledge.embeddings.onnx`: the same names, re-exported."""

from .embeddings.onnx import *
from .embeddings.onnx import __all__ as __all__  # noqa: PLC0414 (the re-export form type checkers read)
