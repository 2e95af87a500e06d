"""score_hits (issue 41: inlined, a search scores its k hits on every call) gives every hit the relevance its
documented formula does: each leg's evidence (vector_evidence, keyword_evidence) averaged with the weights of
the legs that counted, capped by the hits before it, times its share of the top fused score."""

from __future__ import annotations

import random

import pytest

from finderledge.ranking.fusion import FusedHit
from finderledge.ranking.relevance import keyword_evidence, score_hits, vector_evidence


def _reference(
    hits: list[FusedHit], weights: dict[str, float], baseline: float, ceiling: float
) -> list[float]:
    counted = {leg: w for leg, w in weights.items() if w > 0}
    total = sum(counted.values())
    top = hits[0].score if hits else 0.0
    cap, out = 1.0, []
    for hit in hits:
        evidence = 0.0
        for leg, w in counted.items():
            raw = hit.raw_scores.get(leg)
            if raw is not None and leg == "vector":
                evidence += w * vector_evidence(raw, baseline)
            elif raw is not None and leg == "keyword":
                evidence += w * keyword_evidence(raw, ceiling)
        cap = min(cap, evidence / total if total > 0 else 0.0)
        out.append(cap * (min(max(hit.score / top, 0.0), 1.0) if top > 0 else 0.0))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_relevance_is_the_formula_float_for_float(seed: int) -> None:
    rng = random.Random(seed)
    legs = rng.choice([["keyword"], ["vector"], ["vector", "keyword"], ["keyword", "vector", "other"]])
    weights = {leg: rng.choice([0.0, 0.3, 1.0, rng.random()]) for leg in legs}
    baseline = rng.choice([0.0, 0.2, rng.random(), 1.0, 1.2, -0.1])
    ceiling = rng.choice([0.0, -1.0, 5.0, rng.uniform(0.1, 30.0)])
    hits = []
    for i in range(rng.randint(0, 30)):
        raws = {leg: rng.uniform(-0.5, 40.0) for leg in legs if rng.random() < 0.8}
        hits.append(FusedHit(f"c{i}", rng.uniform(-0.1, 2.0), {leg: 1 for leg in raws}, raws))
    hits.sort(key=lambda h: -h.score)
    want = _reference(hits, weights, baseline, ceiling)
    score_hits(hits, weights, vector_baseline=baseline, keyword_ceiling=ceiling)
    assert [h.relevance for h in hits] == want


@pytest.mark.parametrize("seed", range(20))
def test_relevance_keeps_the_formulas_nan_and_signed_zero(seed: int) -> None:
    """The clamps are written as comparisons: a NaN or -0.0 score or raw gives what min/max gave (compared by
    repr, where NaN equals NaN and -0.0 differs from 0.0)."""
    rng = random.Random(1000 + seed)
    odd = [float("nan"), -0.0, 0.0, float("inf"), -float("inf")]
    legs = ["vector", "keyword"]
    weights = {leg: rng.choice([0.3, 1.0]) for leg in legs}
    baseline, ceiling = rng.choice([0.0, 0.2, -0.0]), rng.choice([5.0, float("nan"), 0.5])
    hits = []
    for i in range(rng.randint(1, 12)):
        raws = {leg: rng.choice([*odd, rng.uniform(-0.5, 9.0)]) for leg in legs}
        hits.append(
            FusedHit(f"c{i}", rng.choice([*odd, rng.uniform(-0.1, 2.0)]), {leg: 1 for leg in raws}, raws)
        )
    want = _reference(hits, weights, baseline, ceiling)
    score_hits(hits, weights, vector_baseline=baseline, keyword_ceiling=ceiling)
    assert [repr(h.relevance) for h in hits] == [repr(x) for x in want]
