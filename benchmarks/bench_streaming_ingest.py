"""Peak memory of ingesting a large folder: streaming (this version) against a baseline commit, same run.

Generates ``--files`` small text files (``benchmarks/.cache/stream-<N>/``, reused), then indexes the folder in a
fresh process per version and reports each process's peak RSS (``VmHWM``) and wall time.  The embedding is a
cheap deterministic 384-d hashing model by default, so the figure is the ingest pipeline's memory (loading,
splitting, vectors, ledger, indexes) rather than the model's; ``--embedding default`` uses the real bundled model
(then take fewer files: it embeds ~20-60 passages/s on 2 cores).

    python benchmarks/bench_streaming_ingest.py --files 50000 --out benchmarks/results/streaming_ingest.json
    python benchmarks/bench_streaming_ingest.py --files 2000 --embedding default
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

logger = logging.getLogger("bench_streaming_ingest")

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache"
BASELINE = "7e54816"  # the last commit that loaded a whole folder before writing it

CHILD = textwrap.dedent('''
    import hashlib, json, os, sys, time
    import numpy as np
    from langchain_core.embeddings import Embeddings
    from finderledge import FinderLedge

    class HashEmbeddings(Embeddings):
        """Deterministic 384-d vectors from word hashes: cheap, so the pipeline's memory is what is measured."""
        def _one(self, text):
            v = np.zeros(384, dtype=np.float32)
            for w in text.lower().split():
                v[int(hashlib.blake2b(w.encode(), digest_size=4).hexdigest(), 16) % 384] += 1.0
            n = np.linalg.norm(v)
            return (v / n if n else v).tolist()
        def embed_documents(self, texts):
            return [self._one(t) for t in texts]
        def embed_query(self, text):
            return self._one(text)

    folder, index, which = sys.argv[1], sys.argv[2], sys.argv[3]
    embedding = HashEmbeddings() if which == "hash" else None
    t0 = time.perf_counter()
    with FinderLedge(index, embedding=embedding, vector_store="faiss", show_progress=False) as fl:
        fl.add_document(folder)
        count = fl.count()
    wall = time.perf_counter() - t0
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    print(json.dumps({"wall_s": round(wall, 1), "peak_rss_mb": round(peak / 1024, 1), "count": count}))
''')


def make_folder(n: int) -> Path:
    """``n`` text files of ~600 characters in 100 sub-folders (built once, reused)."""
    folder = CACHE / f"stream-{n}"
    done = folder / ".complete"
    if done.is_file():
        return folder
    words = [
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
        "invoice",
        "customer",
        "contract",
        "renewal",
        "policy",
        "audit",
        "budget",
        "forecast",
        "supplier",
        "shipment",
    ]
    for i in range(n):
        sub = folder / f"d{i % 100:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        body = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(80))
        (sub / f"note{i:06d}.txt").write_text(
            f"Note {i}: {body}. Item {i * 13} is on shelf {i % 50}.\n", encoding="utf-8"
        )
    done.write_text("ok", encoding="utf-8")
    return folder


def baseline_tree(commit: str) -> Path:
    """A checkout of ``commit``'s sources (a git worktree under the cache), to import the old version from."""
    tree = CACHE / f"baseline-{commit}"
    if not (tree / "src" / "finderledge").is_dir():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
            check=True,
            capture_output=True,
        )
    return tree


def run(src: Path, folder: Path, which: str) -> dict[str, Any]:
    """Index ``folder`` in a fresh process importing FinderLedge from ``src``."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": str(src),
            "HF_HUB_OFFLINE": "1",
            "FINDERLEDGE_CACHE_DIR": os.environ.get(
                "FINDERLEDGE_CACHE_DIR", str(CACHE / "finderledge-cache")
            ),
        }
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(folder), str(Path(tmp) / "index"), which],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"{src}: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--embedding", choices=["hash", "default"], default="hash")
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    folder = make_folder(args.files)
    rows = []
    for name, src in (
        ("baseline " + args.baseline, baseline_tree(args.baseline) / "src"),
        ("streaming", ROOT / "src"),
    ):
        row = {"version": name, **run(src, folder, args.embedding)}
        logger.info("%s", row)
        rows.append(row)
    result = {
        "files": args.files,
        "embedding": args.embedding,
        "load_average": os.getloadavg(),
        "rows": rows,
        "peak_rss_ratio": round(rows[1]["peak_rss_mb"] / rows[0]["peak_rss_mb"], 3),
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    logger.info("%s", text)


if __name__ == "__main__":
    main()
