"""Tenant isolation: a base filter can be narrowed by callers, never widened or removed.

For random tenants, random extra documents, per-call filters (including ones naming another tenant, ``$or``
tricks, ``$ne``, ``None`` and ``{}``), modes and entry points (a scope's search and get_context, retrievers
sync and async, parents, reranking, LangChain's MultiQueryRetriever and ContextualCompressionRetriever, the
LangChain VectorStore with a base filter: its searches and ``get_by_ids``), no result ever belongs to
another tenant.  A second property, over random tenants and documents in a fresh ledger, covers the pinned
VectorStore's ``get_by_ids``, ``delete`` and adds; and a retriever's base filter cannot be removed after it
is built.
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
WORDS = [
    "policy",
    "refund",
    "password",
    "ledger",
    "invoice",
    "travel",
    "ranking",
    "search",
    "approval",
    "team",
    "receipt",
    "manager",
    "deadline",
    "budget",
]
EXAMPLES = int(os.environ.get("FINDERLEDGE_TENANT_EXAMPLES", "60"))


@pytest.fixture(scope="module")
def owners() -> dict[str, str]:
    """Every stored document id of the module's ledger and its tenant (filled as documents are added)."""
    return {}


@pytest.fixture(scope="module")
def ledgers(
    tmp_path_factory: pytest.TempPathFactory, minilm: Any, owners: dict[str, str]
) -> Iterator[tuple[FinderLedge, FinderLedge]]:
    """One directory, opened plain and with a reranker; every tenant has documents on every topic."""
    directory = tmp_path_factory.mktemp("tenants") / "index"
    docs = []
    for t in TENANTS:
        for i, topic in enumerate(TOPICS):
            body = " ".join(
                f"Tenant marker T-{t}. Note {n} about the {topic} for team {t}." for n in range(40)
            )
            docs.append(
                Document(
                    page_content=body, metadata={"tenant": t, "topic": topic, "n": i, "tags": [t, "all"]}
                )
            )
    plain = FinderLedge(directory, embedding=minilm, chunk_size=200, show_progress=False)
    owners.update(zip(plain.add_document(docs), [d.metadata["tenant"] for d in docs]))
    reranked = FinderLedge(
        directory,
        embedding=minilm,
        chunk_size=200,
        show_progress=False,
        reranker=lambda q, ds: [float(len(d.page_content)) for d in ds],
    )
    yield plain, reranked
    reranked.close()
    plain.close()


def _other_tenant_filters(tenant: str) -> st.SearchStrategy[Any]:
    others = [t for t in TENANTS if t != tenant]
    return st.one_of(
        st.none(),
        st.just({}),
        st.sampled_from(others).map(lambda o: {"tenant": o}),
        st.sampled_from(others).map(lambda o: {"$or": [{"tenant": o}, {"n": {"$gte": 0}}]}),
        st.just({"tenant": {"$ne": tenant}}),
        st.just({"tenant": {"$in": TENANTS}}),
        st.just({"tags": {"$contains": "all"}}),
        st.sampled_from(TOPICS).map(lambda tp: {"topic": tp}),
        st.integers(0, 3).map(lambda n: {"n": {"$lte": n}}),
    )


PATHS = [
    "search",
    "get_context",
    "retriever",
    "retriever_async",
    "parents",
    "rerank",
    "multi_query",
    "compression",
    "vectorstore",
    "vectorstore_get_by_ids",
]


def _random_text(tenant: str) -> st.SearchStrategy[str]:
    """A random note of ``tenant`` (its marker, then random words)."""
    return st.lists(st.sampled_from(WORDS), min_size=3, max_size=10).map(
        lambda words: f"Tenant marker T-{tenant}. " + " ".join(words) + "."
    )


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_result_ever_belongs_to_another_tenant(
    ledgers: tuple[FinderLedge, FinderLedge], minilm: Any, owners: dict[str, str], data: st.DataObject
) -> None:
    plain, reranked = ledgers
    for owner in data.draw(st.lists(st.sampled_from(TENANTS), max_size=2), label="new documents' tenants"):
        text = data.draw(_random_text(owner))
        md = {"tenant": owner, "topic": "random", "n": data.draw(st.integers(0, 5)), "tags": [owner, "all"]}
        owners.update(zip(plain.add_texts([text], [md]), [owner]))
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
    elif path == "vectorstore_get_by_ids":
        store = plain.as_vectorstore(base_filter={"tenant": tenant})
        known = sorted(owners) + ["no-such-id"]  # grows as examples add documents: draw positions, not ids
        ids = [
            known[i % len(known)]
            for i in data.draw(
                st.lists(st.integers(0, 10_000), min_size=1, max_size=12),
                label="get_by_ids (positions among stored ids)",
            )
        ]
        docs = store.get_by_ids(ids)
        assert [d.id for d in docs] == [i for i in ids if owners.get(i) == tenant]
        assert {d.metadata["tenant"] for d in docs} <= {tenant}
        return
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
        docs = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=retriever).invoke(
            query
        )
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


def test_a_retriever_base_filter_is_kept_by_search_kwargs_and_per_call_filters(
    ledgers: tuple[FinderLedge, FinderLedge],
) -> None:
    plain, _ = ledgers
    for r in (
        plain.as_retriever(filter={"tenant": "alice"}, k=6),
        plain.as_retriever(search_kwargs={"filter": {"tenant": "alice"}, "k": 6}),
    ):
        for call in ({"tenant": "bob"}, None, {"$or": [{"tenant": "bob"}, {"tenant": "alice"}]}):
            docs = r.invoke("refund processing time", filter=call)
            assert {d.metadata["tenant"] for d in docs} <= {"alice"}
        assert r.invoke("refund", filter={"tenant": "bob"}) == []  # narrowing to nothing, not widening


def _pinning_filter(tenant: str) -> st.SearchStrategy[dict[str, Any]]:
    """Base filters that accept exactly ``tenant``'s documents, written several ways."""
    return st.sampled_from(
        [
            {"tenant": tenant},
            {"tenant": {"$in": [tenant]}},
            {"$and": [{"tenant": tenant}, {"n": {"$gte": 0}}]},
        ]
    )


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_pinned_vector_store_reads_deletes_and_adds_only_its_tenant(
    minilm: Any, data: st.DataObject
) -> None:
    """Random tenants and documents in a fresh ledger; the store pinned to one tenant never reads, deletes,
    replaces or labels another tenant's documents."""
    tenants = data.draw(
        st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=2, max_size=4, unique=True),
        label="tenants",
    )
    drawn = data.draw(
        st.lists(st.tuples(st.integers(0, len(tenants) - 1), st.booleans()), min_size=1, max_size=6),
        label="documents (tenant, caller id?)",
    )
    drawn.append((1, False))  # another tenant always has a document stored under a content id
    texts = [data.draw(_random_text(tenants[t])) + f" Note {i}." for i, (t, _) in enumerate(drawn)]
    shared = texts[-1]  # the other tenant's text, which the pinned tenant will also add
    with FinderLedge(embedding=minilm, vector_store="faiss", show_progress=False) as fl:
        ids = fl.add_texts(
            texts,
            [{"tenant": tenants[t], "n": i} for i, (t, _) in enumerate(drawn)],
            ids=[f"doc-{i}" if caller else None for i, (_, caller) in enumerate(drawn)],
        )
        owner = {doc_id: tenants[t] for doc_id, (t, _) in zip(ids, drawn)}
        me, other_id = tenants[0], ids[-1]
        store = fl.as_vectorstore(base_filter=data.draw(_pinning_filter(me), label="base filter"))

        asked = data.draw(st.permutations(ids + ["no-such-id"]), label="get_by_ids")
        assert [d.id for d in store.get_by_ids(asked)] == [i for i in asked if owner.get(i) == me]
        assert {d.metadata["tenant"] for d in store.similarity_search("policy team " + shared, k=10)} <= {me}

        # adds: metadata the base filter refuses, an id another tenant holds (Document.id too)
        before = fl.count()["documents"]
        for bad in ({"tenant": tenants[1], "n": 0}, {"n": 0}, {}):
            with pytest.raises(ConfigurationError, match="'tenant'"):
                store.add_texts([f"Tenant marker T-{me}. planted note"], [bad])
        with pytest.raises(ConfigurationError, match="outside this store's base filter"):
            store.add_texts(["overwrite"], [{"tenant": me, "n": 0}], ids=[other_id])
        with pytest.raises(ConfigurationError, match="outside this store's base filter"):
            store.add_documents(
                [Document(page_content="overwrite", metadata={"tenant": me, "n": 0}, id=other_id)]
            )
        assert fl.count()["documents"] == before
        # the same text as the other tenant's: a document of its own, the other tenant's is not replaced
        mine = store.add_texts([shared], [{"tenant": me, "n": 0}])
        assert mine != [other_id] and store.get_by_ids(mine)[0].metadata["tenant"] == me
        assert store.add_texts([shared], [{"tenant": me, "n": 0}]) == mine  # the same text again: the same id

        # deletes: only this tenant's documents go, whatever ids are asked for
        doomed = data.draw(
            st.lists(st.sampled_from(ids + mine + ["no-such-id"]), unique=True), label="delete"
        )
        assert store.delete(doomed) is True
        for doc_id, tenant in {**owner, mine[0]: me}.items():
            stored = fl.get_document(doc_id)
            if tenant == me and doc_id in doomed:
                assert stored is None, doc_id
            else:
                assert stored is not None and stored.metadata["tenant"] == tenant, doc_id


def test_a_retrievers_base_filter_cannot_be_removed_after_construction(
    ledgers: tuple[FinderLedge, FinderLedge],
) -> None:
    plain, _ = ledgers
    scope = plain.scoped({"tenant": "alice"})
    for r in (
        scope.as_retriever(k=6),
        plain.as_retriever(filter={"tenant": "alice"}, k=6),
        plain.as_retriever(search_kwargs={"filter": {"tenant": "alice"}, "k": 6}),
    ):
        with pytest.raises(ConfigurationError, match="base filter is fixed"):
            r.filter = None
        with pytest.raises(ConfigurationError, match="base filter is fixed"):
            r.model_copy(update={"filter": None})
        with pytest.raises(ConfigurationError, match="base filter is fixed"):
            r.copy(update={"filter": {"tenant": "bob"}})
        with pytest.raises(ConfigurationError, match="base filter is fixed"):
            r.model_copy(update={"_base_filter": None})
        r.filter.clear()  # changing the shown dict in place changes nothing either
        copy = r.model_copy(update={"k": 3})  # other options may change
        r.k = 4
        for retriever, k in ((r, 4), (copy, 3)):
            docs = retriever.invoke("refund processing time")
            assert len(docs) == k and {d.metadata["tenant"] for d in docs} == {"alice"}
    store = plain.as_vectorstore(base_filter={"tenant": "alice"})
    for view in (scope, store):
        with pytest.raises(AttributeError):
            view.base_filter = None  # type: ignore[misc]
        view.base_filter.clear()  # a copy
        assert view.base_filter == {"tenant": "alice"}
    assert {d.metadata["tenant"] for d in store.similarity_search("refund", k=6)} == {"alice"}
    assert {r.metadata["tenant"] for r in scope.search("refund", k=6)} == {"alice"}
