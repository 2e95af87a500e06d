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
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document

from .document_loader import (
    DocumentLoader,
    LoadResult,
    absolute_path,
    detect_doc_type,
    detect_language,
    known_gone,
    safe_path,
)
from .errors import (
    ConfigurationError,
    DocumentNotFoundError,
    IndexCorruptError,
    SourceNotFoundError,
    TooManyChunksError,
)
from .ledgers import COMPLETE, ChunkRecord, DocumentRecord, content_id
from .metadata import (
    DOCUMENT_ID,
    FL_KEY,
    TEXT_SOURCE_PREFIX,
    child_id,
    info_of,
    normalize_metadata,
    user_metadata,
)
from .progress import ProgressLog
from .sources import source_key
from .validation import clean_text

if TYPE_CHECKING:
    from .facade import FinderLedge

__all__ = ["IngestReport", "Writer", "content_id"]

logger = logging.getLogger(__name__)

# a call holding more files (or text) is written in several transactions of whole files: memory stays bounded
STREAM_GROUPS = 256  # files (or Documents) per write
STREAM_CHARS = 4_000_000  # characters of text per write

# one document of more text is split, embedded and written window by window in staged transactions, then
# published by one short commit: memory stays bounded for any single file (SQLite ledger)
STREAM_DOCUMENT_CHARS = 4_000_000
STREAM_WINDOW_CHARS = 1_000_000  # characters split and embedded at a time

# after a commit the indexes are brought up to date in memory at once, but written to disk only when the index
# is small (writing it costs little), when the changes not yet written reach a share of it, when this many
# seconds passed since this writer last wrote them, when the backlog passes replica.BACKLOG_LIMIT changes, and
# at close.  The ledger holds every change meanwhile: a crash costs a replay of that backlog at the next open
# (bounded by the share), a bulk build writes the indexes a few dozen times rather than after every batch, and
# adding one document to a large index writes nothing but the ledger
SAVE_SMALL = 1_000  # chunks: an index this small is written after every commit
SAVE_SHARE = 0.1  # ... a larger one once the changes not yet written reach this share of its chunks
SAVE_SECONDS = 30.0  # ... or this long after the last time

_PATH_LENGTH_LIMIT = 4096
_ID_LENGTH_LIMIT = 1024


@dataclass
class IngestReport:
    """What one ``add_document`` call did: documents and files added, unchanged, replaced, pruned, skipped."""

    ids: list[str] = field(default_factory=list)  # every parent id the input is now stored as, in input order
    document_ids: list[str] = field(
        default_factory=list
    )  # the parent id of each input Document, one per Document
    added: list[str] = field(default_factory=list)  # parent ids newly stored
    unchanged: list[str] = field(default_factory=list)  # parent ids already stored with the same content
    replaced: list[str] = field(default_factory=list)  # parent ids removed because their source changed
    pruned: list[str] = field(
        default_factory=list
    )  # parent ids removed because their file is gone (prune=True)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    files_seen: int = 0
    files_added: int = 0  # files new to the store
    files_unchanged: int = 0
    files_replaced: int = 0  # files whose content changed
    chunks_written: int = 0
    embeddings_computed: int = 0
    embeddings_cached: int = 0  # chunk texts whose vector came from the embedding cache
    seconds_embedding: float = 0.0
    seconds_total: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (ids as lists, counts, timings)."""
        return {key: getattr(self, key) for key in self.__dataclass_fields__}

    def summary(self) -> str:
        """One human-readable paragraph (printed by ``finderledge add``)."""
        lines = [
            (
                f"files seen: {self.files_seen} (added {self.files_added}, unchanged {self.files_unchanged}, "
                f"replaced {self.files_replaced}, skipped {len(self.skipped)})"
            ),
            (
                f"documents: {len(self.added)} added, {len(self.unchanged)} unchanged, "
                f"{len(self.replaced)} replaced, {len(self.pruned)} pruned"
            ),
            (
                f"chunks written: {self.chunks_written} (embedded {self.embeddings_computed}, "
                f"from cache {self.embeddings_cached})"
            ),
            f"time: {self.seconds_total:.1f} s, of which embedding {self.seconds_embedding:.1f} s",
        ]
        lines += [f"skipped {path}: {reason}" for path, reason in self.skipped]
        return "\n".join(lines)


@dataclass
class _Group:
    """Parents that come from one source; ``replace`` means older versions of that source are replaced."""

    source: str | None
    parents: list[tuple[str, Document]]
    replace: bool
    caller_ids: bool = False  # ids the caller chose: same id, other content or metadata = a new version
    owner: str | None = None  # the call's document_id: a file given again replaces only its owner's parents


@dataclass
class _Prepared:
    """A parent split into chunks, with a vector per chunk, ready to commit."""

    record: DocumentRecord
    chunks: list[ChunkRecord]


class Writer:
    """Adds and removes documents of one :class:`~finderledge.facade.FinderLedge` (its ledger, model, lock)."""

    def __init__(self, owner: FinderLedge) -> None:
        self._fl = owner
        self._saved_at = time.monotonic()  # when this writer last wrote the indexes to disk

    # -- add ----------------------------------------------------------------------------------------
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
    ) -> IngestReport:
        started = time.perf_counter()
        if on_error not in ("raise", "skip"):
            raise ConfigurationError(f"on_error: expected 'raise' or 'skip', got {on_error!r}")
        if max_chunks is not None and (
            isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1
        ):
            raise ConfigurationError(f"max_chunks: expected an integer >= 1 or None, got {max_chunks!r}")
        extra = normalize_metadata(metadata or {}, "metadata argument")
        if document_id is not None:
            document_id = check_document_id(document_id, "document_id")
            if extra.get(DOCUMENT_ID, document_id) != document_id:
                raise ConfigurationError(
                    f"add_document: document_id {document_id!r} differs from metadata "
                    f"{DOCUMENT_ID!r} {extra[DOCUMENT_ID]!r}; give one"
                )
            extra[DOCUMENT_ID] = document_id
        report = IngestReport()
        budget = _ChunkBudget(max_chunks)
        loader = DocumentLoader(
            include=include,
            exclude=exclude,
            on_error=on_error,  # type: ignore[arg-type]
            show_progress=self._fl.settings.show_progress,
            follow_symlinks=follow_symlinks,
        )
        items = list(source) if isinstance(source, (list, tuple)) else [source]
        documents = {
            i: self._document_group(item, extra) for i, item in enumerate(items) if isinstance(item, Document)
        }
        _check_caller_ids(list(documents.values()))  # refused before anything is written
        report.document_ids = [documents[i].parents[0][0] for i in sorted(documents)]
        paths = {i: _path_item(item) for i, item in enumerate(items) if i not in documents}
        prune_under = [
            safe_path(absolute_path(p)).rstrip(os.sep) + os.sep
            for p in paths.values()
            if prune and Path(p).is_dir()
        ]

        def groups() -> Iterator[_Group]:
            for i in range(len(items)):
                if i in documents:
                    yield documents[i]
                else:
                    yield from self._file_groups(paths[i], extra, loader, report)

        # a large call is written in batches of whole files (bounded memory; each file all-or-nothing); with
        # document_id the call is one write, since the parents it does not list again are replaced
        listed: set[str] = set()
        batch: list[_Group] = []
        size = 0
        for group in groups():
            batch.append(group)
            size += sum(len(doc.page_content) for _, doc in group.parents)
            if document_id is None and (len(batch) >= STREAM_GROUPS or size >= STREAM_CHARS):
                self._write_batch(batch, report, listed, budget=budget)
                batch, size = [], 0
        self._write_batch(batch, report, listed, prune_under, document_id, budget)
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

    def _write_batch(
        self,
        groups: Sequence[_Group],
        report: IngestReport,
        listed: set[str],
        prune_under: Sequence[str] = (),
        document_id: str | None = None,
        budget: _ChunkBudget | None = None,
    ) -> None:
        """Split and embed what is not stored yet (before the lock: the slow part), then decide and commit
        under the write lock: one ledger transaction.  ``prune_under``: folders whose vanished files go too."""
        ledger = self._fl._ledger
        prepared: dict[str, _Prepared] = {}
        versions = ledger.content_hashes([pid for g in groups for pid, _ in g.parents])
        candidates = {
            pid: (g, doc) for g in groups for pid, doc in g.parents if versions.get(pid) != version_hash(doc)
        }
        big = {pid for pid, (_, doc) in candidates.items() if self._streams(doc)}
        self._prepare({pid: v for pid, v in candidates.items() if pid not in big}, prepared, report, budget)
        staged: dict[str, tuple[DocumentRecord, int]] = {}
        published: set[str] = set()
        begun: list[str] = []
        try:
            for pid in big:
                begun.append(pid)
                result = self._stage(pid, *candidates[pid], report, budget)
                if result is not None:
                    staged[pid] = result
                del result  # `staged` alone holds the record: its text is let go after the commit
            self._commit_batch(
                groups, report, listed, prepared, staged, published, prune_under, document_id, budget
            )
        finally:
            left = [pid for pid in begun if pid not in published]
            if left:  # not published (an error, or another writer stored it meanwhile): drop the rows
                try:
                    ledger.discard_staged(left)
                except Exception:  # invisible rows; the next write of the file or gc drops them
                    logger.warning("could not discard the staged rows of %s", left, exc_info=True)

    def _commit_batch(
        self,
        groups: Sequence[_Group],
        report: IngestReport,
        listed: set[str],
        prepared: dict[str, _Prepared],
        staged: dict[str, tuple[DocumentRecord, int]],
        published: set[str],
        prune_under: Sequence[str],
        document_id: str | None,
        budget: _ChunkBudget | None = None,
    ) -> None:
        """Under the write lock: decide what is new and what it replaces, and commit it in one transaction
        (the staged big documents among the new are published by the same transaction)."""
        ledger = self._fl._ledger
        with self._fl._write_lock.hold("adding documents"):
            unread = [
                path.rstrip(os.sep) + os.sep for path, _ in report.skipped
            ]  # e.g. unlistable directories
            gone = [
                src
                for prefix in prune_under
                for src in ledger.sources_under(prefix)
                if not any(src.startswith(u) for u in unread) and known_gone(src)
            ]
            extra_deletes = [  # a vanished file's parents that this call's owner added; another owner's stay
                pid for src in gone for pid in _owned_ids(ledger.document_metadata(source=src), document_id)
            ]
            new, to_delete = self._plan(groups, report, extra_deletes, document_id, listed)
            self._prepare(  # rare: stored when this call began, removed by another writer since
                {pid: v for pid, v in new.items() if pid not in prepared and pid not in staged},
                prepared,
                report,
                budget,
            )
            if new or to_delete:
                publish = [staged[pid] for pid in new if pid in staged]
                ledger.commit_write(
                    add=[(prepared[pid].record, prepared[pid].chunks) for pid in new if pid not in staged],
                    remove=to_delete,
                    publish=publish,
                )
                published.update(doc.id for doc, _ in publish)
                report.chunks_written += sum(len(prepared[pid].chunks) for pid in new if pid not in staged)
                report.chunks_written += sum(count for _, count in publish)
                report.pruned.extend(extra_deletes)
                if publish:  # the ledger holds the big texts now: let them go before the indexes catch up
                    del publish
                    _release_texts(new, staged)
                self._checkpoint()

    def _document_group(self, item: Document, extra: dict[str, Any]) -> _Group:
        """A LangChain Document as a group of one parent (its id: the caller's, else from source and text)."""
        if not isinstance(item.page_content, str) or not item.page_content.strip():
            raise ConfigurationError("add_document: a Document with empty page_content has nothing to index")
        text = clean_text(item.page_content, "add_document: Document page_content")
        md = item.metadata
        if isinstance(
            md.get(FL_KEY), dict
        ):  # a Document FinderLedge returned: its own fields, not the caller's
            md = user_metadata(md)
        own = normalize_metadata(md, "Document metadata")  # any other use of the key is refused, naming it
        if DOCUMENT_ID in extra and own.get(DOCUMENT_ID, extra[DOCUMENT_ID]) != extra[DOCUMENT_ID]:
            raise ConfigurationError(
                f"add_document: a Document's metadata {DOCUMENT_ID!r} "
                f"{own[DOCUMENT_ID]!r} differs from document_id {extra[DOCUMENT_ID]!r}"
            )
        md = {**own, **extra}
        src = md.get("source")
        caller = item.id is not None
        owner = md.get(DOCUMENT_ID)
        pid = check_document_id(item.id) if caller else content_id(str(src or ""), text, *_owned(owner))
        return _Group(
            str(src) if src else None,
            [(pid, Document(page_content=text, metadata=md))],
            replace=False,
            caller_ids=caller,
            owner=owner,
        )

    @staticmethod
    def _file_groups(
        path: Path, extra: dict[str, Any], loader: DocumentLoader, report: IngestReport
    ) -> Iterator[_Group]:
        """The parents of a file or folder, one group per file, loaded one file at a time."""
        result = LoadResult()
        try:
            for file_path, docs in loader.iter_load(path, result):
                parents = []
                owner = extra.get(DOCUMENT_ID)
                for doc in docs:
                    md = {**normalize_metadata(doc.metadata, f"metadata of {file_path}"), **extra}
                    pid = content_id(file_path, str(md.get("locator", "")), doc.page_content, *_owned(owner))
                    doc.metadata = md  # the loader's own Document: one object holds a big file's text
                    parents.append((pid, doc))
                yield _Group(file_path, parents, replace=True, owner=owner)
        finally:
            report.files_seen += result.files_seen
            report.skipped.extend((s.path, s.reason) for s in result.skipped)

    def _plan(
        self,
        groups: Sequence[_Group],
        report: IngestReport,
        extra_deletes: Sequence[str],
        document_id: str | None,
        listed: set[str],
    ) -> tuple[dict[str, tuple[_Group, Document]], list[str]]:
        """Which parents are new and which stored ones they replace, decided under the write lock.

        A stored parent with the same id but other content or metadata is replaced; so are the other parents
        of a file given again that the same owner (``document_id`` or none) added and, with ``document_id``,
        the parents of that document id not given again.  Another owner's copy of the file is never touched."""
        ledger = self._fl._ledger
        new: dict[str, tuple[_Group, Document]] = {}
        to_delete: list[str] = []
        versions = ledger.content_hashes([pid for g in groups for pid, _ in g.parents])
        for group in groups:
            existing = (
                _owned_ids(ledger.document_metadata(source=group.source), group.owner)
                if (group.replace and group.source)
                else []
            )
            wanted: set[str] = set()  # a set: a CSV file can bring 100,000 rows
            added_here = 0
            for pid, doc in group.parents:
                if pid in wanted:
                    continue
                wanted.add(pid)
                if pid in listed:  # the same parent from an earlier group of this call
                    continue
                listed.add(pid)
                report.ids.append(pid)
                if pid in versions and versions[pid] != version_hash(doc):
                    new[pid] = (group, doc)  # the same id with other content or metadata: replace it
                    report.added.append(pid)
                    report.replaced.append(pid)
                    to_delete.append(pid)
                    added_here += 1
                elif pid in versions:
                    report.unchanged.append(pid)
                else:
                    new[pid] = (group, doc)
                    report.added.append(pid)
                    added_here += 1
            stale = [i for i in existing if i not in wanted]
            to_delete.extend(stale)
            report.replaced.extend(stale)
            if group.replace:  # a file: count it once
                if not existing:
                    report.files_added += 1
                elif added_here or stale:
                    report.files_replaced += 1
                else:
                    report.files_unchanged += 1
        if document_id is not None:
            stale = [i for i in ledger.ids_with_document_id(document_id) if i not in listed]
            to_delete.extend(stale)
            report.replaced.extend(stale)
        seen = set(to_delete)
        to_delete.extend(i for i in extra_deletes if i not in seen)
        return new, to_delete

    def _prepare(
        self,
        parents: Mapping[str, tuple[_Group, Document]],
        out: dict[str, _Prepared],
        report: IngestReport,
        budget: _ChunkBudget | None = None,
    ) -> None:
        """Split ``parents`` and embed their chunks into ``out`` (``budget``: checked after each split, so an
        oversized call stops before anything is embedded)."""
        if not parents:
            return
        splitter = self._fl.splitter
        children: list[Document] = []
        records: dict[str, DocumentRecord] = {}
        for pid, (group, doc) in parents.items():
            doc_type, language = _detected_type(doc)
            parent, kids = splitter.split_document(doc, pid, child_id, doc_type=doc_type, language=language)
            if budget is not None:
                budget.spend(len(kids))
            records[pid] = DocumentRecord(
                pid, group.source, version_hash(doc), COMPLETE, doc.page_content, parent.metadata
            )
            children.extend(kids)
        vectors = self._embed([c.page_content for c in children], report)
        chunks: dict[str, list[ChunkRecord]] = {pid: [] for pid in records}
        for child, vec in zip(children, vectors):
            info = info_of(child.metadata)
            chunks[info["parent_id"]].append(
                ChunkRecord(
                    info["id"],
                    info["parent_id"],
                    info["split_index"],
                    child.page_content,
                    child.metadata,
                    vec,
                )
            )
        out.update((pid, _Prepared(record, chunks[pid])) for pid, record in records.items())

    def _streams(self, doc: Document) -> bool:
        """Whether ``doc`` is written window by window: a long plain text, on a ledger that can stage."""
        return (
            self._fl._ledger.supports_staging
            and len(doc.page_content) > STREAM_DOCUMENT_CHARS
            and _detected_type(doc)[0] == "text"
        )

    def _stage(
        self,
        pid: str,
        group: _Group,
        doc: Document,
        report: IngestReport,
        budget: _ChunkBudget | None = None,
    ) -> tuple[DocumentRecord, int] | None:
        """Split, embed and write one long document window by window as staged rows (each window its own
        transaction, invisible to every read); returns its parent record and chunk count for the commit
        that publishes it, or ``None`` when another writer stored it meanwhile.  Memory holds one window's
        chunks and vectors, never the whole document's."""
        ledger = self._fl._ledger
        splitter = self._fl.splitter
        doc_type, language = _detected_type(doc)
        text = doc.page_content
        # a first pass counts the chunks (each chunk's metadata holds the count), a second writes them
        count = 0
        for pieces in splitter.split_windows(text, doc_type, language, STREAM_WINDOW_CHARS):
            count += len(pieces)
            if budget is not None:  # over max_chunks: refused in this pass, before anything is embedded
                budget.spend(len(pieces))
        md = dict(doc.metadata)
        parent_md = {**md, FL_KEY: {"id": pid, "is_parent": True, "split_count": count, "doc_type": doc_type}}
        record = DocumentRecord(pid, group.source, version_hash(doc), COMPLETE, text, parent_md)
        if not ledger.stage_document(pid):
            return None
        index = 0
        for pieces in splitter.split_windows(text, doc_type, language, STREAM_WINDOW_CHARS):
            if not pieces:
                continue
            vectors = self._embed(pieces, report)
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
        return record, index

    def _embed(self, texts: list[str], report: IngestReport) -> np.ndarray:
        """Vectors for passages: from the embedding cache when this model embedded the same text before,
        else computed in batches of ``embedding_batch_size`` (progress bar for long runs) and cached."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        fl = self._fl
        hashes = [content_id(t) for t in texts]
        cached = fl._ledger.cached_embeddings(fl._model_id, hashes)
        todo: dict[str, str] = {}
        for h, t in zip(hashes, texts):
            if h not in cached and h not in todo:
                todo[h] = t
        report.embeddings_cached += sum(1 for h in hashes if h in cached)
        size = fl.settings.embedding_batch_size
        pending = list(todo.items())
        show = fl.settings.show_progress
        if show is None:
            show = sys.stderr.isatty() and len(pending) > size
        bar = None
        if show and pending:
            from tqdm.auto import tqdm

            # chunks/s and an ETA; under a folder's file bar it is a second line that goes when done
            bar = tqdm(total=len(pending), desc="Embedding chunks", unit="chunk", leave=False)
        # no bar (not a terminal, or turned off): a log line every few seconds instead
        log = ProgressLog("embedding chunks", len(pending), "chunk") if bar is None else None
        start_time = time.perf_counter()
        try:
            for start in range(0, len(pending), size):
                batch = pending[start : start + size]
                vectors = np.asarray(fl.embeddings.embed_documents([t for _, t in batch]), dtype=np.float32)
                new = [(h, v) for (h, _), v in zip(batch, vectors)]
                fl._ledger.cache_embeddings(fl._model_id, new)  # kept even if this call fails later
                cached.update(new)
                report.embeddings_computed += len(batch)
                if bar is not None:
                    bar.update(len(batch))
                if log is not None:
                    log.update(len(batch))
        finally:
            if bar is not None:
                bar.close()
            if log is not None:
                log.close()
        report.seconds_embedding += time.perf_counter() - start_time
        return np.stack([cached[h] for h in hashes]).astype(np.float32, copy=False)

    # -- reindex ------------------------------------------------------------------------------------
    def reindex(self, report: IngestReport) -> None:
        """Split every stored document again with the current splitter and replace its chunks, a batch of
        documents per ledger transaction; chunk texts already embedded are not embedded again (text hash).
        A document changed or removed by another writer meanwhile is left as that writer stored it."""
        ledger = self._fl._ledger
        ids = ledger.document_ids()
        for start in range(0, len(ids), STREAM_GROUPS):
            records = [r for r in (ledger.get_document(i) for i in ids[start : start + STREAM_GROUPS]) if r]
            stored = {r.id: r.content_hash for r in records}
            prepared: dict[str, _Prepared] = {}
            self._prepare(
                {
                    r.id: (
                        _Group(r.source, [], replace=False),
                        Document(page_content=r.content, metadata=user_metadata(r.metadata)),
                    )
                    for r in records
                },
                prepared,
                report,
            )
            with self._fl._write_lock.hold("re-splitting documents"):
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
                    self._checkpoint()

    # -- remove -------------------------------------------------------------------------------------
    def remove(self, key: str) -> list[str]:
        """Remove a parent by id, every parent of a source path or ``document_id``, or the raw text a result
        shows as ``text:<id>`` (its default source); ``DocumentNotFoundError`` if none."""
        ledger = self._fl._ledger
        with self._fl._write_lock.hold("removing documents"):
            if ledger.document_state(safe_path(key)) == COMPLETE:
                ids = [key]
            else:
                ids = (
                    _source_ids(ledger.document_metadata(source=safe_path(key)))
                    or _source_ids(ledger.document_metadata(source=source_key(key)))
                    or ledger.ids_with_document_id(key)
                )
                raw_text = key[len(TEXT_SOURCE_PREFIX) :] if key.startswith(TEXT_SOURCE_PREFIX) else None
                if not ids and raw_text and ledger.document_state(raw_text) == COMPLETE:
                    ids = [raw_text]
            if not ids:
                raise DocumentNotFoundError(
                    f"remove_document: no document with id, source or document_id {key!r}"
                )
            ledger.commit_write(remove=ids)
            self._checkpoint()
        return ids

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Remove the parents among ``ids`` that are stored (unknown ids are ignored); returns those removed."""
        ledger = self._fl._ledger
        with self._fl._write_lock.hold("deleting documents"):
            found = ledger.complete_ids(ids)
            removed = list(dict.fromkeys(i for i in ids if i in found))
            if removed:
                ledger.commit_write(remove=removed)
                self._checkpoint()
        return removed

    def _checkpoint(self) -> None:
        """After a commit: update shared indexes, bring this process's replicas up to date, and persist them
        when due (see :data:`SAVE_SHARE`).  The change is already safe in the ledger, so a failure here is
        logged, not raised: the next write or open replays it."""
        try:
            self._fl._replica.sync_shared()
        except Exception as exc:  # noqa: BLE001 - a shared index (a server) failed; the ledger holds the change
            logger.error(
                "the change is committed to the ledger, but updating the shared vector index failed "
                "(%s: %s); the next write or search applies it",
                type(exc).__name__,
                exc,
            )
        replica = self._fl._replica
        try:
            replica.follow()  # in memory now (a backlog over replica.BACKLOG_LIMIT is written at once)
            if self._save_due():
                replica.after_commit()
                self._saved_at = time.monotonic()
        except (OSError, IndexCorruptError) as exc:
            logger.error(
                "the change is committed to the ledger, but writing the index checkpoint failed (%s); "
                "it is replayed from the ledger at the next write or open",
                exc,
            )

    def _save_due(self) -> bool:
        """Whether this commit writes the indexes to disk (see :data:`SAVE_SHARE`)."""
        legs = self._fl._replica.local_legs()
        size = len(self._fl.keyword_store)
        backlog = max((leg.pending for leg in legs), default=0)
        return (
            size < SAVE_SMALL
            or backlog >= SAVE_SHARE * size
            or time.monotonic() - self._saved_at >= SAVE_SECONDS
        )


def _release_texts(
    new: Mapping[str, tuple[_Group, Document]], staged: dict[str, tuple[DocumentRecord, int]]
) -> None:
    """Forget the texts of the published big documents (``staged``; the ledger holds them now), so that a
    big file's text is not kept in memory while the indexes catch up.  Their Documents are this call's own
    (a caller's Document is copied on the way in); nothing reads their text after the commit."""
    for pid in staged:
        if pid in new:
            new[pid][1].page_content = ""
    staged.clear()


class _ChunkBudget:
    """The chunks one ingest call may still make (``max_chunks``); None: unbounded."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def spend(self, n: int) -> None:
        self.used += n
        if self.limit is not None and self.used > self.limit:
            raise TooManyChunksError(
                f"max_chunks: the input splits into more than {self.limit} chunks (over the limit of "
                f"{self.limit}; stopped while splitting, nothing was embedded or written)",
                self.limit,
            )


def _owned(owner: Any) -> tuple[str, ...]:
    """The extra id part of a parent that a ``document_id`` owns: the same content under another owner (or
    none) is another parent, so removing one owner never removes another's copy."""
    return () if owner is None else (f"{DOCUMENT_ID}={owner}",)


def _owned_ids(rows: Sequence[tuple[str, dict[str, Any]]], owner: str | None) -> list[str]:
    """The ids among ``(id, metadata)`` rows that ``owner`` (a ``document_id``, or ``None``: no id) added."""
    return [pid for pid, md in rows if md.get(DOCUMENT_ID) == owner]


def _source_ids(rows: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """What removing a source path removes: the parents added without a ``document_id``; when only document
    ids hold the path, theirs (the path is then the only name the caller gave for them)."""
    return _owned_ids(rows, None) or [pid for pid, _ in rows]


def version_hash(doc: Document) -> str:
    """What makes two versions of a document the same: its text and its metadata."""
    return content_id(doc.page_content, json.dumps(doc.metadata, sort_keys=True, ensure_ascii=False))


def check_document_id(value: Any, what: str = "document id") -> str:
    """A caller's document id: a non-empty string of at most 1024 characters without NUL."""
    if not isinstance(value, str) or not value or len(value) > _ID_LENGTH_LIMIT or "\x00" in value:
        raise ConfigurationError(
            f"{what}: expected a non-empty string of at most {_ID_LENGTH_LIMIT} characters "
            f"without NUL, got {value!r:.80}"
        )
    return value


def _check_caller_ids(groups: Sequence[_Group]) -> None:
    """Refuse one caller id given to two different documents in one call."""
    seen: dict[str, str] = {}
    for group in groups:
        if group.caller_ids:
            for pid, doc in group.parents:
                version = version_hash(doc)
                if seen.setdefault(pid, version) != version:
                    raise ConfigurationError(
                        f"add_document: document id {pid!r} given twice with different content"
                    )


def _detected_type(doc: Document) -> tuple[str, str | None]:
    """The type to split ``doc`` as: the loader's (or caller's) ``doc_type_detected``, else detected from the text."""
    md = doc.metadata
    given = md.get("doc_type_detected")
    language = md.get("language") if isinstance(md.get("language"), str) else None
    if isinstance(given, str) and given:
        return given, language
    detected = detect_doc_type(None, doc.page_content)
    if detected == "code" and language is None:
        language = detect_language(doc.page_content)
    return detected, language


def _path_item(item: Any) -> Path:
    """An input that is not a Document: an existing path, else a clear error (raw text has its own method)."""
    if isinstance(item, (str, os.PathLike)):
        return _existing_path(item)
    raise ConfigurationError(
        f"add_document: expected a file or directory path, a LangChain Document or a list of them, "
        f"got {type(item).__name__} (for raw text use add_texts([...]))"
    )


def _existing_path(item: str | os.PathLike[str]) -> Path:
    """``item`` as an existing path, or :class:`SourceNotFoundError` naming it and pointing to ``add_texts``."""
    text = os.fspath(item)
    if not isinstance(text, str):
        raise ConfigurationError(f"add_document: expected a str path, got {type(text).__name__}")
    try:
        path = Path(text).expanduser()
        exists = "\x00" not in text and len(text) <= _PATH_LENGTH_LIMIT and path.exists()
    except (OSError, ValueError):
        exists = False
    if not exists:
        shown = text if len(text) <= 200 else text[:200] + "…"
        raise SourceNotFoundError(
            f"add_document: no such file or directory: {shown!r}; add_document takes paths "
            "and Documents, to add text use add_texts([text])"
        )
    return path
