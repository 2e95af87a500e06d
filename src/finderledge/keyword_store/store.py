"""The BM25 keyword store: the keyword leg of FinderLedge (design in :mod:`finderledge.keyword_store`)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..partitions import PartitionFilter, partition_of, partitions_of
from ..storage.files import index_folder
from ..storage.integrity import corrupt_on_error
from ..storage.segments import MANIFEST, SegmentFiles
from ..tokenizer import AutoTokenizer, Tokenizer, UnknownTokenizerError, tokenizer_from_dict, tokenizer_spec
from .corpus import Corpus
from .files import manifest_body, open_index, save_segments
from .partitions import Partitions, PartitionView
from .scoring import FilterCache, Layout, Scope, TermMemo, doc_freq, partition_scope, score_query, score_text
from .segment import KeywordIndexCorruptError, PreparedBatch, prepare_batch

__all__ = ["KeywordStore"]

logger = logging.getLogger(__name__)


def _stored_tokenizer(path: Path | None, spec: dict[str, Any]) -> Tokenizer:
    """The tokenizer a manifest records; an unregistered name is the caller's to fix (``ValueError``),
    arguments that do not build one mean a damaged manifest (:class:`KeywordIndexCorruptError`)."""
    try:
        return tokenizer_from_dict(spec)
    except UnknownTokenizerError as exc:
        raise ValueError(f"index at {path}: {exc}") from exc
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - whatever a factory raises on crafted arguments
        raise KeywordIndexCorruptError(
            Path(path or ".") / MANIFEST,
            f"its tokenizer {str(spec)[:200]} cannot be rebuilt ({type(exc).__name__}: {str(exc)[:200]})",
        ) from None


class KeywordStore:
    """Incremental, persistent BM25 index over chunks identified by string ids.

    Args:
        path: directory of the index; ``None`` keeps it in memory only.  An existing index there
            is opened (raising :class:`KeywordIndexCorruptError` if it is damaged).
        tokenizer: defaults to :class:`~finderledge.tokenizer.AutoTokenizer` for a new index and
            to the tokenizer recorded in the manifest for an existing one; passing a tokenizer
            whose ``to_dict()`` differs from the recorded one raises ``ValueError``.
        k1, b: BM25 parameters, applied at query time (so they may differ between sessions).  The
            defaults are Anserini's BEIR/MS MARCO baseline values, chosen in docs/evaluation.md.
        buffer_size: chunks kept in the mutable buffer before it becomes a segment.
        merge_factor: segments of one size tier that trigger a merge.
        max_deleted_ratio: tombstone share above which a segment is rewritten.
        verify: check the CRC32 of every file when opening (cheap: sequential reads).
        partition_key: a metadata key whose values are partitions (see :mod:`finderledge.partitions`): a search
            whose filter pins one value scores with that partition's own statistics.  Not stored: it may
            differ between sessions.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        tokenizer: Tokenizer | None = None,
        k1: float = 0.9,
        b: float = 0.4,
        buffer_size: int = 2048,
        merge_factor: int = 8,
        max_deleted_ratio: float = 0.3,
        verify: bool = True,
        partition_key: str | None = None,
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        if merge_factor < 2 or buffer_size < 1:
            raise ValueError("merge_factor must be >= 2 and buffer_size >= 1")
        self.path = Path(path) if path is not None else None
        self.k1, self.b = float(k1), float(b)
        self.buffer_size = int(buffer_size)
        self.merge_factor = int(merge_factor)
        self.max_deleted_ratio = float(max_deleted_ratio)
        self._lock = threading.RLock()
        self._corpus = Corpus(self.buffer_size, self.merge_factor, self.max_deleted_ratio)
        self._generation = 0
        self._committed = self._closed = False
        self._filters = FilterCache()
        self._layout = Layout()  # arrays over all segments, for searches
        self.partition_key = partition_key
        self._partitions = Partitions(partition_key) if partition_key else None
        self._files = None if self.path is None else _folder(self.path)
        stored_spec = self._open(self._files, verify) if self._files and self._files.has_manifest() else None
        if stored_spec is not None:
            if tokenizer is None:
                tokenizer = _stored_tokenizer(self.path, stored_spec)
            elif tokenizer_spec(tokenizer) != stored_spec:
                raise ValueError(
                    f"index at {self.path} was built with tokenizer {stored_spec}, "
                    f"not {tokenizer_spec(tokenizer)}; queries would not match its terms"
                )
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else AutoTokenizer()
        self._tokenizer_spec = stored_spec if stored_spec is not None else tokenizer_spec(self.tokenizer)

    def _open(self, files: SegmentFiles, verify: bool) -> dict[str, Any]:
        """Load the manifest and segments; returns the recorded tokenizer spec.  Every parse or validation
        failure, of any kind, raises :class:`KeywordIndexCorruptError`."""
        with corrupt_on_error(files.manifest_path, KeywordIndexCorruptError):
            opened = open_index(files, verify)
        self._corpus.load(opened)
        self._generation, self._committed = opened.generation, True
        return opened.tokenizer

    # ---------------------------------------------------------------------------------- basics ---
    def __len__(self) -> int:
        return self._corpus.live_count

    def __contains__(self, id: object) -> bool:
        if not isinstance(id, str):
            return False
        with self._lock:
            return id in self._corpus.locator()

    def ids(self) -> set[str]:
        """Ids of all live chunks."""
        with self._lock:
            return set(self._corpus.locator())

    def get_metadata(self, id: str) -> dict[str, Any] | None:
        """The stored metadata of chunk ``id`` (a copy), or ``None`` if it is not in the index."""
        with self._lock:
            return self._corpus.metadata(id)

    def stats(self) -> dict[str, Any]:
        """Counts describing the index layout (segments, tombstones, buffer), for monitoring."""
        with self._lock:
            corpus = self._corpus
            return {
                "chunks": corpus.live_count,
                "total_tokens": corpus.total_len,
                "buffered": len(corpus.buffer),
                "segments": [
                    {"name": s.name, "docs": s.n_docs, "deleted": s.n_deleted, "terms": len(s.terms)}
                    for s in corpus.segments
                ],
            }

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("KeywordStore is closed")

    # ---------------------------------------------------------------------------------- writes ---
    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Add chunks, replacing any chunk that has the same id (upsert).

        Cost is proportional to the chunks added (plus amortised O(log n) merging per chunk).
        Within one call a repeated id keeps its last text.
        """
        self.add_prepared(self.prepare(ids, texts, metadatas))

    def prepare(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
    ) -> PreparedBatch:
        """Validate and tokenize chunks without touching the index (the slow part of :meth:`add`)."""
        self._check_open()
        return prepare_batch(self.tokenizer, ids, texts, metadatas)

    def add_prepared(self, batch: PreparedBatch) -> None:
        """Insert a batch made by :meth:`prepare` (fast: no tokenizing)."""
        if not batch:
            return
        with self._lock:
            self._check_open()
            self._corpus.add(batch)

    def delete(self, ids: Iterable[str]) -> None:
        """Delete chunks by id; unknown ids are ignored.  Cost is proportional to ``len(ids)``."""
        self._check_open()
        if isinstance(ids, str):
            raise TypeError("delete() takes a collection of ids, not a single string")
        with self._lock:
            if self._corpus.remove(ids):
                self._corpus.merge()

    def freeze(self) -> None:
        """Turn the in-memory buffer into an in-memory segment now (nothing is written): a caller about to run
        many searches (the leg calibration) gets them scored vectorised rather than posting by posting."""
        self._check_open()
        with self._lock:
            self._corpus.freeze()
            self._corpus.merge()

    def compact(self) -> None:
        """Merge the buffer and all segments into one segment without tombstones."""
        self._check_open()
        with self._lock:
            self._corpus.compact()

    # ---------------------------------------------------------------------------------- search ---
    def search(
        self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best chunks for ``query`` as ``(id, score)``, best first; only scores > 0.

        ``filter`` (see :mod:`finderledge.filters`) restricts the candidates before top-k
        selection; IDF and average length still describe the whole live corpus, or (with a
        ``partition_key``) the partitions the filter can reach.  Ties are broken by id, so results do
        not depend on the segment layout.
        """
        self._check_open()
        if k <= 0:
            return []
        with self._lock:
            return self._score(query, k, filter)

    def search_many(
        self, queries: Sequence[str], k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[list[tuple[str, float]]]:
        """:meth:`search` of each query, the same results, with each term's postings scored once for all of
        them (the leg calibration's hundreds of sentences share their common words)."""
        self._check_open()
        if k <= 0:
            return [[] for _ in queries]
        memo = TermMemo()  # one scope for all: the same filter, and the index cannot change under the lock
        with self._lock:
            return [self._score(q, k, filter, memo) for q in queries]

    def get_scores(self, query: str, filter: Mapping[str, Any] | None = None) -> dict[str, float]:
        """BM25 score of every chunk that matches ``query`` (chunks with score 0 are left out)."""
        self._check_open()
        with self._lock:
            return dict(self._score(query, None, filter))

    def score_text(self, query: str, text: str) -> float:
        """The BM25 score ``text`` would get for ``query`` as a chunk of this corpus (the corpus's idf and
        average length; ``text`` itself is not counted in them).  Calibration uses it to score a chunk with
        one of its sentences taken out, without writing that chunk."""
        self._check_open()
        qcounts, dcounts = Counter(self.tokenizer(query)), Counter(self.tokenizer(text))
        with self._lock:
            for seg in self._corpus.segments:
                seg.verify()  # postings are read: checked as a search checks them
            return score_text(
                qcounts,
                dcounts,
                self._corpus.stats,
                self.k1,
                self.b,
                lambda term: doc_freq(self._corpus.segments, self._corpus.buffer, term),
            )

    def _score(
        self, query: str, k: int | None, flt: Mapping[str, Any] | None, memo: TermMemo | None = None
    ) -> list[tuple[str, float]]:
        for seg in self._corpus.segments:
            seg.verify()
        scope = self._scope(flt)
        if scope.n_docs == 0:
            return []
        qcounts = Counter(self.tokenizer(query))
        corpus = self._corpus
        return score_query(
            corpus.segments, corpus.buffer, qcounts, scope, (self.k1, self.b), k, memo, self._layout
        )

    def _scope(self, flt: Mapping[str, Any] | None) -> Scope:
        """What a search with filter ``flt`` counts and may return (caller holds the lock)."""
        corpus = self._corpus
        if self._partitions is not None and flt:  # a filter on the key: those partitions' statistics
            value = partition_of(flt, self.partition_key)
            reach = partitions_of(flt, self.partition_key) if value is None else None
            if value is not None or reach is not None:
                part = self._partition_view(value if value is not None else reach)  # type: ignore[arg-type]
                return partition_scope(flt, self.partition_key, corpus.segments, corpus.buffer, part)
        if not flt:
            return Scope(*corpus.stats)
        return self._filters.scope(flt, corpus.segments, corpus.buffer, corpus.stats, corpus.version)

    # ------------------------------------------------------------------------------ partitions ---
    def partition_size(self, value: str | PartitionFilter) -> int:
        """Live chunks in partition ``value``, or in the partitions a filter reaches (needs a ``partition_key``)."""
        with self._lock:
            return self._partition_view(value).n_live

    def partition_ids(self, value: str | PartitionFilter) -> list[str]:
        """Ids of the live chunks in partition ``value``, or in the partitions a filter reaches (needs a
        ``partition_key``)."""
        with self._lock:
            return self._partition_view(value).live_ids(self._corpus.segments)

    def partition_sizes(self) -> dict[str, int]:
        """Live chunks per partition (needs a ``partition_key``)."""
        if self._partitions is None:
            raise ValueError("partition_sizes: this keyword store has no partition_key")
        with self._lock:
            return self._partitions.sizes(self._corpus.segments, self._corpus.buffer)

    def _partition_view(self, value: str | PartitionFilter) -> PartitionView:
        if self._partitions is None:
            raise ValueError("this keyword store has no partition_key")
        corpus = self._corpus
        if isinstance(value, PartitionFilter):
            return self._partitions.view_set(value, corpus.segments, corpus.buffer, corpus.version)
        return self._partitions.view(value, corpus.segments, corpus.buffer, corpus.version)

    # ----------------------------------------------------------------------------- persistence ---
    def flush(self) -> None:
        """Persist changes atomically (no-op in memory or when nothing changed).

        Writes only new segments, changed tombstone files and the manifest (replaced atomically: the
        commit point); files the new manifest no longer names are deleted after.
        """
        self._check_open()
        if self._files is None:
            return
        with self._lock:
            corpus = self._corpus
            if not corpus.dirty and self._committed:
                return
            corpus.freeze()
            corpus.merge()
            self._generation += 1
            save_segments(self._files, corpus.segments, self._generation)
            counters = {
                "generation": self._generation,
                "next_segment": corpus.next_segment,
                "k1": self.k1,
                "b": self.b,
                "tokenizer": self._tokenizer_spec,
                "live_count": corpus.live_count,
                "total_length": corpus.total_len,
            }
            self._files.write_manifest(manifest_body(corpus.segments, counters))
            self._committed, corpus.dirty = True, False
            self._layout.forget_others(corpus.segments)  # merged-away segments: no array of theirs kept
            self._files.collect_garbage(
                [s.name for s in corpus.segments],
                [
                    s.deletes_file.rpartition("/")[2]
                    for s in corpus.segments
                    if s.n_deleted and s.deletes_file
                ],
                extra=(MANIFEST + ".tmp",),
            )

    def close(self, *, flush: bool = True) -> None:
        """Flush (when persistent, unless ``flush=False``) and release the index; further use raises
        ``RuntimeError``."""
        if self._closed:
            return
        if flush:
            self.flush()
        with self._lock:
            self._corpus.clear()
            self._filters.clear()
            self._layout = Layout()  # lets go of the segments
            self._closed = True

    def __enter__(self) -> KeywordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _folder(path: Path) -> SegmentFiles:
    """The index folder's files (a link at ``bm25/`` or inside it is refused before anything is read)."""
    index_folder(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"keyword index path {path} is a file, not a directory")
    files = SegmentFiles(path, KeywordIndexCorruptError)
    if path.is_dir():
        files.check_folders()
    return files
