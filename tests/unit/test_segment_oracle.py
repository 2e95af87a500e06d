"""build_segment and merge_segments give exactly the segments of main 79f6b67 (issue 29's vectorised build).

The loops that number terms and collect postings now run in C; the result must not change by a bit: same term
order, offsets, postings, tfs and lengths, so scores and files stay identical.  The old functions are copied
below as the oracle and compared on random batches (empty docs, shared and unique terms, deletions, merges of
merges); a keyword store fed the same chunks through the buffer and through direct segments scores alike.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finderledge.keyword_store import KeywordStore
from finderledge.keyword_store.segment import Segment, build_segment, merge_segments, stable_order


def old_build(ids: list[str], counts: Sequence[Mapping[str, int]], lens: Sequence[int]) -> dict[str, Any]:
    """main 79f6b67's build_segment, returning the arrays it put in the segment."""
    vocab: dict[str, int] = {}
    tids: list[int] = []
    tfs: list[int] = []
    per_doc = np.empty(len(ids), dtype=np.int64)
    for i, c in enumerate(counts):
        tids.extend([vocab.setdefault(t, len(vocab)) for t in c])
        tfs.extend(c.values())
        per_doc[i] = len(c)
    tid_arr = np.asarray(tids, dtype=np.int32)
    doc_arr = np.repeat(np.arange(len(ids), dtype=np.int32), per_doc)
    order = np.argsort(tid_arr, kind="stable")
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(tid_arr, minlength=len(vocab)), out=indptr[1:])
    return {
        "terms": list(vocab),
        "indptr": indptr,
        "docs": doc_arr[order],
        "tfs": np.asarray(tfs, dtype=np.int32)[order],
        "lens": np.asarray(lens, dtype=np.int32),
        "ids": ids,
    }


def old_merge(segs: Sequence[Segment]) -> dict[str, Any]:
    """main 79f6b67's merge_segments, returning the arrays it put in the segment."""
    vocab: dict[str, int] = {}
    tid_parts, doc_parts, tf_parts, lens_parts = [], [], [], []
    ids: list[str] = []
    metas: list[dict[str, Any]] = []
    offset = 0
    for seg in segs:
        seg_metas = seg.load_metas()
        live = seg.live
        new_local = np.cumsum(live, dtype=np.int64) - 1 + offset
        term_map = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for t in seg.terms), dtype=np.int32, count=len(seg.terms)
        )
        rows = np.repeat(np.arange(len(seg.terms), dtype=np.int32), np.diff(seg.indptr))
        docs, tfs = np.asarray(seg.docs), np.asarray(seg.tfs)
        if seg.n_deleted:
            keep = live[docs]
            rows, docs, tfs = rows[keep], docs[keep], tfs[keep]
        tid_parts.append(term_map[rows])
        doc_parts.append(new_local[docs].astype(np.int32))
        tf_parts.append(tfs)
        live_idx = np.flatnonzero(live)
        ids.extend(seg.ids[i] for i in live_idx)
        metas.extend(seg_metas[i] for i in live_idx)
        lens_parts.append(np.asarray(seg.lens)[live_idx])
        offset += len(live_idx)
    tid_arr = np.concatenate(tid_parts) if tid_parts else np.zeros(0, np.int32)
    counts = np.bincount(tid_arr, minlength=len(vocab))
    terms = list(vocab)
    if (counts == 0).any():
        used = counts > 0
        renum = np.cumsum(used, dtype=np.int64) - 1
        tid_arr = renum[tid_arr].astype(np.int32)
        terms = [t for t, u in zip(terms, used) if u]
        counts = counts[used]
    order = np.argsort(tid_arr, kind="stable")
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return {
        "terms": terms,
        "indptr": indptr,
        "docs": np.concatenate(doc_parts)[order] if doc_parts else np.zeros(0, np.int32),
        "tfs": np.concatenate(tf_parts)[order] if tf_parts else np.zeros(0, np.int32),
        "lens": np.concatenate(lens_parts).astype(np.int32) if lens_parts else np.zeros(0, np.int32),
        "ids": ids,
        "metas": metas,
    }


def assert_same(seg: Segment, expected: dict[str, Any]) -> None:
    """Every array equal in value and dtype, the term order and the term index equal."""
    assert seg.terms == expected["terms"]
    assert seg.ids == expected["ids"]
    for key in ("indptr", "docs", "tfs", "lens"):
        got, want = getattr(seg, key), expected[key]
        assert got.dtype == want.dtype, key
        assert np.array_equal(got, want), key
    assert seg.term_index == {t: i for i, t in enumerate(expected["terms"])}
    if "metas" in expected:
        assert seg.metas == expected["metas"]


_VOCAB = [f"t{i}" for i in range(40)] + ["", "é", "東京", "a" * 50]
docs = st.lists(st.dictionaries(st.sampled_from(_VOCAB), st.integers(1, 5), max_size=12), max_size=30)
_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _segment(name: str, counts: list[dict[str, int]], prefix: str) -> tuple[Segment, list[str], list[int]]:
    ids = [f"{prefix}{i}" for i in range(len(counts))]
    lens = [sum(c.values()) for c in counts]
    return (
        build_segment(name, ids, [Counter(c) for c in counts], lens, [{"n": i} for i in range(len(ids))]),
        ids,
        lens,
    )


@_SETTINGS
@given(counts=docs)
def test_build_segment_same_as_before(counts: list[dict[str, int]]) -> None:
    seg, ids, lens = _segment("seg-00000001", counts, "d")
    assert_same(seg, old_build(ids, [Counter(c) for c in counts], lens))


@_SETTINGS
@given(parts=st.lists(st.tuples(docs, st.lists(st.integers(0, 29), max_size=10)), max_size=4))
def test_merge_segments_same_as_before(parts: list[tuple[list[dict[str, int]], list[int]]]) -> None:
    """Segments with tombstones merged, then merged again with a fresh one: same as the old merge each time."""
    segs = []
    for k, (counts, deleted) in enumerate(parts):
        seg, ids, _ = _segment(f"seg-{k:08d}", counts, f"s{k}-")
        for i in set(deleted):
            if i < len(ids):
                seg.tombstone(ids[i])
        segs.append(seg)
    merged = merge_segments("seg-00000100", segs)
    assert_same(merged, old_merge(segs))
    fresh, _, _ = _segment("seg-00000101", [{"t1": 2, "new": 1}], "f")
    if merged.n_docs:
        merged.tombstone(merged.ids[0])
    assert_same(merge_segments("seg-00000102", [merged, fresh]), old_merge([merged, fresh]))


def test_direct_segments_and_buffer_score_alike() -> None:
    """A batch that becomes a segment at once and the same chunks through the buffer give the same scores."""
    texts = [f"alpha beta{i % 7} gamma{i % 3} delta{i} alpha" for i in range(300)]
    ids = [f"c{i}" for i in range(300)]
    direct = KeywordStore(None, buffer_size=200)
    direct.add(ids, texts)  # >= half a buffer: segments built directly
    buffered = KeywordStore(None, buffer_size=200)
    for i in range(0, 300, 10):  # small batches: the buffer, frozen into segments and merged
        buffered.add(ids[i : i + 10], texts[i : i + 10])
    for query in ("alpha", "beta3 gamma1", "delta42 alpha", "beta6 delta299"):
        assert direct.search(query, k=300) == buffered.search(query, k=300)


@pytest.mark.parametrize("n_keys", [1, 300, 1 << 16, (1 << 16) + 1, 1 << 20, (1 << 31) - 1])
def test_stable_order_is_numpys_stable_argsort(n_keys: int) -> None:
    """One radix pass for 16-bit keys, two for wider ones: numpy's stable order either way (many ties)."""
    rng = np.random.default_rng(n_keys)
    keys = np.minimum(rng.zipf(1.1, size=50_000) - 1, n_keys - 1).astype(np.int32)
    keys[::7] = n_keys - 1
    assert np.array_equal(stable_order(keys, n_keys), np.argsort(keys, kind="stable"))
    assert len(stable_order(keys[:0], n_keys)) == 0


def test_merge_of_more_than_65536_terms_same_as_before() -> None:
    """A merged vocabulary past 16 bits takes the two-pass sort: still the old merge's arrays."""
    a, _, _ = _segment("seg-00000001", [{f"a{i}": 1 + i % 3, "shared": 1} for i in range(40_000)], "a")
    b, _, _ = _segment("seg-00000002", [{f"b{i}": 2, "shared": 2, f"a{i}": 1} for i in range(40_000)], "b")
    a.tombstone("a5")
    assert_same(merge_segments("seg-00000003", [a, b]), old_merge([a, b]))
