"""LangChain components that take a vector store or a retriever, over FinderLedge: ParentDocumentRetriever,
MultiQueryRetriever and SelfQueryRetriever (with FinderLedge's filter translator).  The LLMs are LangChain's
fake models: what is tested is the plumbing, ids and filters, not an LLM's judgement."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_classic.chains.query_constructor.schema import AttributeInfo
from langchain_classic.retrievers import MultiQueryRetriever, ParentDocumentRetriever
from langchain_classic.retrievers.self_query.base import SelfQueryRetriever
from langchain_core.documents import Document
from langchain_core.language_models import FakeListLLM
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from finderledge import FinderLedge
from finderledge.rag.self_query import FinderLedgeTranslator

HANDBOOK = [
    Document(
        page_content="Refund policy. Refunds are processed within five business days. "
        "A refund covers the ticket price but not the booking fee. " * 3,
        metadata={"id": "refund-policy", "user_id": "alice", "year": 2023, "tags": ["billing"]},
    ),
    Document(
        page_content="Password policy. A password reset link is valid for thirty minutes. "
        "Passwords must have twelve characters. " * 3,
        metadata={"id": "password-policy", "user_id": "bob", "year": 2021, "tags": ["security"]},
    ),
    Document(
        page_content="Travel policy. Travel expenses need a receipt and approval by a manager. " * 3,
        metadata={"id": "travel-policy", "user_id": "alice", "year": 2019, "tags": ["billing", "travel"]},
    ),
]


@pytest.fixture
def fl(minilm) -> Iterator[FinderLedge]:
    with FinderLedge(embedding=minilm, show_progress=False, chunk_size=120, chunk_overlap=0) as ledger:
        yield ledger


def test_parent_document_retriever_returns_whole_parents(fl: FinderLedge) -> None:
    retriever = ParentDocumentRetriever(
        vectorstore=fl.as_vectorstore(),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=80, chunk_overlap=0),
    )
    retriever.add_documents(HANDBOOK)
    assert fl.count()["documents"] > len(HANDBOOK)  # the children are FinderLedge's documents
    docs = retriever.invoke("how long is a password reset link valid?")
    assert docs[0].page_content == HANDBOOK[1].page_content
    assert docs[0].metadata == HANDBOOK[1].metadata  # the caller's "id" key came back untouched
    alice = ParentDocumentRetriever(
        vectorstore=fl.as_vectorstore(base_filter={"user_id": "alice"}),
        docstore=retriever.docstore,
        child_splitter=retriever.child_splitter,
    )
    assert all(d.metadata["user_id"] == "alice" for d in alice.invoke("password reset link"))


def test_multi_query_retriever_de_duplicates(fl: FinderLedge) -> None:
    fl.add_documents(HANDBOOK)
    llm = FakeListLLM(responses=["refund processing time\nhow long do refunds take\nrefund business days"])
    for base in (fl.as_vectorstore().as_retriever(search_kwargs={"k": 3}), fl.as_retriever(k=3)):
        docs = MultiQueryRetriever.from_llm(retriever=base, llm=llm).invoke("refunds?")
        assert docs and len(docs) == len({(d.id, d.page_content) for d in docs})  # each chunk once
        assert any("Refunds are processed" in d.page_content for d in docs)


def _self_query(fl: FinderLedge, answer: str) -> SelfQueryRetriever:
    fields = [
        AttributeInfo(name="user_id", description="owner", type="string"),
        AttributeInfo(name="year", description="year written", type="integer"),
        AttributeInfo(name="tags", description="topics", type="list[string]"),
    ]
    llm = FakeListLLM(responses=[answer])
    return SelfQueryRetriever.from_llm(
        llm,
        fl.as_vectorstore(),
        "company policies",
        fields,
        structured_query_translator=FinderLedgeTranslator(),
        search_kwargs={"k": 10},
    )


def test_self_query_retriever_translates_filters(fl: FinderLedge) -> None:
    fl.add_documents(HANDBOOK)
    answer = '```json\n{"query": "policy", "filter": "and(eq(\\"user_id\\", \\"alice\\"), gte(\\"year\\", 2020))"}\n```'
    docs = _self_query(fl, answer).invoke("alice's policies since 2020")
    assert docs and {d.metadata["id"] for d in docs} == {"refund-policy"}
    answer = '```json\n{"query": "policy", "filter": "contain(\\"tags\\", \\"travel\\")"}\n```'
    assert {d.metadata["id"] for d in _self_query(fl, answer).invoke("travel")} == {"travel-policy"}
    answer = '```json\n{"query": "policy", "filter": "or(lt(\\"year\\", 2020), eq(\\"user_id\\", \\"bob\\"))"}\n```'
    assert {d.metadata["id"] for d in _self_query(fl, answer).invoke("x")} == {
        "travel-policy",
        "password-policy",
    }


def test_translator_output() -> None:
    from langchain_core.structured_query import Comparator, Comparison, Operation, Operator, StructuredQuery

    q = StructuredQuery(
        query="q",
        filter=Operation(
            operator=Operator.AND,
            arguments=[
                Comparison(comparator=Comparator.IN, attribute="lang", value="ja"),
                Comparison(comparator=Comparator.NE, attribute="year", value=2020),
            ],
        ),
        limit=None,
    )
    assert FinderLedgeTranslator().visit_structured_query(q) == (
        "q",
        {"filter": {"$and": [{"lang": {"$in": ["ja"]}}, {"year": {"$ne": 2020}}]}},
    )
    with pytest.raises(ValueError):
        FinderLedgeTranslator().visit_comparison(
            Comparison(comparator=Comparator.LIKE, attribute="a", value="b")
        )
