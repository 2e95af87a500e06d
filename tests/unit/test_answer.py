"""FinderLedge.answer and friends with fake embeddings and LangChain's fake chat models: cited answers (sync,
async, streamed), the extractive answer without a model, prompts by the question's script, as_rag_chain, and
asearch/aget_context."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable

from finderledge import ConfigurationError, FinderLedge
from finderledge.rag.answer import DEFAULT_PROMPTS, EXTRACTIVE_NOTE, Answer, AnswerPrompts, question_language


class Words(Embeddings):
    """Bag of words hashed into 64 dimensions: texts sharing words are close, no model needed."""

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(64)
        for word in (
            re.findall(r"\w", text.lower()) if not text.isascii() else re.findall(r"\w+", text.lower())
        ):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1
        norm = np.linalg.norm(v)
        return list(v / norm if norm else v)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class Recording(FakeListChatModel):
    """A fake chat model that keeps the messages it was sent."""

    seen: ClassVar[list] = []

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        type(self).seen.append(messages)
        yield from super()._stream(messages, stop, run_manager, **kwargs)


@pytest.fixture
def fl(tmp_path: Path) -> Iterator[FinderLedge]:
    with FinderLedge(
        tmp_path / "index", embedding=Words(), vector_store="faiss", show_progress=False
    ) as ledger:
        ledger.add_texts(
            [
                "Refunds are accepted within 30 days of delivery.",
                "Shipping takes five business days.",
                "返金は商品到着から30日以内に申請できます。",
                "Tenant B secret: the refund window is 90 days.",
            ],
            [
                {"source": "refunds.md", "page": 2, "tenant": "a"},
                {"source": "shipping.md", "tenant": "a"},
                {"source": "henkin.md", "tenant": "a"},
                {"source": "b.md", "tenant": "b"},
            ],
        )
        yield ledger


def test_without_a_model_the_answer_quotes_the_passages_and_says_so(fl: FinderLedge) -> None:
    answer = fl.answer("How long is the refund window?", k=2, filter={"tenant": "a"})
    assert isinstance(answer, Answer) and answer.extractive and answer.model is None
    assert (
        answer.text.startswith(EXTRACTIVE_NOTE) and "[1] Refunds are accepted within 30 days" in answer.text
    )
    first = answer.sources[0]
    assert (first.n, first.source, first.page, first.passage) == (
        1,
        "refunds.md",
        2,
        "Refunds are accepted within 30 days of delivery.",
    )
    assert first.chunk_id.startswith(first.parent_id) and first.metadata["tenant"] == "a"
    assert all(s.metadata["tenant"] == "a" for s in answer.sources)  # the filter held
    assert str(answer) == answer.text and answer.to_dict()["sources"][0]["source"] == "refunds.md"


def test_a_model_answers_from_numbered_sources_and_the_history(fl: FinderLedge) -> None:
    Recording.seen = []
    llm = Recording(responses=["Within 30 days [1]."])
    answer = fl.answer(
        "How long is the refund window?",
        llm,
        k=2,
        filter={"tenant": "a"},
        history=[("user", "hi"), ("assistant", "hello")],
    )
    assert answer.text == "Within 30 days [1]." and not answer.extractive and answer.model == "Recording"
    assert [s.source for s in answer.cited] == ["refunds.md"]
    system, *turns = Recording.seen[-1]
    assert system.type == "system" and "[1] (source: refunds.md, page 2" in system.content
    assert "90 days" not in system.content  # another tenant's passage never reaches the model
    assert [m.type for m in turns] == ["human", "ai", "human"] and turns[-1].content.endswith("window?")


def test_default_prompts_follow_the_question_script(fl: FinderLedge) -> None:
    assert question_language("返金の期限は？") == "ja" and question_language("refund?") == "en"
    Recording.seen = []
    fl.answer("返金の期限は？", Recording(responses=["30日以内です [1]。"]), k=1)
    assert Recording.seen[-1][0].content.startswith(DEFAULT_PROMPTS["ja"].system[:20])
    japanese = fl.answer("返金の期限は？", k=1)
    assert japanese.text.startswith(DEFAULT_PROMPTS["ja"].extractive_note) and japanese.language == "ja"


def test_prompts_are_configurable(fl: FinderLedge) -> None:
    Recording.seen = []
    fl.answer("refund window?", Recording(responses=["ok"]), prompts="Be brief.\n{context}", k=1)
    assert Recording.seen[-1][0].content.startswith("Be brief.\n[1] (source:")
    custom = AnswerPrompts(system="S {context}", extractive_note="QUOTES ONLY", no_answer="NOTHING")
    assert fl.answer("refund window?", prompts={"en": custom}, k=1).text.startswith("QUOTES ONLY")
    assert fl.answer("refund window?", prompts=custom, filter={"tenant": "zzz"}).text == "NOTHING"
    with pytest.raises(ConfigurationError, match="context"):
        AnswerPrompts(system="no placeholder", extractive_note="x", no_answer="y")
    with pytest.raises(ConfigurationError, match="prompts"):
        fl.answer("refund?", prompts=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="question"):
        fl.answer("  ")


def test_a_scope_answers_from_its_own_documents_only(fl: FinderLedge) -> None:
    tenant_b = fl.scoped({"tenant": "b"})
    assert [s.source for s in tenant_b.answer("refund window days?", k=4).sources] == ["b.md"]
    assert (
        tenant_b.answer("refund window days?", filter={"tenant": "a"}).sources == []
    )  # narrows, never widens


def test_nothing_found_is_a_plain_no_answer_without_sources(fl: FinderLedge) -> None:
    answer = fl.answer("refund?", Recording(responses=["never used"]), filter={"tenant": "nobody"})
    assert answer.sources == [] and answer.text == DEFAULT_PROMPTS["en"].no_answer


def test_streaming_yields_pieces_then_the_answer(fl: FinderLedge) -> None:
    llm = GenericFakeChatModel(messages=iter([AIMessage("Within 30 days [1].")]))
    items = list(fl.stream_answer("refund window?", llm, k=2, filter={"tenant": "a"}))
    *pieces, final = items
    assert len(pieces) > 1 and all(isinstance(p, str) for p in pieces)  # streamed piece by piece
    assert isinstance(final, Answer) and final.text == "".join(pieces) == "Within 30 days [1]."
    assert final.sources[0].source == "refunds.md"
    with pytest.raises(ConfigurationError, match="k"):
        fl.stream_answer("refund?", k=0)  # refused on the call, not at the first piece


def test_async_answer_stream_search_and_context(fl: FinderLedge) -> None:
    async def run() -> tuple:
        llm = GenericFakeChatModel(messages=iter([AIMessage("Thirty days [1]."), AIMessage("Again [1].")]))
        answer = await fl.aanswer("refund window?", llm, k=1, filter={"tenant": "a"})
        streamed = [piece async for piece in fl.astream_answer("refund window?", llm, k=1)]
        results, context = await asyncio.gather(
            fl.asearch("refund", k=2, filter={"tenant": "b"}), fl.aget_context("shipping", k=1)
        )
        return answer, streamed, results, context

    answer, streamed, results, context = asyncio.run(run())
    assert answer.text == "Thirty days [1]." and answer.sources[0].source == "refunds.md"
    assert "".join(p for p in streamed if isinstance(p, str)) == "Again [1]." and isinstance(
        streamed[-1], Answer
    )
    assert [r.metadata["tenant"] for r in results] == ["b"]
    assert context.startswith("[1] (source: shipping.md")


def test_as_rag_chain_is_an_lcel_runnable(fl: FinderLedge) -> None:
    from langchain_core.runnables import RunnableLambda

    chain = fl.as_rag_chain(
        FakeListChatModel(responses=["A [1]", "B [1]", "C [1]"]), k=1, filter={"tenant": "a"}
    )
    assert isinstance(chain, Runnable)
    assert chain.invoke("refund window?").text == "A [1]"
    assert chain.invoke({"question": "refund window?"}).sources[0].source == "refunds.md"
    assert (chain | RunnableLambda(str)).invoke("refund window?") == "C [1]"
    extractive = fl.as_rag_chain(k=1)
    assert asyncio.run(extractive.ainvoke("shipping")).extractive
    with pytest.raises(ConfigurationError, match="unknown option"):
        fl.as_rag_chain(top_n=3)


def test_results_given_are_answered_as_is(fl: FinderLedge) -> None:
    results = fl.search("shipping", k=1)
    answer = fl.answer("How long is shipping?", results=results)
    assert [s.source for s in answer.sources] == ["shipping.md"]
    with pytest.raises(ConfigurationError, match="results"):
        fl.answer("x", results=results, k=2)


def test_a_passage_stored_from_two_sources_is_one_passage_in_the_context_and_the_answer(
    fl: FinderLedge,
) -> None:
    """Issue 44: the same file added twice (by the CLI, then uploaded) gave the passage as [1] and [2]; now the
    context gives it once citing both sources, and the answer cites it once, its ``also`` naming the other."""
    fl.add_texts(
        ["Refunds are accepted within 30 days of  delivery.\n"],
        [{"source": "upload/refunds.md", "tenant": "a"}],
    )
    results = fl.search("refunds within 30 days", k=4, filter={"tenant": {"$ne": "b"}})
    copies = [r for r in results if "Refunds are accepted" in r.content]
    assert len(copies) == 2  # the search itself keeps both (its shape is unchanged)

    context = fl.get_context(results=results)
    assert context.count("Refunds are accepted within 30 days") == 1, context
    assert re.search(r"\[1\] \(source: (refunds\.md, page 2|upload/refunds\.md)[^)]*; source: ", context), (
        context
    )
    assert context.count("\n\n[") == len(results) - 2  # one passage fewer: numbered 1..n-1, no gap

    answer = fl.answer("refunds within 30 days", k=4, filter={"tenant": {"$ne": "b"}})
    passages = [s.passage for s in answer.sources]
    assert sum("Refunds are accepted" in p for p in passages) == 1, passages
    assert [s.n for s in answer.sources] == list(range(1, len(answer.sources) + 1))
    refund = next(s for s in answer.sources if "Refunds are accepted" in s.passage)
    assert {refund.source, *refund.also} == {"refunds.md", "upload/refunds.md"}
    assert answer.text.count("Refunds are accepted") == 1, answer.text
    assert answer.to_dict()["sources"][refund.n - 1]["also"] == refund.also
