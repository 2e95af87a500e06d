"""Chat answers: a language model (any LangChain chat model or LLM) answering from cited passages, or,
with none configured, an extractive answer that quotes the best passages and says it is one."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ..llms import make_chat_model

__all__ = ["EXTRACTIVE_NOTE", "NO_ANSWER", "Answerer", "ExtractiveAnswerer", "ModelAnswerer", "make_answerer"]

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You answer questions about the user's documents. Use only the numbered sources below and cite each "
    "fact with its number, e.g. [1]. If the sources do not contain the answer, say that you do not know. "
    "Answer in the language of the question.\n\nSources:\n{context}"
)
NO_ANSWER = "No relevant passage was found in the documents, so there is nothing to answer from."
EXTRACTIVE_NOTE = (
    "[Extractive answer: no language model is configured; these are the most relevant passages.]"
)


class Answerer(Protocol):
    """Writes an answer to ``question`` from ``context`` (numbered passages) and the chat ``history``."""

    @property
    def name(self) -> str | None:
        """The model's setting (``None``: no model)."""

    @property
    def extractive(self) -> bool:
        """Whether the answer quotes passages instead of a model's words."""

    def stream(
        self, question: str, history: Sequence[tuple[str, str]], context: str, passages: Sequence[str]
    ) -> Iterator[str]: ...


class ExtractiveAnswerer:
    """No model: the answer is the best passages, numbered like the sources, under a note saying so."""

    name = None
    extractive = True

    def __init__(self, max_chars: int = 400) -> None:
        self.max_chars = max_chars

    def stream(
        self, question: str, history: Sequence[tuple[str, str]], context: str, passages: Sequence[str]
    ) -> Iterator[str]:
        yield EXTRACTIVE_NOTE
        for n, text in enumerate(passages[:3], start=1):
            snippet = " ".join(text.split())
            if len(snippet) > self.max_chars:
                snippet = snippet[: self.max_chars].rstrip() + "…"
            yield f"\n\n[{n}] {snippet}"


class ModelAnswerer:
    """A LangChain chat model or LLM answering from the sources (streamed piece by piece)."""

    extractive = False

    def __init__(self, model: Any, name: str, system_prompt: str = SYSTEM_PROMPT) -> None:
        self.model = model
        self.name = name
        self.system_prompt = system_prompt

    def stream(
        self, question: str, history: Sequence[tuple[str, str]], context: str, passages: Sequence[str]
    ) -> Iterator[str]:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        messages: list[Any] = [SystemMessage(self.system_prompt.format(context=context))]
        for role, content in history:
            messages.append(HumanMessage(content) if role == "user" else AIMessage(content))
        messages.append(HumanMessage(question))
        for piece in self.model.stream(messages):
            text = piece if isinstance(piece, str) else getattr(piece, "content", "")
            if isinstance(text, str) and text:
                yield text


def make_answerer(spec: str | None, *, base_url: str | None = None, timeout: float = 120.0) -> Answerer:
    """The answerer a ``llm`` setting names (see :func:`finderledge.llms.make_chat_model`), or ``None``:
    extractive.  A missing client package or key is a :class:`ConfigurationError`."""
    if not spec:
        return ExtractiveAnswerer()
    return ModelAnswerer(make_chat_model(spec, base_url=base_url, timeout=timeout), spec)
