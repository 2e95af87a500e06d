"""pgvector as a FinderLedge vector store: one table ``(id, embedding vector, metadata jsonb, exact_metadata,
content)`` in a PostgreSQL schema, searched by cosine distance with the filter inside the query.

Standalone (``PgVectorStore(url, dimension=…)``, ``vector_store="pgvector"``): a store every process shares
(``location = SHARED``).  Inside a :class:`~finderledge.ledgers.postgres.PostgresLedger` (its
``vector_store(dimension)``): the ledger's ``vectors`` table, written by the ledger in the same transaction as
the chunks (``location = LEDGER``).

**Dimension.**  The ``embedding`` column is created untyped (``vector``); once the dimension is known it is
altered to ``vector(dim)``.  The column's type records the dimension: a store or ledger opened with another
one raises :class:`~finderledge.errors.IncompatibleIndexError`.

**Indexes.**  Once a write leaves the table with more than :data:`EXACT_THRESHOLD` rows, that write builds, in
bulk and inside its transaction, the HNSW index (``vector_cosine_ops``; pgvector's defaults m=16,
ef_construction=64; ``maintenance_work_mem`` 512MB for the build) and a GIN index over ``metadata``
(``jsonb_path_ops``).  Below the threshold every search is exact anyway and an index only slows writes:
measured here (2 loaded cores, 384-d), a commit of 1,000 chunks took 0.7 s without HNSW and 3.4-4 s with it
(~3-4 ms an insert), while a bulk build costs ~0.4 ms a row (100,000 rows: 41 s; the GIN index 1 s).
pgvector indexes at most 2,000 dimensions; above that there is no HNSW index and every search is exact.

**Scores** are cosine similarities, ``1 - (embedding <=> q)``, the scale of the FAISS and Chroma backends.

**Filters** are SQL over ``metadata`` (see :mod:`.pg_filter`), inside the vector query; every returned row is
checked again with :func:`finderledge.filters.compile_filter` (rows whose metadata ``jsonb`` cannot hold
exactly — a NUL character — pass the SQL and are decided there, on their exact JSON).  ``$eq``/``$in``/
``$contains`` carry a containment test (``metadata @> …``) the GIN index serves.

**Search plan** (pgvector 0.6 has no iterative index scans: an HNSW scan returns at most ``hnsw.ef_search``
candidates and the filter is applied to those only):

* *exact* (ordered outside an ``OFFSET 0`` subquery, which no HNSW scan can serve: a sequential scan, or a GIN
  bitmap scan for a selective filter; one statement, one round trip) when the
  table holds at most :data:`EXACT_THRESHOLD` rows, when ``k`` exceeds :data:`MAX_EF_SEARCH`, or when there
  is no HNSW index.  Until the table is known to be large, the bounded count and the exact scan are one
  statement: the scan is gated on the count (a one-time filter: the server skips it on a large table), so a
  small table's search waits for one answer, not two.  A "small" answer is kept :data:`SMALL_CACHE_SECONDS`:
  searches within it send the exact scan alone (the bounded count cost the server ~3 ms of a 10 ms search of
  10,000 rows, ~0.9 of 3.5 ms at 2,000); an exact scan is right at any size, so a table grown meanwhile by
  another process is only searched more slowly until the count is asked again.  At that size an exact scan
  costs a few milliseconds (measured: 1.0 ms for 1,000 rows, 3.5 ms for 5,000, 6.5 ms for 10,000, 12.7 ms for
  20,000; an HNSW query ~2 ms);
* otherwise *HNSW* (``enable_seqscan`` off) with ``SET LOCAL hnsw.ef_search`` = ``clamp(2k, 200, 1000)``, or
  ``clamp(10k, 200, 1000)`` with a filter (it discards candidates).  If fewer than ``k`` rows pass, the same
  query runs *exact*: the filter restricts the scan, through the GIN index when it is selective.

Measured on 100,000 clustered synthetic 384-d rows, k=10, p50 over 100 queries (2 loaded cores; PostgreSQL's
default 128MB shared_buffers, smaller than the table): no filter, exact 84-119 ms vs HNSW 2 ms, recall@10 of
HNSW against exact 0.98-1.00; a filter passing half the rows, 100-138 ms vs 6-7 ms, recall 1.000; a tenant
passing 2% of the rows, 90 ms exact without the GIN index, 20 ms with it, 3.8 ms as planned, recall 1.000.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigurationError, IncompatibleIndexError
from ..filters import compile_filter
from ..storage.postgres import (
    advisory_key,
    connect_checked,
    make_pool,
    prepare_schema,
    require_psycopg,
    safe_name,
)
from .base import LEDGER, SHARED, VectorStore
from .pg_filter import jsonb_text, to_sql

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = [
    "EXACT_THRESHOLD",
    "MAX_EF_SEARCH",
    "MAX_INDEXED_DIMENSION",
    "MIN_EF_SEARCH",
    "PgVectorStore",
    "open_pgvector",
    "vector_literal",
]

logger = logging.getLogger(__name__)

EXACT_THRESHOLD = 10_000  # rows: at most this many, search by exact scan
MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
# measured on 100k clustered 384-d rows (benchmarks/bench_postgres.py), k=10: recall@10 0.92 at ef_search 40
# (pgvector's default; 8 of 200 queries below 0.5), 0.95 at 100, 0.96 at 200 (none below 0.5) for 1.3 -> 2.0 ms
MIN_EF_SEARCH = 200
MAX_INDEXED_DIMENSION = 2000  # pgvector's HNSW limit for vector columns
_SIZE_CACHE_SECONDS = 30.0  # "is the table large?" is asked again after this long once it was large
SMALL_CACHE_SECONDS = 1.0  # and this long after it was found small (an exact scan is right at any size)


def vector_literal(vector: np.ndarray | Sequence[float]) -> str:
    """The text form of a float32 vector (``[x,y,…]``, each value exact: float32 -> double -> repr)."""
    return "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).astype(np.float64).tolist())) + "]"


def metadata_columns(metadata: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(jsonb_json, exact_json)``: what the ``metadata`` and ``exact_metadata`` columns hold for a row
    (``exact_json`` only when ``jsonb`` cannot hold the metadata exactly)."""
    text, lossy = jsonb_text(metadata)
    return text, (
        json.dumps(dict(metadata), ensure_ascii=True, sort_keys=True, default=str) if lossy else None
    )


def table_ddl(schema: str, table: str) -> list[Any]:
    """The statements creating the vector table (idempotent)."""
    from psycopg import sql

    t = sql.Identifier(schema, table)
    return [
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, embedding vector, metadata jsonb NOT NULL"
            " DEFAULT '{{}}'::jsonb, exact_metadata text, content text)"
        ).format(t),
        # the filter's "OR exact_metadata IS NOT NULL" arm: with it, a metadata index stays usable (BitmapOr)
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (id) WHERE exact_metadata IS NOT NULL").format(
            sql.Identifier(f"{table}_lossy"), t
        ),
    ]


def column_dimension(conn: psycopg.Connection[Any], schema: str, table: str) -> int | None:
    """The dimension recorded by the ``embedding`` column's type (None while it is untyped)."""
    row = conn.execute(
        "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding' AND NOT a.attisdropped",
        (schema, table),
    ).fetchone()
    if row is None or row[0] is None or int(row[0]) < 0:
        return None
    return int(row[0])


def ensure_dimension(
    conn: psycopg.Connection[Any], schema: str, table: str, dimension: int, where: str
) -> None:
    """Record ``dimension`` in the column type and build the HNSW index (inside the caller's transaction), or
    raise :class:`IncompatibleIndexError` when another dimension is recorded."""
    from psycopg import errors as pg_errors
    from psycopg import sql

    dimension = int(dimension)
    if dimension < 1:
        raise ConfigurationError(f"{where}: vector dimension must be positive, got {dimension}")
    current = column_dimension(conn, schema, table)
    if current is None:
        conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema, table)))
        current = column_dimension(conn, schema, table)  # another process may have set it meanwhile
    if current is not None:
        if current != dimension:
            raise IncompatibleIndexError(
                f"{where}: its vectors have dimension {current}; this embedding model produces {dimension}"
            )
        return
    try:
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN embedding TYPE vector({})").format(
                sql.Identifier(schema, table), sql.Literal(dimension)
            )
        )
    except pg_errors.DataException as exc:
        raise IncompatibleIndexError(
            f"{where}: stored vectors do not all have dimension {dimension} ({exc.diag.message_primary})"
        ) from None
    if dimension > MAX_INDEXED_DIMENSION:
        logger.info(
            "%s: dimension %d is above pgvector's HNSW limit (%d); searches scan exactly",
            where,
            dimension,
            MAX_INDEXED_DIMENSION,
        )
    else:
        build_index_when_large(conn, schema, table, dimension, where)


def index_name(table: str, kind: str = "hnsw") -> str:
    return f"{table}_embedding_hnsw" if kind == "hnsw" else f"{table}_metadata_gin"


def has_index(conn: psycopg.Connection[Any], schema: str, table: str, kind: str = "hnsw") -> bool:
    """Whether the HNSW (``kind="hnsw"``) or the metadata GIN (``"gin"``) index exists and is valid."""
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, index_name(table, kind)),
    ).fetchone()
    return bool(row and row[0])


def build_index_when_large(
    conn: psycopg.Connection[Any], schema: str, table: str, dimension: int | None, where: str
) -> None:
    """Inside a write transaction: once the table holds more than :data:`EXACT_THRESHOLD` rows, build the
    HNSW index and a GIN index over ``metadata`` (``jsonb_path_ops``: selective filters read only their rows).
    Below the threshold every search is exact and an index only slows writes (HNSW inserts cost ~3-4 ms a row
    here; a bulk build ~0.25 ms).  Serialised by an advisory lock, so two writers never both build them."""
    from psycopg import sql

    wanted = ["gin"] + (["hnsw"] if dimension is not None and dimension <= MAX_INDEXED_DIMENSION else [])
    if all(has_index(conn, schema, table, kind) for kind in wanted):
        return
    t = sql.Identifier(schema, table)
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} LIMIT %s) s").format(t), (EXACT_THRESHOLD + 1,)
    ).fetchone()
    if not row or int(row[0]) <= EXACT_THRESHOLD:
        return
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("index", f"{schema}.{table}"),))
    conn.execute(  # the HNSW graph built in memory: raised to 512MB, never lowered below the server's setting
        "SELECT set_config('maintenance_work_mem', '512MB', true)"
        " WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('512MB')"
    )
    for kind in wanted:
        if has_index(conn, schema, table, kind):
            continue
        started = time.perf_counter()
        method = "hnsw (embedding vector_cosine_ops)" if kind == "hnsw" else "gin (metadata jsonb_path_ops)"
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING " + method).format(
                sql.Identifier(index_name(table, kind)), t
            )
        )
        logger.info("%s: built the %s index in %.1f s", where, kind.upper(), time.perf_counter() - started)


def upsert_rows(
    cur: psycopg.Cursor[Any],
    schema: str,
    table: str,
    rows: Iterable[tuple[str, Any, Mapping[str, Any], str | None]],
) -> None:
    """Insert or replace ``(id, embedding, metadata, content)`` rows (``executemany``: one pipeline)."""
    from psycopg import sql

    params = []
    for cid, emb, md, text in rows:
        js, exact = metadata_columns(md)
        params.append((cid, vector_literal(emb), js, exact, text))
    if not params:
        return
    cur.executemany(
        sql.SQL(
            "INSERT INTO {} (id, embedding, metadata, exact_metadata, content) VALUES (%s, %s::vector, %s::jsonb, %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, metadata = EXCLUDED.metadata,"
            " exact_metadata = EXCLUDED.exact_metadata, content = EXCLUDED.content"
        ).format(sql.Identifier(schema, table)),
        params,
    )


class PgVectorStore(VectorStore):
    """A pgvector table as a :class:`VectorStore` (see the module docstring for the search plan).

    ``PgVectorStore(url, dimension=…, schema=…, table=…)`` opens (creating what is missing) a standalone store;
    a :class:`~finderledge.ledgers.postgres.PostgresLedger` builds its own over its pool."""

    name = "pgvector"

    def __init__(
        self,
        url: str | None = None,
        *,
        dimension: int,
        schema: str = "finderledge",
        table: str = "vectors",
        _pool: ConnectionPool[Any] | None = None,
        _label: str | None = None,
        _on_close: Callable[[], None] | None = None,
    ) -> None:
        self.schema, self.table, self.dimension = schema, table, int(dimension)
        self._size_lock = threading.Lock()
        self._large_until = 0.0
        self._small_until = 0.0  # until then, searches scan exactly without counting (SMALL_CACHE_SECONDS)
        self._closed = False
        self._on_close = _on_close
        if _pool is not None:
            self.location = LEDGER
            self._pool, self._owns_pool = _pool, False
            self.label = _label or f"{schema}.{table}"
            with self._pool.connection() as conn, conn.transaction():
                ensure_dimension(conn, schema, table, self.dimension, self.label)
        else:
            if not url:
                raise ConfigurationError("vector_store='pgvector': expected a PostgreSQL URL (url=…)")
            self.location = SHARED
            self.label = safe_name(url, f"{schema}.{table}")
            with connect_checked(url, self.label) as conn:
                ext_schema = prepare_schema(conn, schema, self.label)
                with conn.transaction():
                    for statement in table_ddl(schema, table):
                        conn.execute(statement)
                    ensure_dimension(conn, schema, table, self.dimension, self.label)
            self._pool, self._owns_pool = make_pool(url, ext_schema, self.label), True
        from psycopg import sql

        self._t = sql.Identifier(schema, table)

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        with self._pool.connection() as conn:
            yield conn

    # -- writes -------------------------------------------------------------------------------------
    def add(
        self,
        ids: Sequence[str],
        embeddings: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str] | None = None,
    ) -> None:
        if len(ids) == 0:
            return
        vectors = np.asarray(embeddings, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension:
            raise IncompatibleIndexError(
                f"{self.label}: expected vectors of dimension {self.dimension}, got shape {vectors.shape}"
            )
        rows = [
            (i, v, md, None if texts is None else _storable(texts[n]))
            for n, (i, v, md) in enumerate(zip(ids, vectors, metadatas))
        ]
        with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            upsert_rows(cur, self.schema, self.table, rows)
            build_index_when_large(conn, self.schema, self.table, self.dimension, self.label)
        with self._size_lock:
            self._small_until = 0.0  # this process's own write: the next search counts again

    def delete(self, ids: Iterable[str]) -> None:
        from psycopg import sql

        id_list = list(ids)
        if not id_list:
            return
        with self._conn() as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(self._t), (id_list,))

    # -- reads --------------------------------------------------------------------------------------
    def ids(self) -> set[str]:
        from psycopg import sql

        with self._conn() as conn:
            return {r[0] for r in conn.execute(sql.SQL("SELECT id FROM {}").format(self._t))}

    def __len__(self) -> int:
        from psycopg import sql

        with self._conn() as conn:
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(self._t)).fetchone()
        return int(row[0]) if row else 0

    def _indexed_large(self, conn: psycopg.Connection[Any], started: float) -> bool:
        """A table counted above :data:`EXACT_THRESHOLD` rows: whether its HNSW index exists (a "yes" is kept
        :data:`_SIZE_CACHE_SECONDS` from ``started``, so a large table is not counted on every search)."""
        large = has_index(conn, self.schema, self.table)
        if large:
            with self._size_lock:
                self._large_until = started + _SIZE_CACHE_SECONDS
        return large

    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        if k < 1:
            return []
        pred = compile_filter(filter)
        where, params = to_sql(filter)
        query = np.asarray(embedding, dtype=np.float32)
        if query.shape != (self.dimension,):
            raise IncompatibleIndexError(
                f"{self.label}: expected a query vector of dimension {self.dimension}, "
                f"got shape {query.shape}"
            )
        literal = vector_literal(query)
        n = k
        with self._conn() as conn:
            if k <= MAX_EF_SEARCH:
                started = time.monotonic()
                large = started < self._large_until
                if not large and started >= self._small_until:  # counted and, when small, searched exactly
                    count, hits, exhausted = self._sized_exact(conn, literal, k, where, params, pred)
                    if count <= EXACT_THRESHOLD:
                        with self._size_lock:
                            self._small_until = started + SMALL_CACHE_SECONDS
                        if len(hits) >= k or exhausted:
                            return hits[:k]
                        n = 4 * k  # lossy rows failed the check: widen, below
                    else:
                        large = self._indexed_large(conn, started)
                if large:
                    ef = min(MAX_EF_SEARCH, max(MIN_EF_SEARCH, 2 * k) if pred is None else max(200, 10 * k))
                    hits, _ = self._query(conn, literal, k, where, params, pred, ef)
                    if len(hits) >= k:
                        return hits[:k]
            while True:  # exact; rows the SQL could not decide (lossy) may fail the check: widen until k pass
                hits, exhausted = self._query(conn, literal, n, where, params, pred, None)
                if len(hits) >= k or exhausted:
                    return hits[:k]
                n *= 4

    def _sized_exact(
        self,
        conn: psycopg.Connection[Any],
        literal: str,
        n: int,
        where: str,
        params: list[Any],
        pred: Callable[[Mapping[str, Any]], bool] | None,
    ) -> tuple[int, list[tuple[str, float]], bool]:
        """The table's row count bounded at :data:`EXACT_THRESHOLD` + 1 and, when it is at most the threshold,
        the ``n`` nearest rows by exact scan (as :meth:`_query`), in one statement: the count, then the scan
        gated on it (a one-time filter, so a large table is not scanned); every row carries the count, and a
        row of NULLs stands for no hit.  A ``LATERAL`` join runs as a nested loop over the one count row, so the
        rows come in the scan's order, as :meth:`_query`'s do."""
        from psycopg import sql

        scan = self._scan(where, pred is not None)
        statement = sql.SQL(
            "WITH n AS MATERIALIZED (SELECT count(*) AS c FROM (SELECT 1 FROM {} LIMIT %s) x)"
            " SELECT n.c, s.* FROM n LEFT JOIN LATERAL (SELECT * FROM (" + scan + " OFFSET 0) s0"
            " WHERE n.c <= %s ORDER BY d LIMIT %s) s ON true"
        ).format(self._t, self._t)
        rows = conn.execute(statement, (EXACT_THRESHOLD + 1, literal, *params, EXACT_THRESHOLD, n)).fetchall()
        count = int(rows[0][0]) if rows else 0
        found = [row[1:] for row in rows if row[1] is not None]
        return count, self._checked(found, pred), len(found) < n

    def _statement(self, where: str, with_metadata: bool, exact: bool) -> Any:
        """The search query: parameters are the query vector, the filter's, and the limit.  ``exact``: the
        rows are ordered outside a subquery the planner may not flatten (``OFFSET 0``), so no HNSW scan can
        serve the order (one statement, no transaction to switch index scans off)."""
        from psycopg import sql

        scan = self._scan(where, with_metadata)
        if exact:
            return sql.SQL("SELECT * FROM (" + scan + " OFFSET 0) s ORDER BY d LIMIT %s").format(self._t)
        return sql.SQL(scan + " ORDER BY d LIMIT %s").format(self._t)

    @staticmethod
    def _scan(where: str, with_metadata: bool) -> str:
        """The rows a search orders: id, cosine distance ``d`` (and the metadata to check), filtered by ``where``
        (the table a ``{}`` placeholder; parameters: the query vector, then the filter's)."""
        cols = ", metadata, exact_metadata" if with_metadata else ""
        lossy = " OR exact_metadata IS NOT NULL" if where != "TRUE" else ""
        return (
            "SELECT id, embedding <=> %s::vector AS d" + cols + " FROM {} WHERE embedding IS NOT NULL"
            " AND (" + where + lossy + ")"
        )

    def _query(
        self,
        conn: psycopg.Connection[Any],
        literal: str,
        n: int,
        where: str,
        params: list[Any],
        pred: Callable[[Mapping[str, Any]], bool] | None,
        ef: int | None,
    ) -> tuple[list[tuple[str, float]], bool]:
        """The ``n`` nearest rows passing ``where`` (HNSW with ``ef``, or exact when ``ef`` is None), checked
        with ``pred``; returns them and whether the scan ran out of rows."""
        statement = self._statement(where, pred is not None, ef is None)
        if ef is None:
            rows = conn.execute(statement, (literal, *params, n)).fetchall()
        else:  # the settings and the scan in one pipeline: one round trip (not BEGIN, two statements, COMMIT)
            with conn.pipeline():  # statements up to the pipeline's sync run in one implicit transaction:
                conn.execute(  # the settings (local to it) hold for the scan, and end with it
                    "SELECT set_config('hnsw.ef_search', %s, true), set_config('enable_seqscan', 'off', true)",
                    (str(ef),),
                )
                cursor = conn.execute(statement, (literal, *params, n))
            rows = cursor.fetchall()
        return self._checked(rows, pred), len(rows) < n

    @staticmethod
    def _checked(
        rows: Sequence[Sequence[Any]], pred: Callable[[Mapping[str, Any]], bool] | None
    ) -> list[tuple[str, float]]:
        """``(id, cosine)`` of the scanned rows whose exact metadata passes ``pred`` (rows: id, distance, and
        with a filter the metadata ``jsonb`` and its exact JSON)."""
        hits: list[tuple[str, float]] = []
        for row in rows:
            if pred is not None:
                md = json.loads(row[3]) if row[3] is not None else row[2]
                if not pred(md):
                    continue
            distance = float(row[1])
            hits.append((row[0], 0.0 if math.isnan(distance) else 1.0 - distance))  # NaN: a zero vector
        return hits

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_pool:
            self._pool.close()
        if self._on_close is not None:
            self._on_close()


def _storable(text: str | None) -> str | None:
    """A chunk text for the ``content`` column (PostgreSQL text cannot hold NUL: it becomes U+FFFD here; the
    ledger keeps the exact text)."""
    return None if text is None else text.replace("\x00", "\ufffd")


def open_pgvector(
    path: Path | None,
    dimension: int,
    *,
    url: str | None = None,
    schema: str = "finderledge",
    table: str = "vectors",
) -> PgVectorStore:
    """The registry's factory: the pgvector table ``schema.table`` in the database at ``url`` (``path`` is not
    used: the store lives in the database)."""
    if not url:
        raise ConfigurationError(
            "vector_store='pgvector': pass url='postgresql://…' (or use database_url=…, "
            "whose ledger holds the vectors itself)"
        )
    require_psycopg("vector_store='pgvector'")
    return PgVectorStore(url, dimension=dimension, schema=schema, table=table)
