"""Bulk loads into the PostgreSQL ledger: rows go in by ``COPY``, and pgvector's HNSW index is built once after
a large load instead of being maintained row by row.

**COPY.**  Every table write of at least :data:`COPY_MIN_ROWS` rows without an ``ON CONFLICT`` clause (chunk,
document and change rows; the engine-side keyword index's ``kw_docs`` and ``kw_postings`` rows, :mod:`.postings`)
is sent as one binary ``COPY … FROM STDIN``, in the write's own transaction: the same rows as the ``INSERT``s,
the same constraint errors, nothing visible before the commit.  Vectors replace
earlier rows of their ids (``DELETE … = ANY``, then ``COPY``): the upsert they had.  A table with a column
type this module does not encode falls back to ``executemany``.

**The HNSW index.**  Inserting into pgvector's HNSW index costs ~3-4 ms a row here; building it over a loaded
table ~0.4 ms a row.  A write call (:func:`bulk_writes`, around ``Writer.ingest``) expected to write at least
:data:`BULK_INDEX_MIN_CHUNKS` chunks, and at least :data:`BULK_INDEX_SHARE` of the rows the table held,
*defers* the index: its first commit drops it (if any) and records :data:`INDEX_STATE_KEY` in ``info``, in
the same transaction; later commits of the call skip index maintenance; when the call ends (returning or
raising) the index is built once, with progress lines (:mod:`finderledge.progress`), and the record goes.
A block of calls (``FinderLedge.bulk_load``, :func:`bulk_load` around them) is one such load: its calls join it,
``expected`` is what the caller announced, and the chunks they write add up.
Meanwhile searches in every process scan exactly (correct, slower: pgvector's plan needs the index).
The loading session holds a session-level advisory lock (the *bulk key*): other processes' writes see the
record, find the lock held and leave the build to the loader; if the loader died (SIGKILL, lost machine) the
lock went with its connection, and the next write, or the next :class:`PostgresLedger` opened, builds the
index and clears the record.

**The keyword postings' term index.**  With the engine-side keyword index (:mod:`.postings`) a chunk adds ~60
``kw_postings`` rows, each an insert at its own place in the ``(term, part)`` B-tree: past the buffer cache
that is most of a large load's time.  The same call defers it the same way (its own record,
:data:`POSTINGS_STATE_KEY`, under the same bulk key; decided on ``kw_docs``' rows held): dropped at the first
commit, built once, first, when the call ends (one sort, ``maintenance_work_mem`` raised to 512MB for it).
The ``doc`` index stays (its keys ascend: appends), except in a first load (:data:`FIRST_LOAD_RATIO`), which
builds it after the term index.  Meanwhile keyword searches scan the postings (the same
scores, slower); a dead loader's record is built by the next write's commit or the next open.  Under the
same record the call holds back its ``kw_terms`` additions (each term's document frequency, :mod:`.postings`)
and adds them in one upsert after its last commit (one per commit before: ~20k terms each); searches that
read ``kw_terms`` count from the postings while the record is there, and a dead loader's ``kw_terms`` is
counted again from the postings with the B-tree's build.

**The planner's statistics.**  A call that wrote at least :data:`ANALYZE_MIN_CHUNKS` chunks, and at least
:data:`ANALYZE_SHARE` of the chunk rows the table held at its last statistics (or it had none), ends with an
``ANALYZE`` of the tables it grew (:func:`refresh_statistics`): autovacuum would do it, up to a minute later,
and until then the planner guesses.  Measured (10,000 chunks written in two calls, keyword index in the engine):
keyword searches ran 55-82 ms (p50, 5 s windows) for the ~45 s before autovacuum's ``ANALYZE``, 3.5-8 ms
after it; with the ``ANALYZE`` at the end of each write (0.23 and 0.38 s) 6-9 ms from the first search.
"""

from __future__ import annotations

import functools
import logging
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from itertools import islice
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

import numpy as np

from ..progress import INTERVAL, ProgressLog
from ..storage.postgres import advisory_key
from ..vector_stores.pgvector import (
    MAX_INDEXED_DIMENSION,
    build_index_when_large,
    has_index,
    index_name,
    metadata_columns,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "ANALYZE_LOCK_WAIT_S",
    "ANALYZE_MIN_CHUNKS",
    "ANALYZE_SHARE",
    "BULK_INDEX_MIN_CHUNKS",
    "BULK_INDEX_SHARE",
    "COPY_MIN_ROWS",
    "DEFERRED_POSTINGS_INDEXES",
    "FIRST_LOAD_RATIO",
    "INDEX_STATE_KEY",
    "POSTINGS_INDEXES",
    "POSTINGS_STATE_KEY",
    "BulkLoad",
    "bulk_load",
    "bulk_writes",
    "copy_encoded",
    "copy_rows",
    "copy_vectors",
    "recorded",
    "refresh_statistics",
    "text_any",
]


class BulkDialect(Protocol):
    """What a bulk load uses of the PostgreSQL dialect (:class:`~finderledge.ledgers.postgres.PostgresDialect`,
    which imports this module: typed by its shape, not imported)."""

    name: str
    schema: str
    dimension: int | None
    vectors_table: str
    postings: Any  # :class:`~finderledge.ledgers.postings.Postings`

    def sql(self, query: str) -> str: ...

    def insert(
        self, table: str, columns: Sequence[str], conflict: str | None = None, key: str = ""
    ) -> str: ...

    def reading(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def writing(self) -> AbstractContextManager[psycopg.Cursor[Any]]: ...

    def start_bulk(self, load: BulkLoad) -> bool: ...

    def end_bulk(self, load: BulkLoad) -> None: ...


logger = logging.getLogger(__name__)

COPY_MIN_ROWS = 32  # rows of one table in one write from which COPY replaces executemany
BULK_INDEX_MIN_CHUNKS = 10_000  # chunks a write call is expected to write: from here the index is deferred
BULK_INDEX_SHARE = 0.25  # ...and this share of the rows held (a rebuild costs ~1/8 of row inserts)
INDEX_STATE_KEY = "vector_index"  # info key: present while a bulk load owns the HNSW build ("deferred …")
#: info key: present while a bulk load owns the build of the ``kw_postings`` B-trees ("deferred …")
POSTINGS_STATE_KEY = "keyword_postings_index"
#: the two B-trees of ``kw_postings`` (name: statement); a bulk load drops them and builds them
#: once after it, so their statements are kept here (:mod:`.postings` creates them with its tables)
POSTINGS_INDEXES = {
    "kw_postings_term": (
        'CREATE INDEX IF NOT EXISTS kw_postings_term ON {s}kw_postings (term COLLATE "C", part) INCLUDE (doc, tf, dl)'
    ),
    "kw_postings_doc": "CREATE INDEX IF NOT EXISTS kw_postings_doc ON {s}kw_postings (doc)",
}
#: the ``kw_postings`` B-trees a bulk load drops: the term index, whose inserts land all over it (a chunk's ~60
#: terms); the ``doc`` index is kept, its keys drawn in ascending order (inserts append at its right edge) and
#: deletes of replaced documents need it
DEFERRED_POSTINGS_INDEXES = ("kw_postings_term",)
#: a call writing at least this many times the chunks ``kw_docs`` holds (a first load) drops the ``doc`` B-tree as
#: well: its inserts cost the server as much as the rows' own (1.2M postings: 1.7 s without it, 3.1 s with it),
#: and the deletes that use it (documents replaced) can only find the few held rows or the call's own (without
#: it such a delete scans the postings once: correct, slower)
FIRST_LOAD_RATIO = 8
ANALYZE_MIN_CHUNKS = 1_000  # chunks a write call wrote from which it may refresh the planner's statistics
ANALYZE_SHARE = 0.1  # ...when they are this share of the chunk rows last counted (autovacuum's rule, at once)
ANALYZE_LOCK_WAIT_S = 2.0  # how long that ANALYZE waits for a table another session holds (an index build)
#: the ledger's tables a write grows: analysed after a large one (those that exist; the keyword ones in the
#: engine's mode only)
GROWN_TABLES = ("documents", "chunks", "changes", "kw_docs", "kw_postings", "kw_terms")

_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
_NULL = struct.pack(">i", -1)
_LEN = struct.Struct(">i")
_FLUSH_BYTES = 1 << 20


# -- many strings as one parameter ----------------------------------------------------------------------------
#: what separates the strings of :func:`text_any`'s one parameter (unit separator: no id holds it, and one that
#: does is sent as a list)
TEXT_SEPARATOR = "\x1f"


def text_any(values: Sequence[str]) -> tuple[str, Any]:
    """``(sql, parameter)`` for ``column = <sql>`` matching any of ``values`` (strings): from
    :data:`COPY_MIN_ROWS` of them one text joined by :data:`TEXT_SEPARATOR`, split by the server
    (``string_to_array``), as psycopg dumps a list item by item (~3 s for a 100k-document load's id lists);
    fewer, or a value holding the separator, a list (``ANY(?)``)."""
    if len(values) >= COPY_MIN_ROWS:
        try:
            joined = TEXT_SEPARATOR.join(values)
        except TypeError:  # not all strings: the list, as before
            joined = ""
        else:
            if joined.count(TEXT_SEPARATOR) == len(values) - 1:
                return "ANY(string_to_array(?, chr(31)))", joined
    return "ANY(?)", list(values)


# -- COPY ----------------------------------------------------------------------------------------------------
def column_types(conn: psycopg.Connection[Any], schema: str, table: str) -> dict[str, str]:
    """``{column: type name}`` of ``schema.table``."""
    rows = conn.execute(
        "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid"
        " WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped",
        (schema, table),
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _vector_bytes(value: Any) -> bytes:
    """pgvector's binary form: int16 dimension, int16 zero, big-endian float32s."""
    if isinstance(value, bytes):
        return value
    arr = np.asarray(value, dtype=">f4").ravel()
    return struct.pack(">hh", arr.size, 0) + arr.tobytes()


def _encoder(type_name: str, codec: str) -> Callable[[Any], bytes] | None:
    """The binary COPY encoding of a value of a column of type ``type_name`` (None: not one encoded here)."""
    if type_name in ("text", "varchar"):
        return lambda v: str(v).encode(codec)
    if type_name == "jsonb":
        return lambda v: b"\x01" + str(v).encode(codec)
    if type_name == "int4":
        return struct.Struct(">i").pack
    if type_name == "int8":
        return struct.Struct(">q").pack
    if type_name == "float8":
        return struct.Struct(">d").pack
    if type_name == "bool":
        return lambda v: b"\x01" if v else b"\x00"
    if type_name == "vector":
        return _vector_bytes
    return None


class CopyWriter:
    """Column types per table, read once per connection's database (the layout is fixed once created)."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str], dict[str, str]] = {}

    def copy_rows(
        self,
        cur: psycopg.Cursor[Any],
        schema: str,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> bool:
        """Write ``rows`` of ``columns`` into ``schema.table`` by one binary COPY; False (nothing written) when a
        column's type is not one encoded here."""
        key = (schema, table)
        types = self._types.get(key)
        if types is None:
            types = self._types[key] = column_types(cur.connection, schema, table)
        return copy_rows(cur, schema, table, columns, rows, types)


def _row_formatter(
    cur: psycopg.Cursor[Any], types: Sequence[str]
) -> Callable[[Sequence[Any], bytearray], None] | None:
    """psycopg's C formatter of one binary COPY row (appended to a buffer) for columns of ``types`` (jsonb
    and vector values given in their binary form, dumped as ``bytea``), or None without psycopg's C module."""
    try:  # psycopg's own C formatter (what Copy.write_row calls), taken from its private module: guarded
        from psycopg._cmodule import _psycopg

        format_row: Callable[[Sequence[Any], Any, bytearray], None] = _psycopg.format_row_binary
    except (ImportError, AttributeError):  # a psycopg without it (or where it moved): the encoders here
        return None
    from psycopg.adapt import Transformer
    from psycopg.pq import Format

    registry = cur.adapters.types
    oids = [registry.get_oid("bytea" if t in _AS_BYTES else t) for t in types]
    tx = Transformer.from_context(cur)
    tx.set_dumper_types(oids, Format.BINARY)
    return lambda row, out: format_row(row, tx, out)


_AS_BYTES = ("jsonb", "vector")  # column types whose values psycopg's formatter gets in binary form


def copy_rows(
    cur: psycopg.Cursor[Any],
    schema: str,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    types: Mapping[str, str],
) -> bool:
    """One binary ``COPY schema.table (columns) FROM STDIN`` of ``rows`` (``types``: each column's type name);
    False, with nothing written, when a column's type has no encoder here.  Rows are formatted by psycopg's C
    code (~10x the per-value encoders here, byte for byte the same); a row it refuses (a value not of its
    column's Python type) by the encoders here, which convert it as before or raise."""
    from psycopg import Error, sql

    codec = cur.connection.info.encoding
    names = [types.get(c, "?") for c in columns]
    encoders = [_encoder(t, codec) for t in names]
    if any(e is None for e in encoders):
        return False
    count = struct.pack(">h", len(columns))
    pack = _LEN.pack

    def encoded(row: Sequence[Any]) -> bytes:
        parts: list[bytes] = [count]
        for enc, value in zip(encoders, row):
            if value is None:
                parts.append(_NULL)
                continue
            data = enc(value)  # type: ignore[misc]
            parts.append(pack(len(data)))
            parts.append(data)
        return b"".join(parts)

    formatter = _row_formatter(cur, names)
    wrapped = [i for i, t in enumerate(names) if t in _AS_BYTES]
    given: Sequence[Sequence[Any]] = rows
    if formatter is not None and wrapped:  # their binary form, as bytes (a bytea's binary form: its bytes)
        given = [_as_bytes(row, wrapped, encoders) for row in rows]
    statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(schema, table), sql.SQL(", ").join(map(sql.Identifier, columns))
    )
    with cur.copy(statement) as copy:
        out = bytearray(_HEADER)
        for at, row in enumerate(given):
            if formatter is None:
                out += encoded(row)
            else:
                mark = len(out)
                try:
                    formatter(row, out)
                except (
                    TypeError,
                    ValueError,
                    OverflowError,
                    Error,
                ):  # a value its dumper refuses: encoded here
                    del out[mark:]
                    out += encoded(rows[at])
            if len(out) >= _FLUSH_BYTES:
                copy.write(out)
                out = bytearray()
        out += _TRAILER
        copy.write(out)
    return True


def _as_bytes(
    row: Sequence[Any], at: Sequence[int], encoders: Sequence[Callable[[Any], bytes] | None]
) -> list[Any]:
    """``row`` with its values at ``at`` in their binary COPY form (bytes)."""
    out = list(row)
    for i in at:
        value = out[i]
        if value is not None and not isinstance(value, bytes):
            out[i] = encoders[i](value)  # type: ignore[misc]
    return out


def copy_encoded(
    cur: psycopg.Cursor[Any], schema: str, table: str, columns: Sequence[str], pieces: Iterable[bytes]
) -> None:
    """One binary ``COPY schema.table (columns) FROM STDIN`` of rows already in COPY's binary row form (field
    count, then each field length-prefixed), given as ``pieces`` sent one after the other (a row may span
    several): for writers that encode many rows faster than :func:`copy_rows`' per-value encoders (the
    engine-side postings).  ``pieces`` may be produced while the COPY runs (sent a group at a time: the server
    stores rows meanwhile).  Sending from psycopg's ``QueuedLibpqWriter`` thread was measured slower here
    (bulk49: 100k chunks 66.8 s against 59.8 s, the HNSW build after it 21 s against 17 s)."""
    from psycopg import sql

    statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(schema, table), sql.SQL(", ").join(map(sql.Identifier, columns))
    )
    step = max(1, _FLUSH_BYTES // 32)
    source = iter(pieces)
    with cur.copy(statement) as copy:
        copy.write(_HEADER)
        while group := list(islice(source, step)):
            copy.write(b"".join(group))
        copy.write(_TRAILER)


def copy_vectors(
    cur: psycopg.Cursor[Any],
    schema: str,
    table: str,
    rows: Sequence[tuple[str, Any, Mapping[str, Any], str | None]],
) -> None:
    """Insert or replace ``(id, embedding, metadata, content)`` rows of pgvector's table: earlier rows of these
    ids deleted, then one binary COPY (the upsert of :func:`~finderledge.vector_stores.pgvector.upsert_rows`)."""
    from psycopg import sql

    encoded = []
    for cid, emb, md, text in rows:
        js, exact = metadata_columns(md)
        encoded.append((cid, _vector_bytes(emb), js, exact, text))
    any_sql, ids = text_any([r[0] for r in encoded])
    cur.execute(
        sql.SQL("DELETE FROM {} WHERE id = " + any_sql.replace("?", "%s")).format(
            sql.Identifier(schema, table)
        ),
        (ids,),
    )
    types = {
        "id": "text",
        "embedding": "vector",
        "metadata": "jsonb",
        "exact_metadata": "text",
        "content": "text",
    }
    copy_rows(cur, schema, table, list(types), encoded, types)


# -- the HNSW index, built once after a large load ------------------------------------------------------------
def _estimated_rows(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    """The planner's row estimate of ``schema.table`` (no scan; 0 when never analysed)."""
    row = conn.execute(
        "SELECT greatest(c.reltuples, 0)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s",
        (schema, table),
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@contextmanager
def _build_progress(
    dialect: BulkDialect, conn: psycopg.Connection[Any], what: str, total: int | None
) -> Iterator[None]:
    """Around an index build on ``conn``: a progress line every :data:`~finderledge.progress.INTERVAL` seconds
    (from a thread polling ``pg_stat_progress_create_index``, joined before this returns)."""
    where = f"ledger {dialect.name}"
    pid = conn.info.backend_pid
    stop = threading.Event()
    log = ProgressLog(f"{where}: building {what}", total, "rows")

    def poll() -> None:
        try:
            with dialect.reading() as watcher:  # a pool connection: this thread pins none
                while not stop.wait(min(INTERVAL, 1.0)):
                    row = watcher.execute(
                        "SELECT tuples_done FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
                    ).fetchone()
                    if row is not None and row[0] is not None and int(row[0]) > log.done:
                        log.update(int(row[0]) - log.done)
        except Exception:  # progress lines only; the build goes on
            logger.debug("%s: index build progress unavailable", where, exc_info=True)

    watcher = threading.Thread(target=poll, name="finderledge-index-progress", daemon=True)
    watcher.start()
    note = "failed"
    try:
        yield
        note = "done"
    finally:
        stop.set()
        watcher.join()
        if note == "done" and log.total:
            log.update(max(0, log.total - log.done))
        log.close(note)


def build_index(dialect: BulkDialect, conn: psycopg.Connection[Any], table: str) -> None:
    """Inside a transaction on ``conn``: build the HNSW (and metadata GIN) index when the table is large, with
    progress lines (:func:`_build_progress`)."""
    schema, where = dialect.schema, f"ledger {dialect.name}"
    total = _estimated_rows(conn, schema, table) or None
    started = time.perf_counter()
    with _build_progress(dialect, conn, "the vector index", total):
        build_index_when_large(conn, schema, table, dialect.dimension, where)
    logger.info("%s: vector index ready %.1f s after the load", where, time.perf_counter() - started)


def missing_postings_indexes(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """The ``kw_postings`` B-trees (:data:`POSTINGS_INDEXES`) ``schema`` lacks."""
    names = list(POSTINGS_INDEXES)
    rows = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexname = ANY(%s)", (schema, names)
    ).fetchall()
    found = {str(r[0]) for r in rows}
    return [n for n in names if n not in found]


def build_postings_indexes(dialect: BulkDialect, conn: psycopg.Connection[Any]) -> None:
    """Inside a transaction on ``conn``: build the ``kw_postings`` B-trees it lacks (one sort each, with
    ``maintenance_work_mem`` raised to 512MB for the transaction, never lowered), with progress lines."""
    missing = missing_postings_indexes(conn, dialect.schema)
    if not missing:
        return
    conn.execute(
        "SELECT set_config('maintenance_work_mem', '512MB', true)"
        " WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('512MB')"
    )
    total = _estimated_rows(conn, dialect.schema, "kw_postings") or None
    started = time.perf_counter()
    for name in missing:
        with _build_progress(dialect, conn, f"the keyword index {name}", total):
            conn.execute(dialect.sql(POSTINGS_INDEXES[name]))
    logger.info(
        "ledger %s: keyword postings indexes ready %.1f s after the load",
        dialect.name,
        time.perf_counter() - started,
    )


class BulkLoad:
    """One write call's bulk load (see the module docstring): whether it defers the HNSW index and the
    ``kw_postings`` B-trees, and their builds once it ends."""

    def __init__(self, dialect: BulkDialect, table: str, expected: int) -> None:
        self.dialect, self.table, self.expected = dialect, table, int(expected)
        self.written = 0
        self.deferred = False  # the HNSW index
        self.postings_deferred = False  # the kw_postings B-trees (and the kw_terms additions held back)
        #: each commit's document frequencies held back (its transaction id: added once it is seen committed)
        self._held: list[tuple[str, Counter[tuple[str, str]]]] = []
        self._recount = False  # a dead loader's record was taken over: kw_terms is counted again at the end
        self.key = advisory_key("bulk", dialect.schema)
        self._lock_conn: psycopg.Connection[Any] | None = None

    def _large(self, conn: psycopg.Connection[Any], table: str) -> bool:
        """Whether the call writes enough rows, against what ``table`` holds, for one build to beat row upkeep."""
        held = _estimated_rows(conn, self.dialect.schema, table)
        return max(self.expected, self.written) >= max(BULK_INDEX_MIN_CHUNKS, BULK_INDEX_SHARE * held)

    def _first_load(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether ``kw_docs`` holds at most 1/:data:`FIRST_LOAD_RATIO` of the chunks the call writes (counted,
        reading at most that many rows: a table never analysed has no estimate)."""
        most = max(self.expected, self.written) // FIRST_LOAD_RATIO
        row = conn.execute(
            self.dialect.sql("SELECT count(*) FROM (SELECT 1 FROM {s}kw_docs LIMIT ?) t"), (most + 1,)
        ).fetchone()
        return row is not None and int(row[0]) <= most

    def _owns(self, conn: psycopg.Connection[Any]) -> bool:
        """Hold the bulk key (session-level, taken once); False: another process's bulk load holds it."""
        if self._lock_conn is not None:
            return True
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        if not (row and row[0]):
            return False
        self._lock_conn = conn
        return True

    def _record(self, conn: psycopg.Connection[Any], key: str) -> None:
        d = self.dialect
        conn.execute(
            d.insert("info", ("key", "value"), "replace", "key"),
            (key, f"deferred by a bulk load since {time.time():.0f}"),
        )

    def begin(self, tx: psycopg.Cursor[Any], chunks: int, embedded: int) -> None:
        """First in a commit of ``chunks`` chunks, ``embedded`` of them with a vector: defer the indexes when the
        call is large enough (the HNSW index only when the commit writes vectors)."""
        self.written += chunks
        if chunks == 0:
            return
        d = self.dialect
        conn = tx.connection
        dim = d.dimension
        from psycopg import sql

        if (
            not self.deferred
            and embedded > 0
            and dim is not None
            and dim <= MAX_INDEXED_DIMENSION
            and self._large(conn, self.table)
            and self._owns(conn)
        ):
            self.deferred = True
            dropped = has_index(conn, d.schema, self.table)
            conn.execute(
                sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(d.schema, index_name(self.table)))
            )
            self._record(conn, INDEX_STATE_KEY)
            logger.info(
                "ledger %s: bulk load of ~%d chunks: the vector index is %s and built once after it",
                d.name,
                max(self.expected, self.written),
                "dropped" if dropped else "not built",
            )
        if (
            not self.postings_deferred
            and d.postings.recorded(conn) is not None
            and self._large(conn, "kw_docs")
            and self._owns(conn)
        ):
            self.postings_deferred = True
            # a loader that died held its frequencies back: count them all
            self._recount = recorded(d, conn, POSTINGS_STATE_KEY)
            names = list(DEFERRED_POSTINGS_INDEXES)
            if self._first_load(conn):  # the deletes that need the doc B-tree find (almost) nothing
                names.append("kw_postings_doc")
            for name in names:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(d.schema, name)))
            self._record(conn, POSTINGS_STATE_KEY)
            logger.info(
                "ledger %s: bulk load of ~%d chunks: the keyword postings indexes are built once after it",
                d.name,
                max(self.expected, self.written),
            )

    def held_terms(self, tx: psycopg.Cursor[Any]) -> Counter[tuple[str, str]] | None:
        """In a commit: where its ``kw_terms`` additions go while the postings are deferred (None: to the table)."""
        if not self.postings_deferred:
            return None
        row = tx.execute("SELECT pg_current_xact_id()::text").fetchone()
        held: Counter[tuple[str, str]] = Counter()
        self._held.append((str(row[0]) if row else "", held))
        return held

    def _add_held(self, tx: psycopg.Cursor[Any]) -> None:
        """Under the commit key: add the committed commits' held ``kw_terms`` additions in one upsert (or count
        ``kw_terms`` again, :attr:`_recount`) and clear the postings record, unless it is gone (another session
        took it over from a loader it found dead, and counted them)."""
        d = self.dialect
        tx.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("commit", d.schema),))
        gone = tx.execute(
            d.sql("DELETE FROM {s}info WHERE key = ? RETURNING 1"), (POSTINGS_STATE_KEY,)
        ).fetchone()
        if gone is None:
            return
        if self._recount:
            d.postings.recount(tx)
            return
        xids = [x for x, _ in self._held]
        rows = tx.execute(
            "SELECT x, pg_xact_status(x::xid8) FROM unnest(%s::text[]) AS x", (xids,)
        ).fetchall()
        committed = {str(x) for x, status in rows if status == "committed"}
        total: Counter[tuple[str, str]] = Counter()
        for xid, held in self._held:
            if xid in committed:
                total.update(held)
        d.postings.add_held(tx, total)

    def _analyze(self) -> None:
        """The planner's statistics after a large call (:func:`refresh_statistics`); a failure is logged, not
        raised: the call's rows are committed, and autovacuum refreshes them later."""
        if self.written < ANALYZE_MIN_CHUNKS:
            return
        from psycopg.errors import LockNotAvailable

        d = self.dialect
        try:
            with d.writing() as tx:
                refresh_statistics(d, tx.connection, self.written)
        except LockNotAvailable:
            logger.info("ledger %s: the planner's statistics are left to autovacuum: a table is busy", d.name)
        except Exception:
            logger.warning("ledger %s: refreshing the planner's statistics failed", d.name, exc_info=True)

    def finish(self) -> None:
        """After the call: build the deferred indexes once (the keyword B-trees first: a search without them
        scans every posting), add the held-back ``kw_terms`` additions in one upsert, and clear their records (a
        failure leaves both to the next write or open); release the bulk key."""
        d = self.dialect
        try:
            if self.postings_deferred:
                with d.writing() as tx:
                    build_postings_indexes(d, tx.connection)
                with d.writing() as tx:
                    self._add_held(tx)
            if self.deferred:
                with d.writing() as tx:
                    build_index(d, tx.connection, self.table)
                    tx.execute(d.sql("DELETE FROM {s}info WHERE key = ?"), (INDEX_STATE_KEY,))
            self._analyze()
        finally:
            conn = self._lock_conn
            if conn is not None and not conn.closed and not conn.broken:
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
                except Exception:  # the lock goes with the connection
                    logger.warning("ledger %s: releasing the bulk key failed", d.name, exc_info=True)


def refresh_statistics(dialect: BulkDialect, conn: psycopg.Connection[Any], written: int) -> bool:
    """After a write call of ``written`` chunks: ``ANALYZE`` the tables it grew when it wrote at least
    :data:`ANALYZE_MIN_CHUNKS` and :data:`ANALYZE_SHARE` of the chunk rows the last statistics (or an index
    build) counted, or there were none; whether it did."""
    if written < ANALYZE_MIN_CHUNKS:
        return False
    schema = dialect.schema
    rows = conn.execute(  # the tables that exist, with the planner's row count (-1: never counted)
        "SELECT c.relname, c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind = 'r'",
        (schema, [dialect.vectors_table, *GROWN_TABLES]),
    ).fetchall()
    counts = {str(r[0]): float(r[1]) for r in rows}
    counted = counts.get("chunks", -1.0)
    if not counts or (counted >= 0 and written < ANALYZE_SHARE * counted):
        return False
    names = sorted(counts)
    from psycopg import sql

    started = time.perf_counter()
    # another session building or dropping an index on one of them holds a conflicting lock for as long as that
    # takes: the statistics are left to autovacuum rather than holding the caller's write call
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(ANALYZE_LOCK_WAIT_S * 1000)}ms",))
    conn.execute(sql.SQL("ANALYZE {}").format(sql.SQL(", ").join(sql.Identifier(schema, n) for n in names)))
    logger.info(
        "ledger %s: the planner's statistics of %d tables refreshed after %d chunks in %.2f s",
        dialect.name,
        len(names),
        written,
        time.perf_counter() - started,
    )
    return True


def recorded(dialect: BulkDialect, conn: Any, key: str) -> bool:
    """Whether a deferred build's record (:data:`INDEX_STATE_KEY`, :data:`POSTINGS_STATE_KEY`) is in ``info``."""
    return conn.execute(dialect.sql("SELECT 1 FROM {s}info WHERE key = ?"), (key,)).fetchone() is not None


def _claim(dialect: BulkDialect, tx: psycopg.Cursor[Any], key: str) -> bool | None:
    """Whether the index build recorded under ``key`` is left to this transaction: None, no record; False, a
    live bulk load in another session owns it; True, its loader died and the record is cleared here."""
    if not recorded(dialect, tx, key):
        return None
    row = tx.execute(
        "SELECT pg_try_advisory_xact_lock(%s)", (advisory_key("bulk", dialect.schema),)
    ).fetchone()
    if not (row and row[0]):
        return False
    tx.execute(dialect.sql("DELETE FROM {s}info WHERE key = ?"), (key,))
    return True


def owned_elsewhere(dialect: BulkDialect, tx: psycopg.Cursor[Any], table: str) -> bool:
    """In a commit not deferring the index: whether a live bulk load in another session owns its build (then
    this write leaves it).  A record whose loader died is cleared here; the caller then builds the index."""
    claimed = _claim(dialect, tx, INDEX_STATE_KEY)
    if claimed:
        logger.info(
            "ledger %s: a bulk load ended without building the vector index: building it", dialect.name
        )
    return claimed is False


def postings_left(dialect: BulkDialect, tx: psycopg.Cursor[Any]) -> None:
    """In a commit not deferring the ``kw_postings`` B-trees: build them, and count ``kw_terms`` again, when a bulk
    load that died left them unbuilt (a live one in another session builds them itself)."""
    if _claim(dialect, tx, POSTINGS_STATE_KEY):
        logger.info(
            "ledger %s: a bulk load ended without building the keyword postings indexes: building them",
            dialect.name,
        )
        build_postings_indexes(dialect, tx.connection)
        dialect.postings.recount(tx)  # its held-back document frequencies: counted from the postings


def recover(dialect: BulkDialect, table: str) -> None:
    """At open: a bulk load that died left indexes unbuilt (their records in ``info``): build them now, unless
    a live bulk load owns them."""
    with dialect.reading() as conn:
        rows = conn.execute(
            dialect.sql("SELECT key FROM {s}info WHERE key = ANY(?)"),
            ([INDEX_STATE_KEY, POSTINGS_STATE_KEY],),
        ).fetchall()
    keys = {str(r[0]) for r in rows}
    if POSTINGS_STATE_KEY in keys:
        with dialect.writing() as tx:
            postings_left(dialect, tx)
    if INDEX_STATE_KEY not in keys or dialect.dimension is None:
        return
    with dialect.writing() as tx:
        if owned_elsewhere(dialect, tx, table):
            return
        build_index(dialect, tx.connection, table)


@contextmanager
def bulk_load(ledger: Any, expected: int = 0) -> Iterator[None]:
    """Around one write call to ``ledger``, or a block of them: on a PostgreSQL ledger, the call may defer the HNSW
    index and build it once at its end (``expected``: chunks it is expected to write, 0 if unknown); elsewhere
    nothing.  Calls inside it (another thread's included) join its load."""
    dialect: BulkDialect | None = getattr(ledger, "dialect", None)
    if dialect is None or getattr(dialect, "start_bulk", None) is None:  # not PostgreSQL
        yield
        return
    load = BulkLoad(dialect, dialect.vectors_table, expected)
    if not dialect.start_bulk(load):  # another thread's call of this process is the bulk load
        yield
        return
    try:
        yield
    finally:
        dialect.end_bulk(load)
        load.finish()


W = TypeVar("W")
P = ParamSpec("P")
R = TypeVar("R")


def bulk_writes(method: Callable[Concatenate[W, P], R]) -> Callable[Concatenate[W, P], R]:
    """Decorate a writer method ``(self, source, …)`` whose ``self._engine.ledger`` it writes: the call is one
    :func:`bulk_load` (expected chunks: the length of ``source`` when it is a list or tuple)."""

    @functools.wraps(method)
    def wrapper(self: W, /, *args: P.args, **kwargs: P.kwargs) -> R:
        source = args[0] if args else kwargs.get("source")
        expected = len(source) if isinstance(source, (list, tuple)) else 0
        ledger = getattr(self, "_engine").ledger  # noqa: B009 - W is any writer class
        with bulk_load(ledger, expected):
            return method(self, *args, **kwargs)

    return wrapper
