"""Qdrant as a FinderLedge vector store: precomputed vectors, cosine distance, filters narrowed by a Qdrant
``Filter`` and decided by :mod:`finderledge.filters` (see :mod:`finderledge.vector_stores.qdrant_filter`).

A Qdrant server (``qdrant_url``, e.g. ``http://localhost:6333``: one collection every process shares, written
through after each ledger commit) or ``qdrant-client``'s local mode (a folder in the index directory, a replica
like FAISS; ``None``: in memory).  Install with ``pip install "finderledge[qdrant]"``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigurationError, MissingExtraError, StorageFullError
from ..filters import compile_filter
from ..progress import close_at_exit
from ..storage.files import Storage, library_full_disk_error
from ..storage.seals import SEAL_FILE, Seal
from .base import LOCAL, SHARED, VectorStore
from .qdrant_filter import ID_KEY, prefilter, qdrant_payload, stored_metadata

__all__ = ["COLLECTION", "OWN_FILES", "QdrantVectorStore", "import_qdrant", "open_qdrant", "point_id"]

COLLECTION = "finderledge"
BATCH = 256  # points per upsert or delete request
OWN_FILES = frozenset(
    {".lock"}
)  # the local folder's lock file (content unsealed); every other file is sealed
#: the payload fields a new collection on a server indexes (the document-search design's payload schema)
PAYLOAD_INDEXES = {
    "document_id": "keyword",
    "chunk_id": "keyword",
    "filename": "keyword",
    "tags": "keyword",
    "page_number": "integer",
}
_NAMESPACE = uuid.UUID("5b0e9f3c-7f0a-4c55-9a53-6f1d0c2d7a11")  # chunk id -> point id (Qdrant needs UUIDs)
logger = logging.getLogger(__name__)


def import_qdrant() -> Any:
    """The ``qdrant_client`` module, or :class:`MissingExtraError` naming the extra that installs it."""
    try:
        import qdrant_client
    except ImportError as exc:
        raise MissingExtraError("vector_store='qdrant'", "qdrant_client", "qdrant") from exc
    return qdrant_client


def point_id(chunk_id: str) -> str:
    """The Qdrant point id of a chunk (a UUID derived from its id: the same chunk is always the same point)."""
    return str(uuid.uuid5(_NAMESPACE, chunk_id))


def query_widening(
    client: Any,
    models: Any,
    collection: str,
    query: Any,
    filter: Mapping[str, Any] | None,
    limit: int,
    using: str | None = None,
) -> Iterator[list[tuple[str, float]]]:
    """Qdrant's best ``limit`` points for ``query`` as ``(id, score)``, then 4 times as many, and so on until it has
    no more; of each, those that pass ``filter`` (Qdrant's prefilter narrows, never too far; compile_filter
    decides).  The caller stops when it has enough."""
    pred = compile_filter(filter)
    narrowed = prefilter(models, filter)
    while True:
        points = client.query_points(
            collection,
            query=query,
            using=using,
            limit=limit,
            query_filter=narrowed,
            with_payload=True if pred is not None else [ID_KEY],
        ).points
        yield [
            (str(p.payload[ID_KEY]), float(p.score))
            for p in points
            if pred is None or pred(stored_metadata(p.payload))
        ]
        if len(points) < limit:
            return
        limit *= 4


def close_sealed(
    close: Callable[[], object], seal: Seal | None, path: Path | None, what: str, tolerated: type[Exception]
) -> Seal | None:
    """Close a qdrant-client (``close``: its :func:`~finderledge.progress.close_at_exit` closer), then seal its
    local folder (``path``) as it left it; a ``tolerated`` error leaves the folder unsealed (the next open
    rebuilds it from the ledger) and is logged.  Returns the seal still to write: None once written or given
    up, ``seal`` when there was no folder to seal."""
    close()
    if seal is None or path is None or not path.is_dir():
        return seal
    try:
        seal.reseal_if_changed()
    except tolerated as exc:
        logger.warning("closing %s without sealing its files: %s", what, exc)
    return None


class QdrantVectorStore(VectorStore):
    """One Qdrant collection of FinderLedge chunks: on a server (``url``), in a local folder, or in memory.

    qdrant-client's local mode unpickles every row of its ``storage.sqlite`` when it opens, so its folder is
    sealed (:mod:`finderledge.storage.seals`) after it opens, at each flush and at close, and checked against the
    seal before it opens: a planted or damaged row is never unpickled; the folder is moved aside and rebuilt.
    """

    name = "qdrant"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        dimension: int,
        url: str | None = None,
        collection_name: str = COLLECTION,
        api_key: str | None = None,
    ) -> None:
        client_module = import_qdrant()
        from qdrant_client import models

        self._models = models
        self.url = url
        self.path = None if path is None or url is not None else Path(path)
        self.location = LOCAL if url is None else SHARED
        self.collection = collection_name
        self._seal: Seal | None = None
        self._client, self._seal = open_client(client_module, self.path, url, api_key, collection_name)
        self._close_client = close_at_exit(self, self._client.close)
        try:
            self._ensure_collection(dimension)
            self.flush()
        except BaseException:
            self.close()  # releases the folder (and seals it) for the next opener
            raise

    def flush(self) -> None:
        """Seal the local folder as qdrant-client left it (each write is stored at once; it holds ``.lock``)."""
        if self._seal is not None:
            self._seal.reseal_if_changed()

    def _ensure_collection(self, dimension: int) -> None:
        models = self._models
        if not self._client.collection_exists(self.collection):
            self._client.create_collection(
                self.collection,
                vectors_config=models.VectorParams(size=dimension, distance=models.Distance.COSINE),
            )
            if self.url is not None:  # a server filters faster by indexed fields (local mode has no indexes)
                for name, kind in PAYLOAD_INDEXES.items():
                    self._client.create_payload_index(self.collection, name, field_schema=kind)
            return
        vectors = self._client.get_collection(self.collection).config.params.vectors
        size = getattr(vectors, "size", None)
        if size is not None and size != dimension:
            raise ConfigurationError(
                f"setting 'qdrant_collection': the Qdrant collection {self.collection!r} holds {size}-d vectors, "
                f"but the embedding model makes {dimension}-d ones; name another collection"
            )

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
        points = [
            self._models.PointStruct(
                id=point_id(chunk_id),
                vector=vectors[i].tolist(),
                payload=qdrant_payload(chunk_id, metadatas[i]),
            )
            for i, chunk_id in enumerate(ids)
        ]
        with self._full_disk():
            if self._seal is not None:
                self._seal.begin()
            for start in range(0, len(points), BATCH):
                self._client.upsert(self.collection, points=points[start : start + BATCH], wait=True)

    @contextmanager
    def _full_disk(self) -> Iterator[None]:
        """A full disk under qdrant-client's local storage as :class:`StorageFullError` (the ledger stored the batch)."""
        try:
            yield
        except Exception as exc:
            full = None if self.path is None else library_full_disk_error(exc, self.path)
            if full is None or full is exc:
                raise
            raise full from exc

    def delete(self, ids: Iterable[str]) -> None:
        points: list[int | str | uuid.UUID] = [point_id(i) for i in ids]
        with self._full_disk():
            if points and self._seal is not None:
                self._seal.begin()
            for start in range(0, len(points), BATCH):
                self._client.delete(
                    self.collection,
                    points_selector=self._models.PointIdsList(points=points[start : start + BATCH]),
                    wait=True,
                )

    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        if k < 1:
            return []
        query = np.asarray(embedding, dtype=np.float32).tolist()
        hits: list[tuple[str, float]] = []
        for hits in query_widening(self._client, self._models, self.collection, query, filter, k):
            if len(hits) >= k:
                break
        return hits[:k]

    def ids(self) -> set[str]:
        out: set[str] = set()
        offset = None
        while True:
            records, offset = self._client.scroll(
                self.collection, limit=1000, offset=offset, with_payload=[ID_KEY], with_vectors=False
            )
            out.update(str(r.payload[ID_KEY]) for r in records)
            if offset is None:
                return out

    def __len__(self) -> int:
        return int(self._client.count(self.collection, exact=True).count)

    def close(self) -> None:
        self._seal = close_sealed(
            self._close_client, self._seal, self.path, "the local Qdrant", StorageFullError
        )


def open_client(
    client_module: Any, path: Path | None, url: str | None, api_key: str | None, collection: str
) -> tuple[Any, Seal | None]:
    """A qdrant-client of the server at ``url``, in memory (no ``path``), or in local mode over ``path``, and the
    local folder's seal (None otherwise): the folder's files are checked through the storage layer (a link at
    the folder or at any file qdrant-client opens is refused) and against their seal before qdrant-client
    unpickles anything (IndexCorruptError: rebuilt); the seal is begun, and sealed again at flush and close."""
    if url is not None:
        return _server_client(client_module, url, api_key), None
    if path is None:
        return client_module.QdrantClient(location=":memory:"), None
    Storage(path.parent).mkdir(path.name)
    Storage(path).check(_local_files(collection))
    seal = Seal(path, OWN_FILES)
    seal.verify()
    seal.begin()
    return _local_client(client_module, path), seal


def _local_files(collection: str) -> tuple[str, ...]:
    """The files qdrant-client's local mode keeps in its folder (checked before it opens them)."""
    return (".lock", "meta.json", f"collection/{collection}/storage.sqlite", SEAL_FILE)


def _local_client(client_module: Any, path: Path) -> Any:
    """qdrant-client's local mode over ``path``: one open client per folder, in any process."""
    try:
        return client_module.QdrantClient(path=str(path))
    except RuntimeError as exc:
        if "already accessed" not in str(exc):
            raise
        raise ConfigurationError(
            f"setting 'vector_store': the local Qdrant folder {path} is open in another FinderLedge (this or "
            "another process); qdrant-client's local mode serves one at a time: close the other one, or set "
            "qdrant_url (QDRANT_URL) to a Qdrant server, which any number of processes share"
        ) from None


def _server_client(client_module: Any, url: str, api_key: str | None) -> Any:
    """A client of the Qdrant server at ``url``; a server that does not answer is a clear error, at open."""
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"setting 'qdrant_url': expected http(s)://host:port, got {url!r}")
    client = client_module.QdrantClient(url=url, api_key=api_key, check_compatibility=False)
    try:
        client.get_collections()
    except Exception as exc:  # noqa: BLE001 - httpx/grpc raise their own kinds when the server is down
        raise ConfigurationError(
            f"setting 'qdrant_url': no Qdrant server answers at {url} ({type(exc).__name__})"
        ) from None
    return client


def open_qdrant(
    path: Path | None,
    dimension: int,
    *,
    url: str | None = None,
    collection: str = COLLECTION,
    api_key: str | None = None,
) -> QdrantVectorStore:
    """The registry's factory: the collection on the Qdrant server at ``url``, or a local one under ``path``."""
    return QdrantVectorStore(path, dimension=dimension, url=url, collection_name=collection, api_key=api_key)
