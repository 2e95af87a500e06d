"""Chat answers: a language model (any LangChain chat model or LLM) answering from cited passages, or,
with none configured, an extractive answer that quotes the best passages and says it is one.

The answer itself is written by :mod:`finderledge.rag.answer` (the library's ``FinderLedge.answer``); an answerer
names the model and the prompts the server uses.  The notes (extractive answer, nothing found) are in the
question's language, as the library's are; a client tells an extractive answer by the response's ``extractive``
field."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ..rag.answer import (
    DEFAULT_PROMPTS,
    EXTRACTIVE_NOTE,
    NO_ANSWER,
    AnswerPrompts,
    extractive_pieces,
    model_pieces,
    resolve_prompts,
)
from ..rag.llms import make_chat_model

__all__ = [
    "EXTRACTIVE_NOTE",
    "NO_ANSWER",
    "Answerer",
    "ExtractiveAnswerer",
    "ModelAnswerer",
    "make_answerer",
    "no_answer",
]

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = DEFAULT_PROMPTS["en"].system
#: the server's prompts: the library's defaults by language, notes included
SERVER_PROMPTS: dict[str, AnswerPrompts] = dict(DEFAULT_PROMPTS)


def no_answer(question: str) -> str:
    """The answer when nothing relevant was found, in the question's language."""
    return resolve_prompts(None, question).no_answer


class Answerer(Protocol):
    """Writes an answer to ``question`` from ``context`` (numbered passages) and the chat ``history``."""

    @property
    def name(self) -> str | None:
        """The model's setting (``None``: no model)."""

    @property
    def extractive(self) -> bool:
        """Whether the answer quotes passages instead of a model's words."""

    @property
    def model(self) -> Any:
        """The LangChain model (``None``: extractive), for :meth:`FinderLedge.stream_answer`."""

    @property
    def prompts(self) -> Any:
        """The prompts for :meth:`FinderLedge.stream_answer` (see :mod:`finderledge.rag.answer`)."""

    def stream(
        self, question: str, history: Sequence[tuple[str, str]], context: str, passages: Sequence[str]
    ) -> Iterator[str]: ...


class ExtractiveAnswerer:
    """No model: the answer is the best passages, numbered like the sources, under a note saying so."""

    name = None
    extractive = True
    model = None
    prompts = SERVER_PROMPTS

    def __init__(self, max_chars: int = 400) -> None:
        self.max_chars = max_chars

    def stream(
        self, question: str, history: Sequence[tuple[str, str]], context: str, passages: Sequence[str]
    ) -> Iterator[str]:
        note = resolve_prompts(None, question).extractive_note
        return extractive_pieces(passages, note, max_chars=self.max_chars)


class ModelAnswerer:
    """A LangChain chat model or LLM answering from the sources (streamed piece by piece)."""

    extractive = False

    def __init__(self, model: Any, name: str, system_prompt: str | None = None) -> None:
        self.model = model
        self.name = name
        self.prompts: Any = SERVER_PROMPTS if system_prompt is None else system_prompt

    def stream(
        self, question: str, history: Sequence[tuple[str, str]], context: str, passages: Sequence[str]
    ) -> Iterator[str]:
        system = resolve_prompts(self.prompts, question).system
        return model_pieces(self.model, question, context, history=history, system=system)


def make_answerer(spec: str | None, *, base_url: str | None = None, timeout: float = 120.0) -> Answerer:
    """The answerer a ``llm`` setting names (see :func:`finderledge.rag.llms.make_chat_model`), or ``None``:
    extractive.  A missing key is a :class:`ConfigurationError`, a missing client package a
    :class:`~finderledge.errors.MissingExtraError` naming its extra."""
    if not spec:
        return ExtractiveAnswerer()
    return ModelAnswerer(make_chat_model(spec, base_url=base_url, timeout=timeout), spec)
