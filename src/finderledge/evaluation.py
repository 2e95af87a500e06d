"""Retrieval evaluation: load a dataset, index it, run each search mode, score it, time it.

Two kinds of dataset:

* a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``), scored with nDCG@10,
  Recall@10, Recall@100 and MRR@10.  BEIR conventions: only queries present in both ``queries.jsonl``
  and the qrels, with at least one relevant document, are evaluated; a qrel score > 0 is relevant and
  its value is the gain for nDCG (linear gains, as trec_eval); a query without results scores 0.
  The metrics are tested against ``ir_measures`` on the same run (``tests/integration/test_evaluation.py``).
* a question file over an index you built (``finderledge add``): a JSON list of
  ``{"query", "expected_source", "expected_keywords"}`` or JSONL of ``{"question", "gold_sources"}``,
  scored with Retrieval@k (a gold source among the top k), Recall@k (share of gold sources in the top k)
  and KeywordRecall@k (share of expected keywords found in the top-k texts).  A gold id names a file
  (``docs/faq.md``), a page or row (``manual.pdf:p3``, ``data.csv:r1``: the loader's ``source_id``) or a
  chunk (``jawiki:<title>#2``: ``split_index`` 2 of that source); :func:`gold_level` tells which.

BEIR relevance is judged per *corpus document*: when a document was split into several chunks, each
result chunk is mapped to its ``beir_id`` and only the first occurrence of each document keeps its rank;
later chunks of the same document are dropped.  Each mode runs one untimed warm-up query first, and the modes
run interleaved query by query, so none pays for another's warm-up or a burst of machine load.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document

from .config import SEARCH_MODES
from .errors import ConfigurationError
from .metadata import info_of, source_of
from .progress import ProgressLog, bar_fits, ending
from .sources import resolve_source

if TYPE_CHECKING:
    from .facade import FinderLedge
    from .results import SearchTrace

__all__ = [
    "BeirDataset",
    "EvalReport",
    "EvaluationInterrupted",
    "ModeReport",
    "QaItem",
    "evaluate",
    "evaluate_modes",
    "evaluate_questions",
    "format_report",
    "gold_level",
    "gold_matches",
    "index_beir",
    "load_beir",
    "load_questions",
    "mrr_at_k",
    "ndcg_at_k",
    "plot_report",
    "recall_at_k",
    "score_run",
]

logger = logging.getLogger(__name__)

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[str]]  # query id -> ranked corpus ids


@dataclass
class BeirDataset:
    """A BEIR folder in memory: corpus id → (title, text), query id → text, query id → {doc id: grade}."""

    name: str
    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"{path}: line {n} is not JSON ({exc})") from exc
    return rows


def load_beir(folder: str | Path, split: str = "test") -> BeirDataset:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``; keep queries that have qrels."""
    root = Path(folder)
    for required in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (root / required).is_file():
            raise FileNotFoundError(f"BEIR dataset {root}: missing {required}")
    corpus = {
        str(d["_id"]): (str(d.get("title") or ""), str(d.get("text") or ""))
        for d in _read_jsonl(root / "corpus.jsonl")
    }
    queries = {str(d["_id"]): str(d["text"]) for d in _read_jsonl(root / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            parts = line.rstrip("\n").split("\t")
            if n == 1 and not parts[-1].lstrip("-").isdigit():
                continue  # header
            if len(parts) != 3:
                raise ValueError(f"{root}/qrels/{split}.tsv: line {n}: expected 3 tab-separated fields")
            qid, did, grade = parts
            qrels.setdefault(qid, {})[did] = int(grade)
    queries = {q: t for q, t in queries.items() if q in qrels and any(g > 0 for g in qrels[q].values())}
    qrels = {q: r for q, r in qrels.items() if q in queries}
    return BeirDataset(root.name, corpus, queries, qrels)


def ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear gains (trec_eval / BEIR convention)."""
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if grades.get(d, 0) > 0)
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Share of the relevant (grade > 0) documents found in the top ``k``."""
    relevant = {d for d, g in grades.items() if g > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document in the top ``k`` (0 if none)."""
    for i, d in enumerate(ranked[:k]):
        if grades.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def score_run(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@10, Recall@100 and MRR@10 over the queries of ``qrels``."""
    names = ("nDCG@10", "Recall@10", "Recall@100", "MRR@10")
    if not qrels:
        return dict.fromkeys(names, 0.0)
    rows = [
        (
            ndcg_at_k(run.get(q, []), g, 10),
            recall_at_k(run.get(q, []), g, 10),
            recall_at_k(run.get(q, []), g, 100),
            mrr_at_k(run.get(q, []), g, 10),
        )
        for q, g in qrels.items()
    ]
    means = np.mean(np.array(rows), axis=0)
    return {n: float(v) for n, v in zip(names, means)}


def first_occurrence(keys: Iterable[str]) -> list[str]:
    """Keys in order with repeats dropped: several chunks of one document count once, at the best rank."""
    seen: set[str] = set()
    out = []
    for key in keys:
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


# -- timing -----------------------------------------------------------------------------------------------
class _EmbedTimer:
    """Counts the seconds a model spends in ``embed_documents`` (patched on the instance, undone by ``close``)."""

    def __init__(self, embeddings: Any) -> None:
        self.seconds = 0.0
        self._target = embeddings
        self._patched = False
        original: Callable[[list[str]], list[list[float]]] | None = getattr(
            embeddings, "embed_documents", None
        )
        if original is None:
            return

        def timed(texts: list[str]) -> list[list[float]]:
            start = time.perf_counter()
            try:
                return original(texts)
            finally:
                self.seconds += time.perf_counter() - start

        try:
            object.__setattr__(embeddings, "embed_documents", timed)
            self._patched = True
        except (AttributeError, TypeError, ValueError):  # e.g. a frozen pydantic model: no figure
            logger.info("embedding time cannot be measured for %s", type(embeddings).__name__)

    @property
    def measured(self) -> bool:
        return self._patched

    def close(self) -> None:
        if self._patched:
            try:
                object.__delattr__(self._target, "embed_documents")
            except AttributeError:
                pass
            self._patched = False


def _latency_without_embedding(wall: float, timings: SearchTrace | None) -> float:
    """Wall time of one search minus what the query embedding added to it.

    Hybrid runs ``embed + vector`` beside ``keyword``, so without the embedding the legs take
    ``max(vector, keyword)`` instead of ``max(embed + vector, keyword)``; vector mode loses ``embed``.
    """
    if timings is None:
        return wall
    with_embed = max(timings.embed + timings.vector, timings.keyword)
    without = max(timings.vector, timings.keyword)
    return max(wall - with_embed + without, 0.0)


def _summary(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64) if len(ms) else np.zeros(1)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95))}


@dataclass
class ModeReport:
    """Metrics and query latency (ms: mean / p50 / p95) of one search mode.

    ``latency_ms`` is the whole ``search`` call; ``search_ms`` the same without the query embedding;
    ``embed_ms`` the query embedding alone.
    """

    mode: str
    metrics: dict[str, float]
    latency_ms: dict[str, float] = field(default_factory=dict)
    search_ms: dict[str, float] = field(default_factory=dict)
    embed_ms: dict[str, float] = field(default_factory=dict)
    run: dict[str, list[str]] = field(default_factory=dict, repr=False)
    per_query: list[dict[str, Any]] = field(default_factory=list, repr=False)  # see :func:`query_row`

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, without the run; with each query's hits (``per_query``)."""
        return {
            "mode": self.mode,
            **self.metrics,
            "latency_ms": self.latency_ms,
            "search_ms": self.search_ms,
            "embed_ms": self.embed_ms,
            "per_query": self.per_query,
        }


def query_row(qid: str, query: str, gold_ranks: Mapping[str, int | None]) -> dict[str, Any]:
    """One query's line of a report: whether a gold id was found (``hit``), how many (``hits``), and each
    gold id with the rank (from 1) of its first result in the top k, ``None`` when it was not there."""
    found = sum(r is not None for r in gold_ranks.values())
    return {
        "id": qid,
        "query": query,
        "hit": found > 0,
        "hits": found,
        "gold": [{"id": g, "rank": r} for g, r in gold_ranks.items()],
    }


def _first_rank(ranked: Sequence[Any], match: Any) -> int | None:
    """The rank (from 1) of the first of ``ranked`` that ``match`` accepts, else ``None``."""
    return next((i for i, item in enumerate(ranked, start=1) if match(item)), None)


def index_beir(
    ledger: FinderLedge, dataset: BeirDataset, *, batch_size: int = 512, show_progress: bool | None = None
) -> float:
    """Add every corpus document (``title`` + blank line + ``text``) with ``beir_id`` metadata (and ``title``, which
    ``chunk_context`` carries into every chunk); returns seconds."""
    start = time.perf_counter()
    items = list(dataset.corpus.items())
    batches: Iterable[int] = range(0, len(items), batch_size)
    log = None
    if show_progress if show_progress is not None else bar_fits():
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=f"indexing {dataset.name}", unit="batch")
    else:  # no bar: a log line every few seconds
        log = ProgressLog(f"indexing {dataset.name}", len(items), "document")
    try:
        for s in batches:
            docs = [
                Document(
                    page_content=f"{title}\n\n{text}".strip(),
                    metadata={"beir_id": did, **({"title": title} if title.strip() else {})},
                )
                for did, (title, text) in items[s : s + batch_size]
            ]
            ledger.add_documents(docs)
            if log is not None:
                log.update(len(docs))
        # the calibration the writes started runs in the background: a caller's figures must not depend on
        # whether it ended before its queries (it is counted in the seconds, as when the first query ran it)
        ledger.wait_for_calibration()
    except BaseException as exc:
        if log is not None:
            log.close(ending(exc))  # "interrupted" after Ctrl-C, never "done" part way
            log = None
        raise
    finally:
        if log is not None:
            log.close()
    return time.perf_counter() - start


def _run_queries(
    ledger: FinderLedge,
    queries: Sequence[tuple[str, str]],
    modes: Sequence[str],
    k: int,
    desc: str,
    show_progress: bool | None,
) -> dict[str, tuple[dict[str, list[Any]], dict[str, dict[str, float]]]]:
    """Search every query in every mode, the modes interleaved query by query (so model warm-up, caches and
    machine load weigh on each mode alike) after one untimed warm-up search per mode; per mode: results per
    query id and latency summaries."""
    wait = getattr(ledger, "wait_for_calibration", None)
    if wait is not None:  # the figures never depend on when a background calibration ends
        wait()
    iterator: Any = queries
    log = None
    if show_progress if show_progress is not None else bar_fits():
        from tqdm.auto import tqdm

        iterator = tqdm(queries, desc=desc, unit="query")
    else:  # no bar: a log line every few seconds
        log = ProgressLog(f"searching {desc} ({len(modes)} modes a query)", len(queries), "query")
    results: dict[str, dict[str, list[Any]]] = {mode: {} for mode in modes}
    timed: dict[str, tuple[list[float], list[float], list[float]]] = {mode: ([], [], []) for mode in modes}
    if queries:  # untimed: model loading, index opening and first-call caches are not query latency
        for mode in modes:
            logger.debug("warming up %s with %r", mode, queries[0][1])
            ledger.search(queries[0][1], search_mode=mode, k=k)
    done, interrupted = 0, False
    try:
        for qid, text in iterator:
            for mode in modes:
                t0 = time.perf_counter()
                found = ledger.search(text, search_mode=mode, k=k)
                elapsed = time.perf_counter() - t0
                timings: SearchTrace | None = getattr(found, "trace", None)
                wall, search, embed = timed[mode]
                wall.append(elapsed * 1000)
                search.append(_latency_without_embedding(elapsed, timings) * 1000)
                embed.append((timings.embed if timings is not None else 0.0) * 1000)
                results[mode][qid] = found
            done += 1
            if log is not None:
                log.update()
    except KeyboardInterrupt:  # Ctrl-C: keep the queries every mode finished, score those
        finished = {qid for qid, _ in queries[:done]}
        for mode in modes:
            results[mode] = {q: r for q, r in results[mode].items() if q in finished}
            for series in timed[mode]:
                del series[done:]
        logger.warning("interrupted after %d of %d queries: scoring those", done, len(queries))
        interrupted = True
    finally:
        if log is not None:
            log.close("interrupted" if interrupted else "")
    runs = {
        mode: (
            results[mode],
            {
                "latency_ms": _summary(timed[mode][0]),
                "search_ms": _summary(timed[mode][1]),
                "embed_ms": _summary(timed[mode][2]),
            },
        )
        for mode in modes
    }
    if interrupted:
        raise _Partial(done, len(queries), runs)
    return runs


class _Partial(Exception):
    """_run_queries was interrupted: the runs of the ``done`` queries every mode finished."""

    def __init__(self, done: int, total: int, runs: dict[str, Any]) -> None:
        super().__init__(f"interrupted after {done} of {total} queries")
        self.done, self.total, self.runs = done, total, runs


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C while the queries ran: ``reports`` score the ``done`` queries every mode finished (of ``total``);
    from :func:`evaluate`, ``report`` is the whole :class:`EvalReport` of those queries."""

    def __init__(self, done: int, total: int, reports: list[ModeReport]) -> None:
        super().__init__(f"interrupted after {done} of {total} queries")
        self.done, self.total, self.reports = done, total, reports
        self.report: EvalReport | None = None


def evaluate_modes(
    ledger: FinderLedge,
    dataset: BeirDataset,
    modes: Sequence[str] = SEARCH_MODES,
    *,
    k: int = 100,
    show_progress: bool | None = None,
) -> list[ModeReport]:
    """Run every query of ``dataset`` in each mode and score it (results mapped back to ``beir_id``)."""
    reports = []
    partial = None
    try:
        runs = _run_queries(ledger, list(dataset.queries.items()), modes, k, dataset.name, show_progress)
    except _Partial as stop:
        partial, runs = stop, stop.runs
    qrels = dataset.qrels
    if partial is not None:  # scored over the queries that ran
        ran = set(runs[modes[0]][0]) if modes else set()
        qrels = {q: g for q, g in qrels.items() if q in ran}
    for mode in modes:
        results, lat = runs[mode]
        run = {
            qid: first_occurrence(str(r.metadata.get("beir_id")) for r in found)
            for qid, found in results.items()
        }
        rows = [
            query_row(
                qid,
                dataset.queries[qid],
                {
                    g: _first_rank(run[qid], g.__eq__)
                    for g, grade in dataset.qrels.get(qid, {}).items()
                    if grade > 0
                },
            )
            for qid in run
        ]
        reports.append(ModeReport(mode, score_run(run, qrels), run=run, per_query=rows, **lat))
    if partial is not None:
        raise EvaluationInterrupted(partial.done, partial.total, reports)
    return reports


# -- question files -----------------------------------------------------------------------------------------
@dataclass
class QaItem:
    """One question with the sources that answer it and, optionally, keywords the answer contains."""

    id: str
    query: str
    gold_sources: list[str]
    expected_keywords: list[str] = field(default_factory=list)


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    return [str(v) for v in value if str(v)]


def load_questions(path: str | Path) -> list[QaItem]:
    """Read a JSON list of ``{query, expected_source, expected_keywords}`` or JSONL of ``{question, gold_sources}``.

    ``expected_source`` may be a string or a list; either key naming works in either file format.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: not a JSON list ({exc})") from exc
    else:
        rows = _read_jsonl(path)
    items = []
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ValueError(f"{path}: item {n} is not an object")
        query = row.get("query", row.get("question"))
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"{path}: item {n} has no 'query' or 'question' text")
        sources = _as_list(row.get("expected_source", row.get("gold_sources", row.get("expected_sources"))))
        keywords = _as_list(row.get("expected_keywords"))
        if not sources and not keywords:
            raise ValueError(
                f"{path}: item {n} has neither 'expected_source'/'gold_sources' nor 'expected_keywords'"
            )
        items.append(QaItem(str(row.get("id", n)), query, sources, keywords))
    if not items:
        raise ValueError(
            f"{path}: no questions (expected a JSON list of {{query, expected_source}} or JSONL of "
            "{question, gold_sources})"
        )
    return items


def _norm_path(p: str) -> str:
    return os.path.normcase(os.path.normpath(p.replace("\\", "/"))).replace("\\", "/")


def source_matches(result_source: str | None, gold: str) -> bool:
    """Whether a result's ``source`` is the gold source: same path, or one ends with the other at a ``/``.

    So ``docs/faq.md`` matches ``/home/me/project/docs/faq.md`` and ``faq.md``, but ``q.md`` does not.
    """
    if not result_source:
        return False
    a, b = _norm_path(result_source), _norm_path(gold)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


# A gold id's level is read from its form: "<doc>#<n>" (or "#chunk=<n>") names chunk n (``split_index``,
# from 0) of a document; "<path>:<locator>" (a loader locator such as p3, r12, l5, i2) a PDF page, CSV
# row, JSONL line or JSON item; anything else a file or source.
GOLD_LEVELS = ("file", "page", "chunk")
_CHUNK_GOLD = re.compile(r"^(?P<doc>.+)#(?:chunk=)?(?P<n>\d+)$")
_PAGE_GOLD = re.compile(r"^(?P<path>.+):(?P<locator>[a-z]\d+)$")


def gold_level(gold: str) -> str:
    """``"chunk"`` for ``<doc>#<n>``, ``"page"`` for ``<file>:<locator>`` (``p3``, ``r1`` …), else ``"file"``."""
    if _CHUNK_GOLD.match(gold):
        return "chunk"
    return "page" if _PAGE_GOLD.match(gold) else "file"


def _finest(golds: Sequence[str]) -> str:
    levels = {gold_level(g) for g in golds}
    return next((lv for lv in reversed(GOLD_LEVELS) if lv in levels), "file")


def _document_matches(doc: str, md: Mapping[str, Any]) -> bool:
    """Whether a chunk belongs to ``doc``: a source path, a ``source_id``, ``<path>:<locator>`` or a stored id."""
    source = str(md["source"]) if md.get("source") else None
    info = info_of(md)
    if doc in (md.get("source_id"), info.get("parent_id"), info.get("id")) or source_matches(source, doc):
        return True
    if source is None and doc == source_of(md):  # raw text: the text:<parent id> every result shows
        return True
    page = _PAGE_GOLD.match(doc)
    return bool(page and md.get("locator") == page["locator"] and source_matches(source, page["path"]))


def gold_matches(gold: str, metadata: Mapping[str, Any]) -> bool:
    """Whether a result chunk (its metadata) is ``gold``, at the gold id's level (see :func:`gold_level`)."""
    chunk = _CHUNK_GOLD.match(gold)
    if (
        chunk
        and info_of(metadata).get("split_index", 0) == int(chunk["n"])
        and _document_matches(chunk["doc"], metadata)
    ):
        return True
    return _document_matches(gold, metadata)  # a file whose name merely looks like a page or chunk id


def result_label(metadata: Mapping[str, Any], level: str = "file") -> str:
    """How a result is written in a run at ``level``: ``/path/file``, ``/path/file:p3``, ``/path/file:p3#2``."""
    info = info_of(metadata)
    label = str(
        metadata.get("source") or metadata.get("source_id") or info.get("parent_id") or info.get("id")
    )
    if level != "file" and metadata.get("locator"):
        label += f":{metadata['locator']}"
    if level == "chunk":
        label += f"#{info.get('split_index', 0)}"
    return label


def evaluate_questions(
    ledger: FinderLedge,
    items: Sequence[QaItem],
    modes: Sequence[str] = SEARCH_MODES,
    *,
    k: int = 10,
    show_progress: bool | None = None,
) -> list[ModeReport]:
    """Retrieval@k, Recall@k (gold ids, each at its own level) and KeywordRecall@k (expected keywords) of each mode."""
    reports = []
    queries = [(it.id, it.query) for it in items]
    by_id = {it.id: it for it in items}
    partial = None
    try:
        runs = _run_queries(ledger, queries, modes, k, "questions", show_progress)
    except _Partial as stop:
        partial, runs = stop, stop.runs
    for mode in modes:
        results, lat = runs[mode]
        hit, recall, kw = [], [], []
        run: dict[str, list[str]] = {}
        rows: list[dict[str, Any]] = []
        for qid, found in results.items():
            item = by_id[qid]
            top = [r.metadata for r in found[:k]]
            run[qid] = first_occurrence(result_label(md, _finest(item.gold_sources)) for md in top)
            ranks = {
                g: _first_rank(top, lambda md, g=g: gold_matches(resolve_gold(g), md))
                for g in item.gold_sources
            }
            rows.append(query_row(qid, item.query, ranks))
            if item.gold_sources:
                matched = [g for g, r in ranks.items() if r is not None]
                hit.append(1.0 if matched else 0.0)
                recall.append(len(matched) / len(item.gold_sources))
            if item.expected_keywords:
                text = "\n".join(r.content for r in found[:k]).casefold()
                kw.append(
                    sum(w.casefold() in text for w in item.expected_keywords) / len(item.expected_keywords)
                )
        metrics: dict[str, float] = {}
        if hit:
            metrics[f"Retrieval@{k}"] = float(np.mean(hit))
            metrics[f"Recall@{k}"] = float(np.mean(recall))
        if kw:
            metrics[f"KeywordRecall@{k}"] = float(np.mean(kw))
        reports.append(ModeReport(mode, metrics, run=run, per_query=rows, **lat))
    if partial is not None:
        raise EvaluationInterrupted(partial.done, partial.total, reports)
    return reports


def resolve_gold(gold: str) -> str:
    """A gold id with its path part in the stored form (:func:`finderledge.sources.resolve_source`: a path
    relative to the working directory, as given to ``add_document``, becomes absolute)."""
    chunk = _CHUNK_GOLD.match(gold)
    if chunk:
        return f"{resolve_gold(chunk['doc'])}#{chunk['n']}"
    page = _PAGE_GOLD.match(gold)
    if page and resolve_source(gold) == gold:  # not itself the name of an existing file
        return f"{resolve_source(page['path'])}:{page['locator']}"
    return resolve_source(gold)


def unmatched_golds(ledger: FinderLedge, items: Sequence[QaItem]) -> list[str]:
    """The gold ids of ``items`` that no stored document matches (by source, ``source_id`` or id), each once
    and logged once as a warning: such a question can only score 0."""
    golds = list(dict.fromkeys(g for it in items for g in it.gold_sources))
    if not golds:
        return []
    parents = [doc.metadata for doc in ledger.list_documents()]
    missing = []
    for gold in golds:
        chunk = _CHUNK_GOLD.match(gold)
        doc = resolve_gold(chunk["doc"] if chunk else gold)
        if not any(_document_matches(doc, md) for md in parents):
            missing.append(gold)
            logger.warning(
                "gold id %r matches no stored document or source (a relative path is resolved from the "
                "working directory, as add_document resolves it: %s); its questions can only score 0",
                gold,
                doc,
            )
    return missing


# -- one call: load, index (or reuse), evaluate ---------------------------------------------------------------
@dataclass
class EvalReport:
    """Everything ``finderledge eval`` prints."""

    dataset: str
    kind: str  # "beir" or "questions"
    documents: int
    chunks: int
    queries: int
    index_seconds: float | None  # None: an existing index was reused
    embedding_seconds: float | None  # time inside the embedding model while indexing
    modes: list[ModeReport]
    settings: dict[str, Any] = field(default_factory=dict)
    interrupted: str | None = None  # "interrupted after N of M queries": the figures cover those N

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["modes"] = [m.to_dict() for m in self.modes]
        return data


ONE_CHUNK = {"chunk_size": 1_000_000, "chunk_overlap": 0}


def _open_index(
    persist_directory: str | Path | None,
    one_chunk: bool,
    show_progress: bool | None,
    settings: dict[str, Any],
) -> FinderLedge:
    """Open (or create) the index; ``one_chunk`` applies only to an index this call fills, never to a reused one."""
    from .facade import LEDGER_FILE, FinderLedge

    given = {n: v for n, v in settings.items() if v is not None}
    if given.get("reranker") is not None:  # a reranker that fails to load must not yield first-stage figures
        given.setdefault("reranker_on_error", "raise")
    existing = persist_directory is not None and (Path(persist_directory) / LEDGER_FILE).is_file()
    if one_chunk and not existing:
        given.update(ONE_CHUNK)
    fl = FinderLedge(persist_directory, show_progress=show_progress, **given)
    if (
        one_chunk and existing and fl.count()["documents"] == 0
    ):  # an empty index is filled here: one chunk each
        fl.close()
        fl = FinderLedge(persist_directory, show_progress=show_progress, **{**given, **ONE_CHUNK})
    elif one_chunk and existing:
        logger.info(
            "%s already holds documents: reused as built, --one-chunk does not apply", persist_directory
        )
    return fl


def evaluate(
    dataset: str | Path,
    *,
    persist_directory: str | Path | None = None,
    modes: Sequence[str] = SEARCH_MODES,
    split: str = "test",
    one_chunk: bool = False,
    k: int | None = None,
    show_progress: bool | None = None,
    ledger: FinderLedge | None = None,
    **settings: Any,
) -> EvalReport:
    """Evaluate hybrid, vector and keyword search on ``dataset`` (a BEIR folder or a question file).

    A BEIR corpus is indexed into ``persist_directory`` (in memory when ``None``) unless that directory
    already holds documents, which are then reused as built.  A question file needs an existing index
    (``persist_directory`` or ``ledger``).  ``one_chunk`` indexes each corpus document as a single chunk;
    ``settings`` go to :class:`~finderledge.FinderLedge` (``embedding``, ``reranker``, ``fusion`` …).
    """
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigurationError(f"k: expected a positive number of results per query, got {k!r}")
    path = Path(dataset)
    if not path.exists():
        raise FileNotFoundError(f"dataset {path} does not exist")
    beir = path.is_dir()
    if beir:
        data = load_beir(path, split)
    else:
        items = load_questions(path)
        if ledger is None and persist_directory is None:
            raise ValueError(
                "a question file is evaluated against an existing index: pass persist_directory "
                "(finderledge eval FILE --dir INDEX)"
            )
        if ledger is None and persist_directory is not None and not Path(persist_directory).is_dir():
            raise FileNotFoundError(
                f"no index at {persist_directory}: build it first "
                f"(finderledge add PATH --dir {persist_directory})"
            )
    own = ledger is None
    fl = ledger if ledger is not None else _open_index(persist_directory, one_chunk, show_progress, settings)
    stopped: EvaluationInterrupted | None = None
    try:
        index_s: float | None = None
        embed_s: float | None = None
        if beir:
            if fl.count()["documents"] == 0:
                timer = _EmbedTimer(fl.embeddings)
                measured = timer.measured
                try:
                    index_s = index_beir(fl, data, show_progress=show_progress)
                finally:
                    timer.close()
                embed_s = timer.seconds if measured else None
            try:
                reports = evaluate_modes(
                    fl, data, modes, k=100 if k is None else k, show_progress=show_progress
                )
            except EvaluationInterrupted as stop:
                stopped, reports = stop, stop.reports
            name, n_queries, kind = data.name, len(data.queries), "beir"
        else:
            if fl.count()["documents"] == 0:
                raise ValueError(
                    f"the index at {persist_directory} is empty: add the documents first (finderledge add)"
                )
            missing = unmatched_golds(fl, items)
            try:
                reports = evaluate_questions(
                    fl, items, modes, k=10 if k is None else k, show_progress=show_progress
                )
            except EvaluationInterrupted as stop:
                stopped, reports = stop, stop.reports
            name, n_queries, kind = path.name, len(items), "questions"
        counts = fl.count()
        report_settings = _report_settings(fl, settings.get("reranker"))
        if not beir:
            levels = [gold_level(g) for it in items for g in it.gold_sources]
            report_settings["gold_levels"] = {lv: levels.count(lv) for lv in GOLD_LEVELS}
            report_settings["unmatched_gold"] = missing
    finally:
        if own:
            fl.close()
    report = EvalReport(
        name,
        kind,
        counts["documents"],
        counts["chunks"],
        n_queries if stopped is None else stopped.done,
        index_s,
        embed_s,
        reports,
        report_settings,
        interrupted=None if stopped is None else str(stopped),
    )
    if stopped is not None:  # Ctrl-C still stops the caller, with the report of what ran
        stopped.report = report
        raise stopped
    return report


def _report_settings(fl: FinderLedge, reranker: Any) -> dict[str, Any]:
    """The search settings a report records: the Finder's, the calibrated gates, and the reranker with its
    candidate count."""
    out: dict[str, Any] = fl.finder.to_dict() if hasattr(fl, "finder") else {}
    engine = getattr(fl, "engine", None)  # a stand-in ledger (tests) may have none
    calibration = engine.calibrator.current() if engine is not None else None
    if calibration is not None:  # the gates adaptive fusion used, per script group
        out["calibration"] = {
            g: {"mrr": c.mrr, "gates": c.gates, "held_out_mrr": c.held_out_mrr, "priors": c.priors}
            for g, c in calibration.groups.items()
        }
    active = getattr(fl, "reranker", None)
    if active is not None:
        out["reranker"] = reranker if isinstance(reranker, str) else type(active).__name__
        out["rerank_candidates"] = fl.settings.rerank_candidates
    return out


def format_report(report: EvalReport, *, per_query: bool = False) -> str:
    """The table ``finderledge eval`` prints: one row per mode, metrics then latency in ms; with
    ``per_query``, then each query's gold ids with their ranks in each mode (``-``: not in the top k)."""
    index = "reused index" if report.index_seconds is None else f"index {report.index_seconds:.1f} s"
    if report.embedding_seconds is not None:
        index += f" (embedding {report.embedding_seconds:.1f} s)"
    lines = [
        (
            f"{report.dataset}: {report.documents} documents, {report.chunks} chunks, "
            f"{report.queries} queries, {index}"
        )
    ]
    if report.interrupted:
        lines.append(f"{report.interrupted} (Ctrl-C): the figures below cover those queries only")
    names = list(report.modes[0].metrics) if report.modes else []
    header = ["mode", *names, "mean ms", "p50 ms", "p95 ms", "search p50", "embed p50"]
    rows = [
        [
            m.mode,
            *(f"{m.metrics.get(n, float('nan')):.4f}" for n in names),
            *(f"{m.latency_ms[q]:.1f}" for q in ("mean", "p50", "p95")),
            f"{m.search_ms['p50']:.2f}",
            f"{m.embed_ms['p50']:.2f}",
        ]
        for m in report.modes
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:  # the mode left-aligned, numbers right-aligned, two spaces between columns
        lines.append("  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:]))]))
    lines.append(
        "ms: whole search call (modes interleaved, one warm-up query each); 'search' excludes the query embedding "
        "(the results' SearchTrace)"
    )
    levels = report.settings.get("gold_levels")
    if levels:
        lines.append("gold ids: " + ", ".join(f"{n} at {lv} level" for lv, n in levels.items() if n))
    if report.settings.get("reranker"):
        lines.append(
            f"reranked by {report.settings['reranker']} (top {report.settings.get('rerank_candidates')})"
        )
    if report.settings.get("unmatched_gold"):
        lines.append("gold ids matching no stored document: " + ", ".join(report.settings["unmatched_gold"]))
    for group, c in (report.settings.get("calibration") or {}).items():
        lines.append(f"adaptive fusion, {group}: " + _calibration_line(c))
    if per_query:
        lines.extend(_per_query_lines(report))
    return "\n".join(lines)


def _per_query_lines(report: EvalReport) -> list[str]:
    """One line per query: its id, hits per mode, each gold id with its rank per mode, and the query."""
    if not report.modes:
        return []
    modes = [m.mode for m in report.modes]
    lines = ["", "per query (rank of each gold id per mode: " + " / ".join(modes) + "; - = not in the top k)"]
    rows = zip(*(m.per_query for m in report.modes))
    for same in rows:
        first = same[0]
        hits = " ".join(f"{m}={row['hits']}" for m, row in zip(modes, same))
        golds = "; ".join(
            f"{g['id']} "
            + "/".join("-" if row["gold"][i]["rank"] is None else str(row["gold"][i]["rank"]) for row in same)
            for i, g in enumerate(first["gold"])
        )
        lines.append(f"{first['id']}: hits {hits} | {golds or 'no gold ids'} | {first['query']}")
    return lines


def _calibration_line(c: Mapping[str, Any]) -> str:
    """One script group's calibration as ``finderledge eval`` prints it: pseudo-query MRRs, gates, priors."""

    def legs(values: Mapping[str, float] | None) -> str:
        return ", ".join(f"{leg} {v:.2f}" for leg, v in (values or {}).items()) or "-"

    return (
        f"pseudo-query MRR@10 {legs(c.get('mrr'))}; held out {legs(c.get('held_out_mrr'))}; "
        f"gates {legs(c.get('gates'))}; priors {legs(c.get('priors'))}"
    )


def plot_report(report: EvalReport, path: str | Path) -> Path:
    """Write a PNG comparing the modes: quality metrics (bars) and p50 latency (needs ``matplotlib``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install matplotlib") from exc
    names = list(report.modes[0].metrics) if report.modes else []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(len(report.modes), 1)
    xs = np.arange(len(names))
    for i, m in enumerate(report.modes):
        values = [m.metrics[n] for n in names]
        bars = ax1.bar(xs + i * width, values, width, label=m.mode)
        ax1.bar_label(bars, fmt="%.3f", fontsize=7)
    ax1.set_xticks(xs + width * (len(report.modes) - 1) / 2, names)
    ax1.set_ylim(0, 1.05)
    ax1.set_title(f"{report.dataset}: quality")
    ax1.legend(loc="upper left", bbox_to_anchor=(0, -0.12), ncols=len(report.modes), frameon=False)
    ax2.bar([m.mode for m in report.modes], [m.search_ms["p50"] for m in report.modes], label="search")
    ax2.bar(
        [m.mode for m in report.modes],
        [m.embed_ms["p50"] for m in report.modes],
        bottom=[m.search_ms["p50"] for m in report.modes],
        label="query embedding",
    )
    ax2.set_title("p50 latency (ms)")
    ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.12), frameon=False)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
