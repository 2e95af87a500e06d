"""Peak memory and time of ingesting ONE big text file (issue 27: bounded memory for any single file).

Generates a text file of ``--mb`` megabytes (paragraphs of random words, ``benchmarks/.cache/big-<MB>.txt``,
reused), then indexes it with ``add_document`` in a fresh process per (size, version) and reports the process's
peak RSS (``VmHWM``, also ``resource.getrusage``), wall time, seconds per MB and chunk count.  The embedding is a
cheap deterministic 384-d hashing model, so the figure is the ingest pipeline's memory and time (loading,
splitting, ledger, indexes), not the model's.  ``--before REF`` also runs git ref ``REF`` (exported to a temporary
folder with ``git archive``) in the same run, for a before/after table.

    python benchmarks/bench_big_file.py --mb 10 200 --before main --out benchmarks/results/big_file.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

logger = logging.getLogger("bench_big_file")

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache"

CHILD = textwrap.dedent('''
    import json, resource, sys, time, zlib
    import numpy as np
    from langchain_core.embeddings import Embeddings
    from finderledge import FinderLedge

    class HashEmbeddings(Embeddings):
        """Deterministic 384-d vectors from word hashes (crc32): cheap, so the pipeline is what is measured."""
        def _one(self, text):
            v = np.zeros(384, dtype=np.float32)
            for w in text.lower().split():
                v[zlib.crc32(w.encode()) % 384] += 1.0
            n = np.linalg.norm(v)
            return (v / n if n else v).tolist()
        def embed_documents(self, texts):
            return [self._one(t) for t in texts]
        def embed_query(self, text):
            return self._one(text)

    path, index = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()
    with FinderLedge(index, embedding=HashEmbeddings(), vector_store="faiss", show_progress=False) as fl:
        fl.add_document(path)
        count = fl.count()
        hits = len(fl.search("warehouse invoice", k=5))
    wall = time.perf_counter() - t0
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"wall_s": round(wall, 1), "peak_rss_mb": round(peak / 1024, 1),
                      "ru_maxrss_mb": round(ru / 1024, 1), "count": count, "hits": hits, "finderledge": __import__("finderledge").__file__}))
''')

WORDS = [
    "warehouse",
    "shelf",
    "invoice",
    "refund",
    "password",
    "account",
    "storage",
    "backup",
    "region",
    "latency",
    "ledger",
    "vector",
    "keyword",
    "search",
    "retrieval",
    "index",
    "chunk",
    "parent",
    "document",
    "owner",
    "release",
    "commit",
    "staged",
    "window",
    "memory",
    "bounded",
    "stream",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "this",
    "be",
    "or",
    "are",
    "an",
    "it",
    "not",
]


def make_file(mb: int) -> Path:
    """A ``mb``-megabyte text file of paragraphs (3-8 sentences of 6-18 words), built once and reused."""
    path = CACHE / f"big-{mb}.txt"
    if path.is_file() and path.stat().st_size >= mb * 1_000_000:
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    rng = random.Random(mb)
    tmp = path.with_suffix(".part")
    written = 0
    with tmp.open("w", encoding="utf-8") as fh:
        while written < mb * 1_000_000:
            sentences = [
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
                for _ in range(rng.randint(3, 8))
            ]
            para = " ".join(sentences) + "\n\n"
            fh.write(para)
            written += len(para)
    tmp.replace(path)
    return path


def export(ref: str) -> Path:
    """The ``src`` folder of git ref ``ref``, exported to a temporary folder."""
    target = Path(tempfile.mkdtemp(prefix="bench-big-"))
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "src"


def run_one(path: Path, src: Path) -> dict[str, Any]:
    """Index ``path`` in a fresh process importing finderledge from ``src``."""
    with tempfile.TemporaryDirectory(prefix="bench-big-idx-") as index:
        env = {**os.environ, "PYTHONPATH": str(src)}
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), index],
            check=False,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return {"error": done.stderr[-2000:]}
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[10, 200])
    parser.add_argument("--before", default=None, help="git ref to measure too (e.g. main)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    versions = {"after": ROOT / "src"}
    if args.before:
        versions = {f"before ({args.before})": export(args.before), **versions}
    rows = []
    for mb in args.mb:
        path = make_file(mb)
        for name, src in versions.items():
            result = run_one(path, src)
            if "wall_s" in result:
                result["s_per_mb"] = round(result["wall_s"] / mb, 2)
            row = {"mb": mb, "version": name, **result}
            logger.info(json.dumps(row))
            rows.append(row)
    logger.info("| MB | version | peak RSS MB | wall s | s/MB | chunks |")
    logger.info("|---|---|---|---|---|---|")
    for r in rows:
        logger.info(
            "| %s | %s | %s | %s | %s | %s |",
            r["mb"],
            r["version"],
            r.get("peak_rss_mb"),
            r.get("wall_s"),
            r.get("s_per_mb"),
            r.get("count"),
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
