"""Preparing a write: inputs become groups of parents, parents are split and embedded (before the write lock),
and under the lock :func:`plan` decides which parents are new and which stored ones they replace.

One add call's state is a :class:`WriteCall` (its report, chunk budget, the parents it listed) and each of its
transactions a :class:`Batch`; the steps (:func:`prepare`, :func:`embed`, :func:`plan`) read them and return
what they made, with what they did as an :class:`IngestReport` the call adds to its own.
:class:`~finderledge.ingest.write.Writer` drives these steps and commits; :mod:`finderledge.ingest.big_file`
writes the long documents window by window.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from langchain_core.documents import Document

from ..access import in_scope
from ..document_loader import DocumentLoader, LoadResult, detect_doc_type, detect_language
from ..errors import ConfigurationError, SourceNotFoundError, TooManyChunksError
from ..filters import Predicate
from ..ledgers import COMPLETE, ChunkRecord, DocumentRecord, Ledger, content_id
from ..metadata import DOCUMENT_ID, FL_KEY, child_id, embedded_text, normalize_metadata, user_metadata
from ..progress import ProgressLog, bar_fits, ending
from ..validation import clean_text

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = [
    "Batch",
    "ChunkBudget",
    "Group",
    "IngestReport",
    "Plan",
    "Prepared",
    "StopSignal",
    "Stopped",
    "TextItem",
    "WriteCall",
    "call_metadata",
    "check_caller_ids",
    "check_document_id",
    "detected_type",
    "document_group",
    "embed",
    "keep_vectors",
    "owned_ids",
    "path_item",
    "plan",
    "prepare",
    "source_ids",
    "version_hash",
]

logger = logging.getLogger(__name__)

CACHE_SECONDS = 1.0  # embedding work gathered before its vectors are written to the cache (see embed)
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

    def add(self, other: IngestReport) -> None:
        """Count in ``other``, what one step of the same call did: its lists appended, its numbers added."""
        for key in self.__dataclass_fields__:
            mine = getattr(self, key)
            if isinstance(mine, list):
                mine.extend(getattr(other, key))
            else:
                setattr(self, key, mine + getattr(other, key))

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
class Group:
    """Parents that come from one source; ``replace`` means older versions of that source are replaced."""

    source: str | None
    parents: list[tuple[str, Document]]
    replace: bool
    caller_ids: bool = False  # ids the caller chose: same id, other content or metadata = a new version
    owner: str | None = None  # the call's document_id: a file given again replaces only its owner's parents


class TextItem(NamedTuple):
    """One text of ``add_texts`` on its way in: what :func:`document_group` reads of a Document, without the
    Document (a caller's Document is read once and never kept; this one would be made only to be read)."""

    page_content: str
    metadata: dict[str, Any]
    id: str | None


@dataclass
class Prepared:
    """A parent split into chunks, with a vector per chunk, ready to commit."""

    record: DocumentRecord
    chunks: list[ChunkRecord]


class Stopped(Exception):
    """Raised in a batch prepared ahead on a worker thread (:meth:`~finderledge.ingest.write.Writer.ingest`)
    once the call it was for has ended in an error (its cause): it stops embedding; the writer never lets it out."""


class StopSignal:
    """How a call tells the batch it prepares ahead that it ended in an error: :func:`embed` checks it before each
    model call and raises :class:`Stopped` from ``reason`` (so its progress line says "interrupted" after Ctrl-C)."""

    def __init__(self) -> None:
        self.reason: BaseException | None = None

    def set(self, reason: BaseException) -> None:
        self.reason = reason

    def check(self) -> None:
        """Raise :class:`Stopped` once :meth:`set`."""
        if self.reason is not None:
            raise Stopped("the write this batch was prepared for ended first") from self.reason


class ChunkBudget:
    """The chunks one ingest call may still make (``max_chunks``); None: unbounded."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()  # a batch prepared ahead spends while the one before it commits

    def spend(self, n: int) -> None:
        with self._lock:
            self.used += n
            used = self.used
        if self.limit is not None and used > self.limit:
            raise TooManyChunksError(
                f"max_chunks: the input splits into more than {self.limit} chunks (over the limit of "
                f"{self.limit}; stopped while splitting, nothing was embedded or written)",
                self.limit,
            )


@dataclass
class WriteCall:
    """One add call's state across its batches (each one ledger transaction): the options every batch applies,
    its chunk budget, the parent ids it has listed so far, and its report."""

    extra: dict[str, Any]  # the metadata the call adds to every parent (see :func:`call_metadata`)
    budget: ChunkBudget
    document_id: str | None = None  # with it, the call is one batch: the parents it does not list go
    within: Predicate | None = None  # a scope's predicate: nothing outside it stored, replaced or removed
    report: IngestReport = field(default_factory=IngestReport)
    listed: set[str] = field(default_factory=set)  # parents an earlier batch gave (a set: 100,000s of rows)

    def record(self, decided: Plan) -> None:
        """Count in what :func:`plan` decided for one batch: its report, and the parents it listed."""
        self.report.add(decided.report)
        self.listed.update(decided.report.ids)

    def file_groups(self, path: Path, loader: DocumentLoader) -> Iterator[Group]:
        """The parents of a file or folder, one group per file, loaded one file at a time (the files seen and
        skipped are counted in this call's report when the walk ends)."""
        result = LoadResult()
        try:
            for file_path, docs in loader.iter_load(path, result):
                parents = []
                owner = self.extra.get(DOCUMENT_ID)
                for doc in docs:
                    md = {**normalize_metadata(doc.metadata, f"metadata of {file_path}"), **self.extra}
                    pid = content_id(file_path, str(md.get("locator", "")), doc.page_content, *owned(owner))
                    doc.metadata = md  # the loader's own Document: one object holds a big file's text
                    parents.append((pid, doc))
                yield Group(file_path, parents, replace=True, owner=owner)
        finally:
            self.report.files_seen += result.files_seen
            self.report.skipped.extend((s.path, s.reason) for s in result.skipped)


@dataclass
class Batch:
    """One ledger transaction of a :class:`WriteCall`: its groups, their version hashes (computed once, before
    the lock), and its parents made ready to commit: split and embedded (``prepared``) or, long ones, written
    window by window as staged rows (``staged``), which the commit publishes."""

    groups: Sequence[Group]
    versions: dict[str, str]
    prune_under: Sequence[str] = ()  # folders whose vanished files go too (the call's last batch)
    prepared: dict[str, Prepared] = field(default_factory=dict)
    long: dict[str, tuple[Group, Document]] = field(default_factory=dict)  # to stage when it commits
    counts: IngestReport = field(default_factory=IngestReport)  # what preparing it embedded
    staged: dict[str, tuple[DocumentRecord, int]] = field(default_factory=dict)
    begun: list[str] = field(default_factory=list)  # parents whose staging began: discarded unless published
    published: set[str] = field(default_factory=set)  # staged parents the commit published

    def release_texts(self, new: Mapping[str, tuple[Group, Document]]) -> None:
        """Forget the texts of the published big documents (the ledger holds them now), so that a big file's
        text is not kept in memory while the indexes catch up.  Their Documents are this call's own (a
        caller's Document is copied on the way in); nothing reads their text after the commit."""
        for pid in self.staged:
            if pid in new:
                new[pid][1].page_content = ""
        self.staged.clear()


class Plan(NamedTuple):
    """What :func:`plan` decided for a batch under the write lock."""

    new: dict[str, tuple[Group, Document]]  # parents to store
    to_delete: list[str]  # stored parents to remove (replaced, stale or vanished)
    report: (
        IngestReport  # the parents listed, added, unchanged, replaced; the files added, unchanged, replaced
    )


def call_metadata(
    metadata: Mapping[str, Any] | None, on_error: str, max_chunks: int | None, document_id: str | None
) -> dict[str, Any]:
    """Check an ingest call's options, and return the metadata it adds to every parent (with its
    ``document_id``), so that a bad argument is refused before anything is read."""
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
    return extra


# -- inputs as groups of parents ----------------------------------------------------------------------


def document_group(item: Document | TextItem, extra: dict[str, Any]) -> Group:
    """A LangChain Document as a group of one parent (its id: the caller's, else from source and text)."""
    if not isinstance(item.page_content, str) or not item.page_content.strip():
        raise ConfigurationError("add_document: a Document with empty page_content has nothing to index")
    text = clean_text(item.page_content, "add_document: Document page_content")
    md = item.metadata
    if isinstance(md.get(FL_KEY), dict):  # a Document FinderLedge returned: its own fields, not the caller's
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
    pid = check_document_id(item.id) if caller else content_id(str(src or ""), text, *owned(owner))
    return Group(
        str(src) if src else None,
        [(pid, Document(page_content=text, metadata=md))],
        replace=False,
        caller_ids=caller,
        owner=owner,
    )


# -- split and embed, before the lock ------------------------------------------------------------


def prepare(
    engine: Engine,
    parents: Mapping[str, tuple[Group, Document]],
    budget: ChunkBudget | None = None,
    versions: Mapping[str, str] | None = None,
    stop: StopSignal | None = None,
) -> tuple[dict[str, Prepared], IngestReport]:
    """``parents`` split and their chunks embedded, and what embedding them did (``budget``: checked after each
    split, so an oversized call stops before anything is embedded; ``versions``: their :func:`version_hash` es
    if known; ``stop``: checked before each model call, see :class:`StopSignal`)."""
    if not parents:
        return {}, IngestReport()
    splitter = engine.splitter
    children: list[tuple[str, dict[str, Any]]] = []
    records: dict[str, DocumentRecord] = {}
    for pid, (group, doc) in parents.items():
        doc_type, language = detected_type(doc)
        parent_md, kids = splitter.split_parts(
            doc.page_content, doc.metadata, pid, child_id, doc_type=doc_type, language=language
        )
        if budget is not None:
            budget.spend(len(kids))
        version = versions.get(pid) if versions is not None else None
        records[pid] = DocumentRecord(
            pid, group.source, version or version_hash(doc), COMPLETE, doc.page_content, parent_md
        )
        children.extend(kids)
    vectors, counts = embed(engine, [embedded_text(text, md) for text, md in children], stop=stop)
    chunks: dict[str, list[ChunkRecord]] = {pid: [] for pid in records}
    for (text, md), vec in zip(children, vectors):
        info = md[FL_KEY]
        chunks[info["parent_id"]].append(
            ChunkRecord(info["id"], info["parent_id"], info["split_index"], text, md, vec)
        )
    return {pid: Prepared(record, chunks[pid]) for pid, record in records.items()}, counts


def embed(
    engine: Engine,
    texts: list[str],
    cache_seconds: float | None = None,
    stop: StopSignal | None = None,
) -> tuple[np.ndarray, IngestReport]:
    """Vectors for passages, and the embeddings computed, cached and the time it took (as a report to add):
    from the embedding cache when this model embedded the same text before, else computed in batches of
    ``embedding_batch_size`` (progress bar for long runs) and cached.

    Computed vectors go to the cache whenever ``cache_seconds`` (default :data:`CACHE_SECONDS`) of embedding
    work has gathered, and at once if embedding fails: a crash repeats at most that much work, and a cheap
    model (given vectors, a small model on short texts) is not slowed down by a cache write per batch.  What
    is left uncached is committed with its chunks right after, or cached by the caller if that fails
    (:func:`keep_vectors`)."""
    report = IngestReport()
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), report
    hashes = [content_id(t) for t in texts]
    cached = engine.ledger.cached_embeddings(engine.model_id, hashes)
    todo: dict[str, str] = {}
    for h, t in zip(hashes, texts):
        if h not in cached and h not in todo:
            todo[h] = t
    report.embeddings_cached += sum(1 for h in hashes if h in cached)
    size = engine.settings.embedding_batch_size
    pending = list(todo.items())
    show = engine.settings.show_progress
    if show is None:
        show = bar_fits() and len(pending) > size
    bar = None
    if show and pending:
        from tqdm.auto import tqdm

        # chunks/s and an ETA; under a folder's file bar it is a second line that goes when done
        bar = tqdm(total=len(pending), desc="Embedding chunks", unit="chunk", leave=False)
    # no bar (not a terminal, or turned off): a log line every few seconds instead
    log = ProgressLog("embedding chunks", len(pending), "chunk") if bar is None else None
    start_time = time.perf_counter()
    unsaved: list[tuple[str, np.ndarray]] = []  # computed, not yet in the cache
    unsaved_since = time.perf_counter()
    every = CACHE_SECONDS if cache_seconds is None else cache_seconds
    try:
        for start in range(0, len(pending), size):
            if stop is not None:
                stop.check()
            batch = pending[start : start + size]
            vectors = np.asarray(engine.embeddings.embed_documents([t for _, t in batch]), dtype=np.float32)
            new = [(h, v) for (h, _), v in zip(batch, vectors)]
            unsaved.extend(new)
            if time.perf_counter() - unsaved_since >= every:
                engine.ledger.cache_embeddings(engine.model_id, unsaved)  # kept if this call fails later
                unsaved, unsaved_since = [], time.perf_counter()
            cached.update(new)
            report.embeddings_computed += len(batch)
            if bar is not None:
                bar.update(len(batch))
            if log is not None:
                log.update(len(batch))
    except BaseException as exc:
        keep_vectors(engine, unsaved)
        if log is not None:
            log.close(ending(exc))  # "interrupted" after Ctrl-C: never "done" at 320/585
            log = None
        raise
    finally:
        if bar is not None:
            bar.close()
        if log is not None:
            log.close()
    report.seconds_embedding += time.perf_counter() - start_time
    return np.stack([cached[h] for h in hashes]).astype(np.float32, copy=False), report


def keep_vectors(engine: Engine, vectors: Sequence[tuple[str, np.ndarray]]) -> None:
    """After a failure: put computed ``(text hash, vector)`` pairs in the embedding cache, so that a retry does
    not embed them again; a cache that cannot be written (a full disk) is logged, never hides the failure."""
    if not vectors:
        return
    try:
        engine.ledger.cache_embeddings(engine.model_id, vectors)
    except Exception:  # the original failure is what the caller must see
        logger.warning(
            "could not keep %d computed vectors in the embedding cache", len(vectors), exc_info=True
        )


# -- under the lock --------------------------------------------------------------------------------


def plan(ledger: Ledger, call: WriteCall, batch: Batch, extra_deletes: Sequence[str] = ()) -> Plan:
    """Which parents of ``batch`` are new and which stored ones they replace, decided under the write lock
    (``extra_deletes``: parents of vanished files, removed too); the call's state is read, not changed.

    A stored parent with the same id but other content or metadata is replaced; so are the other parents
    of a file given again that the same owner (``document_id`` or none) added and, with ``document_id``,
    the parents of that document id not given again.  Another owner's copy of the file is never touched, nor,
    with ``within`` (a scope's predicate), another scope's."""
    new: dict[str, tuple[Group, Document]] = {}
    to_delete: list[str] = []
    report = IngestReport()
    listed = call.listed  # by an earlier batch of the call
    here: set[str] = set()  # by this one
    hashes = batch.versions
    versions = ledger.content_hashes([pid for g in batch.groups for pid, _ in g.parents])
    for group in batch.groups:
        existing = (
            owned_ids(in_scope(ledger.document_metadata(source=group.source), call.within), group.owner)
            if (group.replace and group.source)
            else []
        )
        wanted: set[str] = set()  # a set: a CSV file can bring 100,000 rows
        added_here = 0
        for pid, doc in group.parents:
            if pid in wanted:
                continue
            wanted.add(pid)
            if pid in listed or pid in here:  # the same parent from an earlier group of this call
                continue
            here.add(pid)
            report.ids.append(pid)
            if pid in versions and versions[pid] != (hashes.get(pid) or version_hash(doc)):
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
    if call.document_id is not None:
        stale = [
            i for i in ledger.ids_with_document_id(call.document_id) if i not in listed and i not in here
        ]
        to_delete.extend(stale)
        report.replaced.extend(stale)
    seen = set(to_delete)
    to_delete.extend(i for i in extra_deletes if i not in seen)
    return Plan(new, to_delete, report)


# -- helpers --------------------------------------------------------------------------------


def owned(owner: Any) -> tuple[str, ...]:
    """The extra id part of a parent that a ``document_id`` owns: the same content under another owner (or
    none) is another parent, so removing one owner never removes another's copy."""
    return () if owner is None else (f"{DOCUMENT_ID}={owner}",)


def owned_ids(rows: Sequence[tuple[str, dict[str, Any]]], owner: str | None) -> list[str]:
    """The ids among ``(id, metadata)`` rows that ``owner`` (a ``document_id``, or ``None``: no id) added."""
    return [pid for pid, md in rows if md.get(DOCUMENT_ID) == owner]


def source_ids(rows: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """What removing a source path removes: the parents added without a ``document_id``; when only document
    ids hold the path, theirs (the path is then the only name the caller gave for them)."""
    return owned_ids(rows, None) or [pid for pid, _ in rows]


# ``json.dumps(metadata, sort_keys=True, ensure_ascii=False)``, the encoder made once (not per document)
_VERSION_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def version_hash(doc: Document) -> str:
    """What makes two versions of a document the same: its text and its metadata."""
    return content_id(doc.page_content, _VERSION_JSON.encode(doc.metadata))


def check_document_id(value: Any, what: str = "document id") -> str:
    """A caller's document id: a non-empty string of at most 1024 characters without NUL."""
    if not isinstance(value, str) or not value or len(value) > _ID_LENGTH_LIMIT or "\x00" in value:
        raise ConfigurationError(
            f"{what}: expected a non-empty string of at most {_ID_LENGTH_LIMIT} characters "
            f"without NUL, got {value!r:.80}"
        )
    return value


def check_caller_ids(groups: Sequence[Group]) -> None:
    """Refuse one caller id given to two different documents in one call (documents hashed only when an id
    repeats: a large call of distinct ids hashes nothing here)."""
    seen: dict[str, Document] = {}
    for group in groups:
        if group.caller_ids:
            for pid, doc in group.parents:
                first = seen.setdefault(pid, doc)
                if first is not doc and version_hash(first) != version_hash(doc):
                    raise ConfigurationError(
                        f"add_document: document id {pid!r} given twice with different content"
                    )


def detected_type(doc: Document) -> tuple[str, str | None]:
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


def path_item(item: Any) -> Path:
    """An input that is not a Document: an existing path, else a clear error (raw text has its own method)."""
    if isinstance(item, (str, os.PathLike)):
        return existing_path(item)
    raise ConfigurationError(
        f"add_document: expected a file or directory path, a LangChain Document or a list of them, "
        f"got {type(item).__name__} (for raw text use add_texts([...]))"
    )


def existing_path(item: str | os.PathLike[str]) -> Path:
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
