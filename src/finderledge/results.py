"""Search results: a LangChain ``Document`` with its fused score and each leg's rank and raw score."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document

__all__ = ["SearchResult"]


@dataclass(frozen=True)
class SearchResult:
    """One hit.  ``document.metadata`` also carries ``relevance_score``, ``vector_rank``, ``vector_score``,
    ``keyword_rank`` and ``keyword_score`` (a leg's keys are absent when that leg did not find it)."""

    document: Document
    score: float
    rank: int

    @property
    def id(self) -> str:
        return str(self.document.metadata["id"])

    @property
    def content(self) -> str:
        return self.document.page_content

    @property
    def metadata(self) -> dict[str, Any]:
        return self.document.metadata

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (used by the command line's ``--json``)."""
        return {"id": self.id, "rank": self.rank, "score": self.score, "content": self.content,
                "metadata": dict(self.metadata)}
