"""Postgres mode (PostgreSQL ledger + pgvector, local BM25 replica) vs the embedded default, in one run.

Issue 14's benchmarks, on a real PostgreSQL 16 + pgvector started from the ``pgserver`` wheel:

1. **scifact**, one chunk per document: nDCG@10 (hybrid, vector, keyword) in Postgres mode and in the embedded
   modes (SQLite ledger + local Chroma, the default, and + FAISS), all with THE SAME vectors: MiniLM vectors
   read from an embedding cache (``benchmarks/.cache/scores/scifact/ledger.sqlite3`` from earlier runs) and,
   for what it lacks (queries, calibration sentences), computed once and cached under ``--cache-dir``.
2. **synthetic**, 100,000 chunks (texts of a 300-topic vocabulary, Zipf within a topic; 384-d vectors: the
   weighted sum of per-word vectors around their topic's centroid, so neighbours are meaningful) ingested
   through ``add_texts`` in batches, interleaved across modes: ingest time, hybrid (and vector) query latency
   p50/p95 with the modes interleaved query by query, the SQL time of a Postgres-mode search, recall@10 of
   pgvector's HNSW index against exact search, the time a fresh process takes to build its BM25 replica from
   the database (progress bar off), and the time it takes to catch up after another process wrote 1,000
   new documents.

Results go to ``benchmarks/results/postgres.json`` (``--quick``: ``postgres_quick.json``); a table is printed.

    python benchmarks/bench_postgres.py                 # full run (~25 min on 2 loaded cores)
    python benchmarks/bench_postgres.py --quick         # smoke run: tiny sizes
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import logging
import multiprocessing as mp
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"
SCIFACT_CACHE = ROOT / "benchmarks" / ".cache" / "scores" / "scifact" / "ledger.sqlite3"
CACHE_DIR = ROOT / "benchmarks" / ".cache" / "postgres"
RESULTS = ROOT / "benchmarks" / "results"
MINILM_ID = "sentence-transformers:all-MiniLM-L6-v2"  # the model id the scifact cache was written under
DIM = 384
EMBEDDED = ("chroma", "faiss")  # the embedded modes: SQLite ledger + this local vector store
MODES = ("postgres", *EMBEDDED)

logger = logging.getLogger("bench_postgres")

NOTES = {
    "modes": "postgres = FinderLedge(dir, database_url=..., database_schema=...) (PostgreSQL ledger + "
    "pgvector, BM25 replica in dir); chroma = FinderLedge(dir) (the embedded default: SQLite ledger + local "
    "Chroma); faiss = FinderLedge(dir, vector_store='faiss') (exact flat index)",
    "scifact": "one chunk per document, the same MiniLM vectors in every mode (embedding cache); k=100; "
    "ingest_s_without_embedding excludes the seconds spent embedding what the cache lacked",
    "latency": "wall time of FinderLedge.search(k=10), the modes interleaved query by query (order rotated), "
    "after 10 untimed warm-up queries; stages_p50_ms from the search traces (legs run concurrently)",
    "postgres_sql_profile": "psycopg Cursor.execute/fetch* timed over 50 searches (all threads): "
    "statements per search and their time (server + round trip); the rest of the wall time is Python",
    "recall": "pgvector's search() against exact top-k computed with numpy over the same vectors (checked "
    "against pgvector's own exact path on 20 queries); k10 = search(q, 10) (hnsw.ef_search: "
    "library_ef_search_k10), "
    "k100 = search(q, 100) as the hybrid's vector leg asks (candidate_k 100, ef_search 200); "
    "ef_search_sweep_k10: the same k=10 query through pgvector's HNSW path at other ef_search values",
    "replica": "a fresh process (spawn) opens Postgres mode with an empty replica folder: open_s builds the "
    "BM25 replica from the database (progress bar off) and checkpoints it; then this process adds "
    "new_documents through add_texts and the other catches up with refresh(); a third process "
    "reopens the replica folder from its checkpoint",
}


# -- PostgreSQL ----------------------------------------------------------------------------------------------
def start_postgres(directory: Path) -> tuple[str, Any]:
    """PostgreSQL 16 + pgvector from the pgserver wheel, its data in ``directory`` (as tests/helpers/pg_server.py)."""
    import pgserver
    import psycopg

    directory.parent.mkdir(parents=True, exist_ok=True)
    directory.parent.chmod(0o755)  # as root, pgserver runs the server as the user "pgserver"
    server = pgserver.get_server(directory, cleanup_mode="stop")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url, server


def server_settings(url: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        out = {
            name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("server_version", "shared_buffers", "work_mem", "maintenance_work_mem")
        }
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        out["pgvector"] = str(row[0]) if row else "?"
    return out


class SqlTimer:
    """Counts statements and seconds spent in psycopg's ``execute`` (server + round trip) and ``fetch*``
    (decoding rows in Python), from every thread, while installed; ``by_statement`` groups them by their SQL's
    first words."""

    def __init__(self) -> None:
        self.execute_s = 0.0
        self.fetch_s = 0.0
        self.statements = 0
        self.by_statement: dict[str, list[float]] = {}  # label -> [count, seconds]
        self._lock = threading.Lock()
        self._saved: list[tuple[type, str, Any]] = []

    @staticmethod
    def _label(cursor: Any, query: Any) -> str:
        text = query if isinstance(query, str) else query.as_string(cursor.connection)
        return " ".join(str(text).split())[:90]

    def _wrap(self, cls: type, name: str, fetch: bool) -> None:
        original = getattr(cls, name)
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                label = "" if fetch else timer._label(args[0], args[1])
                with timer._lock:
                    if fetch:
                        timer.fetch_s += elapsed
                    else:
                        timer.execute_s += elapsed
                        timer.statements += 1
                        slot = timer.by_statement.setdefault(label, [0, 0.0])
                        slot[0] += 1
                        slot[1] += elapsed

        self._saved.append((cls, name, original))
        setattr(cls, name, timed)

    def __enter__(self) -> Self:
        import psycopg

        for name in ("execute", "executemany"):
            self._wrap(psycopg.Cursor, name, False)
        for name in ("fetchone", "fetchall", "fetchmany"):
            self._wrap(psycopg.Cursor, name, True)
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved.clear()


# -- embeddings ----------------------------------------------------------------------------------------------
class CachedMiniLM(Embeddings):
    """MiniLM vectors from embedding caches, keyed as FinderLedge keys them (``ingest.content_id(text)``).

    Reads the ``embedding_cache`` of earlier scifact runs (read-only) and keeps what it had to compute
    (queries,
    calibration sentences) in ``store``; a miss is embedded by the real offline MiniLM (queries embed like
    passages with this model, so one cache serves both).  Every mode of a run gets this one object: the same
    vectors everywhere."""

    model_name = "cached:all-MiniLM-L6-v2"  # the name keeps FinderLedge's English-only rule for the model

    def __init__(self, sources: Sequence[Path], store: Path) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        for source in sources:
            if source.is_file():
                with contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as db:
                    rows = db.execute(
                        "SELECT text_hash, vector FROM embedding_cache WHERE model = ?", (MINILM_ID,)
                    )
                    self.vectors.update((h, np.frombuffer(v, dtype="<f4")) for h, v in rows)
        store.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(store, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (text_hash TEXT PRIMARY KEY, vector BLOB)")
        self.vectors.update(
            (h, np.frombuffer(v, dtype="<f4")) for h, v in self._db.execute("SELECT * FROM vectors")
        )
        self.counts = dict.fromkeys(
            ("passages_cached", "passages_embedded", "queries_cached", "queries_embedded"), 0
        )
        self.compute_s = 0.0  # seconds spent embedding misses with the real model
        self._model: Embeddings | None = None
        self._lock = threading.Lock()

    def _compute(self, texts: list[str]) -> np.ndarray:
        from finderledge import EmbeddingModelFactory

        start = time.perf_counter()
        if self._model is None:
            self._model = EmbeddingModelFactory.create_embeddings()
        vectors = np.asarray(self._model.embed_documents(texts), dtype=np.float32)
        self.compute_s += time.perf_counter() - start
        return vectors

    def _lookup(self, texts: list[str], kind: str) -> list[list[float]]:
        from finderledge.ingest.write import content_id

        hashes = [content_id(t) for t in texts]
        with self._lock:
            todo = {h: t for h, t in zip(hashes, texts) if h not in self.vectors}
            self.counts[f"{kind}_embedded"] += len(todo)
            self.counts[f"{kind}_cached"] += len(texts) - len(todo)
            if todo:
                new = self._compute(list(todo.values()))
                rows = [(h, v.astype("<f4").tobytes()) for h, v in zip(todo, new)]
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
                self._db.commit()
                self.vectors.update(zip(todo, new))
            return [self.vectors[h].tolist() for h in hashes]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._lookup(texts, "passages")

    def embed_query(self, text: str) -> list[float]:
        return self._lookup([text], "queries")[0]


def _syllables() -> list[str]:
    return [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


class TopicCorpus:
    """A deterministic synthetic corpus: ``topics`` topics of ``per_topic`` words each plus ``general`` common
    words; a text's vector is the normalised, weighted sum of its words' vectors (a word's vector lies near
    its
    topic's centroid; common words are random and weigh little), so texts of one topic are neighbours."""

    def __init__(self, seed: int = 14, topics: int = 300, per_topic: int = 60, general: int = 2000) -> None:
        rng = np.random.default_rng(seed)
        syl = _syllables()
        words: list[str] = []
        seen: set[str] = set()
        while len(words) < general + topics * per_topic:
            word = "".join(syl[i] for i in rng.integers(0, len(syl), int(rng.integers(2, 5))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        self.general, self.topics, self.per_topic = general, topics, per_topic
        self.index = {w: i for i, w in enumerate(words)}
        centroids = _unit(rng.standard_normal((topics, DIM)))
        vectors = _unit(rng.standard_normal((len(words), DIM)))
        topic_of_word = np.arange(len(words) - general) // per_topic
        vectors[general:] = _unit(centroids[topic_of_word] + 0.9 * vectors[general:])
        self.vectors = vectors.astype(np.float32)
        self.weights = np.ones(len(words), dtype=np.float32)
        self.weights[:general] = 0.25
        self._general_p = _zipf(general, 1.1)
        self._topic_p = _zipf(per_topic, 1.0)

    def _topic_words(self, rng: np.random.Generator, topic: int, n: int) -> np.ndarray:
        return self.general + topic * self.per_topic + rng.choice(self.per_topic, n, p=self._topic_p)

    def text(self, n: int) -> str:
        """The ``n``-th document (the same in every process): 30-90 words, ~55 % from its main topic."""
        rng = np.random.default_rng([14, n])
        length = int(rng.integers(30, 91))
        main, other = (int(t) for t in rng.integers(0, self.topics, 2))
        kinds = rng.choice(3, length, p=[0.25, 0.55, 0.20])
        out = np.empty(length, dtype=np.int64)
        out[kinds == 0] = rng.choice(self.general, int((kinds == 0).sum()), p=self._general_p)
        out[kinds == 1] = self._topic_words(rng, main, int((kinds == 1).sum()))
        out[kinds == 2] = self._topic_words(rng, other, int((kinds == 2).sum()))
        return " ".join(self.words[i] for i in out)

    def query(self, n: int) -> str:
        """The ``n``-th query: 3-6 words of one topic and 0-2 common words."""
        rng = np.random.default_rng([41, n])
        topic = int(rng.integers(0, self.topics))
        flat = np.full(self.per_topic, 1.0 / self.per_topic)
        ids = list(
            self.general
            + topic * self.per_topic
            + rng.choice(self.per_topic, int(rng.integers(3, 7)), p=0.5 * flat + 0.5 * self._topic_p)
        )
        ids += list(rng.choice(self.general, int(rng.integers(0, 3)), p=self._general_p))
        return " ".join(self.words[i] for i in rng.permutation(ids))

    def embed(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        for word in text.split():
            i = self.index.get(word)
            if i is None:  # a word outside the vocabulary (marker words): a vector seeded by its hash
                v += np.random.default_rng(zlib.crc32(word.encode())).standard_normal(DIM).astype(np.float32)
            else:
                v += self.weights[i] * self.vectors[i]
        norm = float(np.linalg.norm(v))
        return v / norm if norm > 0 else v


class TopicEmbeddings(Embeddings):
    """:class:`TopicCorpus`'s vectors as a LangChain ``Embeddings`` (deterministic, no model)."""

    def __init__(self, corpus: TopicCorpus) -> None:
        self.corpus = corpus
        self.model_name = "synthetic-topics-384"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.corpus.embed(t).tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.corpus.embed(text).tolist()


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _zipf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


# -- helpers -------------------------------------------------------------------------------------------------
def open_mode(mode: str, workdir: Path, name: str, embedding: Embeddings, url: str, **settings: Any) -> Any:
    """A FinderLedge in ``mode``: Postgres (schema ``name``, BM25 replica in ``workdir/name-postgres``) or
    embedded (SQLite ledger + ``mode``'s local vector store in ``workdir/name-mode``)."""
    from finderledge import FinderLedge

    directory = workdir / f"{name}-{mode}"
    if mode == "postgres":
        return FinderLedge(
            directory,
            database_url=url,
            database_schema=name,
            embedding=embedding,
            show_progress=False,
            **settings,
        )
    return FinderLedge(directory, vector_store=mode, embedding=embedding, show_progress=False, **settings)


def summary_ms(values: Sequence[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64) * 1000 if len(values) else np.zeros(1)
    return {
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "mean": round(float(a.mean()), 2),
    }


def rotated(items: Sequence[str], n: int) -> list[str]:
    """``items`` rotated by ``n``: every mode goes first, second and third equally often."""
    n %= len(items)
    return [*items[n:], *items[:n]]


def interleaved_queries(
    ledgers: dict[str, Any], queries: Sequence[str], search_modes: Sequence[str], k: int, warmup: int = 5
) -> dict[str, dict[str, Any]]:
    """Run every query in every search mode on every ledger, ledgers in rotating order query by query (after
    ``warmup`` untimed queries each); per (ledger, search mode): results, wall seconds and search traces."""
    for q in queries[:warmup]:
        for fl in ledgers.values():
            for sm in search_modes:
                fl.search(q, search_mode=sm, k=k)
    out: dict[str, dict[str, Any]] = {
        f"{m}/{sm}": {"results": [], "wall": [], "traces": []} for m in ledgers for sm in search_modes
    }
    for n, q in enumerate(queries):
        for mode in rotated(list(ledgers), n):
            for sm in search_modes:
                start = time.perf_counter()
                found = ledgers[mode].search(q, search_mode=sm, k=k)
                elapsed = time.perf_counter() - start
                slot = out[f"{mode}/{sm}"]
                slot["results"].append(found)
                slot["wall"].append(elapsed)
                slot["traces"].append(found.trace)
    return out


def leg_times(traces: Sequence[Any]) -> dict[str, float]:
    """p50 (ms) of each stage recorded in the search traces."""
    return {
        part: round(statistics.median(getattr(t, part) for t in traces) * 1000, 2)
        for part in ("embed", "vector", "keyword", "fusion", "relevance", "total")
    }


# -- 1. scifact ----------------------------------------------------------------------------------------------
def bench_scifact(url: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from finderledge.evaluation import first_occurrence, load_beir, ndcg_at_k, score_run

    data = load_beir(args.scifact)
    queries = list(data.queries.items())
    corpus = list(data.corpus.items())
    if args.scifact_docs:  # a subset: the first queries' relevant documents, then others up to the size
        queries = queries[: args.scifact_queries or 20]
        wanted = {d for q, _ in queries for d in data.qrels[q]}
        keep = [item for item in corpus if item[0] in wanted]
        keep += [item for item in corpus if item[0] not in wanted][: max(0, args.scifact_docs - len(keep))]
        corpus = keep
    elif args.scifact_queries:
        queries = queries[: args.scifact_queries]
    qrels = {q: data.qrels[q] for q, _ in queries}
    embedding = CachedMiniLM([args.scifact_cache], args.cache_dir / "minilm_vectors.sqlite3")
    settings = {"chunk_size": 1_000_000, "chunk_overlap": 0}
    embedding.embed_query("dimension probe")  # what FinderLedge asks first (loads the model if uncached)
    ledgers = {m: open_mode(m, workdir, "scifact", embedding, url, **settings) for m in MODES}
    ingest_s = dict.fromkeys(MODES, 0.0)
    for start in range(0, len(corpus), 512):
        docs = [
            Document(page_content=f"{title}\n\n{text}".strip(), metadata={"beir_id": did})
            for did, (title, text) in corpus[start : start + 512]
        ]
        for mode in rotated(list(MODES), start // 512):
            t0, computing = time.perf_counter(), embedding.compute_s
            ledgers[mode].add_documents(docs)
            # not counted: embedding what the cache lacks (calibration sentences: the first mode to ask pays)
            ingest_s[mode] += time.perf_counter() - t0 - (embedding.compute_s - computing)
    logger.info("scifact: %d documents in each mode; %d queries", len(corpus), len(queries))
    at_ingest = dict(embedding.counts)
    runs = interleaved_queries(ledgers, [t for _, t in queries], ("hybrid", "vector", "keyword"), k=100)
    out: dict[str, Any] = {
        "documents": len(corpus),
        "queries": len(queries),
        "ingest_s_without_embedding": _round(ingest_s),
        "embedding_cache": {
            "during_ingest": at_ingest,
            "whole_run": embedding.counts,
            "note": "queries = search queries, calibration sentences and the dimension probe",
        },
        "metrics": {},
        "same_top10_as_postgres": {},
        "latency_ms": {},
    }
    ranked: dict[str, list[list[str]]] = {}
    for key, slot in runs.items():
        run = {
            qid: first_occurrence(str(r.metadata.get("beir_id")) for r in found)
            for (qid, _), found in zip(queries, slot["results"])
        }
        ranked[key] = [run[qid] for qid, _ in queries]
        scores = score_run(run, qrels)
        out["metrics"][key] = {
            "nDCG@10": round(scores["nDCG@10"], 4),
            "Recall@100": round(scores["Recall@100"], 4),
        }
        out["latency_ms"][key] = summary_ms(slot["wall"])
    for sm in ("hybrid", "vector", "keyword"):
        pg = ranked[f"postgres/{sm}"]
        for mode in EMBEDDED:
            other = ranked[f"{mode}/{sm}"]
            same = sum(a[:10] == b[:10] for a, b in zip(pg, other))
            per_query = [
                abs(ndcg_at_k(a, qrels[q], 10) - ndcg_at_k(b, qrels[q], 10))
                for (q, _), a, b in zip(queries, pg, other)
            ]
            out["same_top10_as_postgres"][f"{mode}/{sm}"] = {
                "queries_identical": same,
                "queries": len(pg),
                "nDCG@10_difference": round(
                    out["metrics"][f"postgres/{sm}"]["nDCG@10"] - out["metrics"][f"{mode}/{sm}"]["nDCG@10"], 4
                ),
                "max_per_query_nDCG_difference": round(max(per_query, default=0.0), 4),
            }
    for fl in ledgers.values():
        fl.close()
    return out


# -- 2. synthetic, 100k chunks -------------------------------------------------------------------------------
def _doc_id(n: int) -> str:
    return f"syn{n:07d}"


def ingest_synthetic(
    ledgers: dict[str, Any], corpus: TopicCorpus, start: int, stop: int, batch: int
) -> dict[str, float]:
    """Add documents ``start..stop`` to every ledger through ``add_texts`` in batches, modes interleaved."""
    seconds = dict.fromkeys(ledgers, 0.0)
    for n, lo in enumerate(range(start, stop, batch)):
        hi = min(stop, lo + batch)
        texts = [corpus.text(i) for i in range(lo, hi)]
        ids = [_doc_id(i) for i in range(lo, hi)]
        metas = [{"n": i, "group": i % 10} for i in range(lo, hi)]
        for mode in rotated(list(ledgers), n):
            t0 = time.perf_counter()
            ledgers[mode].add_texts(texts, metadatas=metas, ids=ids)
            seconds[mode] += time.perf_counter() - t0
        if (n + 1) % 10 == 0:
            logger.info(
                "synthetic: %d / %d documents in each mode (%s)",
                hi,
                stop,
                ", ".join(f"{m} {s:.0f} s" for m, s in seconds.items()),
            )
    return seconds


def exact_top(matrix: np.ndarray, ids: list[str], query: np.ndarray, k: int) -> list[str]:
    scores = matrix @ query
    top = np.argpartition(-scores, k)[:k]
    return [ids[i] for i in top[np.argsort(-scores[top])]]


def bench_recall(
    fl_pg: Any, fl_chroma: Any, corpus: TopicCorpus, size: int, queries: Sequence[str]
) -> dict[str, Any]:
    """recall@10 of pgvector's search (HNSW when the table is large) and of Chroma's, against exact search
    (numpy over the same vectors, checked against pgvector's own exact path on a few queries)."""
    from finderledge.ingest.splitter import child_id
    from finderledge.vector_stores import pgvector

    ids = [child_id(_doc_id(i), 0) for i in range(size)]
    matrix = np.stack([corpus.embed(corpus.text(i)) for i in range(size)])
    store = fl_pg.vector_store
    with (
        store._conn() as conn
    ):  # a bench-only look inside: is the HNSW index there, and the exact path's answer
        indexed = pgvector.has_index(conn, store.schema, store.table)
    rec10, rec10_deep, rec100_deep, rec10_chroma, checked, agree = [], [], [], [], 0, 0
    for n, q in enumerate(queries):
        vec = corpus.embed(q)
        truth100 = exact_top(matrix, ids, vec, min(100, size - 1))
        truth10 = set(truth100[:10])
        approx = [i for i, _ in store.search(vec, 10)]
        deep = [i for i, _ in store.search(vec, 100)]  # as the hybrid's vector leg asks (candidate_k = 100)
        rec10.append(len(truth10 & set(approx)) / 10)
        rec10_deep.append(len(truth10 & set(deep[:10])) / 10)
        rec100_deep.append(len(set(truth100) & set(deep)) / len(truth100))
        rec10_chroma.append(len(truth10 & {i for i, _ in fl_chroma.vector_store.search(vec, 10)}) / 10)
        if n < 20:
            with store._conn() as conn:
                exact, _ = store._query(conn, pgvector.vector_literal(vec), 10, "TRUE", [], None, None)
            checked += 1
            agree += len(truth10 & {i for i, _ in exact})
    sweep: dict[str, dict[str, float]] = {}
    if (
        indexed
    ):  # recall@10 and SQL time of search(q, 10) at other hnsw.ef_search values (the library uses 40)
        vecs = [corpus.embed(q) for q in queries]
        truths = [set(exact_top(matrix, ids, v, 10)) for v in vecs]
        for ef in (40, 80, 100, 200, 400):
            got, took = [], []
            with store._conn() as conn:
                for vec, truth in zip(vecs, truths):
                    t0 = time.perf_counter()
                    hits, _ = store._query(conn, pgvector.vector_literal(vec), 10, "TRUE", [], None, ef)
                    took.append(time.perf_counter() - t0)
                    got.append(len(truth & {i for i, _ in hits}) / 10)
            sweep[f"ef_search={ef}"] = {
                "recall@10": round(float(np.mean(got)), 4),
                "queries_below_0.5": int(np.sum(np.asarray(got) < 0.5)),
                "sql_ms_p50": summary_ms(took)["p50"],
            }
    return {
        "queries": len(queries),
        "hnsw_index": indexed,
        # what the library sets for k=10 without a filter (40: pgvector's default, before MIN_EF_SEARCH)
        "library_ef_search_k10": max(getattr(pgvector, "MIN_EF_SEARCH", 40), 20),
        "ef_search_sweep_k10": sweep,
        "pgvector_recall@10_k10": round(float(np.mean(rec10)), 4),
        "pgvector_recall@10_min": round(float(np.min(rec10)), 2),
        "pgvector_queries_recall@10_below_0.5": int(np.sum(np.asarray(rec10) < 0.5)),
        "pgvector_queries_recall@10_below_0.5_at_k100": int(np.sum(np.asarray(rec10_deep) < 0.5)),
        "pgvector_recall@10_k100": round(float(np.mean(rec10_deep)), 4),
        "pgvector_recall@100_k100": round(float(np.mean(rec100_deep)), 4),
        "chroma_recall@10_k10": round(float(np.mean(rec10_chroma)), 4),
        "chroma_queries_recall@10_below_0.5": int(np.sum(np.asarray(rec10_chroma) < 0.5)),
        "exact_reference_agrees_with_pgvector_exact": round(agree / (10 * checked), 4) if checked else None,
    }


def bench_latency(ledgers: dict[str, Any], queries: Sequence[str]) -> dict[str, Any]:
    """Hybrid and vector query latency, modes interleaved query by query; the SQL share in Postgres mode."""
    runs = interleaved_queries(ledgers, queries, ("hybrid", "vector"), k=10, warmup=10)
    out: dict[str, Any] = {"queries": len(queries), "k": 10, "wall_ms": {}, "stages_p50_ms": {}}
    for key, slot in runs.items():
        out["wall_ms"][key] = summary_ms(slot["wall"])
        out["stages_p50_ms"][key] = leg_times(slot["traces"])
    for sm in ("hybrid", "vector"):
        pg = out["wall_ms"][f"postgres/{sm}"]
        for mode in EMBEDDED:
            other = out["wall_ms"][f"{mode}/{sm}"]
            out[f"ratio_{sm}_postgres_vs_{mode}"] = {p: round(pg[p] / other[p], 2) for p in ("p50", "p95")}
    profile: dict[str, Any] = {}
    sample = list(queries[: min(50, len(queries))])
    for sm in ("hybrid", "vector"):
        with SqlTimer() as timer:
            start = time.perf_counter()
            for q in sample:
                ledgers["postgres"].search(q, search_mode=sm, k=10)
            wall = time.perf_counter() - start
        n = len(sample)
        profile[sm] = {
            "queries": n,
            "wall_ms_mean": round(wall / n * 1000, 2),
            "sql_statements_per_search": round(timer.statements / n, 1),
            "sql_execute_ms_per_search": round(timer.execute_s / n * 1000, 2),
            "sql_fetch_ms_per_search": round(timer.fetch_s / n * 1000, 2),
            "statements": {
                label: {"per_search": round(c / n, 2), "ms_per_search": round(t / n * 1000, 3)}
                for label, (c, t) in sorted(timer.by_statement.items(), key=lambda x: -x[1][1])
            },
        }
    out["postgres_sql_profile"] = profile
    return out


def _replica_worker(
    url: str, schema: str, directory: str, embedding: TopicEmbeddings, probe: str, conn: Any
) -> None:
    """A fresh process: open Postgres mode with an empty replica folder (builds BM25 from the database), then
    wait for the other process's 1,000 writes and catch up; reports its timings through ``conn``."""
    from finderledge import FinderLedge

    t0 = time.perf_counter()
    fl = FinderLedge(
        directory, database_url=url, database_schema=schema, embedding=embedding, show_progress=False
    )
    opened = time.perf_counter() - t0
    t1 = time.perf_counter()
    fl.search(probe, k=10)
    first = time.perf_counter() - t1
    conn.send({"open_s": opened, "first_search_s": first, "keyword_chunks": len(fl.keyword_store)})
    marker, probe_new = conn.recv()
    t2 = time.perf_counter()
    seq = fl.refresh()
    caught = time.perf_counter() - t2
    t3 = time.perf_counter()
    # keyword: the marker word only the first new document holds; vector: that document's own text (a query of
    # the marker word alone points in a direction no other vector shares: HNSW's greedy walk may not reach it)
    found = {
        "keyword": [r.id for r in fl.search(marker, search_mode="keyword", k=3)],
        "vector": [r.id for r in fl.search(probe_new, search_mode="vector", k=3)],
    }
    after = time.perf_counter() - t3
    t4 = time.perf_counter()
    fl.close()
    conn.send(
        {
            "catch_up_s": caught,
            "seq": seq,
            "search_after_s": after,
            "found": found,
            "keyword_chunks": None,
            "close_s": time.perf_counter() - t4,
        }
    )


def _reopen_worker(
    url: str, schema: str, directory: str, embedding: TopicEmbeddings, probe: str, conn: Any
) -> None:
    """A fresh process reopening a replica folder that holds a checkpoint: load it and apply what is new."""
    from finderledge import FinderLedge

    t0 = time.perf_counter()
    fl = FinderLedge(
        directory, database_url=url, database_schema=schema, embedding=embedding, show_progress=False
    )
    opened = time.perf_counter() - t0
    t1 = time.perf_counter()
    fl.search(probe, k=10)
    conn.send(
        {
            "open_s": opened,
            "first_search_s": time.perf_counter() - t1,
            "keyword_chunks": len(fl.keyword_store),
        }
    )
    fl.close()


def _in_process(target: Callable[..., None], *args: Any) -> tuple[Any, Any]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(*args, child))
    proc.start()
    return proc, parent


def bench_replica(
    url: str, fl_pg: Any, corpus: TopicCorpus, size: int, new_docs: int, workdir: Path, batch: int
) -> dict[str, Any]:
    """Fresh-process replica build, then catch-up after ``new_docs`` documents written by this process."""
    from finderledge.ingest.splitter import child_id

    directory = workdir / "replica-fresh"
    embedding = TopicEmbeddings(corpus)
    probe = corpus.query(0)
    proc, pipe = _in_process(_replica_worker, url, "synthetic", str(directory), embedding, probe)
    built = pipe.recv()
    marker = "zqmarkerword"
    texts = [corpus.text(i) + (f" {marker}" if i == size else "") for i in range(size, size + new_docs)]
    t0 = time.perf_counter()
    for lo in range(0, new_docs, batch):
        hi = min(new_docs, lo + batch)
        fl_pg.add_texts(
            texts[lo:hi],
            ids=[_doc_id(size + i) for i in range(lo, hi)],
            metadatas=[{"n": size + i, "group": (size + i) % 10} for i in range(lo, hi)],
        )
    written = time.perf_counter() - t0
    pipe.send((marker, texts[0]))
    caught = pipe.recv()
    proc.join(120)
    proc2, pipe2 = _in_process(_reopen_worker, url, "synthetic", str(directory), embedding, probe)
    reopened = pipe2.recv()
    proc2.join(120)
    wanted = child_id(_doc_id(size), 0)
    return {
        "chunks_in_database": size,
        "fresh_process_open_s": round(built["open_s"], 2),
        "fresh_process_first_search_s": round(built["first_search_s"], 3),
        "replica_keyword_chunks": built["keyword_chunks"],
        "new_documents": new_docs,
        "writer_add_texts_s": round(written, 2),
        "catch_up_refresh_s": round(caught["catch_up_s"], 3),
        "search_after_catch_up_s": round(caught["search_after_s"], 3),
        "new_document_found": {sm: wanted in ids for sm, ids in caught["found"].items()},
        "replica_close_checkpoint_s": round(caught["close_s"], 2),
        "reopen_from_checkpoint_open_s": round(reopened["open_s"], 2),
        "reopen_first_search_s": round(reopened["first_search_s"], 3),
        "reopen_keyword_chunks": reopened["keyword_chunks"],
    }


def bench_synthetic(url: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    corpus = TopicCorpus()
    embedding = TopicEmbeddings(corpus)
    settings = {"chunk_size": 100_000, "chunk_overlap": 0}
    ledgers = {m: open_mode(m, workdir, "synthetic", embedding, url, **settings) for m in MODES}
    t0 = time.perf_counter()
    ingest = ingest_synthetic(ledgers, corpus, 0, args.chunks, args.batch)
    logger.info("synthetic ingest done in %.0f s", time.perf_counter() - t0)
    counts = {m: fl.count()["chunks"] for m, fl in ledgers.items()}
    queries = [corpus.query(n) for n in range(args.queries)]
    out: dict[str, Any] = {
        "chunks": counts,
        "batch": args.batch,
        "ingest_s": _round(ingest),
        "ingest_ratio_postgres_vs": {m: round(ingest["postgres"] / ingest[m], 2) for m in EMBEDDED},
    }
    logger.info("latency: %d queries", len(queries))
    out["latency"] = bench_latency(ledgers, queries)
    logger.info("recall")
    out["recall"] = bench_recall(ledgers["postgres"], ledgers["chroma"], corpus, args.chunks, queries)
    for mode in EMBEDDED:
        ledgers[mode].close()
    logger.info("replica build and catch-up")
    out["replica"] = bench_replica(
        url, ledgers["postgres"], corpus, args.chunks, args.new_docs, workdir, args.batch
    )
    ledgers["postgres"].close()
    return out


# -- bulk writes (issue 43): chunks/s of one large add_texts call, this tree against a baseline tree -------------
class GivenEmbeddings(Embeddings):
    """Vectors computed before the timed write (:class:`TopicCorpus`'s), looked up by text: the write is timed
    without embedding."""

    def __init__(self, corpus: TopicCorpus, vectors: dict[str, np.ndarray]) -> None:
        self.corpus, self.vectors = corpus, vectors
        self.model_name = "synthetic-topics-384"

    def _vector(self, text: str) -> list[float]:
        found = self.vectors.get(text)
        return (self.corpus.embed(text) if found is None else found).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def write_worker(url: str, schema: str, chunks: int, folder: str) -> dict[str, Any]:
    """In a process whose ``PYTHONPATH`` picks the tree: one ``add_texts`` call of ``chunks`` one-chunk
    documents into a fresh schema, timed; the HNSW build seconds the library logged; database bytes."""

    from finderledge import FinderLedge

    corpus = TopicCorpus()
    texts = [corpus.text(i) for i in range(chunks)]
    vectors = {t: corpus.embed(t) for t in texts}
    builds: list[str] = []

    class Builds(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if "built the HNSW index" in message or "vector index ready" in message:
                builds.append(message)

    lib = logging.getLogger("finderledge")
    lib.setLevel(logging.INFO)
    lib.addHandler(Builds())
    fl = FinderLedge(
        folder,
        database_url=url,
        database_schema=schema,
        embedding=GivenEmbeddings(corpus, vectors),
        show_progress=False,
        chunk_size=100_000,
        chunk_overlap=0,
    )
    t0 = time.perf_counter()
    fl.add_texts(texts, ids=[_doc_id(i) for i in range(chunks)])
    seconds = time.perf_counter() - t0
    stored = fl.count()["chunks"]
    fl.close()
    sizes = table_sizes(url, schema)
    return {
        "chunks": stored,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(stored / seconds, 1),
        "index_build_log": builds,
        "db_bytes_per_chunk": round(sum(sizes.values()) / max(stored, 1)),
        "table_bytes_per_chunk": {k: round(v / max(stored, 1)) for k, v in sorted(sizes.items())},
    }


def table_sizes(url: str, schema: str) -> dict[str, int]:
    """``pg_total_relation_size`` of each table of ``schema`` after ``VACUUM ANALYZE`` (sizes as they settle:
    dead tuples of the index drop gone)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        return {
            str(r[0]): int(r[1])
            for r in conn.execute(
                "SELECT tablename, pg_total_relation_size(format('%%I.%%I', schemaname, tablename))"
                " FROM pg_tables WHERE schemaname = %s",
                (schema,),
            )
        }


def bench_writes(url: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Chunks/s of one large write, each size with the trees interleaved (a fresh schema and process each)."""
    trees = {"this": ROOT / "src"}
    if args.baseline_src:
        trees = {"baseline": args.baseline_src.resolve(), **trees}
    out: dict[str, Any] = {"trees": {k: str(v) for k, v in trees.items()}, "runs": []}
    for size in args.write_sizes:
        for rep in range(args.write_repeats):
            for name in rotated(list(trees), rep):
                schema = f"w_{name}_{size}_{rep}"
                env = {**os.environ, "PYTHONPATH": str(trees[name])}
                spec = json.dumps([url, schema, size, str(workdir / schema)])
                proc = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--write-worker", spec],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"write worker ({name}, {size}) failed:\n{proc.stderr[-3000:]}")
                run = {
                    "tree": name,
                    "size": size,
                    "rep": rep,
                    **json.loads(proc.stdout.strip().splitlines()[-1]),
                }
                logger.info("writes: %s", run)
                out["runs"].append(run)
    return out


def _round(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in d.items()}


# -- report --------------------------------------------------------------------------------------------------
def table(result: dict[str, Any]) -> str:
    lines = []
    sci = result.get("scifact")
    if sci:
        lines.append(f"scifact ({sci['documents']} docs, {sci['queries']} queries), nDCG@10:")
        lines.append(f"  {'mode':10} {'hybrid':>8} {'vector':>8} {'keyword':>8}   ingest s")
        for mode in MODES:
            row = [sci["metrics"][f"{mode}/{sm}"]["nDCG@10"] for sm in ("hybrid", "vector", "keyword")]
            lines.append(
                f"  {mode:10} {row[0]:8.4f} {row[1]:8.4f} {row[2]:8.4f}   "
                f"{sci['ingest_s_without_embedding'][mode]:8.1f}"
            )
        for key, same in sci["same_top10_as_postgres"].items():
            lines.append(
                f"  postgres vs {key}: identical top 10 for {same['queries_identical']}/{same['queries']} "
                f"queries, nDCG@10 difference {same['nDCG@10_difference']:+.4f}"
            )
    syn = result.get("synthetic")
    if syn:
        lat, rec, rep = syn["latency"], syn["recall"], syn["replica"]
        lines.append(f"synthetic ({syn['chunks']['postgres']} chunks, {lat['queries']} queries):")
        lines.append(
            f"  {'mode':10} {'ingest s':>9} {'hybrid p50':>11} {'p95':>8} {'vector p50':>11} {'p95':>8}  ms"
        )
        for mode in MODES:
            h, v = lat["wall_ms"][f"{mode}/hybrid"], lat["wall_ms"][f"{mode}/vector"]
            lines.append(
                f"  {mode:10} {syn['ingest_s'][mode]:9.1f} {h['p50']:11.2f} {h['p95']:8.2f} "
                f"{v['p50']:11.2f} {v['p95']:8.2f}"
            )
        for mode in EMBEDDED:
            r = lat[f"ratio_hybrid_postgres_vs_{mode}"]
            lines.append(
                f"  hybrid postgres / {mode}: p50 {r['p50']:.2f}x, p95 {r['p95']:.2f}x (target p50 <= 1.5x)"
            )
        prof = lat["postgres_sql_profile"]["hybrid"]
        lines.append(
            f"  postgres hybrid: {prof['sql_statements_per_search']} SQL statements, "
            f"{prof['sql_execute_ms_per_search']} ms execute + {prof['sql_fetch_ms_per_search']} ms fetch "
            f"per search (mean wall {prof['wall_ms_mean']} ms)"
        )
        lines.append(
            f"  recall@10 vs exact: pgvector {rec['pgvector_recall@10_k10']:.4f} (k=10), "
            f"{rec['pgvector_recall@10_k100']:.4f} (top 10 of k=100); chroma "
            f"{rec['chroma_recall@10_k10']:.4f}; HNSW index: {rec['hnsw_index']} (target >= 0.95)"
        )
        lines.append(
            f"  fresh process builds its BM25 replica: {rep['fresh_process_open_s']:.1f} s open + "
            f"{rep['fresh_process_first_search_s']:.2f} s first search; reopen from its checkpoint "
            f"{rep['reopen_from_checkpoint_open_s']:.1f} s"
        )
        lines.append(
            f"  catch-up after {rep['new_documents']} new documents by another process: "
            f"{rep['catch_up_refresh_s']:.2f} s (writer took {rep['writer_add_texts_s']:.1f} s); "
            f"found in {rep['new_document_found']}"
        )
    return "\n".join(lines)


def library_version() -> dict[str, Any]:
    """The commit the library was run at, and src/ files that differed from it (other work in progress)."""
    import subprocess

    def git(*a: str) -> str:
        try:
            return subprocess.run(
                ["git", *a], check=False, cwd=ROOT, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "src_uncommitted": [line[3:] for line in git("status", "--porcelain", "--", "src").splitlines()],
    }


def machine_note(url: str) -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "postgres": server_settings(url),
        "note": "2 CPU cores shared with other jobs; PostgreSQL from the pgserver wheel with its default "
        "settings, on the same machine (Unix socket)",
    }


@contextlib.contextmanager
def postgres(workdir: Path) -> Iterator[tuple[str, Any]]:
    url, server = start_postgres(workdir / "pg" / "pgdata")
    try:
        yield url, server
    finally:
        server.cleanup()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes (a few seconds of work)")
    parser.add_argument("--chunks", type=int, help="synthetic chunks (default 100,000; quick 2,000)")
    parser.add_argument("--queries", type=int, help="synthetic queries (default 200; quick 20)")
    parser.add_argument(
        "--new-docs",
        type=int,
        help="documents another process writes before catch-up (default 1,000; quick 100)",
    )
    parser.add_argument("--batch", type=int, default=2000, help="documents per add_texts call")
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help="BEIR scifact folder")
    parser.add_argument(
        "--scifact-cache",
        type=Path,
        default=SCIFACT_CACHE,
        help="a ledger.sqlite3 whose embedding_cache holds MiniLM vectors of scifact",
    )
    parser.add_argument(
        "--scifact-docs", type=int, help="index this many scifact documents (default all; quick 150)"
    )
    parser.add_argument("--scifact-queries", type=int, help="scifact queries (default all 300; quick 15)")
    parser.add_argument("--skip-scifact", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument(
        "--writes",
        action="store_true",
        help="only the bulk-write benchmark (issue 43): chunks/s of one add_texts call per size",
    )
    parser.add_argument(
        "--write-sizes", type=int, nargs="+", default=[10_000, 100_000], help="chunks per write (--writes)"
    )
    parser.add_argument("--write-repeats", type=int, default=1, help="runs of each size and tree (--writes)")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="another tree's src folder to time too, interleaved (e.g. git archive <commit> src | tar -x -C DIR)",
    )
    parser.add_argument(
        "--exact-threshold",
        type=int,
        help="pgvector.EXACT_THRESHOLD for this run (quick: 500, so the HNSW path runs)",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=CACHE_DIR, help="where computed MiniLM vectors are kept"
    )
    parser.add_argument(
        "--workdir", type=Path, help="scratch folder (default: a new one under /tmp, removed)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="JSON results (default benchmarks/results/postgres.json, quick: postgres_quick.json)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    args.chunks = args.chunks or (2000 if quick else 100_000)
    args.queries = args.queries or (20 if quick else 200)
    args.new_docs = args.new_docs or (100 if quick else 1000)
    if quick:
        args.batch = min(args.batch, 500)
        args.scifact_docs = args.scifact_docs or 150
        args.scifact_queries = args.scifact_queries or 15
        args.exact_threshold = args.exact_threshold or 500
    args.out = args.out or RESULTS / (
        "postgres_writes.json" if args.writes else "postgres_quick.json" if quick else "postgres.json"
    )
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("finderledge").setLevel(logging.WARNING)
    if args.exact_threshold:
        from finderledge.vector_stores import pgvector

        pgvector.EXACT_THRESHOLD = args.exact_threshold  # bench knob: HNSW from this many rows on
    own = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="flbench-pg-", dir="/tmp")) if own else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result: dict[str, Any] = {
        "command": "python benchmarks/bench_postgres.py" + "".join(f" {a}" for a in (argv or sys.argv[1:])),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "library": library_version(),
        "notes": NOTES,
    }
    try:
        with postgres(workdir) as (url, _):
            result["machine"] = machine_note(url)
            result["settings"] = {
                "chunks": args.chunks,
                "queries": args.queries,
                "new_docs": args.new_docs,
                "batch": args.batch,
                "exact_threshold": args.exact_threshold or "library default",
            }
            if args.writes:
                result["writes"] = bench_writes(url, workdir, args)
            elif not args.skip_scifact:
                if args.scifact.is_dir():
                    result["scifact"] = bench_scifact(url, workdir, args)
                else:
                    result["scifact"] = None
                    logger.warning("no scifact dataset at %s: skipped", args.scifact)
            if not args.skip_synthetic and not args.writes:
                result["synthetic"] = bench_synthetic(url, workdir, args)
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(write_table(result["writes"]) if args.writes else table(result))
    print(f"wrote {args.out} ({result['wall_s']} s)")
    return result


def write_table(writes: dict[str, Any]) -> str:
    lines = [
        "| tree | chunks | seconds | chunks/s | DB bytes/chunk | index build |",
        "|---|---|---|---|---|---|",
    ]
    for r in writes["runs"]:
        build = "; ".join(r["index_build_log"]) or "-"
        lines.append(
            f"| {r['tree']} | {r['chunks']} | {r['seconds']} | {r['chunks_per_s']} | {r['db_bytes_per_chunk']} | {build} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-worker":  # bench_writes' child process
        print(json.dumps(write_worker(*json.loads(sys.argv[2]))))
    else:
        main()
