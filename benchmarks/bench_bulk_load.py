"""One bulk write into Postgres mode (``keyword_index="engine"``, issue 43): chunks/s of one ``add_texts`` call,
paired against another source tree (``--other-src``, e.g. /work/main/src) in alternated runs on one server.

Each run is a child process (its own ``PYTHONPATH``) writing ``--chunks`` one-chunk documents of the synthetic
topic corpus (precomputed vectors, :class:`bench_postgres.TopicEmbeddings`: no model) into a fresh schema in one
call, as ``bench_join.py --batch <chunks>`` does, but with the vectors computed before the timing; the schema is dropped after the run.  ``uptime`` is recorded
before each run.  ``--profile`` prints where one run's time goes (cProfile, top functions by cumulative time).

    python benchmarks/bench_bulk_load.py --chunks 10000 --pairs 2 --other-src /work/main/src

Issue 43's "today" is a tree from before the bulk path (``--other-src`` of ``b18f30e``, checked out apart):
it has no ``keyword_index``, so its side writes in its only mode (a local BM25 replica; rows inserted one by
one into a table that already has its HNSW index).  ``--keyword-index local`` writes this tree in that same mode
(the keyword leg a local replica, nothing of it in the database): the like-for-like pair against such a tree.

    python benchmarks/bench_bulk_load.py --chunks 100000 --keyword-index local --other-src <b18f30e>/src
"""

from __future__ import annotations

import argparse
import datetime as _dt
import inspect
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import TopicCorpus, TopicEmbeddings, start_postgres

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

logger = logging.getLogger("bench_bulk_load")


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


class Precomputed(TopicEmbeddings):
    """:class:`TopicEmbeddings` with the documents' vectors computed in advance (a look-up during the write)."""

    def __init__(self, corpus: TopicCorpus, texts: Sequence[str]) -> None:
        super().__init__(corpus)
        self.vectors = {t: corpus.embed(t).tolist() for t in texts}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        got = self.vectors.get
        return [got(t) or self.corpus.embed(t).tolist() for t in texts]


def child(
    url: str,
    schema: str,
    chunks: int,
    folder: Path,
    profile: bool,
    batch: int = 0,
    keyword_index: str = "engine",
    block: bool = False,
) -> dict[str, Any]:
    """Write ``chunks`` documents in one call (``batch``: in calls of that many; ``block``: those calls inside
    one ``bulk_load(chunks=...)`` block) with the keyword leg in ``keyword_index`` (a tree without that setting
    writes in its only mode); returns the seconds and chunks/s."""
    import contextlib

    import finderledge
    from finderledge import FinderLedge

    corpus = TopicCorpus()
    texts = [corpus.text(i) for i in range(chunks)]
    mds = [{"n": i, "group": i % 10} for i in range(chunks)]
    ids = [f"syn{i:07d}" for i in range(chunks)]
    embedding = Precomputed(corpus, texts)  # embedding excluded from the timing: vectors computed before it
    # A tree from before the engine leg (issue 43's "today", e.g. b18f30e) has no keyword_index: it writes in
    # its only mode, the local BM25 replica beside the database.
    has_setting = "keyword_index" in inspect.signature(FinderLedge).parameters
    mode = {"keyword_index": keyword_index} if has_setting else {}
    fl = FinderLedge(
        folder,
        database_url=url,
        database_schema=schema,
        embedding=embedding,
        **mode,
        show_progress=False,
        fusion="rrf",
        chunk_size=100_000,
        chunk_overlap=0,
    )
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    step = batch or chunks
    t0 = time.perf_counter()
    with fl.bulk_load(chunks=chunks) if block else contextlib.nullcontext():
        for lo in range(0, chunks, step):
            fl.add_texts(texts[lo : lo + step], metadatas=mds[lo : lo + step], ids=ids[lo : lo + step])
    seconds = time.perf_counter() - t0
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats(
            os.environ.get("BULK_PROFILE_SORT", "cumulative")
        ).print_stats(45)
    count = fl.count()["chunks"]
    fl.close()
    return {
        "library": str(Path(finderledge.__file__).resolve().parents[1]),
        "keyword_index": mode.get("keyword_index", "local (the tree has no keyword_index)"),
        "chunks": count,
        "chunks_per_call": step,
        "bulk_load_block": block,
        "seconds": round(seconds, 1),
        "chunks_per_s": round(count / seconds, 1),
    }


def _run(
    url: str,
    src: str,
    chunks: int,
    workdir: Path,
    n: int,
    profile: bool,
    batch: int,
    keyword_index: str,
    block: bool = False,
) -> dict[str, Any]:
    import psycopg

    schema = f"bulk43_{n}"
    env = {**os.environ, "PYTHONPATH": src}
    cmd = [sys.executable, __file__, "--child", url, schema, str(chunks), str(workdir / f"fl{n}")]
    cmd += ["--batch", str(batch), "--keyword-index", keyword_index]
    if profile:
        cmd.append("--profile")
    if block:
        cmd.append("--block")
    load = _uptime()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-4000:])
    if profile:
        print(proc.stderr[-20000:], file=sys.stderr)
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["index_builds"] = [  # the library's own lines: how long each index build after the load took
        line.split(": ", 1)[-1].split("#", 1)[-1]
        for line in proc.stderr.splitlines()
        if "ready" in line or "built the HNSW" in line
    ]
    out["uptime_before"] = load
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--src", default=str(ROOT / "src"), help="this tree's source (default: ours)")
    parser.add_argument("--other-src", help="the tree to pair against (e.g. /work/main/src)")
    parser.add_argument("--other-first", type=int, choices=(0, 1), default=0, help="1: the other tree first")
    parser.add_argument("--batch", type=int, default=0, help="chunks per add_texts call (default: one call)")
    parser.add_argument(
        "--other-batch", type=int, default=0, help="the other tree's chunks per call (issue 43's today: 2000)"
    )
    parser.add_argument(
        "--keyword-index",
        choices=("engine", "local"),
        default="engine",
        help="this tree's keyword leg: in the database (default) or a local replica (the mode of a tree before it)",
    )
    parser.add_argument(
        "--block",
        action="store_true",
        help="this tree's calls (--batch) inside one bulk_load() block (the tree must have it)",
    )
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", nargs=4, metavar=("URL", "SCHEMA", "CHUNKS", "FOLDER"))
    args = parser.parse_args(argv)
    if args.child:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        url, schema, chunks, folder = args.child
        got = child(
            url, schema, int(chunks), Path(folder), args.profile, args.batch, args.keyword_index, args.block
        )
        print(json.dumps(got))
        return {}
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-bulk43-"))
    url, server = start_postgres(workdir / "pg" / "pgdata")
    sides = {"this": args.src} | ({"other": args.other_src} if args.other_src else {})
    batches = {"this": args.batch, "other": args.other_batch}
    runs: list[dict[str, Any]] = []
    try:
        n = 0
        for pair in range(args.pairs):
            order = list(sides) if (pair + args.other_first) % 2 == 0 else list(reversed(sides))
            for side in order:
                n += 1
                got = _run(
                    url,
                    sides[side],
                    args.chunks,
                    workdir,
                    n,
                    args.profile,
                    batches[side],
                    args.keyword_index,
                    args.block and side == "this",
                )
                got["side"] = side
                runs.append(got)
                logger.info("%s: %s", side, got)
    finally:
        server.cleanup()
    result = {
        "command": "python benchmarks/bench_bulk_load.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "sides": sides,
        "runs": runs,
        "chunks_per_s": {s: [r["chunks_per_s"] for r in runs if r["side"] == s] for s in sides},
    }
    out = args.out or RESULTS / f"bulk43_{args.chunks}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["chunks_per_s"]))
    return result


if __name__ == "__main__":
    main()
