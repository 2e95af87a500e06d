"""The ledger: a SQLite record of every document and chunk, the single source of truth.

The vector and keyword stores are indexes derived from the ledger and can be rebuilt from it (chunk
texts, metadata and embeddings are all kept here).  Writes go record-first: a document is inserted as
``pending``, the indexes are updated, and only then is it marked ``complete`` in one transaction.
Removal marks ``deleting`` first.  On open, :meth:`Ledger.recover` tells the caller what was left
half-done so it can roll back pending adds and finish pending deletes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Ledger", "ChunkRecord", "DocumentRecord", "PENDING", "COMPLETE", "DELETING"]

PENDING, COMPLETE, DELETING = "pending", "complete", "deleting"
SCHEMA_VERSION = "1"

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
    added_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_source_state ON documents(source, state, seq);
CREATE INDEX IF NOT EXISTS documents_state ON documents(state);
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY,
    parent_id TEXT NOT NULL,
    split_index INTEGER NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    embedding BLOB
);
CREATE INDEX IF NOT EXISTS chunks_parent ON chunks(parent_id, split_index);
CREATE TABLE IF NOT EXISTS embedding_cache (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class DocumentRecord:
    """A parent document as recorded in the ledger."""

    id: str
    source: str | None
    content_hash: str
    state: str
    content: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class ChunkRecord:
    """A child chunk: what the vector and keyword indexes hold."""

    id: str
    parent_id: str
    split_index: int
    content: str
    metadata: dict[str, Any]
    embedding: np.ndarray | None = None


def _dumps(md: dict[str, Any]) -> str:
    return json.dumps(md, ensure_ascii=False, sort_keys=True, default=str)


class Ledger:
    """SQLite-backed record of documents and chunks (``path=None``: in memory)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        target = str(self.path) if self.path is not None else ":memory:"
        try:
            self._db = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL" if self.path else "PRAGMA journal_mode=MEMORY")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"ledger {target}: not a FinderLedge ledger or corrupt ({exc})") from exc
        self._lock = threading.RLock()
        version = self.get_info("schema_version")
        if version is None:
            self.set_info("schema_version", SCHEMA_VERSION)
        elif version != SCHEMA_VERSION:
            raise ValueError(f"ledger {target}: schema version {version}, this FinderLedge reads {SCHEMA_VERSION}")

    # -- info ---------------------------------------------------------------------------------------
    def get_info(self, key: str) -> str | None:
        """A value from the ledger's key/value table (settings recorded at creation)."""
        row = self._db.execute("SELECT value FROM info WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_info(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO info(key, value) VALUES (?, ?)", (key, value))

    # -- writes -------------------------------------------------------------------------------------
    def begin_add(
        self,
        documents: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]],
    ) -> None:
        """Insert documents and their chunks as ``pending`` in one transaction."""
        now = time.time()
        with self._lock, self._transaction():
            for doc, chunks in documents:
                self._db.execute(
                    "INSERT INTO documents(id, source, content_hash, state, content, metadata, added_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (doc.id, doc.source, doc.content_hash, PENDING, doc.content, _dumps(doc.metadata), now),
                )
                self._db.executemany(
                    "INSERT INTO chunks(id, parent_id, split_index, content, metadata, embedding)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (
                            c.id,
                            c.parent_id,
                            c.split_index,
                            c.content,
                            _dumps(c.metadata),
                            None if c.embedding is None else np.asarray(c.embedding, dtype="<f4").tobytes(),
                        )
                        for c in chunks
                    ],
                )

    def commit_changes(self, completed: Iterable[str] = (), to_delete: Iterable[str] = ()) -> None:
        """In one transaction: mark ``completed`` documents complete and ``to_delete`` ones deleting."""
        with self._lock, self._transaction():
            self._db.executemany("UPDATE documents SET state=? WHERE id=?", [(COMPLETE, i) for i in completed])
            self._db.executemany("UPDATE documents SET state=? WHERE id=?", [(DELETING, i) for i in to_delete])

    def purge(self, doc_ids: Iterable[str]) -> None:
        """Delete documents and their chunks from the record (after the indexes dropped them)."""
        ids = list(doc_ids)
        with self._lock, self._transaction():
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                marks = ",".join("?" * len(batch))
                self._db.execute(f"DELETE FROM chunks WHERE parent_id IN ({marks})", batch)
                self._db.execute(f"DELETE FROM documents WHERE id IN ({marks})", batch)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    # -- reads --------------------------------------------------------------------------------------
    def document_state(self, doc_id: str) -> str | None:
        row = self._db.execute("SELECT state FROM documents WHERE id=?", (doc_id,)).fetchone()
        return None if row is None else str(row[0])

    def ids_in_state(self, state: str) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT id FROM documents WHERE state=? ORDER BY seq", (state,))]

    def ids_by_source(self, source: str) -> list[str]:
        """Complete documents recorded for ``source``, in insertion order."""
        rows = self._db.execute(
            "SELECT id FROM documents WHERE source=? AND state=? ORDER BY seq", (source, COMPLETE)
        )
        return [r[0] for r in rows]

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        row = self._db.execute(
            "SELECT id, source, content_hash, state, content, metadata FROM documents WHERE id=?", (doc_id,)
        ).fetchone()
        return None if row is None else DocumentRecord(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]))

    def list_documents(self, *, source: str | None = None, limit: int | None = None) -> list[DocumentRecord]:
        """Complete documents in insertion order, optionally only those of one source."""
        sql = "SELECT id, source, content_hash, state, content, metadata FROM documents WHERE state=?"
        args: list[Any] = [COMPLETE]
        if source is not None:
            sql += " AND source=?"
            args.append(source)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [DocumentRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in self._db.execute(sql, args)]

    def get_chunk(self, chunk_id: str, *, with_embedding: bool = False) -> ChunkRecord | None:
        rows = self.get_chunks([chunk_id], with_embedding=with_embedding)
        return rows[0] if rows else None

    def get_chunks(self, chunk_ids: Sequence[str], *, with_embedding: bool = False) -> list[ChunkRecord]:
        """Chunks by id, in the order asked (unknown ids are left out)."""
        found: dict[str, ChunkRecord] = {}
        cols = "id, parent_id, split_index, content, metadata" + (", embedding" if with_embedding else "")
        for start in range(0, len(chunk_ids), 500):
            batch = list(chunk_ids[start : start + 500])
            marks = ",".join("?" * len(batch))
            for row in self._db.execute(f"SELECT {cols} FROM chunks WHERE id IN ({marks})", batch):
                found[row[0]] = self._chunk(row, with_embedding)
        return [found[i] for i in chunk_ids if i in found]

    def chunks_of(self, parent_id: str, *, with_embedding: bool = False) -> list[ChunkRecord]:
        cols = "id, parent_id, split_index, content, metadata" + (", embedding" if with_embedding else "")
        rows = self._db.execute(
            f"SELECT {cols} FROM chunks WHERE parent_id=? ORDER BY split_index", (parent_id,)
        )
        return [self._chunk(r, with_embedding) for r in rows]

    def chunk_ids_of(self, doc_ids: Iterable[str]) -> list[str]:
        out: list[str] = []
        ids = list(doc_ids)
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            out.extend(r[0] for r in self._db.execute(f"SELECT id FROM chunks WHERE parent_id IN ({marks})", batch))
        return out

    def complete_chunk_ids(self) -> set[str]:
        rows = self._db.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.parent_id WHERE d.state=?", (COMPLETE,)
        )
        return {r[0] for r in rows}

    def iter_chunks(self, chunk_ids: Iterable[str], *, with_embedding: bool = True,
                    batch_size: int = 1000) -> Iterator[list[ChunkRecord]]:
        """The chunks of ``chunk_ids`` in batches: used to restore an index from the ledger."""
        ids = list(chunk_ids)
        for start in range(0, len(ids), batch_size):
            yield self.get_chunks(ids[start : start + batch_size], with_embedding=with_embedding)

    # -- embedding cache ----------------------------------------------------------------------------
    def cached_embeddings(self, model: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already computed by ``model`` for these text hashes (missing ones are left out)."""
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(text_hashes), 500):
            batch = list(text_hashes[start : start + 500])
            marks = ",".join("?" * len(batch))
            rows = self._db.execute(
                f"SELECT text_hash, vector FROM embedding_cache WHERE model=? AND text_hash IN ({marks})",
                [model, *batch],
            )
            found.update((h, np.frombuffer(v, dtype="<f4")) for h, v in rows)
        return found

    def cache_embeddings(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Remember vectors by (model, text hash); committed at once, independently of any document write,
        so work done before a crash is not repeated."""
        rows = [(model, h, np.asarray(v, dtype="<f4").tobytes()) for h, v in items]
        with self._lock, self._transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO embedding_cache(model, text_hash, vector) VALUES (?, ?, ?)", rows
            )

    def sources_under(self, prefix: str) -> list[str]:
        """Complete sources that start with ``prefix`` (a directory path ending in a separator)."""
        rows = self._db.execute(  # substr, not LIKE: LIKE ignores case and treats _ and % specially
            "SELECT DISTINCT source FROM documents WHERE state=? AND substr(source, 1, ?) = ?",
            (COMPLETE, len(prefix), prefix),
        )
        return [r[0] for r in rows]

    def counts(self) -> dict[str, int]:
        """Numbers of complete documents and chunks, and of unfinished documents."""
        docs = self._db.execute("SELECT COUNT(*) FROM documents WHERE state=?", (COMPLETE,)).fetchone()[0]
        chunks = self._db.execute(
            "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.parent_id WHERE d.state=?", (COMPLETE,)
        ).fetchone()[0]
        unfinished = self._db.execute("SELECT COUNT(*) FROM documents WHERE state!=?", (COMPLETE,)).fetchone()[0]
        return {"documents": int(docs), "chunks": int(chunks), "unfinished": int(unfinished)}

    def sources(self) -> list[str]:
        rows = self._db.execute(
            "SELECT DISTINCT source FROM documents WHERE state=? AND source IS NOT NULL ORDER BY source", (COMPLETE,)
        )
        return [r[0] for r in rows]

    @staticmethod
    def _chunk(row: Sequence[Any], with_embedding: bool) -> ChunkRecord:
        emb = None
        if with_embedding and row[5] is not None:
            emb = np.frombuffer(row[5], dtype="<f4")
        return ChunkRecord(row[0], row[1], int(row[2]), row[3], json.loads(row[4]), emb)

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("ROLLBACK" if exc_type is not None else "COMMIT")
