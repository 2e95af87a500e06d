"""The write path: turn inputs into parents, split and embed them, then commit them in one ledger transaction.

Slow work (loading, splitting, embedding) runs before the directory's write lock is taken, so other
writers and every reader go on meanwhile.  Under the lock the plan is checked again against the ledger
(another process may have added or replaced the same sources meanwhile), the change is committed in one
transaction — the commit point — and the indexes are brought up to date and checkpointed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from ..access import in_scope, in_scope_ids, refuse_outside
from ..config import Settings
from ..document_loader import DocumentLoader, absolute_path, known_gone, safe_path
from ..errors import AccessDeniedError, ConfigurationError, DocumentNotFoundError
from ..filters import Predicate
from ..ledgers import COMPLETE, content_id
from ..ledgers.bulk import bulk_load, bulk_writes
from ..memory import cyclic_gc_paused
from ..metadata import TEXT_SOURCE_PREFIX, embedded_text, user_metadata
from ..replica.policy import SAVE_SECONDS, SAVE_SHARE, SAVE_SMALL, Checkpointer
from ..sources import source_key
from ..validation import check_parallel, check_texts
from .batches import (
    Batch,
    ChunkBudget,
    Group,
    IngestReport,
    StopSignal,
    TextItem,
    WriteCall,
    call_metadata,
    check_caller_ids,
    check_document_id,
    document_group,
    keep_vectors,
    owned_ids,
    path_item,
    plan,
    prepare,
    source_ids,
    version_hash,
)
from .big_file import stage, streams

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = [
    "SAVE_SECONDS",
    "SAVE_SHARE",
    "SAVE_SMALL",
    "Checkpointer",
    "IngestReport",
    "Writer",
    "check_document_id",
    "content_id",
    "version_hash",
]

logger = logging.getLogger(__name__)

# a call holding more files (or text) is written in several transactions of whole files: memory stays bounded.
# Documents given in memory are already held by the caller, so more of them go in one write: each transaction
# rewrites the pages of the ledger's id indexes it touches, so fewer, larger ones write far less
STREAM_GROUPS = 256  # files per write
STREAM_DOCUMENTS = 4096  # Documents (add_texts, add_documents) per write
STREAM_CHARS = 4_000_000  # characters of text per write

# one document of more text is split, embedded and written window by window in staged transactions, then
# published by one short commit: memory stays bounded for any single file (SQLite ledger)
STREAM_DOCUMENT_CHARS = 4_000_000
STREAM_WINDOW_CHARS = 1_000_000  # characters split and embedded at a time

# when the indexes are written to disk after a commit: finderledge.replica.policy (SAVE_SHARE, re-exported here)


class Writer:
    """Adds and removes documents of one :class:`~finderledge.engine.Engine` (its ledger, model, lock)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._checkpoint = Checkpointer(engine)

    @contextmanager
    def bulk_load(self, chunks: int = 0) -> Iterator[None]:
        """The write calls made inside the block as one bulk load (:func:`~finderledge.ledgers.bulk.bulk_load`):
        on PostgreSQL the indexes a load defers are dropped at the first commit that ``chunks`` (expected, 0 if
        unknown) or the chunks written so far make large enough, and built once when the block ends."""
        with bulk_load(self._engine.ledger, chunks):
            yield

    # -- add ----------------------------------------------------------------------------------------
    @bulk_writes  # PostgreSQL: a large call defers the vector index and builds it once at its end
    def ingest(
        self,
        source: Any,
        metadata: Mapping[str, Any] | None,
        *,
        include: Sequence[str] | None,
        exclude: Sequence[str] | None,
        on_error: str,
        prune: bool,
        follow_symlinks: bool = False,
        document_id: str | None = None,
        max_chunks: int | None = None,
        within: Predicate | None = None,
    ) -> IngestReport:
        """Add ``source``; with ``within`` (a scope's predicate) every stored document the call would replace or
        remove, and every document it stores, must match it, else :class:`AccessDeniedError` (nothing written)."""
        started = time.perf_counter()
        extra = call_metadata(metadata, on_error, max_chunks, document_id)
        call = WriteCall(extra, ChunkBudget(max_chunks), document_id, within)
        loader = DocumentLoader(
            include=include,
            exclude=exclude,
            on_error=on_error,  # type: ignore[arg-type]
            show_progress=self._engine.settings.show_progress,
            follow_symlinks=follow_symlinks,
        )
        items = list(source) if isinstance(source, (list, tuple)) else [source]
        with cyclic_gc_paused():  # files are loaded (parsed) unpaused: see gc_pause
            documents = {
                i: document_group(item, extra)
                for i, item in enumerate(items)
                if isinstance(item, (Document, TextItem))
            }
        check_caller_ids(list(documents.values()))  # refused before anything is written
        call.report.document_ids = [documents[i].parents[0][0] for i in sorted(documents)]
        paths = {i: path_item(item) for i, item in enumerate(items) if i not in documents}
        prune_under = [
            safe_path(absolute_path(p)).rstrip(os.sep) + os.sep
            for p in paths.values()
            if prune and Path(p).is_dir()
        ]

        def groups() -> Generator[Group, None, None]:
            for i in range(len(items)):
                if i in documents:
                    yield documents[i]
                else:
                    yield from call.file_groups(paths[i], loader)

        # a large call is written in batches of whole files (bounded memory; each file all-or-nothing); with
        # document_id the call is one write, since the parents it does not list again are replaced
        def batches() -> Generator[tuple[list[Group], Sequence[str]], None, None]:
            batch: list[Group] = []
            size = files = 0
            walk = groups()
            try:
                for group in walk:
                    batch.append(group)
                    size += sum(len(doc.page_content) for _, doc in group.parents)
                    files += group.replace
                    full = (
                        files >= STREAM_GROUPS
                        or len(batch) - files >= STREAM_DOCUMENTS
                        or size >= STREAM_CHARS
                    )
                    if document_id is None and full:
                        yield batch, ()
                        batch, size, files = [], 0, 0
            except BaseException:
                walk.close()  # now, while the failure is handled: the walk's progress line says how it ended
                raise
            yield batch, prune_under

        self._write_batches(call, batches())
        report = call.report
        report.seconds_total = time.perf_counter() - started
        logger.info(
            "ingest: %d added, %d unchanged, %d replaced, %d pruned, %d skipped, %d chunks written",
            len(report.added),
            len(report.unchanged),
            len(report.replaced),
            len(report.pruned),
            len(report.skipped),
            report.chunks_written,
        )
        return report

    def _write_batches(
        self, call: WriteCall, batches: Generator[tuple[list[Group], Sequence[str]], None, None]
    ) -> None:
        """Write each batch ``batches`` yields (its groups, and the folders its commit prunes), one transaction
        each.  From the second on, a batch is split and embedded on a worker thread while the batch before it
        commits on this one: the model, or the client's CPU, works while the database writes.  A batch is never
        prepared while files are loaded (parsers' cycles are freed file by file, outside the collector's pause),
        and a call of one batch uses no thread.  A batch whose preparation ran ahead of a failed commit, or was
        prepared when the input failed to load or the call was interrupted, keeps its vectors in the embedding
        cache (as a failed batch does); after an error loading the input the batch before it still commits, as
        it did when batches were written one after the other."""
        ready: Batch | None = None  # prepared, not committed yet
        upcoming: Future[Batch] | None = None  # being prepared on the worker
        stop = StopSignal()  # set on a failure: the worker stops before its next model call
        pool: ThreadPoolExecutor | None = None
        try:
            while True:
                try:
                    item = next(batches, None)  # the next batch's files load: nothing else runs
                except Exception:
                    if ready is not None:  # it would have committed before these files were loaded
                        last, ready = ready, None
                        self._commit_ready(call, last)
                    raise
                if item is None:
                    break
                if ready is None:  # the first batch: nothing to overlap
                    ready = self._prepare_batch(call, *item)
                    continue
                if pool is None:
                    pool = ThreadPoolExecutor(1, thread_name_prefix="finderledge-prepare")
                upcoming = pool.submit(self._prepare_batch, call, *item, stop=stop)
                last, ready = ready, None
                self._commit_ready(call, last)
                ready, upcoming = upcoming.result(), None
            if ready is not None:
                last, ready = ready, None
                self._commit_ready(call, last)
        except BaseException as exc:
            stop.set(exc)
            batches.close()  # now, while the failure is handled: the walk's progress line says how it ended
            if upcoming is not None:
                self._keep_abandoned(upcoming)
            if ready is not None:  # prepared, not committed (an interruption): its vectors serve a retry
                self._keep_prepared(ready)
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)

    @cyclic_gc_paused()
    def _prepare_batch(
        self,
        call: WriteCall,
        groups: Sequence[Group],
        prune_under: Sequence[str] = (),
        stop: StopSignal | None = None,
    ) -> Batch:
        """Split and embed what of ``groups`` is not stored yet (before the lock: the slow part); the parents
        long enough to stream are only listed (they are staged window by window when the batch commits)."""
        ledger = self._engine.ledger
        stored = ledger.content_hashes([pid for g in groups for pid, _ in g.parents])
        versions = {pid: version_hash(doc) for g in groups for pid, doc in g.parents}  # hashed once
        candidates = {
            pid: (g, doc) for g in groups for pid, doc in g.parents if stored.get(pid) != versions[pid]
        }
        big = {pid for pid, (_, doc) in candidates.items() if streams(ledger, doc, STREAM_DOCUMENT_CHARS)}
        prepared, counts = prepare(
            self._engine,
            {pid: v for pid, v in candidates.items() if pid not in big},
            call.budget,
            versions,
            stop,
        )
        return Batch(groups, versions, prune_under, prepared, {pid: candidates[pid] for pid in big}, counts)

    def _keep_prepared(self, batch: Batch) -> None:
        """After a failure: the vectors computed for ``batch``'s uncommitted parents go to the embedding cache."""
        keep_vectors(
            self._engine,
            [
                (content_id(embedded_text(c.content, c.metadata)), c.embedding)
                for pid in _uncommitted(self._engine.ledger, batch.prepared, batch.versions)
                for c in batch.prepared[pid].chunks
                if c.embedding is not None
            ],
        )

    def _keep_abandoned(self, upcoming: Future[Batch]) -> None:
        """Wait for a batch prepared ahead of a commit that failed (stopped at its next embedding batch), and keep
        its vectors (its own failure, if any, is logged: the commit's is the one raised)."""
        try:
            abandoned = upcoming.result()
        except Exception:  # its embedding kept what it computed (embed)
            logger.debug("the batch prepared ahead of a failed step did not finish", exc_info=True)
            return
        self._keep_prepared(abandoned)

    @cyclic_gc_paused()
    def _commit_ready(self, call: WriteCall, batch: Batch) -> None:
        """Stage the batch's long parents window by window, then commit it under the write lock: one ledger
        transaction (the staged parents are published by it)."""
        ledger = self._engine.ledger
        call.report.add(batch.counts)
        try:
            for pid, (group, doc) in batch.long.items():
                batch.begun.append(pid)
                result, counts = stage(self._engine, pid, group, doc, call.budget, STREAM_WINDOW_CHARS)
                call.report.add(counts)
                if result is not None:
                    batch.staged[pid] = result
                del result  # `batch.staged` alone holds the record: its text is let go after the commit
            self._commit_batch(call, batch)
        except BaseException:  # the vectors computed for this batch are kept for a retry
            self._keep_prepared(batch)
            raise
        finally:
            left = [pid for pid in batch.begun if pid not in batch.published]
            if left:  # not published (an error, or another writer stored it meanwhile): drop the rows
                try:
                    ledger.discard_staged(left)
                except Exception:  # invisible rows; the next write of the file or gc drops them
                    logger.warning("could not discard the staged rows of %s", left, exc_info=True)

    def _commit_batch(self, call: WriteCall, batch: Batch) -> None:
        """Under the write lock: decide what is new and what it replaces, and commit it in one transaction
        (the staged big documents among the new are published by the same transaction)."""
        ledger = self._engine.ledger
        report = call.report
        with self._engine.write_lock.hold("adding documents"):
            unread = [
                path.rstrip(os.sep) + os.sep for path, _ in report.skipped
            ]  # e.g. unlistable directories
            gone = [
                src
                for prefix in batch.prune_under
                for src in ledger.sources_under(prefix)
                if not any(src.startswith(u) for u in unread) and known_gone(src)
            ]
            extra_deletes = [  # a vanished file's parents that this call's owner added; another owner's stay
                pid
                for src in gone
                for pid in owned_ids(
                    in_scope(ledger.document_metadata(source=src), call.within), call.document_id
                )
            ]
            decided = plan(ledger, call, batch, extra_deletes)
            call.record(decided)
            new, to_delete = decided.new, decided.to_delete
            if (
                call.within is not None
            ):  # a scoped writer: nothing outside its scope replaced, removed or stored
                refuse_outside(ledger, to_delete, call.within, "add", call.document_id)
                for pid, (_, doc) in new.items():
                    if not call.within(doc.metadata):
                        raise AccessDeniedError(
                            f"add: document {pid!r} would be stored outside this scope (its metadata does not "
                            "match the scope's base filter)"
                        )
            prepared, staged = batch.prepared, batch.staged
            more, counts = prepare(  # rare: stored when this call began, removed by another writer since
                self._engine,
                {pid: v for pid, v in new.items() if pid not in prepared and pid not in staged},
                call.budget,
                batch.versions,
            )
            prepared.update(more)
            report.add(counts)
            if new or to_delete:
                publish = [staged[pid] for pid in new if pid in staged]
                add = [(prepared[pid].record, prepared[pid].chunks) for pid in new if pid not in staged]
                ledger.commit_write(add=add, remove=to_delete, publish=publish)
                batch.published.update(doc.id for doc, _ in publish)
                report.chunks_written += sum(len(prepared[pid].chunks) for pid in new if pid not in staged)
                report.chunks_written += sum(count for _, count in publish)
                report.pruned.extend(extra_deletes)
                if publish:  # the ledger holds the big texts now: let them go before the indexes catch up
                    del publish
                    batch.release_texts(new)
                self._checkpoint([c for _, chunks in add for c in chunks])

    # -- reindex ------------------------------------------------------------------------------------
    @cyclic_gc_paused()
    def reindex(self, report: IngestReport) -> None:
        """Split every stored document again with the current splitter and replace its chunks, a batch of
        documents per ledger transaction; chunk texts already embedded are not embedded again (text hash).
        A document changed or removed by another writer meanwhile is left as that writer stored it."""
        ledger = self._engine.ledger
        ids = ledger.document_ids()
        for start in range(0, len(ids), STREAM_GROUPS):
            records = [r for r in (ledger.get_document(i) for i in ids[start : start + STREAM_GROUPS]) if r]
            stored = {r.id: r.content_hash for r in records}
            prepared, counts = prepare(
                self._engine,
                {
                    r.id: (
                        Group(r.source, [], replace=False),
                        Document(page_content=r.content, metadata=user_metadata(r.metadata)),
                    )
                    for r in records
                },
            )
            report.add(counts)
            with self._engine.write_lock.hold("re-splitting documents"):
                current = ledger.content_hashes(list(stored))
                same = [i for i in stored if current.get(i) == stored[i]]  # unchanged since read
                if same:
                    ledger.commit_write(
                        add=[
                            (replace(prepared[i].record, content_hash=stored[i]), prepared[i].chunks)
                            for i in same
                        ],
                        remove=same,
                    )
                    report.replaced.extend(same)
                    report.chunks_written += sum(len(prepared[i].chunks) for i in same)
                    self._checkpoint([c for i in same for c in prepared[i].chunks])

    # -- remove -------------------------------------------------------------------------------------
    def remove(self, key: str, within: Predicate | None = None) -> list[str]:
        """Remove a parent by id, every parent of a source path or ``document_id``, or the raw text a result
        shows as ``text:<id>`` (its default source); ``DocumentNotFoundError`` if none (with ``within``, a
        scope's predicate: none inside the scope; another scope's documents are never removed)."""
        ledger = self._engine.ledger
        with self._engine.write_lock.hold("removing documents"):
            if ledger.document_state(safe_path(key)) == COMPLETE:
                ids = [key]
            else:
                ids = (
                    source_ids(ledger.document_metadata(source=safe_path(key)))
                    or source_ids(ledger.document_metadata(source=source_key(key)))
                    or ledger.ids_with_document_id(key)
                )
                raw_text = key[len(TEXT_SOURCE_PREFIX) :] if key.startswith(TEXT_SOURCE_PREFIX) else None
                if not ids and raw_text and ledger.document_state(raw_text) == COMPLETE:
                    ids = [raw_text]
            if within is not None:
                ids = in_scope_ids(ledger, ids, within)
            if not ids:
                raise DocumentNotFoundError(
                    f"remove_document: no document with id, source or document_id {key!r}"
                    + (" in this scope" if within is not None else "")
                )
            ledger.commit_write(remove=ids)
            self._checkpoint()
        return ids

    def delete(self, ids: Sequence[str], within: Predicate | None = None) -> list[str]:
        """Remove the parents among ``ids`` that are stored (unknown ids are ignored, and with ``within``, a
        scope's predicate, so are ids outside the scope); returns those removed."""
        ledger = self._engine.ledger
        with self._engine.write_lock.hold("deleting documents"):
            found = ledger.complete_ids(ids)
            if within is not None:
                found = set(in_scope_ids(ledger, list(found), within))
            removed = list(dict.fromkeys(i for i in ids if i in found))
            if removed:
                ledger.commit_write(remove=removed)
                self._checkpoint()
        return removed


@cyclic_gc_paused()
def _uncommitted(ledger: Any, prepared: Mapping[str, Any], versions: Mapping[str, str]) -> list[str]:
    """After a failed write: the prepared parents the ledger does not hold (a failure after the commit, e.g.
    Ctrl-C while the indexes catch up, must not put the committed vectors in the cache a second time)."""
    try:
        stored = ledger.content_hashes(list(prepared))
    except Exception:  # noqa: BLE001 - cannot tell: keep every vector (finderledge gc drops unused ones)
        return list(prepared)
    return [pid for pid in prepared if stored.get(pid) != versions.get(pid)]


def rechunk(
    engine: Engine,
    writer: Writer,
    chunk_size: int | None,
    chunk_overlap: int | None,
    chunk_unit: str | None,
    chunk_context: bool | None = None,
) -> IngestReport:
    """:meth:`FinderLedge.reindex <finderledge.facade.FinderLedge.reindex>`: switch the engine to these chunk
    settings (the current ones where None), split every stored document again and record them."""
    started = time.perf_counter()
    current = {
        "chunk_size": engine.settings.chunk_size,
        "chunk_overlap": engine.settings.chunk_overlap,
        "chunk_unit": engine.settings.chunk_unit,
        "chunk_context": engine.settings.chunk_context,
        "persist_directory": engine.settings.persist_directory,
    }
    settings = Settings.resolve(
        {
            "chunk_size": chunk_size,
            "chunk_overlap": chunk_overlap,
            "chunk_unit": chunk_unit,
            "chunk_context": chunk_context,
        },
        env_file=None,
        environ={},
        defaults=current,
    )  # validated like any setting, errors naming the arguments
    engine.settings = replace(
        engine.settings,
        chunk_size=settings.chunk_size,
        chunk_overlap=settings.chunk_overlap,
        chunk_unit=settings.chunk_unit,
        chunk_context=settings.chunk_context,
    )
    engine.splitter = None  # made again from the new settings when next used
    engine.open_vector_index()  # first: a write checkpoints both indexes
    report = IngestReport()
    writer.reindex(report)
    with engine.write_lock.hold("recording the chunk settings"):
        recorded = json.loads(engine.ledger.get_info("settings") or "{}")
        engine.ledger.set_info(
            "settings",
            json.dumps(
                {
                    **recorded,
                    "chunk_size": settings.chunk_size,
                    "chunk_overlap": settings.chunk_overlap,
                    "chunk_unit": settings.chunk_unit,
                    "chunk_context": settings.chunk_context,
                }
            ),
        )
    engine.recalibrate()
    report.seconds_total = time.perf_counter() - started
    logger.info(
        "reindex: %d documents split again into %d chunks (chunk_size %d, overlap %d, unit %s)",
        len(report.replaced),
        report.chunks_written,
        settings.chunk_size,
        settings.chunk_overlap,
        settings.chunk_unit,
    )
    return report


def documents_with_ids(sources: Any, ids: Sequence[str | None] | None) -> list[Any]:
    """``add_documents``' sources as a list, each Document given its id from ``ids`` (LangChain's argument)."""
    if isinstance(sources, (str, bytes, os.PathLike, Document, Mapping)) or not isinstance(sources, Iterable):
        raise ConfigurationError(
            f"add_documents: sources: expected a list of paths or Documents, got "
            f"{type(sources).__name__} (use add_document for one source)"
        )
    items = list(sources)
    given = check_parallel("ids", ids, len(items))
    if given is not None:
        docs = [d for d in items if isinstance(d, Document)]
        if len(docs) != len(items):
            raise ConfigurationError(
                "add_documents: ids applies to Documents only (a file's ids come from "
                "its content; use document_id= to name a file)"
            )
        items = [
            Document(page_content=d.page_content, metadata=d.metadata, id=d.id if i is None else i)
            for d, i in zip(docs, given)
        ]
    return items


def text_documents(
    texts: Any, metadatas: Sequence[Mapping[str, Any]] | None, ids: Sequence[str | None] | None
) -> list[TextItem | Document]:
    """``add_texts``' arguments as one item per text, ingested as a Document with that text, metadata and id
    would be (checked: parallel lists of the same length)."""
    texts = check_texts(texts)
    metadatas = check_parallel("metadatas", metadatas, len(texts))
    ids = check_parallel("ids", ids, len(texts))
    items: list[TextItem | Document] = []
    for i, text in enumerate(texts):
        md = dict(metadatas[i] or {}) if metadatas else {}
        given = ids[i] if ids else None
        if given is None or isinstance(given, str):
            items.append(TextItem(text, md, given))
        else:  # a Document checks (or coerces, as LangChain does: 5 -> "5") any other id
            items.append(Document(page_content=text, metadata=md, id=given))
    return items
