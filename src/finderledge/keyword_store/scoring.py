"""Okapi BM25 over segments and the buffer, as small pure functions (after bm25s' ``scoring.py``).

Scoring is Okapi BM25 with the Lucene IDF::

    idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
    score    = sum over query tokens t of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

(bm25s' "lucene" method and Lucene >= 8 leave out the constant factor ``k1 + 1``; rankings are identical
and these scores are exactly ``(k1 + 1)`` times theirs.)  A search is: a :class:`Scope` (which documents
the statistics count and which may be returned), then per query term its live postings and document
frequency (:func:`term_postings`), each posting's contribution (:func:`contributions`), and per segment a
sum and a top-k (:func:`accumulate`, :func:`top_candidates`); :func:`rank` merges the candidates, ties by id.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..filters import Predicate, compile_filter, filter_key
from ..partitions import pins_only
from .partitions import PartitionView
from .segment import Buffer, Segment

__all__ = [
    "FilterCache",
    "Layout",
    "Scope",
    "TermMemo",
    "accumulate",
    "contributions",
    "doc_freq",
    "idf",
    "norm_constants",
    "partition_scope",
    "rank",
    "score_query",
    "score_text",
    "term_postings",
    "term_scores",
    "top_candidates",
]

FILTER_CACHE_SIZE = 64
Postings = list[tuple[int, np.ndarray, np.ndarray]]  # (segment position, docs, term frequencies)


@dataclass
class Scope:
    """What one search counts and returns.

    ``n_docs``/``total_len`` are the corpus statistics (the whole live index, or a pinned partition);
    ``masks`` the docs a filter allows per segment name, ``buffered`` the buffer ids it allows (``None``:
    no restriction); ``part`` the pinned partition and ``part_rows`` its allowed docs per segment (``None``
    in the list: all of the partition's docs)."""

    n_docs: int
    total_len: int
    masks: dict[str, np.ndarray] | None = None
    buffered: set[str] | None = None
    part: PartitionView | None = None
    part_rows: Sequence[np.ndarray | None] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# The formula
# --------------------------------------------------------------------------------------------------
def idf(n_docs: int, df: int) -> float:
    """Lucene's IDF: ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (never negative)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def norm_constants(k1: float, b: float, avgdl: float) -> tuple[float, float]:
    """``(c0, c1)`` with ``k1 * (1 - b + b * dl / avgdl) == c0 + c1 * dl``."""
    return k1 * (1.0 - b), k1 * b / avgdl


def contributions(w: float | np.ndarray, tfs: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Each posting's score for a term of weight ``w = qtf * idf * (k1 + 1)``: ``w * tf / (tf + norm)``."""
    scores: np.ndarray = (w * tfs) / (tfs + norms)
    return scores


def score_text(
    qcounts: Mapping[str, int],
    dcounts: Mapping[str, int],
    stats: tuple[int, int],
    k1: float,
    b: float,
    df_of: Callable[[str], int],
) -> float:
    """The score of one text (term counts ``dcounts``) in a corpus of ``stats = (n_docs, total_len)``;
    ``df_of(term)`` gives the corpus's document frequency."""
    n_docs, total_len = stats
    if n_docs == 0 or not qcounts or not dcounts or total_len <= 0:
        return 0.0
    norm = k1 * (1.0 - b + b * sum(dcounts.values()) / (total_len / n_docs))
    score = 0.0
    for term, qtf in qcounts.items():
        tf = dcounts.get(term, 0)
        df = df_of(term) if tf else 0
        if df:
            score += qtf * idf(n_docs, df) * (k1 + 1.0) * tf / (tf + norm)
    return score


# --------------------------------------------------------------------------------------------------
# Postings
# --------------------------------------------------------------------------------------------------
def live_postings(seg: Segment, term: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The docs and term frequencies of ``term`` in ``seg``, tombstoned docs left out (None: no such term)."""
    row = seg.term_index.get(term)
    if row is None:
        return None
    start, end = int(seg.indptr[row]), int(seg.indptr[row + 1])
    d, t = seg.docs[start:end], seg.tfs[start:end]
    if seg.n_deleted:
        keep = seg.live[d]
        d, t = d[keep], t[keep]
    return d, t


def doc_freq(segments: Sequence[Segment], buffer: Buffer, term: str) -> int:
    """Live chunks holding ``term``."""
    df = len(buffer.postings.get(term) or ())
    for seg in segments:
        post = live_postings(seg, term)
        df += 0 if post is None else len(post[0])
    return df


def _within(d: np.ndarray, t: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The postings whose doc is in ``rows`` (ascending)."""
    at = np.minimum(np.searchsorted(rows, d), max(len(rows) - 1, 0))
    keep = rows[at] == d if len(rows) else np.zeros(len(d), dtype=bool)
    return d[keep], t[keep]


def term_postings(
    segments: Sequence[Segment], buffer: Buffer, term: str, scope: Scope
) -> tuple[int, Postings, dict[str, int] | None]:
    """``term``'s document frequency over the docs ``scope`` counts, its postings that may score (per
    segment) and its buffer postings."""
    found: Postings = []
    df = 0
    part = scope.part
    for si, seg in enumerate(segments):
        post = live_postings(seg, term)
        if post is None:
            continue
        d, t = post
        if part is not None:  # the partition's postings only: its df, then what the filter allows
            inside = part.holds(si, d)
            d, t = d[inside], t[inside]
            df += len(d)
            rows = scope.part_rows[si]
            if rows is not None and len(d):
                d, t = _within(d, t, rows)
        else:
            df += len(d)
        if scope.masks is not None and len(d):
            m = scope.masks[seg.name][d]
            d, t = d[m], t[m]
        if len(d):
            found.append((si, d, t))
    bpost = buffer.postings.get(term)
    if bpost:
        df += len(bpost) if part is None else sum(1 for cid in bpost if cid in part.buffered)
    return df, found, bpost


# --------------------------------------------------------------------------------------------------
# Summing and ranking
# --------------------------------------------------------------------------------------------------
def accumulate(docs: np.ndarray, contrib: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum the contributions per doc of one segment: the docs with a positive score and their scores."""
    if len(docs) * 16 >= n_docs:  # dense accumulation: O(docs + postings), no sort
        dense = np.bincount(docs, weights=contrib, minlength=n_docs)
        local = np.flatnonzero(dense > 0)  # contributions are > 0 (bool scan is fastest)
        return local, dense[local]
    local, inverse = np.unique(docs, return_inverse=True)
    scores = np.bincount(inverse, weights=contrib)
    pos = scores > 0
    return local[pos], scores[pos]


def top_candidates(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores plus any ties with the k-th (so ties break by id later)."""
    if len(scores) <= k:
        return np.arange(len(scores))
    kth = -np.partition(-scores, k - 1)[k - 1]  # the k-th best score (negated twice: the same float)
    return np.flatnonzero(scores >= kth)


def rank(ids: list[str], scores: list[np.ndarray], k: int | None) -> list[tuple[str, float]]:
    """``(id, score)`` best first, ties by id; the ``k`` best (all with ``None``)."""
    if not ids:
        return []
    pairs = sorted(zip(ids, np.concatenate(scores).tolist()), key=lambda p: (-p[1], p[0]))
    return pairs if k is None else pairs[:k]


#: a term's scored postings per segment ``(segment index, docs, contributions)`` and per buffered chunk id
TermScores = tuple[list[tuple[int, np.ndarray, np.ndarray]], dict[str, float]]
#: a term with fewer postings is not kept by a :class:`TermMemo` ...
MEMO_MIN_POSTINGS = 1_000
#: ... nor once the memo holds this many (about 12 bytes each: a batch of searches holds ~50 MB at most)
MEMO_POSTINGS = 4_000_000


class TermMemo(dict[tuple[str, int], TermScores]):
    """The scored postings of ``(term, query tf)`` pairs, shared by the searches of one batch over one scope
    (:meth:`KeywordStore.search_many <finderledge.keyword_store.store.KeywordStore.search_many>`): a term
    many queries hold is looked up and scored once.  Holds terms with at least :data:`MEMO_MIN_POSTINGS`
    postings (shorter ones cost less to score again), at most :data:`MEMO_POSTINGS` postings in all."""

    def __init__(self) -> None:
        super().__init__()
        self.postings = 0

    def keep(self, key: tuple[str, int], scores: TermScores) -> None:
        size = sum(len(d) for _, d, _ in scores[0])
        if MEMO_MIN_POSTINGS <= size and self.postings + size <= MEMO_POSTINGS:
            self[key] = scores
            self.postings += size


def term_scores(
    segments: Sequence[Segment],
    buffer: Buffer,
    term: str,
    qtf: int,
    scope: Scope,
    constants: tuple[float, float, float],
) -> TermScores | None:
    """What ``term`` (``qtf`` times in the query) adds to each doc it scores in ``scope`` (None: no doc holds
    it); ``constants = (k1, c0, c1)``."""
    df, found, bpost = term_postings(segments, buffer, term, scope)
    if df == 0:
        return None
    k1, c0, c1 = constants
    w = qtf * idf(scope.n_docs, df) * (k1 + 1.0)
    scored = []
    for si, d, t in found:
        seg = segments[si]
        scored.append((si, d, contributions(w, t, _norms(seg, d, scope, c0, c1))))
    return scored, _buffered(buffer, bpost, scope, w, c0, c1)


def score_query(
    segments: Sequence[Segment],
    buffer: Buffer,
    qcounts: Mapping[str, int],
    scope: Scope,
    params: tuple[float, float],
    k: int | None,
    memo: TermMemo | None = None,
    layout: Layout | None = None,
) -> list[tuple[str, float]]:
    """The BM25 ranking of the query (term counts ``qcounts``) over ``scope``; ``params = (k1, b)``;
    ``memo``: scored terms shared with the other searches of a batch over the same scope; ``layout``: the
    store's cache of arrays over all its segments (without it, or with tombstones, a filter or a pinned
    partition, the postings are gathered segment by segment).

    Every segment's postings are summed together, numbered over all the index's docs (segment ``si``'s doc
    ``d`` is ``offsets[si] + d``): one sum and one top-k per query, not one per segment, and the
    contributions of all terms and segments computed in one vector operation.  Each doc's contributions are
    still added one by one in query-term order, so its score is the same float whatever the layout."""
    if scope.n_docs == 0 or not qcounts or scope.total_len / scope.n_docs <= 0:
        return []
    k1, b = params
    c0, c1 = norm_constants(k1, b, scope.total_len / scope.n_docs)
    if layout is not None and memo is None and scope.part is None and scope.masks is None:
        view = layout.view(segments)
        if not view.deleted:  # every posting scores: gathered term by term with no array work per segment
            return _score_gathered(view, buffer, qcounts, scope, (k1, c0, c1), k)
    offsets = accumulate_offsets(segments)
    docs: list[np.ndarray] = []  # per (term, segment): global doc numbers ...
    contrib: list[np.ndarray] = []  # ... and their contributions (memo) or, fresh:
    tfs: list[np.ndarray] = []  # term frequencies,
    norms: list[np.ndarray] = []  # length norms
    weights: list[float] = []  # and the term's weight, once per piece
    sizes: list[int] = []
    buf_scores: dict[str, float] = {}
    for term, qtf in qcounts.items():
        if memo is not None:
            scored = memo.get((term, qtf))
            if scored is None:
                scored = term_scores(segments, buffer, term, qtf, scope, (k1, c0, c1))
                if scored is None:
                    continue
                memo.keep((term, qtf), scored)
            for si, d, term_contrib in scored[0]:
                docs.append(d + offsets[si] if offsets[si] else d)
                contrib.append(term_contrib)
            buffered_scores = scored[1]
        else:
            df, found, bpost = term_postings(segments, buffer, term, scope)
            if df == 0:
                continue
            w = qtf * idf(scope.n_docs, df) * (k1 + 1.0)
            for si, d, t in found:
                docs.append(d + offsets[si] if offsets[si] else d)
                tfs.append(t)
                norms.append(_norms(segments[si], d, scope, c0, c1))
                weights.append(w)
                sizes.append(len(d))
            buffered_scores = _buffered(buffer, bpost, scope, w, c0, c1)
        for cid, score in buffered_scores.items():
            buf_scores[cid] = buf_scores.get(cid, 0.0) + score
    cand_ids: list[str] = []
    cand_scores: list[float] = []
    if docs:
        all_docs = docs[0] if len(docs) == 1 else np.concatenate(docs)
        if memo is None:  # contributions(w, tf, norm) of every piece at once: the same float64 operations
            t = tfs[0] if len(tfs) == 1 else np.concatenate(tfs)
            norm = norms[0] if len(norms) == 1 else np.concatenate(norms)
            w_each = np.repeat(np.asarray(weights, dtype=np.float64), sizes)
            all_contrib = contributions(w_each, t, norm)
        else:
            all_contrib = contrib[0] if len(contrib) == 1 else np.concatenate(contrib)
        found_docs, found_scores = _summed(all_docs, all_contrib, offsets[-1], k)
        cand_ids = _ids_at(segments, offsets, found_docs)
        cand_scores = found_scores
    return _with_buffered(cand_ids, cand_scores, buf_scores, k)


#: a :class:`View` keeps the gathered postings of at most this many postings (12 bytes each: ~24 MB) ...
VIEW_POSTINGS = 2_000_000
#: ... and terms (a term in no segment counts as one)
VIEW_TERMS = 100_000


class View:
    """One list of segments seen as one: where each one's docs start (``offsets``, then the total) and,
    per ``(c0, c1)``, the length norm of every doc numbered over all of them."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        self.segments = tuple(segments)  # held: the key below compares ids of live objects
        self.key = tuple(map(id, self.segments))
        self.offsets = accumulate_offsets(segments)
        self.deleted = any(seg.n_deleted for seg in segments)
        self._norm: tuple[tuple[float, float], np.ndarray] | None = None
        self._terms: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        self._cached = 0  # postings held by ``_terms``

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``term``'s postings in every segment, tombstones included, as one array of docs numbered over all
        of them (segment order, each one's ascending) and one of term frequencies (None: in no segment).
        Kept for later searches, up to :data:`VIEW_POSTINGS` postings and :data:`VIEW_TERMS` terms (then
        forgotten all at once: a bounded cache at no bookkeeping cost per search)."""
        if term in self._terms:
            return self._terms[term]
        docs: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        for seg, offset in zip(self.segments, self.offsets):
            row = seg.term_index.get(term)
            if row is None:
                continue
            start, end = seg.indptr[row : row + 2].tolist()
            if end > start:
                d = seg.docs[start:end]
                docs.append(np.add(d, offset, dtype=np.int64) if offset else d)
                tfs.append(seg.tfs[start:end])
        found = None
        if docs:
            found = (docs[0], tfs[0]) if len(docs) == 1 else (np.concatenate(docs), np.concatenate(tfs))
        size = 0 if found is None else len(found[0])
        if self._cached + size > VIEW_POSTINGS or len(self._terms) >= VIEW_TERMS:
            self._terms.clear()
            self._cached = 0
        if size <= VIEW_POSTINGS:
            self._terms[term] = found
            self._cached += size
        return found

    def norm(self, c0: float, c1: float) -> np.ndarray:
        """``c0 + c1 * dl`` of every doc (the same floats as :meth:`Segment.length_norm`), cached until
        avgdl/k1/b change."""
        if self._norm is None or self._norm[0] != (c0, c1):
            lens = [np.asarray(seg.lens, dtype=np.float64) for seg in self.segments]
            all_lens = np.concatenate(lens) if lens else np.zeros(0)
            self._norm = ((c0, c1), c0 + c1 * all_lens)
        return self._norm[1]


class Layout:
    """A store's :class:`View` of its current segments, made again when the list changes (a flush, a merge);
    a tombstone is read from the segments on every search."""

    def __init__(self) -> None:
        self._view: View | None = None

    def forget_others(self, segments: Sequence[Segment]) -> None:
        """Let go of a view of other segments than ``segments`` (before their files are deleted: a mapped
        file is held open while any array of it lives)."""
        view = self._view
        if view is not None and (
            len(view.segments) != len(segments) or any(a is not b for a, b in zip(view.segments, segments))
        ):
            self._view = None

    def view(self, segments: Sequence[Segment]) -> View:
        view = self._view
        if (
            view is None
            or len(view.key) != len(segments)
            or any(a is not b for a, b in zip(view.segments, segments))
        ):
            view = self._view = View(segments)
        else:
            view.deleted = any(seg.n_deleted for seg in segments)
        return view


def _score_gathered(
    view: View,
    buffer: Buffer,
    qcounts: Mapping[str, int],
    scope: Scope,
    constants: tuple[float, float, float],
    k: int | None,
) -> list[tuple[str, float]]:
    """:func:`score_query` over segments without tombstones, scope unfiltered: each term's postings over all
    segments are one array (:meth:`View.postings`, its df their length), the query's are normed and scored as
    one: a handful of numpy calls per query, whatever the number of segments and terms.  The
    contributions are the same float64 operations in the same order, so every score is the same float."""
    k1, c0, c1 = constants
    segments, offsets = view.segments, view.offsets
    docs: list[np.ndarray] = []  # per term found in the segments: its docs numbered over all of them,
    tfs: list[np.ndarray] = []  # their term frequencies,
    weights: list[float] = []  # the term's weight
    sizes: list[int] = []  # and its postings
    buf_scores: dict[str, float] = {}
    for term, qtf in qcounts.items():
        found = view.postings(term)
        df = 0 if found is None else len(found[0])
        bpost = buffer.postings.get(term)
        if bpost:
            df += len(bpost)
        if df == 0:
            continue
        w = qtf * idf(scope.n_docs, df) * (k1 + 1.0)
        if found is not None:
            docs.append(found[0])
            tfs.append(found[1])
            weights.append(w)
            sizes.append(len(found[0]))
        for cid, score in _buffered(buffer, bpost, scope, w, c0, c1).items():
            buf_scores[cid] = buf_scores.get(cid, 0.0) + score
    cand_ids: list[str] = []
    cand_scores: list[float] = []
    if docs:
        if len(docs) == 1:
            all_docs, t = docs[0], tfs[0]
            w_each: float | np.ndarray = weights[0]
        else:
            all_docs, t = np.concatenate(docs), np.concatenate(tfs)
            w_each = np.repeat(np.asarray(weights, dtype=np.float64), sizes)
        all_contrib = contributions(w_each, t, view.norm(c0, c1)[all_docs])
        found_docs, found_scores = _summed(all_docs, all_contrib, offsets[-1], k)
        cand_ids = _ids_at(segments, offsets, found_docs)
        cand_scores = found_scores
    return _with_buffered(cand_ids, cand_scores, buf_scores, k)


#: at most this many postings are summed in a dict (cheaper than numpy's few calls below ~60-100 postings: the
#: dict costs ~0.35 us a posting, np.unique + np.bincount ~25 us + ~0.3 us a posting, on this 2-core machine)
SMALL_SUM = 64


def _summed(
    docs: np.ndarray, contrib: np.ndarray, n_docs: int, k: int | None
) -> tuple[list[int], list[float]]:
    """The docs with a positive summed score, ascending, and their scores (with ``k``: the ``k`` best and ties
    with the k-th only).  Each doc's contributions are added in array order, starting from 0.0, as ``np.bincount``
    adds them: the same floats whichever way is taken."""
    if len(docs) <= SMALL_SUM:
        sums: dict[int, float] = {}
        get = sums.get
        for d, c in zip(docs.tolist(), contrib.tolist()):
            sums[d] = get(d, 0.0) + c
        pairs = [(d, s) for d, s in sums.items() if s > 0]
        if k is not None and len(pairs) > k:
            kth = heapq.nlargest(k, [s for _, s in pairs])[-1]
            pairs = [(d, s) for d, s in pairs if s >= kth]
        pairs.sort()  # by doc (each once), as numpy's way returns them
        return [d for d, _ in pairs], [s for _, s in pairs]
    found, scores = (
        accumulate(docs, contrib, n_docs) if len(docs) * 16 >= n_docs else _sparse_sum(docs, contrib)
    )
    if k is not None:
        top = top_candidates(scores, k)
        found, scores = found[top], scores[top]
    return found.tolist(), scores.tolist()


def _sparse_sum(docs: np.ndarray, contrib: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`accumulate`'s sparse way with fewer numpy calls than ``np.unique``: a stable sort by doc keeps each
    doc's contributions in array order, and ``np.bincount`` adds them in that order from 0.0 (the same floats).
    Contributions are > 0, so every summed doc is returned."""
    order = np.argsort(docs, kind="stable")
    ordered = docs[order]
    head = np.empty(len(ordered), dtype=bool)  # the first posting of each doc
    head[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
    return ordered[head], np.bincount(np.cumsum(head) - 1, weights=contrib[order])


def _norms(seg: Segment, d: np.ndarray, scope: Scope, c0: float, c1: float) -> np.ndarray:
    """``k1 * (1 - b + b * dl / avgdl)`` of docs ``d`` of ``seg`` (the whole segment's are cached until
    avgdl changes; a partition's avgdl is its own)."""
    norm: np.ndarray
    if scope.part is None:
        norm = seg.length_norm(c0, c1)[d]
    else:
        norm = c0 + c1 * seg.lens[d].astype(np.float64)
    return norm


def _buffered(
    buffer: Buffer, bpost: dict[str, int] | None, scope: Scope, w: float, c0: float, c1: float
) -> dict[str, float]:
    """What a term of weight ``w`` adds to the buffered chunks holding it (``bpost``: their term frequencies)."""
    buffered: dict[str, float] = {}
    for cid, tfi in (bpost or {}).items():
        if scope.buffered is None or cid in scope.buffered:
            tf = float(tfi)  # the same float64 operations, in the same order, as for a segment
            buffered[cid] = w * tf / (tf + (c0 + c1 * buffer.docs[cid].length))
    return buffered


def accumulate_offsets(segments: Sequence[Segment]) -> list[int]:
    """Where each segment's docs start in the numbering of all the index's docs, then their total."""
    offsets = [0]
    for seg in segments:
        offsets.append(offsets[-1] + seg.n_docs)
    return offsets


def _ids_at(segments: Sequence[Segment], offsets: list[int], found: list[int]) -> list[str]:
    """The chunk ids of docs numbered over all segments (see :func:`accumulate_offsets`), ``found`` ascending."""
    if len(segments) == 1:
        ids = segments[0].ids
        return [ids[i] for i in found]
    out: list[str] = []
    at = 0
    for si, seg in enumerate(segments):  # each segment's docs are one run of the sorted numbers
        end = bisect.bisect_left(found, offsets[si + 1], at)
        if end > at:
            ids, start = seg.ids, offsets[si]
            out.extend([ids[g - start] for g in found[at:end]])
            at = end
    return out


def _with_buffered(
    cand_ids: list[str], cand_scores: list[float], buf_scores: dict[str, float], k: int | None
) -> list[tuple[str, float]]:
    """The segments' candidates and the buffer's scored chunks (its own ``k`` best, in the final sort's order),
    ranked together: the ``k`` best (all with ``None``)."""
    buffered = [(cid, s) for cid, s in buf_scores.items() if s > 0]
    if k is not None and len(buffered) > k:
        buffered = heapq.nsmallest(k, buffered, key=lambda p: (-p[1], p[0]))
    if buffered:
        cand_ids.extend(cid for cid, _ in buffered)
        cand_scores.extend(s for _, s in buffered)
    return _ranked(cand_ids, cand_scores, k)


def _ranked(ids: list[str], scores: list[float], k: int | None) -> list[tuple[str, float]]:
    """``(id, score)`` best first, ties by id; the ``k`` best (all with ``None``)."""
    order = sorted(zip([-s for s in scores], ids))  # (-score, id): compared as tuples, no key function
    if k is not None:
        order = order[:k]
    return [(cid, -neg) for neg, cid in order]


# --------------------------------------------------------------------------------------------------
# Filters and partitions
# --------------------------------------------------------------------------------------------------
class FilterCache:
    """The docs each recent filter allows, per segment (segments are immutable) and in the buffer (until
    the corpus's next write: ``version``)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[Predicate, dict[str, np.ndarray], tuple[int, set[str]]]] = (
            OrderedDict()
        )

    def clear(self) -> None:
        self._entries.clear()

    def scope(
        self,
        flt: Mapping[str, Any],
        segments: Sequence[Segment],
        buffer: Buffer,
        stats: tuple[int, int],
        version: int,
    ) -> Scope:
        """The scope of a search with filter ``flt`` over the whole index (``stats = (n_docs, total_len)``)."""
        key = filter_key(flt)
        entry = self._entries.get(key)
        if entry is None:
            pred = compile_filter(flt)
            if pred is None:
                return Scope(*stats)
            entry = (pred, {}, (-1, set()))
            self._entries[key] = entry
            while len(self._entries) > FILTER_CACHE_SIZE:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        pred, masks, (seen, buf) = entry
        names = {s.name for s in segments}
        for stale in [n for n in masks if n not in names]:
            del masks[stale]
        for seg in segments:
            if seg.name not in masks:
                metas = seg.load_metas()
                masks[seg.name] = np.fromiter((pred(m) for m in metas), dtype=bool, count=len(metas))
        if seen != version:
            buf = {cid for cid, doc in buffer.docs.items() if pred(doc.meta)}
            self._entries[key] = (pred, masks, (version, buf))
        return Scope(*stats, masks=masks, buffered=buf)


def partition_scope(
    flt: Mapping[str, Any], key: str | None, segments: Sequence[Segment], buffer: Buffer, part: PartitionView
) -> Scope:
    """The scope of a search pinned to partition ``part``: its statistics, and its docs that pass ``flt``
    per segment and in the buffer, in O(partition), never O(index)."""
    if pins_only(flt, key):
        rows: list[np.ndarray | None] = [None] * len(segments)
        return Scope(part.n_live, part.total_len, buffered=part.buffered, part=part, part_rows=rows)
    pred = compile_filter(flt)
    assert pred is not None  # a filter that pins a partition has a condition
    rows = []
    for seg, inside in zip(segments, part.rows):
        metas = seg.load_metas()
        rows.append(inside[np.fromiter((pred(metas[i]) for i in inside.tolist()), bool, len(inside))])
    buffered = {cid for cid in part.buffered if pred(buffer.docs[cid].meta)}
    return Scope(part.n_live, part.total_len, buffered=buffered, part=part, part_rows=rows)
