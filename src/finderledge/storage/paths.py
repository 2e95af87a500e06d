"""Where FinderLedge keeps per-user files outside any index: model exports and replicas of shared indexes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["cache_root", "replica_directory"]


def cache_root() -> Path:
    """``$FINDERLEDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/finderledge``, else ``~/.cache/finderledge``."""
    explicit = os.environ.get("FINDERLEDGE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.environ.get("LOCALAPPDATA") or "~/.cache"
    return Path(base).expanduser() / "finderledge"


def replica_directory(ledger_name: str) -> Path:
    """This machine's default folder for the local indexes of a shared ledger (keyed by its secret-free name)."""
    return cache_root() / "replicas" / hashlib.sha256(ledger_name.encode("utf-8")).hexdigest()[:16]
