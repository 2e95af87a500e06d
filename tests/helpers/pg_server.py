"""A real PostgreSQL 16 with pgvector for tests: the ``pgserver`` wheel (no system install, no download).

``start_postgres(directory)`` starts (or reuses) a server whose data lives in ``directory`` and returns its
URL (a Unix socket, trust authentication); it stops when the test process exits (or :func:`stop_postgres`).  ``pg_url`` is the session
fixture (``from pg_server import pg_url``); give each test its own schema (:func:`fresh_schema`).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["fresh_schema", "pg_url", "start_postgres", "stop_postgres"]

_servers: dict[str, Any] = {}


def start_postgres(directory: str | Path) -> str:
    """Start PostgreSQL (pgserver: PostgreSQL 16 + pgvector 0.6) with its data in ``directory``; its URL.

    As root, pgserver runs the server as the user ``pgserver``, so ``directory`` must stay reachable by it:
    keep it out of pytest's ``tmp_path`` (pytest resets its root to mode 0700 whenever a session starts)."""
    import pgserver
    import psycopg

    server = pgserver.get_server(Path(directory), cleanup_mode="stop")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    _servers[url] = server
    return url


def stop_postgres(url: str) -> None:
    """Stop the server :func:`start_postgres` started at ``url``."""
    server = _servers.pop(url, None)
    if server is not None:
        server.cleanup()


def fresh_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of one PostgreSQL server for the whole test session (stopped and deleted after it)."""
    directory = Path(tempfile.mkdtemp(prefix="finderledge-pg-"))
    url = start_postgres(directory / "pgdata")
    try:
        yield url
    finally:
        stop_postgres(url)
        shutil.rmtree(directory, ignore_errors=True)


class StatementCounter:
    """Counts the statements sent and the rows PostgreSQL hands back, through ``psycopg.Cursor.execute``
    (patched by :meth:`install`): how the join and seek tests show a cost that does not grow with the corpus."""

    def __init__(self) -> None:
        self.rows = 0
        self.statements = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import psycopg

        real = psycopg.Cursor.execute
        counter = self

        def execute(cursor: Any, *args: Any, **kwargs: Any) -> Any:
            result = real(cursor, *args, **kwargs)
            counter.statements += 1
            if cursor.description is not None:
                counter.rows += max(cursor.rowcount, 0)
            return result

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
