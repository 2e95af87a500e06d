"""Maximal marginal relevance: search(mmr=True), as_retriever(search_type="mmr") and the LangChain vector
store's max_marginal_relevance_search return relevant chunks that do not repeat each other, within the filter."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from finderledge import ConfigurationError, FinderLedge
from finderledge.ranking.mmr import mmr_order


class Words(Embeddings):
    """Bag of words hashed into 64 dimensions: near-duplicate texts get near-identical vectors."""

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(64)
        for word in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1
        norm = np.linalg.norm(v)
        return list(v / norm if norm else v)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


COPIES = [
    f"Our refund window is thirty days for every order placed in the online store or by phone ({n})."
    for n in range(6)
]
OTHERS = [
    "Gift cards: refund window of thirty days.",
    "Refund window: thirty days after delivery, receipt needed.",
]


@pytest.fixture
def fl(tmp_path: Path) -> Iterator[FinderLedge]:
    with FinderLedge(
        tmp_path / "index", embedding=Words(), vector_store="faiss", show_progress=False
    ) as ledger:
        ledger.add_texts(
            [*COPIES, *OTHERS, "Tenant B: the refund window is ninety days."],
            [{"source": f"copy{n}.md", "tenant": "a"} for n in range(6)]
            + [{"source": "receipt.md", "tenant": "a"}, {"source": "payback.md", "tenant": "a"}]
            + [{"source": "b.md", "tenant": "b"}],
        )
        yield ledger


def _copies(results) -> int:  # type: ignore[no-untyped-def]
    return sum(r.content in COPIES for r in results)


def test_mmr_diversifies_near_duplicates(fl: FinderLedge) -> None:
    plain = fl.search("refund window thirty days online store", k=3)
    assert _copies(plain) == 3  # the near-duplicates crowd the plain results
    mmr = fl.search("refund window thirty days online store", k=3, mmr=True, filter={"tenant": "a"})
    assert mmr[0].content in COPIES and _copies(mmr) == 1  # one of them, then the other passages
    assert {r.content for r in mmr[1:]} == set(OTHERS)
    assert [r.rank for r in mmr] == [1, 2, 3]
    only_relevance = fl.search("refund window thirty days online store", k=3, mmr=True, lambda_mult=1.0)
    assert [r.id for r in only_relevance] == [r.id for r in plain]


def test_mmr_keeps_the_filter(fl: FinderLedge) -> None:
    for mode in ("hybrid", "vector", "keyword"):
        results = fl.search(
            "refund window days", k=5, mmr=True, fetch_k=9, filter={"tenant": "a"}, search_mode=mode
        )
        assert results and all(r.metadata["tenant"] == "a" for r in results), mode
    only_b = fl.search("refund window", k=3, mmr=True, filter={"tenant": "b"})
    assert [r.metadata["source"] for r in only_b] == ["b.md"]
    parents = fl.search("refund window thirty days online store", k=3, mmr=True, return_parents=True)
    assert len({r.id for r in parents}) == 3 and _copies(parents) == 1


def test_retriever_and_vector_store_mmr(fl: FinderLedge) -> None:
    retriever = fl.as_retriever(
        search_type="mmr", filter={"tenant": "a"}, search_kwargs={"k": 3, "fetch_k": 8, "lambda_mult": 0.5}
    )
    docs = retriever.invoke("refund window thirty days online store")
    assert len(docs) == 3 and sum(d.page_content in COPIES for d in docs) == 1
    assert all(d.metadata["tenant"] == "a" for d in docs)
    store = fl.as_vectorstore(base_filter={"tenant": "a"})
    docs = store.max_marginal_relevance_search("refund window thirty days online store", k=3, fetch_k=8)
    assert sum(d.page_content in COPIES for d in docs) == 1 and all(d.metadata["tenant"] == "a" for d in docs)
    via_langchain = store.as_retriever(search_type="mmr", search_kwargs={"k": 3}).invoke("refund thirty days")
    assert sum(d.page_content in COPIES for d in via_langchain) == 1


def test_mmr_options_are_checked(fl: FinderLedge) -> None:
    for options, message in (
        ({"mmr": "yes"}, "mmr"),
        ({"mmr": True, "lambda_mult": 1.5}, "lambda_mult"),
        ({"mmr": True, "fetch_k": 0}, "fetch_k"),
        ({"fetch_k": 10}, "mmr=True"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            fl.search("refund", **options)
    with pytest.raises(ConfigurationError, match="lambda_mult"):
        fl.as_retriever(search_type="mmr", search_kwargs={"lambda_mult": -1})


def test_mmr_order_by_hand() -> None:
    same, other = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert mmr_order([0.9, 0.8, 0.5], [same, same, other], 0.5, 3) == [0, 2, 1]
    assert mmr_order([0.9, 0.8, 0.5], [same, same, other], 1.0, 2) == [0, 1]
    assert mmr_order([0.9, 0.8], [same, None], 0.5, 2) == [0, 1]  # no vector: never redundant
    assert mmr_order([], [], 0.5, 3) == []
