"""FinderLedge (FAISS) against bm25s + FAISS flat built by hand, at scale, with given vectors, in one run.

    nice -n 5 python benchmarks/bench_scale.py --n 10000                    # validate
    nice -n 5 python benchmarks/bench_scale.py --n 100000 --out benchmarks/results/scale_100k.json
    nice -n 5 python benchmarks/bench_scale.py --n 10000 --profile          # cProfile of FinderLedge's build

The corpus is synthetic: ``--n`` one-chunk documents of 40-70 words drawn (Zipf) from a 20,000-word
vocabulary, in sentences of 8-15 words (the leg calibration draws its pseudo-queries from sentences), each with a unit 384-d float32 vector seeded by its index, so both sides get the same texts and
vectors and nothing is embedded (the vectors are "given": FinderLedge gets them through an ``Embeddings``
that looks the text up).  Every measurement runs in a fresh subprocess (peak RSS from
``resource.getrusage``), the two sides one after the other:

- build: FinderLedge ``add_texts`` in batches of 2,000, closed; the peer tokenizes and indexes with bm25s
  (English stopwords), adds the vectors to a FAISS ``IndexFlatIP`` and saves both and the texts; bytes the
  process read and wrote meanwhile (``/proc/self/io``, page cache included: write amplification shows here);
  the peer's ``fsync`` of its files afterwards is timed apart (``sync_s``: FinderLedge's build syncs its own,
  the hand-built peer does not), and ``build_vs_peer_synced`` compares with the two added;
- disk: bytes under each directory;
- open + first hybrid query in a fresh process: ``import finderledge`` and the open timed separately;
  the peer loads bm25s, FAISS and the texts (imports timed separately too);
- add / remove one document (FinderLedge) against the peer's rebuild (its build time), the first time in the
  process and again (the first pays one-time costs: the text splitter's import, BM25's id map);
- keyword-leg p50 (``search_mode="keyword"``) against bm25s ``retrieve`` with ``n_threads=1``, and the
  hybrid p50 (both over ``--queries`` queries of 2-4 vocabulary words, after one warm-up query).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
VOCAB = 20_000
BATCH = 2_000
SRC = Path(__file__).resolve().parent.parent / "src"


def _words() -> list[str]:
    """The vocabulary: pronounceable synthetic words, the same in every process."""
    rng = np.random.default_rng(7)
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    picks = rng.integers(0, len(syllables), size=(VOCAB, 3))
    lengths = rng.integers(1, 4, size=VOCAB)
    return [
        "".join(syllables[j] for j in row[:n]) + str(i % 7) for i, (row, n) in enumerate(zip(picks, lengths))
    ]


def corpus(n: int) -> list[str]:
    """``n`` synthetic texts (Zipf-distributed words), deterministic."""
    words = _words()
    rng = np.random.default_rng(11)
    lengths = rng.integers(40, 71, size=n)
    ranks = np.minimum(rng.zipf(1.2, size=int(lengths.sum())), VOCAB) - 1
    cuts = rng.integers(8, 16, size=int(lengths.sum()))  # sentence lengths: real text has sentences
    texts, at = [], 0
    for i, length in enumerate(lengths):
        chunk = [words[r] for r in ranks[at : at + length]]
        sentences, start, c = [], 0, at
        while start < len(chunk):
            end = start + int(cuts[c])
            sentences.append(" ".join(chunk[start:end]).capitalize() + ".")
            start, c = end, c + 1
        texts.append(f"Doc{i}. " + " ".join(sentences))
        at += length
    return texts


def vectors_of(n: int) -> np.ndarray:
    """The given vectors: unit float32 rows, deterministic."""
    rows = np.random.default_rng(13).standard_normal((n, DIM), dtype=np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def queries(count: int) -> list[str]:
    """Queries of 2-4 words from the vocabulary's common-to-mid ranks."""
    words = _words()
    rng = np.random.default_rng(17)
    return [
        " ".join(words[int(r)] for r in rng.integers(5, 3000, size=rng.integers(2, 5))) for _ in range(count)
    ]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _io_mib() -> tuple[float, float]:
    """MiB this process has read and written so far, page cache included (``/proc/self/io``; 0 elsewhere)."""
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return 0.0, 0.0
    return int(fields["rchar"]) / 2**20, int(fields["wchar"]) / 2**20


def _io_since(start: tuple[float, float]) -> dict[str, float]:
    now = _io_mib()
    return {"io_read_mib": now[0] - start[0], "io_written_mib": now[1] - start[1]}


def _disk(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _given_embeddings(texts: list[str], vectors: np.ndarray) -> Any:
    """LangChain ``Embeddings`` returning the given vector of a known text (a query: a seeded vector).

    Each vector is returned as a row of the given float32 matrix (a sequence of floats, as the protocol asks),
    not converted to a list of Python floats: the peer is handed the matrix itself, and converting 100,000
    vectors to lists (here) and back (in FinderLedge) charged FinderLedge's build about a second of the
    harness's own work."""
    from langchain_core.embeddings import Embeddings

    index = {t: i for i, t in enumerate(texts)}

    class Given(Embeddings):
        model_name = f"given-{DIM}"

        def embed_documents(self, batch: list[str]) -> list[list[float]]:
            rows = [index.get(t) for t in batch]
            return [
                vectors[i] if i is not None else self.embed_query(t)  # type: ignore[misc]
                for i, t in zip(rows, batch)
            ]

        def embed_query(self, text: str) -> list[float]:
            seed = sum(text.encode()) * 2654435761 % 2**32
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            return (v / np.linalg.norm(v)).tolist()

    return Given()


# -- children (each in a fresh process) -----------------------------------------------------------------
def child_build_fl(directory: Path, n: int, profile: bool) -> dict[str, Any]:
    texts, vectors = corpus(n), vectors_of(n)
    from finderledge import FinderLedge

    emb = _given_embeddings(texts, vectors)
    profiler = cProfile.Profile() if profile else None
    io = _io_mib()
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    with FinderLedge(directory, embedding=emb, show_progress=False, env_file=None) as fl:
        for at in range(0, n, BATCH):
            fl.add_texts(texts[at : at + BATCH])
    if profiler:
        profiler.disable()
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(35)
        stats.sort_stats("tottime").print_stats(25)
    return {"build_s": time.perf_counter() - start, "peak_rss_mib": _rss_mib(), **_io_since(io)}


def child_build_peer(directory: Path, n: int) -> dict[str, Any]:
    texts, vectors = corpus(n), vectors_of(n)
    import bm25s
    import faiss

    io = _io_mib()
    start = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    model = bm25s.BM25()
    model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    model.save(str(directory / "bm25s"))
    index = faiss.IndexFlatIP(DIM)
    index.add(vectors)
    faiss.write_index(index, str(directory / "index.faiss"))
    (directory / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    build_s = time.perf_counter() - start
    return {"build_s": build_s, "sync_s": sync_tree(directory), "peak_rss_mib": _rss_mib(), **_io_since(io)}


def sync_tree(directory: Path) -> float:
    """Seconds to make a finished build durable as FinderLedge makes its own files (``fsync`` of each file and
    folder): timed apart from the peer's ``build_s``, which does not pay it (a power cut can lose its index)."""
    start = time.perf_counter()
    paths = [directory, *directory.rglob("*")]
    for path in sorted((p for p in paths if p.is_file()), key=str) + [p for p in paths if p.is_dir()]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def child_serve_fl(directory: Path, n: int, count: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import finderledge  # noqa: F401

    import_s = time.perf_counter() - t0
    texts, vectors = corpus(n), vectors_of(n)  # the given vectors' lookup (not timed)
    emb = _given_embeddings(texts, vectors)
    qs = queries(count + 1)
    t1 = time.perf_counter()
    from finderledge import FinderLedge

    fl = FinderLedge(directory, embedding=emb, show_progress=False, env_file=None)
    open_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    fl.search(qs[0], k=10)
    first_s = time.perf_counter() - t2
    hybrid, keyword, vector, beyond = [], [], [], []
    for q in qs[1:]:
        t = time.perf_counter()
        fl.search(q, k=10, search_mode="keyword")
        keyword.append(time.perf_counter() - t)
        t = time.perf_counter()
        fl.search(q, k=10, search_mode="vector")
        vector.append(time.perf_counter() - t)
        t = time.perf_counter()
        trace = fl.search(q, k=10).trace
        hybrid.append(time.perf_counter() - t)
        # within this one search: its time beyond the slower leg (the legs run concurrently)
        beyond.append(trace.total - max(trace.embed + trace.vector, trace.keyword))
    t = time.perf_counter()
    (added,) = fl.add_texts(["a new document about " + qs[1]])
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    fl.remove_document(added)
    remove_s = time.perf_counter() - t
    t = time.perf_counter()  # again: without this process's one-time costs (imports, BM25 id map)
    (again,) = fl.add_texts(["another new document about " + qs[2]])
    add_again_s = time.perf_counter() - t
    t = time.perf_counter()
    fl.remove_document(again)
    remove_again_s = time.perf_counter() - t
    fl.close()
    return {
        **serve_figures((import_s, open_s, first_s), keyword, vector, hybrid),
        "hybrid_beyond_slowest_leg_p50_ms": 1000 * statistics.median(beyond),
        "add_one_s": add_s,
        "remove_one_s": remove_s,
        "add_one_again_s": add_again_s,
        "remove_one_again_s": remove_again_s,
        "peak_rss_mib": _rss_mib(),
    }


def child_serve_peer(directory: Path, count: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import bm25s
    import faiss

    import_s = time.perf_counter() - t0
    qs = queries(count + 1)
    t1 = time.perf_counter()
    retriever = bm25s.BM25.load(str(directory / "bm25s"))
    index = faiss.read_index(str(directory / "index.faiss"))
    texts = json.loads((directory / "texts.json").read_text(encoding="utf-8"))
    open_s = time.perf_counter() - t1
    emb = _given_embeddings([], np.zeros((0, DIM), np.float32))

    def keyword(q: str) -> list[int]:
        tokens = bm25s.tokenize([q], stopwords="en", show_progress=False)
        docs, _ = retriever.retrieve(tokens, k=100, n_threads=1, show_progress=False)
        return [int(d) for d in docs[0]]

    def vector(q: str) -> list[int]:
        _, found = index.search(np.asarray([emb.embed_query(q)], dtype=np.float32), 100)
        return [int(d) for d in found[0]]

    def hybrid(q: str) -> list[str]:
        fused: dict[int, float] = {}
        for rank, doc in enumerate(keyword(q), start=1):
            fused[doc] = 1.0 / (60 + rank)
        for rank, doc in enumerate(vector(q), start=1):
            fused[int(doc)] = fused.get(int(doc), 0.0) + 1.0 / (60 + rank)
        return [texts[i] for i in sorted(fused, key=lambda i: -fused[i])[:10]]

    t2 = time.perf_counter()
    hybrid(qs[0])
    first_s = time.perf_counter() - t2
    kw, ve, hy = [], [], []
    for q in qs[1:]:
        t = time.perf_counter()
        keyword(q)
        kw.append(time.perf_counter() - t)
        t = time.perf_counter()
        vector(q)
        ve.append(time.perf_counter() - t)
        t = time.perf_counter()
        hybrid(q)
        hy.append(time.perf_counter() - t)
    return {**serve_figures((import_s, open_s, first_s), kw, ve, hy), "peak_rss_mib": _rss_mib()}


def serve_figures(
    starts: tuple[float, float, float], keyword: list[float], vector: list[float], hybrid: list[float]
) -> dict[str, float]:
    """The figures every side's serving child reports: ``starts`` = (import, open, first hybrid) seconds, and
    the p50 in ms of each kind of search from its per-query seconds."""
    return {
        "import_s": starts[0],
        "open_s": starts[1],
        "first_hybrid_s": starts[2],
        "keyword_p50_ms": 1000 * statistics.median(keyword),
        "vector_p50_ms": 1000 * statistics.median(vector),
        "hybrid_p50_ms": 1000 * statistics.median(hybrid),
    }


def _child(*argv: str) -> dict[str, Any]:
    """Run one child in a fresh interpreter; its last stdout line is its JSON result."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", *argv], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {argv} failed:\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    if len(lines) > 1:
        print("\n".join(lines[:-1]), file=sys.stderr)  # the profile
    result = json.loads(lines[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def main() -> None:
    """Run the children and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="print cProfile of FinderLedge's build")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None, help="folder for the two indexes (a temp one)")
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, directory, *rest = args.child
        path = Path(directory)
        if kind == "build-fl":
            result = child_build_fl(path, int(rest[0]), rest[1] == "1")
        elif kind == "build-peer":
            result = child_build_peer(path, int(rest[0]))
        elif kind == "serve-fl":
            result = child_serve_fl(path, int(rest[0]), int(rest[1]))
        else:
            result = child_serve_peer(path, int(rest[0]))
        print(json.dumps(result))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_scale_"))
    fl_dir, peer_dir = work / "finderledge", work / "peer"
    for d in (fl_dir, peer_dir):
        shutil.rmtree(d, ignore_errors=True)
    load = [os.getloadavg()]
    print(f"peer build of {args.n} ...", file=sys.stderr)
    peer_build = _child("build-peer", str(peer_dir), str(args.n))
    print(f"FinderLedge build of {args.n} ...", file=sys.stderr)
    fl_build = _child("build-fl", str(fl_dir), str(args.n), "1" if args.profile else "0")
    load.append(os.getloadavg())
    peer_serve = _child("serve-peer", str(peer_dir), str(args.queries))
    fl_serve = _child("serve-fl", str(fl_dir), str(args.n), str(args.queries))
    load.append(os.getloadavg())
    fl = {**fl_build, "build_peak_rss_mib": fl_build["peak_rss_mib"], "disk_mib": _disk(fl_dir) / 2**20}
    peer = {
        **peer_build,
        "build_peak_rss_mib": peer_build["peak_rss_mib"],
        "disk_mib": _disk(peer_dir) / 2**20,
    }
    fl["serve"], peer["serve"] = fl_serve, peer_serve
    ratios = {
        "build": fl["build_s"] / peer["build_s"],
        # the peer with its files synced to disk, as FinderLedge's build syncs its own (sync_s timed apart)
        "build_vs_peer_synced": fl["build_s"] / (peer["build_s"] + peer["sync_s"]),
        "build_peak_rss": fl["build_peak_rss_mib"] / peer["build_peak_rss_mib"],
        "disk": fl["disk_mib"] / peer["disk_mib"],
        "add_one_vs_peer_rebuild": peer["build_s"] / fl_serve["add_one_s"],
        "remove_one_vs_peer_rebuild": peer["build_s"] / fl_serve["remove_one_s"],
        "add_one_again_vs_peer_rebuild": peer["build_s"] / fl_serve["add_one_again_s"],
        "remove_one_again_vs_peer_rebuild": peer["build_s"] / fl_serve["remove_one_again_s"],
        "keyword_p50": fl_serve["keyword_p50_ms"] / peer_serve["keyword_p50_ms"],
        "vector_p50": fl_serve["vector_p50_ms"] / peer_serve["vector_p50_ms"],
        "hybrid_p50": fl_serve["hybrid_p50_ms"] / peer_serve["hybrid_p50_ms"],
        # the "hybrid <= slowest leg + 2 ms", FinderLedge's own legs
        "hybrid_minus_slowest_leg_ms": fl_serve["hybrid_p50_ms"]
        - max(fl_serve["keyword_p50_ms"], fl_serve["vector_p50_ms"]),
    }
    result = {
        "command": "python benchmarks/bench_scale.py " + " ".join(sys.argv[1:]),
        "n_chunks": args.n,
        "queries": args.queries,
        "load_avg_start_mid_end": load,
        "cpus": os.cpu_count(),
        "finderledge_faiss": fl,
        "bm25s_faiss_flat": peer,
        "ratios": ratios,
    }
    write_result(result, args.out)


def write_result(result: dict[str, Any], out: Path | None) -> None:
    """Print a benchmark's result as indented JSON, and write it to ``out`` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
