"""The HTTP API's request and response bodies (``/api/v1``): typed, validated, and documented in OpenAPI."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..config import SearchMode
from .strategies import canonical_strategy

#: every ``strategy`` a search or chat accepts (the OpenAPI schema lists them; anything else is a 422 naming them)
StrategyName = Literal[
    "basic",
    "multi_query",
    "hyde",
    "decompose",
    "parent_document",
    "contextual_compression",
    "deep_rag",
    "compression",
]

__all__ = [
    "JSON_ERRORS",
    "AlsoIn",
    "ChatRequest",
    "ChatResponse",
    "ChatTurn",
    "ChunkOut",
    "DesignFilter",
    "DesignHealthOut",
    "DocumentDetail",
    "DocumentList",
    "DocumentOut",
    "ErrorOut",
    "HealthOut",
    "RootOut",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "SourceOut",
    "VersionOut",
    "design_filter",
]


class _Strict(BaseModel):
    """A request body: unknown fields and wrongly typed values (``"5"`` or ``true`` for a number) are refused
    (a whole float such as ``52.0`` is an integer, as JSON Schema says)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("top_k", "score_threshold", mode="before", check_fields=False)
    @classmethod
    def _numbers_are_numbers(cls, value: Any) -> Any:
        if isinstance(value, (bool, str)):
            raise ValueError(f"expected a number, got {type(value).__name__}")
        return value


class ErrorOut(BaseModel):
    """Every error: a one-line ``detail`` saying what was wrong (never a stack trace)."""

    detail: str | list[dict[str, Any]]


JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the body is not JSON"},
    401: {"model": ErrorOut, "description": "keys are configured and no valid key was given"},
    413: {"model": ErrorOut, "description": "the body is over 1 MiB"},
    422: {"model": ErrorOut, "description": "a field or the filter is invalid"},
}
"""The errors a route taking a JSON body may answer."""


class DocumentOut(BaseModel):
    """One uploaded file: its id groups the pages/rows it was stored as."""

    id: str
    filename: str
    title: str
    mime_type: str
    size: int = Field(description="bytes uploaded")
    file_size: int = Field(description="bytes uploaded (the document-search design's name for size)")
    file_path: str = Field(
        description="where the file is kept, relative to the server's upload area (never a server path)"
    )
    tags: list[str]
    dataset_id: str | None = Field(None, description="the dataset it was uploaded to")
    data_source_id: str | None = Field(None, description="its id in dataset filters (= its document id)")
    status: Literal["indexed", "processing", "failed"] = Field(
        description="indexed; processing (indexed in the background: poll the document); failed (see reason)"
    )
    reason: str | None = Field(None, description="why indexing failed (status failed)")
    parts: int = Field(
        description="parent documents the file was stored as (PDF pages, CSV rows; 1 otherwise)"
    )
    chunk_count: int
    created_at: str
    updated_at: str


class ChunkOut(BaseModel):
    """One chunk of a document, in reading order (``id``, ``document_id``, ``page_number``, ``chunk_metadata``
    and ``created_at`` are the document-search design's names)."""

    id: str = Field(description="the chunk's id (= chunk_id)")
    document_id: str
    chunk_id: str
    chunk_index: int = Field(description="position in the whole document, from 0")
    split_index: int = Field(description="position within its page/row")
    page: int | None = None
    row: int | None = None
    page_number: int | None = Field(None, description="the PDF page, from 1 (= page)")
    content: str
    chunk_metadata: dict[str, Any] | None = Field(
        None, description="the chunk's own metadata beyond the document's (row, line, …); null when none"
    )
    created_at: str


class DocumentDetail(DocumentOut):
    chunks: list[ChunkOut]


class DocumentList(BaseModel):
    items: list[DocumentOut]
    total: int
    page: int
    per_page: int


class DesignFilter(_Strict):
    """The document-search design's ``filter``: documents with any of ``tags`` and among ``document_ids``."""

    tags: list[str] | None = Field(None, max_length=100)
    document_ids: list[str] | None = Field(None, max_length=1000)


def design_filter(value: Any) -> DesignFilter | None:
    """``value`` as the design's nested filter when it has that shape (only ``tags``/``document_ids`` keys,
    each a list: never a valid filter-language filter, whose operands are scalars), else ``None``."""
    if (
        isinstance(value, dict)
        and value
        and set(value) <= {"tags", "document_ids"}
        and all(isinstance(v, list) for v in value.values())
    ):
        return DesignFilter(**value)
    return None


class _Retrieval(_Strict):
    """How to retrieve: ``tags`` (any of them), ``document_ids`` and ``filter`` all apply, AND-ed with the
    caller's tenant.  ``filter`` is the full filter language, or the design's ``{tags, document_ids}``.
    Fields left out (or null) take the index's own setting (``search_mode``, ``k``)."""

    score_threshold: float | None = Field(None, ge=0.0, le=1.0)
    search_mode: SearchMode | None = Field(
        None, description="hybrid, vector or keyword; default: the index's search_mode setting"
    )
    tags: list[str] | None = Field(None, max_length=100)
    document_ids: list[str] | None = Field(None, max_length=1000)
    filter: dict[str, Any] | None = Field(
        None,
        description='the filter language (e.g. {"year": {"$gte": 2020}}), or {"tags": [...], '
        '"document_ids": [...]}',
    )
    dataset_ids: list[str] | None = Field(
        None, max_length=100, description="only documents uploaded to one of these datasets (dataset_id)"
    )
    data_source_ids: list[str] | None = Field(
        None,
        max_length=1000,
        description="only these uploaded files (their data_source_id, which is their document id)",
    )
    strategy: StrategyName | None = Field(
        None,
        description="how to retrieve: basic (default), multi_query, hyde, decompose (the LLM ones need the "
        "server's --llm), parent_document (whole documents of the matched chunks), contextual_compression "
        "(only the sentences of each chunk close to the question); deep_rag = decompose, compression = "
        "contextual_compression",
    )

    @field_validator("filter")
    @classmethod
    def _design_filter_is_valid(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        design_filter(value)  # the design's shape with a wrong field type: 422 here, not a 500 later
        return value

    @field_validator("strategy")
    @classmethod
    def _canonical_strategy(cls, value: str | None) -> str | None:
        """An alias (``deep_rag``, ``compression``) becomes the name it stands for."""
        return None if value is None else canonical_strategy(value)


class SearchRequest(_Retrieval):
    """A search."""

    query: str = Field(min_length=1, max_length=4000)
    top_k: int | None = Field(None, ge=1, le=100, description="results; default: the index's k setting")


class AlsoIn(BaseModel):
    """Another document holding the same passage (identical text: one file added twice, from two sources)."""

    document_id: str | None
    chunk_id: str
    filename: str | None
    title: str | None


class SearchHit(BaseModel):
    """One result, with each leg's rank and raw score (absent when that leg did not find it): why it ranked."""

    rank: int
    document_id: str | None
    chunk_id: str
    parent_id: str | None
    filename: str | None
    title: str | None
    page: int | None
    content: str
    score: float
    vector_rank: int | None = None
    vector_score: float | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None
    metadata: dict[str, Any]
    also_in: list[AlsoIn] = Field(
        default_factory=list, description="other documents with the same passage, shown once (identical text)"
    )


class SearchResponse(BaseModel):
    query: str
    strategy: str = "basic"
    results: list[SearchHit]
    total: int = Field(description="how many results there are")
    context: str = Field(description="the results as a prompt-ready, cited context (get_context)")


class ChatTurn(_Strict):
    role: Literal["user", "assistant"]
    content: str = Field(max_length=4000)


class ChatRequest(_Retrieval):
    """A question, answered from the ``top_k`` passages retrieved for it."""

    question: str = Field(min_length=1, max_length=4000)
    history: list[ChatTurn] = Field(
        default_factory=list,
        max_length=20,
        description="earlier turns, oldest first (the largest valid request fits in 1 MiB)",
    )
    chat_history: list[ChatTurn] | None = Field(
        None,
        max_length=20,
        description="the document-search design's name for history (both given: history, then these)",
    )
    top_k: int | None = Field(
        None, ge=1, le=20, description="passages to answer from; default: the index's k setting (at most 20)"
    )

    @property
    def turns(self) -> list[ChatTurn]:
        """The earlier turns, whichever name they were sent under (both: ``history`` first)."""
        return [*self.history, *(self.chat_history or [])]


class SourceOut(BaseModel):
    """A cited passage: ``n`` is the number the answer cites as ``[n]``."""

    n: int
    document_id: str | None
    chunk_id: str
    filename: str | None
    title: str | None
    page: int | None
    page_number: int | None = Field(None, description="the PDF page, from 1 (= page)")
    score: float
    content: str
    chunk_content: str = Field(description="the passage (= content; the design's name)")
    also_in: list[AlsoIn] = Field(
        default_factory=list, description="other documents with the same passage, cited once (identical text)"
    )


class ChatResponse(BaseModel):
    answer: str
    sources: list[SourceOut]
    question: str = Field(description="the question answered")
    extractive: bool = Field(
        description="true: no language model answered; the answer quotes the best passages"
    )
    model: str | None
    strategy: str = "basic"


class HealthOut(BaseModel):
    status: Literal["ok", "failing"]
    components: dict[str, dict[str, Any]]


class DesignHealthOut(BaseModel):
    """``GET /health`` as the document-search design shapes it: each component ``ok`` or what failed."""

    status: Literal["healthy", "unhealthy"]
    components: dict[str, str]


class RootOut(BaseModel):
    """``GET /`` for an API client (an ``Accept`` without text/html)."""

    message: str
    version: str
    docs: str


class VersionOut(BaseModel):
    finderledge: str
    api: str
