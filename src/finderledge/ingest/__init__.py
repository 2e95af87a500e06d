"""The write path to the commit point: inputs become parents (``batches``), are split (``splitter``), embedded
and committed in one ledger transaction (``write``); a long text goes window by window (``big_file``).

The names of :mod:`finderledge.ingest.write.write` are re-exported here, loaded on first use (documented path).
"""

import importlib
from typing import Any

__all__ = [
    "STREAM_CHARS",
    "STREAM_DOCUMENTS",
    "Checkpointer",
    "IngestReport",
    "Writer",
    "check_document_id",
    "content_id",
    "version_hash",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'finderledge.ingest.write' has no attribute {name!r}")
    return getattr(importlib.import_module(".write", __name__), name)
