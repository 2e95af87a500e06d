"""The read path: run the legs, fuse, read the hits' texts as of the searched change, rerank, threshold.

:class:`Searcher` does one :meth:`~finderledge.facade.FinderLedge.search`; the facade only checks nothing
and forwards, as it does to :class:`~finderledge.ingest.write.write.Writer` for writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from ..embedding_names import prefetch
from ..ledgers import ChunkRecord, DocumentRecord
from ..metadata import FL_KEY, info_of
from ..partitions import corpus_of
from ..results import SearchResult, SearchResults, SearchTrace
from ..sources import resolve_source_filter
from ..validation import check_search_options, query_text
from .fusion import FusedHit
from .mmr import DEFAULT_FETCH_K, DEFAULT_LAMBDA_MULT, check_mmr_options, mmr_order
from .records import RecordCache
from .relevance import LedgerBackground, check_score_threshold
from .reranker import rerank_documents

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["Searcher", "annotate", "as_document"]

logger = logging.getLogger(__name__)


class Searcher:
    """Searches of one :class:`~finderledge.engine.Engine` (its finder, replica, ledger and reranker)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._records = RecordCache()  # hits' chunk records, kept while their documents do not change

    def search(
        self,
        query: str,
        *,
        search_mode: str | None,
        k: int | None,
        filter: Mapping[str, Any] | None,
        return_parents: bool,
        candidate_k: int | None,
        rerank: bool,
        score_threshold: float | None,
        mmr: bool = False,
        fetch_k: int | None = None,
        lambda_mult: float | None = None,
    ) -> SearchResults:
        """See :meth:`FinderLedge.search <finderledge.facade.FinderLedge.search>`."""
        engine = self._engine
        started = time.perf_counter()
        query = query_text(query)
        check_search_options(
            {
                "search_mode": search_mode,
                "k": k,
                "filter": filter,
                "return_parents": return_parents,
                "candidate_k": candidate_k,
                "rerank": rerank,
            }
        )
        threshold = check_score_threshold(score_threshold)
        check_mmr_options(mmr, fetch_k, lambda_mult)
        filter = resolve_source_filter(filter)  # a source path as add_document was given it
        trace = SearchTrace()
        mode = search_mode or engine.settings.search_mode
        k = engine.settings.k if k is None else k
        reranking = rerank and engine.reranker is not None
        wanted = max(k, engine.settings.rerank_candidates) if reranking else k
        depth, fetch = candidate_k, wanted
        if return_parents:  # several chunks may share a parent: take every candidate, keep the first of each
            depth = fetch = max(candidate_k or engine.settings.candidate_k, 4 * wanted)
        if mmr:  # diversify among more fused candidates than are returned
            fetch = max(fetch, fetch_k or DEFAULT_FETCH_K)
            depth = max(depth or 0, fetch)
        if mode == "vector" or (mode == "hybrid" and engine.finder.reads(query)):
            prefetch(
                engine.embeddings
            )  # the model loads while the indexes open (not for a query it cannot read)
        if mode != "keyword":
            engine.open_vector_index()  # opened (and caught up) outside the read lock
        # a calibration this process's writes made due runs in the background: the search uses the last one

        def legs() -> list[FusedHit]:  # under the read lock: both legs reflect one ledger seq
            trace.ledger_seq = engine.replica.seq
            return engine.finder.search(
                query,
                mode=mode,
                k=fetch,
                filter=filter,
                candidate_k=depth,
                trace=trace,
                background=LedgerBackground(
                    engine.ledger,
                    engine.keyword_store,
                    corpus_of(filter, engine.settings.partition_key),
                    trace.ledger_seq,
                ),
            )

        hits = engine.replica.reading(legs)  # a damaged index is rebuilt from the ledger and searched again
        if mmr:
            hits = self._diversified(
                hits, DEFAULT_LAMBDA_MULT if lambda_mult is None else float(lambda_mult), trace.ledger_seq
            )
        picked = self._records_for(hits, return_parents, wanted, trace.ledger_seq)
        if reranking and picked:
            assert engine.reranker is not None
            docs = [pick.build() for pick in picked]
            reranked = []
            for i, raw, shown in rerank_documents(engine.reranker, query, docs):  # shown: in [0, 1]
                doc, first = docs[i], picked[i].score
                info_of(doc.metadata).update(
                    fused_score=first, fused_rank=i + 1, rerank_score=raw, relevance_score=shown
                )
                reranked.append((doc, shown))
            if threshold is not None:
                reranked = [(doc, score) for doc, score in reranked if score >= threshold]
            results = [
                SearchResult(doc, score, rank) for rank, (doc, score) in enumerate(reranked[:k], start=1)
            ]
        else:
            if threshold is not None:
                picked = [pick for pick in picked if pick.score >= threshold]
            # each result's Document is built when it is first read (SearchResult.deferred)
            deferred = SearchResult.deferred
            results = [
                deferred(pick.build, pick.score, rank) for rank, pick in enumerate(picked[:k], start=1)
            ]
        trace.total = time.perf_counter() - started
        return SearchResults(results, trace)

    def _diversified(self, hits: Sequence[FusedHit], lambda_mult: float, seq: int) -> list[FusedHit]:
        """The fused hits in maximal-marginal-relevance order (:mod:`finderledge.ranking.mmr`), by their stored vectors."""
        chunks = {
            c.id: c
            for c in self._engine.ledger.get_chunks([h.id for h in hits], with_embedding=True, visible_at=seq)
        }
        relevance = [h.score if h.relevance is None else h.relevance for h in hits]
        vectors = [getattr(chunks.get(h.id), "embedding", None) for h in hits]
        return [hits[i] for i in mmr_order(relevance, vectors, lambda_mult, len(hits))]

    def _records_for(self, hits: Sequence[FusedHit], parents: bool, limit: int, seq: int) -> list[_Pick]:
        """The stored chunks (or their parents, first occurrence only) of fused hits, each with its hit.

        Texts are read as of ``seq``, the change the indexes reflected: a document another writer removed
        since is still returned by this search (it was current when the search ran), never a half-state."""
        ledger = self._engine.ledger
        chunks = self._records.read(
            [h.id for h in hits],
            seq,
            lambda ids: ledger.get_chunks(ids, visible_at=seq),
            lambda old, new: {c.doc_id for c in ledger.changes_since(old, upto=new)},
        )
        left_out = ledger.quarantined()  # documents found damaged, perhaps after the cache kept their chunks
        if left_out:
            chunks = {i: c for i, c in chunks.items() if c.parent_id not in left_out}
        if not parents and len(chunks) == len(hits):  # every hit read (the usual case): one pick each
            return [_Pick(chunks[hit.id], hit) for hit in hits[:limit]]
        out: list[_Pick] = []
        seen: set[str] = set()
        for hit in hits:
            chunk = chunks.get(hit.id)
            if chunk is None:  # removed longer ago than the grace period: never return what the ledger lacks
                logger.debug("search: chunk %s is no longer in the ledger; skipped", hit.id)
                continue
            if parents:
                if chunk.parent_id in seen:
                    continue
                seen.add(chunk.parent_id)
                record = self._engine.ledger.get_document(chunk.parent_id)
                if record is None:
                    continue
                out.append(_Pick(record, hit, chunk.id))
            else:
                out.append(_Pick(chunk, hit))
            if len(out) == limit:
                break
        return out


class _Pick:
    """A record a search returns, with the fused hit that found it; :meth:`build` makes its ``Document``."""

    __slots__ = ("hit", "matched", "record", "score")

    def __init__(
        self, record: DocumentRecord | ChunkRecord, hit: FusedHit, matched: str | None = None
    ) -> None:
        self.record, self.hit, self.matched = record, hit, matched
        self.score = hit.score if hit.relevance is None else hit.relevance  # the result's relevance

    def build(self) -> Document:
        """The record as a ``Document`` annotated with the hit's scores (and the matched chunk of a parent)."""
        doc = as_document(self.record)
        if self.matched is not None:
            info_of(doc.metadata)["matched_chunk_id"] = self.matched
        annotate(doc, self.hit)
        return doc


def as_document(record: DocumentRecord | ChunkRecord) -> Document:
    """A LangChain ``Document`` for a ledger record (a copy, FinderLedge's fields included: callers may
    annotate them)."""
    md = dict(record.metadata)
    md[FL_KEY] = dict(info_of(md))
    return Document(page_content=record.content, metadata=md, id=record.id)


def annotate(doc: Document, hit: FusedHit) -> None:
    """Put the relevance, the fusion's score and each leg's rank and raw score among the result's own fields."""
    info = info_of(doc.metadata)
    info["relevance_score"] = hit.score if hit.relevance is None else hit.relevance
    info["fusion_score"] = hit.score
    for leg in ("vector", "keyword"):
        if leg in hit.ranks:
            info[f"{leg}_rank"] = hit.ranks[leg]
            info[f"{leg}_score"] = hit.raw_scores[leg]
