from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from finderledge import FinderLedge


def _format(docs: list[Document]) -> str:
    return "\n".join(d.page_content for d in docs)


def test_retriever_in_an_lcel_chain(ledger: FinderLedge) -> None:
    retriever = ledger.as_retriever(k=2)
    assert isinstance(retriever, BaseRetriever)
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    chain = {"context": retriever | RunnableLambda(_format), "question": RunnablePassthrough()} | prompt
    value = chain.invoke("How long is a password reset link valid?")
    text = value.to_messages()[0].content
    assert "valid for 30 minutes" in text and "Question: How long" in text

    docs = retriever.invoke("How long is a password reset link valid?")
    assert len(docs) == 2 and docs[0].metadata["_finderledge"]["relevance_score"] > 0
    assert len(retriever.invoke("password", k=1)) == 1  # per-call override
    only_md = retriever.invoke(
        "refund bucket", filter={"doc_type_detected": "markdown"}, search_mode="keyword"
    )
    assert only_md and all(d.metadata["doc_type_detected"] == "markdown" for d in only_md)

    batch = retriever.batch(["password reset", "返金の申請"])
    assert len(batch) == 2 and all(len(b) == 2 for b in batch)
    async_docs = asyncio.run(retriever.ainvoke("How long is a password reset link valid?"))
    assert [d.id for d in async_docs] == [d.id for d in docs]


def test_as_retriever_rejects_unknown_options(ledger: FinderLedge) -> None:
    with pytest.raises(ValueError, match="top_n"):
        ledger.as_retriever(top_n=3)


# -- LangChain's conventions ---------------------------------------------------------------------------
def test_langchain_search_type_and_search_kwargs(ledger: FinderLedge) -> None:
    r = ledger.as_retriever(
        search_type="similarity", search_kwargs={"k": 4, "filter": {"doc_type_detected": "markdown"}}
    )
    docs = r.invoke("refund")
    assert 0 < len(docs) <= 4 and all(d.metadata["doc_type_detected"] == "markdown" for d in docs)
    r = ledger.as_retriever(search_type="vector", search_kwargs={"fetch_k": 30, "k": 2})
    assert r.search_mode == "vector" and r.candidate_k == 30 and len(r.invoke("password")) == 2
    r = ledger.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 10, "lambda_mult": 0.3})
    assert r.mmr and r.fetch_k == 10 and r.candidate_k is None and len(r.invoke("refund")) == 2
    with pytest.raises(ValueError, match="score_threshold"):
        ledger.as_retriever(search_type="similarity_score_threshold")
    with pytest.raises(ValueError, match="lambda_mult"):
        ledger.as_retriever(search_kwargs={"lambda_mult": 0.5})


def test_async_calls_take_the_same_per_call_options(ledger: FinderLedge) -> None:
    r = ledger.as_retriever(k=5)
    docs = asyncio.run(
        r.ainvoke("refund", k=2, filter={"doc_type_detected": "markdown"}, search_mode="keyword")
    )
    assert len(docs) <= 2 and all(d.metadata["doc_type_detected"] == "markdown" for d in docs)
    batches = asyncio.run(r.abatch(["refund", "password"], k=1))
    assert [len(b) for b in batches] == [1, 1]
    with pytest.raises(ValueError, match="top_n"):
        asyncio.run(r.ainvoke("refund", top_n=2))


def test_the_constructor_takes_k(ledger: FinderLedge) -> None:
    from finderledge.rag.retriever import FinderLedgeRetriever

    assert len(FinderLedgeRetriever(ledger=ledger, k=3).invoke("password")) == 3
    with pytest.raises(ValueError):
        FinderLedgeRetriever(ledger=ledger, top_k=3)


def test_equal_chunks_compare_equal_so_multi_query_does_not_repeat_them(ledger: FinderLedge) -> None:
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    base = ledger.as_retriever(k=4)
    llm = FakeListChatModel(
        responses=["password reset link\nreset my password\nhow long is the reset link valid"]
    )
    mq = MultiQueryRetriever.from_llm(retriever=base, llm=llm)
    docs = mq.invoke("How long is a password reset link valid?")
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)) and len(ids) >= 4


def test_similarity_score_threshold_drops_noise(ledger: FinderLedge) -> None:
    r = ledger.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.3, "k": 5}
    )
    good = r.invoke("How long is a password reset link valid?")
    assert good and all(d.metadata["_finderledge"]["relevance_score"] >= 0.3 for d in good)
    assert r.invoke("zebra quantum violin nebula") == []
    assert len(r.invoke("zebra quantum violin nebula", score_threshold=0.0)) == 5  # per call, like the others
