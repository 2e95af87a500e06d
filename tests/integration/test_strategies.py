"""Query strategies with LangChain's fake chat models (no LLM can be downloaded here) and the real model: each
one's own merge does what it promises. The contract every registered strategy keeps (filters on every sub-search,
provenance, fallback, concurrency, prompts) is tests/contract/test_strategy_contract.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from finderledge import ConfigurationError, FinderLedge
from finderledge.strategies import Decompose, HyDE, MultiQuery, get_strategy
from finderledge.strategies.base import language_of, parse_lines

DOCS = {
    "cancel": "To terminate a subscription, open Billing and choose End plan. Access stays until the period ends.",
    "refund": "Money back: a refund must be requested within 30 days of the charge through the support portal.",
    "password": "A forgotten password is reset from the sign-in page; the emailed link expires after one hour.",
    "ja": "返金は購入から30日以内にサポート窓口で申請してください。",
    "other": "The data center in Osaka runs on renewable energy and is cooled by river water.",
}


@pytest.fixture(scope="module")
def fl(tmp_path_factory: pytest.TempPathFactory, minilm) -> Iterator[FinderLedge]:
    ledger = FinderLedge(tmp_path_factory.mktemp("strategies") / "idx", embedding=minilm, show_progress=False)
    docs = [
        Document(page_content=text, metadata={"topic": key, "tenant": tenant}, id=f"{key}-{tenant}")
        for key, text in DOCS.items()
        for tenant in ("alice", "bob")
    ]
    ledger.add_document(docs)
    yield ledger
    ledger.close()


REPLIES = {  # what a model would answer for "How do I cancel and get my money back?"
    "multi_query": "1. terminate a subscription\n2. End plan in Billing\n3. money back refund",
    "hyde": "You terminate the subscription from Billing (End plan) and request a refund within 30 days.",
    "decompose": "- How do I terminate my subscription?\n- How do I get a refund (money back)?",
}
QUESTION = "How do I cancel and get my money back?"


def _topics(results) -> list[str]:
    return [r.document.metadata["topic"] for r in results]


def test_multi_query_fuses_the_original_with_the_variants(fl: FinderLedge) -> None:
    results = fl.search(
        "cancel",
        k=3,
        strategy="multi_query",
        llm=FakeListChatModel(responses=["terminate subscription End plan\nmoney back"]),
        search_mode="keyword",
        filter={"tenant": "alice"},
    )
    roles = [s["role"] for s in results.trace.sub_queries]
    assert roles == ["original", "variant", "variant"]
    assert _topics(results)[0] == "cancel"  # "cancel" itself is in no document: only the variants find it


def test_hyde_embeds_the_answer_and_keeps_the_question_for_keywords(fl: FinderLedge) -> None:
    results = fl.search(
        "How do I end my plan?",
        k=3,
        strategy="hyde",
        filter={"tenant": "alice"},
        llm=FakeListChatModel(responses=[REPLIES["hyde"]]),
    )
    modes = {s["role"]: s["mode"] for s in results.trace.sub_queries}
    assert modes == {"hypothetical": "vector", "original": "keyword"}
    assert _topics(results)[0] == "cancel"


def test_decompose_represents_every_sub_question_in_the_top_k(fl: FinderLedge) -> None:
    results = fl.search(
        QUESTION,
        k=2,
        strategy="decompose",
        filter={"tenant": "alice"},
        llm=FakeListChatModel(responses=[REPLIES["decompose"]]),
    )
    assert sorted(_topics(results)) == ["cancel", "refund"]
    assert len({tuple(r.info["found_by"]) for r in results}) == 2


def test_strategy_settings_are_checked(fl: FinderLedge) -> None:
    with pytest.raises(ConfigurationError, match="needs an LLM"):
        fl.search("x", strategy="hyde")
    with pytest.raises(ConfigurationError, match="expected one of"):
        fl.search("x", strategy="telepathy", llm=FakeListChatModel(responses=["a"]))
    with pytest.raises(ConfigurationError, match="strategy_on_error"):
        fl.search("x", strategy="hyde", llm=FakeListChatModel(responses=["a"]), strategy_on_error="ignore")
    with pytest.raises(ConfigurationError, match="search_mode"):
        fl.search("x", strategy="hyde", llm=FakeListChatModel(responses=["a"]), search_mode="fuzzy")
    for bad in ({"n": 0}, {"n": True}, {"prompt": "no field"}):
        with pytest.raises(ConfigurationError):
            MultiQuery(**bad)
    assert isinstance(get_strategy(HyDE()), HyDE) and isinstance(get_strategy("decompose"), Decompose)


def test_llm_list_answers_are_parsed() -> None:
    assert parse_lines("1. a\n2) b\n- c\n・d\n\n「e」\n1. a", 10) == ["a", "b", "c", "d", "e"]
    assert parse_lines("x\ny\nz", 2) == ["x", "y"]
    assert language_of("返金の申請期限は？") == "ja" and language_of("refund in 30 days") == "en"


def test_a_scope_keeps_its_tenant_through_a_strategy(fl: FinderLedge) -> None:
    scoped = fl.scoped({"tenant": "bob"})
    results = scoped.search(
        QUESTION,
        k=5,
        strategy="multi_query",
        filter={"tenant": "alice"},
        llm=FakeListChatModel(responses=[REPLIES["multi_query"]]),
    )
    assert list(results) == []  # narrowed to bob AND alice: nothing, never alice's
    results = scoped.search(
        QUESTION, k=5, strategy="decompose", llm=FakeListChatModel(responses=[REPLIES["decompose"]])
    )
    assert results and {r.document.metadata["tenant"] for r in results} == {"bob"}


def test_parents_and_threshold_pass_through(fl: FinderLedge, tmp_path: Path) -> None:
    results = fl.search(
        QUESTION,
        k=5,
        strategy="multi_query",
        return_parents=True,
        score_threshold=0.05,
        llm=FakeListChatModel(responses=[REPLIES["multi_query"]]),
        filter={"tenant": "alice"},
    )
    assert results and all(r.info.get("is_parent") for r in results) and all(r.score >= 0.05 for r in results)


def test_retriever_and_context_take_a_strategy(fl: FinderLedge) -> None:
    llm = FakeListChatModel(responses=[REPLIES["decompose"]] * 4)
    retriever = fl.as_retriever(k=2, strategy="decompose", llm=llm, filter={"tenant": "alice"})
    docs = retriever.invoke(QUESTION)
    assert sorted(d.metadata["topic"] for d in docs) == ["cancel", "refund"]
    assert all(d.metadata["_finderledge"]["found_by"] for d in docs)
    assert {d.metadata["tenant"] for d in retriever.invoke(QUESTION, filter={"tenant": "bob"})} <= {"alice"}
    via_kwargs = fl.as_retriever(search_kwargs={"k": 2, "strategy": "multi_query", "llm": llm})
    assert via_kwargs.strategy == "multi_query"
    with pytest.raises(ConfigurationError, match="needs an LLM"):
        fl.as_retriever(strategy="hyde")
    context = fl.get_context(QUESTION, k=2, strategy="decompose", llm=llm, filter={"tenant": "alice"})
    assert context.startswith("[1]") and "30 days" in context and "End plan" in context


@pytest.mark.asyncio
async def test_async_retriever_with_a_strategy_keeps_the_tenant(fl: FinderLedge) -> None:
    llm = FakeListChatModel(responses=[REPLIES["multi_query"]] * 2)
    retriever = fl.scoped({"tenant": "bob"}).as_retriever(k=5, strategy="multi_query", llm=llm)
    docs = await retriever.ainvoke(QUESTION, filter={"$or": [{"tenant": "alice"}, {"tenant": "bob"}]})
    assert docs and {d.metadata["tenant"] for d in docs} == {"bob"}


def test_a_strategy_with_a_reranker_shows_scores_in_the_unit_interval(tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    """The same score scale as search's: a reranker's logits are mapped into [0, 1], the raw score kept."""
    with FinderLedge(
        embedding=minilm,
        show_progress=False,
        reranker=lambda q, docs: [float(len(d.page_content)) - 80.0 for d in docs],
    ) as ledger:
        ledger.add_texts(list(DOCS.values()))
        plain = ledger.search("refund", k=3)
        via = ledger.search(
            "refund",
            k=3,
            strategy="multi_query",
            llm=FakeListChatModel(responses=["money back\nrefund window"]),
        )
        for results in (plain, via):
            assert results and all(0.0 <= r.score <= 1.0 for r in results)
            raws = [r.metadata["_finderledge"]["rerank_score"] for r in results]
            assert raws == sorted(raws, reverse=True) and any(raw > 1 for raw in raws)
        kept = ledger.search(
            "refund",
            k=5,
            strategy="multi_query",
            score_threshold=0.5,
            llm=FakeListChatModel(responses=["money back"]),
        )
        assert kept and all(
            r.metadata["_finderledge"]["rerank_score"] > 0 for r in kept
        )  # logit 0 = score 0.5
        with pytest.raises(ConfigurationError, match="score_threshold"):
            ledger.search(
                "refund", strategy="multi_query", score_threshold=5.0, llm=FakeListChatModel(responses=["x"])
            )
