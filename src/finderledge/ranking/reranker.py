"""Second-stage reranking: rescore the fused top candidates with a cross-encoder, a LangChain compressor or a callable.

``create_reranker`` accepts

* a sentence-transformers cross-encoder name or local path (``"cross-encoder:<name-or-path>"`` or a
  bare name/path) — loaded with ``sentence_transformers.CrossEncoder``; ``"<kind>:<name>"`` chooses any kind
  in :data:`RERANKERS` (:func:`register` adds one; an unknown kind is a
  :class:`~finderledge.errors.ConfigurationError` naming the kinds there are);
* a LangChain ``BaseDocumentCompressor`` — its output order is the new ranking;
* a callable ``(query, documents) -> scores`` (one float per document, higher is better).

If a model cannot be loaded, the default policy logs a warning and returns ``None`` so searches fall
back to the fused order; ``on_error="raise"`` raises instead.

A reranker's scores order the candidates; the score a result shows is mapped into [0, 1] by
:func:`unit_score`, according to the reranker's ``score_scale``: ``"logit"`` (the logistic function: a
cross-encoder's raw output, and the default for a reranker that does not say) or ``"probability"`` (clipped
to [0, 1]: a cross-encoder whose model applies a sigmoid, a compressor's ``relevance_score``).  The raw score
is kept as ``rerank_score`` among a result's fields (docs/scores.md).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from langchain_core.documents import Document

from ..config import RERANKER_ON_ERROR, check_setting
from ..errors import ConfigurationError
from ..registry import Registry

__all__ = [
    "RERANKERS",
    "SCORE_SCALES",
    "CallableReranker",
    "CompressorReranker",
    "CrossEncoderReranker",
    "Reranker",
    "create_reranker",
    "register",
    "rerank_documents",
    "score_scale_of",
    "unit_score",
]

logger = logging.getLogger(__name__)

ScoreScale = Literal["logit", "probability"]
#: what a reranker's raw scores are: unbounded logits (mapped by the logistic function) or probabilities
SCORE_SCALES: tuple[ScoreScale, ...] = ("logit", "probability")


def unit_score(score: float, scale: str) -> float:
    """``score`` in [0, 1]: the logistic function of a logit, a probability clipped (NaN gives 0).

    Monotonic, so the reranker's order is kept and scores still fall with rank."""
    if math.isnan(score):
        return 0.0
    if scale == "probability":
        return min(1.0, max(0.0, score))
    if score >= 0:  # the two halves keep math.exp from overflowing
        return 1.0 / (1.0 + math.exp(-score))
    e = math.exp(score)
    return e / (1.0 + e)


def score_scale_of(reranker: Any) -> ScoreScale:
    """The ``score_scale`` a reranker declares (``"logit"`` when it declares none), checked."""
    scale = getattr(reranker, "score_scale", "logit")
    return _checked_scale(scale)


def _checked_scale(scale: Any) -> ScoreScale:
    """``scale`` if it is one of :data:`SCORE_SCALES`, else :class:`ConfigurationError`."""
    if scale not in SCORE_SCALES:
        raise ConfigurationError(f"reranker score_scale: expected one of {list(SCORE_SCALES)}, got {scale!r}")
    return scale  # type: ignore[no-any-return]


def rerank_documents(
    reranker: Any, query: str, documents: Sequence[Document]
) -> list[tuple[int, float, float]]:
    """``(index, raw score, score in [0, 1])`` of each document, best first: what every entry point that
    reranks (search, query strategies) shows, so one threshold scale holds everywhere."""
    raw = reranker.score(query, list(documents))
    scale = score_scale_of(reranker)
    return [
        (i, float(raw[i]), unit_score(float(raw[i]), scale))
        for i in sorted(range(len(raw)), key=lambda i: -raw[i])
    ]


@runtime_checkable
class Reranker(Protocol):
    """Scores documents for a query; higher is better.  An optional ``score_scale`` attribute (``"logit"`` or
    ``"probability"``, see :func:`unit_score`) says how the scores map into [0, 1]; without it, ``"logit"``."""

    def score(self, query: str, documents: Sequence[Document]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` scoring (query, passage) pairs."""

    def __init__(
        self, model_name_or_path: str, *, batch_size: int = 32, max_length: int | None = 512, **kwargs: Any
    ) -> None:
        from sentence_transformers import CrossEncoder

        self.model_name_or_path = model_name_or_path
        self.batch_size = batch_size
        self._model = CrossEncoder(
            model_name_or_path, device=kwargs.pop("device", "cpu"), max_length=max_length, **kwargs
        )
        #: a model whose output goes through a sigmoid gives probabilities; otherwise (ms-marco models) logits
        activation = getattr(self._model, "activation_fn", None)
        self.score_scale: ScoreScale = "probability" if type(activation).__name__ == "Sigmoid" else "logit"

    def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        if not documents:
            return []
        pairs = [(query, d.page_content) for d in documents]
        scores = self._model.predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return [float(s) for s in scores]


class CompressorReranker:
    """Wraps a LangChain ``BaseDocumentCompressor``: documents it returns first score highest; dropped ones last.

    The score is the compressor's ``relevance_score`` (e.g. Cohere's, a probability), else the returned
    document's place, from 1 for the first down to 1/n for the last; a dropped document scores 0."""

    score_scale: ScoreScale = "probability"

    def __init__(self, compressor: Any) -> None:
        self.compressor = compressor

    def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        # our own relevance_score is removed so that only a score the compressor sets (e.g. Cohere's) is read back
        tagged = [
            Document(
                page_content=d.page_content,
                metadata={**{k: v for k, v in d.metadata.items() if k != "relevance_score"}, "_fl_pos": i},
            )
            for i, d in enumerate(documents)
        ]
        kept = list(self.compressor.compress_documents(tagged, query))
        scores = [float("-inf")] * len(documents)
        for rank, doc in enumerate(kept):
            pos = doc.metadata.get("_fl_pos")
            if isinstance(pos, int) and 0 <= pos < len(documents):
                scores[pos] = float(doc.metadata.get("relevance_score", (len(kept) - rank) / len(kept)))
        return scores


class CallableReranker:
    """Wraps ``fn(query, documents) -> list[float]``; ``score_scale="probability"`` for a function that returns
    probabilities (the default, ``"logit"``, maps its scores by the logistic function)."""

    def __init__(
        self, fn: Callable[[str, Sequence[Document]], Sequence[float]], *, score_scale: ScoreScale = "logit"
    ) -> None:
        self.fn = fn
        self.score_scale = _checked_scale(score_scale)

    def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        scores = [float(s) for s in self.fn(query, documents)]
        if len(scores) != len(documents):
            raise ValueError(
                f"reranker callable returned {len(scores)} scores for {len(documents)} documents"
            )
        return scores


RerankerSpec = str | Reranker | Callable[[str, Sequence[Document]], Sequence[float]] | Any | None

#: what ``kind(name, **options) -> Reranker`` builds a reranker named ``"<kind>:<name>"`` from
RerankerKind = Callable[..., Reranker]
ON_ERROR = RERANKER_ON_ERROR  # the values of the setting ``reranker_on_error``
DEFAULT_KIND = "cross-encoder"  # a bare name or path

#: reranker kinds by the prefix of ``reranker="<kind>:<name>"``
RERANKERS: Registry[RerankerKind] = Registry(
    "reranker kind",
    "reranker",
    also="(as '<kind>:<name>'), a cross-encoder name or path, a LangChain BaseDocumentCompressor or a callable",
)
RERANKERS.register(DEFAULT_KIND, CrossEncoderReranker)


def register(kind: str, factory: RerankerKind) -> None:
    """Make ``reranker="<kind>:<name>"`` build ``factory(name)`` (a :class:`Reranker`)."""
    RERANKERS.register(kind, factory)


def _kind_and_name(spec: str) -> tuple[str, str]:
    """``"<kind>:<name>"`` split; a bare name or an existing path is a cross-encoder's."""
    kind, sep, name = spec.partition(":")
    if sep and len(kind) > 1 and not os.path.exists(spec) and name:
        return kind, name
    return DEFAULT_KIND, spec


def _from_name(spec: str, on_error: str) -> Reranker | None:
    """The reranker ``spec`` names; one that cannot be loaded is ``None`` with a warning (or raises)."""
    kind, name = _kind_and_name(spec)
    factory = RERANKERS.get(kind)  # an unknown kind is a configuration error, whatever on_error says
    try:
        return factory(name)
    except Exception as exc:
        message = f"setting 'reranker': {kind} {name!r} could not be loaded ({exc})"
        if on_error == "raise":
            raise ValueError(message) from exc
        logger.warning("%s; searches keep the fused order", message)
        return None


def create_reranker(spec: RerankerSpec, *, on_error: str = "warn") -> Reranker | None:
    """Build a reranker from ``spec`` (see module docstring); ``None`` when ``spec`` is ``None`` or failed to load."""
    check_setting("reranker_on_error", on_error)  # the setting's own rule and message
    if spec is None or isinstance(spec, Reranker):
        return spec
    from langchain_core.documents.compressor import BaseDocumentCompressor  # loads LangChain's runnables

    if isinstance(spec, BaseDocumentCompressor):
        return CompressorReranker(spec)
    if isinstance(spec, str):
        return _from_name(spec, on_error)
    if callable(spec):
        return CallableReranker(spec)
    raise ConfigurationError(
        f"setting 'reranker': expected one of {RERANKERS.names()} {RERANKERS.also}, got {type(spec).__name__}"
    )
