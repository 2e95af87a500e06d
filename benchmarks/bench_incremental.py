"""Incremental persistence at scale: one-document add/remove, cold open and memory, per vector store.

Builds a FinderLedge directory of ``--n`` one-chunk documents (default 100,000 passages of 1-3 sentences
from scifact, msmarco-5k and jaquad-dev, read from ``../shared/datasets``) with a deterministic 384-d
hashing embedding (nothing is downloaded, embedding time is negligible and subtracted), then measures,
for each vector store, in the same run:

1. adding one document through the facade vs rebuilding a bm25s index of the same corpus
   (``bm25s.tokenize(texts, stopwords="en")`` + ``bm25s.BM25().index``) — target ratio >= 100;
2. removing one document (``remove_document``) vs the same rebuild — target ratio >= 100;
3. in a fresh process: ``FinderLedge(dir, embedding=...)`` up to the end of the first hybrid
   ``search`` — target < 1 s (interpreter start and imports, the vector backend's included, reported
   separately);
4. peak RSS (``ru_maxrss``) of a process that opens the directory and answers 50 hybrid queries, next
   to a process holding bm25s + a FAISS ``IndexFlatIP`` (same texts, same vectors, RRF fusion)
   answering the same queries.

Bytes written to the persist directory by each add and removal (and by ``close``) are counted from
file sizes and mtimes before and after: ``bytes_written`` sums the full size of every new or changed
file, ``bytes_grown`` only their growth.

    python benchmarks/bench_incremental.py --n 2000                        # smoke test
    python benchmarks/bench_incremental.py --out benchmarks/results/incremental.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from itertools import chain, islice, zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DIM = 384
BACKEND_MODULES = {"chroma": "chromadb", "faiss": "faiss"}
DATASETS = (("scifact", "en"), ("msmarco-5k", "en"), ("jaquad-dev", "ja"))
DEFAULT_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
TARGET_RATIO = 100.0
TARGET_OPEN_S = 1.0
_SENTENCE_END = re.compile(r"(?<=\. )|(?<=。)")
_WORD = re.compile(r"\w+")


def log(message: str) -> None:
    """Progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def maxrss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vm_hwm_mb() -> float | None:
    """Peak RSS of this process's address space (``VmHWM``, Linux only), in MiB, as a cross-check."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None


# -- embeddings ------------------------------------------------------------------------------------------
def _features(text: str) -> list[str]:
    """Lower-cased words; a non-ASCII word (Japanese runs) becomes its character bigrams."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word.isascii() or len(word) < 3:
            out.append(word)
        else:
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
    return out


def hash_embed(texts: Sequence[str]) -> np.ndarray:
    """Hashing-trick vectors: each feature adds +-1 to one of ``DIM`` dimensions (CRC32), L2-normalised."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in zip(out, texts, strict=True):
        hashes = np.fromiter((zlib.crc32(f.encode("utf-8")) for f in _features(text)), dtype=np.int64)
        if hashes.size:
            signs = np.where(hashes & 0x10000, 1.0, -1.0)
            row[:] = np.bincount(hashes % DIM, weights=signs, minlength=DIM)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def hash_embeddings() -> Embeddings:
    """A LangChain ``Embeddings`` over :func:`hash_embed` that counts the seconds spent embedding.

    Built on demand so the bm25s + FAISS peer process never imports LangChain.
    """
    from langchain_core.embeddings import Embeddings

    class HashEmbeddings(Embeddings):
        """Deterministic 384-d hashing embedding (no model, no download)."""

        model_name = f"hashing-{DIM}"

        def __init__(self) -> None:
            self.seconds = 0.0

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            start = time.perf_counter()
            vectors = hash_embed(texts).tolist()
            self.seconds += time.perf_counter() - start
            return vectors

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return HashEmbeddings()


# -- data ------------------------------------------------------------------------------------------------
def _dataset_pieces(path: Path, lang: str, counter: list[int]) -> list[tuple[str, str]]:
    """Passages of one corpus split into pieces of 1, 2, 3, 1, 2, 3 ... sentences (title first)."""
    pieces: list[tuple[str, str]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            sentences = [s.strip() for s in _SENTENCE_END.split(doc.get("text", "")) if s.strip()]
            if doc.get("title", "").strip():
                sentences.insert(0, doc["title"].strip())
            while sentences:
                size = 1 + counter[0] % 3
                counter[0] += 1
                joiner = " " if lang == "en" else ""
                pieces.append((joiner.join(sentences[:size]), lang))
                sentences = sentences[size:]
    return pieces


def load_pieces(root: Path, n: int) -> list[tuple[str, str]]:
    """``n`` (text, language) pieces, the corpora interleaved; cycled with a `` [c]`` suffix if short."""
    counter = [0]
    per_dataset = [_dataset_pieces(root / name / "corpus.jsonl", lang, counter) for name, lang in DATASETS]
    base = [p for p in chain.from_iterable(zip_longest(*per_dataset)) if p is not None]
    return [
        (text if i < len(base) else f"{text} [{i // len(base)}]", lang)
        for i, (text, lang) in ((i, base[i % len(base)]) for i in range(n))
    ]


def load_queries(root: Path, n: int) -> list[str]:
    """``n`` queries, taken in turn from the three datasets' ``queries.jsonl`` (the first is English)."""
    per_dataset = []
    for name, _ in DATASETS:
        with open(root / name / "queries.jsonl", encoding="utf-8") as fh:
            per_dataset.append([json.loads(line)["text"] for line in islice(fh, n)])
    return [q for q in chain.from_iterable(zip_longest(*per_dataset)) if q is not None][:n]


# -- helpers ---------------------------------------------------------------------------------------------
def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime_ns) of every file under ``directory``."""
    files: dict[str, tuple[int, int]] = {}
    for dirpath, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            files[os.path.relpath(path, directory)] = (st.st_size, st.st_mtime_ns)
    return files


def written(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """What changed between two snapshots: bytes of new/changed files, their growth, the largest ones."""
    changed = {path: st[0] for path, st in after.items() if before.get(path) != st}
    return {
        "bytes_written": sum(changed.values()),
        "bytes_grown": sum(max(0, size - before.get(path, (0, 0))[0]) for path, size in changed.items()),
        "files_changed": len(changed),
        "files_removed": len(set(before) - set(after)),
        "largest": dict(sorted(changed.items(), key=lambda kv: -kv[1])[:8]),
    }


@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """``with stopwatch() as t:`` ... ``t["s"]`` holds the elapsed seconds afterwards."""
    box = {"s": 0.0}
    start = time.perf_counter()
    try:
        yield box
    finally:
        box["s"] = time.perf_counter() - start


def bm25s_rebuild(texts: list[str]) -> tuple[float, Any]:
    """Seconds to tokenize and index ``texts`` with bm25s (English stopwords), and the index."""
    import bm25s

    with stopwatch() as t:
        tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
        model = bm25s.BM25()
        model.index(tokens, show_progress=False)
    return t["s"], model


def run_child(args: list[str]) -> dict[str, Any]:
    """Run this script in ``--child`` mode; its JSON plus ``startup_s`` (spawn to imports done).

    The child is started by ``sh`` (not exec'd by it): Linux carries a process's ``ru_maxrss`` over
    fork + exec, so a direct child would report this (large) process's peak as its own.
    """
    spawned = time.time()
    command = [sys.executable, str(Path(__file__).resolve()), *args]
    proc = subprocess.run(
        ["sh", "-c", '"$0" "$@"; exit $?', *command], stdout=subprocess.PIPE, text=True, check=True
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["startup_s"] = result.pop("ready_at") - spawned
    return result


def median_of(runs: Sequence[dict[str, Any]], key: str) -> float:
    """Median of one numeric field over runs."""
    return statistics.median(r[key] for r in runs)


# -- child processes -------------------------------------------------------------------------------------
def serve_finderledge(directory: Path, kind: str, queries: list[str]) -> dict[str, Any]:
    """Open the directory, answer every query (hybrid); timings and peak RSS.

    The vector backend's module (which FinderLedge imports on first use) is imported before the clock
    starts: it counts as import time, like ``finderledge`` itself.
    """
    from finderledge import FinderLedge

    importlib.import_module(BACKEND_MODULES[kind])
    embedding = hash_embeddings()
    ready_at, rss_imports = time.time(), maxrss_mb()
    with stopwatch() as t_open:
        fl = FinderLedge(directory, embedding=embedding, show_progress=False, env_file=None)
    with stopwatch() as t_first:
        first = fl.search(queries[0], k=10)
    latencies = []
    for q in queries[1:]:
        with stopwatch() as t:
            fl.search(q, k=10)
        latencies.append(t["s"])
    rss = maxrss_mb()
    store = type(fl.vector_store).__name__
    fl.close()
    return {
        "ready_at": ready_at,
        "open_s": t_open["s"],
        "first_query_s": t_first["s"],
        "open_first_query_s": t_open["s"] + t_first["s"],
        "first_hits": len(first),
        "vector_store": store,
        "query_median_s": statistics.median(latencies) if latencies else None,
        "queries": len(queries),
        "rss_after_imports_mb": rss_imports,
        "peak_rss_mb": rss,
        "vm_hwm_mb": vm_hwm_mb(),
    }


def serve_peer(directory: Path, queries: list[str]) -> dict[str, Any]:
    """bm25s + FAISS IndexFlatIP + texts loaded from ``directory``; RRF-fused top 10 per query."""
    import bm25s
    import faiss

    ready_at, rss_imports = time.time(), maxrss_mb()

    def search(query: str) -> list[str]:
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        fused: dict[int, float] = {}
        if tokens[0]:
            docs, _ = retriever.retrieve(tokens, k=100, show_progress=False)
            for rank, doc in enumerate(docs[0], start=1):
                fused[int(doc)] = 1.0 / (60 + rank)
        _, found = index.search(hash_embed([query]), 100)
        for rank, doc in enumerate(found[0], start=1):
            fused[int(doc)] = fused.get(int(doc), 0.0) + 1.0 / (60 + rank)
        return [texts[i] for i in sorted(fused, key=lambda i: -fused[i])[:10]]

    with stopwatch() as t_open:
        retriever = bm25s.BM25.load(str(directory / "bm25s"), show_progress=False)
        index = faiss.read_index(str(directory / "index.faiss"))
        texts = json.loads((directory / "texts.json").read_text(encoding="utf-8"))
    with stopwatch() as t_first:
        first = search(queries[0])
    latencies = []
    for q in queries[1:]:
        with stopwatch() as t:
            search(q)
        latencies.append(t["s"])
    return {
        "ready_at": ready_at,
        "open_s": t_open["s"],
        "first_query_s": t_first["s"],
        "open_first_query_s": t_open["s"] + t_first["s"],
        "first_hits": len(first),
        "query_median_s": statistics.median(latencies) if latencies else None,
        "queries": len(queries),
        "rss_after_imports_mb": rss_imports,
        "peak_rss_mb": maxrss_mb(),
        "vm_hwm_mb": vm_hwm_mb(),
    }


# -- the benchmark ---------------------------------------------------------------------------------------
def build_peer(directory: Path, texts: list[str], vectors: np.ndarray) -> dict[str, float]:
    """Save the bm25s index, a FAISS IndexFlatIP of ``vectors`` and the texts for :func:`serve_peer`."""
    import faiss

    directory.mkdir(parents=True, exist_ok=True)
    seconds, model = bm25s_rebuild(texts)
    model.save(str(directory / "bm25s"))
    index = faiss.IndexFlatIP(DIM)
    index.add(vectors)
    faiss.write_index(index, str(directory / "index.faiss"))
    (directory / "texts.json").write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    return {"bm25s_index_s": seconds}


def bench_store(
    kind: str, directory: Path, pieces: list[tuple[str, str]], query_file: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Build one store's directory, then measure add/remove against a bm25s rebuild, cold open and RSS."""
    from langchain_core.documents import Document

    from finderledge import FinderLedge

    if directory.exists() and any(directory.iterdir()):
        raise SystemExit(f"{directory} is not empty: give --workdir a new folder")
    docs = [
        Document(page_content=text, metadata={"source": f"doc{i}", "lang": lang})
        for i, (text, lang) in enumerate(pieces)
    ]
    embedding = hash_embeddings()

    def open_ledger() -> FinderLedge:
        return FinderLedge(
            directory,
            vector_store=kind,
            embedding=embedding,
            chunk_size=4000,
            show_progress=False,
            env_file=None,
        )

    log(f"{kind}: building {len(docs)} documents in batches of {args.batch}")
    ids: list[str] = []
    batches = []
    with stopwatch() as t_build:
        fl = open_ledger()
        for start in range(0, len(docs), args.batch):
            with stopwatch() as t:
                ids += fl.add_documents(docs[start : start + args.batch])
            batches.append(t["s"])
            log(f"{kind}: {len(ids)}/{len(docs)} documents, batch {t['s']:.1f} s")
        chunks = fl.count()["chunks"]
        fl.close()
    if chunks != len(docs) or len(set(ids)) != len(docs):
        raise RuntimeError(
            f"{kind}: expected {len(docs)} one-chunk documents, got {chunks} chunks, {len(set(ids))} ids"
        )
    build = {
        "seconds": t_build["s"],
        "batch_seconds": batches,
        "embedding_s": embedding.seconds,
        "directory_bytes": sum(size for size, _ in snapshot(directory).values()),
    }

    log(f"{kind}: {args.repeat} bm25s rebuilds of {len(docs)} texts")
    texts = [d.page_content for d in docs]
    rebuilds = [bm25s_rebuild(texts)[0] for _ in range(args.repeat)]
    rebuild_s = statistics.median(rebuilds)

    log(f"{kind}: reopening in this process, then {args.repeat} adds and removals")
    with stopwatch() as t_reopen:
        fl = open_ledger()
    with stopwatch() as t_warm:
        fl.search("warm-up query", k=10)
    adds, removes = [], []
    for r in range(args.repeat):
        text, lang = pieces[(r * 7919) % len(pieces)]
        new_doc = Document(
            page_content=f"{text} (incremental add {r})", metadata={"source": f"new{r}", "lang": lang}
        )
        before, spent = snapshot(directory), embedding.seconds
        with stopwatch() as t:
            fl.add_documents([new_doc])
        add = {
            "seconds": t["s"] - (embedding.seconds - spent),
            "embedding_s": embedding.seconds - spent,
            **written(before, snapshot(directory)),
        }
        victim = ids[(r + 1) * len(ids) // (args.repeat + 1)]
        before = snapshot(directory)
        with stopwatch() as t:
            fl.remove_document(victim)
        remove = {"seconds": t["s"], **written(before, snapshot(directory))}
        adds.append(add)
        removes.append(remove)
        log(
            f"{kind}: add {add['seconds']:.3f} s ({add['bytes_written']} B), "
            f"remove {remove['seconds']:.3f} s ({remove['bytes_written']} B)"
        )
    before = snapshot(directory)
    with stopwatch() as t_close:
        fl.close()
    close = {"seconds": t_close["s"], **written(before, snapshot(directory))}

    log(f"{kind}: {args.repeat} fresh processes: open, first query, {args.queries} queries")
    serve = [
        run_child(["--child", kind, "--dir", str(directory), "--query-file", str(query_file)])
        for _ in range(args.repeat)
    ]
    add_s, remove_s = median_of(adds, "seconds"), median_of(removes, "seconds")
    return {
        "build": build,
        "bm25s_rebuild_s": rebuild_s,
        "bm25s_rebuilds": rebuilds,
        "reopen_in_process_s": t_reopen["s"],
        "warm_up_query_s": t_warm["s"],
        "add_seconds": add_s,
        "add_ratio": rebuild_s / add_s,
        "add_bytes_written": median_of(adds, "bytes_written"),
        "add_bytes_grown": median_of(adds, "bytes_grown"),
        "remove_seconds": remove_s,
        "remove_ratio": rebuild_s / remove_s,
        "remove_bytes_written": median_of(removes, "bytes_written"),
        "remove_bytes_grown": median_of(removes, "bytes_grown"),
        "open_first_query_s": median_of(serve, "open_first_query_s"),
        "startup_import_s": median_of(serve, "startup_s"),
        "peak_rss_mb": max(s["peak_rss_mb"] for s in serve),
        "adds": adds,
        "removes": removes,
        "close": close,
        "serve": serve,
    }


def _size(n: float) -> str:
    """Bytes as kB or MB."""
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def markdown(result: dict[str, Any]) -> str:
    """The summary table (one row per store, the peer's RSS alongside)."""
    peer = result["peer"]
    lines = [
        (
            f"n = {result['n']} chunks, {DIM}-d vectors, nproc {result['nproc']}, "
            f"medians of {result['repeat']}; "
            f"bm25s + FAISS peer: peak RSS {peer['peak_rss_mb']:.0f} MiB, open + first query "
            f"{peer['open_first_query_s']:.3f} s"
        ),
        "",
        (
            "| store | add s | remove s | bm25s rebuild s | add ratio (>= 100) | remove ratio (>= 100) "
            "| add bytes written (grown) | remove bytes written (grown) | open + 1st query s (< 1) "
            "| startup+imports s | peak RSS MiB | peer RSS MiB |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, s in result["stores"].items():
        lines.append(
            f"| {kind} | {s['add_seconds']:.4f} | {s['remove_seconds']:.4f} | {s['bm25s_rebuild_s']:.2f} "
            f"| {s['add_ratio']:.1f} {'ok' if s['add_ratio'] >= TARGET_RATIO else 'MISS'} "
            f"| {s['remove_ratio']:.1f} {'ok' if s['remove_ratio'] >= TARGET_RATIO else 'MISS'} "
            f"| {_size(s['add_bytes_written'])} ({_size(s['add_bytes_grown'])}) "
            f"| {_size(s['remove_bytes_written'])} ({_size(s['remove_bytes_grown'])}) "
            f"| {s['open_first_query_s']:.3f} {'ok' if s['open_first_query_s'] < TARGET_OPEN_S else 'MISS'} "
            f"| {s['startup_import_s']:.2f} | {s['peak_rss_mb']:.0f} | {peer['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The whole benchmark in ``work``: corpus, peer, every store."""
    started, load_start = time.perf_counter(), os.getloadavg()
    pieces = load_pieces(args.datasets, args.n)
    queries = load_queries(args.datasets, args.queries)
    query_file = work / "queries.json"
    query_file.write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
    texts = [text for text, _ in pieces]
    log(f"{len(pieces)} pieces ({sum(lang == 'ja' for _, lang in pieces)} Japanese), {len(queries)} queries")
    with stopwatch() as t_embed:
        vectors = hash_embed(texts)
    log(f"embedded in {t_embed['s']:.1f} s; building the bm25s + FAISS peer")
    peer_build = build_peer(work / "peer", texts, vectors)
    del vectors
    stores = {kind: bench_store(kind, work / kind, pieces, query_file, args) for kind in args.stores}
    log(f"peer: {args.repeat} fresh processes")
    peer_runs = [
        run_child(["--child", "peer", "--dir", str(work / "peer"), "--query-file", str(query_file)])
        for _ in range(args.repeat)
    ]
    import finderledge

    return {
        "benchmark": "bench_incremental",
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "python": sys.version.split()[0],
        "finderledge_path": str(Path(finderledge.__file__).parent),
        "note": args.note,
        "n": len(pieces),
        "dim": DIM,
        "repeat": args.repeat,
        "batch": args.batch,
        "queries": len(queries),
        "corpus_embedding_s": t_embed["s"],
        "stores": stores,
        "peer": {
            **peer_build,
            "open_first_query_s": median_of(peer_runs, "open_first_query_s"),
            "startup_import_s": median_of(peer_runs, "startup_s"),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in peer_runs),
            "serve": peer_runs,
        },
        "total_seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="number of one-chunk documents")
    parser.add_argument("--stores", default="chroma,faiss", type=lambda s: [k for k in s.split(",") if k])
    parser.add_argument("--repeat", type=int, default=3, help="adds, removals and fresh processes per store")
    parser.add_argument(
        "--batch", type=int, default=5000, help="documents per add_documents call when building"
    )
    parser.add_argument("--queries", type=int, default=50, help="hybrid queries per serving process")
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument(
        "--workdir", type=Path, help="keep the built directories here (default: a temporary one)"
    )
    parser.add_argument(
        "--note", default="", help="free text stored in the JSON (e.g. which code was measured)"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", choices=[*BACKEND_MODULES, "peer"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--query-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = set(args.stores) - set(BACKEND_MODULES)
    if unknown:
        parser.error(f"--stores: unknown {sorted(unknown)}; expected some of {list(BACKEND_MODULES)}")
    if args.child:
        queries = json.loads(args.query_file.read_text(encoding="utf-8"))
        if args.child == "peer":
            print(json.dumps(serve_peer(args.dir, queries)))
        else:
            print(json.dumps(serve_finderledge(args.dir, args.child, queries)))
        return
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        result = run(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="bench_incremental-") as tmp:
            result = run(args, Path(tmp))
    print(markdown(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
