"""How soon does a process see another process's writes?  Measures the freshness bound of docs/architecture.md.

A reader process keeps a FinderLedge open and searches in a loop; a writer process adds (then removes) one
document at a time.  For each write we record the delay from the writer's call returning to the reader's
first search that finds it (or no longer finds it) in every leg, and the cost of that first search against
a search with nothing to catch up.  Hash embeddings keep the model out of the figures.

    python benchmarks/bench_freshness.py [--store faiss] [--writes 20] [--base 2000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings


class HashEmbeddings(Embeddings):
    """Deterministic 256-d vectors: the sum of a pseudo-random vector per word (the same in every process)."""

    def _one(self, text: str) -> list[float]:
        v = np.zeros(256)
        for word in text.lower().strip(".").split():
            v += np.random.default_rng(zlib.crc32(word.encode())).standard_normal(256)
        return (v / max(float(np.linalg.norm(v)), 1e-9)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def _open(directory: str, store: str):  # type: ignore[no-untyped-def]
    from finderledge import FinderLedge

    return FinderLedge(directory, vector_store=store, embedding=HashEmbeddings(), show_progress=False)


def _writer(directory: str, store: str, writes: int, queue: mp.Queue) -> None:
    fl = _open(directory, store)
    for i in range(writes):
        token = f"zq{i:04d}marker"
        ids = fl.add_document(Document(page_content=f"Fresh note {token} about river ferries."))
        queue.put(("add", token, time.monotonic()))
        time.sleep(0.3)
        fl.remove_document(ids[0])
        queue.put(("remove", token, time.monotonic()))
        time.sleep(0.3)
    queue.put(("done", "", 0.0))
    fl.close()


def _visible(fl, token: str) -> bool:  # type: ignore[no-untyped-def]
    found = {
        mode: any(token in r.content for r in fl.search(f"{token} river ferries", search_mode=mode, k=3))
        for mode in ("keyword", "vector")
    }
    if len(set(found.values())) > 1:
        raise AssertionError(f"legs disagree about {token}: {found}")
    return found["keyword"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="faiss", choices=["faiss", "chroma"])
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--base", type=int, default=2000, help="documents in the index before the run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="fl-fresh-") + "/index"
    fl = _open(directory, args.store)
    fl.add_documents(
        [
            Document(page_content=f"Background note {i} on harbour {i % 97} and tides.")
            for i in range(args.base)
        ]
    )
    idle = []  # the same two searches with nothing to catch up
    for i in range(60):
        t0 = time.perf_counter()
        _visible(fl, f"zq{i:04d}absent")
        idle.append((time.perf_counter() - t0) / 2)
    idle = idle[10:]
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    writer = ctx.Process(target=_writer, args=(directory, args.store, args.writes, queue))
    writer.start()
    delays: dict[str, list[float]] = {"add": [], "remove": []}
    first_search: list[float] = []
    while True:
        op, token, returned = queue.get(timeout=300)
        if op == "done":
            break
        t0 = time.perf_counter()
        seen = _visible(fl, token)
        first_search.append((time.perf_counter() - t0) / 2)
        assert seen == (op == "add"), f"the first search after the {op} of {token} did not reflect it"
        delays[op].append(time.monotonic() - returned)
    writer.join()
    fl.close()
    result = {
        "store": args.store,
        "base_documents": args.base,
        "writes": args.writes,
        "first_search_reflects_the_write": True,
        "idle_search_ms_p50": 1000 * statistics.median(idle),
        "first_search_after_a_write_ms_p50": 1000 * statistics.median(first_search),
        "first_search_after_a_write_ms_max": 1000 * max(first_search),
        "delay_from_write_return_to_seen_ms_p50": {k: 1000 * statistics.median(v) for k, v in delays.items()},
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
