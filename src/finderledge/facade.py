"""``FinderLedge``: the one-line facade that ingests documents and searches them in hybrid, vector or keyword mode.

Every part lives elsewhere and this class only delegates: :func:`finderledge.engine.open_engine` opens the
parts (ledger, write lock, replica, model, finder, calibrator, reranker), :mod:`finderledge.ingest` writes,
:mod:`finderledge.searching` searches, :mod:`finderledge.catalog` reads documents back, and
:mod:`finderledge.views` and :mod:`finderledge.asking` make contexts, retrievers, scopes and answers.  Its
methods are grouped by capability: the parts as properties (:mod:`finderledge.facade_parts`), the writes
(:mod:`finderledge.facade_writing`) and reading back (:mod:`finderledge.facade_reading`) are inherited.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import asking, views
from .calibration import Calibration
from .catalog import Catalog
from .checking import CheckReport, check_directory
from .checking import repair as run_repair
from .config import Settings
from .context import NO_CONTEXT
from .engine import LEDGER_FILE, RECORDED_SETTINGS, open_engine
from .errors import ConfigurationError
from .facade_parts import EngineParts
from .facade_reading import ReadingBack
from .facade_writing import Source, Writing
from .ingest import IngestReport, Writer
from .results import SearchResults
from .searching import Searcher
from .strategies import QueryStrategy, run_strategy
from .vector_stores import adapt_vector_store

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings


__all__ = ["LEDGER_FILE", "NO_CONTEXT", "RECORDED_SETTINGS", "FinderLedge", "IngestReport", "Source"]

logger = logging.getLogger(__name__)


class FinderLedge(EngineParts, Writing, ReadingBack):
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
        keyword_tokenizer: Any = None,
        reranker: Any = None,
        rerank_candidates: int = 20,
        reranker_on_error: str = "warn",
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
            rerank_candidates=rerank_candidates,
            reranker_on_error=reranker_on_error,
            env_file=None if env_file is None else os.fspath(env_file),
        )
        self._writer = Writer(self._engine)
        self._searcher = Searcher(self._engine)
        self._catalog = Catalog(self._engine)

    # -- calibration --------------------------------------------------------------------------------
    def calibrate(self) -> Calibration | None:
        """Measure now how well each search leg finds this corpus's chunks from their own sentences, and store
        the gates adaptive fusion uses (done on its own, at the next search or close, after writes that changed
        the corpus by over 25 %).

        Returns the calibration (see :mod:`finderledge.calibration`), or None for a corpus too small to measure.
        """
        self.vector_store  # noqa: B018
        return self._engine.calibrator.refresh(force=True)

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

    # -- contexts, LangChain views, scopes (finderledge.views) and answers (finderledge.asking) -----
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
        says what it cannot.  ``report.clean`` is True when nothing is damaged."""
        if self.persist_directory is None or self.settings.database_url is not None:
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


def _is_embeddings(value: Any) -> bool:
    """Whether ``value`` is a LangChain ``Embeddings`` (none can exist before LangChain's module is loaded,
    so a model given by name never imports it)."""
    module = sys.modules.get("langchain_core.embeddings")
    return module is not None and isinstance(value, module.Embeddings)
