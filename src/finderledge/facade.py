"""``FinderLedge``: the one-line facade that ingests documents and searches them in hybrid, vector or keyword mode.

Every part lives elsewhere and this class only delegates: :func:`finderledge.engine.open_engine` opens the
parts (ledger, write lock, replica, model, finder, calibrator, reranker), :mod:`finderledge.ingest.write` writes,
:mod:`finderledge.ranking.search` searches, :mod:`finderledge.ledgers.catalog` reads documents back, and
:mod:`finderledge.rag.views` and :mod:`finderledge.rag.asking` make contexts, retrievers, scopes and answers.

One class in one file: it is long because it is the public API's signatures and docstrings (each method checks
its arguments and hands the work to one part), not because it holds logic.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain_core.documents import Document

from .config import Settings
from .engine import LEDGER_FILE, RECORDED_SETTINGS, open_engine, switch_vector_index
from .errors import ConfigurationError
from .filters import compile_filter
from .ingest.write import IngestReport, Writer, documents_with_ids, rechunk, text_documents
from .ledgers.catalog import Catalog
from .rag import asking, views
from .rag.context import NO_CONTEXT
from .rag.protocols import provide_ledger_class
from .ranking.calibration import Calibration
from .ranking.search import Searcher
from .replica.checking import CheckReport, check_database, check_directory, repair_database
from .replica.checking import repair as run_repair
from .results import SearchResults
from .strategies import QueryStrategy, run_strategy
from .validation import check_flag, check_mapping, check_patterns, check_positive_int, document_key
from .vector_stores import adapt_vector_store

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from .engine import Engine
    from .filters import MetadataFilter
    from .ingest.splitter import DocumentSplitter
    from .keyword_store import KeywordStore
    from .ledgers import Ledger
    from .ranking.finder import Finder
    from .ranking.reranker import Reranker
    from .replica.core import Replica
    from .vector_stores import VectorStore


__all__ = ["LEDGER_FILE", "NO_CONTEXT", "RECORDED_SETTINGS", "FinderLedge", "IngestReport", "Source"]

logger = logging.getLogger(__name__)

Source = str | os.PathLike[str] | Document | Sequence[str | os.PathLike[str] | Document]


class FinderLedge:
    """Hybrid retrieval over your documents, with one chunk id across the ledger, the vector and the keyword store.

    >>> ledger = FinderLedge("./index")              # doctest: +SKIP
    >>> ledger.add_document("docs/")                  # doctest: +SKIP
    >>> ledger.search("how do I reset my password?")  # doctest: +SKIP

    Every argument is optional; unset ones come from ``FINDERLEDGE_*`` environment variables, then a
    ``.env`` file, then (for a reopened directory) the settings it was built with, then the defaults.
    """

    def __init__(  # noqa: PLR0913 - public signature: its keyword arguments are the documented API
        self,
        persist_directory: str | os.PathLike[str] | None = None,
        *,
        vector_store: str | Any = None,
        database_url: str | None = None,
        database_schema: str | None = None,
        chroma_url: str | None = None,
        chroma_collection: str | None = None,
        qdrant_url: str | None = None,
        qdrant_collection: str | None = None,
        embedding: str | Embeddings | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        chunk_unit: str | None = None,
        chunk_context: bool | None = None,
        vector_index: str | None = None,
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
        partition_key: str | None = None,
        keyword_index: str | None = None,
        keyword_tokenizer: Any = None,
        reranker: Any = None,
        rerank_candidates: int | None = None,
        reranker_on_error: str | None = None,
        env_file: str | os.PathLike[str] | None = ".env",
    ) -> None:
        given = locals()
        instance = (
            None
            if vector_store is None or isinstance(vector_store, str)
            else adapt_vector_store(vector_store)
        )
        if embedding is not None and not isinstance(embedding, str) and not _is_embeddings(embedding):
            raise ConfigurationError(
                f"setting 'embedding': expected a model name or a LangChain Embeddings, got {type(embedding).__name__}"
            )
        # each setting is a keyword argument of the same name (``embedding`` names the model or is an instance)
        args: dict[str, Any] = {f.name: given.get(f.name) for f in dataclasses.fields(Settings)}
        args["persist_directory"] = None if persist_directory is None else os.fspath(persist_directory)
        args["vector_store"] = vector_store if instance is None else None
        args["embedding_model"] = embedding if isinstance(embedding, str) else None
        self._engine = open_engine(
            args,
            embedding=None if embedding is None or isinstance(embedding, str) else embedding,
            vector_store=instance,
            keyword_tokenizer=keyword_tokenizer,
            reranker=reranker,
            env_file=None if env_file is None else os.fspath(env_file),
        )
        self._writer = Writer(self._engine)
        self._searcher = Searcher(self._engine)
        self._catalog = Catalog(self._engine)

    # -- the parts of the open index ----------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The open index's parts (ledger, write lock, replica, model, finder, calibrator, reranker): for tools
        and tests that inspect them; the methods of this class are the supported way to change anything."""
        return self._engine

    @property
    def ledger(self) -> Ledger:
        """The ledger, the source of truth (documents, chunks, vectors, the change log, info records): for
        tools and tests that read it; the methods of this class are the supported way to change anything."""
        return self._engine.ledger

    @property
    def replica(self) -> Replica:
        """How this process's indexes follow the ledger (each index's checkpoint, the overlay of changes
        applied since): for tools and tests that inspect it."""
        return self._engine.replica

    @property
    def write_lock(self) -> Any:
        """The lock a write holds while it commits (a file lock, or the Postgres ledger's advisory lock), one
        write at a time across processes: for tools and tests that must hold it."""
        return self._engine.write_lock

    @property
    def model_id(self) -> str:
        """The id the ledger records for the embedding model (known by name: reading it loads no model)."""
        return self._engine.model_id

    @property
    def calibration(self) -> Calibration | None:
        """The stored calibration adaptive fusion takes its gates from (None until measured); reading it
        measures nothing (:meth:`calibrate` does)."""
        return self._engine.calibrator.current()

    @property
    def settings(self) -> Settings:
        """The settings in force (arguments, environment, the directory's recorded ones, defaults)."""
        return self._engine.settings

    @property
    def persist_directory(self) -> Path | None:
        """The persist directory (None: in memory, or Postgres mode)."""
        return self._engine.directory

    @property
    def finder(self) -> Finder:
        """The legs and their fusion."""
        return self._engine.finder

    @property
    def reranker(self) -> Reranker | None:
        """The reranker of the fused top ``rerank_candidates`` (None: none); may be replaced."""
        return self._engine.reranker

    @reranker.setter
    def reranker(self, value: Reranker | None) -> None:
        self._engine.reranker = value

    @property
    def rerank_candidates(self) -> int:
        """How many fused candidates the reranker rescores (the setting ``rerank_candidates``)."""
        return self._engine.settings.rerank_candidates

    @rerank_candidates.setter
    def rerank_candidates(self, value: int) -> None:
        """Change the setting for the searches to come; a bad value raises ``ConfigurationError``."""
        engine = self._engine
        engine.settings = dataclasses.replace(engine.settings, rerank_candidates=value)

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model, created on first use (listing or counting loads none)."""
        return self._engine.embeddings

    @embeddings.setter
    def embeddings(self, value: Embeddings) -> None:
        self._engine.embeddings = value

    @property
    def splitter(self) -> DocumentSplitter:
        """The document splitter, created on first use (a search splits nothing)."""
        return self._engine.splitter

    @splitter.setter
    def splitter(self, value: DocumentSplitter) -> None:
        self._engine.splitter = value

    @property
    def vector_store(self) -> VectorStore:
        """The vector backend's base index, opened on first use (FAISS needs the embedding dimension first).

        Changes made since its last checkpoint may still sit in the replica's overlay; searches see both."""
        return self._engine.vector_store

    @property
    def keyword_store(self) -> KeywordStore:
        """The BM25 index of this process (it follows the ledger's change log)."""
        return self._engine.keyword_store

    def refresh(self) -> int:
        """Apply every change other processes committed; returns the ledger ``seq`` now reflected.

        Searches do this themselves; call it to catch up ahead of time."""
        return self._engine.replica.follow()

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
        document_id: str | None = None,
        within: Mapping[str, Any] | None = None,
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
        ``document_id`` (yours, e.g. one per uploaded file) is stored as the metadata key ``document_id`` of
        every parent and chunk of this call, so its pages/rows are filtered, listed and removed together;
        adding under the same ``document_id`` again replaces the parents it no longer has.
        Nothing is stored unless the whole call succeeds; vectors computed before a failure are cached,
        so running the same call again does not embed them twice.
        ``within`` (a scope's base filter: a scoped writer's guard) refuses the call with
        :class:`~finderledge.errors.AccessDeniedError`, nothing written, when a document it would replace,
        remove or store does not match it, whatever id names it (another scope's copy of a file is left alone).
        """
        return self.ingest(
            source,
            metadata,
            include=include,
            exclude=exclude,
            on_error=on_error,
            prune=prune,
            follow_symlinks=follow_symlinks,
            document_id=document_id,
            within=within,
        ).ids

    def add_documents(
        self,
        sources: Iterable[str | os.PathLike[str] | Document],
        metadata: Mapping[str, Any] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Batch form of :meth:`add_document`; ``ids`` (LangChain's argument) gives each Document its id."""
        return self.add_document(documents_with_ids(sources, ids), metadata, **kwargs)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add raw texts (LangChain's name and arguments): one document per text, with its metadata and id.

        Returns one stored id per text, in order; a text without an id gets a content id (adding the same
        text again stores nothing, and both get the id of the one stored).  The same id with other content or metadata replaces that document."""
        # each text as the Document it stands for (a TextItem, read like one: see write_batches.TextItem)
        docs = cast(list[Document], text_documents(texts, metadatas, ids))
        return (
            self.ingest(docs, **kwargs).document_ids if docs else []
        )  # one id per text, as LangChain expects

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
        document_id: str | None = None,
        max_chunks: int | None = None,
        within: Mapping[str, Any] | None = None,
    ) -> IngestReport:
        """Like :meth:`add_document` but returns the full :class:`IngestReport`.

        ``max_chunks`` bounds the chunks this call may make: more raise :class:`TooManyChunksError` while
        splitting, before the batch that crosses it is embedded (with ``document_id`` the call is one write,
        so nothing is written); a server bounds each upload's work with it."""
        check_mapping("metadata", metadata)
        check_patterns("include", include)
        check_patterns("exclude", exclude)
        check_flag("prune", prune)
        check_flag("follow_symlinks", follow_symlinks)
        self._engine.open_vector_index()  # first: a write checkpoints both indexes
        report = self._writer.ingest(
            source,
            metadata,
            include=include,
            exclude=exclude,
            on_error=on_error,
            prune=prune,
            follow_symlinks=follow_symlinks,
            document_id=document_id,
            max_chunks=max_chunks,
            within=compile_filter(within),
        )
        self._engine.recalibrate()
        return report

    @contextmanager
    def bulk_load(self, chunks: int | None = None) -> Iterator[None]:
        """Make the write calls inside the block one bulk load: load a corpus in many calls at the speed of one.

        In Postgres mode a single large call already defers pgvector's HNSW index (and, with
        ``keyword_index="engine"``, the keyword postings' term index) and builds it once at its end; calls of a
        few thousand chunks each would instead insert every row into the index one by one.  Inside this block
        the calls count together: the indexes are dropped at the first commit that ``chunks`` (the chunks you
        expect to write, if you know) or the chunks written so far make large enough, and built once when the
        block ends, also when it ends by an exception.  Meanwhile searches in every process stay correct (exact
        scans).  Each call still commits on its own: what a call returned is stored whatever happens later.
        In local mode the block changes nothing (each call writes its rows and index segments once).

        ::

            with fl.bulk_load(chunks=100_000):
                for batch in batches:
                    fl.add_texts(batch)
        """
        expected = check_positive_int("chunks", chunks)
        with self._writer.bulk_load(expected or 0):
            yield

    def reindex(
        self,
        *,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        chunk_unit: str | None = None,
        chunk_context: bool | None = None,
        vector_index: str | None = None,
    ) -> IngestReport:
        """Split every stored document again with these chunk settings (the current ones where not given) and
        record them for the directory: the explicit way to change chunking, since an argument on reopening
        only applies to documents added then.  Unchanged chunk texts keep their vectors (nothing re-embedded);
        ``chunk_context`` switches the title and heading path embedded with each chunk (refused on opening).
        ``vector_index`` switches the FAISS store's search structure (refused on opening), built from the stored
        vectors; given alone, nothing is split again."""
        if vector_index is not None:
            switch_vector_index(self._engine, vector_index)
            if chunk_size is None and chunk_overlap is None and chunk_unit is None and chunk_context is None:
                return IngestReport()
        return rechunk(self._engine, self._writer, chunk_size, chunk_overlap, chunk_unit, chunk_context)

    # -- removal ------------------------------------------------------------------------------------
    def remove_document(
        self, doc_id: str | os.PathLike[str], *, within: Mapping[str, Any] | None = None
    ) -> list[str]:
        """Remove a parent document (by id), every document of a source path, or every parent of a
        ``document_id``, from every store.

        Returns the removed parent ids.  Raises :class:`~finderledge.errors.DocumentNotFoundError` (a
        ``KeyError``) naming the id when nothing matches; nothing is changed then.  With ``within`` (a scope's
        base filter) only documents it matches are removed, or counted as matching.
        """
        key = document_key(doc_id)
        self._engine.open_vector_index()  # first, as for a write
        removed = self._writer.remove(key, compile_filter(within))
        self._engine.recalibrate()
        return removed

    def delete(self, ids: Sequence[str], *, within: Mapping[str, Any] | None = None) -> list[str]:
        """Remove documents by id (LangChain's ``delete``): unknown ids are ignored, and so are ids of documents
        ``within`` (a scope's base filter) does not match; returns the ids removed."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ConfigurationError(
                f"delete: ids: expected a list of document ids, got {type(ids).__name__}"
            )
        keys = [document_key(i) for i in ids]
        self._engine.open_vector_index()  # first, as for a write
        removed = self._writer.delete(keys, compile_filter(within))
        self._engine.recalibrate()
        return removed

    # -- reading back (finderledge.ledgers.catalog) -------------------------------------------------

    def get_document(self, doc_id: str) -> Document | None:
        """A parent document or a chunk by id (``None`` if unknown)."""
        return self._catalog.get_document(doc_id)

    def get_parent_document(self, child_id: str) -> Document | None:
        """The parent of a chunk (``None`` if the chunk is unknown)."""
        return self._catalog.get_parent_document(child_id)

    def get_split_documents(self, parent_id: str) -> list[Document]:
        """The chunks of a parent, in order."""
        return self._catalog.get_split_documents(parent_id)

    def list_documents(
        self,
        *,
        source: str | None = None,
        filter: MetadataFilter | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Document]:
        """Parent documents in the order they were added: of one ``source``, matching ``filter`` (the search
        filter language, on the parent's metadata), the first ``offset`` skipped, at most ``limit``."""
        return self._catalog.list_documents(source=source, filter=filter, offset=offset, limit=limit)

    def list_document_ids(
        self, *, filter: MetadataFilter | None = None, offset: int = 0, limit: int | None = None
    ) -> list[str]:
        """The application document ids (``document_id=`` of :meth:`add_document`) of the parents matching
        ``filter``, each once, in the order first added; ``offset``/``limit`` page through them."""
        return self._catalog.list_document_ids(filter=filter, offset=offset, limit=limit)

    def list_sources(self) -> list[str]:
        """Every source (file path or given ``source``) that has documents."""
        return self._catalog.list_sources()

    def count(self, filter: MetadataFilter | None = None) -> dict[str, int]:
        """``{"documents": …, "chunks": …}`` — parents and chunks stored (those of parents matching ``filter``)."""
        return self._catalog.count(filter)

    def stats(self) -> dict[str, Any]:
        """Counts per store and the settings in force (for ``finderledge stats``)."""
        return self._catalog.stats()

    def gc(self) -> dict[str, int]:
        """Empty the embedding cache of vectors no stored chunk needs (see :meth:`Catalog.gc
        <finderledge.ledgers.catalog.Catalog.gc>`); returns how many were removed and the size left."""
        return self._catalog.gc()

    def __len__(self) -> int:
        return self._catalog.count()["documents"]

    # -- calibration --------------------------------------------------------------------------------
    def calibrate(self) -> Calibration | None:
        """Measure now how well each search leg finds this corpus's chunks from their own sentences, and store
        the gates adaptive fusion uses (done on its own, in the background, after writes that changed the corpus
        by over 25 %: see :meth:`wait_for_calibration`).

        Returns the calibration (see :mod:`finderledge.ranking.calibration`), or None for a corpus too small to measure.
        """
        self._engine.open_vector_index()
        return self._engine.calibrator.measure_now()

    def wait_for_calibration(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds; None: as long as it takes) for the calibration this process's
        writes started in the background; True when none is due or running any more.

        Searches never wait for it (they use the last calibration, and ``results.trace.calibration_pending``
        says one is under way); a test or a benchmark that needs the calibrated gates calls this first."""
        return self._engine.calibrator.wait(timeout)

    # -- search -------------------------------------------------------------------------------------
    def search(  # noqa: PLR0913 - public signature: its keyword arguments are the documented API
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
        strategy: str | QueryStrategy | None = None,
        llm: Any = None,
        strategy_on_error: str = "fallback",
        mmr: bool = False,
        fetch_k: int | None = None,
        lambda_mult: float | None = None,
    ) -> SearchResults:
        """Best ``k`` chunks for ``query`` (or their parents, de-duplicated, with ``return_parents=True``).

        A result's ``score`` (= ``relevance_score``) is its absolute relevance in [0, 1], comparable between
        queries and falling with rank (docs/scores.md); ``fusion_score`` keeps the fusion's value, which orders
        them.  ``score_threshold`` drops results scoring below it.  With a reranker configured, the fused top
        ``rerank_candidates`` are rescored and the best ``k`` kept (``rerank=False`` skips it for one call); the
        score is then the reranker's mapped into [0, 1] (raw: ``rerank_score``) and ``fused_score``/``fused_rank``
        keep the first stage's.  The returned
        list's ``trace`` says how the search ran (:class:`~finderledge.results.SearchTrace`).

        The indexes first apply every change committed before the call (by any process); the search then
        sees one committed state in both legs.

        ``strategy="multi_query" | "hyde" | "decompose"`` (or a :class:`~finderledge.strategies.QueryStrategy`)
        has ``llm`` (a LangChain chat model or LLM) turn the question into several searches, run concurrently
        with ``filter``, and merges them; each result's ``info["found_by"]`` lists the sub-queries that found
        it.  When the LLM fails the plain search runs with a warning (``strategy_on_error="raise"``: raise).

        ``mmr=True`` (LangChain's ``search_type="mmr"``) returns relevant results that do not repeat each
        other: among the best ``fetch_k`` fused candidates (default 20) each next result maximises
        ``lambda_mult * relevance - (1 - lambda_mult) * similarity to the ones already chosen`` (default 0.5),
        similarity being the cosine of the chunks' stored vectors; the results are in that order.
        """
        if strategy is not None:
            if mmr or fetch_k is not None or lambda_mult is not None:
                raise ConfigurationError("search: mmr cannot be combined with a query strategy")

            return run_strategy(
                self,
                query,
                strategy,
                llm,
                k=k,
                on_error=strategy_on_error,
                search_mode=search_mode,
                filter=filter,
                return_parents=return_parents,
                candidate_k=candidate_k,
                rerank=rerank,
                score_threshold=score_threshold,
            )
        return self._searcher.search(
            query,
            search_mode=search_mode,
            k=k,
            filter=filter,
            return_parents=return_parents,
            candidate_k=candidate_k,
            rerank=rerank,
            score_threshold=score_threshold,
            mmr=mmr,
            fetch_k=fetch_k,
            lambda_mult=lambda_mult,
        )

    # -- contexts, LangChain views, scopes (finderledge.rag.views) and answers (finderledge.rag.asking) -----
    get_context = views.get_context
    as_retriever = views.as_retriever
    as_vectorstore = views.as_vectorstore
    scoped = views.scoped
    answer = asking.answer
    aanswer = asking.aanswer
    stream_answer = asking.stream_answer
    astream_answer = asking.astream_answer
    as_rag_chain = asking.as_rag_chain
    asearch = asking.asearch
    aget_context = asking.aget_context

    # -- lifecycle ----------------------------------------------------------------------------------
    def check(self, repair: bool = False) -> CheckReport:
        """Verify the persist directory against its ledger (pages, rows, each index's ids, checksums and
        vectors) and report in plain words; ``repair=True`` rebuilds the indexes the ledger can rebuild and
        says what it cannot.  ``report.clean`` is True when nothing is damaged.  In Postgres mode: the keyword
        index the database keeps (``keyword_index="engine"``) against the ledger's chunks, rebuilt on repair."""
        if self.settings.database_url is not None:
            found = check_database(self.ledger)
            return repair_database(self.ledger, found) if repair else found
        if self.persist_directory is None:
            raise ConfigurationError("check: needs a persist directory with its SQLite ledger")
        self.refresh()
        replica = self._engine.replica
        replica.maybe_checkpoint()
        report = check_directory(self.persist_directory)
        return run_repair(report, replica.rebuild_index) if repair else report

    def close(self) -> None:
        """Checkpoint the indexes (when no other process is writing) and close every store; again: no-op."""
        self._engine.close()

    def __enter__(self) -> FinderLedge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


provide_ledger_class(
    FinderLedge
)  # what FinderLedgeVectorStore.from_texts opens (it never imports this module)


def _is_embeddings(value: Any) -> bool:
    """Whether ``value`` is a LangChain ``Embeddings`` (none can exist before LangChain's module is loaded,
    so a model given by name never imports it)."""
    module = sys.modules.get("langchain_core.embeddings")
    return module is not None and isinstance(value, module.Embeddings)
