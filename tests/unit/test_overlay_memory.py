"""A replica's overlay (chunks not yet in the base index) holds its vectors once: after a search or a move
into the base has stacked them, the arrays they were added in are freed (issue 27: bounded memory)."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np

from finderledge.replica.overlay import VectorOverlay


def test_the_overlay_keeps_one_copy_of_its_vectors_after_stacking_them() -> None:
    n, d = 20_000, 384  # 30.7 MB of vectors
    ids = [f"c{i}" for i in range(n)]
    overlay = VectorOverlay()
    gc.collect()
    tracemalloc.start()
    try:
        for lo in range(0, n, 5_000):  # added in batches, as a catch-up does
            batch = np.random.default_rng(lo).standard_normal((5_000, d), dtype=np.float32)
            overlay.add(ids[lo : lo + 5_000], batch, [{}] * 5_000, [""] * 5_000)
        del batch
        matrix = overlay.vectors()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert matrix.shape == (n, d)
    assert held < 1.5 * n * d * 4, f"the overlay holds {held} bytes for {n * d * 4} bytes of vectors"
    row = np.random.default_rng(5_000).standard_normal((5_000, d), dtype=np.float32)[7]
    assert np.allclose(matrix[5_007], row / np.linalg.norm(row), atol=1e-6)
    overlay.remove(["c1"])  # the rows stay right after a removal
    assert overlay.vectors().shape == (n - 1, d) and np.array_equal(overlay.vectors()[5_006], matrix[5_007])
