"""The old path of :mod:`finderledge.embeddings.sentence_transformer`: importing it gives that very module (monkeypatching and
``isinstance`` see one module and one set of classes)."""

from __future__ import annotations

import sys

from .embeddings import sentence_transformer as _new

# the names, for static readers; at run time this module is replaced by the new one
from .embeddings.sentence_transformer import *

sys.modules[__name__] = _new
