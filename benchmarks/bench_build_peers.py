"""FinderLedge's build against two peers: bare bm25s + FAISS, and the LangChain stack with comparable guarantees.

    nice -n 5 python benchmarks/bench_build_peers.py --n 10000                                  # validate
    nice -n 5 python benchmarks/bench_build_peers.py --n 100000 --rounds 2 \\
        --out benchmarks/results/build_peers_100k.json

Issue 29 compares FinderLedge's build with bm25s + FAISS flat (``bench_scale.py``), a peer that guarantees
nothing beyond "the last build is searchable". This script adds the stack a LangChain user wires by hand to
get what FinderLedge gives, so a build target can be set against equal guarantees. The corpus, the given
vectors (nothing is embedded), the queries and the measuring helpers are ``bench_scale``'s. Every measurement
runs in a fresh subprocess; the sides run one after the other (their order rotated each round).

Sides:

1. ``finderledge``: ``bench_scale.child_build_fl`` (``add_texts`` in batches of 2,000, then closed). Guarantees:
   a transactional SQLite ledger (content-hash ids, unchanged documents skipped, versions, metadata, a change
   log), split by its own splitter (chunk_size 1000, overlap 100), incremental BM25 and FAISS indexes
   (``IndexFlatIP`` over normalised vectors) replayed from the ledger after a crash, a write lock for many
   processes, no pickle in the directory.
2. ``bm25s_faiss``: ``bench_scale.child_build_peer`` (bm25s tokenize + index, ``IndexFlatIP``, texts as JSON).
   Guarantees none of the above: no ids, no dedupe, no metadata, no incremental update (adding or removing a
   document is a rebuild: its ``build_s``), no crash safety.
3. ``langchain_index``: for each batch of 2,000 texts, ``RecursiveCharacterTextSplitter(chunk_size=1000,
   chunk_overlap=100)`` (FinderLedge's defaults, counted in characters) makes Documents with
   ``metadata={"source": ...}``, and ``langchain_core.indexing.index()`` writes them with
   ``cleanup="incremental"``, ``source_id_key="source"``, ``batch_size=2000``, ``key_encoder="sha256"`` through
   a ``SQLRecordManager`` (``langchain_classic.indexes``, SQLAlchemy on a SQLite file) into
   langchain_community's ``FAISS`` over an exact ``IndexFlatIP`` with ``DistanceStrategy.MAX_INNER_PRODUCT``
   (the given vectors are already unit length, so inner product is cosine, as in FinderLedge); the store is
   saved once with ``save_local`` at the end. Then ``BM25Retriever.from_documents`` (rank_bm25's
   ``BM25Okapi``, its default ``str.split`` tokenizer) over every chunk, persisted with ``pickle`` (the
   retriever has no save method; pickling it is how it is kept). Its directory: the record manager's SQLite
   file, the FAISS folder, the BM25 pickle. It gives content-hash ids, dedupe of unchanged chunks, metadata,
   and cleanup of a changed source's old chunks. It does not give: an incremental BM25 (every add or remove
   rebuilds and re-pickles it), atomic or crash-safe saves (``save_local`` and the pickle are overwritten in
   place, and a crash between ``index()`` and ``save_local`` leaves the record manager listing chunks that
   the saved FAISS lacks, which the next ``index()`` then skips), versions or a change log, a lock for many
   processes; loading it unpickles (``allow_dangerous_deserialization=True``).

Measured per side: the build (``build_s``, peak RSS, bytes read and written from ``/proc/self/io``, bytes on
disk); then in a fresh process: open, a hybrid query p50 over ``--queries`` queries at k=10 (FinderLedge's
default ``search``; LangChain's ``EnsembleRetriever`` of the BM25 retriever and the FAISS retriever, both
k=10, weights 0.5/0.5, which returns the union of the two lists, up to 20), then one new document added and
removed twice. LangChain adds with ``index()`` of the new document (``cleanup="incremental"``), ``save_local``
and a rebuilt, re-pickled BM25 retriever. It removes first the way LangChain's indexing guide documents for a
deleted source (only ``cleanup="full"`` removes a source that is no longer loaded: ``index()`` of the whole
remaining corpus, split again; unchanged chunks are hashed and skipped, not re-embedded), and the second time
by hand (``record_manager.list_keys(group_ids=[source])``, ``FAISS.delete``, ``record_manager.delete_keys``),
each followed by ``save_local`` and the BM25 rebuild. FinderLedge adds with ``add_texts`` and removes with
``remove_document`` (``bench_scale.child_serve_fl``). The bm25s peer's add or remove is its rebuild.

Ratios are FinderLedge / peer (below 1: FinderLedge is faster or smaller), from the medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import bench_scale as bs

SIDES = ("finderledge", "bm25s_faiss", "langchain_index")
CHUNK_SIZE, CHUNK_OVERLAP = 1000, 100  # FinderLedge's defaults (config.py)
K = 10
KEY_ENCODER = "sha256"  # index()'s default sha1 warns that it is not collision-resistant
NAMESPACE = "faiss/bench_build_peers"
RECORDS, FAISS_DIR, BM25_FILE = "records.sqlite", "faiss", "bm25.pkl"


def _source(i: int) -> str:
    return f"doc-{i}"


# -- the LangChain stack ----------------------------------------------------------------------------------
class LangChainStack:
    """The record manager, FAISS store, BM25 retriever and splitter in one directory, wired as documented."""

    def __init__(self, directory: Path, embedding: Any, *, load: bool) -> None:
        import faiss
        from langchain_classic.indexes import SQLRecordManager
        from langchain_community.docstore.in_memory import InMemoryDocstore
        from langchain_community.vectorstores import FAISS
        from langchain_community.vectorstores.utils import DistanceStrategy
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.records = SQLRecordManager(NAMESPACE, db_url=f"sqlite:///{directory / RECORDS}")
        self.splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
        strategy = DistanceStrategy.MAX_INNER_PRODUCT
        if load:
            self.store = FAISS.load_local(
                str(directory / FAISS_DIR),
                embedding,
                allow_dangerous_deserialization=True,  # the docstore is a pickle
                distance_strategy=strategy,
            )
            with (directory / BM25_FILE).open("rb") as f:
                self.keyword = pickle.load(f)
        else:
            self.records.create_schema()
            self.store = FAISS(
                embedding_function=embedding,
                index=faiss.IndexFlatIP(bs.DIM),
                docstore=InMemoryDocstore(),
                index_to_docstore_id={},
                distance_strategy=strategy,
            )
            self.keyword = None

    def split(self, texts: list[str], sources: list[str]) -> list[Any]:
        """Documents (chunks) of ``texts``, each with its source in the metadata."""
        return self.splitter.create_documents(texts, metadatas=[{"source": s} for s in sources])

    def index(self, chunks: list[Any], cleanup: str) -> dict[str, int]:
        """``langchain_core.indexing.index`` of ``chunks`` into the FAISS store through the record manager."""
        from langchain_core.indexing import index

        return dict(
            index(
                chunks,
                self.records,
                self.store,
                cleanup=cleanup,  # type: ignore[arg-type]
                source_id_key="source",
                batch_size=bs.BATCH,
                key_encoder=KEY_ENCODER,
            )
        )

    def save_vectors(self) -> None:
        self.store.save_local(str(self.directory / FAISS_DIR))

    def rebuild_keyword(self, chunks: list[Any]) -> None:
        """BM25 over every chunk, pickled: ``BM25Retriever`` cannot add or remove a document."""
        from langchain_community.retrievers import BM25Retriever

        self.keyword = BM25Retriever.from_documents(chunks, k=K)
        with (self.directory / BM25_FILE).open("wb") as f:
            pickle.dump(self.keyword, f)

    def hybrid(self) -> Any:
        from langchain_classic.retrievers import EnsembleRetriever

        vector = self.store.as_retriever(search_kwargs={"k": K})
        return EnsembleRetriever(retrievers=[self.keyword, vector], weights=[0.5, 0.5])

    def counts(self) -> dict[str, int]:
        """Chunks in the record manager, the FAISS index and the BM25 retriever (equal when consistent)."""
        return {
            "records": len(self.records.list_keys()),
            "faiss": int(self.store.index.ntotal),
            "bm25": len(self.keyword.docs) if self.keyword is not None else 0,
        }


@contextmanager
def _part(parts: dict[str, float], name: str) -> Iterator[None]:
    """Add the block's seconds to ``parts[name + "_s"]`` and the MiB it wrote to ``[name + "_written_mib"]``."""
    io, start = bs._io_mib(), time.perf_counter()
    yield
    parts[f"{name}_s"] = parts.get(f"{name}_s", 0.0) + time.perf_counter() - start
    written = bs._io_since(io)["io_written_mib"]
    parts[f"{name}_written_mib"] = parts.get(f"{name}_written_mib", 0.0) + written


def child_build_lc(directory: Path, n: int) -> dict[str, Any]:
    texts, vectors = bs.corpus(n), bs.vectors_of(n)
    emb = bs._given_embeddings(texts, vectors)
    # the imports before the clock, as the other sides'
    import faiss  # noqa: F401
    import langchain_classic.indexes  # noqa: F401
    import langchain_community.docstore.in_memory
    import langchain_community.retrievers
    import langchain_community.vectorstores.faiss  # noqa: F401
    import langchain_core.indexing  # noqa: F401
    import langchain_text_splitters  # noqa: F401

    io = bs._io_mib()
    start = time.perf_counter()
    stack = LangChainStack(directory, emb, load=False)
    chunks: list[Any] = []
    indexed: Counter[str] = Counter()
    parts: dict[str, float] = {}  # where the time and the bytes written go
    for at in range(0, n, bs.BATCH):
        with _part(parts, "split"):
            batch = stack.split(
                texts[at : at + bs.BATCH], [_source(i) for i in range(at, min(n, at + bs.BATCH))]
            )
        with _part(parts, "index"):
            indexed.update(stack.index(batch, "incremental"))
        chunks.extend(batch)
    with _part(parts, "save_faiss"):
        stack.save_vectors()
    with _part(parts, "bm25_build_pickle"):
        stack.rebuild_keyword(chunks)
    build_s = time.perf_counter() - start
    counts = stack.counts()
    if set(counts.values()) != {len(chunks)} or indexed["num_added"] != len(chunks):
        raise RuntimeError(f"the LangChain stack disagrees after its build: {counts}, {dict(indexed)}")
    return {
        "build_s": build_s,
        "peak_rss_mib": bs._rss_mib(),
        **bs._io_since(io),
        "chunks": len(chunks),
        "parts": parts,
        "index_result": dict(indexed),
    }


def child_serve_lc(directory: Path, n: int, count: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import faiss  # noqa: F401
    import langchain_classic.indexes
    import langchain_classic.retrievers  # noqa: F401
    import langchain_community.docstore.in_memory
    import langchain_community.retrievers
    import langchain_community.vectorstores.faiss  # noqa: F401
    import langchain_core.indexing  # noqa: F401
    import langchain_text_splitters  # noqa: F401

    import_s = time.perf_counter() - t0
    texts, vectors = (
        bs.corpus(n),
        bs.vectors_of(n),
    )  # the given vectors' lookup and the source texts (not timed)
    emb = bs._given_embeddings(texts, vectors)
    qs = bs.queries(count + 1)
    t1 = time.perf_counter()
    stack = LangChainStack(directory, emb, load=True)
    hybrid = stack.hybrid()
    open_s = time.perf_counter() - t1
    vector = stack.store.as_retriever(search_kwargs={"k": K})
    t2 = time.perf_counter()
    hybrid.invoke(qs[0])
    first_s = time.perf_counter() - t2
    keyword_ms, vector_ms, hybrid_ms = [], [], []
    for q in qs[1:]:
        t = time.perf_counter()
        stack.keyword.invoke(q)
        keyword_ms.append(time.perf_counter() - t)
        t = time.perf_counter()
        vector.invoke(q)
        vector_ms.append(time.perf_counter() - t)
        t = time.perf_counter()
        hybrid.invoke(q)
        hybrid_ms.append(time.perf_counter() - t)

    def add(text: str, source: str) -> dict[str, float]:
        parts: dict[str, float] = {}
        t = time.perf_counter()
        new = stack.split([text], [source])
        result = stack.index(new, "incremental")
        parts["index_s"] = time.perf_counter() - t
        if result["num_added"] != len(new):
            raise RuntimeError(f"index() of one new document: {result}")
        t = time.perf_counter()
        stack.save_vectors()
        parts["save_faiss_s"] = time.perf_counter() - t
        t = time.perf_counter()
        stack.rebuild_keyword([*stack.keyword.docs, *new])
        parts["bm25_rebuild_pickle_s"] = time.perf_counter() - t
        return parts

    def finish_removal(source: str, parts: dict[str, float]) -> dict[str, float]:
        t = time.perf_counter()
        stack.save_vectors()
        parts["save_faiss_s"] = time.perf_counter() - t
        t = time.perf_counter()
        stack.rebuild_keyword([d for d in stack.keyword.docs if d.metadata["source"] != source])
        parts["bm25_rebuild_pickle_s"] = time.perf_counter() - t
        return parts

    def remove_documented(source: str) -> dict[str, float]:
        """The indexing guide's way: only ``cleanup="full"`` over what remains removes a deleted source."""
        t = time.perf_counter()
        remaining = stack.split(texts, [_source(i) for i in range(n)])
        result = stack.index(remaining, "full")
        if result["num_deleted"] != 1:
            raise RuntimeError(f"index(cleanup='full') without {source}: {result}")
        return finish_removal(source, {"split_index_full_s": time.perf_counter() - t})

    def remove_by_ids(source: str) -> dict[str, float]:
        """By hand: the source's keys from the record manager, deleted from FAISS and then from the records."""
        t = time.perf_counter()
        keys = stack.records.list_keys(group_ids=[source])
        stack.store.delete(keys)
        stack.records.delete_keys(keys)
        if len(keys) != 1:
            raise RuntimeError(f"record manager keys of {source}: {keys}")
        return finish_removal(source, {"delete_s": time.perf_counter() - t})

    timed: dict[str, float] = {}
    parts: dict[str, dict[str, float]] = {}
    for name, step in (
        ("add_one", lambda: add("a new document about " + qs[1], "new-1")),
        ("remove_one", lambda: remove_documented("new-1")),
        ("add_one_again", lambda: add("another new document about " + qs[2], "new-2")),
        ("remove_one_by_ids", lambda: remove_by_ids("new-2")),
    ):
        t = time.perf_counter()
        parts[name] = step()
        timed[f"{name}_s"] = time.perf_counter() - t
    counts = stack.counts()
    if set(counts.values()) != {n}:
        raise RuntimeError(f"the LangChain stack disagrees after adding and removing: {counts}")
    return {
        **bs.serve_figures((import_s, open_s, first_s), keyword_ms, vector_ms, hybrid_ms),
        **timed,
        "parts": parts,
        "peak_rss_mib": bs._rss_mib(),
    }


# -- the driver ---------------------------------------------------------------------------------------------
def _child(*argv: str) -> dict[str, Any]:
    """Run one child in a fresh interpreter; its last stdout line is its JSON result."""
    env = {**os.environ, "PYTHONPATH": str(bs.SRC), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", *argv], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"child {argv} failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def _run_child(kind: str, side: str, directory: Path, n: int, count: int) -> dict[str, Any]:
    if kind == "build":
        if side == "finderledge":
            return bs.child_build_fl(directory, n, profile=False)
        if side == "bm25s_faiss":
            return bs.child_build_peer(directory, n)
        return child_build_lc(directory, n)
    if side == "finderledge":
        return bs.child_serve_fl(directory, n, count)
    if side == "bm25s_faiss":
        return bs.child_serve_peer(directory, count)
    return child_serve_lc(directory, n, count)


def one_round(work: Path, order: list[str], n: int, count: int) -> tuple[dict[str, Any], list[Any]]:
    """Build every side, then serve every side, each in a fresh process; the figures and the load."""
    load = [os.getloadavg()]
    sides: dict[str, dict[str, Any]] = {}
    for side in order:
        directory = work / side
        shutil.rmtree(directory, ignore_errors=True)
        print(f"  {side}: build of {n} ...", file=sys.stderr)
        build = _child("build", side, str(directory), str(n), str(count))
        sides[side] = {**build, "disk_mib": bs._disk(directory) / 2**20}
    load.append(os.getloadavg())
    for side in order:
        print(f"  {side}: open, queries, add and remove ...", file=sys.stderr)
        sides[side]["serve"] = _child("serve", side, str(work / side), str(n), str(count))
    load.append(os.getloadavg())
    for side in order:
        shutil.rmtree(work / side, ignore_errors=True)
    return {side: sides[side] for side in SIDES}, load


def medians(rounds: list[Any]) -> Any:
    """The median of each number across rounds (nested dicts alike; other values from the first round)."""
    first = rounds[0]
    if isinstance(first, dict):
        return {key: medians([r[key] for r in rounds]) for key in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return statistics.median(rounds)
    return first


def ratios(sides: dict[str, Any]) -> dict[str, dict[str, float]]:
    """FinderLedge / each peer: build, memory, disk, bytes written, hybrid p50, add and remove one document."""
    fl = sides["finderledge"]
    out: dict[str, dict[str, float]] = {}
    for peer in ("bm25s_faiss", "langchain_index"):
        other = sides[peer]
        figures = {
            "build": fl["build_s"] / other["build_s"],
            "build_peak_rss": fl["peak_rss_mib"] / other["peak_rss_mib"],
            "disk": fl["disk_mib"] / other["disk_mib"],
            "io_written": fl["io_written_mib"] / other["io_written_mib"],
            "hybrid_p50": fl["serve"]["hybrid_p50_ms"] / other["serve"]["hybrid_p50_ms"],
        }
        if peer == "bm25s_faiss":  # no incremental update: adding or removing one document is a rebuild
            # with its files synced to disk after its build, as FinderLedge syncs its own
            figures["build_vs_synced"] = fl["build_s"] / (other["build_s"] + other["sync_s"])
            figures["add_one_vs_rebuild"] = fl["serve"]["add_one_s"] / other["build_s"]
            figures["remove_one_vs_rebuild"] = fl["serve"]["remove_one_s"] / other["build_s"]
        else:
            for mine, theirs in (
                ("add_one_s", "add_one_s"),
                ("remove_one_s", "remove_one_s"),
                ("add_one_again_s", "add_one_again_s"),
                ("remove_one_again_s", "remove_one_by_ids_s"),
            ):
                figures[theirs.removesuffix("_s")] = fl["serve"][mine] / other["serve"][theirs]
        out[peer] = figures
    return out


def main() -> None:
    """Run the rounds and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the indexes (a temp one, removed)"
    )
    parser.add_argument("--child", nargs=5, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, side, directory, n, count = args.child
        print(json.dumps(_run_child(kind, side, Path(directory), int(n), int(count))))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_build_peers_"))
    rounds, loads = [], []
    for r in range(args.rounds):
        order = list(SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)])
        print(f"round {r + 1}/{args.rounds}: {', '.join(order)}", file=sys.stderr)
        sides, load = one_round(work, order, args.n, args.queries)
        rounds.append({"order": order, **sides, "ratios": ratios(sides)})
        loads.append(load)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    median = medians([{side: r[side] for side in SIDES} for r in rounds])
    result = {
        "command": "python benchmarks/bench_build_peers.py " + " ".join(sys.argv[1:]),
        "n_chunks": args.n,
        "queries": args.queries,
        "k": K,
        "rounds": args.rounds,
        "load_avg_start_mid_end": loads,  # per round: (1, 5, 15-minute) load before, after builds, at the end
        "cpus": os.cpu_count(),
        # FAISS (OpenMP) and numpy (BLAS) threads: unset, each uses every core; on a loaded machine that costs
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "langchain_setup": {
            "splitter": f"RecursiveCharacterTextSplitter(chunk_size={CHUNK_SIZE}, chunk_overlap={CHUNK_OVERLAP})",
            "index": f"index(cleanup='incremental', source_id_key='source', batch_size={bs.BATCH}, "
            f"key_encoder='{KEY_ENCODER}') per batch of {bs.BATCH}",
            "record_manager": "langchain_classic.indexes.SQLRecordManager, sqlite file",
            "vector_store": "langchain_community FAISS, IndexFlatIP, MAX_INNER_PRODUCT (unit vectors), "
            "save_local once after the build and after each add/remove",
            "keyword": "langchain_community BM25Retriever.from_documents (rank_bm25 BM25Okapi), pickled",
            "hybrid": f"langchain_classic EnsembleRetriever, weights 0.5/0.5, each retriever k={K}",
            "remove_one": "index() of the remaining corpus with cleanup='full' (documented for deleted sources)",
            "remove_one_by_ids": "record_manager.list_keys(group_ids) + FAISS.delete + record_manager.delete_keys",
        },
        "median": median,
        "ratios": ratios(median),
        "per_round": rounds,
    }
    bs.write_result(result, args.out)


if __name__ == "__main__":
    main()
