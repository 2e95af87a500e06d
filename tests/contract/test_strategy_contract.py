"""One contract every query strategy passes (issue 26, "one registry"): each name in
:data:`finderledge.strategies.STRATEGIES`, built-in or registered, keeps the caller's filter on every
sub-search, says which sub-queries found each result, falls back to the plain search when the LLM fails, runs
its searches concurrently and follows the question's language. LangChain's fake chat models stand in for the
LLM and deterministic fake embeddings for the model (the keyword leg finds the words the replies use).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from registries import built_in_names

from finderledge import ConfigurationError, FinderLedge
from finderledge.strategies import (
    STRATEGIES,
    MultiQuery,
    QueryStrategy,
    SubQuery,
    get_strategy,
    register,
    run_strategy,
)
from finderledge.strategies.base import ask, parse_lines

DOCS = {
    "cancel": "To terminate a subscription, open Billing and choose End plan. Access stays until the period ends.",
    "refund": "Money back: a refund must be requested within 30 days of the charge through the support portal.",
    "password": "A forgotten password is reset from the sign-in page; the emailed link expires after one hour.",
    "ja": "返金は購入から30日以内にサポート窓口で申請してください。",
    "other": "The data center in Osaka runs on renewable energy and is cooled by river water.",
}
QUESTION = "How do I cancel and get my money back?"


class KeywordsOnly(QueryStrategy):
    """A strategy as a user registers one: each line of the LLM's answer searched with the keyword leg."""

    name = "keywords_only"
    prompts = {"en": "Question: {question} ({n} keyword lines)", "ja": "質問: {question}（{n}行）"}

    def plan(self, question: str, llm: Any) -> list[SubQuery]:
        lines = parse_lines(ask(llm, self.prompt_for(question)), self.n)
        if not lines:
            raise ValueError("the LLM wrote no keywords")
        return [
            SubQuery(question, "original"),
            *(SubQuery(line, "variant", mode="keyword") for line in lines),
        ]


register("keywords_only", KeywordsOnly)  # an extra name changes nothing for other tests

REPLIES = {  # what a model would answer for QUESTION
    "multi_query": "1. terminate a subscription\n2. End plan in Billing\n3. money back refund",
    "hyde": "You terminate the subscription from Billing (End plan) and request a refund within 30 days.",
    "decompose": "- How do I terminate my subscription?\n- How do I get a refund (money back)?",
    "keywords_only": "terminate subscription\nrefund money back",
}


class Recording(FakeListChatModel):
    """A fake chat model that keeps the prompts it was sent."""

    prompts: list[str] = []

    def invoke(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        type(self).prompts.append(str(input))
        return super().invoke(input, *args, **kwargs)


class Failing(FakeListChatModel):
    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the LLM server is down")


@pytest.fixture(scope="module")
def fl() -> Iterator[FinderLedge]:
    ledger = FinderLedge(embedding=DeterministicFakeEmbedding(size=16), env_file=None, show_progress=False)
    ledger.add_document(
        [
            Document(page_content=text, metadata={"topic": key, "tenant": tenant}, id=f"{key}-{tenant}")
            for key, text in DOCS.items()
            for tenant in ("alice", "bob")
        ]
    )
    yield ledger
    ledger.close()


def _llm(name: str) -> FakeListChatModel:
    return FakeListChatModel(responses=[REPLIES[name]])


def test_every_registered_strategy_is_covered_here() -> None:
    assert built_in_names("finderledge.strategies", "STRATEGIES") | {"keywords_only"} == set(REPLIES)
    assert "keywords_only" in STRATEGIES


@pytest.mark.parametrize("name", sorted(REPLIES))
class TestStrategyContract:
    """What every registered strategy does."""

    def test_is_a_query_strategy_named_as_registered(self, name: str) -> None:
        strategy = get_strategy(name)
        assert isinstance(strategy, QueryStrategy) and strategy.name == name

    def test_sub_searches_keep_the_filter_and_results_say_who_found_them(
        self, fl: FinderLedge, name: str
    ) -> None:
        results = fl.search(QUESTION, k=4, strategy=name, llm=_llm(name), filter={"tenant": "alice"})
        assert results and {r.document.metadata["tenant"] for r in results} == {"alice"}
        assert results.trace.strategy == name and len(results.trace.sub_queries) >= 2
        for r in results:
            assert r.info["found_by"] and set(r.info["found_by"]) <= {
                s["text"] for s in results.trace.sub_queries
            }
        assert [r.rank for r in results] == list(range(1, len(results) + 1))
        topics = [r.document.metadata["topic"] for r in results]
        assert "cancel" in topics and "refund" in topics

    def test_an_llm_failure_falls_back_to_the_plain_search_or_raises(
        self, fl: FinderLedge, name: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        llm = Failing(responses=["unused"])
        with caplog.at_level("WARNING", logger="finderledge"):
            results = fl.search(QUESTION, k=3, strategy=name, llm=llm, filter={"tenant": "bob"})
        assert [r.id for r in results] == [r.id for r in fl.search(QUESTION, k=3, filter={"tenant": "bob"})]
        assert "ConnectionError" in (results.trace.strategy_fallback or "")
        assert any("the LLM failed" in m for m in caplog.messages)
        with pytest.raises(ConnectionError):
            fl.search(QUESTION, strategy=name, llm=llm, strategy_on_error="raise")

    def test_sub_searches_run_concurrently(
        self, fl: FinderLedge, name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        n = len(get_strategy(name).plan(QUESTION, _llm(name)))
        barrier = threading.Barrier(n, timeout=20)  # every sub-search must be running at once to pass it
        real = fl.search

        def waiting(*args: Any, **kwargs: Any) -> Any:
            barrier.wait()
            return real(*args, **kwargs)

        monkeypatch.setattr(fl, "search", waiting)
        assert run_strategy(fl, QUESTION, name, _llm(name), k=3)

    def test_the_prompt_follows_the_question_language_or_the_callers(self, name: str) -> None:
        Recording.prompts = []
        strategy = get_strategy(name)
        for question in ("返金の申請期限は？", "How long is the refund window?"):
            try:
                strategy.plan(question, Recording(responses=[REPLIES[name]]))
            except ValueError:
                pass
        assert "質問" in Recording.prompts[0] and "Question" in Recording.prompts[1]
        custom = get_strategy(name, prompt="Q={question} n={n}", n=2)
        custom.plan("x?", Recording(responses=[REPLIES[name]]))
        assert Recording.prompts[-1] == "Q=x? n=2"


def test_an_unknown_strategy_names_the_setting_and_the_choices(fl: FinderLedge) -> None:
    with pytest.raises(ConfigurationError, match=r"setting 'strategy': expected one of \[.*'hyde'.*\] or a"):
        get_strategy("telepathy")
    with pytest.raises(ConfigurationError, match="keywords_only"):
        fl.search("x", strategy="telepathy", llm=_llm("hyde"))
    assert isinstance(get_strategy(MultiQuery(n=2)), MultiQuery)
