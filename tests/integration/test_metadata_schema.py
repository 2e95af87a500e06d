"""User metadata may use any key (``id`` included); FinderLedge's own fields live under ``_finderledge``;
caller ids are honoured.  (Ledgers of the development builds before this layout are refused at open:
``tests/unit/test_ledger_schema.py``.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge
from finderledge.errors import ConfigurationError
from finderledge.metadata import FL_KEY


@pytest.fixture
def ledger(tmp_path: Path, minilm, store_kind: str) -> Iterator[FinderLedge]:
    """An empty persistent FinderLedge on each vector store."""
    with FinderLedge(tmp_path / "idx", vector_store=store_kind, embedding=minilm, show_progress=False) as fl:
        yield fl


USER_MD = {
    "id": 7,
    "parent_id": "mine",
    "split_index": "x",
    "is_parent": "no",
    "split_count": [1],
    "relevance_score": "user's",
    "source": "handbook",
}


def test_any_user_key_round_trips(ledger: FinderLedge) -> None:
    [pid] = ledger.add_document(
        Document(page_content="Refunds are processed within five business days.", metadata=USER_MD)
    )
    stored = ledger.get_document(pid)
    assert stored is not None and stored.id == pid
    assert {k: v for k, v in stored.metadata.items() if k != FL_KEY} == USER_MD
    assert stored.metadata[FL_KEY]["id"] == pid and stored.metadata[FL_KEY]["is_parent"] is True
    for mode in ("hybrid", "vector", "keyword"):
        [hit] = ledger.search("refunds processed business days", search_mode=mode, k=1)
        assert {k: v for k, v in hit.metadata.items() if k != FL_KEY} == USER_MD, mode
        assert hit.parent_id == pid and hit.id == hit.document.id == f"{pid}-0000"
        assert hit.metadata[FL_KEY]["relevance_score"] == hit.score
    assert ledger.search("refunds", filter={"id": 7}, k=1)
    assert ledger.search("refunds", filter={"parent_id": "mine"}, k=1)
    assert not ledger.search("refunds", filter={"id": pid}, k=1)  # our ids are not user metadata
    assert ledger.list_documents()[0].metadata["id"] == 7


def test_only_the_namespace_key_is_reserved(ledger: FinderLedge) -> None:
    with pytest.raises(ConfigurationError, match="_finderledge"):
        ledger.add_document(Document(page_content="text", metadata={FL_KEY: 1}))
    with pytest.raises(ConfigurationError, match="_finderledge"):
        ledger.add_document(Document(page_content="text"), metadata={FL_KEY: {"id": "x"}})


def test_caller_ids_are_honoured_and_replace(ledger: FinderLedge) -> None:
    ids = ledger.add_document(
        [
            Document(page_content="Alpha beta gamma.", id="doc-a"),
            Document(page_content="Delta epsilon.", id="doc-b"),
        ]
    )
    assert ids == ["doc-a", "doc-b"]
    assert ledger.get_document("doc-a").page_content == "Alpha beta gamma."  # type: ignore[union-attr]
    assert [r.parent_id for r in ledger.search("alpha beta gamma", search_mode="keyword", k=1)] == ["doc-a"]
    # same id again: unchanged when identical, replaced when the content or metadata differs
    same = ledger.ingest(Document(page_content="Alpha beta gamma.", id="doc-a"))
    assert (
        same.unchanged == ["doc-a"] and same.embeddings_cached == same.embeddings_computed == 0
    )  # not re-split
    report = ledger.ingest(Document(page_content="Zeta eta theta.", id="doc-a", metadata={"v": 2}))
    assert report.added == ["doc-a"] and report.replaced == ["doc-a"]
    assert ledger.count() == {"documents": 2, "chunks": 2}
    assert not ledger.search("alpha beta gamma", search_mode="keyword", k=3, filter={"v": {"$ne": 2}}) or all(
        r.parent_id != "doc-a" for r in ledger.search("alpha beta gamma", search_mode="keyword", k=3)
    )
    [hit] = ledger.search("zeta eta theta", search_mode="keyword", k=1)
    assert hit.parent_id == "doc-a" and hit.metadata["v"] == 2
    report = ledger.ingest(Document(page_content="Zeta eta theta.", id="doc-a", metadata={"v": 3}))
    assert report.replaced == ["doc-a"] and ledger.get_document("doc-a").metadata["v"] == 3  # type: ignore[union-attr]


def test_caller_ids_are_checked(ledger: FinderLedge) -> None:
    for bad in ("", "a" * 1025, "x\x00y"):
        with pytest.raises(ConfigurationError, match="id"):
            ledger.add_document(Document(page_content="text", id=bad))
    with pytest.raises(ConfigurationError, match="twice"):
        ledger.add_document(
            [Document(page_content="one", id="same"), Document(page_content="two", id="same")]
        )
