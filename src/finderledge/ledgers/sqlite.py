"""The SQLite ledger: a file in the persist directory recording every document and chunk.

The vector and keyword indexes are derived from the ledger and can be rebuilt from it (chunk texts,
metadata and embeddings are all kept here).  A write is one SQLite transaction: documents and chunks
are inserted (or deleted) together with a row per document in the ``changes`` log, whose ``seq`` numbers
every change.  Indexes follow that log (see :mod:`finderledge.replica`): an index checkpoint records the
``seq`` it reflects, and every process applies the changes after it — so committing to the ledger is
the commit point, and nothing half-written is ever visible.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IncompatibleIndexError, LedgerCorruptError
from ..integrity import is_sqlite_corruption
from ..metadata import embedded_text
from ..storage import Storage, full_disk_error
from .base import (
    ADD,
    COMPLETE,
    INDEX_FOLDERS,
    REMOVE,
    REMOVED,
    REMOVED_GRACE_SECONDS,
    SCHEMA_VERSION,
    STAGED_GRACE_SECONDS,
    Change,
    ChunkRecord,
    DocumentRecord,
    Ledger,
    check_schema_version,
    content_id,
    iter_batches,
    unique_runs,
)
from .rows import (
    Quarantine,
    RowDamage,
    check_chunk_id,
    decode_chunk_metadata,
    decode_document_metadata,
    decode_embedding,
    encode_chunk_metadata,
    encode_document_metadata,
    owner_of,
)
from .wal_checkpoints import WalCheckpointer

__all__ = ["SQLITE_SCHEMA_VERSION", "SQLiteLedger"]

logger = logging.getLogger(__name__)

PAGE_SIZE = 16384  # bytes per SQLite page of a new ledger (see _connect)
WRITER_CACHE_KIB = 65536  # the writing connection's page cache (an upper bound: pages are cached as used)
_STAGED_KEY = "staged:"  # info key of a document whose chunks are being staged; value: when last touched
SAMPLE_SEEK_FACTOR = (
    4  # sample_chunk_ids seeks once the table holds this many times the sample, else reads it
)
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
# the chunks of document :p by the primary key: their ids are ``<p>-NNNN`` (metadata.child_id), all at or
# after ``<p>-`` and before ``<p>.``; parent_id leaves out those of another document whose id starts ``<p>-``
_OF_PARENT = "c.id >= :p || '-' AND c.id < :p || '.' AND c.parent_id = :p"
# the same, counted from the primary key's index alone (no row read): ids ``<p.id>-`` and digits
_IDS_OF = (
    "c.id >= p.id || '-' AND c.id < p.id || '.' AND substr(c.id, length(p.id) + 2) GLOB '[0-9]*'"
    " AND substr(c.id, length(p.id) + 2) NOT GLOB '*[^0-9]*'"
)
_DELETE_CHUNKS_OF = "DELETE FROM chunks WHERE id >= :p || '-' AND id < :p || '.' AND parent_id = :p"
# documents that are not complete: the first term lets the partial index documents_pending answer, the
# second a version 4 ledger's documents_state (two ranges)
_PENDING = "state <> 'complete' AND (state < 'complete' OR state > 'complete')"


class SQLiteReads(Ledger):
    """The reading half of the SQLite ledger: the sync, read, catalog and embedding-cache lookups of
    :class:`Ledger`.  Each thread reads through its own connection, so a reader sees committed transactions
    only (SQLite WAL snapshots) and never waits for a writer; a row that cannot be decoded quarantines its
    document.  :class:`SQLiteLedger` adds the writes over ``db``, the writer's connection (an in-memory
    ledger's only one, shared under the lock)."""

    def __init__(self, path: Path | None, db: sqlite3.Connection) -> None:
        self.path = path
        self._target = str(path) if path is not None else ":memory:"
        self.name = self._target
        self._db = db
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self.quarantine = Quarantine(self._target)  # documents with a row that cannot be decoded
        self._dimension: int | None = None

    # -- connections and records -----------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads: this thread's own (file ledgers) or the shared one under the lock (memory)."""
        try:
            if self.path is None:
                with self._lock:
                    yield self._db
                return
            db = getattr(self._local, "db", None)
            if db is None:
                db = _connect(self._target, self.path is not None)
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
        """Reads inside the block (in this thread) see one consistent state of the ledger."""
        with self._read() as db:
            if db.in_transaction:  # nested: the outer snapshot holds
                yield
                return
            db.execute("BEGIN")
            try:
                yield
            finally:
                db.execute("COMMIT")

    def get_info(self, key: str) -> str | None:
        """A value from the ledger's key/value table (recorded settings, index checkpoints)."""
        with self._read() as db:
            row = db.execute("SELECT value FROM info WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- sync: the change log --------------------------------------------------------------------------
    def _seq(self, db: sqlite3.Connection) -> int:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name='changes'").fetchone()
        return 0 if row is None else int(row[0])

    def last_seq(self) -> int:
        """The ``seq`` of the newest change (0 when nothing was ever written)."""
        with self._read() as db:
            return self._seq(db)

    def changes_since(self, seq: int, upto: int | None = None) -> list[Change]:
        """Changes with ``seq < change.seq <= upto``, oldest first."""
        sql = "SELECT seq, op, doc_id, chunk_count FROM changes WHERE seq > ?"
        args: list[Any] = [seq]
        if upto is not None:
            sql += " AND seq <= ?"
            args.append(upto)
        with self._read() as db:
            return [Change(int(r[0]), r[1], r[2], int(r[3])) for r in db.execute(sql + " ORDER BY seq", args)]

    # -- read and catalog ------------------------------------------------------------------------------
    def content_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The stored version hash of each complete document among ``doc_ids``."""
        found: dict[str, str] = {}
        with self._read() as db:
            for batch in iter_batches(doc_ids):
                marks = ",".join("?" * len(batch))
                found.update(
                    db.execute(
                        # +state: seek each id by key (not a scan of every complete document by state)
                        f"SELECT id, content_hash FROM documents WHERE +state=? AND id IN ({marks})",
                        [COMPLETE, *batch],
                    ).fetchall()
                )
        return found

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        with self._read() as db:
            row = db.execute(
                "SELECT id, source, content_hash, state, content, metadata FROM documents WHERE id=?",
                (doc_id,),
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
        """Complete documents in insertion order, optionally only those of one source and those whose metadata
        ``where`` accepts; ``offset`` of them skipped, at most ``limit`` returned."""
        if where is None:  # page in SQL: no metadata is parsed
            sql = "SELECT id FROM documents WHERE state=?" + (" AND source=?" if source is not None else "")
            args: list[Any] = [COMPLETE, *([source] if source is not None else [])]
            with self._read() as db:
                chosen = [
                    r[0]
                    for r in db.execute(
                        sql + " ORDER BY seq LIMIT ? OFFSET ?",
                        [*args, -1 if limit is None else limit, offset],
                    )
                ]
        else:
            ids = self.document_ids(source=source, where=where)
            chosen = ids[offset:] if limit is None else ids[offset : offset + limit]
        records: list[DocumentRecord] = []
        with self._read() as db:
            for batch in iter_batches(chosen):
                rows = {
                    r[0]: r
                    for r in db.execute(
                        "SELECT id, source, content_hash, state, content, metadata FROM documents WHERE id IN "
                        f"({','.join('?' * len(batch))})",
                        batch,
                    )
                }
                decoded = (self._document(r) for r in (rows.get(i) for i in batch) if r is not None)
                records.extend(d for d in decoded if d is not None)
        return records

    def document_metadata(self, *, source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """``(id, metadata)`` of every complete document (of ``source``) in insertion order, without texts."""
        sql = "SELECT id, metadata FROM documents WHERE state=?"
        args: list[Any] = [COMPLETE]
        if source is not None:
            sql += " AND source=?"
            args.append(source)
        with self._read() as db:
            rows = [
                (r[0], self._document_metadata(r[0], r[1])) for r in db.execute(sql + " ORDER BY seq", args)
            ]
        return [(i, md) for i, md in rows if md is not None]

    def ids_with_document_id(self, document_id: str) -> list[str]:
        """Complete documents whose metadata ``document_id`` is ``document_id``, in insertion order."""
        try:
            document_id.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: stored metadata never holds them (clean_text)
            return []
        with self._read() as db:
            rows = db.execute(
                # '$[0]': the stored form of a document's metadata without its derived fields (see .rows)
                "SELECT id FROM documents WHERE state=? AND json_extract(metadata,"
                " CASE WHEN metadata LIKE '[%' THEN '$[0].document_id' ELSE '$.document_id' END)=? ORDER BY seq",
                (COMPLETE, document_id),
            )
            return [r[0] for r in rows]

    def chunk_count(self, doc_ids: Sequence[str]) -> int:
        """How many chunks the documents ``doc_ids`` have."""
        with self._read() as db:
            return sum(_counts_of(db, doc_ids).values())

    def get_chunks(
        self, chunk_ids: Sequence[str], *, with_embedding: bool = False, visible_at: int | None = None
    ) -> list[ChunkRecord]:
        """Chunks by id, in the order asked; unknown ids are left out.

        With ``visible_at=seq`` only chunks of documents that were stored at that change are returned:
        added at or before it, and not removed by then (a search whose indexes reflect ``seq``; an index
        another process checkpointed may already hold later chunks)."""
        found: dict[str, ChunkRecord] = {}
        cols = _CHUNK_COLS + (", c.embedding" if with_embedding else "")
        join, extra = " LEFT JOIN documents d ON d.id = c.parent_id", list[Any]()
        if visible_at is not None:
            join = (
                " JOIN documents d ON d.id = c.parent_id AND COALESCE(d.added_seq, 0) <= ?"
                " AND (d.state = 'complete' OR d.removed_seq > ?)"
            )
            extra = [visible_at, visible_at]
        with self._read() as db:
            for batch in iter_batches(chunk_ids):
                marks = ",".join("?" * len(batch))
                for row in db.execute(
                    f"SELECT {cols} FROM chunks c{join} WHERE c.id IN ({marks})", extra + batch
                ):
                    chunk = self._chunk(row, with_embedding)
                    if chunk is not None:
                        found[row[0]] = chunk
        return [found[i] for i in chunk_ids if i in found and owner_of(i) not in self.quarantine]

    def chunks_of(self, parent_id: str, *, with_embedding: bool = False) -> list[ChunkRecord]:
        cols = _CHUNK_COLS + (", c.embedding" if with_embedding else "")
        with self._read() as db:
            rows = db.execute(
                f"SELECT {cols} FROM chunks c LEFT JOIN documents d ON d.id = c.parent_id"
                f" WHERE {_OF_PARENT} ORDER BY c.split_index",
                {"p": parent_id},
            )
            chunks = [self._chunk(r, with_embedding) for r in rows]
        return [] if parent_id in self.quarantine else [c for c in chunks if c is not None]

    def complete_chunk_ids(self) -> set[str]:
        with self._read() as db:
            rows = db.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.parent_id WHERE d.state=?",
                (COMPLETE,),
            )
            return {r[0] for r in rows}

    def sample_chunk_ids(self, size: int) -> list[str]:
        """``size`` complete chunk ids spread evenly over the table's rowids, one index seek each: the cost
        does not grow with the corpus (a fresh process draws the relevance background on its first search).
        The same ledger state gives the same sample in every process; a small table is read whole."""
        with self._read() as db:
            # two statements: SQLite answers a lone MIN or MAX from the index, both together by a full scan
            low = db.execute("SELECT MIN(rowid) FROM chunks").fetchone()[0]
            high = db.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0]
            if low is None or high - low + 1 <= SAMPLE_SEEK_FACTOR * size:
                return super().sample_chunk_ids(size)
            span = high - low + 1
            picked: dict[str, None] = {}
            for i in range(size):
                row = db.execute(
                    # CROSS JOIN and +state: walk chunks by rowid (the planner would scan documents by state)
                    "SELECT c.id FROM chunks c CROSS JOIN documents d ON d.id = c.parent_id "
                    "WHERE c.rowid >= ? AND +d.state=? ORDER BY c.rowid LIMIT 1",
                    (low + (2 * i + 1) * span // (2 * size), COMPLETE),
                ).fetchone()
                if row is not None:
                    picked[row[0]] = None
            return list(picked)

    # -- embedding cache lookups -----------------------------------------------------------------------
    def cached_embeddings(self, model: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already computed by ``model`` for these text hashes (missing ones are left out): from the
        cache, or from a stored chunk of the same text when ``model`` is the one this ledger records."""
        found: dict[str, np.ndarray] = {}
        with self._read() as db:
            for batch in iter_batches(list(text_hashes)):
                marks = ",".join("?" * len(batch))
                rows = db.execute(
                    f"SELECT text_hash, vector FROM embedding_cache WHERE model=? AND text_hash IN ({marks})",
                    [model, *batch],
                )
                found.update((h, np.frombuffer(v, dtype="<f4")) for h, v in rows)
            missing = [h for h in dict.fromkeys(text_hashes) if h not in found]
            if missing and self.get_info("embedding_model_id") == model:
                for batch in iter_batches(missing, 250):
                    # each hash in both stored forms: 16 bytes (version 5 rows) and hex (version 4 rows)
                    keys = [*batch, *(b for b in map(_hash_bytes, batch) if b is not None)]
                    rows = db.execute(
                        f"SELECT text_hash, embedding FROM chunks WHERE embedding IS NOT NULL"
                        f" AND text_hash IN ({','.join('?' * len(keys))})",
                        keys,
                    )
                    found.update(
                        (h.hex() if isinstance(h, bytes) else h, np.frombuffer(v, dtype="<f4"))
                        for h, v in rows
                    )
        return found

    def embedding_cache_size(self) -> dict[str, int]:
        with self._read() as db:
            entries, size = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(length(vector)), 0) FROM embedding_cache"
            ).fetchone()
        return {"entries": int(entries), "bytes": int(size)}

    # -- catalog counts --------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Numbers of complete documents and chunks, and of unfinished documents."""
        with self._read() as db, self.snapshot():
            return _counts(db)

    def sources(self) -> list[str]:
        with self._read() as db:
            rows = db.execute(
                "SELECT DISTINCT source FROM documents WHERE state=? AND source IS NOT NULL ORDER BY source",
                (COMPLETE,),
            )
            return [r[0] for r in rows]

    # -- decoding rows ---------------------------------------------------------------------------------
    def _chunk(self, row: Sequence[Any], with_embedding: bool) -> ChunkRecord | None:
        """A chunk row decoded, or None (its document quarantined) when any field of it is damaged."""
        owner = owner_of(str(row[0]))
        try:
            check_chunk_id(row[0], row[1], row[2])
            if not isinstance(row[3], str):
                raise RowDamage(
                    f"its text is its document's, and document {row[1]} is not in the ledger"
                    if row[3] is None
                    else f"its text is a {type(row[3]).__name__} value, not text"
                )
            emb = None
            if with_embedding and row[6] is not None:
                emb = decode_embedding(row[6], self._embedding_dimension())
            md = decode_chunk_metadata(row[4], row[5], row[0], row[1], int(row[2]))
        except RowDamage as exc:
            self.quarantine.add(owner, f"chunk {row[0]}", exc)
            return None
        if owner in self.quarantine:
            return None
        return ChunkRecord(row[0], row[1], int(row[2]), row[3], md, emb)

    def _document(self, row: Sequence[Any]) -> DocumentRecord | None:
        """A document row decoded, or None (quarantined) when its metadata is damaged."""
        md = self._document_metadata(row[0], row[5])
        return None if md is None else DocumentRecord(row[0], row[1], row[2], row[3], row[4], md)

    def _document_metadata(self, doc_id: str, text: Any) -> dict[str, Any] | None:
        if doc_id in self.quarantine:
            return None
        try:
            return decode_document_metadata(doc_id, text)
        except RowDamage as exc:
            self.quarantine.add(doc_id, f"document {doc_id}", exc)
            return None

    def _embedding_dimension(self) -> int | None:
        if self._dimension is None:
            value = self.get_info("embedding_dimension")
            self._dimension = int(value) if value and value.isdigit() else None
        return self._dimension


class SQLiteLedger(SQLiteReads):
    """SQLite-backed record of documents and chunks (``path=None``: in memory): the records, write, staging
    and embedding-cache writes of :class:`Ledger` (reads: :class:`SQLiteReads`).

    Writes go through one connection under a lock, each in one ``BEGIN IMMEDIATE`` transaction.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        file = Path(path) if path is not None else None
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
            # SQLite follows links (and opens -wal/-shm beside them): the ledger and its journals are real files
            Storage(file.parent).check(file.name + suffix for suffix in ("", "-wal", "-shm", "-journal"))
            if _check_file(file):
                _check_database(file)
        target = str(file) if file is not None else ":memory:"
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
        super().__init__(file, db)
        self._closed = False
        # commits leave copying the log into the database to a thread of its own (see wal_checkpoints)
        self._wal: WalCheckpointer | None = None
        if file is not None:
            self._wal = WalCheckpointer(self._target, lambda: _connect(self._target, True))
            self._wal.take_over(db)
        if version != str(SQLITE_SCHEMA_VERSION):  # new (a file without our tables was refused above), or
            # version 4: its whole rows are read as they are; new rows are written in version 5's form
            self.set_info("schema_version", str(SQLITE_SCHEMA_VERSION))

    # -- info ---------------------------------------------------------------------------------------
    def set_info(self, key: str, value: str | None) -> None:
        """Set (or with ``None`` delete) a key of the info table."""
        with self._lock, _full_disk(self._target):
            if value is None:
                self._db.execute("DELETE FROM info WHERE key=?", (key,))
            else:
                self._db.execute("INSERT OR REPLACE INTO info(key, value) VALUES (?, ?)", (key, value))

    # -- writes -------------------------------------------------------------------------------------
    supports_staging = True

    def commit_write(
        self,
        add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]] = (),
        remove: Sequence[str] = (),
        publish: Sequence[tuple[DocumentRecord, int]] = (),
    ) -> int:
        """In one transaction: mark documents removed, add documents with their chunks as ``complete``, and
        log each in ``changes``.  Returns the last change's ``seq``.

        Removed rows stay readable for :data:`REMOVED_GRACE_SECONDS` so that a search whose indexes reflect
        an earlier ``seq`` still finds the texts of what it matched (see :meth:`get_chunks`)."""
        now = time.time()
        self.quarantine.release([doc.id for doc, _ in add] + list(remove) + [doc.id for doc, _ in publish])
        with self._lock, self._transaction():
            if remove:
                counts = self._chunk_counts(remove)
                seqs = self._log(REMOVE, [(doc_id, counts.get(doc_id, 0)) for doc_id in remove])
                self._db.executemany(
                    "UPDATE documents SET state=?, removed_seq=?, removed_at=? WHERE id=?",
                    [(REMOVED, seq, now, doc_id) for seq, doc_id in zip(seqs, remove)],
                )
            for run in unique_runs(add):  # a document added twice in one write: the later copy replaces
                self._delete_rows([doc.id for doc, _ in run])  # removed earlier copies of the same content
                self._insert_documents([(doc, len(chunks)) for doc, chunks in run], now)
                self._insert_chunks(
                    [c for _, chunks in run for c in chunks], parents={doc.id: doc for doc, _ in run}
                )
            for doc, count in publish:
                self._publish(doc, count, now)
            return self._seq(self._db)

    def _log(self, op: str, entries: Sequence[tuple[str, int]]) -> list[int]:
        """Inside a write transaction: one change row per ``(doc_id, chunk_count)``; returns their seqs (drawn
        here, under the write transaction, so that one ``executemany`` writes them all)."""
        first = self._seq(self._db) + 1
        seqs = list(range(first, first + len(entries)))
        self._db.executemany(
            "INSERT INTO changes(seq, op, doc_id, chunk_count) VALUES (?, ?, ?, ?)",
            [(seq, op, doc_id, int(count)) for seq, (doc_id, count) in zip(seqs, entries)],
        )
        return seqs

    def _chunk_counts(self, doc_ids: Sequence[str]) -> dict[str, int]:
        return _counts_of(self._db, doc_ids)

    def _insert_documents(self, docs: Sequence[tuple[DocumentRecord, int]], now: float) -> None:
        """Inside a write transaction: the documents' ``add`` change rows, then their rows stamped with them."""
        seqs = self._log(ADD, [(doc.id, count) for doc, count in docs])
        self._db.executemany(
            "INSERT INTO documents(id, source, content_hash, state, content, metadata, added_at, added_seq)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    doc.id,
                    doc.source,
                    doc.content_hash,
                    COMPLETE,
                    doc.content,
                    encode_document_metadata(doc.id, doc.metadata),
                    now,
                    seq,
                )
                for seq, (doc, _) in zip(seqs, docs)
            ],
        )

    def _insert_chunks(
        self,
        chunks: Sequence[ChunkRecord],
        verb: str = "INSERT",
        *,
        uncache: bool = True,
        parents: dict[str, DocumentRecord] | None = None,
    ) -> None:
        """Inside a write transaction: insert chunk rows (text hashed); the cache lets go of their vectors.
        A chunk whose document is among ``parents`` (written in the same transaction) stores only what its
        document's row does not: no text when it is the document's whole text, its metadata's difference."""
        hashes = [
            content_id(embedded_text(c.content, c.metadata)) for c in chunks
        ]  # the text its vector embeds
        found = parents or {}
        self._db.executemany(
            f"{verb} INTO chunks(id, parent_id, split_index, content, metadata, embedding, text_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    c.id,
                    c.parent_id,
                    c.split_index,
                    DOCUMENT_TEXT
                    if (doc := found.get(c.parent_id)) is not None and c.content == doc.content
                    else c.content,
                    encode_chunk_metadata(
                        c.id, c.parent_id, c.split_index, c.metadata, None if doc is None else doc.metadata
                    ),
                    None if c.embedding is None else np.asarray(c.embedding, dtype="<f4").tobytes(),
                    _hash_bytes(h) or h,
                )
                for c, h in zip(chunks, hashes)
            ],
        )
        if uncache:
            self._uncache([h for c, h in zip(chunks, hashes) if c.embedding is not None])

    def _publish(self, doc: DocumentRecord, count: int, now: float) -> None:
        """Inside the commit transaction: a staged document's row is written and its staged chunks become
        its chunks (one change row): the commit point of a big file."""
        key = _STAGED_KEY + doc.id
        marked = self._db.execute("SELECT 1 FROM info WHERE key=?", (key,)).fetchone()
        held = _counts_of(self._db, [doc.id]).get(doc.id, 0)
        if marked is None or held != count:
            raise LedgerCorruptError(
                self._target,
                f"staged document {doc.id} holds {held} of its {count} chunks; another process discarded "
                "them (add the file again)",
            )
        self._delete_rows(
            [doc.id], chunks=False
        )  # a removed earlier copy: its chunks were replaced by staging
        self._insert_documents([(doc, count)], now)
        self._db.execute(  # each vector is kept once: the cache kept them for a rerun until now
            "DELETE FROM embedding_cache WHERE text_hash IN"
            " (SELECT CASE WHEN typeof(c.text_hash) = 'blob' THEN lower(hex(c.text_hash)) ELSE c.text_hash END"
            f" FROM chunks c WHERE {_OF_PARENT} AND c.embedding IS NOT NULL)",
            {"p": doc.id},
        )
        self._db.execute("DELETE FROM info WHERE key=?", (key,))

    # -- staging: one big document written window by window, invisible until published ---------------
    def stage_document(self, doc_id: str) -> bool:
        """Begin staging the chunks of document ``doc_id``: chunk rows whose document row is not written yet
        (no read, count, search or replica sees them; only the commit that publishes them writes it), marked
        in the info table.  Rows an earlier crashed or removed copy left are dropped.  ``False`` when the
        document is stored complete."""
        with self._lock, self._transaction():
            row = self._db.execute("SELECT state FROM documents WHERE id=?", (doc_id,)).fetchone()
            if row is not None and row[0] == COMPLETE:
                return False
            self._delete_rows([doc_id])
            self._db.execute(
                "INSERT OR REPLACE INTO info(key, value) VALUES (?, ?)",
                (_STAGED_KEY + doc_id, str(time.time())),
            )
        return True

    def stage_chunks(self, parent_id: str, chunks: Sequence[ChunkRecord]) -> None:
        """Write chunks of the staged document ``parent_id`` in their own transaction."""
        key = _STAGED_KEY + parent_id
        with self._lock, self._transaction():
            if self._db.execute("SELECT 1 FROM info WHERE key=?", (key,)).fetchone() is None:
                raise LedgerCorruptError(
                    self._target, f"document {parent_id} is no longer staged; another process discarded it"
                )
            self._db.execute("UPDATE info SET value=? WHERE key=?", (str(time.time()), key))
            self._insert_chunks(chunks, "INSERT OR REPLACE", uncache=False)

    def discard_staged(self, doc_ids: Sequence[str] | None = None, older_than: float | None = None) -> int:
        """Delete the staged chunks of ``doc_ids`` (or of every document staged and untouched for
        ``older_than`` seconds: a crashed write's); returns how many documents."""
        cutoff = time.time() - (STAGED_GRACE_SECONDS if older_than is None else older_than)
        with self._lock:
            rows = self._db.execute(
                "SELECT key, value FROM info WHERE substr(key, 1, ?) = ?", (len(_STAGED_KEY), _STAGED_KEY)
            ).fetchall()
            staged = {key[len(_STAGED_KEY) :]: float(value) for key, value in rows}
            if doc_ids is None:
                ids = [i for i, touched in staged.items() if touched < cutoff]
            else:
                ids = [i for i in doc_ids if i in staged]
            if ids:
                with self._transaction():
                    for doc_id in ids:
                        if (
                            self._db.execute("SELECT 1 FROM documents WHERE id=?", (doc_id,)).fetchone()
                            is None
                        ):
                            self._db.execute(_DELETE_CHUNKS_OF, {"p": doc_id})
                        self._db.execute("DELETE FROM info WHERE key=?", (_STAGED_KEY + doc_id,))
        return len(ids)

    def _uncache(self, hashes: Sequence[str]) -> None:
        """Inside a write transaction: the cache lets go of vectors that stored chunks now hold."""
        for batch in iter_batches(list(hashes)):
            self._db.execute(
                f"DELETE FROM embedding_cache WHERE text_hash IN ({','.join('?' * len(batch))})", batch
            )

    def collect_removed(self, older_than: float = REMOVED_GRACE_SECONDS) -> int:
        """Delete the rows of documents removed more than ``older_than`` seconds ago; returns how many."""
        with self._lock:
            ids = [
                r[0]
                for r in self._db.execute(
                    f"SELECT id FROM documents WHERE {_PENDING} AND state=? AND removed_at < ?",
                    (REMOVED, time.time() - older_than),
                )
            ]
            if ids:
                with self._transaction():
                    self._delete_rows(ids)
        self.discard_staged()  # a crashed big write's staged rows
        return len(ids)

    def _delete_rows(self, ids: Sequence[str], *, chunks: bool = True) -> None:
        if chunks:
            self._db.executemany(_DELETE_CHUNKS_OF, [{"p": i} for i in ids])
        for batch in iter_batches(ids):
            self._db.execute(f"DELETE FROM documents WHERE id IN ({','.join('?' * len(batch))})", batch)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._target, None if self._wal is None else self._wal.committed)

    # -- embedding cache ----------------------------------------------------------------------------
    def cache_embeddings(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Remember vectors by (model, text hash); committed at once, independently of any document write,
        so work done before a crash is not repeated."""
        rows = [(model, h, np.asarray(v, dtype="<f4").tobytes()) for h, v in items]
        with self._lock, self._transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO embedding_cache(model, text_hash, vector) VALUES (?, ?, ?)", rows
            )

    def prune_embedding_cache(self) -> int:
        with self._lock, self._transaction():
            return int(self._db.execute("DELETE FROM embedding_cache").rowcount)

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
            (len(_STAGED_KEY) + 1, len(_STAGED_KEY), _STAGED_KEY),
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
