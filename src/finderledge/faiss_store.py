"""FAISS as a FinderLedge vector store: exact inner-product search, persisted without pickle.

On disk (``faiss/``): ``index.faiss`` (FAISS's own binary format via ``faiss.write_index``) and
``entries.json`` (string ids, FAISS int ids and metadata for filtering).  Both are written to
temporary files and renamed into place; ``entries.json`` carries the index's size and a checksum so a
torn pair is detected on open.  Nothing is ever unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .filters import compile_filter, filter_key
from .vector_store import VectorStore, clean_metadata

__all__ = ["FaissVectorStore", "VectorIndexCorruptError"]

INDEX_FILE = "index.faiss"
ENTRIES_FILE = "entries.json"
FORMAT_VERSION = 1


class VectorIndexCorruptError(Exception):
    """The persisted FAISS index cannot be read consistently; the files are left untouched."""


class FaissVectorStore(VectorStore):
    """Exact cosine search (``IndexFlatIP`` over L2-normalised vectors) with an id map and metadata filters."""

    name = "faiss"

    def __init__(self, path: str | Path | None = None, *, dimension: int) -> None:
        import faiss

        self._faiss = faiss
        self.path = None if path is None else Path(path)
        self.dimension = int(dimension)
        self._lock = threading.RLock()
        self._int_of: dict[str, int] = {}
        self._str_of: dict[int, str] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._next = 0
        self._dirty = False
        self._mask_cache: dict[str, np.ndarray] = {}
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dimension))
        if self.path is not None and (self.path / ENTRIES_FILE).exists():
            self._load()

    # -- persistence --------------------------------------------------------------------------------
    def _load(self) -> None:
        assert self.path is not None
        entries_path, index_path = self.path / ENTRIES_FILE, self.path / INDEX_FILE
        try:
            entries = json.loads(entries_path.read_text(encoding="utf-8"))
            raw = index_path.read_bytes()
        except (OSError, ValueError) as exc:
            raise VectorIndexCorruptError(f"FAISS index at {self.path}: cannot read ({exc})") from exc
        if entries.get("format") != FORMAT_VERSION or entries.get("sha256") != hashlib.sha256(raw).hexdigest():
            raise VectorIndexCorruptError(
                f"FAISS index at {self.path}: {INDEX_FILE} does not match {ENTRIES_FILE} (torn write or corruption)"
            )
        try:
            index = self._faiss.deserialize_index(np.frombuffer(raw, dtype=np.uint8))
        except RuntimeError as exc:
            raise VectorIndexCorruptError(f"FAISS index at {self.path}: {exc}") from exc
        if index.d != self.dimension:
            raise ValueError(
                f"FAISS index at {self.path} has dimension {index.d}, the embedding model gives {self.dimension}"
            )
        if not isinstance(index, self._faiss.IndexIDMap2):
            raise VectorIndexCorruptError(f"FAISS index at {self.path}: unexpected index type {type(index).__name__}")
        self._index = index
        ids, int_ids = entries["ids"], entries["int_ids"]
        if len(ids) != self._index.ntotal or len(int_ids) != len(ids):
            raise VectorIndexCorruptError(f"FAISS index at {self.path}: {len(ids)} ids for {self._index.ntotal} vectors")
        self._int_of = dict(zip(ids, int_ids))
        self._str_of = {v: k for k, v in self._int_of.items()}
        self._meta = dict(zip(ids, entries["metadatas"]))
        self._next = int(entries["next"])

    def flush(self) -> None:
        with self._lock:
            if self.path is None or not self._dirty:
                return
            self.path.mkdir(parents=True, exist_ok=True)
            raw = self._faiss.serialize_index(self._index).tobytes()
            ids = list(self._int_of)
            entries = {
                "format": FORMAT_VERSION,
                "dimension": self.dimension,
                "sha256": hashlib.sha256(raw).hexdigest(),
                "next": self._next,
                "ids": ids,
                "int_ids": [self._int_of[i] for i in ids],
                "metadatas": [self._meta[i] for i in ids],
            }
            # index first, then the entries that vouch for it: a crash in between is detected on open
            _atomic_write(self.path / INDEX_FILE, raw)
            _atomic_write(self.path / ENTRIES_FILE, json.dumps(entries, ensure_ascii=False).encode("utf-8"))
            self._dirty = False

    # -- writes -------------------------------------------------------------------------------------
    def add(
        self,
        ids: Sequence[str],
        embeddings: np.ndarray | Sequence[Sequence[float]],
        metadatas: Sequence[Mapping[str, Any]],
        texts: Sequence[str] | None = None,
    ) -> None:
        vectors = np.ascontiguousarray(np.asarray(embeddings, dtype=np.float32))
        if len(ids) == 0:
            return
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension or len(vectors) != len(ids):
            raise ValueError(f"FAISS add: expected {len(ids)} vectors of dimension {self.dimension}, got {vectors.shape}")
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        with self._lock:
            self.delete([i for i in ids if i in self._int_of])
            int_ids = np.arange(self._next, self._next + len(ids), dtype=np.int64)
            self._next += len(ids)
            self._index.add_with_ids(vectors, int_ids)
            for sid, iid, md in zip(ids, int_ids.tolist(), metadatas):
                self._int_of[sid] = iid
                self._str_of[iid] = sid
                self._meta[sid] = clean_metadata(md)
            self._changed()

    def delete(self, ids: Iterable[str]) -> None:
        with self._lock:
            known = [i for i in ids if i in self._int_of]
            if not known:
                return
            int_ids = np.array([self._int_of.pop(i) for i in known], dtype=np.int64)
            self._index.remove_ids(self._faiss.IDSelectorBatch(int_ids))
            for sid, iid in zip(known, int_ids.tolist()):
                self._str_of.pop(iid, None)
                self._meta.pop(sid, None)
            self._changed()

    def _changed(self) -> None:
        self._dirty = True
        self._mask_cache.clear()

    # -- reads --------------------------------------------------------------------------------------
    def search(
        self, embedding: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        query = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        with self._lock:
            if self._index.ntotal == 0 or k < 1:
                return []
            params = None
            limit = self._index.ntotal
            if filter:
                allowed = self._allowed(filter)
                if len(allowed) == 0:
                    return []
                params = self._faiss.SearchParameters(sel=self._faiss.IDSelectorBatch(allowed))  # type: ignore[call-arg]
                limit = len(allowed)
            scores, found = self._index.search(query, min(k, limit), params=params)
            return [(self._str_of[int(i)], float(s)) for s, i in zip(scores[0], found[0]) if i >= 0]

    def _allowed(self, flt: Mapping[str, Any]) -> np.ndarray:
        key = filter_key(flt)
        cached = self._mask_cache.get(key)
        if cached is None:
            pred = compile_filter(flt)
            assert pred is not None
            cached = np.array([self._int_of[s] for s, md in self._meta.items() if pred(md)], dtype=np.int64)
            if len(self._mask_cache) > 64:
                self._mask_cache.clear()
            self._mask_cache[key] = cached
        return cached

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._int_of)

    def __len__(self) -> int:
        return len(self._int_of)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file, fsync and rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
