"""A writer or reader process of the multi-process stress test (``tests/test_concurrency_stress.py``).

Usage::

    python stress_worker.py writer DIR KIND WRITER_ID SHARED_DIR JOURNAL SEED
    python stress_worker.py reader DIR KIND READER_ID SHARED_DIR REPORT SEED STOP_FILE MAX_SECONDS

Every document (text or shared file) carries a unique token ``tk<hex>`` in each of its paragraphs, so
that every chunk of it carries the token too: a keyword search for the token must find exactly that
document's chunks, and two chunks of one file source with different tokens are two versions of it.

A **writer** loops over random operations until it is killed (the test SIGKILLs it at any moment) or,
rarely, retires with ``close()``.  Each operation is journaled (one JSON line, flushed and fsynced)
*before* ("begin") and *after* ("done") the library call, so the test knows which writes returned.
Replacing or removing a shared file happens under a test-level ``flock`` on ``<file>.lock``, which also
holds a per-file operation counter: the journals of all writers then order the operations on one file.

A **reader** searches in a loop (random queries, every mode) until ``STOP_FILE`` exists, checks each
result set, probes that a just-committed document is found in the keyword and the vector leg, and writes
a JSON report (violations, warnings the library logged, counts).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import re
import sys
import time
import traceback
import uuid
import zlib
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

DIM = 64
CHUNK_SIZE = 200
CHUNK_OVERLAP = 20
N_SHARED = 6
TOKEN_RE = re.compile(r"\btk[0-9a-f]{16}\b")
WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "engine",
    "garden",
    "lamp",
    "mirror",
    "ocean",
    "paper",
    "rocket",
    "silver",
    "tiger",
    "violin",
    "winter",
    "yellow",
    "bridge",
    "candle",
    "dragon",
    "forest",
    "harbor",
    "island",
    "jungle",
    "kettle",
    "ladder",
    "meadow",
    "needle",
    "orchid",
    "pepper",
    "quartz",
    "saddle",
    "tunnel",
    "valley",
    "walnut",
    "anchor",
    "basket",
    "copper",
    "desert",
    "feather",
    "glacier",
]


class HashEmbeddings(Embeddings):
    """A cheap deterministic embedding: signed hashing of lower-case words into 64 dimensions, L2-normalised.

    ``zlib.crc32`` (not ``hash``, which is salted per process) so that every process computes the same
    vectors.  The directory records the model as ``HashEmbeddings``: every process must use this class."""

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(DIM, dtype=np.float64)
        for word in re.findall(r"\w+", text.lower()):
            h = zlib.crc32(word.encode("utf-8"))
            v[h % DIM] += 1.0 if (h >> 16) & 1 else -1.0
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            v[0], norm = 1.0, 1.0
        return (v / norm).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def open_ledger(directory: str | Path, kind: str) -> Any:
    from finderledge import FinderLedge

    return FinderLedge(
        directory,
        vector_store=kind,
        embedding=HashEmbeddings(),
        chunk_size=CHUNK_SIZE,
        chunk_overlap=CHUNK_OVERLAP,
        show_progress=False,
        lock_timeout=120,
    )


def new_token() -> str:
    return "tk" + uuid.uuid4().hex[:16]


def paragraphs(rng: random.Random, token: str, n: int) -> str:
    """``n`` paragraphs (each well under ``CHUNK_SIZE``), each starting with ``token`` and random words."""
    return "\n\n".join(
        f"{token} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 14))) for _ in range(n)
    )


def shared_paths(shared_dir: str | Path) -> list[Path]:
    return [Path(shared_dir) / f"shared-{i}.txt" for i in range(N_SHARED)]


def write_shared(path: Path, token: str, rng: random.Random) -> None:
    """New content of a shared file: several paragraphs (so several chunks), all carrying ``token``."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        f"Shared file {path.name} version {token}.\n\n" + paragraphs(rng, token, rng.randint(3, 7)),
        encoding="utf-8",
    )
    os.replace(tmp, path)


class FileLock:
    """The test-level lock of one shared file (``fcntl.flock`` on ``<file>.lock``) with its op counter."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".lock")
        self.fd = -1

    def __enter__(self) -> FileLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def next_counter(self) -> int:
        """Increment the file's operation counter (only called under the lock).

        One fixed-width ``pwrite`` over the old value, never truncate-then-write: a writer SIGKILLed between
        those two calls left an empty file, the counter restarted at 1, and the checker (which orders a file's
        operations by counter) blamed the library for a version that was in fact the newest.
        """
        raw = os.pread(self.fd, 64, 0).decode().strip("\x00 \n")
        counter = int(raw or "0") + 1
        os.pwrite(self.fd, f"{counter:020d}".encode(), 0)
        os.fsync(self.fd)
        return counter

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class Journal:
    """Append-only JSON lines, each flushed and fsynced before the call returns."""

    def __init__(self, path: str | Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **entry: Any) -> None:
        entry["t"] = time.time()
        os.write(self._fd, (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8"))
        os.fsync(self._fd)


class Recorder(logging.Handler):
    """Collects what the library logs at WARNING and above."""

    def __init__(self, sink: Any = None) -> None:
        super().__init__(logging.WARNING)
        self.records: list[dict[str, Any]] = []
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        item = {"level": record.levelname, "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            item["exc"] = "".join(traceback.format_exception(*record.exc_info))
        self.records.append(item)
        if self.sink is not None:
            self.sink(item)


def watch_logs(sink: Any = None) -> Recorder:
    handler = Recorder(sink)
    logger = logging.getLogger("finderledge")
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    return handler


# -- writer ---------------------------------------------------------------------------------------------
def run_writer(
    directory: str, kind: str, writer_id: str, shared_dir: str, journal_path: str, seed: int
) -> int:
    from finderledge.errors import DocumentNotFoundError
    from finderledge.ingest.write import content_id

    rng = random.Random(seed)
    journal = Journal(journal_path)
    watch_logs(lambda item: journal.write(e="log", **item))
    journal.write(e="start", w=writer_id, pid=os.getpid())
    fl = open_ledger(directory, kind)
    journal.write(e="opened", w=writer_id)
    paths = shared_paths(shared_dir)
    mine: list[str] = []  # text documents this writer added (and has not begun to remove)
    n = 0
    for op_no in range(10**9):
        op = rng.choices(["add", "replace", "remove", "remove_source"], weights=[5, 3, 2, 1])[0]
        if op == "remove" and not mine:
            op = "add"
        try:
            if op == "add":
                docs = []
                for _ in range(rng.randint(1, 5)):
                    n += 1
                    token = new_token()
                    text = f"Note {writer_id}/{n} {token}.\n\n" + paragraphs(rng, token, rng.randint(1, 3))
                    docs.append(Document(page_content=text, metadata={"writer": writer_id, "n": n}))
                expected = [content_id("", d.page_content) for d in docs]
                journal.write(e="begin", op="add", w=writer_id, no=op_no, ids=expected)
                ids = fl.add_documents(docs)
                journal.write(e="done", op="add", w=writer_id, no=op_no, ids=ids)
                mine.extend(ids)
            elif op == "remove":
                if rng.random() < 0.7:
                    pid = mine.pop(rng.randrange(len(mine)))
                else:  # anyone's note: writers may race to remove the same one
                    notes = [d.id for d in fl.list_documents() if "writer" in d.metadata]
                    pid = rng.choice(notes) if notes else mine.pop(rng.randrange(len(mine)))
                journal.write(e="begin", op="remove", w=writer_id, no=op_no, id=pid)
                try:
                    removed = fl.remove_document(pid)
                except DocumentNotFoundError:
                    removed = []  # another writer removed it first
                journal.write(e="done", op="remove", w=writer_id, no=op_no, id=pid, removed=removed)
            else:
                path = rng.choice(paths)
                with FileLock(path) as lock:
                    counter = lock.next_counter()
                    if op == "replace":
                        token = new_token()
                        journal.write(
                            e="begin",
                            op="replace",
                            w=writer_id,
                            no=op_no,
                            path=str(path),
                            ctr=counter,
                            token=token,
                        )
                        write_shared(path, token, rng)
                        ids = fl.add_document(str(path))
                        journal.write(
                            e="done",
                            op="replace",
                            w=writer_id,
                            no=op_no,
                            path=str(path),
                            ctr=counter,
                            token=token,
                            ids=ids,
                        )
                    else:
                        journal.write(
                            e="begin", op="remove_source", w=writer_id, no=op_no, path=str(path), ctr=counter
                        )
                        try:
                            removed = fl.remove_document(str(path))
                        except DocumentNotFoundError:
                            removed = []
                        journal.write(
                            e="done",
                            op="remove_source",
                            w=writer_id,
                            no=op_no,
                            path=str(path),
                            ctr=counter,
                            removed=removed,
                        )
        except Exception:  # noqa: BLE001 - journaled; the test fails on any
            journal.write(e="error", op=op, w=writer_id, no=op_no, tb=traceback.format_exc())
            return 1
        time.sleep(rng.uniform(0.0, 0.03))
        if op_no > 20 and rng.random() < 0.01:  # rarely retire cleanly: close() while others write
            fl.close()
            journal.write(e="retired", w=writer_id)
            return 0
    return 0


# -- reader ---------------------------------------------------------------------------------------------
class ChangeMap:
    """What the change log says about each document: add seq, remove seq, chunk count."""

    def __init__(self) -> None:
        self.seq = 0
        self.added: dict[str, int] = {}
        self.removed: dict[str, int] = {}
        self.chunks: dict[str, int] = {}
        self.live: dict[str, None] = {}  # insertion-ordered set

    def update(self, ledger: Any) -> None:
        for change in ledger.changes_since(self.seq):
            if change.op == "add":
                self.added[change.doc_id] = change.seq
                self.chunks[change.doc_id] = change.chunk_count
                self.removed.pop(change.doc_id, None)  # (re-added content: not in this workload)
                self.live[change.doc_id] = None
            else:
                self.removed[change.doc_id] = change.seq
                self.live.pop(change.doc_id, None)
            self.seq = change.seq

    def live_at(self, pid: str, seq: int) -> bool:
        return self.added.get(pid, 10**18) <= seq and self.removed.get(pid, 10**18) > seq


def run_reader(
    directory: str,
    kind: str,
    reader_id: str,
    shared_dir: str,
    report_path: str,
    seed: int,
    stop_file: str,
    max_seconds: float,
) -> int:
    from finderledge.ingest.splitter import child_id
    from finderledge.storage.seals import UnsealedError

    rng = random.Random(seed)
    logs = watch_logs()
    started = time.time()
    fl = open_ledger(directory, kind)
    shared = {str(p) for p in shared_paths(shared_dir)}
    cmap = ChangeMap()
    report: dict[str, Any] = {
        "reader": reader_id,
        "pid": os.getpid(),
        "searches": 0,
        "results": 0,
        "keyword_probes": 0,
        "vector_probes": 0,
        "vector_probe_misses": [],
        "replica_checks": 0,
        "chroma_ids_drift": 0,
        "violations": [],
        "n_violations": 0,
        "max_seq": 0,
        "final_rounds": 0,
    }

    def violation(kind_: str, **details: Any) -> None:
        report["n_violations"] += 1
        if len(report["violations"]) < 50:
            report["violations"].append({"kind": kind_, "t": time.time(), **details})

    def save() -> None:
        report["warnings"] = logs.records[:50]
        report["n_warnings"] = len(logs.records)
        report["seconds"] = time.time() - started
        tmp = report_path + ".tmp"
        Path(tmp).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, report_path)

    def check_results(results: Any, query: str, mode: str) -> None:
        seq = results.trace.ledger_seq
        if seq < report["max_seq"]:
            violation("ledger_seq went back", seq=seq, before=report["max_seq"])
        report["max_seq"] = max(report["max_seq"], seq)
        cmap.update(fl.ledger)  # after the search: knows every change up to (at least) seq
        tokens_by_source: dict[str, set[str]] = {}
        seen: set[str] = set()
        for r in results:
            md = r.info
            cid, pid = md.get("id"), md.get("parent_id")
            if cid in seen:
                violation("duplicate result", query=query, mode=mode, id=cid)
            seen.add(cid)
            if pid not in cmap.added or cmap.added[pid] > seq:
                violation(
                    "result not committed at the searched seq",
                    query=query,
                    mode=mode,
                    id=cid,
                    seq=seq,
                    added_at=cmap.added.get(pid),
                )
            elif cmap.removed.get(pid, 10**18) <= seq:
                violation(
                    "result removed before the searched seq",
                    query=query,
                    mode=mode,
                    id=cid,
                    seq=seq,
                    removed_at=cmap.removed[pid],
                )
            index = md.get("split_index")
            if cid != child_id(str(pid), int(index if index is not None else -1)) or not 0 <= int(
                index
            ) < cmap.chunks.get(pid, 0):
                violation(
                    "chunk id/index does not match its document",
                    id=cid,
                    split_index=index,
                    chunk_count=cmap.chunks.get(pid),
                )
            tokens = set(TOKEN_RE.findall(r.content))
            if len(tokens) != 1:
                violation("chunk without exactly one token", id=cid, tokens=sorted(tokens))
            source = md.get("source")
            if source is not None:
                if source not in shared:
                    violation("unknown source", id=cid, source=source)
                tokens_by_source.setdefault(source, set()).update(tokens)
        for source, tokens in tokens_by_source.items():
            if len(tokens) > 1:
                violation(
                    "two versions of one source in one result set",
                    query=query,
                    mode=mode,
                    source=source,
                    tokens=sorted(tokens),
                    seq=seq,
                )

    def keyword_probe() -> None:
        """A document live in the ledger now: a keyword search for its token finds exactly its chunks."""
        if not cmap.live:
            return
        pid = rng.choice(list(cmap.live)[-200:])  # mostly recent commits
        record = fl.ledger.get_document(pid)
        if record is None:
            return  # removed meanwhile
        token = TOKEN_RE.findall(record.content)[0]
        results = fl.search(token, search_mode="keyword", k=50)
        report["keyword_probes"] += 1
        check_results(results, token, "keyword-probe")
        seq = results.trace.ledger_seq
        got = {r.metadata["_finderledge"]["id"] for r in results}
        want = {child_id(pid, i) for i in range(cmap.chunks[pid])} if cmap.live_at(pid, seq) else set()
        # a search sees every commit made before it started: the document was committed before this one
        if got != want:
            violation(
                "keyword probe: a committed document is not found exactly",
                id=pid,
                seq=seq,
                added_at=cmap.added.get(pid),
                removed_at=cmap.removed.get(pid),
                missing=sorted(want - got),
                extra=sorted(got - want),
            )

    def vector_probe() -> None:
        """A chunk live in the ledger now: a vector search for its exact text ranks it in the top 5."""
        if not cmap.live:
            return
        pid = rng.choice(list(cmap.live)[-200:])
        chunks = fl.ledger.chunks_of(pid)
        if not chunks:
            return
        chunk = rng.choice(chunks)
        results = fl.search(chunk.content, search_mode="vector", k=5)
        report["vector_probes"] += 1
        check_results(results, chunk.content[:40], "vector-probe")
        seq = results.trace.ledger_seq
        got = [r.metadata["_finderledge"]["id"] for r in results]
        if cmap.live_at(pid, seq) and chunk.id not in got:
            # exact in FAISS and in the overlay; Chroma's HNSW is approximate, so the test judges misses
            report["vector_probe_misses"].append(
                {"id": chunk.id, "seq": seq, "added_at": cmap.added.get(pid), "got": got, "t": time.time()}
            )

    def replica_check() -> None:
        """Right after a search (nothing else runs in this process): this process's BM25 index and vector
        index (base plus overlay) hold exactly the chunks the ledger held at the seq the search reflected."""
        base = (
            fl.vector_store
        )  # first: opening the vector leg (if no search opened it yet) catches up both legs
        seq = min(leg.seq for leg in fl.replica.legs())
        cmap.update(fl.ledger)
        want = {
            child_id(pid, i) for pid, n in cmap.chunks.items() if cmap.live_at(pid, seq) for i in range(n)
        }
        overlay = fl.replica.overlay
        try:
            base_ids = base.ids()
        except UnsealedError:
            if kind != "chroma":
                raise
            # Chroma's ids() reads the folder on disk (not a search: searches move an unsealed folder aside and
            # rebuild it); another process's writer killed mid-write left it unsealed: not this replica's view
            report["chroma_ids_drift"] += 1
            return
        legs = {
            "keyword": set(fl.keyword_store.ids()),
            "vector": (base_ids | set(overlay.ids)) - (overlay.removed - set(overlay.ids)),
        }
        report["replica_checks"] += 1
        for leg, have in legs.items():
            if have != want and leg == "vector" and kind == "chroma":
                # Chroma's ids() reads the collection on disk, which other processes' checkpoints change
                # while this process's searches still run on its own HNSW copy: not this replica's view
                report["chroma_ids_drift"] += 1
            elif have != want:
                violation(
                    f"{leg} replica != ledger at its seq",
                    seq=seq,
                    ledger_seq=cmap.seq,
                    missing=sorted(want - have)[:5],
                    n_missing=len(want - have),
                    extra=sorted(have - want)[:5],
                    n_extra=len(have - want),
                    overlay_ids=len(overlay.ids),
                    overlay_removed=len(overlay.removed),
                )

    def one_round() -> None:
        query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        mode = rng.choice(["hybrid", "vector", "keyword"])
        results = fl.search(query, k=10, search_mode=mode)
        report["searches"] += 1
        report["results"] += len(results)
        check_results(results, query, mode)
        if rng.random() < 0.5:
            keyword_probe()
        if rng.random() < 0.5:
            vector_probe()
        if rng.random() < 0.1:
            replica_check()

    try:
        while not os.path.exists(stop_file) and time.time() - started < max_seconds:
            one_round()
            if report["searches"] % 20 == 0:
                save()
        # every writer is gone now: a few more rounds on the final state
        for _ in range(10):
            one_round()
            report["final_rounds"] += 1
    except Exception:  # noqa: BLE001 - reported; the test fails on any
        violation("reader raised", tb=traceback.format_exc())
        save()
        return 1
    fl.close()
    save()
    return 0


def main(argv: list[str]) -> int:
    role = argv[0]
    if role == "writer":
        directory, kind, writer_id, shared_dir, journal, seed = argv[1:7]
        return run_writer(directory, kind, writer_id, shared_dir, journal, int(seed))
    if role == "reader":
        directory, kind, reader_id, shared_dir, report, seed, stop_file, max_seconds = argv[1:9]
        return run_reader(
            directory, kind, reader_id, shared_dir, report, int(seed), stop_file, float(max_seconds)
        )
    raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
