"""Answers and async calls of a FinderLedge: ``answer`` (sync, async, streamed), ``as_rag_chain``, ``asearch``,
``aget_context``.

Functions of a :class:`~finderledge.rag.protocols.SearchableLedger` (a FinderLedge), which the facade uses as its
methods; the answer logic lives in :mod:`finderledge.rag.answer`, the search in the ledger's public ``search``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..results import SearchResult
from . import answer as answers
from .answer import Answer, Prompts
from .context import Citation
from .protocols import SearchableLedger

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable

    from ..results import SearchResults

__all__ = ["aanswer", "aget_context", "answer", "as_rag_chain", "asearch", "astream_answer", "stream_answer"]


def answer(
    ledger: SearchableLedger,
    question: str,
    llm: Any = None,
    *,
    k: int | None = None,
    strategy: Any = None,
    filter: Mapping[str, Any] | None = None,
    search_mode: str | None = None,
    score_threshold: float | None = None,
    rerank: bool | None = None,
    mmr: bool | None = None,
    fetch_k: int | None = None,
    lambda_mult: float | None = None,
    history: Sequence[Any] | None = None,
    prompts: Prompts = None,
    results: Sequence[SearchResult] | None = None,
    citation: Citation = None,
    max_chars: int | None = None,
) -> Answer:
    """Answer ``question`` from the documents: an :class:`~finderledge.rag.answer.Answer` whose ``text`` cites
    its ``sources`` (source, page, chunk id, passage) as ``[n]``.

    ``llm`` is any LangChain chat model or LLM (see :func:`finderledge.make_chat_model`); without one the
    answer quotes the best passages under a note saying so (``answer.extractive`` is True).  The search
    takes ``k``, ``filter``, ``search_mode``, ``score_threshold``, ``rerank``, ``mmr``/``fetch_k``/
    ``lambda_mult`` and ``strategy`` (which uses ``llm`` too) as :meth:`search` does; ``results=`` answers
    from results you already have.  ``history`` is earlier turns, ``(role, text)`` pairs or LangChain
    messages.  ``prompts``: an :class:`~finderledge.rag.answer.AnswerPrompts`, a system prompt with
    ``{context}``, or a mapping ``{"en": …, "ja": …}``; the defaults follow the question's script.
    """
    return answers.answer(ledger, question, **_options(locals()))


async def aanswer(
    ledger: SearchableLedger,
    question: str,
    llm: Any = None,
    *,
    k: int | None = None,
    strategy: Any = None,
    filter: Mapping[str, Any] | None = None,
    search_mode: str | None = None,
    score_threshold: float | None = None,
    rerank: bool | None = None,
    mmr: bool | None = None,
    fetch_k: int | None = None,
    lambda_mult: float | None = None,
    history: Sequence[Any] | None = None,
    prompts: Prompts = None,
    results: Sequence[SearchResult] | None = None,
    citation: Citation = None,
    max_chars: int | None = None,
) -> Answer:
    """:meth:`answer` for async code: the search runs in a thread, the model through its async API."""
    return await answers.aanswer(ledger, question, **_options(locals()))


def stream_answer(
    ledger: SearchableLedger,
    question: str,
    llm: Any = None,
    *,
    k: int | None = None,
    strategy: Any = None,
    filter: Mapping[str, Any] | None = None,
    search_mode: str | None = None,
    score_threshold: float | None = None,
    rerank: bool | None = None,
    mmr: bool | None = None,
    fetch_k: int | None = None,
    lambda_mult: float | None = None,
    history: Sequence[Any] | None = None,
    prompts: Prompts = None,
    results: Sequence[SearchResult] | None = None,
    citation: Citation = None,
    max_chars: int | None = None,
) -> Iterator[str | Answer]:
    """:meth:`answer` as it is written: text pieces (``str``), then the whole
    :class:`~finderledge.rag.answer.Answer` with its sources as the last item."""
    return answers.stream_answer(ledger, question, **_options(locals()))


def astream_answer(
    ledger: SearchableLedger,
    question: str,
    llm: Any = None,
    *,
    k: int | None = None,
    strategy: Any = None,
    filter: Mapping[str, Any] | None = None,
    search_mode: str | None = None,
    score_threshold: float | None = None,
    rerank: bool | None = None,
    mmr: bool | None = None,
    fetch_k: int | None = None,
    lambda_mult: float | None = None,
    history: Sequence[Any] | None = None,
    prompts: Prompts = None,
    results: Sequence[SearchResult] | None = None,
    citation: Citation = None,
    max_chars: int | None = None,
) -> AsyncIterator[str | Answer]:
    """:meth:`stream_answer` for async code (``async for piece in fl.astream_answer(q): …``)."""
    return answers.astream_answer(ledger, question, **_options(locals()))


def as_rag_chain(ledger: SearchableLedger, llm: Any = None, **options: Any) -> Runnable[Any, Answer]:
    """An LCEL runnable: a question (a string, or ``{"question": …}``) -> :class:`~finderledge.rag.answer.Answer`
    (``invoke``, ``ainvoke``, ``batch``; ``| RunnableLambda(str)`` for the text alone).  ``options`` are
    :meth:`answer`'s (``k``, ``filter``, ``prompts`` …), fixed for every call."""
    from langchain_core.runnables import RunnableLambda

    answers.check_options(options)

    def question_of(value: Any) -> str:
        if isinstance(value, Mapping):
            value = value.get("question", value.get("input"))
        return cast(str, value)

    def run(value: Any) -> Answer:
        return ledger.answer(question_of(value), llm, **options)

    async def arun(value: Any) -> Answer:
        return await ledger.aanswer(question_of(value), llm, **options)

    return RunnableLambda(run, afunc=arun, name="finderledge_rag_chain")


async def asearch(ledger: SearchableLedger, query: str, **options: Any) -> SearchResults:
    """:meth:`search` for async code (run in a worker thread so the event loop keeps serving)."""
    return await asyncio.to_thread(functools.partial(ledger.search, query, **options))


async def aget_context(ledger: SearchableLedger, query: str | None = None, **options: Any) -> str:
    """:meth:`get_context` for async code (run in a worker thread)."""
    return await asyncio.to_thread(functools.partial(ledger.get_context, query, **options))


def _options(arguments: dict[str, Any]) -> dict[str, Any]:
    """A method's arguments for :mod:`finderledge.rag.answer` (``ledger`` and ``question`` left out)."""
    return {k: v for k, v in arguments.items() if k not in ("ledger", "question")}
