"""The SQLite ledger: a file in the persist directory recording every document and chunk.

:class:`SQLiteLedger` is :class:`~finderledge.ledgers.sql.SQLLedger` (every query) over
:class:`SQLiteDialect` (connections, WAL, SQLite's placeholders and the statements it answers its own way).

The vector and keyword indexes are derived from the ledger and can be rebuilt from it (chunk texts,
metadata and embeddings are all kept here).  A write is one SQLite transaction: documents and chunks
are inserted (or deleted) together with a row per document in the ``changes`` log, whose ``seq`` numbers
every change.  Indexes follow that log (see :mod:`finderledge.replica.core`): an index checkpoint records the
``seq`` it reflects, and every process applies the changes after it — so committing to the ledger is
the commit point, and nothing half-written is ever visible.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigurationError, IncompatibleIndexError, LedgerCorruptError
from ..storage.files import Storage, full_disk_error
from ..storage.integrity import is_sqlite_corruption
from .base import (
    COMPLETE,
    INDEX_FOLDERS,
    SCHEMA_VERSION,
    ChunkRecord,
    DocumentRecord,
    check_schema_version,
    iter_batches,
)
from .rows import (
    RowDamage,
    check_chunk_id,
    decode_chunk_metadata,
    decode_document_metadata,
    decode_embedding,
    encode_chunk_metadata,
    encode_document_metadata,
)
from .sql import SAMPLE_SEEK_FACTOR, STAGED_KEY, SQLDialect, SQLLedger
from .wal_checkpoints import WalCheckpointer

__all__ = ["SAMPLE_SEEK_FACTOR", "SQLITE_SCHEMA_VERSION", "SQLiteDialect", "SQLiteLedger"]

logger = logging.getLogger(__name__)

PAGE_SIZE = 16384  # bytes per SQLite page of a new ledger (see _connect)
WRITER_CACHE_KIB = 65536  # the writing connection's page cache (an upper bound: pages are cached as used)
#: bytes of the ledger file a reading connection maps into memory (``PRAGMA mmap_size``): a search reads its
#: hits' rows in place instead of copying each 16 kB page it touches out of the OS cache (``pread``), which was
#: most of a keyword search's time at k=100 (issue 41: 100 rows read in 2.2 ms, 0.7 ms mapped).  The pages a
#: process has read count in its RSS as shared file pages (the kernel reclaims them like any cached file); a
#: file larger than this is read past it as before.  FinderLedge never shrinks a ledger file (no VACUUM), which
#: a mapped reader could not survive.  :data:`MMAP_VARIABLE` sets another size (0: read with pread, as before).
READER_MMAP_BYTES = 1 << 31
MMAP_VARIABLE = "FINDERLEDGE_SQLITE_MMAP_BYTES"


def reader_mmap_bytes() -> int:
    """Bytes of the ledger a reading connection maps: ``$FINDERLEDGE_SQLITE_MMAP_BYTES`` when set, else
    :data:`READER_MMAP_BYTES` (a value that is not a whole number >= 0 raises, naming the variable)."""
    raw = os.environ.get(MMAP_VARIABLE, "").strip()
    if not raw:
        return READER_MMAP_BYTES
    if not raw.isdigit():
        raise ConfigurationError(
            f"{MMAP_VARIABLE}: expected a whole number of bytes >= 0 (0: do not map the ledger file), got {raw!r}"
        )
    return int(raw)


#: The layout this SQLite ledger writes: version 5 stores each fact once (a one-chunk document's text in its
#: document row only; metadata without what the columns or the document say, see :mod:`.rows`), a chunk's
#: text hash as its 16 bytes, not 32 hex characters (with a 384-d vector ten rows then fit a 16 kB page, not
#: nine), and has fewer indexes (:data:`_INDEXES`).  A version 4 ledger (every row whole) is read as it is:
#: its rows decode unchanged, new rows are written in version 5's form, and opening it records version 5 (an
#: O(1) change: older FinderLedge then refuses it rather than misread the new rows).
SQLITE_SCHEMA_VERSION = 5
_READS = (SCHEMA_VERSION,)  # older released layouts this one reads
#: a chunk's stored ``content`` when its text is its document's whole text (a value of its own kind: a text,
#: even an empty one, is the chunk's own)
DOCUMENT_TEXT = b""
# a chunk row with what it derives from its document's row (LEFT JOIN documents d: NULL when there is none)
_CHUNK_COLS = (
    "c.id, c.parent_id, c.split_index, CASE WHEN c.content = X'' THEN d.content ELSE c.content END,"
    " c.metadata, d.metadata"
)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    source TEXT,
    content_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    added_at REAL NOT NULL,
    added_seq INTEGER,
    removed_seq INTEGER,
    removed_at REAL
);
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY,
    parent_id TEXT NOT NULL,
    split_index INTEGER NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    embedding BLOB,
    text_hash TEXT
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    chunk_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS embedding_cache (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
) WITHOUT ROWID;
"""
# Indexes of a new ledger.  A document's chunks are found by their ids (:data:`_OF_PARENT`), not by an index
# of parent_id; documents by state only where they are not complete (few rows: removed ones).  A version 4
# ledger keeps its chunks_parent and documents_state indexes (every query below is answered by its indexes
# too; building new ones at open would take time that grows with the corpus).
_INDEXES = """
CREATE INDEX IF NOT EXISTS documents_source_state ON documents(source, state, seq);
CREATE INDEX IF NOT EXISTS documents_pending ON documents(state, removed_at) WHERE state <> 'complete';
CREATE INDEX IF NOT EXISTS chunks_text_hash ON chunks(text_hash);
"""
# the chunks of document p (each ? is p) by the primary key: their ids are ``<p>-NNNN`` (metadata.child_id), all at or
# after ``<p>-`` and before ``<p>.``; parent_id leaves out those of another document whose id starts ``<p>-``
_OF_PARENT = "c.id >= ? || '-' AND c.id < ? || '.' AND c.parent_id = ?"
# the same, counted from the primary key's index alone (no row read): ids ``<p.id>-`` and digits
_IDS_OF = (
    "c.id >= p.id || '-' AND c.id < p.id || '.' AND substr(c.id, length(p.id) + 2) GLOB '[0-9]*'"
    " AND substr(c.id, length(p.id) + 2) NOT GLOB '*[^0-9]*'"
)
_DELETE_CHUNKS_OF = "DELETE FROM chunks WHERE id >= ? || '-' AND id < ? || '.' AND parent_id = ?"
# the first complete chunk at or after a rowid: CROSS JOIN and +state walk chunks by rowid (the planner would
# scan documents by state)
_SEEK = (
    "SELECT c.id FROM chunks c CROSS JOIN documents d ON d.id = c.parent_id "
    "WHERE c.rowid >= ? AND +d.state=? ORDER BY c.rowid LIMIT 1"
)
# documents that are not complete: the first term lets the partial index documents_pending answer, the
# second a version 4 ledger's documents_state (two ranges)
_PENDING = "state <> 'complete' AND (state < 'complete' OR state > 'complete')"


_new = object.__new__


def chunk_record(
    chunk_id: str, parent_id: str, split_index: int, content: str, md: dict[str, Any], emb: Any
) -> ChunkRecord:
    """``ChunkRecord(chunk_id, ...)``, made without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field): the same object in 40 % of the time, and a search decodes k rows."""
    record: ChunkRecord = _new(ChunkRecord)
    record.__dict__.update(
        id=chunk_id, parent_id=parent_id, split_index=split_index, content=content, metadata=md, embedding=emb
    )
    return record


class SQLiteDialect(SQLDialect):
    """SQLite under :class:`SQLLedger`: a file in the persist directory (``path=None``: in memory).

    Each thread reads through its own connection, so a reader sees committed transactions only (SQLite WAL
    snapshots) and never waits for a writer; writes go through one connection under a lock, each in one
    ``BEGIN IMMEDIATE`` transaction (an in-memory ledger's only connection, shared under the lock).  Rows
    store each fact once (:data:`SQLITE_SCHEMA_VERSION`); a chunk's vector is a blob in its row."""

    batch = 500
    supports_staging = True
    no_limit = -1
    last_seq_sql = "SELECT seq FROM sqlite_sequence WHERE name='changes'"
    not_by_index = "+"
    pending = _PENDING + " AND "
    # '$[0]': the stored form of a document's metadata without its derived fields (see .rows)
    document_id = "json_extract(metadata, CASE WHEN metadata LIKE '[%' THEN '$[0].document_id' ELSE '$.document_id' END)"
    document_columns = ("id", "source", "content_hash", "state", "content", "metadata")
    chunk_columns = ("id", "parent_id", "split_index", "content", "metadata", "embedding", "text_hash")
    document_read = "id, source, content_hash, state, content, metadata"
    chunk_read = _CHUNK_COLS
    embedding_read = ", c.embedding"
    document_join = " LEFT JOIN documents d ON d.id = c.parent_id"

    def __init__(self, path: str | Path | None = None) -> None:
        file = Path(path) if path is not None else None
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
            # SQLite follows links (and opens -wal/-shm beside them): the ledger and its journals are real files
            Storage(file.parent).check(file.name + suffix for suffix in ("", "-wal", "-shm", "-journal"))
            if _check_file(file):
                _check_database(file)
        target = str(file) if file is not None else ":memory:"
        self._mmap = reader_mmap_bytes()  # checked at open: a wrong value is named before any search
        try:
            db = _connect(target, file is not None)
            # a write of a few thousand chunks dirties most pages of the id indexes: SQLite's default 2 MB page
            # cache spilled them to the WAL and read them back again and again (at 100k chunks the writes read
            # 10 GB for 0.3 GB stored; 1.9 GB with this cache)
            db.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
        except sqlite3.DatabaseError as exc:
            raise _unreadable(target, exc) from exc
        try:
            version = _recorded_version(db)
            if version is not None:  # checked before anything is created in an older or newer layout
                check_schema_version(target, version, SQLITE_SCHEMA_VERSION, _READS)
            db.executescript(_SCHEMA if version is not None else _SCHEMA + _INDEXES)
        except BaseException as exc:
            db.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise _unreadable(target, exc) from exc
            raise
        self.path, self.name, self._target, self._db = file, target, target, db
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._dimension: int | None = None
        self._closed = False
        # commits leave copying the log into the database to a thread of its own (see wal_checkpoints)
        self._wal: WalCheckpointer | None = None
        if file is not None:
            self._wal = WalCheckpointer(target, lambda: _connect(target, True))
            self._wal.take_over(db)
        if version != str(SQLITE_SCHEMA_VERSION):  # new (a file without our tables was refused above), or
            # version 4: its whole rows are read as they are; new rows are written in version 5's form
            with self.statement() as statement:
                statement.execute(
                    "INSERT OR REPLACE INTO info(key, value) VALUES ('schema_version', ?)",
                    (str(SQLITE_SCHEMA_VERSION),),
                )

    # -- SQL text ------------------------------------------------------------------------------------
    def sql(self, query: str) -> str:
        return query.replace("{s}", "")

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def insert(self, table: str, columns: Sequence[str], conflict: str | None = None, key: str = "") -> str:
        verb = {None: "INSERT", "replace": "INSERT OR REPLACE", "ignore": "INSERT OR IGNORE"}[conflict]
        return f"{verb} INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

    # -- connections ---------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """This thread's own connection (file ledgers) or the shared one under the lock (memory)."""
        try:
            if self.path is None:
                with self._lock:
                    yield self._db
                return
            db = getattr(self._local, "db", None)
            if db is None:
                db = _connect(self._target, True)
                db.execute(f"PRAGMA mmap_size={self._mmap}")
                self._local.db = db
                with self._lock:
                    self._readers.append(db)
            yield db
        except sqlite3.DatabaseError as exc:
            if is_sqlite_corruption(exc):  # damaged after it was checked at open
                raise LedgerCorruptError(self._target, f"the database is damaged ({exc})") from exc
            raise

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self.reading() as db:
            if db.in_transaction:  # nested: the outer snapshot holds
                yield
                return
            db.execute("BEGIN")
            try:
                yield
            finally:
                db.execute("COMMIT")

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        with (
            self._lock,
            _Transaction(self._db, self._target, None if self._wal is None else self._wal.committed),
        ):
            yield self._db

    @contextmanager
    def statement(self) -> Iterator[sqlite3.Connection]:
        with self._lock, _full_disk(self._target):
            yield self._db

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._wal is not None:
                self._wal.close()
            for db in self._readers:
                db.close()
            self._readers.clear()
            self._db.close()

    # -- rows ----------------------------------------------------------------------------------------
    def document_row(self, doc: DocumentRecord) -> tuple[Any, ...]:
        md = encode_document_metadata(doc.id, doc.metadata)
        return (doc.id, doc.source, doc.content_hash, COMPLETE, doc.content, md)

    def chunk_row(self, chunk: ChunkRecord, parent: DocumentRecord | None, text_hash: str) -> tuple[Any, ...]:
        """Only what its document's row (``parent``, written in the same transaction) does not say: no text
        when it is the document's whole text, its metadata's difference."""
        c = chunk
        return (
            c.id,
            c.parent_id,
            c.split_index,
            DOCUMENT_TEXT if parent is not None and c.content == parent.content else c.content,
            encode_chunk_metadata(
                c.id, c.parent_id, c.split_index, c.metadata, None if parent is None else parent.metadata
            ),
            None if c.embedding is None else np.asarray(c.embedding, dtype="<f4").tobytes(),
            _hash_bytes(text_hash) or text_hash,
        )

    def document_fields(self, row: Sequence[Any]) -> tuple[str, str | None, str, str, str, Any]:
        return row[0], row[1], row[2], row[3], row[4], row[5]

    def document_metadata(self, doc_id: str, stored: Any) -> dict[str, Any]:
        return decode_document_metadata(doc_id, stored)

    def chunk(
        self, row: Sequence[Any], with_embedding: bool, info: Callable[[str], str | None]
    ) -> ChunkRecord:
        check_chunk_id(row[0], row[1], row[2])
        if not isinstance(row[3], str):
            raise RowDamage(
                f"its text is its document's, and document {row[1]} is not in the ledger"
                if row[3] is None
                else f"its text is a {type(row[3]).__name__} value, not text"
            )
        emb = None
        if with_embedding and row[6] is not None:
            if self._dimension is None:
                value = info("embedding_dimension")
                self._dimension = int(value) if value and value.isdigit() else None
            emb = decode_embedding(row[6], self._dimension)
        split_index = int(row[2])
        md = decode_chunk_metadata(row[4], row[5], row[0], row[1], split_index)
        return chunk_record(row[0], row[1], split_index, row[3], md, emb)

    # -- statements SQLite answers its own way -------------------------------------------------------
    def next_seqs(self, tx: sqlite3.Connection, count: int) -> list[int]:
        """Drawn here, under the write transaction, so that one ``executemany`` writes them all."""
        row = tx.execute(self.last_seq_sql).fetchone()
        first = (0 if row is None else int(row[0])) + 1
        return list(range(first, first + count))

    def chunk_counts(self, conn: sqlite3.Connection, doc_ids: Sequence[str]) -> dict[str, int]:
        return _counts_of(conn, doc_ids)

    def of_parent(self, parent_id: str) -> tuple[str, list[Any]]:
        return _OF_PARENT, [parent_id, parent_id, parent_id]

    def delete_chunks_of(self, tx: sqlite3.Connection, doc_ids: Sequence[str]) -> None:
        tx.executemany(_DELETE_CHUNKS_OF, [(i, i, i) for i in doc_ids])

    def stored_vectors(self, conn: sqlite3.Connection, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for batch in iter_batches(list(text_hashes), 250):
            # each hash in both stored forms: 16 bytes (version 5 rows) and hex (version 4 rows)
            keys = [*batch, *(b for b in map(_hash_bytes, batch) if b is not None)]
            rows = conn.execute(
                f"SELECT text_hash, embedding FROM chunks WHERE embedding IS NOT NULL"
                f" AND text_hash IN ({','.join('?' * len(keys))})",
                keys,
            )
            found.update(
                (h.hex() if isinstance(h, bytes) else h, np.frombuffer(v, dtype="<f4")) for h, v in rows
            )
        return found

    def counts(self, conn: sqlite3.Connection) -> dict[str, int]:
        return _counts(conn)

    def seek_bounds(self, conn: sqlite3.Connection) -> tuple[int | None, int | None]:
        """The chunks' rowids: two statements (SQLite answers a lone MIN or MAX from the index, both together
        by a full scan)."""
        low = conn.execute("SELECT MIN(rowid) FROM chunks").fetchone()[0]
        high = conn.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0]
        return low, high

    def seek(self, conn: sqlite3.Connection, points: Sequence[int]) -> list[str]:
        """One statement a point (in-process: no round trip to save)."""
        rows = (conn.execute(_SEEK, (point, COMPLETE)).fetchone() for point in points)
        return [row[0] for row in rows if row is not None]

    def uncache_chunks_of(self, tx: sqlite3.Connection, doc_id: str, model: str | None) -> None:
        # by the cache's primary key where the model is known
        of_model, args = ("model = ? AND ", (model,)) if model is not None else ("", ())
        tx.execute(
            f"DELETE FROM embedding_cache WHERE {of_model}text_hash IN"
            " (SELECT CASE WHEN typeof(c.text_hash) = 'blob' THEN lower(hex(c.text_hash)) ELSE c.text_hash END"
            f" FROM chunks c WHERE {_OF_PARENT} AND c.embedding IS NOT NULL)",
            (*args, doc_id, doc_id, doc_id),
        )


class SQLiteLedger(SQLLedger):
    """The ledger in an SQLite file at ``path`` (``None``: in memory): :class:`SQLLedger` over
    :class:`SQLiteDialect`."""

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(SQLiteDialect(path))


def _connect(target: str, on_disk: bool) -> sqlite3.Connection:
    db = sqlite3.connect(target, check_same_thread=False, isolation_level=None, timeout=60.0)
    # a chunk row (embedding, text, metadata) is ~2 kB: 4 kB pages held one each, half empty.  Only a new,
    # empty database takes it (before WAL); an existing one keeps its page size.
    db.execute(f"PRAGMA page_size={PAGE_SIZE}")
    db.execute("PRAGMA journal_mode=WAL" if on_disk else "PRAGMA journal_mode=MEMORY")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _hash_bytes(text_hash: str) -> bytes | None:
    """A chunk's text hash as version 5 stores it: its 16 bytes (not 32 hex characters; None: not hex)."""
    try:
        return bytes.fromhex(text_hash)
    except ValueError:
        return None


def _counts_of(db: sqlite3.Connection, doc_ids: Sequence[str]) -> dict[str, int]:
    """How many chunks each of the documents ``doc_ids`` has (those with none left out): one range of the
    primary key's index each, a batch of documents a statement."""
    counts: dict[str, int] = {}
    for batch in iter_batches(list(dict.fromkeys(doc_ids))):
        values = ",".join(["(?)"] * len(batch))
        counts.update(
            db.execute(
                f"WITH p(id) AS (VALUES {values}) SELECT p.id, COUNT(*) FROM p JOIN chunks c ON {_IDS_OF}"
                " GROUP BY p.id",
                batch,
            )
        )
    return counts


def _counts(db: sqlite3.Connection) -> dict[str, int]:
    """Complete documents and their chunks: every row less those of documents not complete (a few: the
    partial index finds them) and of documents being staged; counts of small indexes, not a join of every
    chunk.  (A chunk whose document row is missing, damage that ``finderledge check`` reports, is counted.)"""
    pending = [r[0] for r in db.execute(f"SELECT id FROM documents WHERE {_PENDING}")]
    staged = [
        r[0]
        for r in db.execute(
            "SELECT substr(key, ?) FROM info WHERE substr(key, 1, ?) = ?",
            (len(STAGED_KEY) + 1, len(STAGED_KEY), STAGED_KEY),
        )
    ]
    docs = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0] - len(pending)
    chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] - sum(
        _counts_of(db, [*pending, *staged]).values()
    )
    return {"documents": int(docs), "chunks": int(chunks)}


def _recorded_version(db: sqlite3.Connection) -> str | None:
    """The ``schema_version`` an existing ledger records (None for a new one)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='info'").fetchone() is None:
        return None
    row = db.execute("SELECT value FROM info WHERE key='schema_version'").fetchone()
    return None if row is None else str(row[0])


# -- checks at open: a lost or damaged ledger next to indexes is refused, never replaced -----------------
def _indexes_beside(path: Path) -> list[str]:
    """Index folders next to the ledger ``path`` that hold anything (built from a ledger)."""
    found = []
    for name in INDEX_FOLDERS:
        try:
            with os.scandir(path.parent / name) as entries:
                if next(entries, None) is not None:
                    found.append(name)
        except (NotADirectoryError, FileNotFoundError):
            continue
        except OSError:
            found.append(name)
    return found


def _lost(path: Path, state: str, indexes: list[str]) -> LedgerCorruptError:
    folders = ", ".join(f"{i}/" for i in indexes)
    return LedgerCorruptError(
        path,
        f"{state}, but {path.parent} holds indexes ({folders}) built from it",
        "restore it from a backup (the indexes cannot rebuild it and were left as they are), or move "
        f"{folders} away to start an empty index",
    )


def _check_file(path: Path) -> bool:
    """Refuse to create a ledger where indexes exist (an empty one would empty them); nothing is written.

    Returns whether there is a non-empty file to check."""
    try:
        size: int | None = path.stat().st_size
    except FileNotFoundError:
        size = None
    if size:
        return True
    indexes = _indexes_beside(path)
    if indexes:
        raise _lost(path, "is missing" if size is None else "is empty (0 bytes)", indexes)
    return False


def _check_header(path: Path) -> None:
    """What can be checked of an existing ledger at a cost that does not grow with it: the 100-byte SQLite
    header (magic, page size) and that the file holds the pages it declares (not truncated).  Every page
    is checked by ``finderledge check`` (``PRAGMA integrity_check``); damage met later is reported then."""
    with open(path, "rb") as fh:
        header = fh.read(100)
        size = os.fstat(fh.fileno()).st_size
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise LedgerCorruptError(path, "not an SQLite database (its header is not SQLite's)")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise LedgerCorruptError(path, f"the database is damaged (page size {page} in its header)")
    pages, counter, valid_for = (int.from_bytes(header[i : i + 4], "big") for i in (28, 24, 92))
    if (
        counter == valid_for
        and pages
        and size < pages * page
        and not path.with_name(path.name + "-wal").exists()
    ):
        raise LedgerCorruptError(path, f"the database is damaged (truncated: {size} of {pages * page} bytes)")


def _check_database(path: Path) -> None:
    """Check an existing ledger's header and that it is FinderLedge's, at a cost that does not grow with it,
    on a connection of its own that writes nothing (the journal mode is set only once it passed)."""
    started = time.perf_counter()
    _check_header(path)
    try:
        db = sqlite3.connect(path, timeout=60.0)
    except sqlite3.DatabaseError as exc:
        raise _unreadable(str(path), exc) from exc
    try:
        db.execute("PRAGMA schema_version").fetchone()  # reads page 1 (every page: ``finderledge check``)
        has_info = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='info'").fetchone()
        tables = [str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    except sqlite3.DatabaseError as exc:
        raise _unreadable(str(path), exc) from exc
    except UnicodeDecodeError as exc:
        raise LedgerCorruptError(path, f"the database is damaged ({exc})") from exc
    finally:
        db.close()
    logger.debug("ledger %s: checked at open in %.3f s", path, time.perf_counter() - started)
    if has_info is None:
        indexes = _indexes_beside(path)
        if indexes:
            raise _lost(path, "holds no FinderLedge tables", indexes)
        if tables:  # another application's database: never adopted (our tables are never added to it)
            raise IncompatibleIndexError(
                f"ledger {path}: an SQLite database of another application (tables {', '.join(tables[:5])}), "
                "not a FinderLedge ledger; nothing was written to it (use another persist_directory)"
            )


def _unreadable(target: str, exc: sqlite3.DatabaseError) -> Exception:
    """The error for a database that SQLite cannot read."""
    if is_sqlite_corruption(exc):
        return LedgerCorruptError(target, f"not an SQLite database or damaged ({exc})")
    return IncompatibleIndexError(f"ledger {target}: not a FinderLedge ledger or corrupt ({exc})")


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any exception."""

    def __init__(
        self,
        db: sqlite3.Connection,
        target: str,
        committed: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        self._db, self._target, self._committed = db, target, committed

    def __enter__(self) -> None:
        with _full_disk(self._target):
            self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            try:
                with _full_disk(self._target):
                    self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            # the write is committed: copying the log into the database is another's business (never raises)
            if self._committed is not None:
                self._committed(self._db)
            return
        if self._db.in_transaction:  # SQLite may have rolled back already (a full disk does)
            self._db.execute("ROLLBACK")
        full = full_disk_error(exc, Path(self._target).parent)
        if full is not None and full is not exc:
            raise full from exc


@contextmanager
def _full_disk(target: str) -> Iterator[None]:
    """SQLite's "database or disk is full" (``SQLITE_FULL``) as :class:`StorageFullError` naming the folder."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        full = full_disk_error(exc, Path(target).parent)
        if full is None:
            raise
        raise full from exc
