"""What a replica applies to reach a ledger ``seq``: which chunk ids to add and remove, their rows (from the
committing writer's memory or the ledger), and the steps that apply them to the BM25 index and the vector
overlay.  :class:`~finderledge.replica.core.Replica` decides when; these functions say what."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import IndexCorruptError, LedgerCorruptError
from ..keyword_store import KeywordStore
from ..ledgers import ADD, ChunkRecord, Ledger
from ..metadata import child_id, embedded_text, share_equal, user_metadata
from ..progress import logged
from .overlay import VectorOverlay

__all__ = ["chunk_metadata", "keyword_step", "plan_changes", "read_rows", "vector_step", "vectors_of"]

logger = logging.getLogger(__name__)

PROGRESS_ABOVE = 20000  # rebuilding more chunks than this shows a progress bar (when progress is on)
KEYWORD_BATCH = 5000  # chunks tokenized at a time when building the keyword index


def plan_changes(ledger: Ledger, name: str, seq: int, index: Any, target: int) -> tuple[list[str], list[str]]:
    """Chunk ids to add and remove so that the ``name`` index ``index``, which reflects ``seq`` (-1: unknown),
    reflects ``target``: from the change log, or (``seq`` unknown) by comparing its ids with the ledger's."""
    if seq < 0:  # no checkpoint to replay from: compare id sets once
        have = index.ids()
        truth = ledger.complete_chunk_ids()
        if have and not truth and ledger.last_seq() == 0:  # never reconcile an index to empty
            raise LedgerCorruptError(
                ledger.path or ledger.name or ":memory:",
                f"it has never recorded a document, but the {name} index next to it holds {len(have)} chunks",
                "restore the ledger these indexes were built from (a backup), or move the index folders away "
                "to start an empty index; nothing was changed",
            )
        adds, removes = sorted(truth - have), sorted(have - truth)
        if adds and not have:  # a new (or switched-to) index: built, nothing was lost
            logger.info("%s index: building it from the ledger (%d chunks)", name, len(adds))
        elif adds or removes:
            logger.warning(
                "%s index: restoring %d chunk(s) from the ledger, removing %d it does not hold",
                name,
                len(adds),
                len(removes),
            )
        return adds, removes
    final: dict[str, bool] = {}
    removed: set[str] = set()  # a caller's id re-added with new content: remove the old chunk first
    for change in ledger.changes_since(seq, target):
        for i in range(change.chunk_count):
            final[child_id(change.doc_id, i)] = change.op == ADD
            if change.op != ADD:
                removed.add(child_id(change.doc_id, i))
    adds = [cid for cid, added in final.items() if added]
    removes = [cid for cid, added in final.items() if not added or cid in removed]
    return adds, removes


def read_rows(
    ledger: Ledger, ids: list[str], with_embedding: bool, known: Mapping[str, ChunkRecord]
) -> list[ChunkRecord]:
    """Chunk rows by id, in order (unknown ids left out): those in ``known`` (just committed by this process,
    under the write lock) from memory, the others read from the ledger."""
    if not known:
        return ledger.get_chunks(ids, with_embedding=with_embedding)
    missing = [i for i in ids if i not in known]
    read = {c.id: c for c in ledger.get_chunks(missing, with_embedding=with_embedding)} if missing else {}
    return [row for i in ids if (row := known.get(i) or read.get(i)) is not None]


def keyword_step(
    store: KeywordStore, rows: list[ChunkRecord], removes: list[str], progress: bool
) -> Callable[[], None]:
    """Tokenize ``rows`` now (the slow part); the returned step deletes ``removes`` and adds them."""
    chunks = [rows[i : i + KEYWORD_BATCH] for i in range(0, len(rows), KEYWORD_BATCH)]
    batches: Iterable[list[ChunkRecord]] = chunks
    if progress and len(rows) > PROGRESS_ABOVE:
        from tqdm.auto import tqdm

        logger.info("building the keyword index from the ledger: %d chunks", len(rows))
        batches = tqdm(chunks, desc="keyword index", unit="batch", total=len(chunks))
    elif len(rows) > PROGRESS_ABOVE:  # no bar: a log line every few seconds
        batches = logged(chunks, "keyword index (5,000 chunks a batch)", "batch")
    try:
        prepared = [
            store.prepare(
                [c.id for c in batch],
                [embedded_text(c.content, c.metadata) for c in batch],  # its context (title, headings) too
                chunk_metadata(batch),
            )
            for batch in batches
        ]
    except BaseException:
        if hasattr(batches, "close"):  # now, while the failure is handled: the line says "interrupted"
            batches.close()
        raise

    def step() -> None:
        store.delete(removes)
        for batch in prepared:
            store.add_prepared(batch)

    return step


def vector_step(
    overlay: VectorOverlay, ledger: Ledger, rows: list[ChunkRecord], removes: list[str]
) -> Callable[[], None]:
    """Stack ``rows``' vectors now; the returned step removes ``removes`` from the overlay and adds them."""
    vectors = vectors_of(rows, ledger) if rows else None

    def step() -> None:
        overlay.remove(removes)
        if vectors is not None:
            overlay.add([c.id for c in rows], vectors, chunk_metadata(rows), [c.content for c in rows])

    return step


def chunk_metadata(rows: list[ChunkRecord]) -> list[dict[str, Any]]:
    """Each chunk's own metadata, equal ones as one shared object (see :func:`share_equal`)."""
    return share_equal([user_metadata(c.metadata) for c in rows])


def vectors_of(rows: list[ChunkRecord], ledger: Ledger) -> np.ndarray:
    """The chunks' vectors stacked; a chunk stored without one means the ledger cannot rebuild this index."""
    if any(c.embedding is None for c in rows):
        raise IndexCorruptError(
            ledger.path or ledger.name or "ledger", "the ledger lacks vectors; rebuild the index"
        )
    return (
        np.stack([c.embedding for c in rows if c.embedding is not None])
        if rows
        else np.zeros((0, 0), dtype=np.float32)
    )
