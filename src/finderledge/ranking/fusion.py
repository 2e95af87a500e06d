"""Fusion of ranked lists from several search legs into one ranking.

Each leg gives ``[(id, raw_score), ...]`` best first.  Three fixed methods here (the default,
``adaptive``, which sets each leg's weight from evidence, is :mod:`finderledge.ranking.adaptive`):

* ``rrf`` — Reciprocal Rank Fusion (Cormack et al. 2009): ``sum_leg w_leg / (rank_constant + rank)``;
  uses ranks only, so it needs no score calibration.
* ``relative_score`` — min-max normalise each leg's scores to [0, 1], then weighted sum (Weaviate's
  relativeScoreFusion).
* ``dbsf`` — distribution-based score fusion: normalise each leg with mean ± 3 standard deviations,
  then weighted sum (Qdrant/Weaviate's DBSF).

Script detection (which scripts a query is written in, which an embedding model reads) lives in
:mod:`finderledge.scripts`; its names are re-exported here for code that imported them from this module.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ..errors import ConfigurationError
from ..scripts import ANY_SCRIPT, KNOWN_SCRIPTS, model_scripts, script_of, vector_leg_share

__all__ = [
    "ANY_SCRIPT",
    "FIXED_FUSIONS",
    "KNOWN_SCRIPTS",
    "FusedHit",
    "Listed",
    "Ranking",
    "collect_hits",
    "distribution_based_score_fusion",
    "first_listed",
    "fuse",
    "model_scripts",
    "reciprocal_rank_fusion",
    "relative_score_fusion",
    "script_of",
    "sorted_hits",
    "top_hits",
    "vector_leg_share",
    "zero_scores",
]

Ranking = Sequence[tuple[str, float]]


@dataclass
class FusedHit:
    """One id after fusion, with where each leg ranked it (1-based) and the leg's raw score.

    ``score`` orders the hits (the fusion's value); ``relevance`` is the absolute score in [0, 1] that
    :func:`finderledge.ranking.relevance.score_hits` sets (``None`` until then)."""

    id: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    raw_scores: dict[str, float] = field(default_factory=dict)
    relevance: float | None = None


def collect_hits(rankings: Mapping[str, Ranking]) -> dict[str, FusedHit]:
    """One :class:`FusedHit` per id (score 0) with each leg's rank and raw score; a repeated id counts once."""
    hits: dict[str, FusedHit] = {}
    for leg, ranking in rankings.items():
        for rank, (doc_id, raw) in enumerate(ranking, start=1):
            hit = hits.get(doc_id)
            if hit is None:
                hits[doc_id] = FusedHit(doc_id, 0.0, {leg: rank}, {leg: float(raw)})
            elif leg not in hit.ranks:  # first occurrence wins if a leg repeats an id
                hit.ranks[leg] = rank
                hit.raw_scores[leg] = float(raw)
    return hits


def sorted_hits(hits: dict[str, FusedHit]) -> list[FusedHit]:
    """The hits best first; ties go to the better best rank, then the id, so results are deterministic."""
    return sorted(hits.values(), key=lambda h: (-h.score, min(h.ranks.values()), h.id))


#: leg -> id -> (1-based rank, raw score) of the id's first listing in that leg
Listed = dict[str, dict[str, tuple[int, float]]]


def first_listed(rankings: Mapping[str, Ranking]) -> Listed:
    """Each leg's ids at their first (best) position, with that rank and raw score; a repeated id counts once."""
    out: Listed = {}
    for leg, ranking in rankings.items():
        # one comprehension (the usual case: no id repeated), else the loop that keeps each id's first listing
        listed = {doc_id: (rank, float(raw)) for rank, (doc_id, raw) in enumerate(ranking, start=1)}
        if len(listed) != len(ranking):
            listed = {}
            for rank, (doc_id, raw) in enumerate(ranking, start=1):
                if doc_id not in listed:
                    listed[doc_id] = (rank, float(raw))
        out[leg] = listed
    return out


def zero_scores(listed: Listed) -> dict[str, float]:
    """Every id any leg listed, with score 0 (the legs' order, then each leg's)."""
    return dict.fromkeys(chain.from_iterable(listed.values()), 0.0)


def top_hits(listed: Listed, scores: Mapping[str, float], limit: int | None = None) -> list[FusedHit]:
    """The best ``limit`` ids (all: None) as :class:`FusedHit` s, in :func:`sorted_hits` order (ties go to the
    better best rank, then the id): only the hits returned are made, not one per candidate."""
    best: dict[str, int] = {}
    for by_id in listed.values():
        if not best:
            best = {doc_id: rank for doc_id, (rank, _) in by_id.items()}
            continue
        for doc_id, (rank, _) in by_id.items():
            if rank < best.get(doc_id, rank + 1):
                best[doc_id] = rank
    keys = [(-score, best[doc_id], doc_id) for doc_id, score in scores.items()]  # each id once: no ties
    if limit is None or limit >= len(keys):
        keys.sort()
    elif 8 * limit >= len(keys):  # nsmallest is sorted()[:n], and slower when n is this large
        keys.sort()
        del keys[limit:]
    else:
        keys = heapq.nsmallest(limit, keys)
    legs = list(listed.items())
    hits = []
    for _, _, doc_id in keys:
        ranks, raws = {}, {}
        for leg, by_id in legs:
            got = by_id.get(doc_id)
            if got is not None:
                ranks[leg], raws[leg] = got
        hits.append(FusedHit(doc_id, scores[doc_id], ranks, raws))
    return hits


def reciprocal_rank_fusion(
    rankings: Mapping[str, Ranking],
    weights: Mapping[str, float] | None = None,
    rank_constant: int = 60,
    limit: int | None = None,
) -> list[FusedHit]:
    """Reciprocal Rank Fusion with per-leg weights (default 1) and rank constant (default 60); the best
    ``limit`` hits (all: None)."""
    if rank_constant < 0:
        raise ValueError(f"rrf rank constant: expected >= 0, got {rank_constant}")
    listed = first_listed(rankings)
    scores = {
        doc_id: sum(
            (weights or {}).get(leg, 1.0) / (rank_constant + by_id[doc_id][0])
            for leg, by_id in listed.items()
            if doc_id in by_id
        )
        for doc_id in zero_scores(listed)
    }
    return top_hits(listed, scores, limit)


def _normalised_sum(
    rankings: Mapping[str, Ranking],
    weights: Mapping[str, float] | None,
    how: str,
    floors: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    listed = first_listed(rankings)
    scores = zero_scores(listed)
    for leg, ranking in rankings.items():
        if not ranking:
            continue
        if how == "minmax":
            values = [float(s) for _, s in ranking]
            lo, hi = min(values), max(values)
            if floors and leg in floors:  # the list holds every match: its true minimum is the floor
                lo = min(lo, floors[leg])
        else:  # dbsf
            arr = np.fromiter((s for _, s in ranking), dtype=np.float64, count=len(ranking))
            mean, std = float(arr.mean()), float(arr.std())
            lo, hi = mean - 3 * std, mean + 3 * std
        span = hi - lo
        w = (weights or {}).get(leg, 1.0)
        for doc_id, (_, raw) in listed[leg].items():  # a repeated id counts once, at its first position
            scores[doc_id] += w * (1.0 if span <= 0 else min(max((raw - lo) / span, 0.0), 1.0))
    return top_hits(listed, scores, limit)


def relative_score_fusion(
    rankings: Mapping[str, Ranking],
    weights: Mapping[str, float] | None = None,
    floors: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Min-max normalised scores, weighted and summed; the best ``limit`` hits (all: None).

    ``floors`` gives, for a leg whose list is exhaustive (a BM25 leg that returned fewer hits than asked:
    every other document scores 0), the score the minimum should be taken as — so its last real match
    does not normalise to 0 as if it had not matched.
    """
    return _normalised_sum(rankings, weights, "minmax", floors, limit)


def distribution_based_score_fusion(
    rankings: Mapping[str, Ranking], weights: Mapping[str, float] | None = None, limit: int | None = None
) -> list[FusedHit]:
    """Scores normalised by mean ± 3σ of each leg, weighted and summed; the best ``limit`` hits (all: None)."""
    return _normalised_sum(rankings, weights, "dbsf", limit=limit)


#: the fixed fusions by name (``adaptive`` is :func:`finderledge.ranking.adaptive.evidence_fusion`): one table, so the
#: names ``fuse`` accepts and the methods it runs cannot drift apart
FIXED_FUSIONS: dict[str, Callable[..., list[FusedHit]]] = {
    "rrf": lambda rankings, weights, rank_constant, floors, limit: reciprocal_rank_fusion(
        rankings, weights, rank_constant, limit
    ),
    "relative_score": lambda rankings, weights, rank_constant, floors, limit: relative_score_fusion(
        rankings, weights, floors, limit
    ),
    "dbsf": lambda rankings, weights, rank_constant, floors, limit: distribution_based_score_fusion(
        rankings, weights, limit
    ),
}


def fuse(
    method: str,
    rankings: Mapping[str, Ranking],
    weights: Mapping[str, float] | None = None,
    rank_constant: int = 60,
    floors: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Fuse with the named method: ``rrf``, ``relative_score`` or ``dbsf`` (``floors``: relative_score only);
    the best ``limit`` hits (all: None)."""
    method_of = FIXED_FUSIONS.get(method)
    if method_of is None:
        raise ConfigurationError(f"setting 'fusion': expected one of {list(FIXED_FUSIONS)}, got {method!r}")
    return method_of(rankings, weights, rank_constant, floors, limit)
