"""Query strategies: ``search(question, strategy="multi_query" | "hyde" | "decompose", llm=...)``.

Each strategy is a module with one :class:`~finderledge.strategies.base.QueryStrategy`, registered by name in
:data:`STRATEGIES` (the one :class:`~finderledge.registry.Registry`; :func:`register` adds one);
``tests/contract/test_strategy_contract.py`` holds the contract every registered strategy passes.
:func:`run_strategy` plans with the LLM, runs every search concurrently with the caller's filter, merges,
reranks once against the question, and marks each result with the sub-queries that found it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..metadata import info_of
from ..ranking.relevance import check_score_threshold
from ..ranking.reranker import rerank_documents
from ..registry import Registry
from ..results import SearchResult, SearchResults
from ..validation import check_search_options, query_text
from .base import QueryStrategy, SubQuery
from .decompose import Decompose
from .hyde import HyDE
from .multi_query import MultiQuery

if TYPE_CHECKING:
    from ..rag.protocols import SearchableLedger

__all__ = [
    "STRATEGIES",
    "Decompose",
    "HyDE",
    "MultiQuery",
    "QueryStrategy",
    "SubQuery",
    "get_strategy",
    "register",
    "run_strategy",
]

logger = logging.getLogger(__name__)

#: query strategies by the name ``search(strategy=...)`` takes
STRATEGIES: Registry[type[QueryStrategy]] = Registry("query strategy", "strategy", also="or a QueryStrategy")
for _strategy in (MultiQuery, HyDE, Decompose):
    STRATEGIES.register(_strategy.name, _strategy)
ON_ERROR = ("fallback", "raise")


def register(name: str, strategy: type[QueryStrategy]) -> None:
    """Make ``search(strategy=name)`` plan with ``strategy(prompt=..., n=...)``."""
    STRATEGIES.register(name, strategy)


def get_strategy(strategy: str | QueryStrategy, **options: Any) -> QueryStrategy:
    """A strategy by name (with ``prompt=``/``n=``) or the instance given."""
    if isinstance(strategy, QueryStrategy):
        return strategy
    return STRATEGIES.get(strategy)(**options)


def run_strategy(
    fl: SearchableLedger,
    query: str,
    strategy: str | QueryStrategy,
    llm: Any,
    *,
    k: int | None,
    on_error: str = "fallback",
    **search: Any,
) -> SearchResults:
    """``fl.search(query, **search)`` through ``strategy`` (see the module docstring)."""
    chosen = get_strategy(strategy)
    if llm is None:
        raise ConfigurationError(
            f"strategy {chosen.name!r} needs an LLM: pass llm=<a LangChain chat model or LLM>"
        )
    if on_error not in ON_ERROR:
        raise ConfigurationError(f"strategy_on_error: expected one of {list(ON_ERROR)}, got {on_error!r}")
    started = time.perf_counter()
    k = fl.settings.k if k is None else k
    threshold = search.pop("score_threshold", None)
    rerank = search.pop("rerank", True)
    query_text(query)  # validate everything before the LLM is asked
    check_search_options({**search, "k": k, "rerank": rerank})
    check_score_threshold(threshold)
    try:
        subs = chosen.plan(query, llm)
    except Exception as exc:
        if on_error == "raise":
            raise
        logger.warning(
            "strategy %s: the LLM failed (%s: %s); searching the question as it is",
            chosen.name,
            type(exc).__name__,
            exc,
        )
        results = fl.search(query, k=k, score_threshold=threshold, rerank=rerank, **search)
        results.trace.strategy = chosen.name
        results.trace.strategy_fallback = f"{type(exc).__name__}: {exc}"[:300]
        return results
    depth = max(k, fl.settings.rerank_candidates) if (rerank and fl.reranker is not None) else k

    def one(sub: SubQuery) -> SearchResults:
        options = {**search, "search_mode": sub.mode or search.get("search_mode")}
        return fl.search(sub.text, k=depth, rerank=False, **options)

    with ThreadPoolExecutor(max_workers=min(8, len(subs)), thread_name_prefix="finderledge-strategy") as pool:
        runs = list(zip(subs, pool.map(one, subs)))
    merged = chosen.merge(runs, depth)
    if rerank and fl.reranker is not None and merged:
        ranked = rerank_documents(
            fl.reranker, query, [r.document for r, _ in merged]
        )  # scores shown in [0, 1], as search's
        for i, raw, shown in ranked:
            info_of(merged[i][0].document.metadata).update(
                fused_rank=i + 1, rerank_score=raw, relevance_score=shown
            )
        merged = [
            (SearchResult(merged[i][0].document, shown, merged[i][0].rank), merged[i][1])
            for i, _, shown in ranked
        ]
    out: list[SearchResult] = []
    for result, found_by in merged:
        if threshold is not None and result.score < threshold:
            continue
        info_of(result.document.metadata)["found_by"] = found_by
        out.append(SearchResult(result.document, result.score, len(out) + 1))
        if len(out) == k:
            break
    trace = runs[0][1].trace if runs else SearchResults().trace
    trace.strategy = chosen.name
    trace.sub_queries = [
        {
            "text": s.text,
            "role": s.role,
            "mode": s.mode or search.get("search_mode") or fl.settings.search_mode,
            "found": len(r),
        }
        for s, r in runs
    ]
    trace.total = time.perf_counter() - started
    return SearchResults(out, trace)
