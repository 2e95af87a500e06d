"""Directories opened with fake 16-d embeddings (no model, no ``.env``) and digests of the files they hold: the
unit tests of ``check``, repairs and stopped stores open and compare directories the same way."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge


def open_fake(root: Path, **settings: Any) -> FinderLedge:
    """A FinderLedge on ``root`` with deterministic 16-d fake embeddings, no progress bars and no ``.env``."""
    return FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None, **settings
    )


def file_digests(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path) with the SHA-256 of its bytes; SQLite's ``-wal``/``-shm`` files
    are left out (SQLite writes them even to read)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name in ("ledger.sqlite3-wal", "ledger.sqlite3-shm"):  # SQLite's own, even to read
                continue
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
