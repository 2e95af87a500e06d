"""``FinderLedge``: the one-line facade that ingests documents and searches them in hybrid, vector or keyword mode.

The write path lives in :mod:`finderledge.ingest`, the rules by which indexes follow the ledger (and other
processes) in :mod:`finderledge.replica`; this class wires them together and annotates results.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from .config import Settings
from .context import DEFAULT_TEMPLATE, NO_CONTEXT, Citation, check_format, format_context
from .document_loader import safe_path
from .document_splitter import DocumentSplitter
from .embeddings import EmbeddingModelFactory, embedding_model_id, prefetch
from .errors import ConfigurationError, IncompatibleIndexError
from .finder import Finder
from .fusion import FusedHit
from .ingest import IngestReport, Writer
from .keyword_store import KeywordStore
from .ledger import COMPLETE, DELETING, PENDING, ChunkRecord, DocumentRecord, Ledger
from .locking import WriteLock
from .metadata import FL_KEY, info_of
from .relevance import LedgerBackground, check_score_threshold
from .replica import Replica
from .reranker import Reranker, create_reranker
from .results import SearchResult, SearchResults, SearchTrace
from .retriever import FinderLedgeRetriever
from .scope import Scope
from .validation import (
    check_flag,
    check_mapping,
    check_parallel,
    check_patterns,
    check_positive_int,
    check_search_options,
    check_texts,
    document_key,
    query_text,
)
from .vector_store import VectorStore, create_vector_store

if TYPE_CHECKING:
    from .langchain_vectorstore import FinderLedgeVectorStore

__all__ = ["NO_CONTEXT", "FinderLedge", "IngestReport", "Source"]

logger = logging.getLogger(__name__)

Source = Union[str, os.PathLike, Document, Sequence[str | os.PathLike | Document]]

# settings fixed when a persist directory is created, reused when it is reopened
RECORDED_SETTINGS = ("vector_store", "embedding_model", "chunk_size", "chunk_overlap", "chunk_unit")
LEDGER_FILE = "ledger.sqlite3"


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
        chunk_unit: str | None = None,
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
        lock_timeout: float | None = None,
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
            "chunk_unit": chunk_unit,
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
            "lock_timeout": lock_timeout,
        }
        if embedding is not None and not isinstance(embedding, (str, Embeddings)):
            raise ConfigurationError(
                f"setting 'embedding': expected a model name or a LangChain Embeddings, got {type(embedding).__name__}"
            )
        # where does the data live? (needed before the rest: a reopened directory supplies defaults)
        pre = Settings.resolve({"persist_directory": args["persist_directory"]}, env_file=env_file)
        directory = Path(pre.persist_directory) if pre.persist_directory else None
        if directory is not None:
            if directory.exists() and not directory.is_dir():
                raise ConfigurationError(f"setting 'persist_directory': {directory} exists and is not a directory")
            directory.mkdir(parents=True, exist_ok=True)
        self._ledger = Ledger(directory / LEDGER_FILE if directory else None)
        try:
            recorded = json.loads(self._ledger.get_info("settings") or "{}")
            # the recorded model is never a default: opening must not load a model or call a service the
            # caller did not name (a crafted directory could name any path or API); it is checked below
            self.settings = _pin_recorded(
                Settings.resolve(args, env_file=env_file,
                                 defaults={k: v for k, v in recorded.items() if k != "embedding_model"}),
                recorded, args, directory)
            self.persist_directory = directory
            self._write_lock = WriteLock(directory, self.settings.lock_timeout)
            self._closed = False

            model = embedding if isinstance(embedding, Embeddings) else self.settings.embedding_model
            self._model_id = embedding_model_id(model)
            recorded_model = self._ledger.get_info("embedding_model_id")
            if recorded_model is not None and recorded_model != self._model_id:
                raise IncompatibleIndexError(_model_mismatch(directory, recorded_model, self._model_id))
            self.embeddings = EmbeddingModelFactory.create_embeddings(
                model, batch_size=self.settings.embedding_batch_size
            )
            self.splitter = DocumentSplitter(self.settings.chunk_size, self.settings.chunk_overlap,
                                             self.settings.chunk_unit)
            kind = self.settings.vector_store
            self._replica = Replica(
                self._ledger,
                self._write_lock,
                lambda: KeywordStore(directory / "bm25" if directory else None, tokenizer=keyword_tokenizer,
                                     k1=self.settings.bm25_k1, b=self.settings.bm25_b),
                lambda: create_vector_store(kind, directory, self._dimension()),
                f"index:vector:{kind}",
                persistent=directory is not None,
            )
            self._writer = Writer(self)
            self.finder = Finder(
                lambda: _VectorLeg(self),
                _KeywordLeg(self._replica),
                self.embeddings,
                fusion=self.settings.fusion,
                rank_constant=self.settings.rrf_k,
                weights={"vector": self.settings.vector_weight, "keyword": self.settings.keyword_weight},
                candidate_k=self.settings.candidate_k,
                vector_scripts=self.settings.vector_scripts,
                min_vector_share=self.settings.min_vector_share,
            )
            if recorded:
                changed = {k: (recorded[k], getattr(self.settings, k))
                           for k in ("chunk_size", "chunk_overlap", "chunk_unit")
                           if k in recorded and recorded[k] != getattr(self.settings, k)}
                if changed:
                    logger.warning("chunking settings differ from the ones %s was built with (%s): only new "
                                   "documents use the new ones", directory, changed)
            if not isinstance(rerank_candidates, int) or rerank_candidates < 1:
                raise ConfigurationError(
                    f"setting 'rerank_candidates': expected a positive integer, got {rerank_candidates!r}")
            self.rerank_candidates = rerank_candidates
            self.reranker: Reranker | None = create_reranker(reranker, on_error=reranker_on_error)
            self._record_settings(recorded)
            self._finish_version_1_writes()
            self._replica.follow()  # replays what the checkpoints lack (and checkpoints a rebuilt index)
        except BaseException:  # a refused open must not leave the ledger (and its locks) open
            closers = [getattr(self, "_replica", None), getattr(self, "finder", None), self._ledger]
            for part in closers:
                if part is not None:
                    try:
                        part.close()
                    except Exception:  # the original error is the one to raise
                        logger.debug("closing after a failed open", exc_info=True)
            raise

    # -- set-up -------------------------------------------------------------------------------------
    def _record_settings(self, recorded: Mapping[str, Any]) -> None:
        """Record the settings of a new directory, or a vector store an argument switched to; opening a
        directory otherwise never writes to it."""
        wanted = {k: getattr(self.settings, k) for k in RECORDED_SETTINGS}
        if not recorded:
            self._ledger.set_info("settings", json.dumps(wanted))
        elif recorded.get("vector_store") != wanted["vector_store"]:
            logger.warning("%s: switching the vector store from %r to %r (rebuilt from the ledger's vectors)",
                           self.persist_directory, recorded.get("vector_store"), wanted["vector_store"])
            self._ledger.set_info("settings", json.dumps({**recorded, "vector_store": wanted["vector_store"]}))
        if self._ledger.get_info("embedding_model_id") is None:
            self._ledger.set_info("embedding_model_id", self._model_id)

    def _dimension(self) -> int:
        """The embedding dimension, recorded in the ledger (probing the model once for a new directory)."""
        dim = self._ledger.get_info("embedding_dimension")
        if dim is None:
            dim = str(len(self.embeddings.embed_query("dimension probe")))
            self._ledger.set_info("embedding_dimension", dim)
        return int(dim)

    def _finish_version_1_writes(self) -> None:
        """Drop documents a version-1 FinderLedge left ``pending``/``deleting`` when it crashed (its indexes
        have no checkpoint record, so they are compared with the ledger and cleaned on first use)."""
        if not self._ledger.has_unfinished():
            return
        with self._write_lock.hold("finishing an interrupted version-1 write"):
            unfinished = self._ledger.ids_in_state(PENDING) + self._ledger.ids_in_state(DELETING)
            if unfinished:
                logger.warning("%s: cleaning up %d unfinished document(s) from an interrupted run",
                               self.persist_directory or "ledger", len(unfinished))
                self._ledger.purge(unfinished)

    @property
    def vector_store(self) -> VectorStore:
        """The vector backend's base index, opened on first use (FAISS needs the embedding dimension first).

        Changes made since its last checkpoint may still sit in the replica's overlay; searches see both."""
        if not self._replica.vector_loaded:
            self._replica.load_vector()
        return self._replica.vector.handle  # type: ignore[no-any-return]

    @property
    def keyword_store(self) -> KeywordStore:
        """The BM25 index of this process (it follows the ledger's change log)."""
        return self._replica.keyword.handle  # type: ignore[no-any-return]

    def refresh(self) -> int:
        """Apply every change other processes committed; returns the ledger ``seq`` now reflected.

        Searches do this themselves; call it to catch up ahead of time."""
        return self._replica.follow()

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
        follow_symlinks: bool = False,
    ) -> list[str]:
        """Add a file, a directory (recursive), a LangChain ``Document`` or a list of those (raw text:
        :meth:`add_texts`; a string is always a path, and one that does not exist raises
        :class:`~finderledge.errors.SourceNotFoundError`).

        Returns the ids of the parent documents the input is stored as (already-stored identical
        content included, stored once).  A file whose content changed replaces its older version.
        ``metadata`` is added to every document (any key but ``_finderledge``, which holds FinderLedge's own
        fields).  A ``Document`` with an ``id`` is stored under that id: the same id with other content or
        metadata replaces the stored version.
        ``prune=True`` also removes documents of files that no longer exist under a directory given.
        ``on_error="skip"`` (default) reports files that fail to parse and goes on; ``"raise"`` stops.
        Symlinks met inside a directory are not followed (reported as skipped) unless ``follow_symlinks=True``.
        Nothing is stored unless the whole call succeeds; vectors computed before a failure are cached,
        so running the same call again does not embed them twice.
        """
        return self.ingest(source, metadata, include=include, exclude=exclude, on_error=on_error, prune=prune,
                           follow_symlinks=follow_symlinks).ids

    def add_documents(self, sources: Iterable[str | os.PathLike[str] | Document],
                      metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> list[str]:
        """Batch form of :meth:`add_document`: everything is split first, then embedded in batches."""
        if isinstance(sources, (str, bytes, os.PathLike, Document, Mapping)) or not isinstance(sources, Iterable):
            raise ConfigurationError(f"add_documents: sources: expected a list of paths or Documents, got "
                                     f"{type(sources).__name__} (use add_document for one source)")
        return self.add_document(list(sources), metadata, **kwargs)

    def add_texts(self, texts: Iterable[str], metadatas: Sequence[Mapping[str, Any]] | None = None, *,
                  ids: Sequence[str | None] | None = None, **kwargs: Any) -> list[str]:
        """Add raw texts (LangChain's name and arguments): one document per text, with its metadata and id.

        Returns the stored ids in the order of ``texts``; a text without an id gets a content id (adding the
        same text again stores nothing).  The same id with other content or metadata replaces that document."""
        texts = check_texts(texts)
        metadatas = check_parallel("metadatas", metadatas, len(texts))
        ids = check_parallel("ids", ids, len(texts))
        docs = [Document(page_content=t, metadata=dict(metadatas[i] or {}) if metadatas else {},
                         id=ids[i] if ids else None) for i, t in enumerate(texts)]
        return self.ingest(docs, **kwargs).ids if docs else []

    def ingest(
        self,
        source: Source,
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: str = "skip",
        prune: bool = False,
        follow_symlinks: bool = False,
    ) -> IngestReport:
        """Like :meth:`add_document` but returns the full :class:`IngestReport`."""
        check_mapping("metadata", metadata)
        check_patterns("include", include)
        check_patterns("exclude", exclude)
        check_flag("prune", prune)
        check_flag("follow_symlinks", follow_symlinks)
        self.vector_store  # noqa: B018 - open the vector index first: a write checkpoints both indexes
        return self._writer.ingest(source, metadata, include=include, exclude=exclude, on_error=on_error,
                                   prune=prune, follow_symlinks=follow_symlinks)

    # -- removal ------------------------------------------------------------------------------------
    def remove_document(self, doc_id: str | os.PathLike[str]) -> list[str]:
        """Remove a parent document (by id) or every document of a source path, from every store.

        Returns the removed parent ids.  Raises :class:`~finderledge.errors.DocumentNotFoundError` (a
        ``KeyError``) naming the id when nothing matches; nothing is changed then.
        """
        key = document_key(doc_id)
        self.vector_store  # noqa: B018
        return self._writer.remove(key)

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Remove documents by id (LangChain's ``delete``): unknown ids are ignored; returns the ids removed."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ConfigurationError(f"delete: ids: expected a list of document ids, got {type(ids).__name__}")
        keys = [document_key(i) for i in ids]
        self.vector_store  # noqa: B018
        return self._writer.delete(keys)

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
        score_threshold: float | None = None,
    ) -> SearchResults:
        """Best ``k`` chunks for ``query`` (or their parents, de-duplicated, with ``return_parents=True``).

        A result's ``score`` (= ``relevance_score``) is its absolute relevance in [0, 1], comparable between
        queries and falling with rank (docs/scores.md); ``fusion_score`` keeps the fusion's value, which orders
        them.  ``score_threshold`` drops results scoring below it.  With a reranker configured, the fused top
        ``rerank_candidates`` are rescored and the best ``k`` kept (``rerank=False`` skips it for one call); the
        score is then the reranker's and ``fused_score``/``fused_rank`` keep the first stage's.  The returned
        list's ``trace`` says how the search ran (:class:`~finderledge.results.SearchTrace`).

        The indexes first apply every change committed before the call (by any process); the search then
        sees one committed state in both legs.
        """
        started = time.perf_counter()
        query = query_text(query)
        check_search_options({"search_mode": search_mode, "k": k, "filter": filter, "return_parents": return_parents,
                              "candidate_k": candidate_k, "rerank": rerank})
        threshold = check_score_threshold(score_threshold)
        trace = SearchTrace()
        mode = search_mode or self.settings.search_mode
        k = self.settings.k if k is None else k
        reranking = rerank and self.reranker is not None
        wanted = max(k, self.rerank_candidates) if reranking else k
        depth, fetch = candidate_k, wanted
        if return_parents:  # several chunks may share a parent: take every candidate, keep the first of each
            depth = fetch = max(candidate_k or self.settings.candidate_k, 4 * wanted)
        if mode != "keyword":
            prefetch(self.embeddings)  # the model loads while the indexes open
            self.vector_store  # noqa: B018 - open it (and catch it up) outside the read lock
        self._replica.follow(wait=False)
        with self._replica.rw.read():  # both legs reflect one ledger seq
            trace.ledger_seq = self._replica.seq
            hits = self.finder.search(query, mode=mode, k=fetch, filter=filter, candidate_k=depth, trace=trace,
                                      background=LedgerBackground(self._ledger, self.keyword_store))
        found = [(doc, info_of(doc.metadata)["relevance_score"])
                 for doc, _ in self._documents_for(hits, return_parents, wanted, trace.ledger_seq)]
        if reranking and found:
            assert self.reranker is not None
            scores = self.reranker.score(query, [doc for doc, _ in found])
            order = sorted(range(len(found)), key=lambda i: -scores[i])
            reranked = []
            for i in order:
                doc, first = found[i]
                info_of(doc.metadata).update(fused_score=first, fused_rank=i + 1, relevance_score=scores[i])
                reranked.append((doc, scores[i]))
            found = reranked
        if threshold is not None:
            found = [(doc, score) for doc, score in found if score >= threshold]
        trace.total = time.perf_counter() - started
        return SearchResults((SearchResult(doc, score, rank) for rank, (doc, score) in enumerate(found[:k], start=1)),
                             trace)

    def _documents_for(self, hits: Sequence[FusedHit], parents: bool, limit: int,
                       seq: int) -> list[tuple[Document, FusedHit]]:
        """The stored chunks (or their parents, first occurrence only) of fused hits, annotated with leg details.

        Texts are read as of ``seq``, the change the indexes reflected: a document another writer removed
        since is still returned by this search (it was current when the search ran), never a half-state."""
        chunks = {c.id: c for c in self._ledger.get_chunks([h.id for h in hits], visible_at=seq)}
        out: list[tuple[Document, FusedHit]] = []
        seen: set[str] = set()
        for hit in hits:
            chunk = chunks.get(hit.id)
            if chunk is None:  # removed longer ago than the grace period: never return what the ledger lacks
                logger.debug("search: chunk %s is no longer in the ledger; skipped", hit.id)
                continue
            if parents:
                if chunk.parent_id in seen:
                    continue
                seen.add(chunk.parent_id)
                record = self._ledger.get_document(chunk.parent_id)
                if record is None:
                    continue
                doc = _as_document(record)
                info_of(doc.metadata)["matched_chunk_id"] = chunk.id
            else:
                doc = _as_document(chunk)
            _annotate(doc, hit)
            out.append((doc, hit))
            if len(out) == limit:
                break
        return out

    def get_context(
        self,
        query: str | None = None,
        *,
        k: int | None = None,
        search_mode: str | None = None,
        filter: Mapping[str, Any] | None = None,
        return_parents: bool = False,
        max_chars: int | None = None,
        results: Sequence[SearchResult | Document] | None = None,
        start: int = 1,
        citation: Citation = None,
        template: str = DEFAULT_TEMPLATE,
        score_threshold: float | None = None,
    ) -> str:
        """A prompt-ready string: ``[1] (source: …)`` and the passage, for each result of ``query``.

        ``results=`` formats results you already have (``search`` output or retriever Documents) without
        searching again; ``start``, ``citation`` and ``template`` set the layout (see
        :func:`~finderledge.context.format_context`).  When nothing matches it returns
        :data:`~finderledge.context.NO_CONTEXT` (``"[no relevant context found]"``), never an empty string.
        """
        check_positive_int("max_chars", max_chars)
        check_format(start=start, citation=citation, template=template)
        if (query is None) == (results is None):
            raise ConfigurationError("get_context: pass a query or results (results you already have), not both")
        if results is None:
            results = self.search(query, k=k, search_mode=search_mode, filter=filter,  # type: ignore[arg-type]
                                  return_parents=return_parents, score_threshold=score_threshold)
        else:
            options = {"k": k, "search_mode": search_mode, "filter": filter, "return_parents": return_parents or None,
                       "score_threshold": score_threshold}
            for name, value in options.items():
                if value is not None:
                    raise ConfigurationError(f"get_context: {name!r} applies to a search and cannot be combined with "
                                             "results (they are formatted as given)")
        return format_context(results, max_chars=max_chars, start=start, citation=citation, template=template)

    def as_retriever(self, **options: Any) -> FinderLedgeRetriever:
        """A LangChain ``BaseRetriever``: FinderLedge's search options (``k``, ``search_mode``, ``filter`` …) and/or
        LangChain's ``search_type``/``search_kwargs``; ``filter`` is a base filter every call is narrowed by."""
        import pydantic

        try:
            return FinderLedgeRetriever(ledger=self, **options)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors())
            raise ConfigurationError(f"as_retriever: {problems}") from None

    def as_vectorstore(self, *, base_filter: Mapping[str, Any] | None = None) -> FinderLedgeVectorStore:
        """This ledger as a LangChain ``VectorStore`` (for ``ParentDocumentRetriever``, ``SelfQueryRetriever`` …);
        ``base_filter`` is AND-ed with every search's filter."""
        from .langchain_vectorstore import FinderLedgeVectorStore

        return FinderLedgeVectorStore(self, base_filter=dict(base_filter) if base_filter else None)

    def scoped(self, base_filter: Mapping[str, Any]) -> Scope:
        """A read-only view whose searches, contexts and retrievers always apply ``base_filter`` (e.g. a tenant):
        callers' filters narrow it and can never remove it (see :class:`~finderledge.scope.Scope`)."""
        return Scope(self, base_filter)

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
        source = None if source is None else safe_path(source)
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
        """Checkpoint the indexes (when no other process is writing) and close every store; again: no-op."""
        if self._closed:
            return
        self._closed = True
        self._replica.close()
        self.finder.close()
        self._ledger.close()

    def __enter__(self) -> FinderLedge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _KeywordLeg:
    """The keyword leg as the Finder sees it: this process's BM25 replica."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def search(self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None) -> list[tuple[str, float]]:
        return self._replica.keyword_search(query, k, filter)


class _VectorLeg:
    """The vector leg as the Finder sees it: the base index plus the overlay of changes not yet checkpointed."""

    def __init__(self, owner: FinderLedge) -> None:
        owner.vector_store  # noqa: B018 - opens it
        self._replica = owner._replica

    def search(self, embedding: Any, k: int, filter: Mapping[str, Any] | None = None) -> list[tuple[str, float]]:
        return self._replica.vector_search(embedding, k, filter)


def _pin_recorded(settings: Settings, recorded: Mapping[str, Any], args: Mapping[str, Any],
                  directory: Path | None) -> Settings:
    """A reopened directory keeps the vector store and chunking it was built with: environment variables and
    ``.env`` (defaults for new directories) never change them.  Arguments do: the chunking of the documents
    this instance adds, or the vector store (rebuilt from the ledger's vectors and recorded)."""
    pinned = {k: recorded[k] for k in ("vector_store", "chunk_size", "chunk_overlap", "chunk_unit")
              if k in recorded and args.get(k) is None and getattr(settings, k) != recorded[k]}
    if pinned:
        logger.info("%s keeps the settings it was built with %s (the environment's apply to new directories)",
                    directory, pinned)
        settings = dataclasses.replace(settings, **pinned)
    return settings


def _model_mismatch(directory: Path | None, recorded: str, given: str) -> str:
    """The error for a directory built with another embedding model: what it was built with and what to pass."""
    provider, _, name = recorded.partition(":")
    if provider in EmbeddingModelFactory.PROVIDERS and name:
        hint = (f"pass embedding={recorded!r} (or set FINDERLEDGE_EMBEDDING_MODEL) if you trust that model, "
                "or use a new persist_directory")
    else:
        hint = "pass the same Embeddings object it was built with, or use a new persist_directory"
    return (f"setting 'embedding': {directory} was built with embedding model {recorded!r}, but this call uses "
            f"{given!r}; FinderLedge never loads the recorded model by itself: {hint}")


def _as_document(record: DocumentRecord | ChunkRecord) -> Document:
    """A LangChain ``Document`` for a ledger record (a copy, FinderLedge's fields included: callers may
    annotate them)."""
    md = dict(record.metadata)
    md[FL_KEY] = dict(info_of(md))
    return Document(page_content=record.content, metadata=md, id=record.id)


def _annotate(doc: Document, hit: FusedHit) -> None:
    """Put the relevance, the fusion's score and each leg's rank and raw score among the result's own fields."""
    info = info_of(doc.metadata)
    info["relevance_score"] = hit.score if hit.relevance is None else hit.relevance
    info["fusion_score"] = hit.score
    for leg in ("vector", "keyword"):
        if leg in hit.ranks:
            info[f"{leg}_rank"] = hit.ranks[leg]
            info[f"{leg}_score"] = hit.raw_scores[leg]
