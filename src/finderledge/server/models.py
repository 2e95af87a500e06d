"""The HTTP API's request and response bodies (``/api/v1``): typed, validated, and documented in OpenAPI."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
    "ChatRequest",
    "ChatResponse",
    "ChatTurn",
    "ChunkOut",
    "DocumentDetail",
    "DocumentList",
    "DocumentOut",
    "ErrorOut",
    "HealthOut",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "SourceOut",
    "VersionOut",
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
    """One chunk of a document, in reading order."""

    chunk_id: str
    chunk_index: int = Field(description="position in the whole document, from 0")
    split_index: int = Field(description="position within its page/row")
    page: int | None = None
    row: int | None = None
    content: str


class DocumentDetail(DocumentOut):
    chunks: list[ChunkOut]


class DocumentList(BaseModel):
    items: list[DocumentOut]
    total: int
    page: int
    per_page: int


class _Retrieval(_Strict):
    """How to retrieve: ``tags`` (any of them), ``document_ids`` and ``filter`` (the full filter language) all
    apply, AND-ed with the caller's tenant."""

    score_threshold: float | None = Field(None, ge=0.0, le=1.0)
    search_mode: Literal["hybrid", "vector", "keyword"] = "hybrid"
    tags: list[str] | None = Field(None, max_length=100)
    document_ids: list[str] | None = Field(None, max_length=1000)
    filter: dict[str, Any] | None = None
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

    @field_validator("strategy")
    @classmethod
    def _canonical_strategy(cls, value: str | None) -> str | None:
        """An alias (``deep_rag``, ``compression``) becomes the name it stands for."""
        return None if value is None else canonical_strategy(value)


class SearchRequest(_Retrieval):
    """A search."""

    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(10, ge=1, le=100)


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


class SearchResponse(BaseModel):
    query: str
    strategy: str = "basic"
    results: list[SearchHit]
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
    top_k: int = Field(5, ge=1, le=20)


class SourceOut(BaseModel):
    """A cited passage: ``n`` is the number the answer cites as ``[n]``."""

    n: int
    document_id: str | None
    chunk_id: str
    filename: str | None
    title: str | None
    page: int | None
    score: float
    content: str


class ChatResponse(BaseModel):
    answer: str
    sources: list[SourceOut]
    extractive: bool = Field(
        description="true: no language model answered; the answer quotes the best passages"
    )
    model: str | None
    strategy: str = "basic"


class HealthOut(BaseModel):
    status: Literal["ok", "failing"]
    components: dict[str, dict[str, Any]]


class VersionOut(BaseModel):
    finderledge: str
    api: str
