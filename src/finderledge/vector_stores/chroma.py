"""Chroma as a FinderLedge vector store: precomputed vectors, cosine space, filters narrowed by ``where``
and decided by :mod:`finderledge.filters` (see :mod:`finderledge.vector_stores.chroma_filter`).

Local (a persistent client in the index directory, a replica like FAISS) or a Chroma server
(``chromadb.HttpClient``: one collection every process shares, written through after each ledger commit)."""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigurationError, IndexCorruptError, MissingExtraError, StorageFullError
from ..filters import compile_filter
from ..storage.files import Storage, library_full_disk_error
from ..storage.integrity import chroma_open_guard
from ..storage.locking import WriteLock
from ..storage.seals import SEAL_FILE, Seal
from .base import LOCAL, SHARED, VectorStore
from .chroma_filter import chroma_metadata, prefilter_where, stored_metadata

__all__ = ["ChromaVectorStore", "import_chromadb", "open_chroma", "server_address"]

COLLECTION = "finderledge"
GENERATION_FILE = "generation"
# Chroma's fixed files: never links (Chroma, SQLite and filelock would follow them)
CHROMA_FILES = (
    "chroma.sqlite3",
    "chroma.sqlite3-wal",
    "chroma.sqlite3-shm",
    "chroma.sqlite3-journal",
    "write.lock",
    "write.lock.owner",
    GENERATION_FILE,
    SEAL_FILE,
)
# FinderLedge's own files in chroma/ (read and written through the storage layer); Chroma's are sealed
OWN_FILES = frozenset({"write.lock", "write.lock.owner", GENERATION_FILE})
logger = logging.getLogger(__name__)

_aliases_lock = threading.Lock()


def import_chromadb() -> Any:
    """The ``chromadb`` module, or :class:`MissingExtraError` naming the extra that installs it."""
    try:
        import chromadb
    except ImportError as exc:
        raise MissingExtraError("vector_store='chroma'", "chromadb", "chroma") from exc
    return chromadb


_aliases_in_use: dict[str, set[int]] = {}


def _take_alias(path: Path) -> tuple[str, int]:
    """A spelling of ``path`` no other open store of this process uses (``path``, ``path/.``, ``path/./.`` …).

    Chroma keeps one in-memory index per path string per process; another process's writes never reach
    it.  Each FinderLedge replica needs its own, loaded from the files when it opens (see replica.py)."""
    key = str(path.resolve())
    with _aliases_lock:
        used = _aliases_in_use.setdefault(key, set())
        n = next(i for i in range(len(used) + 1) if i not in used)
        used.add(n)
    return os.path.join(key, *(["."] * n)), n


def _release_alias(path: Path, n: int) -> None:
    with _aliases_lock:
        _aliases_in_use.get(str(path.resolve()), set()).discard(n)


class ChromaVectorStore(VectorStore):
    """One Chroma collection (persistent under ``path``, or in memory) holding FinderLedge chunks.

    Chroma's local mode keeps an in-memory index per process and updates its files even while reading
    (it applies its log on ``get``/``query``), so two processes must never call it at the same time, nor
    with a stale copy.  Every call on a persistent store therefore holds an OS lock on ``path/write.lock``
    and first reopens the client if another process changed the collection since this one last saw it
    (a counter in ``path/generation``, bumped before every write).  Chroma writes its files even when it
    only opens them, so every file it keeps is sealed (:mod:`finderledge.storage.seals`) before the lock is released
    and checked against the seal before Chroma opens them again.
    """

    name = "chroma"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        collection_name: str = COLLECTION,
        lock_timeout: float = 300.0,
        url: str | None = None,
    ) -> None:
        import_chromadb()
        from chromadb.config import Settings as ChromaSettings

        self._settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        self.path = None if path is None or url is not None else Path(path)
        self.url = url
        self.location = LOCAL if url is None else SHARED
        self._alias: int | None = None
        self._generation = -1
        self._collection_name = collection_name
        self._seal: Seal | None = None
        self._client: Any = None
        self._folder: int | None = None  # which folder (the generation's high bits) this store last used
        self._replaced = False  # another process replaced that folder since: see take_replaced
        if url is not None:
            self._lock = WriteLock(None, lock_timeout)  # the server serialises its own writes
        elif self.path is None:
            # in-memory clients of one process share a database: keep each instance apart
            self._collection_name = f"{collection_name}-{uuid.uuid4().hex}"
            self._lock = WriteLock(None, lock_timeout)
        else:
            # chroma/ and the fixed files in it are opened by Chroma and filelock, which follow links
            Storage(self.path.parent).mkdir(self.path.name)
            Storage(self.path).check(CHROMA_FILES)
            self._seal = Seal(self.path, OWN_FILES)
            self._lock = WriteLock(self.path, lock_timeout)
        with self._access():
            pass

    def _connect(self) -> None:
        chromadb = import_chromadb()

        if self.url is not None:
            self._client = _http_client(self.url, self._settings)
            self._collection = self._client.get_or_create_collection(
                self._collection_name, metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
            self._max_batch = max(1, int(self._client.get_max_batch_size()))
            return
        alias = None
        if self.path is not None:
            Storage(self.path).check(CHROMA_FILES)  # again: it may have changed since the last connect
            assert self._seal is not None
            self._seal.verify()  # every file as FinderLedge left it, or moved aside and rebuilt: never opened
            self._seal.begin()  # Chroma writes as it opens: sealed again when the lock is released
            alias, self._alias = _take_alias(self.path)
        with chroma_open_guard(self.path, alias):  # damage (even a Rust panic) -> IndexCorruptError: rebuilt
            if alias is None:
                self._client = chromadb.EphemeralClient(settings=self._settings)
            else:
                self._client = chromadb.PersistentClient(path=alias, settings=self._settings)
            self._collection = self._client.get_or_create_collection(
                self._collection_name, metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
            self._collection.count()  # applies Chroma's log now: a damaged one fails here, not in a search
        self._max_batch = max(1, int(self._client.get_max_batch_size()))

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        close = getattr(client, "close", None)
        if callable(close):
            close()
        if self.path is not None and self._alias is not None:
            _release_alias(self.path, self._alias)
            self._alias = None

    def _read_generation(self) -> int:
        try:
            return int(Storage(self.path).read_text(GENERATION_FILE, encoding="ascii"))  # type: ignore[arg-type]
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:  # unreadable: treated as changed, so the client reloads
            logger.debug("Chroma at %s: unreadable %s (%s)", self.path, GENERATION_FILE, exc)
            return 0

    @contextmanager
    def _access(self, *, writing: bool = False) -> Iterator[None]:
        """Hold the collection's lock, with an in-memory index as new as the files (a server: just connected)."""
        if self.url is not None:
            if self._generation < 0:
                with self._lock.hold("connecting to the Chroma server"):
                    if self._generation < 0:
                        self._connect()
                        self._generation = 0
            yield
            return
        # a read (or close) holds the lock without writing its owner note: reading never writes to our files
        with _full_disk(self.path), ExitStack() as held:
            self._hold(held, writing)
            if self.path is None:
                if self._generation < 0:
                    self._connect()
                    self._generation = 0
                yield
                return
            current = self._read_generation()
            if current != self._generation:
                if self._generation >= 0:
                    logger.debug("Chroma at %s changed in another process; reloading it", self.path)
                self._disconnect()  # also what a connect that failed half-way left
                self._generation = -1  # until connected: a failed connect is retried, never used half-made
                self._connect()
                if current == 0:  # a new folder: named at once, so that one replacing it is told apart
                    current = self._write_generation()
                self._generation = current
                folder = current >> _FOLDER_SHIFT
                if self._folder is not None and folder != self._folder:
                    self._replaced = True
                self._folder = folder
            if writing:  # changed first: if this process dies mid-write, the others still reload
                self._write_generation()
                if self._seal is not None:
                    self._seal.begin()
            try:
                yield
            finally:  # whatever Chroma wrote (opening, writing, even reading) is sealed before the lock goes
                self._reseal()

    def take_replaced(self) -> bool:
        """Whether another process replaced the folder (moved it aside, rebuilt it) since this store last used
        it, once: what the replica based on the old folder needs to reload (the new one may not be full yet)."""
        replaced, self._replaced = self._replaced, False
        return replaced

    def _write_generation(self) -> int:
        """A new random value for ``path/generation`` (caller holds the lock): random, not a count, so that a
        folder moved aside and rebuilt by another process never repeats the value a client last saw.  Its
        high bits name the folder (kept by every write to it, new for a new folder), the low bits the write."""
        folder = self._generation >> _FOLDER_SHIFT if self._generation > 0 else 0
        folder = folder or secrets.randbits(31) + 1
        self._generation = (folder << _FOLDER_SHIFT) | secrets.randbits(_FOLDER_SHIFT)
        Storage(self.path).write_bytes(GENERATION_FILE, str(self._generation).encode("ascii"))  # type: ignore[arg-type]
        return self._generation

    def _hold(self, held: ExitStack, writing: bool) -> None:
        """Take the folder's lock into ``held``.  Its lock file lives in the folder, which another process may
        have just moved aside to rebuild it (a damaged or unsealed folder): then wait for the rebuilt folder
        and reconnect to it; a folder that never comes back is reported as damage, which the replica heals."""
        what = "writing the Chroma index" if writing else "reading the Chroma index"
        deadline = time.monotonic() + min(self._lock.timeout, _MOVED_MAX_WAIT)
        while True:
            try:
                held.enter_context(self._lock.hold(what, note=writing))
                return
            except FileNotFoundError:
                self._disconnect()  # the client's files were moved away with the folder
                self._generation = -1
                if time.monotonic() > deadline:
                    break
                time.sleep(_MOVED_WAIT)
        raise IndexCorruptError(self.path or Path("."), "the folder was moved away and not rebuilt")

    def _reseal(self) -> None:
        """Seal Chroma's files again if it changed any of them (caller holds the lock; a few stats if not)."""
        if self._seal is not None and self._generation >= 0 and self.path is not None and self.path.is_dir():
            self._seal.reseal_if_changed()

    def add(
        self,
        ids: Sequence[str],
        embeddings: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str] | None = None,
    ) -> None:
        if len(ids) == 0:
            return
        vectors = np.asarray(embeddings, dtype=np.float32)
        with self._access(writing=True):
            for start in range(0, len(ids), self._max_batch):
                end = start + self._max_batch
                self._collection.upsert(
                    ids=list(ids[start:end]),
                    embeddings=vectors[start:end],
                    metadatas=[chroma_metadata(m) for m in metadatas[start:end]],
                    documents=None if texts is None else list(texts[start:end]),
                )

    def delete(self, ids: Iterable[str]) -> None:
        id_list = list(ids)
        if not id_list:
            return
        with self._access(writing=True):
            for start in range(0, len(id_list), self._max_batch):
                self._collection.delete(ids=id_list[start : start + self._max_batch])

    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        if k < 1:
            return []
        pred = compile_filter(filter)
        where = prefilter_where(filter)
        query = np.asarray(embedding, dtype=np.float32)
        n = k
        while True:  # Chroma narrows (never too far), compile_filter decides; widen until k pass
            with self._access():
                result = self._collection.query(
                    query_embeddings=[query],
                    n_results=n,
                    where=where,
                    include=["distances", "metadatas"] if pred is not None else ["distances"],
                )
            ids = result["ids"][0]
            distances = (result.get("distances") or [[]])[0]
            metadatas = (result.get("metadatas") or [[None] * len(ids)])[0]
            hits = [
                (i, 1.0 - float(d))
                for i, d, md in zip(ids, distances, metadatas)
                if pred is None or pred(stored_metadata(md))
            ]
            if len(hits) >= k or len(ids) < n:
                return hits[:k]
            n *= 4

    def ids(self) -> set[str]:
        out: set[str] = set()
        offset, page = 0, 10000
        with self._access():
            while True:
                got = self._collection.get(include=[], limit=page, offset=offset)["ids"]
                out.update(got)
                if len(got) < page:
                    return out
                offset += page

    def __len__(self) -> int:
        with self._access():
            return int(self._collection.count())

    def close(self) -> None:
        if self._generation < 0:
            self._disconnect()  # a connect that failed half-way, or a folder moved away: nothing to seal
        else:
            try:
                with self._lock.hold("closing the Chroma index", note=False):
                    # the folder this client opened: another process's (or a rebuilt one) is sealed by it
                    ours = self.path is None or self._read_generation() == self._generation
                    self._disconnect()
                    try:
                        if ours:
                            self._reseal()
                    except StorageFullError as exc:  # unsealed: the next open rebuilds it from the ledger
                        logger.warning("closing Chroma without sealing its files: %s", exc)
            except FileNotFoundError:  # another process moved the folder aside: nothing here to seal
                self._disconnect()
            self._generation = -1


# a folder moved aside by another process (which rebuilds it at once) is waited for like its lock, at most
# this long (seconds), looking every _MOVED_WAIT s: a loaded machine can take seconds to rebuild it
_MOVED_MAX_WAIT = 60.0
_FOLDER_SHIFT = 30  # chroma/generation: folder << _FOLDER_SHIFT | a random number per write
_MOVED_WAIT = 0.05


@contextmanager
def _full_disk(path: Path | None) -> Iterator[None]:
    """Chroma's "database or disk is full" (SQLite code 13, ENOSPC, its "Error in compaction" on a full disk)
    as :class:`StorageFullError` saying that the ledger stored the batch (Chroma only copies it)."""
    try:
        yield
    except BaseException as exc:
        full = None if path is None else library_full_disk_error(exc, path)
        if full is None or full is exc:
            raise
        raise full from exc


def server_address(url: str) -> tuple[str, int, bool]:
    """``(host, port, ssl)`` of a Chroma server URL such as ``http://127.0.0.1:8000``."""
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"setting 'chroma_url': expected http(s)://host:port, got {parts.scheme}://…"
        )
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 8000), parts.scheme == "https"


def _http_client(url: str, settings: Any) -> Any:
    chromadb = import_chromadb()

    host, port, ssl = server_address(url)
    try:
        return chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
    except Exception as exc:  # noqa: BLE001 - chromadb raises ValueError or ConnectionError variants when down
        raise ConfigurationError(
            f"setting 'chroma_url': no Chroma server answers at {host}:{port} ({type(exc).__name__})"
        ) from None


def open_chroma(
    path: Path | None, dimension: int, *, url: str | None = None, collection: str = COLLECTION
) -> ChromaVectorStore:
    """The registry's factory: a local Chroma under ``path``, or the collection on the server at ``url``."""
    return ChromaVectorStore(path, url=url, collection_name=collection)
