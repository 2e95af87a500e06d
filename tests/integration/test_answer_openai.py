"""FinderLedge.answer with a real LLM client (langchain-openai through make_chat_model) against the local server
speaking the OpenAI chat-completions protocol: the request carries the numbered sources, the answer streams
piece by piece (sync and async), and a failing model raises instead of returning a half answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import REPLY, FakeOpenAI, fake_openai

from finderledge import FinderLedge, make_chat_model
from finderledge.rag.answer import Answer


@pytest.fixture
def server() -> Iterator[tuple[str, type[FakeOpenAI]]]:
    with fake_openai() as running:
        yield running


@pytest.fixture
def fl(tmp_path: Path, minilm) -> Iterator[FinderLedge]:
    with FinderLedge(tmp_path / "index", embedding=minilm, show_progress=False) as ledger:
        ledger.add_texts(
            ["Refunds are accepted within 30 days.", "Shipping takes five days."],
            [{"source": "refunds.md"}, {"source": "shipping.md"}],
        )
        yield ledger


def test_answer_through_an_openai_protocol_server(fl: FinderLedge, server) -> None:  # type: ignore[no-untyped-def]
    url, handler = server
    llm = make_chat_model("openai:local-test-model", base_url=url, timeout=30)
    answer = fl.answer("How long is the refund window?", llm, k=1)
    assert answer.text == "".join(REPLY) and answer.model == "local-test-model" and not answer.extractive
    assert [s.source for s in answer.cited] == ["refunds.md"]
    sent = handler.requests[-1]
    assert (
        sent["messages"][0]["role"] == "system"
        and "[1] (source: refunds.md" in sent["messages"][0]["content"]
    )
    assert sent["messages"][-1] == {"role": "user", "content": "How long is the refund window?"}
    pieces = [p for p in fl.stream_answer("refund window?", llm, k=1) if isinstance(p, str)]
    assert pieces == REPLY and handler.requests[-1]["stream"] is True

    async def streamed() -> list:
        return [p async for p in fl.astream_answer("refund window?", llm, k=1)]

    items = asyncio.run(streamed())
    assert items[:-1] == REPLY and isinstance(items[-1], Answer)
    assert asyncio.run(fl.as_rag_chain(llm, k=1).ainvoke("refund window?")).text == "".join(REPLY)


def test_a_failing_model_raises(fl: FinderLedge, server) -> None:  # type: ignore[no-untyped-def]
    url, handler = server
    handler.fail = True
    llm = make_chat_model("openai:local-test-model", base_url=url, timeout=30)
    with pytest.raises(Exception, match="model crashed"):
        fl.answer("refund window?", llm, k=1)
