"""Ledgers, the source of truth: SQLite in a persist directory, or PostgreSQL shared by many machines."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .base import (
    ADD,
    COMPLETE,
    INDEX_FOLDERS,
    REMOVE,
    REMOVED,
    Change,
    ChunkRecord,
    DocumentRecord,
    Ledger,
    content_id,
)
from .sqlite import SQLiteLedger

if TYPE_CHECKING:
    from ..config import Settings

__all__ = [
    "ADD",
    "COMPLETE",
    "INDEX_FOLDERS",
    "REMOVE",
    "REMOVED",
    "Change",
    "ChunkRecord",
    "DocumentRecord",
    "Ledger",
    "SQLiteLedger",
    "content_id",
    "open_ledger",
]


def open_ledger(settings: Settings, path: Path | None) -> Ledger:
    """The ledger the settings name: PostgreSQL at ``database_url``, else SQLite at ``path`` (None: memory)."""
    if settings.database_url is not None:
        from ..storage.postgres import require_psycopg
        from .postgres import PostgresLedger

        require_psycopg("database_url")

        return PostgresLedger(settings.database_url, schema=settings.database_schema)
    return SQLiteLedger(path)
