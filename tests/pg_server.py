"""A real PostgreSQL 16 with pgvector for tests: the ``pgserver`` wheel (no system install, no download).

``start_postgres(directory)`` starts (or reuses) a server whose data lives in ``directory`` and returns its
URL (a Unix socket, trust authentication); it stops when the test process exits.  ``pg_url`` is the session
fixture (``from pg_server import pg_url``); give each test its own schema (:func:`fresh_schema`).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

__all__ = ["fresh_schema", "pg_url", "start_postgres"]


def start_postgres(directory: str | Path) -> str:
    """Start PostgreSQL (pgserver: PostgreSQL 16 + pgvector 0.6) with its data in ``directory``; its URL."""
    import pgserver

    server = pgserver.get_server(Path(directory), cleanup_mode="stop")
    url = server.get_uri()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def fresh_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of one PostgreSQL server for the whole test session."""
    return start_postgres(tmp_path_factory.mktemp("postgres") / "pgdata")
