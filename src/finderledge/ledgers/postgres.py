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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigurationError, IncompatibleIndexError, LockTimeoutError
from ..metadata import DOCUMENT_ID, embedded_text, user_metadata
from ..pg_connection import (
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
    ADD,
    COMPLETE,
    REMOVE,
    REMOVED,
    REMOVED_GRACE_SECONDS,
    SCHEMA_VERSION,
    Change,
    ChunkRecord,
    DocumentRecord,
    Ledger,
    check_schema_version,
    content_id,
    iter_batches,
    unique_runs,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PgWriteLock", "PostgresConnectionError", "PostgresLedger", "advisory_key", "safe_name"]

logger = logging.getLogger(__name__)

VECTORS_TABLE = "vectors"
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
            " split_index integer NOT NULL, content text NOT NULL, content_json boolean NOT NULL DEFAULT false,"
            " metadata text NOT NULL, text_hash text)"
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


def _dumps(md: dict[str, Any]) -> str:
    text = json.dumps(md, ensure_ascii=False, sort_keys=True, default=str)
    if re.search("[\ud800-\udfff]", text):  # lone surrogates cannot be encoded: escape them
        text = json.dumps(md, ensure_ascii=True, sort_keys=True, default=str)
    return text


def _text_in(text: str) -> tuple[str, bool]:
    """``(stored, is_json)``: PostgreSQL text cannot hold NUL (nor lone surrogates): such a text is stored as JSON."""
    if _UNSTORABLE.search(text):
        return json.dumps(text, ensure_ascii=True), True
    return text, False


def _text_out(stored: str, is_json: bool) -> str:
    return str(json.loads(stored)) if is_json else stored


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
    :class:`finderledge.locking.WriteLock`: a session-level ``pg_advisory_lock`` on a dedicated connection,
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


# -- the ledger --------------------------------------------------------------------------------------------
class PostgresReads(Ledger):
    """The reading half of the PostgreSQL ledger: the sync, read, catalog and embedding-cache lookups of
    :class:`Ledger`, from a connection pool (any thread; :meth:`snapshot` pins one connection to the thread).
    :class:`PostgresLedger` creates the tables, opens the pool (:meth:`_open_pool`) and adds the writes."""

    path = None

    def __init__(self, url: str, schema: str) -> None:
        if (
            not isinstance(schema, str)
            or not schema
            or _UNSTORABLE.search(schema)
            or len(schema.encode()) > 63
        ):
            raise ConfigurationError(f"setting 'schema': expected a PostgreSQL schema name, got {schema!r}")
        from psycopg import sql

        self._url = url
        self.schema = schema
        self.name = safe_name(url, schema)
        self._s = sql.Identifier(schema)
        self._local = threading.local()
        self._dimension: int | None = None

    def _open_pool(self, ext_schema: str) -> None:
        """Open the read pool (once the schema and its tables exist)."""
        self._pool = make_pool(self._url, ext_schema, self.name)

    def _sql(self, query: str) -> Any:
        from psycopg import sql

        return sql.SQL(query).format(s=self._s)

    @property
    def dimension(self) -> int | None:
        """The vector dimension recorded in the database (None until the first vector or hint)."""
        return self._dimension

    # -- connections and records -----------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's snapshot connection, or one from the pool (autocommit: each query sees the latest)."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside the block (in this thread) see one consistent state (one REPEATABLE READ transaction)."""
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

    def get_info(self, key: str) -> str | None:
        with self._read() as conn:
            row = conn.execute(self._sql("SELECT value FROM {s}.info WHERE key = %s"), (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- sync: the change log --------------------------------------------------------------------------
    def last_seq(self) -> int:
        with self._read() as conn:
            row = conn.execute(self._sql("SELECT COALESCE(max(seq), 0) FROM {s}.changes")).fetchone()
        return int(row[0]) if row else 0

    def changes_since(self, seq: int, upto: int | None = None) -> list[Change]:
        query = "SELECT seq, op, doc_id, chunk_count FROM {s}.changes WHERE seq > %s"
        args: list[Any] = [seq]
        if upto is not None:
            query += " AND seq <= %s"
            args.append(upto)
        with self._read() as conn:
            rows = conn.execute(self._sql(query + " ORDER BY seq"), args).fetchall()
        return [Change(int(r[0]), r[1], r[2], int(r[3])) for r in rows]

    # -- read and catalog ------------------------------------------------------------------------------
    def content_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        ids = [i for i in doc_ids if not _UNSTORABLE.search(i)]
        found: dict[str, str] = {}
        with self._read() as conn:
            for batch in iter_batches(ids, 5000):
                found.update(
                    conn.execute(
                        self._sql(
                            "SELECT id, content_hash FROM {s}.documents WHERE state = %s AND id = ANY(%s)"
                        ),
                        (COMPLETE, batch),
                    ).fetchall()
                )
        return found

    def _document(self, row: Sequence[Any]) -> DocumentRecord:
        return DocumentRecord(row[0], row[1], row[2], row[3], _text_out(row[4], row[5]), json.loads(row[6]))

    _DOC_COLS = "id, source, content_hash, state, content, content_json, metadata"

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        if _UNSTORABLE.search(doc_id):
            return None
        with self._read() as conn:
            row = conn.execute(
                self._sql(f"SELECT {self._DOC_COLS} FROM {{s}}.documents WHERE id = %s"), (doc_id,)
            ).fetchone()
        return None if row is None else self._document(row)

    def list_documents(
        self,
        *,
        source: str | None = None,
        where: Callable[[dict[str, Any]], bool] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[DocumentRecord]:
        if source is not None and _UNSTORABLE.search(source):
            return []
        if where is None:  # page in SQL: no metadata is parsed
            query = "SELECT id FROM {s}.documents WHERE state = %s" + (
                " AND source = %s" if source is not None else ""
            )
            args: list[Any] = [COMPLETE, *([source] if source is not None else [])]
            with self._read() as conn:
                chosen = [
                    r[0]
                    for r in conn.execute(
                        self._sql(query + " ORDER BY seq LIMIT %s OFFSET %s"), [*args, limit, offset]
                    )
                ]
        else:
            ids = self.document_ids(source=source, where=where)
            chosen = ids[offset:] if limit is None else ids[offset : offset + limit]
        records: list[DocumentRecord] = []
        with self._read() as conn:
            for batch in iter_batches(chosen, 500):
                rows = {
                    r[0]: r
                    for r in conn.execute(
                        self._sql(f"SELECT {self._DOC_COLS} FROM {{s}}.documents WHERE id = ANY(%s)"),
                        (batch,),
                    )
                }
                records.extend(self._document(r) for r in (rows.get(i) for i in batch) if r is not None)
        return records

    def document_metadata(self, *, source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        if source is not None and _UNSTORABLE.search(source):
            return []
        query = "SELECT id, metadata FROM {s}.documents WHERE state = %s"
        args: list[Any] = [COMPLETE]
        if source is not None:
            query += " AND source = %s"
            args.append(source)
        with self._read() as conn:
            rows = conn.execute(self._sql(query + " ORDER BY seq"), args).fetchall()
        return [(r[0], json.loads(r[1])) for r in rows]

    def ids_with_document_id(self, document_id: str) -> list[str]:
        if re.search("[\ud800-\udfff]", document_id):  # stored metadata never holds lone surrogates
            return []
        if "\x00" in document_id:  # not in the column (PostgreSQL text cannot hold NUL): scan the metadata
            return [i for i, md in self.document_metadata() if md.get(DOCUMENT_ID) == document_id]
        with self._read() as conn:
            return [
                r[0]
                for r in conn.execute(
                    self._sql(
                        "SELECT id FROM {s}.documents WHERE state = %s AND document_id = %s ORDER BY seq"
                    ),
                    (COMPLETE, document_id),
                )
            ]

    def chunk_count(self, doc_ids: Sequence[str]) -> int:
        total = 0
        with self._read() as conn:
            for batch in iter_batches([i for i in doc_ids if not _UNSTORABLE.search(i)], 5000):
                row = conn.execute(
                    self._sql("SELECT count(*) FROM {s}.chunks WHERE parent_id = ANY(%s)"), (batch,)
                ).fetchone()
                total += int(row[0]) if row else 0
        return total

    def _chunk_cols(self, with_embedding: bool) -> str:
        cols = "c.id, c.parent_id, c.split_index, c.content, c.content_json, c.metadata"
        return cols + (", v.embedding::real[]" if with_embedding else "")

    def _chunk(self, row: Sequence[Any], with_embedding: bool) -> ChunkRecord:
        emb = None
        if with_embedding and row[6] is not None:
            emb = np.asarray(row[6], dtype=np.float32)
        return ChunkRecord(row[0], row[1], int(row[2]), _text_out(row[3], row[4]), json.loads(row[5]), emb)

    def get_chunks(
        self, chunk_ids: Sequence[str], *, with_embedding: bool = False, visible_at: int | None = None
    ) -> list[ChunkRecord]:
        found: dict[str, ChunkRecord] = {}
        join = " LEFT JOIN {s}.vectors v ON v.id = c.id" if with_embedding else ""
        extra: list[Any] = []
        if visible_at is not None:
            join += (
                " JOIN {s}.documents d ON d.id = c.parent_id AND COALESCE(d.added_seq, 0) <= %s"
                " AND (d.state = 'complete' OR d.removed_seq > %s)"
            )
            extra = [visible_at, visible_at]
        query = self._sql(
            f"SELECT {self._chunk_cols(with_embedding)} FROM {{s}}.chunks c{join} WHERE c.id = ANY(%s)"
        )
        ids = [i for i in chunk_ids if not _UNSTORABLE.search(i)]
        with self._read() as conn:
            for batch in iter_batches(ids, 5000):
                for row in conn.execute(query, [*extra, batch]):
                    found[row[0]] = self._chunk(row, with_embedding)
        return [found[i] for i in chunk_ids if i in found]

    def chunks_of(self, parent_id: str, *, with_embedding: bool = False) -> list[ChunkRecord]:
        if _UNSTORABLE.search(parent_id):
            return []
        join = " LEFT JOIN {s}.vectors v ON v.id = c.id" if with_embedding else ""
        with self._read() as conn:
            rows = conn.execute(
                self._sql(
                    f"SELECT {self._chunk_cols(with_embedding)} FROM {{s}}.chunks c{join}"
                    " WHERE c.parent_id = %s ORDER BY c.split_index"
                ),
                (parent_id,),
            ).fetchall()
        return [self._chunk(r, with_embedding) for r in rows]

    def complete_chunk_ids(self) -> set[str]:
        with self._read() as conn:
            return {
                r[0]
                for r in conn.execute(
                    self._sql(
                        "SELECT c.id FROM {s}.chunks c JOIN {s}.documents d ON d.id = c.parent_id WHERE d.state = %s"
                    ),
                    (COMPLETE,),
                )
            }

    # -- embedding cache lookups -----------------------------------------------------------------------
    def cached_embeddings(self, model: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        if _UNSTORABLE.search(model):
            return found
        with self._read() as conn:
            for batch in iter_batches(list(text_hashes), 5000):
                rows = conn.execute(
                    self._sql(
                        "SELECT text_hash, vector FROM {s}.embedding_cache WHERE model = %s AND text_hash = ANY(%s)"
                    ),
                    (model, batch),
                )
                found.update((h, np.frombuffer(bytes(v), dtype="<f4")) for h, v in rows)
            missing = [h for h in dict.fromkeys(text_hashes) if h not in found]
            if missing and self.get_info("embedding_model_id") == model:  # vectors stored chunks hold
                for batch in iter_batches(missing, 5000):
                    rows = conn.execute(
                        self._sql(
                            "SELECT DISTINCT ON (c.text_hash) c.text_hash, v.embedding::real[] FROM {s}.chunks c"
                            f" JOIN {{s}}.{VECTORS_TABLE} v ON v.id = c.id WHERE c.text_hash = ANY(%s)"
                        ),
                        (batch,),
                    )
                    found.update((h, np.asarray(v, dtype=np.float32)) for h, v in rows)
        return found

    def embedding_cache_size(self) -> dict[str, int]:
        with self._read() as conn:
            row = conn.execute(
                self._sql("SELECT COUNT(*), COALESCE(SUM(octet_length(vector)), 0) FROM {s}.embedding_cache")
            ).fetchone()
            entries, size = row if row is not None else (0, 0)
        return {"entries": int(entries), "bytes": int(size)}

    # -- catalog counts --------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        with self._read() as conn:
            docs = conn.execute(
                self._sql("SELECT count(*) FROM {s}.documents WHERE state = %s"), (COMPLETE,)
            ).fetchone()
            chunks = conn.execute(
                self._sql(
                    "SELECT count(*) FROM {s}.chunks c JOIN {s}.documents d ON d.id = c.parent_id WHERE d.state = %s"
                ),
                (COMPLETE,),
            ).fetchone()
        return {
            "documents": int(docs[0]) if docs else 0,
            "chunks": int(chunks[0]) if chunks else 0,
        }

    def sources(self) -> list[str]:
        with self._read() as conn:
            return [
                r[0]
                for r in conn.execute(
                    self._sql(
                        'SELECT DISTINCT source COLLATE "C" AS s FROM {s}.documents WHERE state = %s AND source IS NOT NULL'
                        " ORDER BY s"
                    ),
                    (COMPLETE,),
                )
            ]


class PostgresLedger(PostgresReads):
    """A ledger in PostgreSQL schema ``schema`` of the database at ``url`` (see the module docstring).

    ``dimension_hint``: the embedding dimension, recorded now if none is (else checked)."""

    def __init__(self, url: str, *, schema: str = "finderledge", dimension_hint: int | None = None) -> None:
        super().__init__(url, schema)
        self._commit_key = advisory_key("commit", schema)
        self._write_key = advisory_key("write", schema)
        self._lock = threading.RLock()
        self._locks: list[PgWriteLock] = []
        self._stores: list[PgVectorStore] = []
        self._closed = False
        with connect_checked(url, self.name) as conn:
            self._ext_schema = prepare_schema(conn, schema, self.name)
            self._create(conn)
            if dimension_hint is not None:
                self._ensure_dimension(conn, int(dimension_hint))
            else:
                self._dimension = column_dimension(conn, schema, VECTORS_TABLE)
        self._open_pool(self._ext_schema)
        self._writer: psycopg.Connection[Any] | None = None
        check_schema_version(self.name, self.get_info("schema_version"))
        self.index_uuid: str = self.get_info("index_uuid") or ""

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
                        self._sql("SELECT value FROM {s}.info WHERE key = 'schema_version'")
                    ).fetchone()
                    version = None if row is None else row[0]
                if version is None:
                    raise IncompatibleIndexError(
                        f"ledger {self.name}: the schema holds tables ({', '.join(sorted(ours))}) that are not a "
                        "FinderLedge ledger's; choose another schema"
                    )
                return
            for statement in _ledger_ddl(self.schema):
                conn.execute(statement)
            conn.execute(
                self._sql(
                    "INSERT INTO {s}.info (key, value) VALUES ('schema_version', %s), ('index_uuid', %s)"
                    " ON CONFLICT (key) DO NOTHING"
                ),
                (str(SCHEMA_VERSION), uuid.uuid4().hex),
            )
            logger.info("ledger %s: created", self.name)

    def _ensure_dimension(self, conn: psycopg.Connection[Any], dimension: int) -> None:
        """Inside a transaction (or autocommit): record ``dimension`` or check it against the recorded one."""

        if self._dimension == dimension:
            return
        if self._dimension is not None:
            raise IncompatibleIndexError(
                f"ledger {self.name}: its vectors have dimension {self._dimension}; "
                f"this embedding model produces {dimension}"
            )
        if conn.info.transaction_status == 0:  # idle in autocommit: make it one transaction
            with conn.transaction():
                ensure_dimension(conn, self.schema, VECTORS_TABLE, dimension, f"ledger {self.name}")
        else:
            ensure_dimension(conn, self.schema, VECTORS_TABLE, dimension, f"ledger {self.name}")
        self._dimension = dimension

    # -- connections --------------------------------------------------------------------------------
    @contextmanager
    def _writing(self) -> Iterator[psycopg.Connection[Any]]:
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

    # -- info ---------------------------------------------------------------------------------------
    def set_info(self, key: str, value: str | None) -> None:
        with self._writing() as conn:
            if value is None:
                conn.execute(self._sql("DELETE FROM {s}.info WHERE key = %s"), (key,))
            else:
                conn.execute(
                    self._sql(
                        "INSERT INTO {s}.info (key, value) VALUES (%s, %s)"
                        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
                    ),
                    (key, value),
                )

    # -- writes -------------------------------------------------------------------------------------
    def commit_write(
        self,
        add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]] = (),
        remove: Sequence[str] = (),
        publish: Sequence[tuple[DocumentRecord, int]] = (),
    ) -> int:
        """In one transaction: mark ``remove`` removed (deleting their vectors), add documents with their chunks
        and vectors, log each change; returns the last change's ``seq``.  Nothing is staged here
        (``supports_staging`` is false: a big document is written in one transaction)."""
        if publish:
            raise NotImplementedError(f"ledger {self.name}: staging a document is not supported")

        now = time.time()
        dims = {len(c.embedding) for _, chunks in add for c in chunks if c.embedding is not None}
        if len(dims) > 1:
            raise IncompatibleIndexError(
                f"ledger {self.name}: one write holds vectors of dimensions {sorted(dims)}"
            )
        runs = [  # rows checked and encoded before the transaction; a document added twice: the later replaces
            (
                [(self._document_row(doc), len(chunks)) for doc, chunks in run],
                [(self._chunk_row(c), c) for _, chunks in run for c in chunks],
            )
            for run in unique_runs(add)
        ]
        with self._writing() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._commit_key,))
            if dims:
                self._ensure_dimension(conn, dims.pop())
            if remove:
                self._mark_removed(cur, list(remove), now)
            for docs, chunk_rows in runs:
                self._delete_rows(cur, [row[0] for row, _ in docs])  # removed earlier copies of the content
                seqs = self._log(cur, ADD, [(row[0], count) for row, count in docs])
                cur.executemany(
                    self._sql(
                        "INSERT INTO {s}.documents (id, source, content_hash, state, content, content_json,"
                        " metadata, document_id, added_at, added_seq)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    ),
                    [(*row, now, seq) for seq, (row, _) in zip(seqs, docs)],
                )
                if chunk_rows:
                    cur.executemany(
                        self._sql(
                            "INSERT INTO {s}.chunks (id, parent_id, split_index, content, content_json, metadata,"
                            " text_hash) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                        ),
                        [row for row, _ in chunk_rows],
                    )
                embedded = [(row, c) for row, c in chunk_rows if c.embedding is not None]
                if embedded:  # each vector is kept once: the cache lets go of the texts stored now
                    cur.execute(
                        self._sql("DELETE FROM {s}.embedding_cache WHERE text_hash = ANY(%s)"),
                        ([row[-1] for row, _ in embedded],),
                    )
                    upsert_rows(
                        cur,
                        self.schema,
                        VECTORS_TABLE,
                        [(c.id, c.embedding, user_metadata(c.metadata), None) for _, c in embedded],
                    )
            if self._dimension is not None and any(c.embedding is not None for _, cs in add for c in cs):
                build_index_when_large(
                    conn, self.schema, VECTORS_TABLE, self._dimension, f"ledger {self.name}"
                )
            row = cur.execute(self._sql("SELECT COALESCE(max(seq), 0) FROM {s}.changes")).fetchone()
        return int(row[0]) if row else 0

    def _log(self, cur: psycopg.Cursor[Any], op: str, entries: Sequence[tuple[str, int]]) -> list[int]:
        """Inside the commit transaction (under the commit key): one change row per ``(doc_id, chunk_count)``
        in one ``executemany``; returns their seqs, drawn in one query in ascending order."""
        if not entries:
            return []
        cur.execute(
            self._sql("SELECT nextval(pg_get_serial_sequence(%s, 'seq')) FROM generate_series(1, %s)"),
            (f"{self._s.as_string(cur)}.changes", len(entries)),
        )
        seqs = sorted(int(r[0]) for r in cur.fetchall())
        cur.executemany(
            self._sql("INSERT INTO {s}.changes (seq, op, doc_id, chunk_count) VALUES (%s, %s, %s, %s)"),
            [(seq, op, doc_id, int(count)) for seq, (doc_id, count) in zip(seqs, entries)],
        )
        return seqs

    def _document_row(self, doc: DocumentRecord) -> tuple[Any, ...]:
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

    def _chunk_row(self, chunk: ChunkRecord) -> tuple[Any, ...]:
        content, is_json = _text_in(chunk.content)
        return (
            _checked(chunk.id, "chunk id"),
            chunk.parent_id,
            chunk.split_index,
            content,
            is_json,
            _dumps(chunk.metadata),
            content_id(embedded_text(chunk.content, chunk.metadata)),  # the text its vector embeds
        )

    def _mark_removed(self, cur: psycopg.Cursor[Any], remove: list[str], now: float) -> None:
        for batch in iter_batches(remove):
            counts = dict(
                cur.execute(
                    self._sql(
                        "SELECT parent_id, count(*) FROM {s}.chunks WHERE parent_id = ANY(%s) GROUP BY parent_id"
                    ),
                    (batch,),
                ).fetchall()
            )
            seqs = self._log(cur, REMOVE, [(doc_id, counts.get(doc_id, 0)) for doc_id in batch])
            cur.executemany(
                self._sql(
                    "UPDATE {s}.documents SET state = %s, removed_seq = %s, removed_at = %s WHERE id = %s"
                ),
                [(REMOVED, seq, now, doc_id) for seq, doc_id in zip(seqs, batch)],
            )
            cur.execute(
                self._sql(
                    "DELETE FROM {s}.vectors WHERE id IN (SELECT id FROM {s}.chunks"
                    " WHERE parent_id = ANY(%s))"
                ),
                (batch,),
            )

    def _delete_rows(self, cur: psycopg.Cursor[Any], ids: Sequence[str]) -> None:
        for batch in iter_batches(ids):
            cur.execute(
                self._sql(
                    "DELETE FROM {s}.vectors WHERE id IN (SELECT id FROM {s}.chunks"
                    " WHERE parent_id = ANY(%s))"
                ),
                (batch,),
            )
            cur.execute(self._sql("DELETE FROM {s}.chunks WHERE parent_id = ANY(%s)"), (batch,))
            cur.execute(self._sql("DELETE FROM {s}.documents WHERE id = ANY(%s)"), (batch,))

    def collect_removed(self, older_than: float = REMOVED_GRACE_SECONDS) -> int:
        with self._writing() as conn, conn.transaction(), conn.cursor() as cur:
            ids = [
                r[0]
                for r in cur.execute(
                    self._sql("SELECT id FROM {s}.documents WHERE state = %s AND removed_at < %s"),
                    (REMOVED, time.time() - older_than),
                )
            ]
            if ids:
                self._delete_rows(cur, ids)
        return len(ids)

    # -- embedding cache ----------------------------------------------------------------------------
    def cache_embeddings(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(_checked(model, "model name"), h, np.asarray(v, dtype="<f4").tobytes()) for h, v in items]
        if not rows:
            return
        with self._writing() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                self._sql(
                    "INSERT INTO {s}.embedding_cache (model, text_hash, vector) VALUES (%s, %s, %s)"
                    " ON CONFLICT DO NOTHING"
                ),
                rows,
            )

    def prune_embedding_cache(self) -> int:
        with self._writing() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(self._sql("DELETE FROM {s}.embedding_cache"))
            return int(cur.rowcount)

    # -- the shared machinery -----------------------------------------------------------------------
    def write_lock(self, timeout: float) -> PgWriteLock:
        """The ledger's write lock across processes and machines (same interface as
        :class:`finderledge.locking.WriteLock`); closed with the ledger."""
        lock = PgWriteLock(self._url, f"ledger {self.name}", self._write_key, timeout)
        with self._lock:
            self._locks.append(lock)
        return lock

    def vector_store(self, dimension: int) -> PgVectorStore:
        """The vector leg over this ledger's ``vectors`` table (``location = LEDGER``: the ledger writes it in
        its transactions; the store searches).  Records ``dimension`` or checks it."""

        if self._dimension != int(dimension):
            with self._writing() as conn:
                self._ensure_dimension(conn, int(dimension))
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
