"""Many writers, SIGKILLed at random, on FinderLedge and on the local stores users pick instead (issue 39).

    nice -n 5 python benchmarks/bench_soak.py --seconds 40 --rounds 3 --out benchmarks/results/soak.json
    python benchmarks/bench_soak.py --stores finderledge,chroma --writers 2 --seconds 5 --rounds 1   # smoke

The same soak runs on each store, one after the other, in a new directory each round:

* ``--writers`` writer processes (this script, ``_worker``) each open the store once and add documents in
  batches of ``--batch`` until told to stop.  Every document has a unique id (``<writer>.<incarnation>-<n>``)
  and a text made from its id alone, embedded by the same deterministic 64-dimension hash embedding for every
  store (nothing is downloaded, every store gets the same vectors).  A writer journals each batch before
  (``begin``) and after the call returned (``done``), one fsynced JSON line each, so the journal says which
  writes returned.  A call that raises is retried (the same ids, at most 3 times, as a caller would; then
  the store is opened again); a store that refuses to open is tried again every 0.05-0.2 s.
* The driver SIGKILLs a random writer every ``--kill-min``-``--kill-max`` seconds (at most ``--max-kills``
  a round), chosen among those that have begun writing (a process spends seconds importing its libraries on a
  loaded machine: killed then, it would test nothing), and starts a new one in its place, for ``--seconds``
  counted from the first write of the round (or from 120 s after the start if none began); then it asks the
  writers to stop (a stop file: they close the store), SIGKILLs any still running after 15 s, and opens the
  directory in a fresh process (``_verify``, at most 180 s).
* Counted per round: ``returned`` (documents whose add returned), ``lost`` (returned, not in the store),
  ``duplicated`` (rows beyond the first with one id), ``unconfirmed_present`` (begun, never returned, stored:
  fine either way), ``opens`` (the fresh process opened the directory, listed every id and searched; else
  ``error`` says why), ``not_searchable`` (of up to 200 returned documents found in the store, those a
  vector search for their own vector does not return in the top 100; ``missed_at_3``: not in the top 3,
  which an approximate index may miss), ``write_errors`` and ``open_refusals``
  (calls that raised in the writers, by exception type), ``crashed`` (writers that died without being
  killed, with their exit status) and the documents stored per second.

How each store is used (its documented API, one client per writer process; the collection or table is
created once, before the writers start):

* ``finderledge``: ``FinderLedge(dir, embedding=<hash>, vector_store="faiss")``, ``add_texts(texts, ids=ids)``.
  Many processes on one directory is its documented use (a write lock, a transactional ledger, replicas).
  The fresh process also compares the ledger's chunk ids with the BM25 index's and the FAISS leg's as a search
  sees them (the base index plus the replica's overlay of rows not checkpointed yet) and runs
  ``finderledge check`` (read-only): ``consistent`` and ``check_clean``.
* ``chroma``: ``chromadb.PersistentClient(path)``, ``get_collection("soak")`` (cosine), ``collection.add(ids,
  embeddings, documents)``.  Chroma documents that it "is not process-safe" (its cookbook's system
  constraints: concurrent writers on one local path need its client/server mode); run anyway, as the
  issue's complaints (chroma #7238, MemPalace #1963, claude-mem #3202) describe users doing.
* ``qdrant``: ``QdrantClient(path=dir)`` (local mode), ``upsert("soak", points)`` (cosine; the document id in
  the payload, a UUID5 of it as the point id).  Local mode takes a file lock: a second process is refused
  ("already accessed by another instance of Qdrant client. If you require concurrent access, use Qdrant
  server instead") — counted as ``open_refusals``; the writers take turns, one at a time.
* ``lancedb`` (when it is installed; the dev extra installs it): ``lancedb.connect(dir)``,
  ``open_table("soak")``, ``table.add(rows)``.  Lance documents optimistic concurrency for many writers
  (concurrent appends are compatible; a failed write is the application's to retry).

One JSON document on stdout (and in ``--out``): the settings, versions, load average, and per store the
rounds and their sums.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

STORES = ("finderledge", "chroma", "qdrant", "lancedb")
DIM = 64
COLLECTION = "soak"
SAMPLE = 200  # returned documents searched for by their own vector, per round
VERIFY_TIMEOUT = 180.0
STOP_GRACE = 15.0
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


# -- the documents and their vectors (the same for every store) ---------------------------------------
def text_of(doc_id: str) -> str:
    """The text of document ``doc_id``: its id and twelve words drawn from it (reproducible anywhere)."""
    rng = random.Random(zlib.crc32(doc_id.encode()))
    return f"Soak note {doc_id}: " + " ".join(rng.choice(WORDS) for _ in range(12))


def vector_of(text: str) -> list[float]:
    """Signed hashing of the lower-case words into 64 dimensions, unit length (``zlib.crc32``, the same in every
    process; ``tests/helpers/stress_worker.HashEmbeddings`` does the same)."""
    v = [0.0] * DIM
    for word in re.findall(r"\w+", text.lower()):
        h = zlib.crc32(word.encode("utf-8"))
        v[h % DIM] += 1.0 if (h >> 16) & 1 else -1.0
    norm = sum(x * x for x in v) ** 0.5 or 1.0
    return [x / norm for x in v]


# -- the stores ---------------------------------------------------------------------------------------
class FinderLedgeStore:
    note = "many processes on one directory is its documented use"

    def __init__(self, directory: Path) -> None:
        from langchain_core.embeddings import Embeddings

        from finderledge import FinderLedge

        class HashEmbeddings(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return [vector_of(t) for t in texts]

            def embed_query(self, text: str) -> list[float]:
                return vector_of(text)

        self.fl = FinderLedge(
            directory,
            embedding=HashEmbeddings(),
            vector_store="faiss",
            show_progress=False,
            env_file=None,
            lock_timeout=120,
        )

    @staticmethod
    def create(directory: Path) -> None:
        FinderLedgeStore(directory).close()

    def add(self, ids: list[str], texts: list[str], vectors: list[list[float]]) -> None:
        self.fl.add_texts(texts, ids=ids)  # embedded by the same hash function

    def all_ids(self) -> list[str]:
        return [d.id for d in self.fl.list_documents()]

    def search(self, text: str, vector: list[float], k: int) -> list[str]:
        return [r.id.rpartition("-")[0] for r in self.fl.search(text, search_mode="vector", k=k)]

    def extra(self, directory: Path) -> dict[str, Any]:
        from finderledge.replica.checking import check_directory

        chunks = {f"{d.id}-0000" for d in self.fl.list_documents()}  # one chunk per short text
        keyword = set(self.fl.keyword_store.ids())
        # the vector leg's view is its base index plus the replica's overlay (rows other processes added since the
        # base's last checkpoint), less what the overlay removed: what a search sees
        overlay = self.fl.replica.overlay
        base = set(self.fl.vector_store.ids())
        vector = (base | set(overlay.ids)) - (overlay.removed - set(overlay.ids))
        report = check_directory(directory)
        return {
            "consistent": keyword == vector == chunks,
            "vector_overlay_rows": len(overlay.ids),
            "check_clean": report.clean,
            "check_problems": report.problems[:5],
        }

    def close(self) -> None:
        self.fl.close()


class ChromaStore:
    note = "Chroma documents that it is not process-safe (concurrent writers need its client/server mode)"

    def __init__(self, directory: Path) -> None:
        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(
            path=str(directory), settings=Settings(anonymized_telemetry=False)
        )
        self.collection = self.client.get_collection(COLLECTION)

    @staticmethod
    def create(directory: Path) -> None:
        import chromadb
        from chromadb.config import Settings

        client = chromadb.PersistentClient(path=str(directory), settings=Settings(anonymized_telemetry=False))
        client.get_or_create_collection(COLLECTION, metadata={"hnsw:space": "cosine"})

    def add(self, ids: list[str], texts: list[str], vectors: list[list[float]]) -> None:
        self.collection.add(ids=ids, embeddings=vectors, documents=texts)  # type: ignore[arg-type]

    def all_ids(self) -> list[str]:
        return list(self.collection.get(include=[])["ids"])

    def search(self, text: str, vector: list[float], k: int) -> list[str]:
        found = self.collection.query(query_embeddings=[vector], n_results=k, include=[])  # type: ignore[list-item]
        return list(found["ids"][0])

    def extra(self, directory: Path) -> dict[str, Any]:
        return {"count": self.collection.count()}

    def close(self) -> None:
        return None  # PersistentClient has no close; the process ends


class QdrantStore:
    note = "local mode takes a file lock: a second process is refused and told to use the Qdrant server"

    def __init__(self, directory: Path) -> None:
        from qdrant_client import QdrantClient

        self.client = QdrantClient(path=str(directory))

    @staticmethod
    def create(directory: Path) -> None:
        from qdrant_client import QdrantClient, models

        client = QdrantClient(path=str(directory))
        client.create_collection(
            COLLECTION, vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        )
        client.close()

    def add(self, ids: list[str], texts: list[str], vectors: list[list[float]]) -> None:
        from qdrant_client import models

        points = [
            models.PointStruct(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, i)), vector=v, payload={"doc": i, "text": t}
            )
            for i, t, v in zip(ids, texts, vectors)
        ]
        self.client.upsert(COLLECTION, points=points)

    def all_ids(self) -> list[str]:
        out: list[str] = []
        offset = None
        while True:
            points, offset = self.client.scroll(COLLECTION, limit=1000, offset=offset, with_payload=True)
            out += [str((p.payload or {}).get("doc")) for p in points]
            if offset is None:
                return out

    def search(self, text: str, vector: list[float], k: int) -> list[str]:
        hits = self.client.query_points(COLLECTION, query=vector, limit=k, with_payload=True).points
        return [str((h.payload or {}).get("doc")) for h in hits]

    def extra(self, directory: Path) -> dict[str, Any]:
        return {"count": self.client.count(COLLECTION).count}

    def close(self) -> None:
        self.client.close()


class LanceStore:
    note = (
        "optimistic concurrency: concurrent appends are compatible; failed writes are the caller's to retry"
    )

    def __init__(self, directory: Path) -> None:
        import lancedb

        self.table = lancedb.connect(str(directory)).open_table(COLLECTION)

    @staticmethod
    def create(directory: Path) -> None:
        import lancedb
        import pyarrow as pa

        schema = pa.schema(
            [("id", pa.string()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), DIM))]
        )
        lancedb.connect(str(directory)).create_table(COLLECTION, schema=schema)

    def add(self, ids: list[str], texts: list[str], vectors: list[list[float]]) -> None:
        self.table.add([{"id": i, "text": t, "vector": v} for i, t, v in zip(ids, texts, vectors)])

    def all_ids(self) -> list[str]:
        return [str(i) for i in self.table.to_arrow().column("id").to_pylist()]

    def search(self, text: str, vector: list[float], k: int) -> list[str]:
        rows = self.table.search(vector).metric("cosine").limit(k).select(["id"]).to_list()
        return [str(r["id"]) for r in rows]

    def extra(self, directory: Path) -> dict[str, Any]:
        return {"count": self.table.count_rows()}

    def close(self) -> None:
        return None


ADAPTERS: dict[str, Any] = {
    "finderledge": FinderLedgeStore,
    "chroma": ChromaStore,
    "qdrant": QdrantStore,
    "lancedb": LanceStore,
}


def available(store: str) -> bool:
    """Whether the store's package is installed."""
    module = {
        "finderledge": "finderledge",
        "chroma": "chromadb",
        "qdrant": "qdrant_client",
        "lancedb": "lancedb",
    }
    try:
        __import__(module[store])
    except ImportError:
        return False
    return True


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("finderledge", "chromadb", "qdrant-client", "lancedb", "faiss-cpu"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


# -- the writer process -------------------------------------------------------------------------------
class Journal:
    """Append-only JSON lines, each fsynced before the call returns."""

    def __init__(self, path: str | Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **entry: Any) -> None:
        entry["t"] = round(time.time(), 3)
        os.write(self._fd, (json.dumps(entry) + "\n").encode("utf-8"))
        os.fsync(self._fd)


def _kind(exc: BaseException) -> str:
    return f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__}"


def run_worker(
    store: str, directory: str, writer: str, journal_path: str, seed: int, stop: str, batch: int
) -> int:
    """Add batches to ``store`` until ``stop`` exists (or a SIGKILL); see the module docstring."""
    rng = random.Random(seed)
    journal = Journal(journal_path)
    journal.write(e="start", pid=os.getpid())
    adapter: Any = None
    n = 0
    while not os.path.exists(stop):
        if adapter is None:
            try:
                adapter = ADAPTERS[store](Path(directory))
            except Exception as exc:  # noqa: BLE001 - a refusal is counted; the writer tries again
                journal.write(e="open_error", kind=_kind(exc), msg=str(exc)[:300])
                time.sleep(rng.uniform(0.05, 0.2))
                continue
            journal.write(e="opened")
        ids = [f"{writer}-{n + i}" for i in range(batch)]
        n += batch
        texts = [text_of(i) for i in ids]
        vectors = [vector_of(t) for t in texts]
        for attempt in range(3):
            journal.write(e="begin", ids=ids, attempt=attempt)
            try:
                adapter.add(ids, texts, vectors)
            except Exception as exc:  # noqa: BLE001 - counted, retried as a caller would
                journal.write(e="error", kind=_kind(exc), msg=str(exc)[:300])
                time.sleep(rng.uniform(0.02, 0.1))
                continue
            journal.write(e="done", ids=ids)
            break
        else:
            journal.write(e="gave_up", ids=ids)
            try:
                adapter.close()
            except Exception:  # noqa: BLE001, S110 - opened again next
                pass
            adapter = None
        time.sleep(rng.uniform(0.0, 0.02))
    if adapter is not None:
        adapter.close()
    journal.write(e="closed")
    return 0


# -- the fresh process that opens the directory afterwards ---------------------------------------------
def run_verify(store: str, directory: str, sample_path: str) -> int:
    """Open the directory, list every id, search for a sample of returned documents; print one JSON line."""
    out: dict[str, Any] = {"opens": False}
    try:
        adapter = ADAPTERS[store](Path(directory))
        ids = adapter.all_ids()
        out["ids"] = ids
        present = set(ids)
        sample = [i for i in json.loads(Path(sample_path).read_text()) if i in present][:SAMPLE]
        missed, missing = [], []
        for doc_id in sample:
            text = text_of(doc_id)
            if doc_id not in adapter.search(text, vector_of(text), 3):
                missed.append(doc_id)  # an approximate index (Chroma's HNSW) may miss at k=3: look deeper
                if doc_id not in adapter.search(text, vector_of(text), 100):
                    missing.append(doc_id)
        out.update(sampled=len(sample), missed_at_3=len(missed), not_searchable=len(missing))
        out["not_searchable_ids"] = missing[:5]
        out.update(adapter.extra(Path(directory)))
        adapter.close()
        out["opens"] = True
    except BaseException as exc:  # noqa: BLE001 - what a broken directory does is the measurement
        out["error"] = f"{_kind(exc)}: {str(exc)[:400]}"
        out["traceback"] = traceback.format_exc()[-1500:]
    print(json.dumps(out))
    return 0


# -- the driver ---------------------------------------------------------------------------------------
def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, __file__, *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )


def _read_journal(path: Path) -> list[dict[str, Any]]:
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue  # a line cut by the SIGKILL
    return entries


def _writing(journal: Path) -> bool:
    """Whether the writer of ``journal`` has begun a write (its imports and open are done)."""
    try:
        with open(journal, "rb") as fh:
            return b'"e": "begin"' in fh.read()
    except OSError:
        return False


def soak(store: str, root: Path, opts: argparse.Namespace, seed: int) -> dict[str, Any]:
    """One round on ``store`` in ``root``; returns its counts."""
    rng = random.Random(seed)
    directory, journals, logs = root / "store", root / "journals", root / "logs"
    journals.mkdir(parents=True)
    logs.mkdir()
    stop = root / "stop"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINDERLEDGE_")}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", ANONYMIZED_TELEMETRY="False")
    done = subprocess.run(
        [sys.executable, __file__, "_create", store, str(directory)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{store}: creating the collection failed: {done.stderr[-2000:]}")
    writers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    incarnations: Counter[str] = Counter()
    crashed: list[int] = []

    def start(slot: str) -> None:
        name = f"{slot}.{incarnations[slot]}"
        incarnations[slot] += 1
        args = [
            "_worker",
            store,
            str(directory),
            name,
            str(journals / f"{name}.jsonl"),
            str(rng.randrange(2**31)),
        ]
        writers[slot] = (_spawn([*args, str(stop), str(opts.batch)], logs / f"{slot}.log", env), name)

    for i in range(opts.writers):
        start(f"w{i}")
    # the round's clock starts at its first write: on a loaded machine the imports and the open alone can
    # outlast a short round, which would then count no writes at all
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
        _writing(journals / f"{name}.jsonl") for _, name in writers.values()
    ):
        time.sleep(0.02)
    began = time.monotonic()
    kills = 0
    next_kill = began + rng.uniform(opts.kill_min, opts.kill_max)
    while time.monotonic() - began < opts.seconds:
        for slot, (proc, _) in list(writers.items()):
            if proc.poll() is not None:  # died by itself
                crashed.append(proc.returncode)
                start(slot)
        live = [slot for slot, (_, name) in writers.items() if _writing(journals / f"{name}.jsonl")]
        if time.monotonic() >= next_kill and kills < opts.max_kills and live:
            slot = rng.choice(sorted(live))  # a writer that has opened the store: killed while it writes
            proc, _ = writers[slot]
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
            else:
                crashed.append(proc.returncode)
            start(slot)
            next_kill = time.monotonic() + rng.uniform(opts.kill_min, opts.kill_max)
        time.sleep(0.02)
    soaked = time.monotonic() - began
    stop.touch()
    killed_at_end = 0
    deadline = time.monotonic() + STOP_GRACE
    for proc, _ in writers.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            killed_at_end += 1
        else:
            if proc.returncode != 0:
                crashed.append(proc.returncode)
    returned: set[str] = set()
    begun: set[str] = set()
    write_errors: Counter[str] = Counter()
    open_refusals: Counter[str] = Counter()
    messages: dict[str, str] = {}
    for path in journals.glob("*.jsonl"):
        for entry in _read_journal(path):
            kind = entry.get("e")
            if kind == "done":
                returned.update(entry["ids"])
            elif kind == "begin":
                begun.update(entry["ids"])
            elif kind == "error":
                write_errors[entry["kind"]] += 1
                messages.setdefault(entry["kind"], entry.get("msg", ""))
            elif kind == "open_error":
                open_refusals[entry["kind"]] += 1
                messages.setdefault(entry["kind"], entry.get("msg", ""))
    sample_path = root / "sample.json"
    sample = sorted(returned)
    random.Random(seed).shuffle(sample)
    sample_path.write_text(json.dumps(sample[: SAMPLE * 2]))
    try:
        verified = subprocess.run(
            [sys.executable, __file__, "_verify", store, str(directory), str(sample_path)],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=VERIFY_TIMEOUT,
        )
        lines = verified.stdout.strip().splitlines()
        check = json.loads(lines[-1]) if lines and verified.returncode == 0 else None
        if check is None:
            check = {"opens": False, "error": f"exit {verified.returncode}: {verified.stderr.strip()[-400:]}"}
    except subprocess.TimeoutExpired:
        check = {"opens": False, "error": f"opening and listing did not finish in {VERIFY_TIMEOUT:.0f} s"}
    stored = Counter(check.pop("ids", []))
    present = set(stored)
    result = {
        "seed": seed,
        "seconds": round(soaked, 1),
        "kills": kills,
        "killed_at_end": killed_at_end,
        "crashed": crashed,
        "returned": len(returned),
        "lost": len(returned - present) if check["opens"] else None,
        "duplicated": sum(c - 1 for c in stored.values()) if check["opens"] else None,
        "unconfirmed_present": len((begun - returned) & present),
        "stored_per_s": round(len(returned) / soaked, 1),
        "write_errors": dict(write_errors),
        "open_refusals": dict(open_refusals),
        "first_messages": {k: v[:200] for k, v in messages.items()},
        **check,
    }
    if check["opens"]:
        result["lost_ids"] = sorted(returned - present)[:5]
    return result


SUMMED = (
    "returned",
    "lost",
    "duplicated",
    "unconfirmed_present",
    "kills",
    "sampled",
    "missed_at_3",
    "not_searchable",
)


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the rounds (a count is None when some round's directory did not open)."""
    out: dict[str, Any] = {}
    for key in SUMMED:
        values = [r.get(key) for r in rounds]
        out[key] = None if any(v is None for v in values) else sum(values)  # type: ignore[misc]
    out["rounds"] = len(rounds)
    out["unopenable"] = sum(1 for r in rounds if not r["opens"])
    out["crashed"] = sum(len(r["crashed"]) for r in rounds)
    errors: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    for r in rounds:
        errors.update(r["write_errors"])
        refusals.update(r["open_refusals"])
    out["write_errors"] = dict(errors)
    out["open_refusals"] = dict(refusals)
    if any("consistent" in r for r in rounds):
        out["consistent"] = all(r.get("consistent") for r in rounds)
        out["check_clean"] = all(r.get("check_clean") for r in rounds)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_worker":
        store, directory, writer, journal, seed, stop, batch = argv[1:8]
        return run_worker(store, directory, writer, journal, int(seed), stop, int(batch))
    if argv and argv[0] == "_verify":
        return run_verify(*argv[1:4])
    if argv and argv[0] == "_create":
        ADAPTERS[argv[1]].create(Path(argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default=",".join(STORES), help="comma-separated, of " + ", ".join(STORES))
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4, help="documents per add")
    parser.add_argument("--seconds", type=float, default=30.0, help="writing time per round")
    parser.add_argument("--max-kills", type=int, default=25, help="SIGKILLs per round at most")
    parser.add_argument("--kill-min", type=float, default=1.0, help="seconds between kills, at least")
    parser.add_argument("--kill-max", type=float, default=3.0, help="seconds between kills, at most")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="keep the directories under this folder")
    opts = parser.parse_args(argv)
    stores = [s.strip() for s in opts.stores.split(",") if s.strip()]
    unknown = [s for s in stores if s not in ADAPTERS]
    if unknown:
        parser.error(f"--stores: unknown {unknown}; expected some of {', '.join(STORES)}")
    results: dict[str, Any] = {
        "benchmark": "bench_soak",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
        "versions": versions(),
        "cpus": os.cpu_count(),
        "load_avg_before": list(os.getloadavg()),
        "stores": {},
        "skipped": {},
    }
    base = Path(tempfile.mkdtemp(prefix="bench-soak-")) if opts.keep is None else opts.keep
    try:
        for store in stores:
            if not available(store):
                results["skipped"][store] = "not installed"
                continue
            rounds = []
            for r in range(opts.rounds):
                root = base / f"{store}-{r}"
                rounds.append(soak(store, root, opts, opts.seed + 1000 * r))
                print(
                    f"{store} round {r}: {json.dumps({k: rounds[-1].get(k) for k in SUMMED + ('opens', 'error')})}",
                    file=sys.stderr,
                )
            results["stores"][store] = {
                "note": ADAPTERS[store].note,
                "total": summarize(rounds),
                "rounds": rounds,
            }
    finally:
        if opts.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    results["load_avg_after"] = list(os.getloadavg())
    text = json.dumps(results, indent=2)
    if opts.out is not None:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(text + "\n", encoding="utf-8")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
