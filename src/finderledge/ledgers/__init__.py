"""Ledgers, the source of truth: SQLite in a persist directory, or PostgreSQL shared by many machines."""

from __future__ import annotations

from .base import (
    ADD,
    COMPLETE,
    DELETING,
    INDEX_FOLDERS,
    PENDING,
    REMOVE,
    REMOVED,
    Change,
    ChunkRecord,
    DocumentRecord,
    Ledger,
)
from .sqlite import SQLiteLedger

__all__ = ["ADD", "COMPLETE", "DELETING", "INDEX_FOLDERS", "PENDING", "REMOVE", "REMOVED", "Change", "ChunkRecord",
           "DocumentRecord", "Ledger", "SQLiteLedger"]
