"""Connections to PostgreSQL shared by the ledger and the pgvector store: names without secrets, advisory lock
keys, checked connections, the pgvector extension and schema, and pools (psycopg is an optional dependency:
``pip install "finderledge[postgres]"``, imported when a connection is made)."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = [
    "PostgresConnectionError",
    "advisory_key",
    "connect_checked",
    "libpq_url",
    "make_pool",
    "prepare_schema",
    "require_psycopg",
    "safe_name",
    "scrub",
]

POOL_MAX_SIZE = 8
_URL_SECRET = re.compile(r"(?i)(postgres(?:ql)?(?:\+[a-z0-9_]+)?://)[^/@\s]*@")
# SQLAlchemy's form names a Python driver after the scheme (postgresql+psycopg://, +psycopg2, +asyncpg …)
_DRIVER_SUFFIX = re.compile(r"(?i)^(postgres(?:ql)?)\+[a-z0-9_]+://")
_PASSWORD_KV = re.compile(r"(?i)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def require_psycopg(feature: str) -> None:
    """Refuse ``feature`` (e.g. ``database_url``) with one line naming the extra when psycopg or its pool is not
    installed, before anything is opened (rather than a ModuleNotFoundError from deep inside)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError(feature, exc.name or "psycopg", "postgres") from None


class PostgresConnectionError(ConfigurationError):
    """The database could not be reached or refused the connection; the message names it without secrets."""


def libpq_url(url: str) -> str:
    """``url`` as libpq reads it: SQLAlchemy's driver suffix dropped (``postgresql+psycopg://u@h/db`` ->
    ``postgresql://u@h/db``; the design of seed 002 writes ``DATABASE_URL`` so).  The server is the same
    whichever Python driver the URL names; FinderLedge connects with psycopg 3."""
    return _DRIVER_SUFFIX.sub(lambda m: f"{m.group(1)}://", url, count=1)


def _parse(url: str) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        return {k: str(v) for k, v in conninfo_to_dict(libpq_url(url)).items() if v is not None}
    except Exception:  # noqa: BLE001 - whatever it raises, its message may echo the string: never shown
        raise ConfigurationError(
            "database_url: not a PostgreSQL connection string "
            "(expected postgresql://user:password@host:port/dbname, or postgresql+psycopg://…)"
        ) from None


def safe_name(url: str, suffix: str) -> str:
    """``postgresql://host:port/dbname#suffix``: the database's identity without user or password."""
    params = _parse(url)
    host = params.get("host") or params.get("hostaddr") or "localhost"
    return f"postgresql://{host}:{params.get('port') or '5432'}/{params.get('dbname', '')}#{suffix}"


def scrub(message: str, url: str) -> str:
    """``message`` without the connection string, its password, or any ``user:password@`` part."""
    secrets = [url]
    try:
        password = _parse(url).get("password")
    except ConfigurationError:
        password = None
    if password:
        secrets.append(password)
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, "***")
    return _PASSWORD_KV.sub("password=***", _URL_SECRET.sub(r"\1***@", message))


def advisory_key(purpose: str, schema: str) -> int:
    """A signed 64-bit advisory lock key for ``purpose`` on ``schema``."""
    digest = hashlib.blake2b(f"finderledge:{purpose}:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _connect_kwargs(url: str, application_name: str) -> dict[str, Any]:
    params = _parse(url)
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = 10
    if "application_name" not in params:
        kwargs["application_name"] = application_name[:63]
    return kwargs


def connect_checked(url: str, name: str, application_name: str = "finderledge") -> psycopg.Connection[Any]:
    """An autocommit connection, or :class:`PostgresConnectionError` naming ``name`` (no secrets)."""
    import psycopg

    try:
        return psycopg.connect(libpq_url(url), **_connect_kwargs(url, application_name))
    except psycopg.Error as exc:
        reason = scrub(str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__, url)
        raise PostgresConnectionError(f"cannot connect to PostgreSQL at {name}: {reason}") from None


def prepare_schema(conn: psycopg.Connection[Any], schema: str, name: str) -> str:
    """Create the ``vector`` extension (if missing) and ``schema``; returns the extension's schema."""
    import psycopg
    from psycopg import sql

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("init", ""),))
        row = conn.execute(
            "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        if row is None:
            try:
                with conn.transaction():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise ConfigurationError(
                    f"{name}: the pgvector extension is not installed and could not be created "
                    f"({exc.diag.message_primary or type(exc).__name__}); ask an administrator to run "
                    "CREATE EXTENSION vector in this database"
                ) from None
            row = conn.execute(
                "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    assert row is not None
    return str(row[0]).strip('"')


def make_pool(url: str, ext_schema: str, name: str, max_size: int = POOL_MAX_SIZE) -> ConnectionPool[Any]:
    """A pool of autocommit connections whose ``search_path`` finds pgvector's type and operators."""
    import psycopg
    from psycopg_pool import ConnectionPool

    path = psycopg.sql.Identifier(ext_schema).as_string(None)

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT set_config('search_path', %s, false)", (path,))

    pool: ConnectionPool[Any] = ConnectionPool(
        libpq_url(url),
        min_size=1,
        max_size=max_size,
        open=False,
        configure=configure,
        kwargs=_connect_kwargs(url, "finderledge"),
        name=name,
        timeout=60.0,
    )
    try:
        pool.open(wait=True, timeout=30.0)
    except Exception as exc:  # noqa: BLE001 - PoolTimeout or a psycopg error: reported without secrets
        pool.close()
        raise PostgresConnectionError(
            f"cannot connect to PostgreSQL at {name}: {scrub(str(exc), url)}"
        ) from None
    return pool
