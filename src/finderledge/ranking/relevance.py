"""Absolute relevance: a score in [0, 1] for each result that means the same thing for every query on a corpus.

The fused score orders results, but it is relative to one query's candidates (min-max fusion gives every
query's best hit the top score, a nonsense query included).  Relevance measures each result's evidence
against the corpus's *background*, a fixed sample of its chunks (see docs/scores.md):

* vector leg: ``(cosine - b) / (1 - b)``, where the baseline ``b`` is the higher of the query's mean cosine to
  the corpus's chunks and the mean cosine between two different chunks: 0 is no closer than a typical chunk,
  1 is the query's own direction (this removes the offset of the model and the corpus: some models put
  every pair of texts at cosine 0.8, others at 0.1);
* keyword leg: the BM25 score over the most any chunk could score for the query, ``(k1 + 1) · Σ idf(term)``
  (a term missing from the corpus counts with its full idf); every term once in a chunk of average length
  gives 1 / (k1 + 1), about 0.53;
* the legs that counted for the query are averaged with their fusion weights, so evidence in one leg only is
  halved and a query with evidence in neither scores near 0;
* a result's evidence is capped by that of the results ranked before it and multiplied by its fused score as
  a share of the top result's: the top result scores its own evidence, scores fall with rank, and a
  threshold keeps a prefix of the ranking (the ranking itself is the fusion's, unchanged).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import ConfigurationError
from ..metadata import embedded_text
from .fusion import FusedHit

__all__ = [
    "SAMPLE_SIZE",
    "BackgroundCache",
    "BackgroundSource",
    "CorpusBackground",
    "LedgerBackground",
    "check_score_threshold",
    "keyword_evidence",
    "sample_background",
    "sample_key",
    "score_hits",
    "vector_evidence",
]

logger = logging.getLogger(__name__)

#: chunks in the background sample (all of them in a smaller corpus)
SAMPLE_SIZE = 512
#: the sample is taken again once the corpus has grown or shrunk by more than this share
REFRESH_SHARE = 0.1


@dataclass(frozen=True)
class CorpusBackground:
    """What a corpus looks like to a query that matches nothing in particular: statistics of a chunk sample."""

    corpus_size: int  # chunks in the corpus when sampled
    sample_size: int  # chunks sampled
    doc_freq: Mapping[str, int] = field(default_factory=dict)  # token -> sampled chunks holding it
    mean_vector: np.ndarray | None = None  # mean of the sampled chunks' unit vectors
    tokenizer: Callable[[str], Sequence[str]] | None = None  # the keyword leg's tokenizer
    k1: float = 0.9  # the keyword leg's BM25 k1
    vector_count: int = 0  # sampled chunks with a vector (the mean's n; 0: unknown, |mean|² used as is)

    def idf(self, token: str) -> float:
        """BM25's idf of ``token``, its document frequency estimated from the sample (unseen: half a sampled hit)."""
        n, m = self.corpus_size, self.sample_size
        df = float(self.doc_freq.get(token, 0))
        if 0 < m < n:
            df = df * n / m if df else 0.5 * n / m
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def keyword_ceiling(self, query: str) -> float:
        """The highest BM25 score any chunk could reach for ``query``, ``(k1 + 1) · Σ qtf · idf``; 0 without terms."""
        if self.tokenizer is None:
            return 0.0
        counts = Counter(self.tokenizer(query))
        return (self.k1 + 1.0) * sum(c * self.idf(t) for t, c in counts.items())

    def vector_baseline(self, query_vector: Sequence[float] | np.ndarray | None) -> float:
        """The cosine a chunk unrelated to the query has: the higher of the query's mean cosine to the corpus's
        chunks and the mean cosine between two chunks (0.0 when there is nothing to compare)."""
        if query_vector is None or self.mean_vector is None:
            return 0.0
        q = np.asarray(query_vector, dtype=np.float64)
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or q.shape != self.mean_vector.shape:
            return 0.0
        return max(float(q @ self.mean_vector) / norm, self.pair_cosine())

    def pair_cosine(self) -> float:
        """The mean cosine between two *different* sampled chunks.  ``|mean|²`` averages over every ordered pair,
        each chunk with itself included (cosine 1): on 7 chunks at 0.83 apart that alone gave 0.85, above every
        query's best cosine under multilingual-e5, so every vector score was 0."""
        if self.mean_vector is None:
            return 0.0
        squared = float(self.mean_vector @ self.mean_vector)
        n = self.vector_count
        return (n * squared - 1.0) / (n - 1) if n >= 2 else squared


def sample_background(
    texts: Iterable[str],
    vectors: Iterable[np.ndarray | None],
    corpus_size: int,
    *,
    tokenizer: Callable[[str], Sequence[str]] | None,
    k1: float,
) -> CorpusBackground:
    """The background of a corpus of ``corpus_size`` chunks from a sample of their texts and vectors."""
    doc_freq: Counter[str] = Counter()
    units: list[np.ndarray] = []
    m = 0
    for text, vector in zip(texts, vectors):
        m += 1
        if tokenizer is not None:
            doc_freq.update(set(tokenizer(text)))
        if vector is not None:
            v = np.asarray(vector, dtype=np.float64)
            norm = float(np.linalg.norm(v))
            if norm > 0:
                units.append(v / norm)
    mean = np.mean(units, axis=0) if units and len({u.shape for u in units}) == 1 else None
    return CorpusBackground(corpus_size, m, dict(doc_freq), mean, tokenizer, float(k1), len(units))


class BackgroundSource(Protocol):
    """Where a corpus's background comes from: its size now, and a deterministic sample.  A source may also
    carry ``seq``, the ledger change it reflects: at one change the size is asked once."""

    def size(self) -> int: ...

    def sample(self, size: int) -> CorpusBackground: ...


class LedgerBackground:
    """The background of a FinderLedge corpus: chunk texts and vectors from the ledger, the BM25 store's tokenizer.

    The sample is the ledger's :meth:`~finderledge.ledgers.base.Ledger.sample_chunk_ids`: the same in every
    process for the same ledger state, drawn without reading every chunk id where the ledger can seek.  With a
    ``partition`` (see :mod:`finderledge.partitions`) the corpus is that partition's chunks only, sampled as the
    ``size`` ids with the smallest hashes (so the sample depends on the partition's chunks alone); with a
    :class:`~finderledge.partitions.PartitionFilter`, the chunks of the partitions it reaches."""

    def __init__(
        self, ledger: Any, keyword_store: Any, partition: Any = None, seq: int | None = None
    ) -> None:
        """``seq``: the ledger change the keyword store reflects (None: unknown, the size is asked each time)."""
        self._ledger = ledger
        self._keyword_store = keyword_store
        self.partition = partition
        self.seq = seq

    def size(self) -> int:
        if self.partition is not None:
            return int(self._keyword_store.partition_size(self.partition))
        return len(self._keyword_store)

    def sample(self, size: int) -> CorpusBackground:
        if self.partition is not None:  # the keyword index holds exactly the committed chunks
            ids = sorted(self._keyword_store.partition_ids(self.partition), key=sample_key)[:size]
        else:
            ids = self._ledger.sample_chunk_ids(size)
        chunks = self._ledger.get_chunks(ids, with_embedding=True)
        return sample_background(
            (embedded_text(c.content, c.metadata) for c in chunks),  # as BM25 indexed them
            (c.embedding for c in chunks),
            self.size(),
            tokenizer=getattr(self._keyword_store, "tokenizer", None),
            k1=float(getattr(self._keyword_store, "k1", 0.9)),
        )


def sample_key(chunk_id: str) -> tuple[bytes, str]:
    """The order chunk samples are drawn in (a hash of the id): the same sample in every process."""
    return hashlib.blake2b(chunk_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), chunk_id


class BackgroundCache:
    """Keeps each corpus's background (the whole corpus's and each partition's, by the source's ``partition``);
    samples one again when its corpus size moved by more than 10 %.  The size is asked once per ledger change a
    source reflects (its ``seq``): with the keyword index in PostgreSQL each ask is a round trip."""

    #: partitions' backgrounds kept at most (least recently used ones are sampled again when searched)
    MAX_PARTITIONS = 4096

    def __init__(self, sample_size: int = SAMPLE_SIZE) -> None:
        self.sample_size = sample_size
        self._lock = threading.Lock()
        self._backgrounds: OrderedDict[str | None, CorpusBackground] = OrderedDict()
        # the seq at which each background's corpus size was last asked
        self._checked_at: dict[str | None, int] = {}

    def get(self, source: BackgroundSource) -> tuple[CorpusBackground, float]:
        """The background for ``source`` and the seconds spent sampling it now (0.0 when cached)."""
        key = getattr(source, "partition", None)
        seq = getattr(source, "seq", None)
        with self._lock:
            bg = self._backgrounds.get(key)
            if bg is not None and seq is not None and self._checked_at.get(key) == seq:
                self._backgrounds.move_to_end(key)
                return bg, 0.0
        size = source.size()
        with self._lock:
            bg = self._backgrounds.get(key)
            if bg is not None and abs(size - bg.corpus_size) <= REFRESH_SHARE * max(bg.corpus_size, 1):
                self._backgrounds.move_to_end(key)
                self._checked(key, seq)
                return bg, 0.0
            start = time.perf_counter()
            bg = source.sample(self.sample_size)
            self._backgrounds[key] = bg
            self._backgrounds.move_to_end(key)
            self._checked(key, seq)
            while len(self._backgrounds) > self.MAX_PARTITIONS + 1:
                oldest = next(k for k in self._backgrounds if k is not None)
                del self._backgrounds[oldest]
                self._checked_at.pop(oldest, None)
            spent = time.perf_counter() - start
            logger.debug(
                "relevance: sampled %d of %d chunks as the background of %s in %.3f s",
                bg.sample_size,
                bg.corpus_size,
                "the corpus" if key is None else f"partition {key!r}",
                spent,
            )
            return bg, spent

    def _checked(self, key: str | None, seq: int | None) -> None:
        """Record that ``key``'s background was found current at ``seq`` (under the lock)."""
        if seq is None:
            self._checked_at.pop(key, None)
        else:
            self._checked_at[key] = seq


def vector_evidence(cosine: float, baseline: float) -> float:
    """How far a cosine stands from the query's background toward an identical vector, clipped to [0, 1]."""
    if baseline >= 1.0:
        return 0.0
    return min(max((cosine - baseline) / (1.0 - baseline), 0.0), 1.0)


def keyword_evidence(bm25: float, ceiling: float) -> float:
    """A BM25 score as a share of the query's highest attainable score, clipped to [0, 1]."""
    if ceiling <= 0.0:
        return 0.0
    return min(max(bm25 / ceiling, 0.0), 1.0)


def score_hits(
    hits: Sequence[FusedHit], weights: Mapping[str, float], *, vector_baseline: float, keyword_ceiling: float
) -> None:
    """Set each hit's ``relevance``: its legs' evidence averaged with the ``weights`` of the legs that counted
    (a leg that did not return the hit adds 0), capped by the hits ranked before it, times the hit's fused
    score as a share of the top hit's — so the top hit keeps its own evidence and relevance falls with rank."""
    counted = {leg: w for leg, w in weights.items() if w > 0}
    total = sum(counted.values())
    top = hits[0].score if hits else 0.0
    # vector_evidence and keyword_evidence inlined (the same float operations; a search scores k hits), each
    # min(max(x, 0.0), 1.0) written as comparisons: the same value (NaN and -0.0 included), without two calls
    legs = [(leg, w, leg == "vector") for leg, w in counted.items() if leg in ("vector", "keyword")]
    span = 1.0 - vector_baseline
    no_vector, no_keyword = vector_baseline >= 1.0, keyword_ceiling <= 0.0
    cap = 1.0
    for hit in hits:
        evidence = 0.0
        raws = hit.raw_scores
        for leg, w, is_vector in legs:
            raw = raws.get(leg)
            if raw is None:
                continue
            if is_vector:
                e = 0.0 if no_vector else (raw - vector_baseline) / span
            else:
                e = 0.0 if no_keyword else raw / keyword_ceiling
            evidence += w * (0.0 if e < 0.0 else 1.0 if e > 1.0 else e)  # noqa: FURB136 - no call
        mean = evidence / total if total > 0 else 0.0
        if mean < cap:  # noqa: PLR1730 - min(cap, mean) without a call
            cap = mean
        if top > 0:
            share = hit.score / top
            hit.relevance = cap * (0.0 if share < 0.0 else 1.0 if share > 1.0 else share)  # noqa: FURB136
        else:
            hit.relevance = cap * 0.0


def check_score_threshold(value: Any) -> float | None:
    """``value`` as a float in [0, 1], the scale of every score, reranked ones too (``None``: no threshold)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"score_threshold: expected a number in [0, 1] or None, got {value!r}")
    return float(value)
