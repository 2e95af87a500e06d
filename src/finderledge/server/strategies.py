"""Per-request retrieval strategies of ``/api/v1/search`` and ``/api/v1/chat`` (``"strategy": …``).

The names are MochiRAG's (``basic``, ``multi_query``, ``hyde``, ``decompose``, ``parent_document``,
``contextual_compression``; ``deep_rag`` and ``compression`` are accepted as other names of two of them).
Every strategy runs inside the caller's filter: the LLM strategies pass it to each of their searches
(:func:`finderledge.strategies.run_strategy`), ``parent_document`` filters the chunks before their parents are
read, and ``contextual_compression`` only ever cuts sentences out of chunks the filtered search returned.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from ..errors import ConfigurationError
from ..results import SearchResult
from ..strategies import get_strategy

__all__ = [
    "ALIASES",
    "COMPRESSION_THRESHOLD",
    "LLM_STRATEGIES",
    "STRATEGY_NAMES",
    "canonical_strategy",
    "compress",
    "strategy_search",
]

STRATEGY_NAMES = (
    "basic",
    "multi_query",
    "hyde",
    "decompose",
    "parent_document",
    "contextual_compression",
)
ALIASES = {"deep_rag": "decompose", "compression": "contextual_compression"}
LLM_STRATEGIES = frozenset({"multi_query", "hyde", "decompose"})
#: cosine (the index's own embedding model) a sentence needs to survive contextual compression
COMPRESSION_THRESHOLD = 0.3
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")


def canonical_strategy(name: str | None) -> str:
    """The strategy ``name`` stands for (``None``: ``basic``); an unknown name is a ValueError naming the choices."""
    if name is None:
        return "basic"
    name = ALIASES.get(name, name)
    if name not in STRATEGY_NAMES:
        raise ValueError(
            f"unknown strategy {name!r}; expected one of {', '.join(STRATEGY_NAMES)} "
            f"(or {', '.join(f'{a} = {b}' for a, b in ALIASES.items())})"
        )
    return name


def _sentences(text: str) -> list[str]:
    """The text's sentences and lines; Markdown headings are left out when there is anything else (a bare
    heading resembles every question about its section and would crowd out the sentence that answers it)."""
    parts = [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
    prose = [s for s in parts if not s.startswith("#")]
    return prose or parts


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def compress(
    embeddings: Any, query: str, results: Sequence[SearchResult], threshold: float = COMPRESSION_THRESHOLD
) -> list[SearchResult]:
    """Each result cut down to its sentences whose cosine with ``query`` reaches ``threshold`` (its best sentence
    when none does), in their order; the text is always the result's own, never written by a model."""
    pieces = [_sentences(r.content) or [r.content] for r in results]
    flat = [s for sentences in pieces for s in sentences]
    if not flat:
        return list(results)
    query_vector = embeddings.embed_query(query)
    vectors = iter(embeddings.embed_documents(flat))
    out: list[SearchResult] = []
    for result, sentences in zip(results, pieces):
        scores = [_cosine(query_vector, next(vectors)) for _ in sentences]
        keep = [s for s, c in zip(sentences, scores) if c >= threshold] or [
            sentences[max(range(len(scores)), key=scores.__getitem__)]
        ]
        metadata = dict(result.document.metadata)
        document = Document(page_content=" ".join(keep), metadata=metadata, id=result.document.id)
        out.append(SearchResult(document, result.score, result.rank))
    return out


def strategy_search(
    ledger: Any,
    query: str,
    strategy: str | None,
    llm: Any,
    *,
    k: int,
    filter: dict[str, Any] | None,
    search_mode: str | None = None,
    score_threshold: float | None = None,
    n: int | None = None,
    threshold: float = COMPRESSION_THRESHOLD,
) -> list[SearchResult]:
    """``ledger.search`` through ``strategy`` with ``filter`` in every search it runs (``n``: the searches an
    LLM strategy asks for, its default when ``None``; ``threshold``: contextual compression's cosine).

    An LLM strategy without a language model is a :class:`ConfigurationError` (answered 422)."""
    name = canonical_strategy(strategy)
    options: dict[str, Any] = {
        "k": k,
        "search_mode": search_mode,
        "filter": filter,
        "score_threshold": score_threshold,
    }
    if name in LLM_STRATEGIES:
        if llm is None:
            raise ConfigurationError(
                f"strategy {name!r} needs a language model: start the server with --llm "
                f"(openai:<model>, ollama:<model>, llamacpp:<path>); without one use "
                f"basic, parent_document or contextual_compression"
            )
        chosen = get_strategy(name) if n is None else get_strategy(name, n=n)
        return list(ledger.search(query, strategy=chosen, llm=llm, **options))
    if name == "parent_document":
        return list(ledger.search(query, return_parents=True, **options))
    results = list(ledger.search(query, **options))
    if name == "contextual_compression":
        return compress(ledger.embeddings, query, results, threshold)
    return results
