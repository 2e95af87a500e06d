"""Fusion makes a :class:`FusedHit` only for the hits it returns: with ``limit`` the best ``limit`` hits, the
same objects (ids, scores to the bit, ranks, raw scores, order) as the first ``limit`` of the whole list.

The whole list is checked against a reference written the plain way (every candidate a FusedHit, every
score added hit by hit, all sorted): a hybrid search fuses 2 x 100 candidates to return 10, and making 200
objects to keep 10 was most of its fusion time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from finderledge.ranking.adaptive import evidence_fusion
from finderledge.ranking.fusion import FusedHit, Ranking, collect_hits, fuse, sorted_hits
from finderledge.ranking.relevance import score_hits

# -- the reference: the plain way (every candidate a FusedHit: fusion.collect_hits, sorted_hits) ----------


def _evidence(
    rankings: Mapping[str, Ranking],
    weights: Mapping[str, float],
    baseline: float,
    ceiling: float,
    exhaustive: Sequence[str],
) -> list[FusedHit]:
    hits = collect_hits(rankings)
    for leg, ranking in rankings.items():
        w = weights.get(leg, 1.0)
        if not ranking or w == 0:
            continue
        offset, span = (baseline, 1.0 - baseline) if leg == "vector" else (0.0, ceiling)
        if span <= 0:
            continue
        missing = 0.0 if leg in exhaustive else (float(ranking[-1][1]) - offset) / span
        for hit in hits.values():
            raw = hit.raw_scores.get(leg)
            hit.score += w * (missing if raw is None else (raw - offset) / span)
    return sorted_hits(hits)


def _rrf(rankings: Mapping[str, Ranking], weights: Mapping[str, float], c: int) -> list[FusedHit]:
    hits = collect_hits(rankings)
    for hit in hits.values():
        hit.score = sum(weights.get(leg, 1.0) / (c + r) for leg, r in hit.ranks.items())
    return sorted_hits(hits)


def _normalised(
    rankings: Mapping[str, Ranking],
    weights: Mapping[str, float],
    how: str,
    floors: Mapping[str, float] | None,
) -> list[FusedHit]:
    hits = collect_hits(rankings)
    for leg, ranking in rankings.items():
        if not ranking:
            continue
        if how == "minmax":
            scores = [float(s) for _, s in ranking]
            lo, hi = min(scores), max(scores)
            if floors and leg in floors:
                lo = min(lo, floors[leg])
        else:
            arr = np.fromiter((s for _, s in ranking), dtype=np.float64, count=len(ranking))
            mean, std = float(arr.mean()), float(arr.std())
            lo, hi = mean - 3 * std, mean + 3 * std
        span = hi - lo
        w = weights.get(leg, 1.0)
        seen: set[str] = set()
        for doc_id, _ in ranking:
            if doc_id in seen:
                continue
            seen.add(doc_id)
            raw = hits[doc_id].raw_scores[leg]
            hits[doc_id].score += w * (1.0 if span <= 0 else min(max((raw - lo) / span, 0.0), 1.0))
    return sorted_hits(hits)


# -- the property ---------------------------------------------------------------------------------------

IDS = [f"c{i}" for i in range(30)]
SCORES = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]), st.floats(-1.0, 12.0, allow_nan=False))


def _ranking(ids: list[str], scores: list[float]) -> list[tuple[str, float]]:
    """A leg's list best first (repeated ids and ties included, as a leg may give them)."""
    return sorted(zip(ids, scores), key=lambda pair: -pair[1])


RANKINGS = st.fixed_dictionaries(
    {
        "vector": st.lists(st.sampled_from(IDS), max_size=25).flatmap(
            lambda ids: st.lists(SCORES, min_size=len(ids), max_size=len(ids)).map(lambda s: _ranking(ids, s))
        ),
        "keyword": st.lists(st.sampled_from(IDS), max_size=25).flatmap(
            lambda ids: st.lists(SCORES, min_size=len(ids), max_size=len(ids)).map(lambda s: _ranking(ids, s))
        ),
    }
)
WEIGHTS = st.fixed_dictionaries(
    {"vector": st.sampled_from([0.0, 0.3, 1.0]), "keyword": st.sampled_from([0.0, 0.7, 1.0])}
)


def _same(got: list[FusedHit], want: list[FusedHit]) -> None:
    assert [(h.id, h.ranks, h.raw_scores) for h in got] == [(h.id, h.ranks, h.raw_scores) for h in want]
    for g, w in zip(got, want):  # the same additions in the same order: the same float, to the bit
        assert g.score == w.score or (math.isnan(g.score) and math.isnan(w.score))


def _check(run: Callable[..., list[FusedHit]], want: list[FusedHit], limit: int) -> None:
    _same(run(), want)
    _same(run(limit=limit), want[:limit])


@settings(max_examples=300, deadline=None)
@given(
    rankings=RANKINGS,
    weights=WEIGHTS,
    baseline=st.sampled_from([0.0, 0.2, 1.0]),
    ceiling=st.sampled_from([0.0, 4.0, 11.0]),
    exhaustive=st.sampled_from([(), ("keyword",)]),
    limit=st.integers(1, 40),
)
def test_evidence_fusion_top_hits_are_the_whole_lists_first(
    rankings: dict[str, Ranking],
    weights: dict[str, float],
    baseline: float,
    ceiling: float,
    exhaustive: tuple[str, ...],
    limit: int,
) -> None:
    def run(**kw: Any) -> list[FusedHit]:
        return evidence_fusion(
            rankings, weights, vector_baseline=baseline, keyword_ceiling=ceiling, exhaustive=exhaustive, **kw
        )

    _check(run, _evidence(rankings, weights, baseline, ceiling, exhaustive), limit)


@settings(max_examples=300, deadline=None)
@given(rankings=RANKINGS, weights=WEIGHTS, limit=st.integers(1, 40), floor=st.sampled_from([None, 0.0]))
def test_fixed_fusions_top_hits_are_the_whole_lists_first(
    rankings: dict[str, Ranking], weights: dict[str, float], limit: int, floor: float | None
) -> None:
    floors = None if floor is None else {"keyword": floor}
    _check(lambda **kw: fuse("rrf", rankings, weights, 60, **kw), _rrf(rankings, weights, 60), limit)
    _check(
        lambda **kw: fuse("relative_score", rankings, weights, 60, floors, **kw),
        _normalised(rankings, weights, "minmax", floors),
        limit,
    )
    _check(
        lambda **kw: fuse("dbsf", rankings, weights, 60, **kw),
        _normalised(rankings, weights, "dbsf", None),
        limit,
    )


def test_relevance_of_the_top_hits_does_not_depend_on_the_rest() -> None:
    """Relevance is capped by the hits ranked before each one only: scoring the first ``k`` alone gives them
    the same values as scoring the whole list (so the finder scores only what it returns)."""
    rankings = {
        "vector": [(f"c{i}", 0.9 - 0.01 * i) for i in range(40)],
        "keyword": [(f"c{i}", 9.0 - 0.3 * i) for i in range(0, 60, 2)],
    }
    weights = {"vector": 0.6, "keyword": 0.4}

    def scored(limit: int | None) -> list[float | None]:
        hits = evidence_fusion(rankings, weights, vector_baseline=0.1, keyword_ceiling=10.0, limit=limit)
        score_hits(hits, weights, vector_baseline=0.1, keyword_ceiling=10.0)
        return [h.relevance for h in hits]

    assert scored(10) == scored(None)[:10]
