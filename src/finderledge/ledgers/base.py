"""What every ledger keeps and answers: the records, the change log's vocabulary, and the interface.

The ledger is the single source of truth: documents, their chunks (texts, metadata, vectors), a change
log numbering every write (``seq``), recorded settings and the embedding cache.  Indexes are derived from
it (see :mod:`finderledge.replica`).  Two implementations: :class:`~finderledge.ledgers.sqlite.SQLiteLedger`
(a file in the persist directory) and :class:`~finderledge.ledgers.postgres.PostgresLedger` (a database
many machines share).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..relevance import sample_key

__all__ = [
    "ADD",
    "COMPLETE",
    "DELETING",
    "INDEX_FOLDERS",
    "PENDING",
    "REMOVE",
    "REMOVED",
    "REMOVED_GRACE_SECONDS",
    "SCHEMA_VERSION",
    "Change",
    "ChunkRecord",
    "DocumentRecord",
    "Ledger",
    "content_id",
]

PENDING, COMPLETE, DELETING = "pending", "complete", "deleting"  # pending/deleting: version-1 ledgers only
STAGED_GRACE_SECONDS = 3600.0  # staged rows untouched this long are a crashed write's: gc deletes them
REMOVED = "removed"  # removed at ``removed_seq``; rows kept a while for searches still reflecting older seqs
REMOVED_GRACE_SECONDS = 600.0
# 4: chunks carry their text's hash (a committed vector is found by it, so the embedding cache drops it);
# 3: FinderLedge's fields under metadata["_finderledge"]; 2: at the top level
SCHEMA_VERSION = "4"
ADD, REMOVE = "add", "remove"
INDEX_FOLDERS = (
    "bm25",
    "chroma",
    "faiss",
)  # indexes built from the ledger, next to it in a persist directory


def content_id(*parts: str) -> str:
    """A 128-bit content id (32 hex characters) of the parts; of one text: its hash in the embedding cache."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


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


@dataclass(frozen=True)
class Change:
    """One entry of the change log: a document added or removed, with its number of chunks."""

    seq: int
    op: str  # ADD or REMOVE
    doc_id: str
    chunk_count: int


class Ledger(ABC):
    """The source of truth of one index.  Reads see committed writes only; every write is one transaction."""

    #: the SQLite file (None for an in-memory or a database ledger)
    path: Path | None = None
    #: a stable, secret-free name for messages and for keying local replicas (never a password)
    name: str = ""

    # -- info ---------------------------------------------------------------------------------------
    @abstractmethod
    def get_info(self, key: str) -> str | None:
        """A value from the key/value table (recorded settings, index checkpoints)."""

    @abstractmethod
    def set_info(self, key: str, value: str | None) -> None:
        """Set (or with ``None`` delete) a key."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside the block (in this thread) see one consistent state."""

    # -- writes -------------------------------------------------------------------------------------
    #: whether a big document's chunks can be staged in several transactions (:meth:`stage_document`)
    supports_staging: bool = False

    @abstractmethod
    def commit_write(
        self,
        add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]] = (),
        remove: Sequence[str] = (),
        publish: Sequence[tuple[DocumentRecord, int]] = (),
    ) -> int:
        """In one transaction: mark ``remove`` removed, add documents with their chunks, add the documents
        ``publish`` (``(record, chunk_count)``) whose chunks were staged, log each change; returns the last
        change's ``seq``."""

    def stage_document(self, doc_id: str) -> bool:
        """Begin staging the chunks of ``doc_id`` (invisible to every read until :meth:`commit_write`
        publishes them); ``False`` when it is already stored complete.  Only where :attr:`supports_staging`."""
        raise NotImplementedError(f"ledger {self.name}: staging a document is not supported")

    def stage_chunks(self, parent_id: str, chunks: Sequence[ChunkRecord]) -> None:
        """Write some chunks of a staged document, in their own transaction."""
        raise NotImplementedError(f"ledger {self.name}: staging a document is not supported")

    def discard_staged(self, doc_ids: Sequence[str] | None = None, older_than: float | None = None) -> int:
        """Delete staged rows (of ``doc_ids``, or all untouched for ``older_than`` seconds); returns how many
        documents.  A no-op where nothing can be staged."""
        return 0

    @abstractmethod
    def collect_removed(self, older_than: float = REMOVED_GRACE_SECONDS) -> int:
        """Delete rows of documents removed more than ``older_than`` seconds ago; returns how many."""

    @abstractmethod
    def purge(self, doc_ids: Iterable[str]) -> None:
        """Delete documents a version-1 ledger left unfinished."""

    # -- the change log -----------------------------------------------------------------------------
    @abstractmethod
    def last_seq(self) -> int:
        """The ``seq`` of the newest change (0 when nothing was ever written)."""

    @abstractmethod
    def changes_since(self, seq: int, upto: int | None = None) -> list[Change]:
        """Changes with ``seq < change.seq <= upto``, oldest first."""

    # -- reads --------------------------------------------------------------------------------------
    @abstractmethod
    def document_state(self, doc_id: str) -> str | None: ...

    @abstractmethod
    def complete_ids(self, doc_ids: Iterable[str]) -> set[str]:
        """Which of ``doc_ids`` are stored as complete documents."""

    @abstractmethod
    def ids_in_state(self, state: str) -> list[str]: ...

    @abstractmethod
    def ids_by_source(self, source: str) -> list[str]:
        """Complete documents recorded for ``source``, in insertion order."""

    @abstractmethod
    def content_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The stored version hash of each complete document among ``doc_ids``."""

    @abstractmethod
    def get_document(self, doc_id: str) -> DocumentRecord | None: ...

    @abstractmethod
    def list_documents(
        self,
        *,
        source: str | None = None,
        where: Callable[[dict[str, Any]], bool] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[DocumentRecord]:
        """Complete documents in insertion order (of ``source``; accepted by ``where``), paged."""

    def document_ids(
        self, *, source: str | None = None, where: Callable[[dict[str, Any]], bool] | None = None
    ) -> list[str]:
        """Ids of complete documents in insertion order (of ``source``; whose metadata ``where`` accepts)."""
        return [i for i, md in self.document_metadata(source=source) if where is None or where(md)]

    @abstractmethod
    def document_metadata(self, *, source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """``(id, metadata)`` of every complete document (of ``source``) in insertion order."""

    @abstractmethod
    def ids_with_document_id(self, document_id: str) -> list[str]:
        """Complete documents whose metadata ``document_id`` is ``document_id``, in insertion order."""

    @abstractmethod
    def chunk_count(self, doc_ids: Sequence[str]) -> int: ...

    def get_chunk(self, chunk_id: str, *, with_embedding: bool = False) -> ChunkRecord | None:
        rows = self.get_chunks([chunk_id], with_embedding=with_embedding)
        return rows[0] if rows else None

    @abstractmethod
    def get_chunks(
        self, chunk_ids: Sequence[str], *, with_embedding: bool = False, visible_at: int | None = None
    ) -> list[ChunkRecord]:
        """Chunks by id in the order asked (unknown ids left out); ``visible_at=seq``: only chunks of documents
        stored at that change (added at or before it, not removed by then)."""

    @abstractmethod
    def chunks_of(self, parent_id: str, *, with_embedding: bool = False) -> list[ChunkRecord]: ...

    @abstractmethod
    def complete_chunk_ids(self) -> set[str]: ...

    def sample_chunk_ids(self, size: int) -> list[str]:
        """``size`` complete chunk ids, the same in every process for the same ledger state (all of them in a
        smaller corpus): here the smallest hashes of every id; a ledger that can seek draws them without
        reading every id (SQLite), so a fresh process's first search does not grow with the corpus."""
        return sorted(self.complete_chunk_ids(), key=sample_key)[:size]

    @abstractmethod
    def cached_embeddings(self, model: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already computed by ``model`` for these text hashes: in the embedding cache, or (``model``
        being the ledger's recorded one) in a stored chunk of the same text."""

    @abstractmethod
    def cache_embeddings(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Remember vectors by (model, text hash), committed at once, until a write stores them in its chunks
        (``commit_write`` drops the cache entries of the texts it stores: each vector is kept once)."""

    @abstractmethod
    def embedding_cache_size(self) -> dict[str, int]:
        """``{"entries": n, "bytes": b}`` of the embedding cache (vector bytes, every model)."""

    @abstractmethod
    def prune_embedding_cache(self) -> int:
        """Empty the embedding cache (vectors no stored chunk holds: left by failed or interrupted writes, or of
        other models); returns how many were deleted."""

    @abstractmethod
    def sources_under(self, prefix: str) -> list[str]:
        """Complete sources that start with ``prefix``."""

    @abstractmethod
    def has_unfinished(self) -> bool: ...

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Numbers of complete documents and chunks, and of unfinished documents."""

    @abstractmethod
    def sources(self) -> list[str]: ...

    @abstractmethod
    def close(self) -> None: ...


def iter_batches(items: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    """``items`` in lists of at most ``size`` (SQL parameter limits)."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
