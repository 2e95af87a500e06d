"""A real PostgreSQL 16 with pgvector for tests: the ``pgserver`` wheel (no system install, no download).

``start_postgres(directory)`` starts (or reuses) a server whose data lives in ``directory`` and returns its
URL (a Unix socket, trust authentication); it stops when the test process exits (or :func:`stop_postgres`).  ``pg_url`` is the session
fixture (``from pg_server import pg_url``); give each test its own schema (:func:`fresh_schema`).
"""

from __future__ import annotations

import queue
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest

__all__ = ["SlowNetwork", "fresh_schema", "pg_url", "start_postgres", "stop_postgres"]

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


class SlowNetwork:
    """A proxy between a client and the server's Unix socket that delays every answer by ``delay`` seconds, as
    a network between machines would: a search that waits for ``n`` answers one after another takes ``n *
    delay`` longer, however its statements are grouped (a pipeline sends several and waits once).  Use
    :attr:`url` instead of the server's URL; ``close()`` at the end.  :attr:`delay` may be changed between two
    statements: a test can time the same work with and without the network in one run."""

    def __init__(self, url: str, delay: float) -> None:
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        host, port = query["host"][0], query.get("port", [str(parts.port or 5432)])[0]
        self._target = f"{host}/.s.PGSQL.{port}"
        self._dir = tempfile.mkdtemp(prefix="pg-proxy-")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(f"{self._dir}/.s.PGSQL.{port}")
        self._listener.listen(16)
        self.url = urlunsplit(parts._replace(query=urlencode({**query, "host": [self._dir]}, doseq=True)))
        self.delay = delay
        self._closed = False
        self._threads = [threading.Thread(target=self._accept, name="pg-proxy", daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self._target)
            for source, sink, delayed in ((client, server, False), (server, client, True)):
                pump = threading.Thread(target=self._pump, args=(source, sink, delayed), daemon=True)
                self._threads.append(pump)
                pump.start()

    def _pump(self, source: socket.socket, sink: socket.socket, delayed: bool) -> None:
        """Forward ``source`` to ``sink`` (in order); if ``delayed``, each chunk :attr:`delay` seconds (as it is
        when the chunk arrives) after it arrived."""
        chunks: queue.Queue[tuple[float, bytes] | None] = queue.Queue()

        def forward() -> None:
            while (item := chunks.get()) is not None:
                due, data = item
                time.sleep(max(0.0, due - time.monotonic()))
                try:
                    sink.sendall(data)
                except OSError:
                    return

        sender = threading.Thread(target=forward, daemon=True)
        sender.start()
        try:
            while data := source.recv(65536):
                chunks.put((time.monotonic() + (self.delay if delayed else 0.0), data))
        except OSError:
            pass
        finally:
            chunks.put(None)
            sender.join(5)
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()

    def close(self) -> None:
        """Stop accepting and join the proxy's threads (each pump ends when its connection closes: close the
        clients first)."""
        self._closed = True
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for thread in self._threads:
            thread.join(10)
        shutil.rmtree(self._dir, ignore_errors=True)
