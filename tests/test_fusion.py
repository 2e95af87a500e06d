from __future__ import annotations

import pytest

from finderledge.fusion import fuse, reciprocal_rank_fusion


def test_rrf_scores_and_leg_details() -> None:
    hits = reciprocal_rank_fusion({"vector": [("a", 0.9), ("b", 0.8)], "keyword": [("b", 12.0), ("c", 3.0)]})
    assert [h.id for h in hits] == ["b", "a", "c"]
    b = hits[0]
    assert b.score == pytest.approx(1 / 62 + 1 / 61)
    assert b.ranks == {"vector": 2, "keyword": 1}
    assert b.raw_scores == {"vector": 0.8, "keyword": 12.0}
    assert hits[1].ranks == {"vector": 1}


def test_rrf_weights_and_rank_constant() -> None:
    rankings = {"vector": [("a", 1.0), ("b", 0.5)], "keyword": [("b", 2.0), ("a", 1.0)]}
    hits = reciprocal_rank_fusion(rankings, {"vector": 1.0, "keyword": 2.0}, rank_constant=0)
    assert [h.id for h in hits] == ["b", "a"]
    assert hits[0].score == pytest.approx(1 / 2 + 2 / 1)


def test_relative_score_and_dbsf() -> None:
    rankings = {"vector": [("a", 0.9), ("b", 0.5), ("c", 0.1)], "keyword": [("c", 10.0), ("b", 9.0), ("a", 0.0)]}
    rel = fuse("relative_score", rankings)
    scores = {h.id: h.score for h in rel}
    assert scores["a"] == pytest.approx(1.0)
    assert scores["b"] == pytest.approx(0.5 + 0.9)
    assert rel[0].id == "b"
    dbsf = fuse("dbsf", rankings)
    assert {h.id for h in dbsf} == {"a", "b", "c"}
    with pytest.raises(ValueError, match="fusion"):
        fuse("max", rankings)
