"""What every ledger keeps and answers: the records, the change log's vocabulary, and the interface.

The ledger is the single source of truth: documents, their chunks (texts, metadata, vectors), a change
log numbering every write (``seq``), recorded settings and the embedding cache.  Indexes are derived from
it (see :mod:`finderledge.replica.core`).  One implementation, :class:`~finderledge.ledgers.sql.SQLLedger`, over
a dialect per database: :class:`~finderledge.ledgers.sqlite.SQLiteLedger` (a file in the persist directory)
and :class:`~finderledge.ledgers.postgres.PostgresLedger` (a database many machines share).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IncompatibleIndexError
from ..ranking.relevance import sample_key

__all__ = [
    "ADD",
    "COMPLETE",
    "INDEX_FOLDERS",
    "REMOVE",
    "REMOVED",
    "REMOVED_GRACE_SECONDS",
    "SCHEMA_VERSION",
    "Change",
    "ChunkRecord",
    "DocumentRecord",
    "Ledger",
    "check_schema_version",
    "content_id",
]

COMPLETE = "complete"  # a stored document, visible to every read
STAGED_GRACE_SECONDS = 3600.0  # staged rows untouched this long are a crashed write's: gc deletes them
REMOVED = "removed"  # removed at ``removed_seq``; rows kept a while for searches still reflecting older seqs
REMOVED_GRACE_SECONDS = 600.0
#: The layout of the ledger's tables, recorded in its info table (``schema_version``).  No release wrote an
#: older one (versions 1-3 were development builds, refused at open); a later release that changes the layout
#: raises it and migrates from this one.  A ledger recording a higher version is refused.  The Postgres
#: ledger writes this one; the SQLite ledger writes its own
#: (:data:`finderledge.ledgers.sqlite.SQLITE_SCHEMA_VERSION`, which reads this one too).
SCHEMA_VERSION = 4
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


def check_schema_version(
    name: str, recorded: str | None, current: int = SCHEMA_VERSION, also: Collection[int] = ()
) -> None:
    """Refuse a ledger whose recorded layout this FinderLedge does not read: one a newer release wrote (upgrade
    FinderLedge), or one a development build wrote before the first release (no migration exists for it).
    ``current`` is the layout this ledger kind writes (:data:`SCHEMA_VERSION` unless it has its own),
    ``also`` older released layouts it still reads."""
    if recorded == str(current) or any(recorded == str(v) for v in also):
        return
    if recorded is not None and recorded.isdigit() and int(recorded) > current:
        raise IncompatibleIndexError(
            f"ledger {name}: schema version {recorded} was written by a newer FinderLedge; this one reads "
            f"schema version {current} (upgrade finderledge to open it)"
        )
    raise IncompatibleIndexError(
        f"ledger {name}: schema version {recorded!r} is not one this FinderLedge reads (schema version "
        f"{current}); it was written by a development build before the first release: build the index "
        "again from its sources in a new persist_directory (or database schema)"
    )


class Ledger(ABC):
    """The source of truth of one index.  Reads see committed writes only; every write is one transaction.

    The interface is a few capabilities; everything else a caller asks is derived from them here:

    * **records**: :meth:`get_info`/:meth:`set_info` (recorded settings, checkpoints), :meth:`snapshot`,
      :meth:`close`;
    * **write**: :meth:`commit_write` (one change set: adds, removes, published big documents) and
      :meth:`collect_removed`; staging a big document where :attr:`supports_staging`;
    * **sync** (replicas follow the ledger): :meth:`last_seq`, :meth:`changes_since`;
    * **read**: :meth:`get_chunks`, :meth:`chunks_of`, :meth:`get_document`, :meth:`content_hashes`,
      :meth:`complete_chunk_ids` (and the derived :meth:`get_chunk`, :meth:`complete_ids`,
      :meth:`document_state`, :meth:`sample_chunk_ids`);
    * **catalog**: :meth:`list_documents`, :meth:`document_metadata`, :meth:`ids_with_document_id`,
      :meth:`counts`, :meth:`chunk_count`, :meth:`sources` (and the derived :meth:`document_ids`,
      :meth:`sources_under`);
    * **embedding cache**: :meth:`cached_embeddings`, :meth:`cache_embeddings`, :meth:`embedding_cache_size`,
      :meth:`prune_embedding_cache`.
    """

    #: the SQLite file (None for an in-memory or a database ledger)
    path: Path | None = None
    #: a stable, secret-free name for messages and for keying local replicas (never a password)
    name: str = ""

    # -- records ------------------------------------------------------------------------------------
    @abstractmethod
    def get_info(self, key: str) -> str | None:
        """A value from the key/value table (recorded settings, index checkpoints)."""

    @abstractmethod
    def set_info(self, key: str, value: str | None) -> None:
        """Set (or with ``None`` delete) a key."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """Reads inside the block (in this thread) see one consistent state."""

    @abstractmethod
    def close(self) -> None: ...

    # -- write --------------------------------------------------------------------------------------
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

    @abstractmethod
    def collect_removed(self, older_than: float = REMOVED_GRACE_SECONDS) -> int:
        """Delete rows of documents removed more than ``older_than`` seconds ago; returns how many."""

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

    # -- sync: the change log -----------------------------------------------------------------------
    @abstractmethod
    def last_seq(self) -> int:
        """The ``seq`` of the newest change (0 when nothing was ever written)."""

    @abstractmethod
    def changes_since(self, seq: int, upto: int | None = None) -> list[Change]:
        """Changes with ``seq < change.seq <= upto``, oldest first."""

    # -- read ---------------------------------------------------------------------------------------
    @abstractmethod
    def get_chunks(
        self, chunk_ids: Sequence[str], *, with_embedding: bool = False, visible_at: int | None = None
    ) -> list[ChunkRecord]:
        """Chunks by id in the order asked (unknown ids left out); ``visible_at=seq``: only chunks of documents
        stored at that change (added at or before it, not removed by then)."""

    @abstractmethod
    def chunks_of(self, parent_id: str, *, with_embedding: bool = False) -> list[ChunkRecord]:
        """The chunks of one document in order."""

    @abstractmethod
    def get_document(self, doc_id: str) -> DocumentRecord | None:
        """A document by id, whatever its state (a removed one until its rows are collected)."""

    def quarantined(self) -> Container[str]:
        """Ids of documents every read leaves out because a row of theirs cannot be decoded (none here): a
        cache of records read earlier leaves them out too."""
        return ()

    @abstractmethod
    def content_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The stored version hash of each complete document among ``doc_ids``."""

    @abstractmethod
    def complete_chunk_ids(self) -> set[str]:
        """Ids of every chunk of a complete document."""

    def get_chunk(self, chunk_id: str, *, with_embedding: bool = False) -> ChunkRecord | None:
        """One chunk by id (None if unknown)."""
        rows = self.get_chunks([chunk_id], with_embedding=with_embedding)
        return rows[0] if rows else None

    def complete_ids(self, doc_ids: Iterable[str]) -> set[str]:
        """Which of ``doc_ids`` are stored as complete documents."""
        return set(self.content_hashes(list(dict.fromkeys(doc_ids))))

    def document_state(self, doc_id: str) -> str | None:
        """:data:`COMPLETE`, :data:`REMOVED` (rows kept for the grace period) or None (unknown)."""
        if self.content_hashes([doc_id]):
            return COMPLETE
        record = self.get_document(doc_id)
        return None if record is None else record.state

    def sample_chunk_ids(self, size: int) -> list[str]:
        """``size`` complete chunk ids, the same in every process for the same ledger state (all of them in a
        smaller corpus): here the smallest hashes of every id; a ledger that can seek draws them without
        reading every id (every SQL ledger), so a fresh process's first search does not grow with the corpus."""
        return sorted(self.complete_chunk_ids(), key=sample_key)[:size]

    # -- catalog ------------------------------------------------------------------------------------
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

    @abstractmethod
    def document_metadata(self, *, source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """``(id, metadata)`` of every complete document (of ``source``) in insertion order."""

    @abstractmethod
    def ids_with_document_id(self, document_id: str) -> list[str]:
        """Complete documents whose metadata ``document_id`` is ``document_id``, in insertion order."""

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Numbers of complete documents and of their chunks: ``{"documents": n, "chunks": m}``."""

    @abstractmethod
    def chunk_count(self, doc_ids: Sequence[str]) -> int:
        """How many chunks the documents ``doc_ids`` have."""

    @abstractmethod
    def sources(self) -> list[str]:
        """Every source of a complete document, sorted."""

    def document_ids(
        self, *, source: str | None = None, where: Callable[[dict[str, Any]], bool] | None = None
    ) -> list[str]:
        """Ids of complete documents in insertion order (of ``source``; whose metadata ``where`` accepts)."""
        return [i for i, md in self.document_metadata(source=source) if where is None or where(md)]

    def sources_under(self, prefix: str) -> list[str]:
        """Complete sources that start with ``prefix`` (compared as strings: ``_`` and ``%`` are literal)."""
        return [s for s in self.sources() if s.startswith(prefix)]

    # -- embedding cache ----------------------------------------------------------------------------
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


def iter_batches(items: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    """``items`` in lists of at most ``size`` (SQL parameter limits)."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def unique_runs(
    add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]],
) -> Iterator[list[tuple[DocumentRecord, Sequence[ChunkRecord]]]]:
    """``add`` in consecutive runs of distinct document ids: each run is written with a few ``executemany``
    statements, and a document added again in the same write replaces the earlier copy in order."""
    run: list[tuple[DocumentRecord, Sequence[ChunkRecord]]] = []
    seen: set[str] = set()
    for item in add:
        if item[0].id in seen:
            yield run
            run, seen = [], set()
        run.append(item)
        seen.add(item[0].id)
    if run:
        yield run
