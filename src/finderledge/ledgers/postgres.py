"""The PostgreSQL ledger: the source of truth in a database that processes on many machines share.

Tables live in one PostgreSQL schema (``finderledge`` by default, created if missing, with the ``vector``
extension): ``info``, ``documents``, ``chunks``, ``changes`` (the change log; ``seq`` a ``bigserial``),
``embedding_cache`` and ``vectors`` (pgvector: ``id``, ``embedding``, ``metadata`` jsonb = the chunk's user
metadata).  Semantics are :class:`~finderledge.ledgers.sqlite.SQLiteLedger`'s, with these differences:

* **Vectors are stored once**, in ``vectors``: ``commit_write`` writes each chunk's embedding there and deletes
  the vectors of removed documents *in the same transaction* (their chunk rows stay
  :data:`~finderledge.ledgers.base.REMOVED_GRACE_SECONDS`, as in SQLite); ``get_chunks(with_embedding=True)``
  reads them back through a join.  :meth:`PostgresLedger.vector_store` searches that table.
* **Sequence numbers commit in order.**  ``commit_write`` takes ``pg_advisory_xact_lock`` (the *commit key*)
  before it draws a ``seq``, so a transaction that drew a higher ``seq`` never commits before a lower one, and
  ``last_seq()`` (``max(seq)``, transactional — never the sequence object, which is not) never reports a
  change a reader cannot see yet.
* **Writers across machines** serialise on :meth:`PostgresLedger.write_lock`: a session-level advisory lock
  (the *write key*, another key) on a dedicated connection; the server drops it with the connection when its
  process dies.  Keys are 64-bit hashes of ``finderledge:<purpose>:<schema>``: two schemas never contend.
* **Reads** come from a connection pool (any thread); :meth:`PostgresLedger.snapshot` pins one connection to
  the thread in a ``REPEATABLE READ`` transaction.
* **A chunk's text is stored once** (schema version 5, :data:`POSTGRES_SCHEMA_VERSION`; SQLite's version 5
  rule, extended): a chunk whose text is its document's whole text stores none (``content`` NULL, no span);
  a chunk whose text is an exact slice of its document's stores the span (``text_start``, ``text_length``, in
  code points, :func:`~finderledge.ledgers.rows.text_spans`); any other chunk (re-serialised JSON, a text
  with NUL) stores its text as before.  Reads rebuild the text in SQL from the document row
  (:attr:`PostgresDialect.chunk_read`).  A version 4 schema (every chunk's text stored) is migrated at open,
  under the init lock, in one transaction (catalog changes only: its rows are read as they are).
* PostgreSQL text cannot hold NUL: a text with NUL is stored JSON-encoded and flagged (``content_json``);
  metadata is kept as JSON text (exact, as SQLite keeps it); a source or id with NUL is refused.
* **No secrets** in messages: the ledger is named ``postgresql://host:port/dbname#schema``; connection errors
  become :class:`PostgresConnectionError` with that name, never the URL or the password.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigurationError, IncompatibleIndexError, LockTimeoutError
from ..metadata import DOCUMENT_ID, user_metadata
from ..storage.postgres import (
    PostgresConnectionError,
    advisory_key,
    connect_checked,
    make_pool,
    prepare_schema,
    safe_name,
)
from ..vector_stores.pgvector import (
    PgVectorStore,
    build_index_when_large,
    column_dimension,
    ensure_dimension,
    table_ddl,
    upsert_rows,
)
from .base import (
    COMPLETE,
    SCHEMA_VERSION,
    ChunkRecord,
    DocumentRecord,
    check_schema_version,
    iter_batches,
)
from .bulk import (
    COPY_MIN_ROWS,
    BulkLoad,
    CopyWriter,
    copy_vectors,
    owned_elsewhere,
    postings_left,
    recover,
    text_any,
)
from .postings import Postings
from .rows import RowDamage, dumps_metadata, text_spans
from .sql import SQLDialect, SQLLedger

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "POSTGRES_SCHEMA_VERSION",
    "PgWriteLock",
    "PostgresConnectionError",
    "PostgresDialect",
    "PostgresLedger",
    "advisory_key",
    "safe_name",
]

logger = logging.getLogger(__name__)

VECTORS_TABLE = "vectors"
#: The layout this ledger writes: version 5 stores a chunk's text once (see the module docstring); version 6
#: keeps each term's document frequency with the engine-side postings (``kw_terms``,
#: :mod:`~finderledge.ledgers.postings`), so a writer of version 5, which would leave it behind, refuses the
#: database; version 7: a bulk load holds its ``kw_terms`` additions back until its end and a removal adds
#: negative counts (a term may have no row yet), so version 6 code, which would read the held-back counts as
#: exact and lose a removal's subtraction, refuses it.  Versions 4
#: (:data:`~finderledge.ledgers.base.SCHEMA_VERSION`), 5 and 6 are migrated at open.
POSTGRES_SCHEMA_VERSION = 7
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _ledger_ddl(schema: str) -> list[Any]:
    from psycopg import sql

    s = sql.Identifier(schema)
    statements = [
        "CREATE TABLE IF NOT EXISTS {s}.info (key text PRIMARY KEY, value text NOT NULL)",
        (
            "CREATE TABLE IF NOT EXISTS {s}.documents (seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, source text,"
            " content_hash text NOT NULL, state text NOT NULL, content text NOT NULL,"
            " content_json boolean NOT NULL DEFAULT false, metadata text NOT NULL, document_id text,"
            " added_at double precision NOT NULL, added_seq bigint, removed_seq bigint, removed_at double precision)"
        ),
        "CREATE INDEX IF NOT EXISTS documents_source_state ON {s}.documents (source, state, seq)",
        "CREATE INDEX IF NOT EXISTS documents_state ON {s}.documents (state, seq)",
        "CREATE INDEX IF NOT EXISTS documents_document_id ON {s}.documents (document_id, seq)",
        (
            "CREATE TABLE IF NOT EXISTS {s}.chunks (id text PRIMARY KEY, parent_id text NOT NULL,"
            " split_index integer NOT NULL, content text, content_json boolean NOT NULL DEFAULT false,"
            " metadata text NOT NULL, text_hash text, text_start integer, text_length integer)"
        ),
        "CREATE INDEX IF NOT EXISTS chunks_parent ON {s}.chunks (parent_id, split_index)",
        _TEXT_HASH_INDEX,
        (
            "CREATE TABLE IF NOT EXISTS {s}.changes (seq bigserial PRIMARY KEY, op text NOT NULL, doc_id text NOT NULL,"
            " chunk_count integer NOT NULL)"
        ),
        (
            "CREATE TABLE IF NOT EXISTS {s}.embedding_cache (model text NOT NULL, text_hash text NOT NULL,"
            " vector bytea NOT NULL, PRIMARY KEY (model, text_hash))"
        ),
    ]
    return [sql.SQL(q).format(s=s) for q in statements] + table_ddl(schema, VECTORS_TABLE)


_TEXT_HASH_INDEX = "CREATE INDEX IF NOT EXISTS chunks_text_hash ON {s}.chunks (text_hash)"
# version 4 -> 5: catalog changes only (no row is rewritten: a version 4 row reads as its own text)
_MIGRATE_TO_5 = (
    "ALTER TABLE {s}chunks ALTER COLUMN content DROP NOT NULL,"
    " ADD COLUMN IF NOT EXISTS text_start integer, ADD COLUMN IF NOT EXISTS text_length integer"
)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _dumps(md: dict[str, Any]) -> str:
    """Metadata as the ledger stores it (:func:`~finderledge.ledgers.rows.dumps_metadata`, its encoder made once,
    not per row), lone surrogates escaped: PostgreSQL text cannot hold them."""
    text = dumps_metadata(md)
    if _SURROGATE.search(text):
        text = json.dumps(md, ensure_ascii=True, sort_keys=True, default=str)
    return text


def _text_in(text: str) -> tuple[str, bool]:
    """``(stored, is_json)``: PostgreSQL text cannot hold NUL (nor lone surrogates): such a text is stored as JSON."""
    if _UNSTORABLE.search(text):
        return json.dumps(text, ensure_ascii=True), True
    return text, False


def _text_out(stored: str, is_json: bool) -> str:
    return str(json.loads(stored)) if is_json else stored


def _vector_out(sent: bytes) -> np.ndarray:
    """A ``vector_send`` value as float32: pgvector's binary form (int16 dimension, int16 unused, big-endian
    float4s).  Exactly the floats ``embedding::real[]`` gives, without formatting and parsing them as text
    (512 vectors: 0.1-0.2 s as text, a few ms sent; a fresh process reads 512 on its first search)."""
    dim = int.from_bytes(sent[:2], "big") if len(sent) >= 4 else -1
    if len(sent) != 4 + 4 * dim:
        raise RowDamage(f"its vector is {len(sent)} bytes, not pgvector's binary form")
    return np.frombuffer(sent, dtype=">f4", offset=4).astype(np.float32)


def _checked(value: str | None, what: str) -> str | None:
    if value is not None and _UNSTORABLE.search(value):
        raise ConfigurationError(
            f"{what} {value!r:.80}: PostgreSQL cannot store NUL characters or lone surrogates"
        )
    return value


def _document_id(md: dict[str, Any]) -> str | None:
    value = md.get(DOCUMENT_ID)
    return value if isinstance(value, str) and not _UNSTORABLE.search(value) else None


# -- the write lock ----------------------------------------------------------------------------------------
class PgWriteLock:
    """Exclusive, re-entrant write lock of one ledger across processes and machines, with the interface of
    :class:`finderledge.storage.locking.WriteLock`: a session-level ``pg_advisory_lock`` on a dedicated connection,
    taken by polling ``pg_try_advisory_lock`` until the timeout.  The holder is named by its connection's
    ``application_name`` (``finderledge pid N on host: what``), which dies with it."""

    def __init__(self, url: str, name: str, key: int, timeout: float) -> None:
        self._url, self.name, self.key, self.timeout = url, name, key, float(timeout)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._conn: psycopg.Connection[Any] | None = None

    @contextmanager
    def hold(self, what: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock for the block; raise :class:`LockTimeoutError` naming the holder after ``timeout`` s."""
        wait = self.timeout if timeout is None else float(timeout)
        if not self._thread_lock.acquire(timeout=wait if wait >= 0 else -1):
            raise LockTimeoutError(
                f"{self.name}: another thread of this process holds the write lock for more than {wait:g} s"
            )
        try:
            if self._depth == 0:
                self._acquire(what, wait)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._release()
        finally:
            self._thread_lock.release()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._depth > 0

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect_checked(self._url, self.name, "finderledge write lock")
        return self._conn

    def _acquire(self, what: str, wait: float) -> None:
        conn = self._connection()
        label = f"finderledge pid {os.getpid()} on {socket.gethostname()}: {what}"
        conn.execute(
            "SELECT set_config('application_name', %s, false)", (label.encode()[:63].decode(errors="ignore"),)
        )
        deadline = time.monotonic() + wait
        pause = 0.02
        while True:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            if row and row[0]:
                return
            remaining = deadline - time.monotonic()
            if wait >= 0 and remaining <= 0:
                raise LockTimeoutError(
                    f"{self.name}: the write lock is held by {self.holder() or 'another session'} "
                    f"(waited {wait:g} s; raise lock_timeout to wait longer)"
                )
            time.sleep(pause if wait < 0 else min(pause, max(remaining, 0.0)))
            pause = min(pause * 2, 0.2)

    def _release(self) -> None:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:  # the session (and its lock) is gone already
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            conn.execute("SELECT set_config('application_name', 'finderledge write lock', false)")
        except Exception as exc:  # noqa: BLE001 - a lost connection releases the lock on the server
            logger.warning(
                "%s: releasing the write lock failed (%s); closing its connection",
                self.name,
                type(exc).__name__,
            )
            conn.close()

    def holder(self) -> str | None:
        """Who holds the lock now: its ``application_name``, server pid and since when (None if nobody)."""
        conn = self._connection()
        row = conn.execute(
            "SELECT a.application_name, a.pid, a.state_change FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND l.classid::bigint = %s AND l.objid::bigint = %s AND l.pid <> pg_backend_pid()",
            ((self.key >> 32) & 0xFFFFFFFF, self.key & 0xFFFFFFFF),
        ).fetchone()
        if row is None:
            return None
        app = row[0] or "a session"
        since = f" since {row[2]:%H:%M:%S}" if row[2] is not None else ""
        return f"{app} (server pid {row[1]}){since}"

    def close(self) -> None:
        """Close the lock's connection (which releases the lock if it is held)."""
        with self._thread_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# -- the dialect -------------------------------------------------------------------------------------------
class PostgresDialect(SQLDialect):
    """PostgreSQL under :class:`~finderledge.ledgers.sql.SQLLedger` (see the module docstring): tables in
    ``schema``, reads from a connection pool (any thread; :meth:`snapshot` pins one connection to the thread),
    writes on one writer connection under the process's mutex, the commit key ordering sequence numbers,
    vectors in pgvector's table, texts with NUL stored as JSON.

    ``dimension_hint``: the embedding dimension, recorded now if none is (else checked)."""

    batch = 5000
    vectors_table = VECTORS_TABLE  # where a bulk load defers the HNSW index (ledgers.bulk)
    last_seq_sql = "SELECT COALESCE(max(seq), 0) FROM {s}changes"
    document_id = "document_id"
    source_order = 'source COLLATE "C"'
    document_columns = (
        "id",
        "source",
        "content_hash",
        "state",
        "content",
        "content_json",
        "metadata",
        "document_id",
    )
    chunk_columns = (
        "id",
        "parent_id",
        "split_index",
        "content",
        "content_json",
        "metadata",
        "text_hash",
        "text_start",
        "text_length",
    )
    document_read = "id, source, content_hash, state, content, content_json, metadata"
    # a chunk's text: its own, else its document's whole text or a span of it (NULL: no document row)
    chunk_read = (
        "c.id, c.parent_id, c.split_index, CASE WHEN c.content IS NOT NULL THEN c.content"
        " WHEN c.text_start IS NULL THEN d.content ELSE substr(d.content, c.text_start + 1, c.text_length) END,"
        " c.content_json, c.metadata"
    )
    document_join = " LEFT JOIN {s}documents d ON d.id = c.parent_id"
    embedding_read = ", vector_send(v.embedding)"  # binary, see _vector_out
    embedding_join = f" LEFT JOIN {{s}}{VECTORS_TABLE} v ON v.id = c.id"
    # for each point, the first complete document at or after it by seq (documents_state), then its first
    # chunk (chunks_parent): every seek in one statement, one round trip
    seek_sql = (
        "SELECT s.id FROM unnest(?::bigint[]) WITH ORDINALITY AS p(seq, n) CROSS JOIN LATERAL"
        " (SELECT c.id FROM {s}documents d JOIN {s}chunks c ON c.parent_id = d.id"
        " WHERE d.seq >= p.seq AND d.state = ? ORDER BY d.seq, c.split_index LIMIT 1) s ORDER BY p.n"
    )

    def __init__(self, url: str, schema: str, dimension_hint: int | None = None) -> None:
        if (
            not isinstance(schema, str)
            or not schema
            or _UNSTORABLE.search(schema)
            or len(schema.encode()) > 63
        ):
            raise ConfigurationError(f"setting 'schema': expected a PostgreSQL schema name, got {schema!r}")
        self._url = url
        self.schema = schema
        self.name = safe_name(url, schema)
        self._prefix = '"' + schema.replace('"', '""') + '".'  # as psycopg.sql.Identifier quotes it
        self._texts: dict[str, str] = {}
        self._local = threading.local()
        #: the vector dimension recorded in the database (None until the first vector or hint)
        self.dimension: int | None = None
        self._commit_key = advisory_key("commit", schema)
        self._write_key = advisory_key("write", schema)
        self._lock = threading.RLock()
        self._locks: list[PgWriteLock] = []
        self._stores: list[PgVectorStore] = []
        self._closed = False
        with connect_checked(url, self.name) as conn:
            self._ext_schema = prepare_schema(conn, schema, self.name)
            self._create(conn)
            # spans count code points: substr does only where the database stores text as UTF-8
            row = conn.execute("SELECT current_setting('server_encoding')").fetchone()
            self._spans = row is not None and str(row[0]).upper() in ("UTF8", "UTF-8")
            if dimension_hint is not None:
                self.ensure_dimension(conn, int(dimension_hint))
            else:
                self.dimension = column_dimension(conn, schema, VECTORS_TABLE)
        self._pool = make_pool(url, self._ext_schema, self.name)
        self._writer: psycopg.Connection[Any] | None = None
        self._copy = CopyWriter()  # many rows go in by COPY (ledgers.bulk)
        self._bulk: BulkLoad | None = None  # the write call bulk loading now, if any
        self.postings = Postings(self)  # the engine-side keyword index, once the ledger records it

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        """Create the tables (once, under the init lock); refuse a schema holding other tables of our names."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("init", self.schema),))
            tables = {
                r[0]
                for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.schema,))
            }
            ours = {"documents", "chunks", "changes"} & tables
            if ours:
                version = None
                if "info" in tables:
                    row = conn.execute(
                        self.sql("SELECT value FROM {s}info WHERE key = 'schema_version'")
                    ).fetchone()
                    version = None if row is None else row[0]
                if version is None:
                    raise IncompatibleIndexError(
                        f"ledger {self.name}: the schema holds tables ({', '.join(sorted(ours))}) that are not a "
                        "FinderLedge ledger's; choose another schema"
                    )
                # an older layout is migrated; any other version is checked, and refused, by the ledger
                if version in (str(SCHEMA_VERSION), "5", "6"):
                    if version == str(SCHEMA_VERSION):
                        conn.execute(self.sql(_MIGRATE_TO_5))
                    # 5 -> 6: nothing to change here; kw_terms is counted where postings are kept
                    # (postings.ensure_terms, at the next engine open or write); 6 -> 7: no row changes
                    conn.execute(
                        self.sql("UPDATE {s}info SET value = ? WHERE key = 'schema_version'"),
                        (str(POSTGRES_SCHEMA_VERSION),),
                    )
                    logger.info(
                        "ledger %s: schema version %s migrated to %s (chunk texts stored once, term frequencies kept)",
                        self.name,
                        version,
                        POSTGRES_SCHEMA_VERSION,
                    )
                return
            for statement in _ledger_ddl(self.schema):
                conn.execute(statement)
            conn.execute(
                self.sql(
                    "INSERT INTO {s}info (key, value) VALUES ('schema_version', ?), ('index_uuid', ?)"
                    " ON CONFLICT (key) DO NOTHING"
                ),
                (str(POSTGRES_SCHEMA_VERSION), uuid.uuid4().hex),
            )
            logger.info("ledger %s: created", self.name)

    def ensure_dimension(self, conn: psycopg.Connection[Any], dimension: int) -> None:
        """Inside a transaction (or autocommit): record ``dimension`` or check it against the recorded one."""
        if self.dimension == dimension:
            return
        if self.dimension is not None:
            raise IncompatibleIndexError(
                f"ledger {self.name}: its vectors have dimension {self.dimension}; "
                f"this embedding model produces {dimension}"
            )
        if conn.info.transaction_status == 0:  # idle in autocommit: make it one transaction
            with conn.transaction():
                ensure_dimension(conn, self.schema, VECTORS_TABLE, dimension, f"ledger {self.name}")
        else:
            ensure_dimension(conn, self.schema, VECTORS_TABLE, dimension, f"ledger {self.name}")
        self.dimension = dimension

    # -- SQL text ------------------------------------------------------------------------------------
    def sql(self, query: str) -> str:
        text = self._texts.get(query)
        if text is None:
            text = query.replace("%", "%%").replace("?", "%s").replace("{s}", self._prefix)
            self._texts[query] = text
        return text

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """Many strings as one text the server splits (:func:`~.bulk.text_any`)."""
        any_sql, arg = text_any(values)
        return f"{column} = {any_sql}", [arg]

    def insert(self, table: str, columns: Sequence[str], conflict: str | None = None, key: str = "") -> str:
        query = f"INSERT INTO {{s}}{table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        if conflict == "replace":
            updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c != key)
            query += f" ON CONFLICT ({key}) DO UPDATE SET {updates}"
        elif conflict == "ignore":
            query += " ON CONFLICT DO NOTHING"
        return self.sql(query)

    def bulk_rows(
        self, tx: psycopg.Cursor[Any], table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> bool:
        """Many rows go in by one COPY (:mod:`.bulk`); a few, or a table COPY does not encode: False."""
        return len(rows) >= COPY_MIN_ROWS and self._copy.copy_rows(tx, self.schema, table, columns, rows)

    def start_bulk(self, load: BulkLoad) -> bool:
        """Make ``load`` this process's bulk load (False: another call's is under way)."""
        with self._lock:
            if self._bulk is not None:
                return False
            self._bulk = load
            return True

    def end_bulk(self, load: BulkLoad) -> None:
        with self._lock:
            if self._bulk is load:
                self._bulk = None

    # -- connections ---------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's snapshot connection, or one from the pool (autocommit: each query sees the latest)."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One REPEATABLE READ transaction on a connection pinned to this thread."""
        if getattr(self._local, "conn", None) is not None:  # nested: the outer snapshot holds
            yield
            return
        with self._pool.connection() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None
                if not conn.broken:
                    conn.execute("COMMIT")

    def statement(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._writer_connection()

    @contextmanager
    def _writer_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The writer connection under the process's write mutex (reconnected if it was lost)."""
        with self._lock:
            if self._closed:
                raise ConfigurationError(f"ledger {self.name}: closed")
            if self._writer is None or self._writer.closed or self._writer.broken:
                self._writer = connect_checked(self._url, self.name, "finderledge writer")
                self._writer.execute(
                    "SELECT set_config('search_path', %s, false)", (json.dumps(self._ext_schema),)
                )
            yield self._writer

    @contextmanager
    def writing(self) -> Iterator[psycopg.Cursor[Any]]:
        with self._writer_connection() as conn, conn.transaction(), conn.cursor() as cur:
            try:
                yield cur
            finally:
                self.postings.settle(cur)  # a postings encoding the transaction started: joined

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for lock in self._locks:
                lock.close()
            for store in self._stores:
                store.close()
            if self._writer is not None:
                self._writer.close()
            self._pool.close()

    # -- values and rows -----------------------------------------------------------------------------
    def storable(self, text: str) -> bool:
        return not _UNSTORABLE.search(text)

    def checked(self, value: str, what: str) -> str:
        return str(_checked(value, what))

    def document_row(self, doc: DocumentRecord) -> tuple[Any, ...]:
        content, is_json = _text_in(doc.content)
        return (
            _checked(doc.id, "document id"),
            _checked(doc.source, "source"),
            doc.content_hash,
            COMPLETE,
            content,
            is_json,
            _dumps(doc.metadata),
            _document_id(doc.metadata),
        )

    def chunk_row(self, chunk: ChunkRecord, parent: DocumentRecord | None, text_hash: str) -> tuple[Any, ...]:
        """Without a span (a chunk that is its document's whole text stores none: see :meth:`chunk_rows`)."""
        return self._chunk_row(chunk, parent, text_hash, None)

    def chunk_rows(
        self, chunks: Sequence[ChunkRecord], parents: dict[str, DocumentRecord], hashes: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        """Each chunk's text stored once: none when it is its document's whole text, its span when it is a
        slice of it (the spans of one document's chunks found in split order), else the text."""
        spans: list[tuple[int, int] | None] = [None] * len(chunks)
        if self._spans:
            of: dict[str, list[int]] = {}
            for i, c in enumerate(chunks):
                parent = parents.get(c.parent_id)
                if (
                    parent is not None
                    and c.content != parent.content
                    and not _UNSTORABLE.search(parent.content)
                ):
                    of.setdefault(c.parent_id, []).append(i)
            for parent_id, at in of.items():
                at.sort(key=lambda i: chunks[i].split_index)
                found = text_spans(parents[parent_id].content, [chunks[i].content for i in at])
                for i, span in zip(at, found):
                    spans[i] = span
        return [
            self._chunk_row(c, parents.get(c.parent_id), h, span) for c, h, span in zip(chunks, hashes, spans)
        ]

    def _chunk_row(
        self, chunk: ChunkRecord, parent: DocumentRecord | None, text_hash: str, span: tuple[int, int] | None
    ) -> tuple[Any, ...]:
        head = (_checked(chunk.id, "chunk id"), chunk.parent_id, chunk.split_index)
        md = _dumps(chunk.metadata)
        if parent is not None and chunk.content == parent.content and not _UNSTORABLE.search(parent.content):
            return (*head, None, False, md, text_hash, None, None)  # its document's whole text
        if span is not None:
            return (*head, None, False, md, text_hash, span[0], span[1])
        content, is_json = _text_in(chunk.content)
        return (*head, content, is_json, md, text_hash, None, None)

    def document_fields(self, row: Sequence[Any]) -> tuple[str, str | None, str, str, str, Any]:
        return row[0], row[1], row[2], row[3], _text_out(row[4], row[5]), row[6]

    def document_metadata(self, doc_id: str, stored: Any) -> dict[str, Any]:
        md: dict[str, Any] = json.loads(stored)
        return md

    def chunk(
        self, row: Sequence[Any], with_embedding: bool, info: Callable[[str], str | None]
    ) -> ChunkRecord:
        if row[3] is None:  # stored as its document's text, and the document row is gone (damage)
            raise RowDamage(f"its text is its document's, and document {row[1]} is not in the ledger")
        emb = None
        if with_embedding and row[6] is not None:
            emb = _vector_out(row[6])
        return ChunkRecord(row[0], row[1], int(row[2]), _text_out(row[3], row[4]), json.loads(row[5]), emb)

    # -- statements PostgreSQL answers its own way ---------------------------------------------------
    def begin_commit(
        self, tx: psycopg.Cursor[Any], add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]]
    ) -> None:
        """Take the commit key before a ``seq`` is drawn (a higher ``seq`` never commits before a lower one);
        record or check the vectors' dimension."""
        chunks = [c for _, cs in add for c in cs]
        vectors = [c.embedding for c in chunks if c.embedding is not None]
        dims = {len(v) for v in vectors}
        if len(dims) > 1:
            raise IncompatibleIndexError(
                f"ledger {self.name}: one write holds vectors of dimensions {sorted(dims)}"
            )
        tx.execute("SELECT pg_advisory_xact_lock(%s)", (self._commit_key,))
        if dims:
            self.ensure_dimension(tx.connection, dims.pop())
        if self._bulk is not None:  # a large load defers the HNSW index (ledgers.bulk)
            self._bulk.begin(tx, len(chunks), len(vectors))
        self.postings.begin(tx, add)  # a large commit's postings: encoded while its other rows are stored

    def end_commit(
        self, tx: psycopg.Cursor[Any], add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]]
    ) -> None:
        self.postings.add(tx, add, None if self._bulk is None else self._bulk.held_terms(tx))
        if self._bulk is None or not self._bulk.postings_deferred:
            postings_left(self, tx)  # a bulk load that died left the keyword B-trees to build
        if (self._bulk is not None and self._bulk.deferred) or owned_elsewhere(self, tx, VECTORS_TABLE):
            return  # built once after the bulk load
        if self.dimension is not None and any(c.embedding is not None for _, cs in add for c in cs):
            build_index_when_large(
                tx.connection, self.schema, VECTORS_TABLE, self.dimension, f"ledger {self.name}"
            )

    def next_seqs(self, tx: psycopg.Cursor[Any], count: int) -> list[int]:
        """Drawn in one query (under the commit key), in ascending order."""
        tx.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'seq')) FROM generate_series(1, %s)",
            (self._prefix + "changes", count),
        )
        return sorted(int(r[0]) for r in tx.fetchall())

    def chunk_counts(self, conn: Any, doc_ids: Sequence[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for batch in iter_batches(list(dict.fromkeys(doc_ids)), self.batch):
            where, args = self.any_of("parent_id", batch)
            query = f"SELECT parent_id, count(*) FROM {{s}}chunks WHERE {where} GROUP BY parent_id"
            counts.update((r[0], int(r[1])) for r in conn.execute(self.sql(query), args).fetchall())
        return counts

    def of_parent(self, parent_id: str) -> tuple[str, list[Any]]:
        return "c.parent_id = ?", [parent_id]

    def delete_chunks_of(self, tx: psycopg.Cursor[Any], doc_ids: Sequence[str]) -> None:
        for batch in iter_batches(doc_ids, self.batch):
            where, args = self.any_of("parent_id", batch)
            tx.execute(self.sql(f"DELETE FROM {{s}}chunks WHERE {where}"), args)

    def drop_vectors(self, tx: psycopg.Cursor[Any], doc_ids: Sequence[str]) -> None:
        """Vectors are kept once, in pgvector's table: those of removed documents go in the same transaction."""
        for batch in iter_batches(doc_ids, self.batch):
            where, args = self.any_of("parent_id", batch)
            query = f"DELETE FROM {{s}}{VECTORS_TABLE} WHERE id IN (SELECT id FROM {{s}}chunks WHERE {where})"
            tx.execute(self.sql(query), args)
        self.postings.drop(tx, doc_ids)

    def store_vectors(self, tx: psycopg.Cursor[Any], chunks: Sequence[ChunkRecord]) -> None:
        rows = [(c.id, c.embedding, user_metadata(c.metadata), None) for c in chunks]
        if len(rows) >= COPY_MIN_ROWS:
            copy_vectors(tx, self.schema, VECTORS_TABLE, rows)
            return
        upsert_rows(tx, self.schema, VECTORS_TABLE, rows)

    def stored_vectors(
        self, conn: psycopg.Connection[Any], text_hashes: Sequence[str]
    ) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for batch in iter_batches(list(text_hashes), self.batch):
            where, args = self.any_of("c.text_hash", batch)
            query = self.sql(
                "SELECT DISTINCT ON (c.text_hash) c.text_hash, vector_send(v.embedding) FROM {s}chunks c"
                f" JOIN {{s}}{VECTORS_TABLE} v ON v.id = c.id WHERE {where}"
            )
            found.update((h, _vector_out(v)) for h, v in conn.execute(query, args))
        return found

    def counts(self, conn: psycopg.Connection[Any]) -> dict[str, int]:
        docs = conn.execute(
            self.sql("SELECT count(*) FROM {s}documents WHERE state = ?"), (COMPLETE,)
        ).fetchone()
        chunks = conn.execute(
            self.sql(
                "SELECT count(*) FROM {s}chunks c JOIN {s}documents d ON d.id = c.parent_id WHERE d.state = ?"
            ),
            (COMPLETE,),
        ).fetchone()
        return {"documents": int(docs[0]) if docs else 0, "chunks": int(chunks[0]) if chunks else 0}

    def seek_bounds(self, conn: psycopg.Connection[Any]) -> tuple[int | None, int | None]:
        """The documents' ``seq`` (their primary key: each bound one index seek)."""
        low = conn.execute(self.sql("SELECT min(seq) FROM {s}documents")).fetchone()
        high = conn.execute(self.sql("SELECT max(seq) FROM {s}documents")).fetchone()
        return (None if low is None else low[0]), (None if high is None else high[0])

    def seek(self, conn: psycopg.Connection[Any], points: Sequence[int]) -> list[str]:
        return [r[0] for r in conn.execute(self.sql(self.seek_sql), (list(points), COMPLETE)).fetchall()]

    # -- what only this database offers ----------------------------------------------------------------
    def write_lock(self, timeout: float) -> PgWriteLock:
        lock = PgWriteLock(self._url, f"ledger {self.name}", self._write_key, timeout)
        with self._lock:
            self._locks.append(lock)
        return lock

    def vector_store(self, dimension: int) -> PgVectorStore:
        if self.dimension != int(dimension):
            with self._writer_connection() as conn:
                self.ensure_dimension(conn, int(dimension))
        store = PgVectorStore(
            dimension=int(dimension),
            schema=self.schema,
            table=VECTORS_TABLE,
            _pool=self._pool,
            _label=f"ledger {self.name}",
        )
        with self._lock:
            self._stores.append(store)
        return store


# -- the ledger --------------------------------------------------------------------------------------------
class PostgresLedger(SQLLedger):
    """A ledger in PostgreSQL schema ``schema`` of the database at ``url`` (see the module docstring):
    :class:`~finderledge.ledgers.sql.SQLLedger` over :class:`PostgresDialect`.

    ``dimension_hint``: the embedding dimension, recorded now if none is (else checked)."""

    def __init__(self, url: str, *, schema: str = "finderledge", dimension_hint: int | None = None) -> None:
        self._pg = PostgresDialect(url, schema, dimension_hint)
        super().__init__(self._pg)
        try:
            check_schema_version(self.name, self.get_info("schema_version"), POSTGRES_SCHEMA_VERSION)
        except BaseException:
            self.close()
            raise
        self.index_uuid: str = self.get_info("index_uuid") or ""
        recover(self._pg, VECTORS_TABLE)  # a bulk load that died left the vector index to build

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the ledger's tables."""
        return self._pg.schema

    @property
    def dimension(self) -> int | None:
        """The vector dimension recorded in the database (None until the first vector or hint)."""
        return self._pg.dimension

    def write_lock(self, timeout: float) -> PgWriteLock:
        """The ledger's write lock across processes and machines (same interface as
        :class:`finderledge.storage.locking.WriteLock`); closed with the ledger."""
        return self._pg.write_lock(timeout)

    def vector_store(self, dimension: int) -> PgVectorStore:
        """The vector leg over this ledger's ``vectors`` table (``location = LEDGER``: the ledger writes it in
        its transactions; the store searches).  Records ``dimension`` or checks it."""
        return self._pg.vector_store(dimension)
