"""The old path of :mod:`finderledge.embeddings.onnx`: importing it gives that very module (monkeypatching and
``isinstance`` see one module and one set of classes)."""

from __future__ import annotations

import sys

from .embeddings import onnx as _new

# the names, for static readers; at run time this module is replaced by the new one
from .embeddings.onnx import *

sys.modules[__name__] = _new
