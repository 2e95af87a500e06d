"""One contract every vector backend passes: upsert, delete, ids, cosine scores, filter semantics, reopen.

A backend's test is a subclass of :class:`VectorStoreContract` with ``open_store`` (and ``reopens`` for backends
whose data outlives the object).  Filters are judged by :func:`finderledge.filters.compile_filter`, the one
meaning every leg must have (``tests/test_filter_property.py`` checks that against an independent reference).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finderledge.filters import compile_filter
from finderledge.vector_stores import VectorStore, backend_names, create_vector_store

DIM = 16
N = 120

METADATA: list[dict[str, Any]] = [
    {
        "user": "alice",
        "year": 2020,
        "score": 0.5,
        "tags": ["hr", "it"],
        "flag": True,
        "lang": "ja",
        "title": "東京",
    },
    {"user": "bob", "year": 2021.0, "tags": ["it"], "flag": False, "lang": "en", "title": "大阪"},
    {"user": "carol", "year": 2019, "n": None, "flag": 1, "title": "apple"},
    {"user": "alice", "year": "2020", "tags": [], "title": "Zebra"},
    {"user": "dave", "nested": {"k": 1}, "big": 2**60},
    {},
]

FILTERS: list[dict[str, Any]] = [
    {"user": "alice"},
    {"user": {"$ne": "alice"}},
    {"year": 2021},
    {"year": {"$gte": 2020}},
    {"year": {"$lt": 2021, "$gt": 2019}},
    {"flag": True},
    {"flag": 1},
    {"n": {"$ne": 3}},
    {"tags": {"$contains": "it"}},
    {"tags": {"$not_contains": "hr"}},
    {"user": {"$in": ["bob", "dave", 7]}},
    {"user": {"$nin": ["alice"]}},
    {"title": {"$gt": "apple"}},
    {"title": {"$lt": "大阪"}},
    {"big": {"$gt": 2**59}},
    {"$or": [{"user": "bob"}, {"lang": "ja"}]},
    {"$and": [{"user": "alice"}, {"year": 2020}]},
    {"missing": {"$nin": ["x"]}},
]


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class VectorStoreContract:
    """Subclass with ``open_store(self, place) -> VectorStore``; ``place`` is a fresh ``Path`` per test."""

    reopens = True  # the data outlives the object: a new one over the same place finds it

    def open_store(self, place: Path) -> VectorStore:
        raise NotImplementedError

    @pytest.fixture
    def place(self, tmp_path: Path) -> Path:
        return tmp_path / "store"

    @pytest.fixture
    def store(self, place: Path) -> Iterator[VectorStore]:
        store = self.open_store(place)
        yield store
        store.close()

    @pytest.fixture
    def filled(self, store: VectorStore) -> tuple[VectorStore, list[str], np.ndarray, list[dict[str, Any]]]:
        ids = [f"doc-{i}:{i % 3}" for i in range(N)]
        vectors = _vectors(N)
        metas = [dict(METADATA[i % len(METADATA)], no=i) for i in range(N)]
        store.add(ids, vectors, metas, [f"text {i}" for i in range(N)])
        store.flush()
        return store, ids, vectors, metas

    def test_nearest_first_with_cosine_scores(self, filled: Any) -> None:
        store, ids, vectors, _ = filled
        query = vectors[7] + 0.05 * _vectors(1, seed=9)[0]
        hits = store.search(query, 10)
        assert hits[0][0] == ids[7]
        exact = sorted(((_cosine(query, v), i) for i, v in zip(ids, vectors)), reverse=True)[:10]
        assert [i for _, i in exact] == [i for i, _ in hits]
        for (cid, score), (expected, _) in zip(hits, exact):
            assert score == pytest.approx(expected, abs=2e-3), cid
        assert all(a[1] >= b[1] for a, b in itertools.pairwise(hits))

    def test_unnormalised_query_gets_the_same_scores(self, filled: Any) -> None:
        store, _, vectors, _ = filled
        plain, scaled = store.search(vectors[3], 5), store.search(vectors[3] * 7.5, 5)
        assert [i for i, _ in plain] == [i for i, _ in scaled]
        assert [s for _, s in plain] == pytest.approx([s for _, s in scaled], abs=2e-3)

    def test_ids_and_len(self, filled: Any) -> None:
        store, ids, _, _ = filled
        assert store.ids() == set(ids)
        assert len(store) == N

    def test_upsert_replaces_vector_and_metadata(self, filled: Any) -> None:
        store, ids, vectors, _ = filled
        store.add([ids[0]], vectors[50:51], [{"user": "zoe"}], ["replaced"])
        store.flush()
        assert len(store) == N
        assert store.search(vectors[50], 2, {"user": "zoe"}) == [(ids[0], pytest.approx(1.0, abs=2e-3))]
        assert store.search(vectors[0], 1, {"user": "zoe"})[0][0] == ids[0]
        assert ids[0] not in {i for i, _ in store.search(vectors[0], N, {"user": "alice"})}

    def test_delete_removes_and_ignores_unknown_ids(self, filled: Any) -> None:
        store, ids, vectors, _ = filled
        store.delete([ids[7], ids[8], "never-added"])
        store.delete([])
        store.flush()
        assert ids[7] not in store.ids() and len(store) == N - 2
        assert ids[7] not in {i for i, _ in store.search(vectors[7], 5)}

    def test_k_beyond_the_collection_and_empty_store(self, store: VectorStore, filled: Any) -> None:
        store, ids, vectors, _ = filled
        assert {i for i, _ in store.search(vectors[0], N + 50)} == set(ids)
        assert store.search(vectors[0], 0) == []

    @pytest.mark.parametrize("flt", FILTERS, ids=[str(f) for f in FILTERS])
    def test_filter_semantics(self, filled: Any, flt: dict[str, Any]) -> None:
        store, ids, vectors, metas = filled
        pred = compile_filter(flt)
        assert pred is not None
        expected = {i for i, md in zip(ids, metas) if pred(md)}
        found = store.search(vectors[1], N, flt)
        assert {i for i, _ in found} == expected

    def test_selective_filter_still_fills_k(self, filled: Any) -> None:
        store, ids, vectors, _ = filled
        wanted = {ids[i] for i in (5, 61, 113)}
        store.add(sorted(wanted), vectors[[5, 61, 113]], [{"rare": True}] * 3, None)
        store.flush()
        assert {i for i, _ in store.search(vectors[0], 3, {"rare": True})} == wanted

    def test_reopen_keeps_everything(self, place: Path, filled: Any) -> None:
        if not self.reopens:
            pytest.skip("this backend keeps its data in the object only")
        store, ids, vectors, _ = filled
        before = store.search(vectors[11], 5, {"user": {"$ne": "bob"}})
        store.close()
        again = self.open_store(place)
        try:
            assert again.ids() == set(ids)
            after = again.search(vectors[11], 5, {"user": {"$ne": "bob"}})
            assert [i for i, _ in after] == [i for i, _ in before]
        finally:
            again.close()


def test_every_built_in_backend_has_a_contract_test() -> None:
    from finderledge.config import VECTOR_STORES

    tested = {"chroma", "faiss", "pgvector", "qdrant"}  # pgvector's classes are in test_postgres_ledger.py
    assert set(VECTOR_STORES) == tested, "add a VectorStoreContract subclass for the new backend"
    assert tested <= set(backend_names())


class TestFaiss(VectorStoreContract):
    def open_store(self, place: Path) -> VectorStore:
        return create_vector_store("faiss", place, DIM)


@pytest.mark.parametrize("kind", ["hnsw", "ivf", "ivf_sq8", "ivf_pq"])
class TestFaissApproximate(VectorStoreContract):
    """Each ``vector_index`` kind, its approximate index built from 32 rows (the default waits for 20,000), so
    every search below that is not exact by its size goes through it and is rescored from the float32 rows."""

    @pytest.fixture(autouse=True)
    def _kind(self, kind: str) -> None:
        self.kind = kind

    def open_store(self, place: Path) -> VectorStore:
        return create_vector_store("faiss", place, DIM, vector_index=self.kind, ann_min_rows=32)

    def test_the_approximate_index_answers(self, filled: Any) -> None:
        store, _, vectors, _ = filled
        assert store._ann is not None and store._ann.kind == self.kind
        assert store._ann_search(np.asarray(vectors[7:8]), 1, None) is not None  # 40 candidates of 120


class TestChromaLocal(VectorStoreContract):
    def open_store(self, place: Path) -> VectorStore:
        return create_vector_store("chroma", place, DIM)


class TestChromaServer(VectorStoreContract):
    @pytest.fixture(autouse=True)
    def _server(self, chroma_server: str) -> None:
        self.url = chroma_server

    @pytest.fixture
    def place(self, tmp_path: Path) -> Path:
        return tmp_path / f"c{uuid.uuid4().hex[:12]}"  # its name is the collection's: one per test

    def open_store(self, place: Path) -> VectorStore:
        return create_vector_store("chroma", None, DIM, url=self.url, collection=place.name)


class TestQdrantLocal(VectorStoreContract):
    """qdrant-client's local mode in a folder (a server URL takes the same code path past the client)."""

    def open_store(self, place: Path) -> VectorStore:
        return create_vector_store("qdrant", place, DIM)


class TestQdrantMemory(VectorStoreContract):
    reopens = False

    def open_store(self, place: Path) -> VectorStore:
        return create_vector_store("qdrant", None, DIM)


def test_qdrant_collection_of_another_dimension_is_refused(tmp_path: Path) -> None:
    from finderledge.errors import ConfigurationError

    create_vector_store("qdrant", tmp_path, DIM, collection="documents").close()
    with pytest.raises(ConfigurationError, match="qdrant_collection.*16-d.*8-d"):
        create_vector_store("qdrant", tmp_path, 8, collection="documents")
    other = create_vector_store("qdrant", tmp_path, 8, collection="other")  # another collection: fine
    other.close()


def test_qdrant_local_folder_open_twice_is_a_clear_error(tmp_path: Path) -> None:
    from finderledge.errors import ConfigurationError

    first = create_vector_store("qdrant", tmp_path, DIM)
    try:
        with pytest.raises(ConfigurationError, match="open in another FinderLedge.*qdrant_url"):
            create_vector_store("qdrant", tmp_path, DIM)
    finally:
        first.close()
    create_vector_store("qdrant", tmp_path, DIM).close()  # closed: free again


def test_qdrant_url_that_answers_nothing_is_a_clear_error() -> None:
    from finderledge.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="qdrant_url.*no Qdrant server answers"):
        create_vector_store("qdrant", None, DIM, url="http://127.0.0.1:9")


class TestLangChainInMemory(VectorStoreContract):
    reopens = False

    def open_store(self, place: Path) -> VectorStore:
        from langchain_core.vectorstores import InMemoryVectorStore

        from finderledge.vector_stores.langchain import LangChainVectorStore

        return LangChainVectorStore(InMemoryVectorStore(embedding=_NoEmbeddings()))


class _NoEmbeddings:
    """Stands for the store's own model: FinderLedge gives it vectors, so embedding here is a bug."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the adapter must pass FinderLedge's vectors, not embed")

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError("the adapter must pass FinderLedge's vectors, not embed")


class TestLangChainPGVector(VectorStoreContract):
    """langchain-postgres's PGVector through the adapter, on the test session's PostgreSQL."""

    @pytest.fixture(autouse=True)
    def _database(self, pg_url: str) -> None:
        self.url = pg_url.replace("postgresql://", "postgresql+psycopg://", 1)

    def open_store(self, place: Path) -> VectorStore:
        from langchain_postgres import PGVector

        from finderledge.vector_stores.langchain import LangChainVectorStore

        # no embedding_length: langchain-postgres builds its table classes once per process, with the first
        # store's dimension, and other tests of this session store 384-d vectors in the same table
        store = PGVector(
            embeddings=_NoEmbeddings(), collection_name=place.name, connection=self.url, use_jsonb=True
        )
        return LangChainVectorStore(store)
