"""Retrieval evaluation on BEIR-format folders: load, index, run each search mode, score with IR metrics.

BEIR conventions: only queries present in both ``queries.jsonl`` and the qrels are evaluated; a qrel
score > 0 is relevant and its value is the gain for nDCG.  When documents are split into several
chunks, results are mapped back to their corpus document and the first occurrence wins.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document

if TYPE_CHECKING:
    from .facade import FinderLedge

__all__ = [
    "BeirDataset",
    "load_beir",
    "ndcg_at_k",
    "recall_at_k",
    "mrr_at_k",
    "score_run",
    "ModeReport",
    "evaluate_modes",
    "index_beir",
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
    corpus = {str(d["_id"]): (str(d.get("title") or ""), str(d.get("text") or ""))
              for d in _read_jsonl(root / "corpus.jsonl")}
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
    relevant = {d for d, g in grades.items() if g > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float:
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
        (ndcg_at_k(run.get(q, []), g, 10), recall_at_k(run.get(q, []), g, 10),
         recall_at_k(run.get(q, []), g, 100), mrr_at_k(run.get(q, []), g, 10))
        for q, g in qrels.items()
    ]
    means = np.mean(np.array(rows), axis=0)
    return {n: float(v) for n, v in zip(names, means)}


@dataclass
class ModeReport:
    """Metrics and query latency of one search mode."""

    mode: str
    metrics: dict[str, float]
    latency_ms: dict[str, float] = field(default_factory=dict)  # mean / p50 / p95 of the whole search call
    run: dict[str, list[str]] = field(default_factory=dict, repr=False)


def index_beir(ledger: FinderLedge, dataset: BeirDataset, *, batch_size: int = 512,
               show_progress: bool | None = None) -> float:
    """Add every corpus document (``title`` + blank line + ``text``) with ``beir_id`` metadata; returns seconds."""
    start = time.perf_counter()
    items = list(dataset.corpus.items())
    batches = range(0, len(items), batch_size)
    if show_progress if show_progress is not None else sys.stderr.isatty():
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=f"indexing {dataset.name}", unit="batch")  # type: ignore[assignment]
    for s in batches:
        docs = [Document(page_content=f"{title}\n\n{text}".strip(), metadata={"beir_id": did})
                for did, (title, text) in items[s : s + batch_size]]
        ledger.add_documents(docs)
    return time.perf_counter() - start


def evaluate_modes(ledger: FinderLedge, dataset: BeirDataset, modes: Sequence[str] = ("hybrid", "vector", "keyword"),
                   *, k: int = 100, show_progress: bool | None = None) -> list[ModeReport]:
    """Run every query of ``dataset`` in each mode and score it (results mapped back to ``beir_id``)."""
    reports = []
    for mode in modes:
        run: dict[str, list[str]] = {}
        times = []
        queries = list(dataset.queries.items())
        iterator: Any = queries
        if show_progress if show_progress is not None else sys.stderr.isatty():
            from tqdm.auto import tqdm

            iterator = tqdm(queries, desc=f"{dataset.name} {mode}", unit="query")
        for qid, text in iterator:
            t0 = time.perf_counter()
            results = ledger.search(text, search_mode=mode, k=k)
            times.append(time.perf_counter() - t0)
            ranked: list[str] = []
            for r in results:  # chunks of one document: the first occurrence counts
                did = str(r.metadata.get("beir_id"))
                if did not in ranked:
                    ranked.append(did)
            run[qid] = ranked
        ms = np.array(times) * 1000
        latency = {"mean": float(ms.mean()), "p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95))}
        reports.append(ModeReport(mode, score_run(run, dataset.qrels), latency, run))
    return reports
