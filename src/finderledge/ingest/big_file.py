"""The big-file path of a write: a long plain text is split, embedded and written window by window as staged
rows (each window its own transaction, invisible to every read), then published by the ordinary commit.
Memory holds one window's chunks and vectors, never the whole document's.

The thresholds live in :mod:`finderledge.ingest.write` (``STREAM_DOCUMENT_CHARS``, ``STREAM_WINDOW_CHARS``) and are
passed in, so that setting them there keeps working.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from langchain_core.documents import Document

from ..ledgers import COMPLETE, ChunkRecord, DocumentRecord, Ledger
from ..metadata import FL_KEY, child_id
from .batches import ChunkBudget, Group, IngestReport, detected_type, embed, version_hash

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["stage", "streams"]

logger = logging.getLogger(__name__)


def streams(ledger: Ledger, doc: Document, threshold: int) -> bool:
    """Whether ``doc`` is written window by window: a long plain text, on a ledger that can stage."""
    return ledger.supports_staging and len(doc.page_content) > threshold and detected_type(doc)[0] == "text"


def stage(
    engine: Engine,
    pid: str,
    group: Group,
    doc: Document,
    budget: ChunkBudget | None,
    window_chars: int,
) -> tuple[tuple[DocumentRecord, int] | None, IngestReport]:
    """Split, embed and write one long document window by window as staged rows (each window its own
    transaction, invisible to every read); returns its parent record and chunk count for the commit
    that publishes it (``None`` when another writer stored it meanwhile), and what embedding it did.
    Memory holds one window's chunks and vectors, never the whole document's."""
    ledger = engine.ledger
    splitter = engine.splitter
    doc_type, language = detected_type(doc)
    text = doc.page_content
    # a first pass counts the chunks (each chunk's metadata holds the count), a second writes them
    count = 0
    for pieces in splitter.split_windows(text, doc_type, language, window_chars):
        count += len(pieces)
        if budget is not None:  # over max_chunks: refused in this pass, before anything is embedded
            budget.spend(len(pieces))
    md = dict(doc.metadata)
    parent_md = {**md, FL_KEY: {"id": pid, "is_parent": True, "split_count": count, "doc_type": doc_type}}
    record = DocumentRecord(pid, group.source, version_hash(doc), COMPLETE, text, parent_md)
    report = IngestReport()
    if not ledger.stage_document(pid):
        return None, report
    index = 0
    for pieces in splitter.split_windows(text, doc_type, language, window_chars):
        if not pieces:
            continue
        # every batch cached as computed: a failure discards the staged windows, not the work that made them
        vectors, counts = embed(engine, pieces, cache_seconds=0.0)
        report.add(counts)
        chunks = []
        for piece, vec in zip(pieces, vectors):
            cid = child_id(pid, index)
            info = {
                "id": cid,
                "is_parent": False,
                "parent_id": pid,
                "split_index": index,
                "split_count": count,
                "doc_type": doc_type,
            }
            chunks.append(ChunkRecord(cid, pid, index, piece, {**md, FL_KEY: info}, vec))
            index += 1
        ledger.stage_chunks(pid, chunks)
    logger.info("staged %d chunks of %s (%d characters)", index, group.source or pid, len(text))
    return (record, index), report
