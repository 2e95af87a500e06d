"""BM25 keyword store: the keyword leg of FinderLedge.

Design (Lucene-like, small), one module per part of the data path:

* :mod:`.segment`: immutable **segments** (a CSR inverted index per segment: ``terms`` -> ``indptr`` ->
  ``docs``/``tfs`` numpy arrays, the document lengths, ids and metadata), built and merged by pure functions;
  only a segment's tombstone mask changes, so it can be memory-mapped from disk.  A small mutable in-memory
  **buffer** (plain dicts) takes new chunks; it becomes a segment when it reaches ``buffer_size`` chunks or on
  :meth:`KeywordStore.flush`.
* :mod:`.scoring`: Okapi BM25 with the Lucene IDF as small pure functions.  **Tombstones** mark deleted or
  replaced chunks; document frequencies are counted over live postings only and the live token total and
  chunk count are maintained on every write, so IDF and the average length always describe the live corpus.
  With no tombstone and no filter, a search reads each term's postings over all segments as one array kept by
  the store's :class:`~.scoring.Layout` (bounded, made again when the segment list changes).
* :mod:`.partitions`: per-partition statistics for searches pinned to one value of a ``partition_key``.
* :mod:`.files`: the on-disk format (``docs/keyword_store.md``), kept through the segment layer shared with
  the FAISS store (:mod:`finderledge.storage.segments`: manifest, tombstones, **tiered merging**, garbage
  collection), so each chunk is rewritten O(log n) times and the number of segments stays O(log n).
* :mod:`.store`: :class:`KeywordStore`, which ties them together under one lock.
"""

from __future__ import annotations

from .segment import KeywordIndexCorruptError, PreparedBatch
from .store import KeywordStore

__all__ = ["KeywordIndexCorruptError", "KeywordStore", "PreparedBatch"]
