"""The Finder: runs the vector and keyword legs (concurrently for ``hybrid``) and fuses their rankings."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from ..config import ANY_SCRIPTS, SEARCH_MODES, check_setting
from ..errors import ConfigurationError
from ..filters import compile_filter
from ..partitions import corpus_of
from ..results import SearchTrace
from ..scripts import ANY_SCRIPT, model_scripts, parse_scripts, vector_leg_share
from .adaptive import LegWeights, evidence_fusion, leg_weights, top_evidence
from .calibration import Calibration
from .fusion import FusedHit, Ranking, fuse
from .relevance import BackgroundCache, BackgroundSource, CorpusBackground, score_hits

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

__all__ = [
    "LEG_OVERLAP_MIN",
    "LEG_START_WAIT",
    "Finder",
    "KeywordIndex",
    "VectorIndex",
    "leg_thread_cores",
    "resolve_scripts",
]

logger = logging.getLogger(__name__)

#: seconds a hybrid search waits for its vector leg to start on the leg thread before running the keyword leg
#: (it starts at once unless both leg threads are busy with other searches: then it does not wait longer)
LEG_START_WAIT = 0.005
#: CPU seconds the keyword leg must take (a running mean) before a hybrid search runs its vector leg on a leg
#: thread beside it: handing a leg to another thread and back costs ~0.1 ms on an idle machine and milliseconds
#: on a busy one, more than the overlap saves when the keyword leg is short (10k chunks: 0.1-0.4 ms), so until
#: then both legs run one after the other on the caller's thread (issue 41)
LEG_OVERLAP_MIN = 0.001


class KeywordIndex(Protocol):
    """What the Finder needs from a keyword store."""

    def search(
        self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]: ...


class VectorIndex(Protocol):
    """What the Finder needs from a vector store (:class:`~finderledge.vector_store.VectorStore` or a replica)."""

    def search(
        self, embedding: Any, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]: ...


class Finder:
    """Retrieves chunk ids for a query in ``hybrid``, ``vector`` or ``keyword`` mode.

    Each leg fetches ``candidate_k`` candidates (at least ``k``) with the metadata filter applied inside
    the leg, so fusion sees enough of both lists and a filtered search still fills ``k``.

    ``fusion="adaptive"`` with no ``weights`` sets each leg's weight per query from the corpus's calibrated
    leg competence (``calibration``: a function returning the stored :class:`~finderledge.ranking.calibration.Calibration`
    or None) and the legs' evidence (see :mod:`finderledge.ranking.adaptive`); given ``weights`` are used as they are.

    ``vector_scripts`` names the scripts the embedding model reads (``"auto"``: from the model's name,
    see :func:`~finderledge.ranking.fusion.model_scripts`; ``"any"``: never skip; or e.g. ``"latin"``).  In hybrid
    mode the vector leg is skipped for a query with less than ``min_vector_share`` of its letters in
    those scripts, so an English-only model cannot drag a Japanese query below its keyword result.

    With a ``partition_key`` (see :mod:`finderledge.partitions`), a search whose filter pins one partition
    uses that partition's calibration (``calibration`` is then called with the partition's value).
    """

    def __init__(  # noqa: PLR0913 - public signature: its keyword arguments are the documented API
        self,
        vector_store: VectorIndex | Callable[[], VectorIndex],
        keyword_store: KeywordIndex,
        embeddings: Embeddings | Callable[[], Embeddings],
        *,
        model_id: str | None = None,
        fusion: str = "adaptive",
        rank_constant: int = 60,
        weights: Mapping[str, float] | None = None,
        calibration: Callable[..., Calibration | None] | None = None,
        calibration_pending: Callable[[], bool] | None = None,
        candidate_k: int = 100,
        vector_scripts: str | frozenset[str] = "auto",
        min_vector_share: float = 0.5,
        partition_key: str | None = None,
    ) -> None:
        check_setting(
            "fusion", fusion
        )  # each rule lives in config.Settings: the same check, the same message
        self._vector_store = vector_store
        self.keyword_store = keyword_store
        self._embeddings = embeddings
        self.fusion = fusion
        self.rank_constant = rank_constant
        self.weights = (
            None if weights is None else {"vector": 1.0, "keyword": 1.0, **weights}
        )  # None: adaptive
        self.calibration: Callable[..., Calibration | None] = calibration or (lambda *_: None)
        # whether a corpus calibration is due or under way in the background (the trace says so meanwhile)
        self.calibration_pending: Callable[[], bool] = calibration_pending or (lambda: False)
        self.candidate_k = candidate_k
        self.min_vector_share: float = check_setting("min_vector_share", min_vector_share)
        self.vector_scripts = resolve_scripts(vector_scripts, model_id or self)
        self.backgrounds = BackgroundCache()  # the corpus background that relevance is measured against
        self.partition_key = partition_key
        self._pool: ThreadPoolExecutor | None = None
        self._keyword_seconds = 0.0  # running mean of the keyword leg's time (see LEG_OVERLAP_MIN)

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (given, or created on first use by the function given)."""
        if not hasattr(self._embeddings, "embed_query"):
            self._embeddings = self._embeddings()
        return self._embeddings  # type: ignore[return-value]

    @embeddings.setter
    def embeddings(self, value: Embeddings) -> None:
        self._embeddings = value

    @property
    def vector_store(self) -> VectorIndex:
        if not hasattr(self._vector_store, "search"):
            self._vector_store = self._vector_store()
        return self._vector_store

    def reads(self, query: str) -> bool:
        """Whether the embedding model reads ``query`` (else hybrid search leaves the vector leg out: a search
        prefetches the model only when this is true)."""
        return vector_leg_share(query, self.vector_scripts) >= self.min_vector_share

    def _vector_leg(
        self,
        query: str,
        depth: int,
        flt: Mapping[str, Any] | None,
        timings: SearchTrace,
        seen: list[Any] | None = None,
        started: threading.Event | None = None,
    ) -> list[tuple[str, float]]:
        if started is not None:  # on the leg thread: the caller waits for this before its keyword leg
            started.set()
        start = time.perf_counter()
        vector = self.embeddings.embed_query(query)
        timings.embed = time.perf_counter() - start
        if seen is not None:  # the caller keeps the query vector (for relevance)
            seen.append(vector)
        start = time.perf_counter()
        with _leg_cores():  # FAISS on a leg thread's OpenMP team, whichever thread and mode searches
            hits = self.vector_store.search(vector, depth, flt)
        timings.vector = time.perf_counter() - start
        return hits

    def _keyword_leg(
        self, query: str, depth: int, flt: Mapping[str, Any] | None, timings: SearchTrace
    ) -> list[tuple[str, float]]:
        start, cpu = time.perf_counter(), time.thread_time()
        hits = self.keyword_store.search(query, depth, flt)
        timings.keyword = time.perf_counter() - start
        # its CPU time, not its wall time: on a busy machine a preempted leg is not a longer one
        self._keyword_seconds += 0.2 * (time.thread_time() - cpu - self._keyword_seconds)  # races blur only
        return hits

    def _both_legs(
        self, query: str, depth: int, flt: Mapping[str, Any] | None, timings: SearchTrace, vectors: list[Any]
    ) -> dict[str, list[tuple[str, float]]]:
        """Both legs' rankings: one after the other on this thread while the keyword leg is short
        (:data:`LEG_OVERLAP_MIN`), else the vector leg on a leg thread beside the keyword leg."""
        if self._keyword_seconds < LEG_OVERLAP_MIN:  # a short keyword leg: no hand-off to a leg thread
            vector = self._vector_leg(query, depth, flt, timings, vectors)
            return {"vector": vector, "keyword": self._keyword_leg(query, depth, flt, timings)}
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=2, thread_name_prefix="finderledge-leg", initializer=_leave_a_core()
            )
        started = threading.Event()
        vec = self._pool.submit(self._vector_leg, query, depth, flt, timings, vectors, started)
        # the vector leg goes first: it holds the GIL only until it calls the model or the index (both let
        # it go), while the keyword leg, mostly Python, would hold it until the interpreter's switch
        started.wait(LEG_START_WAIT)
        kw = self._keyword_leg(query, depth, flt, timings)
        return {"vector": vec.result(), "keyword": kw}

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        k: int = 10,
        filter: Mapping[str, Any] | None = None,
        candidate_k: int | None = None,
        trace: SearchTrace | None = None,
        background: BackgroundSource | None = None,
    ) -> list[FusedHit]:
        """Best ``k`` chunk ids for ``query``; scores are fused (hybrid) or the leg's own (single mode).

        With a ``background`` (the corpus's, see :mod:`finderledge.ranking.relevance`) each hit also gets its
        absolute ``relevance``.  ``trace``, when given, receives this call's timings, leg weights and candidate counts."""
        if mode not in SEARCH_MODES:
            raise ConfigurationError(f"search_mode: expected one of {list(SEARCH_MODES)}, got {mode!r}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigurationError(f"k: expected a positive integer, got {k!r}")
        if not isinstance(query, str):
            raise ConfigurationError(f"query: expected a string, got {type(query).__name__}")
        compile_filter(filter)  # validate once, before any leg runs
        if not query.strip():
            return []
        depth = max(k, candidate_k or self.candidate_k)
        timings = trace if trace is not None else SearchTrace()
        timings.mode = mode
        fill: list[tuple[str, float]] = []
        vectors: list[Any] = []
        if mode == "vector":
            rankings = {"vector": self._vector_leg(query, k, filter, timings, vectors)}
        elif mode == "keyword":
            rankings = {"keyword": self._keyword_leg(query, k, filter, timings)}
        elif not self.reads(query):
            # the embedding model cannot read this query: rank by the keyword leg alone (fused score scale);
            # the vector leg only fills up the list when the keyword leg finds fewer than k
            logger.debug(
                "hybrid: vector leg left out for a query outside the model's scripts %s",
                sorted(self.vector_scripts),
            )
            rankings = {"keyword": self._keyword_leg(query, depth, filter, timings)}
            if len(rankings["keyword"]) < k:
                fill = self._vector_leg(query, k, filter, timings)
        else:
            rankings = self._both_legs(query, depth, filter, timings, vectors)
        start = time.perf_counter()
        bg: CorpusBackground | None = None  # measured before fusion when adaptive fusion needs it
        if mode != "hybrid":
            leg, ranking = next(iter(rankings.items()))
            hits = [
                FusedHit(i, float(s), {leg: r}, {leg: float(s)}) for r, (i, s) in enumerate(ranking, start=1)
            ]
            timings.weights = {leg: 1.0}
        else:
            keyword = rankings.get("keyword")
            # fewer BM25 hits than asked means every match is listed and all other chunks score 0
            exhaustive = keyword is not None and len(keyword) < depth
            if self.fusion == "adaptive" and background is not None:
                bg = self._measure(query, vectors, background, timings)
                hits = self._adaptive(
                    query, rankings, exhaustive, timings, corpus_of(filter, self.partition_key), k
                )
            else:
                weights = self.weights or {"vector": 1.0, "keyword": 1.0}
                method = self.fusion
                reason = (
                    "set by the caller" if self.weights is not None else "equal (default for this fusion)"
                )
                if method == "adaptive":  # a Finder on its own, without a corpus to measure evidence against
                    method, reason = (
                        "relative_score",
                        "adaptive fusion needs the corpus background: equal weights",
                    )
                floors = {"keyword": 0.0} if exhaustive else None
                hits = fuse(
                    method, rankings, weights, self.rank_constant, floors, limit=k
                )  # k FusedHits only
                timings.weights = {leg: weights.get(leg, 1.0) for leg in rankings}
                timings.weights_reason = reason
            if "vector" not in rankings:
                timings.weights["vector"] = 0.0
                timings.weights_reason = (
                    "the embedding model does not read this query's script (vector leg left out)"
                )
            if fill:  # after every keyword match, in the vector leg's order, score 0
                found = {h.id for h in hits}
                hits += [
                    FusedHit(i, 0.0, {"vector": r}, {"vector": float(s)})
                    for r, (i, s) in enumerate(fill, start=1)
                    if i not in found
                ]
        timings.fusion = time.perf_counter() - start
        timings.fusion_method = self.fusion if mode == "hybrid" else mode
        timings.candidates = {leg: len(ranking) for leg, ranking in rankings.items()}
        if fill:
            timings.candidates["vector"] = len(fill)
        if background is not None:
            if bg is None:
                self._measure(query, vectors, background, timings)
            self._score(hits, timings)
        return hits[:k]

    def _measure(
        self, query: str, vectors: list[Any], source: BackgroundSource, timings: SearchTrace
    ) -> CorpusBackground:
        """Put the query's background cosine and attainable BM25 score in ``timings`` (once per search: fusion
        and relevance both read them there)."""
        background, timings.background = self.backgrounds.get(source)
        timings.vector_baseline = background.vector_baseline(vectors[0]) if vectors else None
        timings.keyword_ceiling = background.keyword_ceiling(query) if timings.mode != "vector" else None
        return background

    def _adaptive(
        self,
        query: str,
        rankings: Mapping[str, Ranking],
        exhaustive: bool,
        timings: SearchTrace,
        partition: Any = None,
        limit: int | None = None,
    ) -> list[FusedHit]:
        """Evidence-scale fusion with the caller's weights, or with gate x per-query evidence weights; the best
        ``limit`` hits (all: None)."""
        baseline, ceiling = timings.vector_baseline or 0.0, timings.keyword_ceiling or 0.0
        if self.weights is not None:
            chosen = LegWeights(
                {leg: self.weights.get(leg, 1.0) for leg in rankings}, reason="set by the caller"
            )
        elif len(rankings) < 2:
            chosen = LegWeights({leg: 1.0 for leg in rankings}, reason="one leg")
        else:
            # a filter reaching several partitions: no calibration describes them alone (each partition's is
            # measured on it, the corpus's on every partition)
            several = partition is not None and not isinstance(partition, str)
            if several:
                calibration = None
            else:
                calibration = self.calibration() if partition is None else self.calibration(partition)
            group, competence = calibration.competence_for(query) if calibration else ("", None)
            priors: dict[str, float] = {}
            pending = partition is None and self.calibration_pending()
            timings.calibration_pending = pending
            if competence is None:
                gates, source = (
                    {},
                    (
                        "not calibrated (the filter reaches several partitions)"
                        if several
                        else "not calibrated yet"
                        if pending
                        else "not calibrated (too small a corpus, or not written since an upgrade)"
                    ),
                )
            else:
                gates, priors = competence.gates, competence.priors
                script = "" if group == "all" else f" {group}-script"
                source = f"calibrated on {competence.queries}{script} pseudo-queries, MRR@10 " + ", ".join(
                    f"{leg} {m:.2f}" for leg, m in competence.mrr.items()
                )
                if competence.held_out_mrr:
                    source += ", held out " + ", ".join(
                        f"{leg} {m:.2f}" for leg, m in competence.held_out_mrr.items()
                    )
            if pending:
                source += " (a calibration after this process's writes is running in the background)"
            chosen = leg_weights(top_evidence(rankings, baseline, ceiling), gates, source, priors)
        timings.weights, timings.weights_reason = dict(chosen.weights), chosen.reason
        timings.gates, timings.priors, timings.evidence = chosen.gates, chosen.priors, chosen.evidence
        return evidence_fusion(
            rankings,
            chosen.weights,
            vector_baseline=baseline,
            keyword_ceiling=ceiling,
            exhaustive=("keyword",) if exhaustive else (),
            limit=limit,
        )

    def _score(self, hits: list[FusedHit], timings: SearchTrace) -> None:
        """Set every hit's absolute relevance (each is capped by the hits ranked before it only, so the best
        ``k`` get the values they would get in a longer list: it does not depend on ``k``)."""
        start = time.perf_counter()
        score_hits(
            hits,
            timings.weights,
            vector_baseline=timings.vector_baseline or 0.0,
            keyword_ceiling=timings.keyword_ceiling or 0.0,
        )
        timings.relevance = time.perf_counter() - start

    def to_dict(self) -> dict[str, Any]:
        """The Finder's settings (the stores and model are configured by their owner)."""
        return {
            "fusion": self.fusion,
            "rank_constant": self.rank_constant,
            "weights": None if self.weights is None else dict(self.weights),
            "candidate_k": self.candidate_k,
            "vector_scripts": "any"
            if self.vector_scripts == ANY_SCRIPT
            else ",".join(sorted(self.vector_scripts)),
            "min_vector_share": self.min_vector_share,
        }

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def leg_thread_cores(faiss: Any) -> int:
    """OpenMP threads for the vector leg beside the keyword leg: one core fewer than the caller's own count
    (and than this process may use), at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(int(faiss.omp_get_max_threads()), cores - 1))


def _leave_a_core() -> Callable[[], None] | None:
    """The leg threads' initializer: the vector leg's FAISS (OpenMP) team leaves one core to the keyword leg
    that runs at the same time on the caller's thread, so the two do not compete for the cores (on 2 cores a
    1,000,000-row flat search took 2-4 ms longer beside the keyword leg than alone).  OpenMP's thread count
    is per thread: the caller's and every other thread's stay as they are.  None when FAISS is not in use."""
    faiss = sys.modules.get("faiss")  # opened before the first hybrid search; never imported for this
    if faiss is None:
        return None
    threads = leg_thread_cores(faiss)
    return lambda: faiss.omp_set_num_threads(threads)


@contextmanager
def _leg_cores() -> Iterator[None]:
    """The caller's thread searches with the OpenMP thread count a leg thread gets (:func:`leg_thread_cores`),
    its own restored after: on 2 cores a second OpenMP thread beside other processes' work spun 5-8 ms of CPU
    time per 10k-row search (issue 41).  Every vector search takes it, vector mode's too: one query's flat
    search at load 3 took 1.7 ms on one thread and 11 ms on two (10k rows), 16-17 ms and 21-47 ms (100k).
    Nothing to do when FAISS is not in use (or on the leg thread, whose count it already is)."""
    faiss = sys.modules.get("faiss")
    if faiss is None:
        yield
        return
    mine = int(faiss.omp_get_max_threads())
    threads = leg_thread_cores(faiss)
    if threads == mine:
        yield
        return
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(mine)


def resolve_scripts(value: str | frozenset[str], model: str | Finder) -> frozenset[str]:
    """The scripts the model reads; ``model`` is its id, or this Finder (whose model is then loaded)."""
    if isinstance(value, frozenset):
        return value
    if value == "auto":
        if not isinstance(model, str):
            from ..embeddings import embedding_model_id  # the model is loaded: so is this module

            model = embedding_model_id(model.embeddings)
        scripts = model_scripts(model)
        if scripts != ANY_SCRIPT:
            logger.info(
                "embedding model reads %s script only: hybrid search skips the vector leg for "
                "queries written mostly in other scripts",
                sorted(scripts),
            )
        return scripts
    return parse_scripts(check_setting("vector_scripts", value), ANY_SCRIPTS)
