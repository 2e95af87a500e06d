"""The design's RetrieverManager: one strategy class per RAG strategy, each building a LangChain retriever
confined to one user's documents (and, when chosen, to some of their datasets or uploaded files).

The design's tenant filter ``{"$and": [{"user_id": …}, {"dataset_id": …}]}`` is the server's own: the caller's
tenant (from their JWT) AND-ed with ``dataset_id``/``data_source_id`` conditions, handed to every search a
strategy runs (:func:`finderledge.server.strategies.strategy_search`), so no strategy can reach past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from finderledge import ConfigurationError
from finderledge.filters import and_filters
from finderledge.server.routes.documents import DATA_SOURCE_ID, DATASET_ID
from finderledge.server.strategies import COMPRESSION_THRESHOLD, strategy_search

from .managers import Settings


class TenantRetriever(BaseRetriever):
    """A LangChain retriever running one FinderLedge strategy inside ``filter`` (the tenant's, never wider)."""

    ledger: Any
    strategy: str
    filter: dict[str, Any]
    llm: Any = None
    k: int = 4
    n: int | None = None
    threshold: float = COMPRESSION_THRESHOLD
    search_mode: str | None = None  # hybrid (default), vector (the design's cosine search) or keyword

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        results = strategy_search(
            self.ledger,
            query,
            self.strategy,
            self.llm,
            k=self.k,
            filter=self.filter,
            n=self.n,
            threshold=self.threshold,
            search_mode=self.search_mode,
        )
        return [r.document for r in results]


class RetrieverStrategy:
    """One RAG strategy: ``get_retriever`` builds its retriever for one user's filter."""

    name: ClassVar[str]
    finderledge_name: ClassVar[str]  # the server's name for it (``strategy`` of /api/v1/search and chat)
    needs_llm: ClassVar[bool] = False

    def get_retriever(
        self, ledger: Any, filter: dict[str, Any], llm: Any, k: int, options: dict[str, Any]
    ) -> BaseRetriever:
        if self.needs_llm and llm is None:
            raise ConfigurationError(
                f"strategy {self.name!r} needs an LLM: set llm in strategies.yaml or LLM="
            )
        return TenantRetriever(
            ledger=ledger,
            strategy=self.finderledge_name,
            filter=filter,
            llm=llm,
            k=int(options.get("n_results", k)),
            n=options.get("n"),
            threshold=float(options.get("similarity_threshold", COMPRESSION_THRESHOLD)),
            search_mode=options.get("search_mode"),
        )


class BasicRetrieverStrategy(RetrieverStrategy):
    """Hybrid search (BM25 + vectors); the design's basic vector search is its vector leg."""

    name = finderledge_name = "basic"


class MultiQueryRetrieverStrategy(RetrieverStrategy):
    name = finderledge_name = "multi_query"
    needs_llm = True


class ContextualCompressionRetrieverStrategy(RetrieverStrategy):
    name = finderledge_name = "contextual_compression"


class ParentDocumentRetrieverStrategy(RetrieverStrategy):
    name = finderledge_name = "parent_document"


class DeepRagRetrieverStrategy(RetrieverStrategy):
    name, finderledge_name = "deep_rag", "decompose"
    needs_llm = True


class HydeRetrieverStrategy(RetrieverStrategy):
    name = finderledge_name = "hyde"
    needs_llm = True


STRATEGY_CLASSES: dict[str, type[RetrieverStrategy]] = {
    cls.name: cls
    for cls in (
        BasicRetrieverStrategy,
        MultiQueryRetrieverStrategy,
        ContextualCompressionRetrieverStrategy,
        ParentDocumentRetrieverStrategy,
        DeepRagRetrieverStrategy,
        HydeRetrieverStrategy,
    )
}


def tenant_filter(
    base: dict[str, Any] | None,
    dataset_ids: Sequence[str] | None = None,
    data_source_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The design's ``final_filter``: the tenant's base filter AND the chosen datasets AND the chosen files."""
    if not base:
        raise ConfigurationError("a retriever needs the caller's tenant filter (the server runs with JWTs)")
    datasets = {DATASET_ID: {"$in": list(dataset_ids)}} if dataset_ids else None
    sources = {DATA_SOURCE_ID: {"$in": list(data_source_ids)}} if data_source_ids else None
    combined = and_filters(base, datasets, sources)
    assert combined is not None
    return combined


class RetrieverManager:
    """Builds the retriever for a strategy named in ``config/strategies.yaml``."""

    def __init__(self, settings: Settings, ledger: Any, llm: Any) -> None:
        self.settings = settings
        self.ledger = ledger
        self.llm = llm

    def names(self) -> list[str]:
        return list(self.settings.strategies)

    def get_retriever(
        self,
        strategy: str,
        base_filter: dict[str, Any] | None,
        dataset_ids: Sequence[str] | None = None,
        data_source_ids: Sequence[str] | None = None,
    ) -> BaseRetriever:
        """The retriever of ``strategy`` for one caller; an unknown strategy names the configured ones."""
        config = self.settings.strategies.get(strategy)
        if config is None or strategy not in STRATEGY_CLASSES:
            raise ConfigurationError(
                f"strategy: expected one of {self.names()} (config/strategies.yaml), got {strategy!r}"
            )
        return STRATEGY_CLASSES[strategy]().get_retriever(
            self.ledger,
            tenant_filter(base_filter, dataset_ids, data_source_ids),
            self.llm,
            self.settings.n_results,
            config.options,
        )
