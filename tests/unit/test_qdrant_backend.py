"""``vector_store="qdrant"`` end to end through FinderLedge: qdrant-client's local mode in the index directory
(a server URL takes the same path past the client), the named collection, settings by the design's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from finderledge import FinderLedge
from finderledge.config import Settings
from finderledge.errors import ConfigurationError, UnsafePathError

qdrant_client = pytest.importorskip("qdrant_client")  # finderledge[qdrant]

TEXTS = [
    "Vacation requests go to your manager.",
    "Expense reports are due monthly.",
    "The VPN needs a token.",
]


def _points(directory: Path, collection: str) -> int:
    client = qdrant_client.QdrantClient(path=str(directory / "qdrant"))
    try:
        return int(client.count(collection, exact=True).count)
    finally:
        client.close()


def test_local_qdrant_holds_the_vectors_in_the_named_collection(tmp_path: Path, fake_embeddings) -> None:
    with FinderLedge(
        tmp_path / "idx", vector_store="qdrant", qdrant_collection="documents", embedding=fake_embeddings
    ) as fl:
        fl.add_texts(
            TEXTS, metadatas=[{"source": f"{i}.txt", "tags": ["hr"] if i == 0 else []} for i in range(3)]
        )
        hits = fl.search(TEXTS[1], search_mode="vector", k=1)
        assert [h.metadata["source"] for h in hits] == ["1.txt"]
        only_hr = fl.search(TEXTS[1], search_mode="vector", k=3, filter={"tags": {"$contains": "hr"}})
        assert [h.metadata["source"] for h in only_hr] == ["0.txt"]
        assert fl.settings.vector_store == "qdrant"
    assert _points(tmp_path / "idx", "documents") == 3
    with FinderLedge(
        tmp_path / "idx", embedding=fake_embeddings
    ) as again:  # the recorded store and collection
        assert again.settings.vector_store == "qdrant" and again.settings.qdrant_collection == "documents"
        assert [h.metadata["source"] for h in again.search(TEXTS[2], search_mode="vector", k=1)] == ["2.txt"]
        gone = [d.id for d in again.list_documents() if d.metadata["source"] == "2.txt"]
        again.delete(gone)
        assert "2.txt" not in {
            h.metadata["source"] for h in again.search(TEXTS[2], search_mode="vector", k=3)
        }
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings) as third:
        assert {h.metadata["source"] for h in third.search(TEXTS[2], search_mode="vector", k=3)} == {
            "0.txt",
            "1.txt",
        }


def test_qdrant_url_names_the_backend_and_is_never_recorded_with_a_password() -> None:
    settings = Settings.resolve({"qdrant_url": "http://user:secret@qdrant:6333"}, environ={}, env_file=None)
    assert settings.vector_store == "qdrant"
    assert "secret" not in str(settings.to_dict())
    env = Settings.resolve(environ={"FINDERLEDGE_QDRANT_URL": "http://qdrant:6333"}, env_file=None)
    assert env.vector_store == "qdrant" and env.qdrant_url == "http://qdrant:6333"


def test_a_second_instance_over_a_local_qdrant_index_says_what_to_do(tmp_path: Path, fake_embeddings) -> None:
    with FinderLedge(tmp_path / "idx", vector_store="qdrant", embedding=fake_embeddings) as fl:
        fl.add_texts(TEXTS)
        assert len(fl.search(TEXTS[0], search_mode="vector", k=1)) == 1
        with (
            pytest.raises(ConfigurationError, match="qdrant_url"),
            FinderLedge(tmp_path / "idx", embedding=fake_embeddings) as other,
        ):
            other.search(TEXTS[0], search_mode="vector", k=1)


def test_points_carry_the_designs_payload_fields(tmp_path: Path) -> None:
    """The design's payload schema: document_id, chunk_id, filename, tags, page_number (beside the metadata)."""
    from finderledge.vector_stores import create_vector_store

    store = create_vector_store("qdrant", tmp_path, 4, collection="documents")
    md = {"document_id": "d1", "filename": "a.pdf", "tags": ["hr"], "page": 3}
    store.add(["c1", "c2"], [[1, 0, 0, 0], [0, 1, 0, 0]], [md, {"chunk_id": "mine"}])
    assert store.search([0, 1, 0, 0], 1, {"page_number": 3}) == []  # not a metadata field: re-checked away
    assert [i for i, _ in store.search([0, 1, 0, 0], 2, {"page": 3})] == ["c1"]
    store.close()
    client = qdrant_client.QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        payloads = {p.payload["_finderledge_id"]: p.payload for p in client.scroll("documents", limit=10)[0]}
    finally:
        client.close()
    first = payloads["c1"]
    assert (
        first["document_id"],
        first["chunk_id"],
        first["filename"],
        first["tags"],
        first["page_number"],
    ) == (
        "d1",
        "c1",
        "a.pdf",
        ["hr"],
        3,
    )
    assert payloads["c2"]["chunk_id"] == "mine" and "page_number" not in payloads["c2"]  # metadata wins


def test_a_server_collection_is_shared_and_indexes_the_designs_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No Qdrant server runs here: the client a URL would make is qdrant-client's in-memory one, so everything
    past the connection (collection, payload indexes, location) runs for real."""
    from finderledge.vector_stores import SHARED, create_vector_store

    real = qdrant_client.QdrantClient
    made: list[dict] = []

    def client(**kwargs):
        made.append(kwargs)
        return real(location=":memory:")

    indexed: list[tuple[str, str]] = []
    monkeypatch.setattr(qdrant_client, "QdrantClient", client)
    monkeypatch.setattr(
        real,
        "create_payload_index",
        lambda self, coll, name, field_schema: indexed.append((name, field_schema)),
    )
    store = create_vector_store("qdrant", None, 4, url="http://qdrant:6333", collection="documents")
    try:
        assert store.location == SHARED and made[0]["url"] == "http://qdrant:6333"
        assert dict(indexed) == {
            "document_id": "keyword",
            "chunk_id": "keyword",
            "filename": "keyword",
            "tags": "keyword",
            "page_number": "integer",
        }
        store.add(["c1"], [[1, 0, 0, 0]], [{"tags": ["hr"]}])
        assert [i for i, _ in store.search([1, 0, 0, 0], 1, {"tags": {"$contains": "hr"}})] == ["c1"]
    finally:
        store.close()


@pytest.mark.parametrize("linked", ["qdrant", "qdrant/meta.json", "qdrant/collection"])
def test_a_link_in_the_local_qdrant_folder_is_refused_and_nothing_outside_changes(
    tmp_path: Path, fake_embeddings, linked: str
) -> None:
    """The local folder goes through the storage layer: qdrant-client never opens a file through a link."""
    directory = tmp_path / "index"
    with FinderLedge(directory, embedding=fake_embeddings, vector_store="qdrant", env_file=None) as fl:
        fl.add_texts(["refunds within 30 days"])
    outside = tmp_path / "outside"
    target = directory / linked
    target.rename(outside)
    target.symlink_to(outside)
    before = (
        sorted((p.relative_to(outside), p.stat().st_size) for p in outside.rglob("*"))
        if outside.is_dir()
        else outside.read_bytes()
    )
    with pytest.raises(UnsafePathError, match="link"):
        FinderLedge(directory, embedding=fake_embeddings, vector_store="qdrant", env_file=None).search(
            "refunds"
        )
    after = (
        sorted((p.relative_to(outside), p.stat().st_size) for p in outside.rglob("*"))
        if outside.is_dir()
        else outside.read_bytes()
    )
    assert after == before
