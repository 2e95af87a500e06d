"""Ingest speed: scifact's corpus written out as one text file per document, ingested with the defaults.

Reports chunks/s, the share of wall time spent outside the embedding model (target < 15%), and the
time to re-ingest the unchanged folder (target < 5% of the first ingest).  The files are written to a
temporary folder (the dataset is never copied into the repository).

    python benchmarks/bench_ingest.py --dataset ../shared/datasets/scifact --out benchmarks/results/ingest.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from finderledge import FinderLedge


def write_files(dataset: Path, folder: Path, limit: int | None) -> int:
    """One UTF-8 ``.txt`` file per corpus document: title, blank line, text."""
    n = 0
    with open(dataset / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            (folder / f"{doc['_id']}.txt").write_text(
                f"{doc.get('title', '')}\n\n{doc.get('text', '')}", encoding="utf-8"
            )
            n += 1
            if limit and n >= limit:
                break
    return n


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dataset", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/scifact"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N documents")
    parser.add_argument("--vector-store", default="chroma", choices=["chroma", "faiss"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, index = Path(tmp) / "files", Path(tmp) / "index"
        folder.mkdir()
        files = write_files(args.dataset, folder, args.limit)
        fl = FinderLedge(index, vector_store=args.vector_store, show_progress=False, env_file=None)
        fl.embeddings.embed_query("warm-up")  # model load is not ingest time
        t0 = time.perf_counter()
        first = fl.ingest(folder)
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = fl.ingest(folder)
        again_s = time.perf_counter() - t0
        fl.close()
    outside = first_s - first.seconds_embedding
    result = {
        "files": files,
        "chunks": first.chunks_written,
        "vector_store": args.vector_store,
        "first_ingest_s": first_s,
        "embedding_s": first.seconds_embedding,
        "outside_embedding_s": outside,
        "outside_embedding_share": outside / first_s,
        "chunks_per_s": first.chunks_written / first_s,
        "reingest_s": again_s,
        "reingest_share": again_s / first_s,
        "reingest_embeddings_computed": again.embeddings_computed,
        "reingest_files_unchanged": again.files_unchanged,
    }
    print(
        f"files {files}, chunks {first.chunks_written}, first ingest {first_s:.1f} s "
        f"({result['chunks_per_s']:.1f} chunks/s), embedding {first.seconds_embedding:.1f} s, "
        f"outside embedding {outside:.1f} s = {100 * result['outside_embedding_share']:.1f}% (target < 15%)"
    )
    print(
        f"re-ingest unchanged: {again_s:.2f} s = {100 * result['reingest_share']:.2f}% of the first (target < 5%), "
        f"embeddings computed {again.embeddings_computed}"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
