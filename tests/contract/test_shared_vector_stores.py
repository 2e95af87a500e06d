"""FinderLedge with a vector leg every process shares: a real Chroma server, and LangChain vector stores.

The ledger stays the source of truth: a writer applies each commit to the shared store under the write lock,
and whoever finds the store behind the ledger (a writer died in between) brings it up to date.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from finderledge import FinderLedge
from finderledge.errors import ConfigurationError
from finderledge.ledgers import ChunkRecord
from finderledge.replica.shared import SharedIndexes
from finderledge.vector_stores.langchain import UnsupportedFilterError

DOCS = [
    Document(page_content="The cat sat on the warm windowsill all afternoon.", metadata={"user": "alice"}),
    Document(page_content="Quarterly revenue grew by twelve percent in Europe.", metadata={"user": "bob"}),
    Document(
        page_content="東京の桜は三月の終わりに満開になります。", metadata={"user": "alice", "lang": "ja"}
    ),
]


def _vector_hits(fl: FinderLedge, query: str, **kwargs: Any) -> list[str]:
    return [r.content for r in fl.search(query, search_mode="vector", k=3, **kwargs)]


@pytest.fixture
def collection() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def pair(
    tmp_path: Path, minilm: Any, chroma_server: str, collection: str
) -> Iterator[tuple[FinderLedge, FinderLedge]]:
    """A writer and a reader over one ledger directory, both using the Chroma server's collection."""
    writer = FinderLedge(
        tmp_path / "i",
        embedding=minilm,
        chroma_url=chroma_server,
        chroma_collection=collection,
        show_progress=False,
    )
    reader = FinderLedge(
        tmp_path / "i",
        embedding=minilm,
        chroma_url=chroma_server,
        chroma_collection=collection,
        show_progress=False,
    )
    yield writer, reader
    reader.close()
    writer.close()


def test_chroma_server_leg_follows_another_instances_writes(pair: tuple[FinderLedge, FinderLedge]) -> None:
    writer, reader = pair
    assert reader.vector_store.location == "shared"
    writer.add_document(DOCS)
    assert _vector_hits(reader, "a cat resting by the window")[0] == DOCS[0].page_content
    removed = writer.add_texts(["Penguins live in the southern hemisphere."], ids=["penguin"])
    assert _vector_hits(reader, "penguins")[0].startswith("Penguins")
    writer.delete(removed)
    assert not any(t.startswith("Penguins") for t in _vector_hits(reader, "penguins"))
    assert len(reader.vector_store) == len(writer.ledger.complete_chunk_ids())


def test_a_writer_dying_before_the_shared_write_is_caught_up_by_the_next_search(
    pair: tuple[FinderLedge, FinderLedge], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    writer, reader = pair
    writer.add_document(DOCS[:1])
    assert len(reader.vector_store) == 1  # opened (and up to date) before the writer dies
    original = SharedIndexes.sync

    def dies(self: SharedIndexes, written: Sequence[ChunkRecord] = ()) -> None:
        raise ConnectionError("the server went away")

    monkeypatch.setattr(SharedIndexes, "sync", dies)
    with caplog.at_level(logging.ERROR):
        writer.add_document(DOCS[1:2])  # committed to the ledger; the shared store missed it
    assert "updating the shared vector index failed" in caplog.text
    assert len(reader.vector_store) == 1
    monkeypatch.setattr(SharedIndexes, "sync", original)
    assert _vector_hits(reader, "revenue growth in Europe")[0] == DOCS[1].page_content
    assert len(reader.vector_store) == 2


def test_filters_hold_on_the_server(pair: tuple[FinderLedge, FinderLedge]) -> None:
    writer, reader = pair
    writer.add_document(DOCS)
    for mode in ("vector", "hybrid", "keyword"):
        found = reader.search("cat revenue 桜", search_mode=mode, k=10, filter={"user": "alice"})
        assert found and {r.metadata["user"] for r in found} == {"alice"}, mode


def test_reopening_keeps_the_server_and_never_records_credentials(
    tmp_path: Path, minilm: Any, chroma_server: str, collection: str
) -> None:
    with_secret = chroma_server.replace("http://", "http://user:s3cret@")
    with FinderLedge(
        tmp_path / "i",
        embedding=minilm,
        chroma_url=with_secret,
        chroma_collection=collection,
        show_progress=False,
    ) as fl:
        fl.add_document(DOCS)
        assert "s3cret" not in json.dumps(fl.stats(), default=str)
        recorded = fl.ledger.get_info("settings") or ""
    assert "s3cret" not in recorded and json.loads(recorded)["chroma_collection"] == collection
    assert not any(b"s3cret" in p.read_bytes() for p in (tmp_path / "i").rglob("*") if p.is_file())
    with FinderLedge(
        tmp_path / "i", embedding=minilm, show_progress=False
    ) as again:  # no URL given: recorded
        assert again.vector_store.location == "shared"
        assert _vector_hits(again, "a cat on a windowsill")[0] == DOCS[0].page_content
        assert not (tmp_path / "i" / "chroma").exists()


def test_no_server_is_a_clear_error(tmp_path: Path, minilm: Any) -> None:
    from server_process import free_port

    fl = FinderLedge(
        tmp_path / "i", embedding=minilm, chroma_url=f"http://127.0.0.1:{free_port()}", show_progress=False
    )
    try:
        with pytest.raises(ConfigurationError, match="no Chroma server answers at 127.0.0.1"):
            fl.add_texts(["hello"])
    finally:
        fl.close()


# -- LangChain vector stores ----------------------------------------------------------------------------
def test_langchain_in_memory_store_as_the_vector_leg_scores_like_faiss(tmp_path: Path, minilm: Any) -> None:
    store = InMemoryVectorStore(embedding=minilm)
    with (
        FinderLedge(tmp_path / "lc", vector_store=store, embedding=minilm, show_progress=False) as fl,
        FinderLedge(tmp_path / "faiss", vector_store="faiss", embedding=minilm, show_progress=False) as ref,
    ):
        fl.add_document(DOCS)
        ref.add_document(DOCS)
        assert len(store.store) == 3  # our chunks, with our ids
        assert set(store.store) == fl.ledger.complete_chunk_ids()
        got = fl.search("a cat by the window", search_mode="vector", k=3)
        want = ref.search("a cat by the window", search_mode="vector", k=3)
        assert [r.content for r in got] == [r.content for r in want]
        assert [r.info.get("vector_score") for r in got] == pytest.approx(
            [r.info.get("vector_score") for r in want], abs=1e-4
        )
        alice = fl.search("cat revenue", search_mode="vector", k=5, filter={"user": "alice"})
        assert {r.metadata["user"] for r in alice} == {"alice"} and len(alice) == 2
        fl.delete([fl.list_documents()[0].id])
        assert len(store.store) == 2


def test_a_reopened_process_refills_its_in_memory_store_from_the_ledger(tmp_path: Path, minilm: Any) -> None:
    with FinderLedge(
        tmp_path / "lc",
        vector_store=InMemoryVectorStore(embedding=minilm),
        embedding=minilm,
        show_progress=False,
    ) as fl:
        fl.add_document(DOCS)
    fresh = InMemoryVectorStore(embedding=minilm)
    with FinderLedge(tmp_path / "lc", vector_store=fresh, embedding=minilm, show_progress=False) as again:
        assert _vector_hits(again, "Europe revenue")[0] == DOCS[1].page_content
        assert len(fresh.store) == 3


class _UnknownStore(InMemoryVectorStore):
    """A store FinderLedge knows nothing about: its scores and filter language are not in the tested list."""

    def add_embeddings(
        self, texts: list[str], embeddings: list[list[float]], metadatas: list[dict[str, Any]], ids: list[str]
    ) -> list[str]:
        for i, v, md, text in zip(ids, embeddings, metadatas, texts):
            self.store[i] = {"id": i, "vector": v, "text": text, "metadata": md}
        return ids

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return [
            (doc, -5.0 * score) for doc, score in super().similarity_search_with_score_by_vector(embedding, k)
        ]


def test_an_unknown_store_is_rescored_from_the_ledger_and_refuses_filters(
    tmp_path: Path, minilm: Any
) -> None:
    with (
        FinderLedge(
            tmp_path / "x",
            vector_store=_UnknownStore(embedding=minilm),
            embedding=minilm,
            show_progress=False,
        ) as fl,
        FinderLedge(tmp_path / "faiss", vector_store="faiss", embedding=minilm, show_progress=False) as ref,
    ):
        fl.add_document(DOCS)
        ref.add_document(DOCS)
        got = fl.search("a cat by the window", search_mode="vector", k=3)
        want = ref.search("a cat by the window", search_mode="vector", k=3)
        assert [r.info.get("vector_score") for r in got] == pytest.approx(
            [r.info.get("vector_score") for r in want], abs=1e-4
        )  # cosines, not the store's -5 x score
        with pytest.raises(UnsupportedFilterError, match="cannot translate filters for _UnknownStore"):
            fl.search("cat", search_mode="vector", filter={"user": "alice"})


def test_a_store_that_cannot_take_vectors_is_refused_when_opened(tmp_path: Path, minilm: Any) -> None:
    from langchain_core.vectorstores import VectorStore as LangChainVectorStore

    class _TextsOnly(LangChainVectorStore):
        def add_texts(self, texts: Any, metadatas: Any = None, **kwargs: Any) -> list[str]:
            return []

        def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
            return []

        @classmethod
        def from_texts(cls, texts: Any, embedding: Any, metadatas: Any = None, **kwargs: Any) -> _TextsOnly:
            return cls()

    with pytest.raises(ConfigurationError, match="_TextsOnly cannot take precomputed vectors"):
        FinderLedge(tmp_path / "t", vector_store=_TextsOnly(), embedding=minilm)


def test_bad_vector_store_values_are_named(tmp_path: Path, minilm: Any) -> None:
    with pytest.raises(ConfigurationError, match="set database_url"):
        FinderLedge(tmp_path / "a", vector_store="pgvector", embedding=minilm).add_texts(["x"])
    with pytest.raises(ConfigurationError, match="expected a backend name, a LangChain VectorStore"):
        FinderLedge(tmp_path / "b", vector_store=object(), embedding=minilm)
    with pytest.raises(ConfigurationError, match="'vector_store'.*one of"):
        FinderLedge(tmp_path / "c", vector_store="weaviate", embedding=minilm)
    assert UnsupportedFilterError.__mro__[1] is ConfigurationError


def test_langchain_pgvector_as_the_vector_leg(tmp_path: Path, minilm: Any, pg_url: str) -> None:
    from langchain_postgres import PGVector

    url = pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
    store = PGVector(
        embeddings=minilm, collection_name=f"c{uuid.uuid4().hex[:10]}", connection=url, use_jsonb=True
    )
    with FinderLedge(tmp_path / "pgv", vector_store=store, embedding=minilm, show_progress=False) as fl:
        ids = fl.add_document(DOCS)
        assert fl.vector_store.location == "shared" and len(fl.vector_store) == 3
        assert _vector_hits(fl, "a cat by the window")[0] == DOCS[0].page_content
        alice = fl.search("cat revenue", search_mode="vector", k=5, filter={"user": "alice"})
        assert {r.metadata["user"] for r in alice} == {"alice"} and len(alice) == 2
        fl.delete([ids[1]])
        assert len(fl.vector_store) == 2
