"""A batch of vector searches is scored by matrix products, block by block (issue 29: this FAISS build scores
a batch query by query, 1.13 s of CPU for the 200 calibration queries over 100,000 rows against 0.2 s).
The answers are FAISS's: the same rows in the same order, scores equal to float rounding (so scores closer
than that, e.g. a text stored twice, may come in another order)."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from finderledge.vector_stores import flat_rows
from finderledge.vector_stores.faiss import FaissVectorStore
from finderledge.vector_stores.flat_rows import top_inner


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize(("n", "k", "block"), [(1000, 10, 32768), (1000, 10, 128), (50, 80, 16), (3, 5, 2)])
def test_top_inner_finds_what_faiss_finds(
    n: int, k: int, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flat_rows, "BLOCK_ROWS", block)  # several blocks merged, as at 100,000 rows
    rng = np.random.default_rng(n + k)
    matrix, queries = _unit(rng.standard_normal((n, 16))), _unit(rng.standard_normal((40, 16)))
    index = faiss.IndexFlatIP(16)
    index.add(matrix)
    want_scores, want_rows = index.search(queries, k)
    scores, rows = top_inner(queries, matrix, k)
    assert rows.tolist() == want_rows.tolist()
    real = want_rows >= 0
    assert np.allclose(scores[real], want_scores[real], atol=1e-5)


def test_a_store_answers_a_batch_as_it_answers_each_query(tmp_path) -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((500, 12)).astype(np.float32)
    store = FaissVectorStore(tmp_path / "faiss", dimension=12)
    store.add([f"c{i}" for i in range(500)], vectors, [{}] * 500)
    store.delete([f"c{i}" for i in range(0, 500, 7)])  # positions shift: ids must follow
    queries = rng.standard_normal((flat_rows.BATCH_QUERIES + 4, 12)).astype(np.float32)
    batched = store.search_many(queries, 9)
    single = [store.search(q, 9) for q in queries]
    assert [[i for i, _ in hits] for hits in batched] == [[i for i, _ in hits] for hits in single]
    for b, s in zip(batched, single):
        assert np.allclose([x for _, x in b], [x for _, x in s], atol=1e-5)
