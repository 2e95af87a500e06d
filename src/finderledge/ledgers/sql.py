"""The one SQL ledger: every method of :class:`~finderledge.ledgers.base.Ledger` written once, over a dialect.

:class:`SQLLedger` holds the SQL that SQLite and PostgreSQL share (as LangChain's ``SQLRecordManager`` serves
every SQL database with one class).  A :class:`SQLDialect` holds what differs: connections, transactions and
the database's own locking, placeholders (``?`` or ``%s``), ``IN (...)`` or ``= ANY(%s)``, upserts, the schema
prefix, how rows are encoded and decoded (SQLite stores each fact once; PostgreSQL keeps vectors in pgvector's
table and NUL-bearing texts as JSON), and the statements one database answers better its own way.  The
dialects are :class:`~finderledge.ledgers.sqlite.SQLiteDialect` and
:class:`~finderledge.ledgers.postgres.PostgresDialect`; :class:`~finderledge.ledgers.sqlite.SQLiteLedger` and
:class:`~finderledge.ledgers.postgres.PostgresLedger` only pick one.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LedgerCorruptError
from ..metadata import DOCUMENT_ID, embedded_text
from .base import (
    ADD,
    COMPLETE,
    REMOVE,
    REMOVED,
    REMOVED_GRACE_SECONDS,
    STAGED_GRACE_SECONDS,
    Change,
    ChunkRecord,
    DocumentRecord,
    Ledger,
    content_id,
    iter_batches,
    unique_runs,
)
from .rows import Quarantine, RowDamage, owner_of

__all__ = ["SAMPLE_SEEK_FACTOR", "STAGED_KEY", "SQLDialect", "SQLLedger"]

#: sample_chunk_ids seeks once the seek key spans this many times the sample, else reads every id
SAMPLE_SEEK_FACTOR = 4
STAGED_KEY = "staged:"  # info key of a document whose chunks are being staged; value: when last touched
_SURROGATE = re.compile("[\ud800-\udfff]")


class SQLDialect(ABC):
    """What one SQL database does its own way under :class:`SQLLedger`: connections and transactions, the
    SQL text (placeholders, schema prefix, ``IN`` lists, upserts), row encoding and a few statements.

    Queries are written once with ``?`` placeholders and ``{s}`` before each table name; :meth:`sql` turns
    them into this database's text."""

    #: the SQLite file (None for memory or a database server); a secret-free name for messages
    path: Path | None = None
    name: str = ""
    #: ids per statement of a batched lookup (SQLite's parameter limit; one array parameter in PostgreSQL)
    batch: int = 500
    supports_staging: bool = False
    #: ``LIMIT`` of a query without a limit
    no_limit: int | None = None
    #: the newest change's ``seq`` (0 or no row when nothing was written)
    last_seq_sql: str = ""
    #: a prefix of a column name that keeps the planner from scanning by its index (SQLite's unary ``+``)
    not_by_index: str = ""
    #: conditions ANDed before ``state=?`` where documents that are not complete are looked up
    pending: str = ""
    #: the expression of a document's metadata ``document_id`` (``d`` not aliased: ``documents`` itself)
    document_id: str = ""
    #: how sources sort: by code point
    source_order: str = "source"
    #: the columns written for a document (then ``added_at``, ``added_seq``), and a chunk
    document_columns: tuple[str, ...] = ()
    chunk_columns: tuple[str, ...] = ()
    #: the columns read for a document (see :meth:`document_fields`) and a chunk (see :meth:`chunk`)
    document_read: str = ""
    chunk_read: str = ""
    #: the chunk's vector as the last column read, and the join it needs
    embedding_read: str = ""
    embedding_join: str = ""
    #: the join of a chunk to its document when any row is wanted (``d``; empty when reads need none)
    document_join: str = ""

    # -- SQL text --------------------------------------------------------------------------------------
    @abstractmethod
    def sql(self, query: str) -> str:
        """``query`` (``?`` placeholders, ``{s}`` schema prefix) in this database's text."""

    @abstractmethod
    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A condition ``column`` is one of ``values``, and its parameters."""

    @abstractmethod
    def insert(self, table: str, columns: Sequence[str], conflict: str | None = None, key: str = "") -> str:
        """An ``INSERT`` of one row; ``conflict``: ``"replace"`` (upsert on ``key``) or ``"ignore"``."""

    # -- connections -----------------------------------------------------------------------------------
    @abstractmethod
    def reading(self) -> AbstractContextManager[Any]:
        """A connection for reads (each query sees committed writes; in a snapshot, the snapshot's state)."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside the block (in this thread) see one consistent state."""

    @abstractmethod
    def writing(self) -> AbstractContextManager[Any]:
        """One write transaction under the process's write mutex: a cursor (``execute``, ``executemany``)."""

    @abstractmethod
    def statement(self) -> AbstractContextManager[Any]:
        """The writer's connection under the write mutex, outside a transaction: each statement commits on its
        own, and a read sees the latest commit without taking the database's write lock."""

    @abstractmethod
    def close(self) -> None: ...

    # -- values ----------------------------------------------------------------------------------------
    def storable(self, text: str) -> bool:
        """Whether this database can hold ``text`` (an id or source it cannot hold is stored nowhere)."""
        return True

    def checked(self, value: str, what: str) -> str:
        """``value``, or a clear error when this database cannot store it."""
        return value

    @abstractmethod
    def document_row(self, doc: DocumentRecord) -> tuple[Any, ...]:
        """The values of :attr:`document_columns` for a new document row."""

    @abstractmethod
    def chunk_row(self, chunk: ChunkRecord, parent: DocumentRecord | None, text_hash: str) -> tuple[Any, ...]:
        """The values of :attr:`chunk_columns`; ``parent``: its document, when written in the same write."""

    def chunk_rows(
        self, chunks: Sequence[ChunkRecord], parents: dict[str, DocumentRecord], hashes: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        """:meth:`chunk_row` of each chunk (``parents``: the documents written with them, by id); a dialect
        that stores a chunk's text as a span of its document's finds the spans of a document's chunks here."""
        return [self.chunk_row(c, parents.get(c.parent_id), h) for c, h in zip(chunks, hashes)]

    @abstractmethod
    def document_fields(self, row: Sequence[Any]) -> tuple[str, str | None, str, str, str, Any]:
        """``(id, source, content_hash, state, content, stored metadata)`` of a row of :attr:`document_read`."""

    @abstractmethod
    def document_metadata(self, doc_id: str, stored: Any) -> dict[str, Any]:
        """Stored document metadata decoded (:class:`RowDamage` when it cannot be)."""

    @abstractmethod
    def chunk(
        self, row: Sequence[Any], with_embedding: bool, info: Callable[[str], str | None]
    ) -> ChunkRecord:
        """A row of :attr:`chunk_read` (and :attr:`embedding_read`) decoded (:class:`RowDamage` if damaged)."""

    # -- statements one database answers its own way ---------------------------------------------------
    @abstractmethod
    def next_seqs(self, tx: Any, count: int) -> list[int]:
        """Inside the commit transaction: ``count`` new change numbers, ascending."""

    @abstractmethod
    def chunk_counts(self, conn: Any, doc_ids: Sequence[str]) -> dict[str, int]:
        """How many chunks each of ``doc_ids`` has (those with none left out)."""

    @abstractmethod
    def of_parent(self, parent_id: str) -> tuple[str, list[Any]]:
        """A condition on ``c`` (chunks) selecting the chunks of one document, and its parameters."""

    @abstractmethod
    def delete_chunks_of(self, tx: Any, doc_ids: Sequence[str]) -> None:
        """Delete the chunk rows of the documents ``doc_ids``."""

    def insert_many(
        self,
        tx: Any,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        conflict: str | None = None,
        key: str = "",
    ) -> None:
        """Insert ``rows`` of ``columns`` into ``table``: in bulk where :meth:`bulk_rows` can (rows without a
        conflict clause), else as ``INSERT``s."""
        if conflict is None and self.bulk_rows(tx, table, columns, rows):
            return
        tx.executemany(self.insert(table, columns, conflict, key), rows)

    def bulk_rows(self, tx: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> bool:
        """Write ``rows`` by the database's bulk path if it has one (PostgreSQL: ``COPY``); False: nothing
        was written, the caller inserts them."""
        return False

    def drop_vectors(self, tx: Any, doc_ids: Sequence[str]) -> None:
        """Delete the vectors of the chunks of ``doc_ids`` where they are kept apart from the chunk rows."""

    def store_vectors(self, tx: Any, chunks: Sequence[ChunkRecord]) -> None:
        """Write the chunks' vectors where they are kept apart from the chunk rows."""

    def begin_commit(self, tx: Any, add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]]) -> None:
        """First in a ``commit_write`` transaction (the database's own commit ordering, vector checks)."""

    def end_commit(self, tx: Any, add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]]) -> None:
        """Last in a ``commit_write`` transaction."""

    @abstractmethod
    def stored_vectors(self, conn: Any, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors stored chunks of these text hashes hold."""

    @abstractmethod
    def counts(self, conn: Any) -> dict[str, int]:
        """``{"documents": n, "chunks": m}`` of complete documents (inside a snapshot)."""

    @abstractmethod
    def seek_bounds(self, conn: Any) -> tuple[int | None, int | None]:
        """The lowest and highest value of the sample seek key (None: nothing stored)."""

    @abstractmethod
    def seek(self, conn: Any, points: Sequence[int]) -> list[str]:
        """For each value of the seek key, the id of the first complete chunk at or after it (index seeks)."""

    def uncache_chunks_of(self, tx: Any, doc_id: str, model: str | None) -> None:
        """Drop ``model``'s cache entries of the texts a staged document's chunks hold (every model's when
        None: none is recorded), where staging exists."""
        raise NotImplementedError(f"ledger {self.name}: staging a document is not supported")


class SQLLedger(Ledger):
    """A ledger in an SQL database: every query here, what the database does its own way in ``dialect``.

    Reads see committed transactions only; each write is one transaction.  A row that cannot be decoded
    quarantines its document (:mod:`.rows`), never every search."""

    def __init__(self, dialect: SQLDialect) -> None:
        self.dialect = dialect
        self.path = dialect.path
        self.name = dialect.name
        self.supports_staging = dialect.supports_staging
        self.quarantine = Quarantine(dialect.name)  # documents with a row that cannot be decoded

    def _sql(self, query: str) -> str:
        return self.dialect.sql(query)

    # -- records --------------------------------------------------------------------------------------
    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside the block (in this thread) see one consistent state of the ledger."""
        return self.dialect.snapshot()

    def get_info(self, key: str) -> str | None:
        """A value from the ledger's key/value table (recorded settings, index checkpoints)."""
        with self.dialect.reading() as db:
            row = db.execute(self._sql("SELECT value FROM {s}info WHERE key=?"), (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_info(self, key: str, value: str | None) -> None:
        """Set (or with ``None`` delete) a key of the info table."""
        d = self.dialect
        with d.statement() as db:
            if value is None:
                db.execute(self._sql("DELETE FROM {s}info WHERE key=?"), (key,))
            else:
                db.execute(d.insert("info", ("key", "value"), "replace", "key"), (key, value))

    def close(self) -> None:
        self.dialect.close()

    # -- sync: the change log -------------------------------------------------------------------------
    def _seq(self, db: Any) -> int:
        row = db.execute(self._sql(self.dialect.last_seq_sql)).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    def last_seq(self) -> int:
        """The ``seq`` of the newest change (0 when nothing was ever written)."""
        with self.dialect.reading() as db:
            return self._seq(db)

    def changes_since(self, seq: int, upto: int | None = None) -> list[Change]:
        """Changes with ``seq < change.seq <= upto``, oldest first."""
        query = "SELECT seq, op, doc_id, chunk_count FROM {s}changes WHERE seq > ?"
        args: list[Any] = [seq]
        if upto is not None:
            query += " AND seq <= ?"
            args.append(upto)
        with self.dialect.reading() as db:
            rows = db.execute(self._sql(query + " ORDER BY seq"), args).fetchall()
        return [Change(int(r[0]), r[1], r[2], int(r[3])) for r in rows]

    # -- write ----------------------------------------------------------------------------------------
    def commit_write(
        self,
        add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]] = (),
        remove: Sequence[str] = (),
        publish: Sequence[tuple[DocumentRecord, int]] = (),
    ) -> int:
        """In one transaction: mark documents removed, add documents with their chunks as ``complete``, publish
        staged ones, and log each in ``changes``.  Returns the last change's ``seq``.

        Removed rows stay readable for :data:`REMOVED_GRACE_SECONDS` so that a search whose indexes reflect
        an earlier ``seq`` still finds the texts of what it matched (see :meth:`get_chunks`)."""
        d = self.dialect
        if publish and not self.supports_staging:
            raise NotImplementedError(f"ledger {self.name}: staging a document is not supported")
        now = time.time()
        # rows checked and encoded before the transaction; a document added twice: the later copy replaces
        runs = [
            (
                [(doc.id, d.document_row(doc), len(chunks)) for doc, chunks in run],
                self._chunk_rows([c for _, chunks in run for c in chunks], {doc.id: doc for doc, _ in run}),
            )
            for run in unique_runs(add)
        ]
        self.quarantine.release([doc.id for doc, _ in add] + list(remove) + [doc.id for doc, _ in publish])
        with d.writing() as tx:
            d.begin_commit(tx, add)
            if remove:
                self._mark_removed(tx, list(remove), now)
            for docs, (chunk_rows, embedded) in runs:
                self._delete_rows(tx, [doc_id for doc_id, _, _ in docs])  # removed earlier copies
                self._insert_documents(tx, [(doc_id, row, count) for doc_id, row, count in docs], now)
                self._insert_chunks(tx, chunk_rows, embedded)
            for doc, count in publish:
                self._publish(tx, doc, count, now)
            d.end_commit(tx, add)
            return self._seq(tx)

    def _chunk_rows(
        self, chunks: Sequence[ChunkRecord], parents: dict[str, DocumentRecord] | None = None
    ) -> tuple[list[tuple[Any, ...]], list[tuple[str, ChunkRecord]]]:
        """Chunk rows to insert (text hashed) and ``(text hash, chunk)`` of those with a vector."""
        found = parents or {}
        hashes = [
            content_id(embedded_text(c.content, c.metadata)) for c in chunks
        ]  # the text its vector embeds
        rows = self.dialect.chunk_rows(chunks, found, hashes)
        return rows, [(h, c) for c, h in zip(chunks, hashes) if c.embedding is not None]

    def _log(self, tx: Any, op: str, entries: Sequence[tuple[str, int]]) -> list[int]:
        """Inside a write transaction: one change row per ``(doc_id, chunk_count)``; returns their seqs."""
        if not entries:
            return []
        seqs = self.dialect.next_seqs(tx, len(entries))
        self.dialect.insert_many(
            tx,
            "changes",
            ("seq", "op", "doc_id", "chunk_count"),
            [(seq, op, doc_id, int(count)) for seq, (doc_id, count) in zip(seqs, entries)],
        )
        return seqs

    def _mark_removed(self, tx: Any, remove: list[str], now: float) -> None:
        d = self.dialect
        counts = d.chunk_counts(tx, remove)
        seqs = self._log(tx, REMOVE, [(doc_id, counts.get(doc_id, 0)) for doc_id in remove])
        tx.executemany(
            self._sql("UPDATE {s}documents SET state=?, removed_seq=?, removed_at=? WHERE id=?"),
            [(REMOVED, seq, now, doc_id) for seq, doc_id in zip(seqs, remove)],
        )
        d.drop_vectors(tx, remove)

    def _insert_documents(
        self, tx: Any, docs: Sequence[tuple[str, tuple[Any, ...], int]], now: float
    ) -> None:
        """Inside a write transaction: the documents' ``add`` change rows, then their rows stamped with them."""
        d = self.dialect
        seqs = self._log(tx, ADD, [(doc_id, count) for doc_id, _, count in docs])
        d.insert_many(
            tx,
            "documents",
            (*d.document_columns, "added_at", "added_seq"),
            [(*row, now, seq) for seq, (_, row, _) in zip(seqs, docs)],
        )

    def _insert_chunks(
        self,
        tx: Any,
        rows: Sequence[tuple[Any, ...]],
        embedded: Sequence[tuple[str, ChunkRecord]],
        conflict: str | None = None,
        *,
        uncache: bool = True,
    ) -> None:
        """Inside a write transaction: chunk rows and their vectors; the cache lets go of the vectors stored
        now (each vector is kept once)."""
        d = self.dialect
        if rows:
            d.insert_many(tx, "chunks", d.chunk_columns, rows, conflict, "id")
        if uncache and embedded:
            model = self._recorded_model(tx)
            for batch in iter_batches([h for h, _ in embedded], d.batch):
                where, args = d.any_of("text_hash", batch)
                if model is not None:  # by the cache's primary key (model, text_hash): no scan of the cache
                    where, args = f"model = ? AND {where}", [model, *args]
                tx.execute(self._sql(f"DELETE FROM {{s}}embedding_cache WHERE {where}"), args)
        if embedded:
            d.store_vectors(tx, [c for _, c in embedded])

    def _recorded_model(self, tx: Any) -> str | None:
        """The model the stored chunk vectors are of (the index's recorded ``embedding_model_id``): the cache
        entries a write makes redundant are that model's only, and found by the cache's primary key."""
        row = tx.execute(
            self._sql("SELECT value FROM {s}info WHERE key=?"), ("embedding_model_id",)
        ).fetchone()
        return None if row is None else str(row[0])

    def _delete_rows(self, tx: Any, ids: Sequence[str], *, chunks: bool = True) -> None:
        d = self.dialect
        if chunks:
            d.drop_vectors(tx, ids)
            d.delete_chunks_of(tx, ids)
        for batch in iter_batches(ids, d.batch):
            where, args = d.any_of("id", batch)
            tx.execute(self._sql(f"DELETE FROM {{s}}documents WHERE {where}"), args)

    def collect_removed(self, older_than: float = REMOVED_GRACE_SECONDS) -> int:
        """Delete the rows of documents removed more than ``older_than`` seconds ago; returns how many."""
        d = self.dialect
        with d.statement() as db:  # (a transaction only when there is something to delete)
            ids = [
                r[0]
                for r in db.execute(
                    self._sql(f"SELECT id FROM {{s}}documents WHERE {d.pending}state=? AND removed_at < ?"),
                    (REMOVED, time.time() - older_than),
                ).fetchall()
            ]
            if ids:
                with d.writing() as tx:
                    self._delete_rows(tx, ids)
        self.discard_staged()  # a crashed big write's staged rows
        return len(ids)

    # -- staging: one big document written window by window, invisible until published ------------------
    def stage_document(self, doc_id: str) -> bool:
        """Begin staging the chunks of document ``doc_id``: chunk rows whose document row is not written yet
        (no read, count, search or replica sees them; only the commit that publishes them writes it), marked
        in the info table.  Rows an earlier crashed or removed copy left are dropped.  ``False`` when the
        document is stored complete."""
        if not self.supports_staging:
            return super().stage_document(doc_id)
        d = self.dialect
        with d.writing() as tx:
            row = tx.execute(self._sql("SELECT state FROM {s}documents WHERE id=?"), (doc_id,)).fetchone()
            if row is not None and row[0] == COMPLETE:
                return False
            self._delete_rows(tx, [doc_id])
            tx.execute(
                d.insert("info", ("key", "value"), "replace", "key"), (STAGED_KEY + doc_id, str(time.time()))
            )
        return True

    def stage_chunks(self, parent_id: str, chunks: Sequence[ChunkRecord]) -> None:
        """Write chunks of the staged document ``parent_id`` in their own transaction."""
        if not self.supports_staging:
            return super().stage_chunks(parent_id, chunks)
        key = STAGED_KEY + parent_id
        rows, embedded = self._chunk_rows(chunks)
        with self.dialect.writing() as tx:
            if tx.execute(self._sql("SELECT 1 FROM {s}info WHERE key=?"), (key,)).fetchone() is None:
                raise LedgerCorruptError(
                    self.name, f"document {parent_id} is no longer staged; another process discarded it"
                )
            tx.execute(self._sql("UPDATE {s}info SET value=? WHERE key=?"), (str(time.time()), key))
            self._insert_chunks(tx, rows, embedded, "replace", uncache=False)

    def discard_staged(self, doc_ids: Sequence[str] | None = None, older_than: float | None = None) -> int:
        """Delete the staged chunks of ``doc_ids`` (or of every document staged and untouched for
        ``older_than`` seconds: a crashed write's); returns how many documents."""
        if not self.supports_staging:
            return 0
        cutoff = time.time() - (STAGED_GRACE_SECONDS if older_than is None else older_than)
        d = self.dialect
        with d.statement() as db:  # (a transaction only when there is something to delete)
            rows = db.execute(
                self._sql("SELECT key, value FROM {s}info WHERE substr(key, 1, ?) = ?"),
                (len(STAGED_KEY), STAGED_KEY),
            ).fetchall()
            staged = {key[len(STAGED_KEY) :]: float(value) for key, value in rows}
            if doc_ids is None:
                ids = [i for i, touched in staged.items() if touched < cutoff]
            else:
                ids = [i for i in doc_ids if i in staged]
            if ids:
                with d.writing() as tx:
                    for doc_id in ids:
                        found = tx.execute(self._sql("SELECT 1 FROM {s}documents WHERE id=?"), (doc_id,))
                        if found.fetchone() is None:
                            d.delete_chunks_of(tx, [doc_id])
                        tx.execute(self._sql("DELETE FROM {s}info WHERE key=?"), (STAGED_KEY + doc_id,))
        return len(ids)

    def _publish(self, tx: Any, doc: DocumentRecord, count: int, now: float) -> None:
        """Inside the commit transaction: a staged document's row is written and its staged chunks become
        its chunks (one change row): the commit point of a big file."""
        d = self.dialect
        key = STAGED_KEY + doc.id
        marked = tx.execute(self._sql("SELECT 1 FROM {s}info WHERE key=?"), (key,)).fetchone()
        held = d.chunk_counts(tx, [doc.id]).get(doc.id, 0)
        if marked is None or held != count:
            raise LedgerCorruptError(
                self.name,
                f"staged document {doc.id} holds {held} of its {count} chunks; another process discarded "
                "them (add the file again)",
            )
        self._delete_rows(tx, [doc.id], chunks=False)  # a removed earlier copy: staging replaced its chunks
        self._insert_documents(tx, [(doc.id, d.document_row(doc), count)], now)
        # each vector is kept once: the cache kept them for a rerun until now
        d.uncache_chunks_of(tx, doc.id, self._recorded_model(tx))
        tx.execute(self._sql("DELETE FROM {s}info WHERE key=?"), (key,))

    # -- read -----------------------------------------------------------------------------------------
    def content_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The stored version hash of each complete document among ``doc_ids``."""
        d = self.dialect
        found: dict[str, str] = {}
        with d.reading() as db:
            for batch in iter_batches([i for i in doc_ids if d.storable(i)], d.batch):
                where, args = d.any_of("id", batch)
                # (SQLite: +state seeks each id by key, not a scan of every complete document by state)
                query = (
                    f"SELECT id, content_hash FROM {{s}}documents WHERE {d.not_by_index}state=? AND {where}"
                )
                found.update(db.execute(self._sql(query), [COMPLETE, *args]).fetchall())
        return found

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        """A document by id, whatever its state (a removed one until its rows are collected)."""
        d = self.dialect
        if not d.storable(doc_id):
            return None
        with d.reading() as db:
            row = db.execute(
                self._sql(f"SELECT {d.document_read} FROM {{s}}documents WHERE id=?"), (doc_id,)
            ).fetchone()
        return None if row is None else self._document(row)

    def quarantined(self) -> Quarantine:
        """The documents found damaged so far (:class:`~.rows.Quarantine`), until they are written again."""
        return self.quarantine

    def get_chunks(
        self, chunk_ids: Sequence[str], *, with_embedding: bool = False, visible_at: int | None = None
    ) -> list[ChunkRecord]:
        """Chunks by id, in the order asked; unknown ids are left out.

        With ``visible_at=seq`` only chunks of documents that were stored at that change are returned:
        added at or before it, and not removed by then (a search whose indexes reflect ``seq``; an index
        another process checkpointed may already hold later chunks)."""
        d = self.dialect
        found: dict[str, ChunkRecord] = {}
        cols = d.chunk_read + (d.embedding_read if with_embedding else "")
        join, extra = d.document_join, list[Any]()
        if visible_at is not None:
            join = (
                " JOIN {s}documents d ON d.id = c.parent_id AND COALESCE(d.added_seq, 0) <= ?"
                " AND (d.state = 'complete' OR d.removed_seq > ?)"
            )
            extra = [visible_at, visible_at]
        join += d.embedding_join if with_embedding else ""
        with d.reading() as db:
            for batch in iter_batches([i for i in chunk_ids if d.storable(i)], d.batch):
                where, args = d.any_of("c.id", batch)
                query = self._sql(f"SELECT {cols} FROM {{s}}chunks c{join} WHERE {where}")
                # a batch's rows first, then decoded: stepping the statement between decodes took longer
                for row in db.execute(query, extra + args).fetchall():
                    chunk = self._chunk(row, with_embedding)
                    if chunk is not None:
                        found[row[0]] = chunk
        if not self.quarantine:
            return [found[i] for i in chunk_ids if i in found]
        return [found[i] for i in chunk_ids if i in found and owner_of(i) not in self.quarantine]

    def chunks_of(self, parent_id: str, *, with_embedding: bool = False) -> list[ChunkRecord]:
        """The chunks of one document in order."""
        d = self.dialect
        if not d.storable(parent_id):
            return []
        cols = d.chunk_read + (d.embedding_read if with_embedding else "")
        join = d.document_join + (d.embedding_join if with_embedding else "")
        where, args = d.of_parent(parent_id)
        with d.reading() as db:
            rows = db.execute(
                self._sql(f"SELECT {cols} FROM {{s}}chunks c{join} WHERE {where} ORDER BY c.split_index"),
                args,
            ).fetchall()
            chunks = [self._chunk(r, with_embedding) for r in rows]
        return [] if parent_id in self.quarantine else [c for c in chunks if c is not None]

    def complete_chunk_ids(self) -> set[str]:
        """Ids of every chunk of a complete document."""
        with self.dialect.reading() as db:
            rows = db.execute(
                self._sql(
                    "SELECT c.id FROM {s}chunks c JOIN {s}documents d ON d.id = c.parent_id WHERE d.state=?"
                ),
                (COMPLETE,),
            )
            return {r[0] for r in rows}

    def sample_chunk_ids(self, size: int) -> list[str]:
        """``size`` complete chunk ids spread evenly over the dialect's seek key, one index seek each: the cost
        does not grow with the corpus (a fresh process draws the relevance background on its first search).
        The same ledger state gives the same sample in every process; a small table is read whole."""
        d = self.dialect
        with d.reading() as db:
            low, high = d.seek_bounds(db)
            if low is None or high is None or high - low + 1 <= SAMPLE_SEEK_FACTOR * size:
                return super().sample_chunk_ids(size)
            span = high - low + 1
            points = [low + (2 * i + 1) * span // (2 * size) for i in range(size)]
            return list(dict.fromkeys(d.seek(db, points)))

    # -- catalog --------------------------------------------------------------------------------------
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
        d = self.dialect
        if source is not None and not d.storable(source):
            return []
        if where is None:  # page in SQL: no metadata is parsed
            query = "SELECT id FROM {s}documents WHERE state=?" + (
                " AND source=?" if source is not None else ""
            )
            args: list[Any] = [COMPLETE, *([source] if source is not None else [])]
            with d.reading() as db:
                chosen = [
                    r[0]
                    for r in db.execute(
                        self._sql(query + " ORDER BY seq LIMIT ? OFFSET ?"),
                        [*args, d.no_limit if limit is None else limit, offset],
                    ).fetchall()
                ]
        else:
            ids = self.document_ids(source=source, where=where)
            chosen = ids[offset:] if limit is None else ids[offset : offset + limit]
        records: list[DocumentRecord] = []
        with d.reading() as db:
            for batch in iter_batches(chosen):
                cond, batch_args = d.any_of("id", batch)
                query = self._sql(f"SELECT {d.document_read} FROM {{s}}documents WHERE {cond}")
                rows = {r[0]: r for r in db.execute(query, batch_args).fetchall()}
                decoded = (self._document(r) for r in (rows.get(i) for i in batch) if r is not None)
                records.extend(doc for doc in decoded if doc is not None)
        return records

    def document_metadata(self, *, source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """``(id, metadata)`` of every complete document (of ``source``) in insertion order, without texts."""
        d = self.dialect
        if source is not None and not d.storable(source):
            return []
        query = "SELECT id, metadata FROM {s}documents WHERE state=?"
        args: list[Any] = [COMPLETE]
        if source is not None:
            query += " AND source=?"
            args.append(source)
        with d.reading() as db:
            rows = db.execute(self._sql(query + " ORDER BY seq"), args).fetchall()
        decoded = [(r[0], self._document_metadata(r[0], r[1])) for r in rows]
        return [(i, md) for i, md in decoded if md is not None]

    def ids_with_document_id(self, document_id: str) -> list[str]:
        """Complete documents whose metadata ``document_id`` is ``document_id``, in insertion order."""
        d = self.dialect
        if _SURROGATE.search(document_id):  # lone surrogates: stored metadata never holds them (clean_text)
            return []
        if not d.storable(document_id):  # not in the indexed column: read the metadata
            return [i for i, md in self.document_metadata() if md.get(DOCUMENT_ID) == document_id]
        with d.reading() as db:
            rows = db.execute(
                self._sql(f"SELECT id FROM {{s}}documents WHERE state=? AND {d.document_id}=? ORDER BY seq"),
                (COMPLETE, document_id),
            ).fetchall()
        return [r[0] for r in rows]

    def counts(self) -> dict[str, int]:
        """Numbers of complete documents and of their chunks: ``{"documents": n, "chunks": m}``."""
        with self.snapshot(), self.dialect.reading() as db:
            return self.dialect.counts(db)

    def chunk_count(self, doc_ids: Sequence[str]) -> int:
        """How many chunks the documents ``doc_ids`` have."""
        d = self.dialect
        with d.reading() as db:
            return sum(d.chunk_counts(db, [i for i in doc_ids if d.storable(i)]).values())

    def sources(self) -> list[str]:
        """Every source of a complete document, sorted by code point."""
        with self.dialect.reading() as db:
            rows = db.execute(
                self._sql(
                    f"SELECT DISTINCT {self.dialect.source_order} AS s FROM {{s}}documents"
                    " WHERE state=? AND source IS NOT NULL ORDER BY s"
                ),
                (COMPLETE,),
            ).fetchall()
        return [r[0] for r in rows]

    # -- embedding cache ------------------------------------------------------------------------------
    def cached_embeddings(self, model: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already computed by ``model`` for these text hashes (missing ones are left out): from the
        cache, or from a stored chunk of the same text when ``model`` is the one this ledger records."""
        d = self.dialect
        found: dict[str, np.ndarray] = {}
        if not d.storable(model):
            return found
        with d.reading() as db:
            for batch in iter_batches(list(text_hashes), d.batch):
                where, args = d.any_of("text_hash", batch)
                rows = db.execute(
                    self._sql(
                        f"SELECT text_hash, vector FROM {{s}}embedding_cache WHERE model=? AND {where}"
                    ),
                    [model, *args],
                )
                found.update((h, np.frombuffer(bytes(v), dtype="<f4")) for h, v in rows)
            missing = [h for h in dict.fromkeys(text_hashes) if h not in found]
            if missing and self.get_info("embedding_model_id") == model:
                found.update(d.stored_vectors(db, missing))
        return found

    def cache_embeddings(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Remember vectors by (model, text hash); committed at once, independently of any document write,
        so work done before a crash is not repeated."""
        d = self.dialect
        rows = [(d.checked(model, "model name"), h, np.asarray(v, dtype="<f4").tobytes()) for h, v in items]
        if not rows:
            return
        with d.writing() as tx:
            tx.executemany(d.insert("embedding_cache", ("model", "text_hash", "vector"), "ignore"), rows)

    def embedding_cache_size(self) -> dict[str, int]:
        """``{"entries": n, "bytes": b}`` of the embedding cache (vector bytes, every model)."""
        with self.dialect.reading() as db:
            row = db.execute(
                self._sql("SELECT COUNT(*), COALESCE(SUM(length(vector)), 0) FROM {s}embedding_cache")
            ).fetchone()
        entries, size = row if row is not None else (0, 0)
        return {"entries": int(entries), "bytes": int(size)}

    def prune_embedding_cache(self) -> int:
        """Empty the embedding cache; returns how many vectors were deleted."""
        with self.dialect.writing() as tx:
            return int(tx.execute(self._sql("DELETE FROM {s}embedding_cache")).rowcount)

    # -- decoding rows --------------------------------------------------------------------------------
    def _chunk(self, row: Sequence[Any], with_embedding: bool) -> ChunkRecord | None:
        """A chunk row decoded, or None (its document quarantined) when any field of it is damaged."""
        try:
            chunk = self.dialect.chunk(row, with_embedding, self.get_info)
        except RowDamage as exc:
            self.quarantine.add(owner_of(str(row[0])), f"chunk {row[0]}", exc)
            return None
        return None if self.quarantine and owner_of(str(row[0])) in self.quarantine else chunk

    def _document(self, row: Sequence[Any]) -> DocumentRecord | None:
        """A document row decoded, or None (quarantined) when its metadata is damaged."""
        doc_id, source, content_hash, state, content, stored = self.dialect.document_fields(row)
        md = self._document_metadata(doc_id, stored)
        return None if md is None else DocumentRecord(doc_id, source, content_hash, state, content, md)

    def _document_metadata(self, doc_id: str, stored: Any) -> dict[str, Any] | None:
        if doc_id in self.quarantine:
            return None
        try:
            return self.dialect.document_metadata(doc_id, stored)
        except RowDamage as exc:
            self.quarantine.add(doc_id, f"document {doc_id}", exc)
            return None
