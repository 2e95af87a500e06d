"""Adaptive fusion: each leg's influence set from evidence the index has, not from fixed weights.

The fused score of a candidate ``d`` is ``Σ_leg gate_leg · w_leg · e_leg(d)`` where

* ``e_leg(d)`` is the leg's raw score on the absolute scale of :mod:`finderledge.ranking.relevance` instead of a
  per-query min-max: vector ``(cosine - b) / (1 - b)`` against the query's background cosine ``b``, keyword
  BM25 over the query's highest attainable score.  A leg whose best hit is barely above the background
  therefore contributes little, where min-max would stretch its noise to the full [0, 1];
* ``w_leg`` (per query) is the leg's top-hit evidence as a share of both legs' (which leg found something
  clearly better than a random chunk for *this* query);
* ``gate_leg`` (per corpus) is the leg's competence measured at index time on pseudo-queries
  (:mod:`finderledge.ranking.calibration`): a leg that cannot find chunks from their own sentences is switched off;
  it is multiplied by the leg's *prior* (per corpus, :func:`finderledge.ranking.calibration.leg_priors`): how much
  the leg is worth, from its MRR on pseudo-queries whose sentence was taken out of their target chunk.

Explicit weights (``vector_weight`` / ``keyword_weight``) replace ``gate · w``: FinderLedge then does exactly
what they say.  The choices and measurements are in docs/evaluation.md.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from .fusion import FusedHit, Ranking, first_listed, top_hits, zero_scores
from .relevance import keyword_evidence, vector_evidence

__all__ = ["LegWeights", "evidence_fusion", "leg_weights"]


@dataclass
class LegWeights:
    """The weight each leg gets for one query and what it came from (shown in the search trace)."""

    weights: dict[str, float]
    gates: dict[str, float] = field(default_factory=dict)  # corpus competence per leg (1.0: not calibrated)
    priors: dict[str, float] = field(default_factory=dict)  # corpus prior per leg (1.0: not calibrated)
    evidence: dict[str, float] = field(default_factory=dict)  # each leg's top-hit evidence for this query
    reason: str = ""


def leg_weights(
    evidence: Mapping[str, float],
    gates: Mapping[str, float],
    source: str,
    priors: Mapping[str, float] | None = None,
) -> LegWeights:
    """``gate · prior · w`` per leg, ``w`` being the leg's share of the top-hit evidence (equal shares when
    neither leg has any); ``priors`` default to 1; ``source`` says where the gates come from, for the reason."""
    priors = priors or {}
    total = sum(evidence.values())
    shares = {leg: (e / total if total > 0 else 1.0 / len(evidence)) for leg, e in evidence.items()}
    weights = {leg: gates.get(leg, 1.0) * priors.get(leg, 1.0) * shares[leg] for leg in evidence}
    parts = [
        f"{leg} {weights[leg]:.2f} = gate {gates.get(leg, 1.0):.2f} x prior {priors.get(leg, 1.0):.2f} x share "
        f"{shares[leg]:.2f} of top-hit evidence ({evidence[leg]:.2f})"
        for leg in evidence
    ]
    return LegWeights(
        weights,
        dict(gates),
        {leg: priors.get(leg, 1.0) for leg in evidence},
        dict(evidence),
        "; ".join(parts) + f"; gates and priors: {source}",
    )


def top_evidence(
    rankings: Mapping[str, Ranking], vector_baseline: float, keyword_ceiling: float
) -> dict[str, float]:
    """Each leg's evidence for its best hit, in [0, 1] (0 for a leg that found nothing)."""
    out: dict[str, float] = {}
    for leg, ranking in rankings.items():
        top = float(ranking[0][1]) if ranking else None
        if top is None:
            out[leg] = 0.0
        elif leg == "vector":
            out[leg] = vector_evidence(top, vector_baseline)
        else:
            out[leg] = keyword_evidence(top, keyword_ceiling)
    return out


def evidence_fusion(
    rankings: Mapping[str, Ranking],
    weights: Mapping[str, float],
    *,
    vector_baseline: float,
    keyword_ceiling: float,
    exhaustive: Collection[str] = (),
    limit: int | None = None,
) -> list[FusedHit]:
    """Weighted sum of each leg's scores on the absolute evidence scale (not clipped: a leg's order is kept);
    the best ``limit`` hits (all: None).

    A candidate a leg did not return gets that leg's last listed evidence, or 0 for a leg in ``exhaustive``
    (its list holds every match, as a BM25 leg that returned fewer hits than asked)."""
    listed = first_listed(rankings)
    scores = zero_scores(listed)
    for leg, ranking in rankings.items():
        w = weights.get(leg, 1.0)
        if not ranking or w == 0:
            continue
        # e = (raw - offset) / span: vector (cos - b) / (1 - b), keyword bm25 / ceiling; no span: no evidence
        offset, span = (vector_baseline, 1.0 - vector_baseline) if leg == "vector" else (0.0, keyword_ceiling)
        if span <= 0:
            continue
        missing = w * (0.0 if leg in exhaustive else (float(ranking[-1][1]) - offset) / span)
        # each listed id's weighted evidence, then one pass adding it (or the leg's missing one) to every id
        got = {doc_id: w * ((raw - offset) / span) for doc_id, (_, raw) in listed[leg].items()}
        scores = {doc_id: score + got.get(doc_id, missing) for doc_id, score in scores.items()}
    return top_hits(listed, scores, limit)
