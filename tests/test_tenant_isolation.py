"""Tenant isolation: a base filter can be narrowed by callers, never widened or removed.

For random tenants, per-call filters (including ones naming another tenant, ``$or`` tricks, ``$ne``,
``None`` and ``{}``), modes and entry points (a scope's search and get_context, retrievers sync and async,
parents, reranking, LangChain's MultiQueryRetriever and ContextualCompressionRetriever, the LangChain
VectorStore with a base filter), no result ever
belongs to another tenant.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from finderledge import ConfigurationError, FinderLedge

TENANTS = ["alice", "bob", "carol"]
TOPICS = ["password reset policy", "refund processing time", "hybrid search ranking", "invoice approval flow"]
EXAMPLES = int(os.environ.get("FINDERLEDGE_TENANT_EXAMPLES", "60"))


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Iterator[tuple[FinderLedge, FinderLedge]]:
    """One directory, opened plain and with a reranker; every tenant has documents on every topic."""
    directory = tmp_path_factory.mktemp("tenants") / "index"
    docs = []
    for t in TENANTS:
        for i, topic in enumerate(TOPICS):
            body = " ".join(f"Tenant marker T-{t}. Note {n} about the {topic} for team {t}." for n in range(40))
            docs.append(Document(page_content=body, metadata={"tenant": t, "topic": topic, "n": i, "tags": [t, "all"]}))
    plain = FinderLedge(directory, embedding=minilm, chunk_size=200, show_progress=False)
    plain.add_document(docs)
    reranked = FinderLedge(directory, embedding=minilm, chunk_size=200, show_progress=False,
                           reranker=lambda q, ds: [float(len(d.page_content)) for d in ds])
    yield plain, reranked
    reranked.close()
    plain.close()


def _other_tenant_filters(tenant: str) -> st.SearchStrategy[Any]:
    others = [t for t in TENANTS if t != tenant]
    return st.one_of(
        st.none(), st.just({}),
        st.sampled_from(others).map(lambda o: {"tenant": o}),
        st.sampled_from(others).map(lambda o: {"$or": [{"tenant": o}, {"n": {"$gte": 0}}]}),
        st.just({"tenant": {"$ne": tenant}}), st.just({"tenant": {"$in": TENANTS}}),
        st.just({"tags": {"$contains": "all"}}), st.sampled_from(TOPICS).map(lambda tp: {"topic": tp}),
        st.integers(0, 3).map(lambda n: {"n": {"$lte": n}}),
    )


PATHS = ["search", "get_context", "retriever", "retriever_async", "parents", "rerank", "multi_query", "compression",
         "vectorstore"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_no_result_ever_belongs_to_another_tenant(ledgers: tuple[FinderLedge, FinderLedge], minilm: Any,
                                                   data: st.DataObject) -> None:
    plain, reranked = ledgers
    tenant = data.draw(st.sampled_from(TENANTS))
    call_filter = data.draw(_other_tenant_filters(tenant))
    mode = data.draw(st.sampled_from(["hybrid", "vector", "keyword"]))
    path = data.draw(st.sampled_from(PATHS))
    query = data.draw(st.sampled_from(TOPICS + [f"team {t}" for t in TENANTS] + ["T-bob T-carol T-alice"]))
    scope = (reranked if path == "rerank" else plain).scoped({"tenant": tenant})
    retriever = scope.as_retriever(k=8, search_mode=mode, return_parents=path == "parents")

    if path == "get_context":
        text = scope.get_context(query, filter=call_filter, search_mode=mode, k=8)
        assert not any(f"T-{o}" in text for o in TENANTS if o != tenant)
        return
    if path in ("search", "rerank"):
        docs = [r.document for r in scope.search(query, filter=call_filter, search_mode=mode, k=8)]
    elif path in ("retriever", "parents"):
        docs = retriever.invoke(query, filter=call_filter)
    elif path == "retriever_async":
        docs = asyncio.run(retriever.ainvoke(query, filter=call_filter))
    elif path == "vectorstore":
        store = plain.as_vectorstore(base_filter={"tenant": tenant})
        docs = store.similarity_search(query, k=8, filter=call_filter, search_mode=mode)
    elif path == "multi_query":
        from langchain_classic.retrievers.multi_query import MultiQueryRetriever
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        others = " ".join(f"T-{o}" for o in TENANTS if o != tenant)
        llm = FakeListChatModel(responses=[f"{query}\n{others} documents\nteam {others}"])
        docs = MultiQueryRetriever.from_llm(retriever=retriever, llm=llm).invoke(query)
    else:
        from langchain_classic.retrievers import ContextualCompressionRetriever
        from langchain_classic.retrievers.document_compressors import EmbeddingsFilter

        compressor = EmbeddingsFilter(embeddings=minilm, k=5)
        docs = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=retriever).invoke(query)
    if not call_filter:
        assert docs, f"{path}: the tenant's own documents should be found"
    assert {d.metadata["tenant"] for d in docs} <= {tenant}, f"{path} {mode} {call_filter}"


def test_a_scope_needs_a_real_filter(ledgers: tuple[FinderLedge, FinderLedge]) -> None:
    plain, _ = ledgers
    for bad in ({}, None):
        with pytest.raises(ConfigurationError, match="base filter"):
            plain.scoped(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="filter"):
        plain.scoped({"tenant": None})


def test_a_retriever_base_filter_is_kept_by_search_kwargs_and_per_call_filters(ledgers: tuple[FinderLedge, FinderLedge]) -> None:
    plain, _ = ledgers
    for r in (plain.as_retriever(filter={"tenant": "alice"}, k=6),
              plain.as_retriever(search_kwargs={"filter": {"tenant": "alice"}, "k": 6})):
        for call in ({"tenant": "bob"}, None, {"$or": [{"tenant": "bob"}, {"tenant": "alice"}]}):
            docs = r.invoke("refund processing time", filter=call)
            assert {d.metadata["tenant"] for d in docs} <= {"alice"}
        assert r.invoke("refund", filter={"tenant": "bob"}) == []  # narrowing to nothing, not widening

