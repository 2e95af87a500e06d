"""``/api/v1/search``: hybrid, vector or keyword search with filters and a score threshold, and its context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter

from ...metadata import DOCUMENT_ID, info_of, user_metadata
from ...rag.context import citation
from ...results import SearchResult
from ..deps import Caller, CallerDep, ServerState, StateDep
from ..listing import display_names, document_key, same_passages
from ..models import JSON_ERRORS, SearchHit, SearchRequest, SearchResponse, design_filter
from ..strategies import canonical_strategy, strategy_search
from .documents import DATA_SOURCE_ID, DATASET_ID, tag_filter

__all__ = ["distinct_search", "hit", "request_filter", "request_k", "router", "run_search"]

router = APIRouter(prefix="/api/v1", tags=["search"], responses=JSON_ERRORS)


_SERVER_ONLY = frozenset(
    {"source", "source_id"}
)  # where the server keeps the file: not the caller's business


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _names(result: SearchResult) -> dict[str, Any]:
    """Which document a result is of: its id (an upload's, or the one the server gives a document the CLI or
    the library added; see :mod:`..listing`), its file's name and its title (else the file's name)."""
    filename, title = display_names(result.document.metadata, result.content)  # raw text: its first line
    return {
        "document_id": document_key(result.document.metadata, result.parent_id),
        "chunk_id": result.id,
        "filename": filename or None,
        "title": title or None,
    }


def hit(result: SearchResult, copies: Sequence[SearchResult] = (), rank: int | None = None) -> dict[str, Any]:
    """One result as the API shows it: ids, where it comes from, its score and each leg's rank and score;
    ``copies`` are the other results with the same text (shown once: ``also_in``)."""
    md = result.document.metadata
    info = info_of(md)
    metadata = {k: v for k, v in user_metadata(md).items() if k not in _SERVER_ONLY}
    metadata["page_number"] = _int(md.get("page"))  # the design's name; null outside PDFs
    return {
        "rank": result.rank if rank is None else rank,
        **_names(result),
        "parent_id": result.parent_id,
        "page": _int(md.get("page")),
        "content": result.document.page_content,
        "score": float(result.score),
        **{key: info.get(key) for key in ("vector_rank", "vector_score", "keyword_rank", "keyword_score")},
        "metadata": metadata,
        "also_in": [_names(c) for c in copies],
    }


def cite(metadata: Mapping[str, Any]) -> str:
    """A citation naming the uploaded or added file (never the server's path), its page or row and the chunk."""
    filename, title = display_names(metadata)
    return citation({**metadata, "source": filename or title or "document"})


def context_of(state: ServerState, results: list[SearchResult]) -> str:
    """The results as a cited prompt context (what a model is given, so no server path either)."""
    return state.ledger.get_context(results=results, citation=cite)


def _ids_filter(ids: list[str] | None, field: str = DOCUMENT_ID) -> dict[str, Any] | None:
    return {field: {"$in": ids}} if ids else None


def request_filter(caller: Caller, body: Any) -> dict[str, Any] | None:
    """The caller's base filter AND the request's tags, document ids, dataset ids, data source ids and filter
    (the filter language, or the design's ``{tags, document_ids}``: each list narrows, as the top-level
    fields do)."""
    nested = design_filter(body.filter)
    if nested is not None:
        extra = [tag_filter(nested.tags), _ids_filter(nested.document_ids)]
    else:
        extra = [body.filter]
    return caller.narrow(
        tag_filter(body.tags),
        _ids_filter(body.document_ids),
        _ids_filter(getattr(body, "dataset_ids", None), DATASET_ID),
        _ids_filter(getattr(body, "data_source_ids", None), DATA_SOURCE_ID),
        *extra,
    )


def request_k(state: ServerState, body: Any, most: int) -> int:
    """``top_k`` as sent, else the index's own ``k`` setting (at most ``most``, the field's own bound)."""
    top_k = getattr(body, "top_k", None)
    return int(top_k) if top_k is not None else min(int(state.ledger.settings.k), most)


def run_search(state: ServerState, caller: Caller, body: Any, most: int = 100) -> list[SearchResult]:
    """A search request's results through its ``strategy``: the caller's base filter AND its tags, document
    ids, dataset ids, data source ids and filter, in every search the strategy runs; fields the request leaves
    out take the index's settings (``k``, ``search_mode``)."""
    query = getattr(body, "query", None) or body.question
    return strategy_search(
        state.ledger,
        query,
        getattr(body, "strategy", None),
        getattr(state.answerer, "model", None),
        k=request_k(state, body, most),
        filter=request_filter(caller, body),
        search_mode=body.search_mode,
        score_threshold=body.score_threshold,
    )


def distinct_search(
    state: ServerState, caller: Caller, body: Any, most: int = 100
) -> tuple[list[SearchResult], dict[str, list[SearchResult]]]:
    """:func:`run_search` with each passage once: identical texts from two documents (a file the CLI added,
    then uploaded) are the best-ranked copy, the others by its chunk id; when copies were dropped the search
    asks for that many more results, so the answer still has ``top_k`` distinct passages where there are."""
    k = request_k(state, body, most)
    results = run_search(state, caller, body, most)
    kept, copies = same_passages(results)
    if len(results) >= k and len(kept) < k:
        wider = body.model_copy(update={"top_k": min(k + len(results) - len(kept), 2 * k, most)})
        kept, copies = same_passages(run_search(state, caller, wider, most))
    return kept[:k], copies


@router.post("/search", response_model=SearchResponse, summary="Search the documents")
def search(state: StateDep, caller: CallerDep, body: SearchRequest) -> dict[str, Any]:
    """The best ``top_k`` chunks, with why each ranked (vector and keyword rank and score) and a cited context;
    a passage found in several documents is one result (``also_in`` names the others)."""
    results, copies = distinct_search(state, caller, body)
    return {
        "query": body.query,
        "strategy": canonical_strategy(body.strategy),
        "results": [SearchHit(**hit(r, copies.get(r.id, ()), n)) for n, r in enumerate(results, start=1)],
        "total": len(results),
        "context": context_of(state, results),
    }
