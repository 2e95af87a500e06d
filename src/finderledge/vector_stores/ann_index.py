"""Approximate FAISS indexes beside the store's exact rows (``vector_index``): HNSW, IVF, IVF-SQ8, IVF-PQ.

The FAISS store keeps every vector as float32 (its segments are written from them, filters and partitions score
them exactly): for these kinds read on demand from the checked segment files (:class:`~.flat_rows.MappedRows`),
so a rescoring reads only its candidates' rows.  With ``vector_index`` other than ``flat`` it also keeps one
of these indexes over the same rows, labelled by the rows' sequence numbers, and an unfiltered (or broadly
filtered) search asks it for ``OVERFETCH`` × k candidates, which the store then rescores exactly from the
float32 rows: scores stay exact cosines, and the index's own quantisation error only costs recall when a true
neighbour is not among the candidates at all.

Life cycle (decided here, applied by the store at each flush, i.e. each checkpoint):

* below ``MIN_ROWS`` live rows there is no approximate index (an exact scan of 20,000 rows costs about as much
  as an approximate search); the first flush with at least that many builds (and, for IVF kinds, trains) it;
* rows added later go into it at once (IVF: assigned to the trained lists; HNSW: inserted into the graph);
  deleted rows stay in it and are dropped from its answers (a deleted sequence number is never reused);
* it is built again, retrained, when the live rows have grown ``RETRAIN_GROWTH``-fold since it was trained or
  over ``MAX_DEAD`` of its rows are deleted.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..config import VECTOR_INDEXES

__all__ = [
    "FLAT",
    "MIN_ROWS",
    "VECTOR_INDEXES",
    "AnnIndex",
]

FLAT = VECTOR_INDEXES[0]  # exact: no approximate index
MIN_ROWS = 20_000  # fewer live rows: exact search only
RETRAIN_GROWTH = 4  # live rows grown this many times since training: train and build again
MAX_DEAD = 0.25  # deleted rows above this share of the index: build again
OVERFETCH = 4  # candidates asked of the approximate index per result, rescored exactly
PQ_OVERFETCH = (
    30  # ... of IVF-PQ, whose 8-bit codes per 8 dimensions rank candidates coarsely (1M: 10x gave 0.65)
)
MIN_CANDIDATES = 40
HNSW_M = 16  # graph neighbours per node (32 and efConstruction 80 built 100k rows in 169 s here, 2 cores)
HNSW_EF_CONSTRUCTION = 40
HNSW_EF_SEARCH = 128
TRAIN_POINTS_PER_LIST = 40  # k-means sample: this many points per list (FAISS warns below 39)
PQ_DIMS_PER_CODE = 8  # IVF-PQ: one byte per 8 dimensions (384-d: 48 bytes a vector, 32x less than float32)


def lists_for(rows: int) -> int:
    """IVF lists for ``rows`` vectors: about 2·√rows, and never fewer training points than FAISS wants."""
    return max(1, min(int(2 * math.sqrt(rows)), rows // TRAIN_POINTS_PER_LIST))


def probes_for(lists: int) -> int:
    """Lists scanned per query: 1/32 of them, at least 8 (all of them for a tiny index)."""
    return min(lists, max(8, lists // 32))


def _pq_codes(dimension: int) -> int:
    """Sub-quantisers of IVF-PQ: ``dimension / 8``, a divisor of the dimension."""
    m = max(1, dimension // PQ_DIMS_PER_CODE)
    while dimension % m:
        m -= 1
    return m


class AnnIndex:
    """One approximate index of ``kind`` over normalised vectors labelled by sequence number."""

    def __init__(self, faiss: Any, kind: str, index: Any, trained_rows: int, dead: int = 0) -> None:
        self._faiss = faiss
        self.kind = kind
        self.index = index
        self.trained_rows = trained_rows  # live rows when it was built (and trained)
        self.dead = dead  # rows in it that the store has deleted since
        self.unsaved = 0  # rows added since it was last written

    @property
    def overfetch(self) -> int:
        """Candidates to ask for per result wanted (rescored exactly by the store)."""
        return PQ_OVERFETCH if self.kind == "ivf_pq" else OVERFETCH

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    # -- building -----------------------------------------------------------------------------------
    @classmethod
    def build(
        cls, faiss: Any, kind: str, matrix: np.ndarray, labels: np.ndarray, seed: int = 1234
    ) -> AnnIndex:
        """Train (IVF kinds, on a sample) and fill an index of ``kind`` with ``matrix``'s rows as ``labels``."""
        rows, dim = matrix.shape
        ip = faiss.METRIC_INNER_PRODUCT
        if kind == "hnsw":
            graph = faiss.IndexHNSWFlat(dim, HNSW_M, ip)
            graph.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            graph.hnsw.efSearch = HNSW_EF_SEARCH
            index: Any = faiss.IndexIDMap(graph)  # FAISS's Python wrapper keeps ``graph`` alive with it
        else:
            lists = lists_for(rows)
            quantizer = faiss.IndexFlatIP(dim)
            if kind == "ivf":
                index = faiss.IndexIVFFlat(quantizer, dim, lists, ip)
            elif kind == "ivf_sq8":
                index = faiss.IndexIVFScalarQuantizer(
                    quantizer, dim, lists, faiss.ScalarQuantizer.QT_8bit, ip
                )
            elif kind == "ivf_pq":
                bits = 8 if rows >= 256 * TRAIN_POINTS_PER_LIST else 4  # a small index: 16 centroids per code
                index = faiss.IndexIVFPQ(quantizer, dim, lists, _pq_codes(dim), min(bits, 8), ip)
            else:
                raise ValueError(f"unknown vector index kind {kind!r}")
            index.nprobe = probes_for(lists)
            sample = min(rows, max(lists * TRAIN_POINTS_PER_LIST, 256 * TRAIN_POINTS_PER_LIST))
            picked = np.sort(np.random.default_rng(seed).choice(rows, size=sample, replace=False))
            index.train(np.ascontiguousarray(matrix[picked]))
        ann = cls(faiss, kind, index, trained_rows=rows)
        step = 65_536
        for lo in range(0, rows, step):
            ann.add(np.ascontiguousarray(matrix[lo : lo + step]), labels[lo : lo + step])
        ann.unsaved = 0
        return ann

    def add(self, vectors: np.ndarray, labels: np.ndarray) -> None:
        """Add normalised ``vectors`` (C-contiguous float32) labelled ``labels``."""
        if len(vectors):
            self.index.add_with_ids(vectors, np.ascontiguousarray(labels, dtype=np.int64))
            self.unsaved += len(vectors)

    def stale(self, live_rows: int) -> bool:
        """Whether to build it again: the corpus grew ``RETRAIN_GROWTH``-fold or too many rows are deleted."""
        return live_rows >= RETRAIN_GROWTH * max(self.trained_rows, 1) or self.dead > MAX_DEAD * max(
            self.size, 1
        )

    # -- searching ----------------------------------------------------------------------------------
    def search(
        self, queries: np.ndarray, n: int, allowed: np.ndarray | None = None, labels_below: int = 0
    ) -> np.ndarray:
        """The labels of the ``n`` best rows per query (``-1`` padded), among sequence numbers ``allowed``
        (ascending, all below ``labels_below``) if given."""
        params = None
        if allowed is not None:
            mask = np.zeros(max(labels_below, 1), dtype=bool)
            mask[allowed] = True
            bits = np.packbits(mask, bitorder="little")
            selector = self._faiss.IDSelectorBitmap(len(mask), self._faiss.swig_ptr(bits))
            params = self._faiss.SearchParameters(sel=selector)
            if self.kind != "hnsw":
                params = self._faiss.SearchParametersIVF(sel=selector, nprobe=self.index.nprobe)
        _, found = self.index.search(queries, n, params=params)  # ``bits`` is alive till here
        labels: np.ndarray = found
        return labels

    # -- bytes --------------------------------------------------------------------------------------
    def to_bytes(self) -> np.ndarray:
        """The index serialised by FAISS (a uint8 array), written by the store through its segment layer."""
        data: np.ndarray = self._faiss.serialize_index(self.index)
        return data

    @classmethod
    def from_bytes(cls, faiss: Any, kind: str, data: bytes, dimension: int, trained_rows: int) -> AnnIndex:
        """An index read back from bytes the store wrote and checked (CRC32 in its manifest); a mismatch of kind
        or dimension raises ``ValueError``."""
        index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        inner = faiss.downcast_index(index.index) if kind == "hnsw" else faiss.downcast_index(index)
        expected = {
            "hnsw": "IndexHNSWFlat",
            "ivf": "IndexIVFFlat",
            "ivf_sq8": "IndexIVFScalarQuantizer",
            "ivf_pq": "IndexIVFPQ",
        }.get(kind)
        if type(inner).__name__ != expected or index.d != dimension:
            raise ValueError(f"expected a {expected} of dimension {dimension}, got {type(inner).__name__}")
        return cls(faiss, kind, index, trained_rows=trained_rows)
