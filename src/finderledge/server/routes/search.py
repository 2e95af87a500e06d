"""``/api/v1/search``: hybrid, vector or keyword search with filters and a score threshold, and its context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter

from ...context import citation
from ...metadata import DOCUMENT_ID, info_of, user_metadata
from ...results import SearchResult
from ..deps import Caller, CallerDep, ServerState, StateDep
from ..models import JSON_ERRORS, SearchHit, SearchRequest, SearchResponse
from ..strategies import canonical_strategy, strategy_search
from .documents import DATA_SOURCE_ID, DATASET_ID, tag_filter

__all__ = ["hit", "router", "run_search"]

router = APIRouter(prefix="/api/v1", tags=["search"], responses=JSON_ERRORS)


_SERVER_ONLY = frozenset(
    {"source", "source_id"}
)  # where the server keeps the file: not the caller's business


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def hit(result: SearchResult) -> dict[str, Any]:
    """One result as the API shows it: ids, where it comes from, its score and each leg's rank and score."""
    md = result.document.metadata
    info = info_of(md)
    doc_id = md.get(DOCUMENT_ID)
    return {
        "rank": result.rank,
        "document_id": doc_id if isinstance(doc_id, str) else None,
        "chunk_id": result.id,
        "parent_id": result.parent_id,
        "filename": md.get("filename") if isinstance(md.get("filename"), str) else None,
        "title": md.get("title") if isinstance(md.get("title"), str) else None,
        "page": _int(md.get("page")),
        "content": result.document.page_content,
        "score": float(result.score),
        **{key: info.get(key) for key in ("vector_rank", "vector_score", "keyword_rank", "keyword_score")},
        "metadata": {k: v for k, v in user_metadata(md).items() if k not in _SERVER_ONLY},
    }


def cite(metadata: Mapping[str, Any]) -> str:
    """A citation naming the uploaded file (never the server's path), its page or row and the chunk."""
    name = metadata.get("filename") or metadata.get("title") or metadata.get("file_name") or "document"
    return citation({**metadata, "source": name})


def context_of(state: ServerState, results: list[SearchResult]) -> str:
    """The results as a cited prompt context (what a model is given, so no server path either)."""
    return state.ledger.get_context(results=results, citation=cite)


def _in(field: str, values: list[str] | None) -> dict[str, Any] | None:
    return {field: {"$in": values}} if values else None


def run_search(state: ServerState, caller: Caller, body: Any) -> list[SearchResult]:
    """A search request's results through its ``strategy``: the caller's base filter AND its tags, document
    ids, dataset ids, data source ids and filter, in every search the strategy runs."""
    flt = caller.narrow(
        tag_filter(body.tags),
        _in(DOCUMENT_ID, body.document_ids),
        _in(DATASET_ID, getattr(body, "dataset_ids", None)),
        _in(DATA_SOURCE_ID, getattr(body, "data_source_ids", None)),
        body.filter,
    )
    k = getattr(body, "top_k", 10)
    query = getattr(body, "query", None) or body.question
    return strategy_search(
        state.ledger,
        query,
        getattr(body, "strategy", None),
        getattr(state.answerer, "model", None),
        k=k,
        filter=flt,
        search_mode=body.search_mode,
        score_threshold=body.score_threshold,
    )


@router.post("/search", response_model=SearchResponse, summary="Search the documents")
def search(state: StateDep, caller: CallerDep, body: SearchRequest) -> dict[str, Any]:
    """The best ``top_k`` chunks, with why each ranked (vector and keyword rank and score) and a cited context."""
    results = run_search(state, caller, body)
    return {
        "query": body.query,
        "strategy": canonical_strategy(body.strategy),
        "results": [SearchHit(**hit(r)) for r in results],
        "context": context_of(state, results),
    }
