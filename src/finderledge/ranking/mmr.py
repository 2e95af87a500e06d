"""Maximal marginal relevance over fused candidates: relevant results that do not repeat each other.

LangChain's ``search_type="mmr"`` trades relevance for diversity with ``lambda_mult`` (1: relevance only,
0: diversity only) among ``fetch_k`` candidates.  Here the relevance term is each candidate's fused
relevance in [0, 1] (so keyword-only hits count too) and redundancy is the cosine between the chunks'
stored vectors (the ledger keeps every chunk's embedding): no query embedding and no index is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigurationError
from ..validation import check_flag, check_positive_int

__all__ = ["DEFAULT_FETCH_K", "DEFAULT_LAMBDA_MULT", "check_mmr_options", "mmr_order"]

DEFAULT_FETCH_K = 20  # LangChain's default
DEFAULT_LAMBDA_MULT = 0.5


def check_mmr_options(mmr: Any, fetch_k: Any, lambda_mult: Any) -> None:
    """Validate ``mmr``/``fetch_k``/``lambda_mult`` (the latter two only apply with ``mmr=True``)."""
    check_flag("mmr", mmr)
    check_positive_int("fetch_k", fetch_k)
    if lambda_mult is not None and (
        isinstance(lambda_mult, bool)
        or not isinstance(lambda_mult, (int, float))
        or not 0.0 <= float(lambda_mult) <= 1.0
    ):
        raise ConfigurationError(f"lambda_mult: expected a number in [0, 1] or None, got {lambda_mult!r}")
    if not mmr and (fetch_k is not None or lambda_mult is not None):
        raise ConfigurationError(
            "fetch_k/lambda_mult apply to MMR only: pass mmr=True (or search_type='mmr') with them"
        )


def mmr_order(
    relevance: Sequence[float], vectors: Sequence[np.ndarray | None], lambda_mult: float, k: int
) -> list[int]:
    """Indices of up to ``k`` candidates in MMR order: each next one maximises
    ``lambda_mult * relevance - (1 - lambda_mult) * (highest cosine to one already chosen)``.
    A candidate without a vector is never counted redundant."""
    n = len(relevance)
    if n == 0 or k < 1:
        return []
    dim = next((len(v) for v in vectors if v is not None), 0)
    unit = np.zeros((n, max(dim, 1)), dtype=np.float32)
    for i, vec in enumerate(vectors):
        if vec is not None and len(vec) == dim:
            norm = float(np.linalg.norm(vec))
            if norm > 0:
                unit[i] = np.asarray(vec, dtype=np.float32) / norm
    rel = np.asarray(relevance, dtype=np.float64)
    redundancy = np.full(n, -np.inf)  # highest similarity to a chosen one (none chosen yet)
    chosen: list[int] = []
    free = np.ones(n, dtype=bool)
    while len(chosen) < min(k, n):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        score = lambda_mult * rel - (1.0 - lambda_mult) * penalty
        score[~free] = -np.inf
        best = int(np.argmax(score))  # ties: the earlier (better fused) candidate
        chosen.append(best)
        free[best] = False
        redundancy = np.maximum(redundancy, unit @ unit[best])
    return chosen
