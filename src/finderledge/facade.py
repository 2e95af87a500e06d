"""``FinderLedge``: the one-line facade that ingests documents and searches them in hybrid, vector or keyword mode."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from .config import Settings
from .context import NO_CONTEXT, format_context
from .document_loader import DocumentLoader, absolute_path, detect_doc_type, detect_language
from .document_splitter import DocumentSplitter, child_id
from .embeddings import EmbeddingModelFactory, embedding_model_id
from .finder import Finder
from .fusion import FusedHit
from .faiss_store import VectorIndexCorruptError
from .keyword_store import KeywordIndexCorruptError, KeywordStore
from .ledger import COMPLETE, DELETING, PENDING, ChunkRecord, DocumentRecord, Ledger
from .reranker import Reranker, create_reranker
from .results import SearchResult
from .retriever import FinderLedgeRetriever
from .vector_store import VectorStore, create_vector_store

__all__ = ["FinderLedge", "IngestReport", "Source", "NO_CONTEXT"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

Source = Union[str, os.PathLike, Document, Sequence[Union[str, os.PathLike, Document]]]

# metadata keys FinderLedge sets on every chunk; a user's metadata may not use them
RESERVED_KEYS = ("id", "is_parent", "is_split", "parent_id", "split_index", "split_count")
# settings fixed when a persist directory is created, reused when it is reopened
RECORDED_SETTINGS = ("vector_store", "embedding_model", "chunk_size", "chunk_overlap")
LEDGER_FILE = "ledger.sqlite3"


@dataclass
class IngestReport:
    """What one ``add_document`` call did: documents and files added, unchanged, replaced, pruned, skipped."""

    added: list[str] = field(default_factory=list)  # parent ids newly stored
    unchanged: list[str] = field(default_factory=list)  # parent ids already stored with the same content
    replaced: list[str] = field(default_factory=list)  # parent ids removed because their source changed
    pruned: list[str] = field(default_factory=list)  # parent ids removed because their file is gone (prune=True)
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

    @property
    def ids(self) -> list[str]:
        """Ids of every parent document the input is now stored as (new and unchanged)."""
        return self.added + self.unchanged

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (ids as lists, counts, timings)."""
        return {key: getattr(self, key) for key in self.__dataclass_fields__}

    def summary(self) -> str:
        """One human-readable paragraph (printed by ``finderledge add``)."""
        lines = [
            f"files seen: {self.files_seen} (added {self.files_added}, unchanged {self.files_unchanged}, "
            f"replaced {self.files_replaced}, skipped {len(self.skipped)})",
            f"documents: {len(self.added)} added, {len(self.unchanged)} unchanged, {len(self.replaced)} replaced, "
            f"{len(self.pruned)} pruned",
            f"chunks written: {self.chunks_written} (embedded {self.embeddings_computed}, "
            f"from cache {self.embeddings_cached})",
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


def _sha(*parts: str) -> str:
    """A 128-bit content id (32 hex characters) of the parts."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


class FinderLedge:
    """Hybrid retrieval over your documents, with one chunk id across the ledger, the vector and the keyword store.

    >>> ledger = FinderLedge("./index")              # doctest: +SKIP
    >>> ledger.add_document("docs/")                  # doctest: +SKIP
    >>> ledger.search("how do I reset my password?")  # doctest: +SKIP

    Every argument is optional; unset ones come from ``FINDERLEDGE_*`` environment variables, then a
    ``.env`` file, then (for a reopened directory) the settings it was built with, then the defaults.
    """

    def __init__(
        self,
        persist_directory: str | os.PathLike[str] | None = None,
        *,
        vector_store: str | None = None,
        embedding: str | Embeddings | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        search_mode: str | None = None,
        k: int | None = None,
        candidate_k: int | None = None,
        fusion: str | None = None,
        rrf_k: int | None = None,
        vector_weight: float | None = None,
        keyword_weight: float | None = None,
        bm25_k1: float | None = None,
        bm25_b: float | None = None,
        embedding_batch_size: int | None = None,
        vector_scripts: str | None = None,
        min_vector_share: float | None = None,
        show_progress: bool | None = None,
        keyword_tokenizer: Any = None,
        reranker: Any = None,
        rerank_candidates: int = 20,
        reranker_on_error: str = "warn",
        env_file: str | os.PathLike[str] | None = ".env",
    ) -> None:
        args: dict[str, Any] = {
            "persist_directory": None if persist_directory is None else os.fspath(persist_directory),
            "vector_store": vector_store,
            "embedding_model": embedding if isinstance(embedding, str) or embedding is None else None,
            "chunk_size": chunk_size,
            "chunk_overlap": chunk_overlap,
            "search_mode": search_mode,
            "k": k,
            "candidate_k": candidate_k,
            "fusion": fusion,
            "rrf_k": rrf_k,
            "vector_weight": vector_weight,
            "keyword_weight": keyword_weight,
            "bm25_k1": bm25_k1,
            "bm25_b": bm25_b,
            "embedding_batch_size": embedding_batch_size,
            "vector_scripts": vector_scripts,
            "min_vector_share": min_vector_share,
            "show_progress": show_progress,
        }
        if embedding is not None and not isinstance(embedding, (str, Embeddings)):
            raise ValueError(
                f"setting 'embedding': expected a model name or a LangChain Embeddings, got {type(embedding).__name__}"
            )
        # where does the data live? (needed before the rest: a reopened directory supplies defaults)
        pre = Settings.resolve({"persist_directory": args["persist_directory"]}, env_file=env_file)
        directory = Path(pre.persist_directory) if pre.persist_directory else None
        if directory is not None:
            if directory.exists() and not directory.is_dir():
                raise ValueError(f"setting 'persist_directory': {directory} exists and is not a directory")
            directory.mkdir(parents=True, exist_ok=True)
        self._ledger = Ledger(directory / LEDGER_FILE if directory else None)
        recorded = json.loads(self._ledger.get_info("settings") or "{}")
        self.settings = Settings.resolve(args, env_file=env_file, defaults=recorded)
        self.persist_directory = directory
        self._lock = threading.RLock()

        model = embedding if isinstance(embedding, Embeddings) else self.settings.embedding_model
        self._model_id = embedding_model_id(model)
        recorded_model = self._ledger.get_info("embedding_model_id")
        if recorded_model is not None and recorded_model != self._model_id:
            raise ValueError(
                f"setting 'embedding': {directory} was built with {recorded_model!r}, not {self._model_id!r}; "
                "reopen it with the same model or use a new persist_directory"
            )
        self.embeddings = EmbeddingModelFactory.create_embeddings(
            model, batch_size=self.settings.embedding_batch_size
        )
        self.splitter = DocumentSplitter(self.settings.chunk_size, self.settings.chunk_overlap)
        self.keyword_store = _open_index(
            directory / "bm25" if directory else None,
            lambda path: KeywordStore(path, tokenizer=keyword_tokenizer, k1=self.settings.bm25_k1,
                                      b=self.settings.bm25_b),
        )
        self._vector_store: VectorStore | None = None
        self.finder = Finder(
            lambda: self.vector_store,
            self.keyword_store,
            self.embeddings,
            fusion=self.settings.fusion,
            rank_constant=self.settings.rrf_k,
            weights={"vector": self.settings.vector_weight, "keyword": self.settings.keyword_weight},
            candidate_k=self.settings.candidate_k,
            vector_scripts=self.settings.vector_scripts,
            min_vector_share=self.settings.min_vector_share,
        )
        if recorded:
            changed = {k: (recorded[k], getattr(self.settings, k)) for k in ("chunk_size", "chunk_overlap")
                       if k in recorded and recorded[k] != getattr(self.settings, k)}
            if changed:
                logger.warning("chunking settings differ from the ones %s was built with (%s): only new "
                               "documents use the new ones", directory, changed)
        if not isinstance(rerank_candidates, int) or rerank_candidates < 1:
            raise ValueError(f"setting 'rerank_candidates': expected a positive integer, got {rerank_candidates!r}")
        self.rerank_candidates = rerank_candidates
        self.reranker: Reranker | None = create_reranker(reranker, on_error=reranker_on_error)
        self._record_settings()
        self._recover()

    # -- set-up -------------------------------------------------------------------------------------
    def _record_settings(self) -> None:
        recorded = {k: getattr(self.settings, k) for k in RECORDED_SETTINGS}
        self._ledger.set_info("settings", json.dumps(recorded))
        self._ledger.set_info("embedding_model_id", self._model_id)

    @property
    def vector_store(self) -> VectorStore:
        """The vector backend, opened on first use (FAISS needs the embedding dimension first)."""
        if self._vector_store is None:
            with self._lock:
                if self._vector_store is None:
                    dim = self._ledger.get_info("embedding_dimension")
                    if dim is None:
                        dim = str(len(self.embeddings.embed_query("dimension probe")))
                        self._ledger.set_info("embedding_dimension", dim)
                    kind, directory = self.settings.vector_store, self.persist_directory
                    self._vector_store = _open_index(
                        directory / kind if directory else None,
                        lambda _path: create_vector_store(kind, directory, int(dim)),
                    )
        return self._vector_store

    def _recover(self) -> None:
        """Roll back adds and finish removals a crash left half-done, then make every index match the ledger."""
        unfinished = self._ledger.ids_in_state(PENDING) + self._ledger.ids_in_state(DELETING)
        if unfinished:
            logger.warning("%s: cleaning up %d unfinished document(s) from an interrupted run",
                           self.persist_directory or "ledger", len(unfinished))
            self._drop_from_indexes(self._ledger.chunk_ids_of(unfinished))
            self._ledger.purge(unfinished)
        if self.persist_directory is not None:
            self._reconcile(force=bool(unfinished))

    def _reconcile(self, *, force: bool = False) -> None:
        """Re-add chunks an index lacks (from the ledger's texts and vectors) and drop ones it should not have.

        Comparing id sets reads every id of every index, so on a normal open (nothing was unfinished) it is
        done only for an index whose size differs from the ledger's: a new, switched or moved-aside one.
        """
        expected = self._ledger.counts()["chunks"]
        if not force and expected == 0 and len(self.keyword_store) == 0:
            return  # a new directory: do not open (and probe the model for) the vector store yet
        truth: set[str] | None = None
        for name, index in (("keyword", self.keyword_store), ("vector", self.vector_store)):
            if not force and len(index) == expected:
                continue
            if truth is None:
                truth = self._ledger.complete_chunk_ids()
            have = index.ids()
            extra, missing = have - truth, truth - have
            if extra:
                logger.warning("%s index: removing %d chunk(s) the ledger does not hold", name, len(extra))
                index.delete(extra)
            if missing:
                logger.warning("%s index: restoring %d chunk(s) from the ledger", name, len(missing))
                for batch in self._ledger.iter_chunks(sorted(missing), with_embedding=(name == "vector")):
                    if name == "vector":
                        if any(c.embedding is None for c in batch):
                            raise RuntimeError(f"{self.persist_directory}: the ledger lacks vectors; rebuild the index")
                        vectors = np.stack([c.embedding for c in batch])  # type: ignore[misc]
                        self.vector_store.add([c.id for c in batch], vectors,
                                              [c.metadata for c in batch], [c.content for c in batch])
                    else:
                        self.keyword_store.add([c.id for c in batch], [c.content for c in batch],
                                               [c.metadata for c in batch])
            if extra or missing:
                index.flush()

    def _drop_from_indexes(self, chunk_ids: Sequence[str]) -> None:
        if not chunk_ids:
            return
        self.keyword_store.delete(chunk_ids)
        self.vector_store.delete(chunk_ids)
        self.keyword_store.flush()
        self.vector_store.flush()

    # -- ingest -------------------------------------------------------------------------------------
    def add_document(
        self,
        source: Source,
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: str = "skip",
        prune: bool = False,
    ) -> list[str]:
        """Add a file, a directory (recursive), raw text, a LangChain ``Document`` or a list of those.

        Returns the ids of the parent documents the input is stored as (already-stored identical
        content included, stored once).  A file whose content changed replaces its older version.
        ``metadata`` is added to every document; keys FinderLedge manages (``id``, ``parent_id`` …) are refused.
        ``prune=True`` also removes documents of files that no longer exist under a directory given.
        ``on_error="skip"`` (default) reports files that fail to parse and goes on; ``"raise"`` stops.
        Nothing is stored unless the whole call succeeds; vectors computed before a failure are cached,
        so running the same call again does not embed them twice.
        """
        return self.ingest(source, metadata, include=include, exclude=exclude, on_error=on_error, prune=prune).ids

    def add_documents(self, sources: Iterable[str | os.PathLike[str] | Document],
                      metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> list[str]:
        """Batch form of :meth:`add_document`: everything is split first, then embedded in batches."""
        return self.add_document(list(sources), metadata, **kwargs)

    def ingest(
        self,
        source: Source,
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: str = "skip",
        prune: bool = False,
    ) -> IngestReport:
        """Like :meth:`add_document` but returns the full :class:`IngestReport`."""
        started = time.perf_counter()
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error: expected 'raise' or 'skip', got {on_error!r}")
        extra = dict(metadata or {})
        self._check_user_metadata(extra, "metadata argument")
        report = IngestReport()
        loader = DocumentLoader(include=include, exclude=exclude, on_error=on_error,  # type: ignore[arg-type]
                                show_progress=self.settings.show_progress)
        groups: list[_Group] = []
        items = list(source) if isinstance(source, (list, tuple)) else [source]
        prune_under: list[str] = []
        for item in items:
            groups.extend(self._groups_for(item, extra, loader, report))
            if prune and not isinstance(item, Document) and isinstance(item, (str, os.PathLike)) \
                    and Path(item).expanduser().is_dir():
                prune_under.append(str(absolute_path(item)).rstrip(os.sep) + os.sep)
        with self._lock:
            gone = [src for prefix in prune_under for src in self._ledger.sources_under(prefix)
                    if not os.path.exists(src)]
            for src in gone:
                report.pruned.extend(self._ledger.ids_by_source(src))
            self._write(groups, report, extra_deletes=report.pruned)
        report.seconds_total = time.perf_counter() - started
        logger.info("ingest: %d added, %d unchanged, %d replaced, %d pruned, %d skipped, %d chunks written",
                    len(report.added), len(report.unchanged), len(report.replaced), len(report.pruned),
                    len(report.skipped), report.chunks_written)
        return report

    def _check_user_metadata(self, md: Mapping[str, Any], where: str) -> None:
        bad = [k for k in RESERVED_KEYS if k in md]
        if bad:
            raise ValueError(f"{where}: keys {bad} are set by FinderLedge; rename them (e.g. 'user_{bad[0]}')")

    def _groups_for(self, item: Any, extra: dict[str, Any], loader: DocumentLoader,
                    report: IngestReport) -> list[_Group]:
        if isinstance(item, Document) and not item.page_content.strip():
            raise ValueError("add_document: a Document with empty page_content has nothing to index")
        if isinstance(item, Document):
            md = {**item.metadata, **extra}
            self._check_user_metadata(item.metadata, "Document metadata")
            src = md.get("source")
            _detect_type(md, item.page_content)
            pid = _sha(str(src or ""), item.page_content)
            return [_Group(str(src) if src else None, [(pid, Document(page_content=item.page_content, metadata=md))],
                           replace=False)]
        if isinstance(item, os.PathLike) or (isinstance(item, str) and _looks_like_path(item)):
            path = Path(item).expanduser()
            if not path.exists():
                raise FileNotFoundError(
                    f"add_document: no such file or directory: {str(path)!r} "
                    "(to add this string as text, pass Document(page_content=...))"
                )
            result = loader.load(path)
            report.files_seen += result.files_seen
            report.skipped.extend((s.path, s.reason) for s in result.skipped)
            groups = []
            for file_path, docs in result.files.items():
                parents = []
                for doc in docs:
                    md = {**doc.metadata, **extra}
                    pid = _sha(file_path, str(md.get("locator", "")), doc.page_content)
                    parents.append((pid, Document(page_content=doc.page_content, metadata=md)))
                groups.append(_Group(file_path, parents, replace=True))
            return groups
        if isinstance(item, str):
            if not item.strip():
                raise ValueError("add_document: empty text has nothing to index")
            md = {**extra}
            _detect_type(md, item)
            src = md.get("source")
            return [_Group(str(src) if src else None, [(_sha(str(src or ""), item), Document(item, metadata=md))],
                           replace=False)]
        raise ValueError(
            f"add_document: expected a path, a directory, text, a LangChain Document or a list of them, "
            f"got {type(item).__name__}"
        )

    def _write(self, groups: Sequence[_Group], report: IngestReport, extra_deletes: Sequence[str] = ()) -> None:
        """Split, embed and store new parents; replace changed sources and prune — all or nothing."""
        new: dict[str, tuple[_Group, Document]] = {}
        to_delete: list[str] = []
        for group in groups:
            existing = self._ledger.ids_by_source(group.source) if (group.replace and group.source) else []
            wanted: set[str] = set()  # a set: a CSV file can bring 100,000 rows
            added_here = 0
            for pid, doc in group.parents:
                if pid in new or pid in wanted:
                    continue
                state = self._ledger.document_state(pid)
                if state == COMPLETE:
                    report.unchanged.append(pid)
                else:
                    new[pid] = (group, doc)
                    report.added.append(pid)
                    added_here += 1
                wanted.add(pid)
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
        to_delete.extend(i for i in extra_deletes if i not in to_delete)
        if not new and not to_delete:
            return
        records: list[tuple[DocumentRecord, list[ChunkRecord]]] = []
        children: list[Document] = []
        for pid, (group, doc) in new.items():
            parent, kids = self.splitter.split_document(doc, pid, child_id)
            records.append((DocumentRecord(pid, group.source, _sha(doc.page_content), PENDING,
                                           doc.page_content, parent.metadata), []))
            children.extend(kids)
        vectors = self._embed([c.page_content for c in children], report)
        chunk_records: dict[str, list[ChunkRecord]] = {}
        for child, vec in zip(children, vectors):
            md = child.metadata
            chunk_records.setdefault(md["parent_id"], []).append(
                ChunkRecord(md["id"], md["parent_id"], md["split_index"], child.page_content, md, vec))
        records = [(doc, chunk_records.get(doc.id, [])) for doc, _ in records]
        ids = [c.metadata["id"] for c in children]
        self._ledger.begin_add(records)
        try:
            if children:
                self.vector_store.add(ids, vectors, [c.metadata for c in children], [c.page_content for c in children])
                self.keyword_store.add(ids, [c.page_content for c in children], [c.metadata for c in children])
                self.vector_store.flush()
                self.keyword_store.flush()
            self._ledger.commit_changes(completed=list(new), to_delete=to_delete)
        except BaseException:
            logger.error("ingest failed; rolling back %d new document(s)", len(new))
            self._drop_from_indexes(ids)
            self._ledger.purge(list(new))
            raise
        report.chunks_written += len(children)
        if to_delete:
            self._drop_from_indexes(self._ledger.chunk_ids_of(to_delete))
            self._ledger.purge(to_delete)

    def _embed(self, texts: list[str], report: IngestReport) -> np.ndarray:
        """Vectors for passages: from the embedding cache when this model embedded the same text before,
        else computed in batches of ``embedding_batch_size`` (progress bar for long runs) and cached."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        hashes = [_sha(t) for t in texts]
        cached = self._ledger.cached_embeddings(self._model_id, hashes)
        todo: dict[str, str] = {}
        for h, t in zip(hashes, texts):
            if h not in cached and h not in todo:
                todo[h] = t
        report.embeddings_cached += sum(1 for h in hashes if h in cached)
        size = self.settings.embedding_batch_size
        pending = list(todo.items())
        batches = range(0, len(pending), size)
        show = self.settings.show_progress
        if show is None:
            show = sys.stderr.isatty() and len(batches) > 1
        if show:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="embedding", unit="batch")  # type: ignore[assignment]
        start_time = time.perf_counter()
        for start in batches:
            batch = pending[start : start + size]
            vectors = np.asarray(self.embeddings.embed_documents([t for _, t in batch]), dtype=np.float32)
            new = [(h, v) for (h, _), v in zip(batch, vectors)]
            self._ledger.cache_embeddings(self._model_id, new)  # kept even if this call fails later
            cached.update(new)
            report.embeddings_computed += len(batch)
        report.seconds_embedding += time.perf_counter() - start_time
        return np.stack([cached[h] for h in hashes]).astype(np.float32, copy=False)

    # -- removal ------------------------------------------------------------------------------------
    def remove_document(self, doc_id: str | os.PathLike[str]) -> list[str]:
        """Remove a parent document (by id) or every document of a source path, from every store.

        Returns the removed parent ids.  Raises ``KeyError`` naming the id when nothing matches.
        """
        key = os.fspath(doc_id)
        with self._lock:
            if self._ledger.document_state(key) == COMPLETE:
                ids = [key]
            else:
                ids = self._ledger.ids_by_source(key) or self._ledger.ids_by_source(str(absolute_path(key)))
            if not ids:
                raise KeyError(f"remove_document: no document with id or source {key!r}")
            self._ledger.commit_changes(to_delete=ids)
            self._drop_from_indexes(self._ledger.chunk_ids_of(ids))
            self._ledger.purge(ids)
        return ids

    # -- search -------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        search_mode: str | None = None,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        return_parents: bool = False,
        candidate_k: int | None = None,
        rerank: bool = True,
    ) -> list[SearchResult]:
        """Best ``k`` chunks for ``query`` (or their parents, de-duplicated, with ``return_parents=True``).

        With a reranker configured, the fused top ``rerank_candidates`` are rescored and the best ``k``
        kept (``rerank=False`` skips it for one call); ``relevance_score`` is then the reranker's score and
        ``fused_score``/``fused_rank`` keep the first stage's.
        """
        mode = search_mode or self.settings.search_mode
        k = self.settings.k if k is None else k
        reranking = rerank and self.reranker is not None
        wanted = max(k, self.rerank_candidates) if reranking else k
        depth, fetch = candidate_k, wanted
        if return_parents:  # several chunks may share a parent: take every candidate, keep the first of each
            depth = fetch = max(candidate_k or self.settings.candidate_k, 4 * wanted)
        hits = self.finder.search(query, mode=mode, k=fetch, filter=filter, candidate_k=depth)
        found = self._documents_for(hits, return_parents, wanted)
        if reranking and found:
            assert self.reranker is not None
            scores = self.reranker.score(query, [doc for doc, _ in found])
            order = sorted(range(len(found)), key=lambda i: -scores[i])
            reranked = []
            for i in order:
                doc, hit = found[i]
                doc.metadata["fused_score"] = hit.score
                doc.metadata["fused_rank"] = i + 1
                doc.metadata["relevance_score"] = scores[i]
                reranked.append((doc, FusedHit(hit.id, scores[i], hit.ranks, hit.raw_scores)))
            found = reranked
        return [SearchResult(doc, hit.score, rank) for rank, (doc, hit) in enumerate(found[:k], start=1)]

    def _documents_for(self, hits: Sequence[FusedHit], parents: bool, limit: int) -> list[tuple[Document, FusedHit]]:
        """The stored chunks (or their parents, first occurrence only) of fused hits, annotated with leg details."""
        chunks = {c.id: c for c in self._ledger.get_chunks([h.id for h in hits])}
        out: list[tuple[Document, FusedHit]] = []
        seen: set[str] = set()
        for hit in hits:
            chunk = chunks.get(hit.id)
            if chunk is None:  # index and ledger disagree: never return what the ledger does not hold
                logger.warning("search: chunk %s is in an index but not in the ledger; skipped", hit.id)
                continue
            if parents:
                if chunk.parent_id in seen:
                    continue
                seen.add(chunk.parent_id)
                record = self._ledger.get_document(chunk.parent_id)
                if record is None:
                    continue
                doc = _as_document(record)
                doc.metadata["matched_chunk_id"] = chunk.id
            else:
                doc = _as_document(chunk)
            _annotate(doc, hit)
            out.append((doc, hit))
            if len(out) == limit:
                break
        return out

    def get_context(
        self,
        query: str,
        *,
        k: int | None = None,
        search_mode: str | None = None,
        filter: Mapping[str, Any] | None = None,
        return_parents: bool = False,
        max_chars: int | None = None,
    ) -> str:
        """A prompt-ready string: ``[1] (source: …)`` and the passage, for each result.

        When nothing matches it returns :data:`~finderledge.context.NO_CONTEXT` (``"[no relevant context found]"``),
        never an empty string.
        """
        results = self.search(query, k=k, search_mode=search_mode, filter=filter, return_parents=return_parents)
        return format_context(results, max_chars=max_chars)

    def as_retriever(self, **search_defaults: Any) -> FinderLedgeRetriever:
        """A LangChain ``BaseRetriever``; ``search_defaults`` (``k``, ``search_mode``, ``filter`` …) can be
        overridden per call: ``retriever.invoke(q, k=3)``."""
        allowed = {"search_mode", "k", "filter", "return_parents", "candidate_k", "rerank"}
        unknown = set(search_defaults) - allowed
        if unknown:
            raise ValueError(f"as_retriever: unknown search option(s) {sorted(unknown)}; expected {sorted(allowed)}")
        return FinderLedgeRetriever(ledger=self, search_kwargs=dict(search_defaults))

    # -- reading back -------------------------------------------------------------------------------
    def get_document(self, doc_id: str) -> Document | None:
        """A parent document or a chunk by id (``None`` if unknown)."""
        record = self._ledger.get_document(doc_id)
        if record is not None and record.state == COMPLETE:
            return _as_document(record)
        chunk = self._ledger.get_chunk(doc_id)
        if chunk is not None and self._ledger.document_state(chunk.parent_id) == COMPLETE:
            return _as_document(chunk)
        return None

    def get_parent_document(self, child_id: str) -> Document | None:
        """The parent of a chunk (``None`` if the chunk is unknown)."""
        chunk = self._ledger.get_chunk(child_id)
        return None if chunk is None else self.get_document(chunk.parent_id)

    def get_split_documents(self, parent_id: str) -> list[Document]:
        """The chunks of a parent, in order."""
        if self._ledger.document_state(parent_id) != COMPLETE:
            return []
        return [_as_document(c) for c in self._ledger.chunks_of(parent_id)]

    def list_documents(self, *, source: str | None = None, limit: int | None = None) -> list[Document]:
        """Parent documents in the order they were added (optionally only those of one source)."""
        return [_as_document(r) for r in self._ledger.list_documents(source=source, limit=limit)]

    def list_sources(self) -> list[str]:
        """Every source (file path or given ``source``) that has documents."""
        return self._ledger.sources()

    def count(self) -> dict[str, int]:
        """``{"documents": …, "chunks": …}`` — parents and chunks stored."""
        counts = self._ledger.counts()
        return {"documents": counts["documents"], "chunks": counts["chunks"]}

    def stats(self) -> dict[str, Any]:
        """Counts per store and the settings in force (for ``finderledge stats``)."""
        return {
            **self.count(),
            "keyword_index_chunks": len(self.keyword_store),
            "vector_index_chunks": len(self.vector_store),
            "embedding_model": self._model_id,
            "persist_directory": str(self.persist_directory) if self.persist_directory else None,
            "settings": self.settings.to_dict(),
        }

    def __len__(self) -> int:
        return self.count()["documents"]

    # -- lifecycle ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush and close every store; the directory can then be reopened by another process."""
        with self._lock:
            self.finder.close()
            self.keyword_store.flush()
            self.keyword_store.close()
            if self._vector_store is not None:
                self._vector_store.flush()
                self._vector_store.close()
            self._ledger.close()

    def __enter__(self) -> FinderLedge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_document(record: DocumentRecord | ChunkRecord) -> Document:
    """A LangChain ``Document`` for a ledger record (a copy: callers may annotate its metadata)."""
    return Document(page_content=record.content, metadata=dict(record.metadata), id=record.id)


def _open_index(path: Path | None, factory: Callable[[Path | None], T]) -> T:
    """Open an index; if its files are corrupt, move them aside (never overwrite) and start empty —
    the ledger then restores every chunk into it (see ``_reconcile``)."""
    try:
        return factory(path)
    except (KeywordIndexCorruptError, VectorIndexCorruptError) as exc:
        if path is None:
            raise
        aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(path, aside)
        logger.error("%s; moved it to %s and rebuilding the index from the ledger", exc, aside)
        return factory(path)


def _detect_type(md: dict[str, Any], text: str) -> None:
    """Fill ``doc_type_detected`` (and ``language`` for code) of raw text unless the user set them."""
    if "doc_type_detected" not in md:
        md["doc_type_detected"] = detect_doc_type(None, text)
        if md["doc_type_detected"] == "code" and "language" not in md:
            language = detect_language(text)
            if language:
                md["language"] = language


def _annotate(doc: Document, hit: FusedHit) -> None:
    """Put the fused score and each leg's rank and raw score into the result's metadata."""
    doc.metadata["relevance_score"] = hit.score
    for leg in ("vector", "keyword"):
        if leg in hit.ranks:
            doc.metadata[f"{leg}_rank"] = hit.ranks[leg]
            doc.metadata[f"{leg}_score"] = hit.raw_scores[leg]


_PATH_LENGTH_LIMIT = 4096


def _looks_like_path(text: str) -> bool:
    """A string is a path when it exists, or is one line with a separator, or names a supported file type.

    Anything else is raw text; to add text that looks like a file name, wrap it in a ``Document``.
    """
    if "\n" in text or len(text) > _PATH_LENGTH_LIMIT or not text.strip():
        return False
    if os.path.exists(os.path.expanduser(text)):
        return True
    if any(ch.isspace() for ch in text):  # prose with a slash ("and/or") is text, "my docs/a.md" is a path
        return DocumentLoader.is_supported(text.strip())
    return "/" in text or os.sep in text or DocumentLoader.is_supported(text)
