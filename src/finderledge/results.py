"""Search results: a LangChain ``Document`` with its relevance, fused score and each leg's rank and raw score."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.documents import Document

from .metadata import info_of, source_of

__all__ = ["SearchResult", "SearchResults", "SearchTrace"]


@dataclass(frozen=True)
class SearchResult:
    """One hit.  ``score`` is its absolute relevance in [0, 1], comparable between queries (with a reranker: its
    score mapped into [0, 1], the raw one in ``rerank_score``; see docs/scores.md).  ``document.metadata`` is the stored metadata plus
    FinderLedge's fields under ``"_finderledge"`` (:attr:`info`): ``id``, ``parent_id``, ``split_index``,
    ``split_count``, ``relevance_score`` (= ``score``), ``fusion_score`` (the value results are ordered by),
    ``vector_rank``, ``vector_score`` (cosine), ``keyword_rank`` and ``keyword_score`` (BM25; a leg's keys are
    absent when that leg did not find it)."""

    document: Document
    score: float
    rank: int

    @property
    def id(self) -> str:
        """The chunk's id (the parent's with ``return_parents=True``)."""
        return str(self.document.id)

    @property
    def parent_id(self) -> str:
        """The id of the document the chunk was split from (its own id for a parent)."""
        info = self.info
        return str(info.get("parent_id") or info.get("id") or self.document.id)

    @property
    def source(self) -> str:
        """Where the text came from: its ``source`` metadata (a file path, or what the caller set), else
        ``text:<parent id>`` for raw text added without one (:func:`finderledge.metadata.source_of`)."""
        return source_of(self.document.metadata, self.parent_id)

    @property
    def info(self) -> dict[str, Any]:
        """FinderLedge's fields of this result (ids, position, scores): ``metadata["_finderledge"]``."""
        return info_of(self.document.metadata)

    @property
    def content(self) -> str:
        return self.document.page_content

    @property
    def metadata(self) -> dict[str, Any]:
        return self.document.metadata

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (used by the command line's ``--json``)."""
        return {
            "id": self.id,
            "rank": self.rank,
            "score": self.score,
            "source": self.source,
            "content": self.content,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def deferred(cls, make: Callable[[], Document], score: float, rank: int) -> SearchResult:
        """A result whose ``document`` is built by ``make`` on first use: a search returns ``k`` results, and
        building each LangChain ``Document`` (a pydantic model, its metadata copied and annotated) cost more
        than the search itself at k=100 (issue 41); a caller reading only some results pays only for those."""
        return _Deferred(make, score, rank)


class _Deferred(SearchResult):
    """A :class:`SearchResult` that builds its ``document`` once, on first use (every thread sees the same one)."""

    _make: Callable[[], Document]

    def __init__(self, make: Callable[[], Document], score: float, rank: int) -> None:
        self.__dict__.update(_make=make, score=score, rank=rank)  # frozen: one update, not three setattrs

    @property  # a property over the dataclass field: built on first read
    def document(self) -> Document:
        doc: Document | None = self.__dict__.get("_document")
        if doc is None:
            # two threads may both build one: setdefault keeps the first stored, and both return that one
            doc = self.__dict__.setdefault("_document", self._make())
        return doc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchResult):
            return NotImplemented
        return (self.document, self.score, self.rank) == (other.document, other.score, other.rank)

    def __repr__(self) -> str:
        return f"SearchResult(document={self.document!r}, score={self.score!r}, rank={self.rank!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (or copied) as the plain result it stands for
        return (SearchResult, (self.document, self.score, self.rank))


@dataclass
class SearchTrace:
    """How one search ran: seconds per stage, the weight each leg had in fusion, and what the indexes reflected.

    Returned with the results (``results.trace``) instead of being kept on shared objects, so concurrent
    searches never see each other's figures.
    """

    mode: str = "hybrid"
    embed: float = 0.0  # seconds embedding the query
    vector: float = 0.0  # seconds in the vector index
    keyword: float = 0.0  # seconds in the BM25 index
    fusion: float = 0.0
    relevance: float = 0.0  # seconds computing the absolute relevance (background sampling included)
    background: float = 0.0  # seconds sampling the corpus background (0 when it was cached)
    total: float = 0.0
    fusion_method: str = ""  # the fusion that ranked the hits (the mode's name in single-leg modes)
    weights: dict[str, float] = field(default_factory=dict)  # leg -> weight used (0: only filled up the list)
    weights_reason: str = ""  # why the legs got these weights
    gates: dict[str, float] = field(default_factory=dict)  # adaptive: each leg's calibrated competence gate
    priors: dict[str, float] = field(
        default_factory=dict
    )  # adaptive: each leg's calibrated prior (how much it is worth)
    evidence: dict[str, float] = field(default_factory=dict)  # adaptive: each leg's top-hit evidence, 0-1
    # adaptive: a calibration after this process's writes was under way; the gates and priors used are the last
    # stored calibration's (or open ones): ``FinderLedge.wait_for_calibration()`` waits for it
    calibration_pending: bool = False
    candidates: dict[str, int] = field(default_factory=dict)  # leg -> candidates it returned
    ledger_seq: int = 0  # the ledger change the indexes reflected when the search ran
    vector_baseline: float | None = None  # the query's mean cosine to the corpus (None: no vector leg)
    keyword_ceiling: float | None = None  # the highest BM25 score a chunk could reach (None: no keyword leg)
    strategy: str | None = None  # the query strategy (multi_query, hyde, decompose), if any
    sub_queries: list[dict[str, Any]] = field(
        default_factory=list
    )  # each search it ran: text, role, mode, found
    strategy_fallback: str | None = None  # why the strategy fell back to the plain search (the LLM's error)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SearchResults(list[SearchResult]):
    """The results of one search (a plain list of :class:`SearchResult`) with its :class:`SearchTrace`."""

    def __init__(self, results: Iterable[SearchResult] = (), trace: SearchTrace | None = None) -> None:
        super().__init__(results)
        self.trace = trace if trace is not None else SearchTrace()
