"""The design's evaluation metrics (its ``metrics.py``), as it defines them.

``faithfulness`` here is the design's: the share of the expected keywords found in the answer. The example also
reports its own stricter check beside it (``rag_cli.lexical_faithfulness``: the share of the answer's sentences
the contexts support), which does not need keywords written for each question.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def retrieval_at_k(results: Sequence[Mapping[str, Any]] | None, expected_source: str) -> bool:
    """Whether a result's ``source`` is exactly ``expected_source``."""
    return any(r.get("source") == expected_source for r in results or [])


def faithfulness(answer: str, expected_keywords: Sequence[str] | None) -> float:
    """Share of ``expected_keywords`` contained in ``answer`` (case-insensitive); 1.0 with no keywords."""
    if not expected_keywords:
        return 1.0
    text = (answer or "").lower()
    return sum(k.lower() in text for k in expected_keywords) / len(expected_keywords)


def exact_match(answer: str, expected_keywords: Sequence[str] | None) -> bool:
    """Whether every expected keyword is in ``answer``; True with no keywords."""
    return faithfulness(answer, expected_keywords) == 1.0


def measure_latency(func: Callable[[], T]) -> tuple[T, float]:
    """``func()``'s result and the seconds it took."""
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start
