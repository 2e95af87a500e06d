"""The keyword leg inside Qdrant (``keyword_index="engine"`` with ``vector_store="qdrant"``): BM25 as sparse
vectors, the IDF computed by Qdrant at query time (``Modifier.IDF``), the term-frequency saturation at write.

One collection (``<qdrant_collection>_keyword``) holds a point per chunk: the sparse vector ``bm25`` maps each
term id to ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``; a query is the vector of its term counts,
so Qdrant's score ``sum(qtf * idf(t) * w(t))`` is Okapi BM25 with Lucene's IDF, the formula of
:mod:`finderledge.keyword_store.scoring`.  The payload is the vector store's (:func:`qdrant_payload`: the
metadata filter narrows inside the query and :mod:`finderledge.filters` decides) plus ``dl``.

* **Term ids** are the first 4 bytes of the token's BLAKE2b (Qdrant's indices are 32-bit).  Two tokens with
  the same id are one term (their counts add), as in a hashing vectorizer; the expected number of colliding
  pairs in a vocabulary of ``V`` tokens is ``V**2 / 2**33`` (scifact's 26,595 tokens have none; ~116 pairs
  at 1M tokens, mostly rare ones).
* **avgdl** is fixed when weights are written (``avgdl`` in the meta point, set by the first write) while
  ``n_docs``/``total_len`` follow every write; when the live average drifts more than :data:`DRIFT` from it,
  every point is re-weighted with the live average (the term counts are recovered from the weights and
  ``dl``), so the weights never lag by more than ``DRIFT`` (docs/scaling.md measures what that costs).  The
  totals only decide when to re-weight (the IDF is Qdrant's, over the live points); a writer killed between
  a batch's points and the meta point leaves them off by that batch until a re-weight counts them again.
* ``k1``/``b`` and the tokenizer are recorded in the meta point: they are baked into the weights, so a
  process asking for others is refused (:class:`IncompatibleIndexError`) rather than scoring differently.

Where it lives follows the vector store: a Qdrant server (``url``: one collection every process shares,
written through after each ledger commit) or qdrant-client's local mode in its own folder (a replica, sealed
like :class:`~finderledge.vector_stores.qdrant.QdrantVectorStore`'s).
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import IncompatibleIndexError
from ..partitions import PartitionFilter
from ..progress import close_at_exit
from ..tokenizer import AutoTokenizer, Tokenizer, tokenizer_from_dict, tokenizer_spec
from .base import LOCAL, SHARED
from .qdrant import BATCH, close_sealed, import_qdrant, open_client, point_id, query_widening
from .qdrant_filter import ID_KEY, qdrant_payload

__all__ = ["DRIFT", "SPARSE", "QdrantKeywordIndex", "keyword_collection", "term_id"]

logger = logging.getLogger(__name__)

RECORDED = "it is recorded in the Qdrant collection"  # why a tokenizer must have to_dict()

SPARSE = "bm25"  # the sparse vector's name
DL_KEY = "_finderledge_dl"  # a chunk point's token count
META_KEY = "_finderledge_keyword_meta"  # marks the meta point (no vector: outside Qdrant's IDF statistics)
META_ID = str(uuid.uuid5(uuid.UUID("0b7c1f0e-8a52-4d1e-9d3c-2f5b6a4e9c10"), "keyword-meta"))
#: the live average chunk length may differ this much (relative) from the one the weights use before every
#: point is re-weighted (docs/scaling.md, scifact: 0.5 % off keeps 97 % of top-10 lists equal, 1 % only 93 %)
DRIFT = 0.005
_SCROLL = 1000


@lru_cache(maxsize=1 << 18)
def term_id(token: str) -> int:
    """The sparse index of ``token``: 32 bits of its BLAKE2b, the same in every process and version."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "little")


def keyword_collection(collection: str) -> str:
    """The keyword collection that goes with the vector collection ``collection``."""
    return f"{collection}_keyword"


def _term_counts(tokens: Iterable[str]) -> dict[int, int]:
    """Token counts by term id (colliding tokens add up)."""
    out: dict[int, int] = {}
    for token, n in Counter(tokens).items():
        tid = term_id(token)
        out[tid] = out.get(tid, 0) + n
    return out


class QdrantKeywordIndex:
    """BM25 over a Qdrant collection of sparse vectors; the search and write interface of
    :class:`~finderledge.keyword_store.KeywordStore` (``partition_key`` is not supported: Qdrant's IDF is
    collection-wide)."""

    partition_key = None

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        tokenizer: Tokenizer | None = None,
        k1: float = 0.9,
        b: float = 0.4,
        url: str | None = None,
        collection_name: str = "finderledge_keyword",
        api_key: str | None = None,
    ) -> None:
        client_module = import_qdrant()
        from qdrant_client import models

        self._models = models
        self.k1, self.b = float(k1), float(b)
        self.url = url
        self.path = None if path is None or url is not None else Path(path)
        self.location = LOCAL if url is None else SHARED
        self.collection = collection_name
        self.reweights = 0  # times every point was re-weighted (avgdl drift) since this process opened it
        self._client, self._seal = open_client(client_module, self.path, url, api_key, collection_name)
        self._close_client = close_at_exit(self, self._client.close)
        try:
            self.tokenizer = self._open_meta(tokenizer)
            self.flush()
        except BaseException:
            self.close()
            raise

    # -- the meta point ----------------------------------------------------------------------------------
    def _open_meta(self, tokenizer: Tokenizer | None) -> Tokenizer:
        """Create the collection (recording tokenizer, k1, b) or check what it records; the tokenizer to use."""
        models = self._models
        if not self._client.collection_exists(self.collection):
            self._client.create_collection(
                self.collection,
                vectors_config={},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
            if self.url is not None:
                self._client.create_payload_index(self.collection, ID_KEY, field_schema="keyword")
        found = self._client.retrieve(self.collection, ids=[META_ID], with_payload=True)
        tok = tokenizer if tokenizer is not None else None
        if not found:
            tok = tok or AutoTokenizer()
            self.meta: dict[str, Any] = {
                META_KEY: True,
                "tokenizer": tokenizer_spec(tok, RECORDED),
                "k1": self.k1,
                "b": self.b,
                "avgdl": None,
                "n_docs": 0,
                "total_len": 0,
            }
            self._save_meta()
            return tok
        self.meta = dict(found[0].payload or {})
        if tok is None:
            tok = tokenizer_from_dict(self.meta["tokenizer"])
        wanted = {"tokenizer": tokenizer_spec(tok, RECORDED), "k1": self.k1, "b": self.b}
        recorded = {name: self.meta.get(name) for name in wanted}
        if recorded != wanted:
            raise IncompatibleIndexError(
                f"Qdrant collection {self.collection!r}: its keyword weights were written with {recorded}; this "
                f"process asks for {wanted} (settings 'keyword_tokenizer', 'bm25_k1', 'bm25_b' are baked into "
                "the sparse vectors: use the recorded ones, or another qdrant_collection)"
            )
        return tok

    def _fresh_meta(self) -> dict[str, Any]:
        """The meta point as stored now (a shared collection's statistics move with other processes' writes;
        they write under the write lock, so a writer reading it first updates it exactly)."""
        if self.location == SHARED:
            found = self._client.retrieve(self.collection, ids=[META_ID], with_payload=True)
            if found:
                self.meta = dict(found[0].payload or {})
        return self.meta

    def _save_meta(self) -> None:
        self._client.upsert(
            self.collection,
            points=[self._models.PointStruct(id=META_ID, vector={}, payload=self.meta)],
            wait=True,
        )

    # -- sizes ---------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self._fresh_meta().get("n_docs") or 0)

    def ids(self) -> set[str]:
        """Ids of every indexed chunk (reads them all: for checks and rebuilds, never for a search)."""
        out: set[str] = set()
        offset = None
        while True:
            records, offset = self._client.scroll(
                self.collection, limit=_SCROLL, offset=offset, with_payload=[ID_KEY], with_vectors=False
            )
            out.update(str(r.payload[ID_KEY]) for r in records if r.payload and ID_KEY in r.payload)
            if offset is None:
                return out

    def partition_size(self, value: str | PartitionFilter) -> int:
        raise ValueError("this keyword index has no partition_key")

    def partition_ids(self, value: str | PartitionFilter) -> list[str]:
        raise ValueError("this keyword index has no partition_key")

    def partition_sizes(self) -> dict[str, int]:
        raise ValueError("this keyword index has no partition_key")

    # -- writes --------------------------------------------------------------------------------------
    def _weights(self, counts: Mapping[int, int], avgdl: float) -> Any:
        """The sparse vector of a chunk with term counts ``counts`` (BM25's saturated term frequency)."""
        dl = sum(counts.values())
        k1, b = self.k1, self.b
        norm = k1 * (1.0 - b + b * dl / avgdl) if avgdl > 0 else k1
        ids = sorted(counts)
        return self._models.SparseVector(
            indices=ids, values=[counts[t] * (k1 + 1.0) / (counts[t] + norm) for t in ids]
        )

    def prepare(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]] | None = None
    ) -> list[tuple[str, dict[int, int], Mapping[str, Any]]]:
        """Tokenize chunks without touching the collection (the slow part of :meth:`add`)."""
        if len(ids) != len(texts) or (metadatas is not None and len(metadatas) != len(ids)):
            raise ValueError("ids, texts and metadatas must have the same length")
        mds: Sequence[Mapping[str, Any]] = metadatas if metadatas is not None else [{}] * len(ids)
        return [(i, _term_counts(self.tokenizer(t)), md) for i, t, md in zip(ids, texts, mds)]

    def add(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        """Add chunks, replacing those with the same id (a repeated id keeps its last text)."""
        self.add_prepared(self.prepare(ids, texts, metadatas))

    def add_prepared(self, batch: Sequence[tuple[str, dict[int, int], Mapping[str, Any]]]) -> None:
        """Write a batch made by :meth:`prepare`: points upserted, statistics updated, re-weighted on drift."""
        last = {cid: (counts, md) for cid, counts, md in batch}
        if not last:
            return
        if self._seal is not None:
            self._seal.begin()
        self._fresh_meta()
        old = self._lengths(list(last))
        n_docs = int(self.meta["n_docs"]) + len(last) - len(old)
        total = (
            int(self.meta["total_len"]) + sum(sum(c.values()) for c, _ in last.values()) - sum(old.values())
        )
        if self.meta.get("avgdl") is None:  # the first write: its own average
            self.meta["avgdl"] = total / n_docs if n_docs and total else 1.0
        avgdl = float(self.meta["avgdl"])
        points = [
            self._models.PointStruct(
                id=point_id(cid),
                vector={SPARSE: self._weights(counts, avgdl)},
                payload={**qdrant_payload(cid, md), DL_KEY: sum(counts.values())},
            )
            for cid, (counts, md) in last.items()
        ]
        for start in range(0, len(points), BATCH):
            self._client.upsert(self.collection, points=points[start : start + BATCH], wait=True)
        self.meta["n_docs"], self.meta["total_len"] = n_docs, total
        self._save_meta()
        self._maybe_reweight()

    def delete(self, ids: Iterable[str]) -> None:
        """Delete chunks by id; unknown ids are ignored."""
        if isinstance(ids, str):
            raise TypeError("delete() takes a collection of ids, not a single string")
        old = self._lengths(list(dict.fromkeys(ids)))
        if not old:
            return
        self._fresh_meta()
        if self._seal is not None:
            self._seal.begin()
        points: list[Any] = [point_id(i) for i in old]
        for start in range(0, len(points), BATCH):
            self._client.delete(
                self.collection,
                points_selector=self._models.PointIdsList(points=points[start : start + BATCH]),
                wait=True,
            )
        self.meta["n_docs"] = int(self.meta["n_docs"]) - len(old)
        self.meta["total_len"] = int(self.meta["total_len"]) - sum(old.values())
        self._save_meta()
        self._maybe_reweight()

    def _lengths(self, ids: Sequence[str]) -> dict[str, int]:
        """The token counts of those of ``ids`` the collection holds."""
        out: dict[str, int] = {}
        for start in range(0, len(ids), _SCROLL):
            records = self._client.retrieve(
                self.collection,
                ids=[point_id(i) for i in ids[start : start + _SCROLL]],
                with_payload=[ID_KEY, DL_KEY],
                with_vectors=False,
            )
            for r in records:
                if r.payload and ID_KEY in r.payload:
                    out[str(r.payload[ID_KEY])] = int(r.payload.get(DL_KEY, 0))
        return out

    def _maybe_reweight(self) -> None:
        n, total, ref = int(self.meta["n_docs"]), int(self.meta["total_len"]), self.meta.get("avgdl")
        if n <= 0 or total <= 0 or ref is None or self.k1 == 0 or self.b == 0:
            return  # weights do not depend on avgdl
        live = total / n
        if abs(live / float(ref) - 1.0) > DRIFT:
            self.reweight()

    def reweight(self, avgdl: float | None = None) -> None:
        """Write every point's weights again with the live average length (exact totals counted on the way;
        ``avgdl``: this average instead, to measure what a stale one costs)."""
        ref, k1 = float(self.meta["avgdl"]), self.k1
        rows: list[tuple[Any, dict[int, int]]] = []
        offset = None
        while True:
            records, offset = self._client.scroll(
                self.collection, limit=_SCROLL, offset=offset, with_payload=[DL_KEY], with_vectors=[SPARSE]
            )
            for r in records:
                vec = (r.vector or {}).get(SPARSE) if isinstance(r.vector, dict) else None
                if vec is None or not r.payload or DL_KEY not in r.payload:
                    continue
                dl = int(r.payload[DL_KEY])
                norm = k1 * (1.0 - self.b + self.b * dl / ref)
                # w = tf (k1 + 1) / (tf + norm)  =>  tf = w norm / (k1 + 1 - w)
                counts = {
                    int(t): max(1, round(w * norm / (k1 + 1.0 - w))) if w < k1 + 1.0 else dl
                    for t, w in zip(vec.indices, vec.values)
                }
                rows.append((r.id, counts))
            if offset is None:
                break
        n = len(rows)
        total = sum(sum(c.values()) for _, c in rows)
        if avgdl is None:
            avgdl = total / n if n and total else 1.0
        self.reweights += 1
        logger.info(
            "keyword collection %s: re-weighting %d chunks (avgdl %.3f -> %.3f)",
            self.collection,
            n,
            ref,
            avgdl,
        )
        if self._seal is not None:
            self._seal.begin()
        models = self._models
        for start in range(0, n, BATCH):
            self._client.update_vectors(
                self.collection,
                points=[
                    models.PointVectors(id=pid, vector={SPARSE: self._weights(counts, avgdl)})
                    for pid, counts in rows[start : start + BATCH]
                ],
                wait=True,
            )
        self.meta.update(avgdl=avgdl, n_docs=n, total_len=total)
        self._save_meta()

    # -- search --------------------------------------------------------------------------------------
    def _query(self, text: str) -> Any:
        counts = _term_counts(self.tokenizer(text))
        ids = sorted(counts)
        return self._models.SparseVector(indices=ids, values=[float(counts[t]) for t in ids]) if ids else None

    def _scored(self, query: Any, k: int | None, flt: Mapping[str, Any] | None) -> list[tuple[str, float]]:
        """The best ``k`` (None: all) matching chunks, ties by id: Qdrant narrows, compile_filter decides."""
        want = len(self) if k is None else k
        if want <= 0:
            return []
        # a few more than ``want``: ties at the cut are broken by id, as the local leg breaks them
        limit = want + max(10, want)
        hits: list[tuple[str, float]] = []
        for page in query_widening(self._client, self._models, self.collection, query, flt, limit, SPARSE):
            hits = sorted(((i, s) for i, s in page if s > 0), key=lambda h: (-h[1], h[0]))
            if len(hits) > want and hits[want][1] < hits[want - 1][1]:  # the cut falls between two scores
                break
        return hits[:want]

    def search(
        self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best chunks for ``query`` as ``(id, score)``, best first (scores > 0, ties by id)."""
        q = self._query(query)
        if k <= 0 or q is None:
            return []
        return self._scored(q, k, filter)

    def search_many(
        self, queries: Sequence[str], k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[list[tuple[str, float]]]:
        """:meth:`search` of each query."""
        return [self.search(q, k, filter) for q in queries]

    def get_scores(self, query: str, filter: Mapping[str, Any] | None = None) -> dict[str, float]:
        """The score of every chunk that matches ``query``."""
        q = self._query(query)
        return {} if q is None else dict(self._scored(q, None, filter))

    def score_text(self, query: str, text: str) -> float:
        """The score ``text`` would get as a chunk of the collection (not counted in its statistics); each
        term's IDF is read back from Qdrant's score of one posting divided by that posting's weight."""
        qcounts, dcounts = _term_counts(self.tokenizer(query)), _term_counts(self.tokenizer(text))
        shared = [t for t in qcounts if t in dcounts]
        n = len(self)
        if not shared or n == 0:
            return 0.0
        avgdl = float(self.meta.get("avgdl") or 1.0)
        doc = self._weights(dcounts, avgdl)
        weights = dict(zip(doc.indices, doc.values))
        total = 0.0
        for t in shared:
            top = self._client.query_points(
                self.collection,
                query=self._models.SparseVector(indices=[t], values=[1.0]),
                using=SPARSE,
                limit=1,
                with_vectors=[SPARSE],
            ).points
            idf = math.log(1.0 + (n + 0.5) / 0.5)  # a term no chunk holds
            if top:
                vec = top[0].vector[SPARSE]
                w = dict(zip(vec.indices, vec.values)).get(t, 0.0)
                if w > 0:
                    idf = float(top[0].score) / w
            total += qcounts[t] * idf * weights[t]
        return total

    # -- the leg's life ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Seal the local folder as qdrant-client left it (each write is stored at once)."""
        if self._seal is not None:
            self._seal.reseal_if_changed()

    def freeze(self) -> None:
        """Nothing is buffered here."""

    def close(self, *, flush: bool = True) -> None:
        where = "the local Qdrant keyword index"
        self._seal = close_sealed(self._close_client, self._seal, self.path, where, OSError)


def open_qdrant_keyword(
    path: Path | None,
    tokenizer: Tokenizer | None,
    k1: float,
    b: float,
    *,
    url: str | None = None,
    collection: str = "finderledge",
    api_key: str | None = None,
) -> QdrantKeywordIndex:
    """The keyword leg beside the vector collection ``collection``: on the server at ``url``, else under ``path``."""
    return QdrantKeywordIndex(
        path,
        tokenizer=tokenizer,
        k1=k1,
        b=b,
        url=url,
        collection_name=keyword_collection(collection),
        api_key=api_key,
    )
