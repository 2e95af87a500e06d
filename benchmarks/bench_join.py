"""A new app server joins a Postgres-mode index: keyword_index="local" (builds a BM25 replica) vs "engine".

Issue 43's join figures, on a real PostgreSQL 16 + pgvector started from the ``pgserver`` wheel.  One writer
ingests ``--chunks`` synthetic chunks (bench_postgres.py's topic corpus and its 384-d vectors, one chunk a
document) into one schema with ``keyword_index="engine"`` (the ledger keeps BM25 postings too).  Then, for each
mode, a fresh process (spawn) with an EMPTY local directory opens the index and answers its first hybrid
search; it reports the open time, the first search's time, its peak RSS, the bytes written to its local
directory and the rows it read from PostgreSQL (psycopg fetches counted) until then, and afterwards the
keyword-only and hybrid p50 over ``--queries`` queries.  With ``--scifact`` the nDCG@10 of the keyword leg is
measured both ways on BEIR scifact (and jaquad-dev with ``--jaquad``), the same corpus in one ledger.

The writer's figures come with it: chunks/s of its ``add_texts`` calls of ``--batch`` chunks each (one call of
them all: ``COPY`` and one HNSW build after the load, ``ledgers/bulk.py``), and the database bytes per chunk
(``pg_total_relation_size`` of each table after ``VACUUM ANALYZE``) with the bytes of text stored twice
(``documents.content`` and ``chunks.content``); ``--text-share`` adds the same bytes for scifact with the
default chunking.  ``uptime`` is recorded at the start and the end.

Results go to ``benchmarks/results/join_<chunks>.json`` (``--quick``: ``join_quick.json``); a table is printed.
The library's import is timed apart (``import_s``; ``join_s`` = import + open + first search).  The library's
sources are compiled to bytecode first (``compileall``), as ``pip install`` leaves them: with
``PYTHONDONTWRITEBYTECODE=1`` and no ``.pyc`` every joining process would compile every module again, most of
a join on a loaded machine (the JSON records ``finderledge_bytecode_compiled``).
``--repeat N --engine-only`` joins N times (modes alternated) and adds the medians; ``--skip-ingest`` reuses a
``--workdir`` built before.

    python benchmarks/bench_join.py --chunks 10000 --batch 10000     # ~1-2 min on 2 loaded cores
    python benchmarks/bench_join.py --chunks 100000 --batch 100000   # ~7-11 min
    python benchmarks/bench_join.py --quick                          # smoke run
"""

from __future__ import annotations

import argparse
import compileall
import datetime as _dt
import json
import logging
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import (
    TopicCorpus,
    TopicEmbeddings,
    library_version,
    start_postgres,
    table_sizes,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DATASETS = ROOT.parent / "shared" / "datasets"
MODES = ("local", "engine")
SCHEMA = "joining"

logger = logging.getLogger("bench_join")


def _open(directory: Path, url: str, schema: str, embedding: Any, mode: str, **kw: Any) -> Any:
    from finderledge import FinderLedge

    return FinderLedge(
        directory,
        database_url=url,
        database_schema=schema,
        embedding=embedding,
        keyword_index=mode,
        show_progress=False,
        fusion="rrf",  # fixed fusion: no calibration in any process (the same work both ways)
        chunk_size=100_000,
        chunk_overlap=0,
        **kw,
    )


def ingest(url: str, corpus: TopicCorpus, chunks: int, batch: int, workdir: Path) -> dict[str, Any]:
    """The writer: ``chunks`` documents of one chunk each, postings kept in the ledger."""
    fl = _open(workdir / "writer", url, SCHEMA, TopicEmbeddings(corpus), "engine")
    t0 = time.perf_counter()
    for lo in range(0, chunks, batch):
        hi = min(chunks, lo + batch)
        fl.add_texts(
            [corpus.text(i) for i in range(lo, hi)],
            metadatas=[{"n": i, "group": i % 10} for i in range(lo, hi)],
            ids=[f"syn{i:07d}" for i in range(lo, hi)],
        )
        if (lo // batch) % 10 == 9:
            logger.info("ingest: %d / %d (%.0f s)", hi, chunks, time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    count = fl.count()["chunks"]
    fl.close()
    return {
        "chunks": count,
        "write_batch": batch,
        "ingest_s": round(seconds, 1),
        "chunks_per_s": round(count / seconds, 1),
        **database_bytes(url, SCHEMA, count),
    }


def database_bytes(url: str, schema: str, chunks: int) -> dict[str, Any]:
    """What the schema holds on disk per chunk (``pg_total_relation_size`` of each table after ``VACUUM
    ANALYZE``), and the bytes of text stored twice: the documents' and the chunks' ``content`` columns."""
    import psycopg

    sizes = table_sizes(url, schema)
    with psycopg.connect(url, autocommit=True) as conn:
        texts = {}
        for table in ("documents", "chunks"):
            row = conn.execute(
                f"SELECT COALESCE(sum(octet_length(content)), 0), COALESCE(sum(pg_column_size(content)), 0)"
                f' FROM "{schema}".{table}'
            ).fetchone()
            texts[table] = {"text_bytes": int(row[0]), "stored_bytes": int(row[1])}
    total = sum(sizes.values())
    per = max(chunks, 1)
    return {
        "db_bytes": total,
        "db_bytes_per_chunk": round(total / per),
        "table_bytes_per_chunk": {k: round(v / per) for k, v in sorted(sizes.items())},
        "content_columns": texts,
        "text_stored_twice_share_of_db": round(
            min(texts["documents"]["stored_bytes"], texts["chunks"]["stored_bytes"]) / max(total, 1), 4
        ),
    }


def _library_src() -> str:
    import finderledge

    return str(Path(finderledge.__file__).resolve().parent)


def load_note() -> dict[str, Any]:
    """The machine's load (``uptime``), recorded at the start and end of a run."""
    import subprocess

    try:
        text = subprocess.run(["uptime"], capture_output=True, text=True, check=False, timeout=10).stdout
    except OSError:
        text = ""
    return {"uptime": text.strip(), "loadavg": [round(x, 2) for x in os.getloadavg()]}


def _rows_counted() -> list[int]:
    """Count every row psycopg hands this process (fetchone/fetchmany/fetchall and iteration)."""
    import psycopg

    seen = [0]
    cursor = psycopg.Cursor
    fetchall, fetchmany, fetchone, step = cursor.fetchall, cursor.fetchmany, cursor.fetchone, cursor.__next__

    def counted_all(self: Any) -> Any:
        rows = fetchall(self)
        seen[0] += len(rows)
        return rows

    def counted_many(self: Any, size: int = 0) -> Any:
        rows = fetchmany(self, size)
        seen[0] += len(rows)
        return rows

    def counted_one(self: Any) -> Any:
        row = fetchone(self)
        seen[0] += row is not None
        return row

    def counted_next(self: Any) -> Any:
        row = step(self)
        seen[0] += 1
        return row

    cursor.fetchall, cursor.fetchmany, cursor.fetchone = counted_all, counted_many, counted_one  # type: ignore[method-assign]
    cursor.__next__ = counted_next  # type: ignore[method-assign]
    return seen


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: ru_maxrss would carry the spawning parent's peak across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _disk(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) if directory.exists() else 0


def _joiner(url: str, directory: str, mode: str, corpus: TopicCorpus, queries: list[str], conn: Any) -> None:
    """A fresh process with an empty directory: open, first hybrid search, then p50s; reports through ``conn``."""
    rss_start = _peak_rss_mb()
    rows = _rows_counted()
    folder = Path(directory)
    t = time.perf_counter()
    import finderledge.facade  # noqa: F401  (the library's import, apart: it compiles every module when no .pyc)

    imported = time.perf_counter() - t
    t0, c0 = time.perf_counter(), time.process_time()
    fl = _open(folder, url, SCHEMA, TopicEmbeddings(corpus), mode)
    opened, open_cpu = time.perf_counter() - t0, time.process_time() - c0
    t1, c1 = time.perf_counter(), time.process_time()
    fl.search(queries[0], k=10)
    first, first_cpu = time.perf_counter() - t1, time.process_time() - c1
    out: dict[str, Any] = {
        "import_s": round(imported, 3),
        "open_s": round(opened, 3),
        "first_hybrid_search_s": round(first, 3),
        "join_s": round(imported + opened + first, 3),  # import + open + first search
        "join_after_import_s": round(opened + first, 3),
        # this process's CPU seconds (all threads): what load on a shared machine does not inflate
        "open_cpu_s": round(open_cpu, 3),
        "first_hybrid_search_cpu_s": round(first_cpu, 3),
        "peak_rss_mb_at_first_search": _peak_rss_mb(),
        "peak_rss_mb_before_open": rss_start,
        "local_disk_bytes": _disk(folder),
        "rows_read_to_join": rows[0],
        "keyword_chunks": len(fl.keyword_store),
    }
    for search_mode in ("keyword", "hybrid"):
        times = []
        for q in queries[1:]:
            t = time.perf_counter()
            fl.search(q, k=10, search_mode=search_mode)
            times.append(time.perf_counter() - t)
        out[f"{search_mode}_p50_ms"] = round(statistics.median(times) * 1000, 2)
    out["keyword_top10"] = [[r.id for r in fl.search(q, k=10, search_mode="keyword")] for q in queries[1:21]]
    fl.close()
    out["local_disk_bytes_after_close"] = _disk(folder)
    conn.send(out)


def join(url: str, corpus: TopicCorpus, mode: str, queries: list[str], workdir: Path) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    directory = workdir / f"join-{mode}"
    proc = ctx.Process(target=_joiner, args=(url, str(directory), mode, corpus, queries, child))
    proc.start()
    child.close()  # a child that dies closes the pipe: recv raises instead of waiting forever
    try:
        result: dict[str, Any] = parent.recv()
    except EOFError:
        raise RuntimeError(
            f"the joining process ({mode}) died: exit code {proc.join(10) or proc.exitcode}"
        ) from None
    proc.join(300)
    return result


# -- nDCG on BEIR datasets ---------------------------------------------------------------------------------
def _beir(
    folder: Path, limit: int | None
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    corpus: dict[str, str] = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            corpus[row["_id"]] = (row.get("title", "") + " " + row["text"]).strip()
    queries: dict[str, str] = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            queries[row["_id"]] = row["text"]
    qrels: dict[str, dict[str, int]] = {}
    split = next(p for p in (folder / "qrels" / "test.tsv", folder / "qrels" / "dev.tsv") if p.exists())
    with open(split, encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    chosen = [q for q in queries if q in qrels][:limit]
    return corpus, {q: queries[q] for q in chosen}, qrels


def _ndcg(ranked: Sequence[str], rel: dict[str, int], k: int = 10) -> float:
    import math

    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def ndcg_both(url: str, name: str, folder: Path, workdir: Path, limit: int | None) -> dict[str, Any]:
    """The keyword leg's nDCG@10 on a BEIR dataset, engine and local, over one ledger (fake vectors)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from finderledge.tokenizer import AutoTokenizer

    corpus, queries, qrels = _beir(folder, limit)
    fake = DeterministicFakeEmbedding(size=16)
    tok = AutoTokenizer(japanese="always") if "jaquad" in name else None
    schema = f"ndcg_{name.replace('-', '_')}"
    writer = _open(workdir / f"{name}-engine", url, schema, fake, "engine", keyword_tokenizer=tok)
    ids = list(corpus)
    for lo in range(0, len(ids), 2000):
        part = ids[lo : lo + 2000]
        writer.add_texts([corpus[i] for i in part], ids=part)
    reader = _open(workdir / f"{name}-local", url, schema, fake, "local", keyword_tokenizer=tok)
    out: dict[str, Any] = {"documents": len(corpus), "queries": len(queries)}
    same = 0
    for mode, fl in (("engine", writer), ("local", reader)):
        scores = []
        for qid, text in queries.items():
            hits = fl.search(text, k=10, search_mode="keyword")
            scores.append(_ndcg([h.id.rsplit("-", 1)[0] for h in hits], qrels[qid]))
        out[f"{mode}_ndcg@10"] = round(statistics.fmean(scores), 4)
    for text in queries.values():
        a = [h.id for h in writer.search(text, k=10, search_mode="keyword")]
        b = [h.id for h in reader.search(text, k=10, search_mode="keyword")]
        same += a == b
    out["top10_equal_share"] = round(same / len(queries), 4)
    reader.close()
    writer.close()
    return out


def text_share(url: str, folder: Path, workdir: Path) -> dict[str, Any]:
    """The database bytes of a BEIR corpus ingested with the default chunking (several chunks a long document,
    ``chunk_overlap`` as set), engine mode, 384-d fake vectors: what share of them is text stored twice."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from finderledge import FinderLedge

    corpus, _, _ = _beir(folder, 0)
    schema = "text_" + folder.name.replace("-", "_")
    fl = FinderLedge(
        workdir / schema,
        database_url=url,
        database_schema=schema,
        embedding=DeterministicFakeEmbedding(size=384),
        keyword_index="engine",
        show_progress=False,
        fusion="rrf",
    )
    fl.add_texts(list(corpus.values()), ids=list(corpus))
    counts, settings = fl.count(), fl.settings
    fl.close()
    return {
        **counts,
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        **database_bytes(url, schema, counts["chunks"]),
    }


def table(result: dict[str, Any]) -> str:
    rows = [
        ("join: import + open + first hybrid search (s)", "join_s"),
        ("  import (s)", "import_s"),
        ("  open (s)", "open_s"),
        ("  first hybrid search (s)", "first_hybrid_search_s"),
        ("peak RSS at first search (MB)", "peak_rss_mb_at_first_search"),
        ("local disk written (bytes)", "local_disk_bytes"),
        ("rows read from PostgreSQL to join", "rows_read_to_join"),
        ("keyword p50 (ms)", "keyword_p50_ms"),
        ("hybrid p50 (ms)", "hybrid_p50_ms"),
    ]
    joins = result["join"]
    modes = [m for m in MODES if m in joins]
    lines = [f"{result['ingest']['chunks']} chunks | " + " | ".join(modes), "---" + "|---" * len(modes)]
    for label, key in rows:
        lines.append(f"{label} | " + " | ".join(str(joins[m].get(key)) for m in modes))
    ingest = result["ingest"]
    for label, key in (
        ("write chunks/s (one ledger)", "chunks_per_s"),
        ("database bytes per chunk", "db_bytes_per_chunk"),
    ):
        if ingest.get(key) is not None:
            lines.append(f"{label} | {ingest[key]} | {ingest[key]}")
    for name, figures in result.get("ndcg", {}).items():
        lines.append(f"{name} nDCG@10 (keyword) | {figures['local_ndcg@10']} | {figures['engine_ndcg@10']}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,500 chunks, 15 queries")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--scifact", action="store_true", help="also nDCG@10 of the keyword leg on scifact")
    parser.add_argument("--jaquad", action="store_true", help="also nDCG@10 of the keyword leg on jaquad-dev")
    parser.add_argument("--ndcg-queries", type=int, help="queries per dataset (default all)")
    parser.add_argument(
        "--text-share", action="store_true", help="also the database bytes of scifact, default chunking"
    )
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--workdir", type=Path, help="server data and local folders (default: a temp dir)")
    parser.add_argument(
        "--skip-ingest", action="store_true", help="--workdir holds an ingested server: join only"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--repeat", type=int, default=1, help="joins per mode, modes alternated (the first is reported)"
    )
    parser.add_argument("--engine-only", action="store_true", help="join with keyword_index='engine' only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args(argv)
    if args.quick:
        args.chunks, args.queries = 1500, 15
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-join-"))
    url, server = start_postgres(workdir / "pg" / "pgdata")
    try:
        corpus = TopicCorpus()
        result: dict[str, Any] = {
            "command": "python benchmarks/bench_join.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "library": library_version(),
            "library_src": _library_src(),  # PYTHONPATH decides which tree runs
            # as installed: every joining process imports bytecode, not the sources (see the docstring)
            "finderledge_bytecode_compiled": bool(compileall.compile_dir(_library_src(), quiet=1)),
            "cpus": os.cpu_count(),
            "load_at_start": load_note(),
        }
        logger.info("ingest: %d chunks", args.chunks)
        if args.skip_ingest:
            result["ingest"] = {"chunks": args.chunks, "ingest_s": None}
        else:
            result["ingest"] = ingest(url, corpus, args.chunks, args.batch, workdir)
        queries = [corpus.query(n) for n in range(args.queries + 1)]
        modes = ("engine",) if args.engine_only else MODES
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for _ in range(max(args.repeat, 1)):
            for mode in modes:
                runs[mode].append(join(url, corpus, mode, queries, workdir))
                shutil.rmtree(workdir / f"join-{mode}", ignore_errors=True)  # the next join starts empty
        result["join"] = {m: runs[m][0] for m in modes}
        if args.repeat > 1:
            keys = (
                "import_s",
                "open_s",
                "first_hybrid_search_s",
                "join_s",
                "join_after_import_s",
                "open_cpu_s",
                "first_hybrid_search_cpu_s",
                "keyword_p50_ms",  # each process's p50: the first join's comes from the coldest server cache
                "hybrid_p50_ms",
            )
            also = ("peak_rss_mb_at_first_search", "rows_read_to_join", "local_disk_bytes")
            result["join_repeats"] = {
                m: {key: [r[key] for r in runs[m]] for key in (*keys, *also)} for m in modes
            }
            result["join_medians"] = {
                m: {key: round(statistics.median(r[key] for r in runs[m]), 3) for key in keys} for m in modes
            }
        tops = [result["join"][m].pop("keyword_top10") for m in modes]
        for m in modes:
            for r in runs[m][1:]:
                r.pop("keyword_top10", None)
        result["keyword_top10_equal_share"] = (
            round(sum(a == b for a, b in zip(*tops)) / max(len(tops[0]), 1), 3) if len(tops) == 2 else None
        )
        result["ndcg"] = {}
        for flag, name in ((args.scifact, "scifact"), (args.jaquad, "jaquad-dev")):
            folder = args.datasets / name
            if flag and folder.exists():
                logger.info("nDCG@10 on %s", name)
                result["ndcg"][name] = ndcg_both(url, name, folder, workdir, args.ndcg_queries)
        if args.text_share and (args.datasets / "scifact").exists():
            logger.info("text stored twice: scifact")
            result["text_share_scifact"] = text_share(url, args.datasets / "scifact", workdir)
        result["load_at_end"] = load_note()
    finally:
        server.cleanup()
    out = args.out or RESULTS / ("join_quick.json" if args.quick else f"join_{args.chunks}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(table(result))
    return result


if __name__ == "__main__":
    main()
