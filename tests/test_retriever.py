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
    assert len(docs) == 2 and docs[0].metadata["relevance_score"] > 0
    assert len(retriever.invoke("password", k=1)) == 1  # per-call override
    only_md = retriever.invoke("refund bucket", filter={"doc_type_detected": "markdown"}, search_mode="keyword")
    assert only_md and all(d.metadata["doc_type_detected"] == "markdown" for d in only_md)

    batch = retriever.batch(["password reset", "返金の申請"])
    assert len(batch) == 2 and all(len(b) == 2 for b in batch)
    async_docs = asyncio.run(retriever.ainvoke("How long is a password reset link valid?"))
    assert [d.id for d in async_docs] == [d.id for d in docs]


def test_as_retriever_rejects_unknown_options(ledger: FinderLedge) -> None:
    with pytest.raises(ValueError, match="top_n"):
        ledger.as_retriever(top_n=3)
