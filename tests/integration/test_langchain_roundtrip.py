"""What FinderLedge returns can go back in: Documents from a search or a retriever (their ``_finderledge``
fields are FinderLedge's, not the caller's), and ``add_documents(docs, ids=...)`` as LangChain calls it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document

from finderledge import ConfigurationError, FinderLedge


def test_returned_documents_can_be_added_back(minilm: Any) -> None:
    with (
        FinderLedge(embedding=minilm, show_progress=False) as source,
        FinderLedge(embedding=minilm, show_progress=False) as target,
    ):
        source.add_texts(
            ["Refunds take five business days.", "Passwords reset links last 30 minutes."],
            metadatas=[{"source": "faq", "team": "billing"}, {"source": "faq", "team": "it"}],
        )
        docs = source.as_retriever(k=2).invoke("refunds")
        assert all("_finderledge" in d.metadata for d in docs)
        ids = target.add_documents(docs)
        stored = [target.get_document(i) for i in ids]
        assert {d.metadata["team"] for d in stored} == {"billing", "it"}  # type: ignore[union-attr]
        assert all(d.metadata["_finderledge"]["id"] == i for d, i in zip(stored, ids))  # type: ignore[union-attr]


def test_add_documents_takes_langchain_ids(minilm: Any, tmp_path: Any) -> None:
    with FinderLedge(embedding=minilm, show_progress=False) as fl:
        docs = [
            Document(page_content="Tea is harvested in spring."),
            Document(page_content="Coffee grows in the shade."),
        ]
        assert fl.add_documents(docs, ids=["tea", "coffee"]) == ["tea", "coffee"]
        assert fl.get_document("coffee").page_content == "Coffee grows in the shade."  # type: ignore[union-attr]
        with pytest.raises(ConfigurationError, match="ids: expected 2 item"):
            fl.add_documents(docs, ids=["only-one"])
        note = tmp_path / "note.txt"
        note.write_text("A file.", encoding="utf-8")
        with pytest.raises(ConfigurationError, match="ids applies to Documents only"):
            fl.add_documents([note], ids=["x"])


def test_add_texts_returns_one_id_per_text(minilm: Any) -> None:
    """LangChain's contract: the same text twice is stored once, and both positions get its id."""
    with FinderLedge(embedding=minilm, show_progress=False) as fl:
        ids = fl.add_texts(["Tea grows on hills.", "Coffee grows in the shade.", "Tea grows on hills."])
        assert len(ids) == 3 and ids[0] == ids[2] != ids[1]
        assert fl.count()["documents"] == 2
        assert fl.add_texts(["Cocoa.", "Mate."], ids=["c", None])[0] == "c"


FROM_TEXTS_SCRIPT = """
import sys
from langchain_core.embeddings import DeterministicFakeEmbedding
from finderledge import FinderLedgeVectorStore
store = FinderLedgeVectorStore.from_texts(["alpha beta"], DeterministicFakeEmbedding(size=8), env_file=None)
print(type(store.ledger).__name__, store.ledger.count()["documents"])
"""

STORE_ALONE_SCRIPT = """
import sys
import finderledge.rag.vectorstore
print("facade imported:", "finderledge.facade" in sys.modules)
"""


def test_from_texts_in_a_fresh_process_through_the_public_name() -> None:
    """``from finderledge import FinderLedgeVectorStore`` is enough for LangChain's ``from_texts``: the package
    imports the facade with it (the store module itself never imports the facade, lazily or by name)."""
    import subprocess
    import sys

    made = subprocess.run(
        [sys.executable, "-c", FROM_TEXTS_SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.split() == ["FinderLedge", "1"]
    alone = subprocess.run(
        [sys.executable, "-c", STORE_ALONE_SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.strip() == "facade imported: False"
