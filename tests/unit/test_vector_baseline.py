"""Issue 44: "with ``--embedding multilingual`` on the 5-document example every vector score is 0.0000".

The vector leg's baseline took the mean cosine between two chunks as ``|mean of the unit vectors|²``, which
averages over every pair *including each chunk with itself* (cosine 1).  On a small corpus that term lifts the
baseline by ``(1 - c) / n``: 7 chunks 0.83 apart under multilingual-e5 gave 0.85, above the best cosine of
most queries, so every vector score was 0.  The baseline is now the mean over pairs of different chunks.
"""

from __future__ import annotations

import numpy as np
import pytest

from finderledge.ranking.relevance import sample_background, vector_evidence


def _equicorrelated(n: int, c: float, dim: int = 64) -> np.ndarray:
    """``n`` unit vectors whose pairwise cosines are all exactly ``c``."""
    eye = np.eye(dim)
    return np.stack([np.sqrt(c) * eye[0] + np.sqrt(1.0 - c) * eye[i + 1] for i in range(n)])


@pytest.mark.parametrize("n", [2, 7, 50])
def test_the_pair_baseline_is_the_mean_cosine_between_different_chunks(n: int) -> None:
    vectors = _equicorrelated(n, 0.83)
    bg = sample_background(["t"] * n, list(vectors), n, tokenizer=None, k1=0.9)
    assert bg.pair_cosine() == pytest.approx(0.83, abs=1e-9)


def test_a_query_closer_than_a_typical_pair_has_vector_evidence_on_a_small_corpus() -> None:
    """The reported case: 7 chunks at 0.83 from each other (e5's range); a query at 0.91 from one of them and
    0.76 from the rest is clearly about that one, and its evidence is not 0."""
    dim = 32
    vectors = _equicorrelated(7, 0.83, dim)
    bg = sample_background(["t"] * 7, list(vectors), 7, tokenizer=None, k1=0.9)
    # a unit query at cosine 0.91 to the first chunk (and 0.91 * 0.83 to the others)
    query = 0.91 * vectors[0] + np.sqrt(1.0 - 0.91**2) * np.eye(dim)[-1]
    cosines = vectors @ query
    baseline = bg.vector_baseline(query)
    assert baseline == pytest.approx(max(float(cosines.mean()), 0.83), abs=1e-9)
    assert vector_evidence(float(cosines[0]), baseline) > 0.3
