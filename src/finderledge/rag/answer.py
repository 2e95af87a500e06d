"""Answers with citations: retrieve, number the passages, have a language model write an answer citing them
as ``[n]`` (or, with no model, quote the best passages under a note saying so), and return the sources cited.

The one place FinderLedge turns search results into an answer: :meth:`FinderLedge.answer
<finderledge.facade.FinderLedge.answer>` (and its async and streaming forms), ``as_rag_chain`` and the
server's chat all use it, so every RAG system built on FinderLedge gets the same glue.  Prompts are
configurable (:class:`AnswerPrompts`); the defaults are English or Japanese, chosen by the question's script.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..metadata import user_metadata
from ..ranking.fusion import script_of
from ..results import SearchResult
from .context import Citation, collapse_identical, format_context

if TYPE_CHECKING:
    from .protocols import SearchableLedger

__all__ = [
    "DEFAULT_PROMPTS",
    "EXTRACTIVE_NOTE",
    "NO_ANSWER",
    "Answer",
    "AnswerPrompts",
    "AnswerSource",
    "Prompts",
    "aanswer",
    "amodel_pieces",
    "answer",
    "astream_answer",
    "check_options",
    "extractive_pieces",
    "model_name",
    "model_pieces",
    "question_language",
    "resolve_prompts",
    "stream_answer",
]

NO_ANSWER = "No relevant passage was found in the documents, so there is nothing to answer from."
EXTRACTIVE_NOTE = (
    "[Extractive answer: no language model is configured; these are the most relevant passages.]"
)


@dataclass(frozen=True)
class AnswerPrompts:
    """What the model is told and what an answer without a model says.

    ``system`` is the system message, with ``{context}`` where the numbered passages go (and optionally
    ``{question}``); ``extractive_note`` heads an answer written without a model; ``no_answer`` is the answer
    when nothing relevant was found."""

    system: str
    extractive_note: str
    no_answer: str

    def __post_init__(self) -> None:
        for name in ("system", "extractive_note", "no_answer"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ConfigurationError(f"prompts.{name}: expected a non-empty string")
        if "{context}" not in self.system:
            raise ConfigurationError(
                "prompts.system: expected a '{context}' placeholder where the numbered passages go"
            )


DEFAULT_PROMPTS: dict[str, AnswerPrompts] = {
    "en": AnswerPrompts(
        system=(
            "You answer questions about the user's documents. Use only the numbered sources below and cite "
            "each fact with its number, e.g. [1]. If the sources do not contain the answer, say that you do "
            "not know. Answer in the language of the question.\n\nSources:\n{context}"
        ),
        extractive_note=EXTRACTIVE_NOTE,
        no_answer=NO_ANSWER,
    ),
    "ja": AnswerPrompts(
        system=(
            "あなたはユーザーの文書についての質問に答えます。以下の番号付きの出典だけを使い、各事実に [1] の"
            "ようにその番号を付けて引用してください。出典に答えがなければ、分からないと答えてください。"
            "質問と同じ言語で答えてください。\n\n出典:\n{context}"
        ),
        extractive_note="［抽出回答：言語モデルが設定されていないため、最も関連する箇所をそのまま示します。］",
        no_answer="文書の中に関連する箇所が見つからなかったため、回答できません。",
    ),
}
"""The default prompts by language (``question_language``'s codes)."""

Prompts = AnswerPrompts | str | Mapping[str, AnswerPrompts | str] | None


def question_language(question: str) -> str:
    """``"ja"`` when the question has kana or kanji, else ``"en"`` (picks the default prompts)."""
    return "ja" if any(script_of(c) in ("kana", "han") for c in question) else "en"


def resolve_prompts(prompts: Prompts, question: str) -> AnswerPrompts:
    """The prompts for ``question``: the defaults of its language, an :class:`AnswerPrompts`, a system prompt
    (a string with ``{context}``; the notes stay the language's defaults), or a mapping language -> either."""
    base = DEFAULT_PROMPTS[question_language(question)]
    if isinstance(prompts, Mapping):
        prompts = prompts.get(question_language(question), prompts.get("en"))
    if prompts is None:
        return base
    if isinstance(prompts, AnswerPrompts):
        return prompts
    if isinstance(prompts, str):
        return dataclasses.replace(base, system=prompts)
    raise ConfigurationError(
        f"prompts: expected an AnswerPrompts, a system prompt string with '{{context}}' or a mapping "
        f"language -> one of those, got {type(prompts).__name__}"
    )


@dataclass(frozen=True)
class AnswerSource:
    """A passage the answer was written from; ``n`` is the number it is cited by (``[n]``)."""

    n: int
    source: str
    page: int | None
    chunk_id: str
    parent_id: str
    passage: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the other sources of the same passage (identical text found in several documents), each once
    also: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, n: int, result: SearchResult, copies: Sequence[SearchResult] = ()) -> AnswerSource:
        page = result.metadata.get("page")
        others = dict.fromkeys(c.source for c in copies if c.source != result.source)
        return cls(
            n=n,
            source=result.source,
            page=page if isinstance(page, int) and not isinstance(page, bool) else None,
            chunk_id=result.id,
            parent_id=result.parent_id,
            passage=result.content,
            score=result.score,
            metadata=user_metadata(result.metadata),
            also=list(others),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Answer:
    """An answer: ``text`` cites ``sources`` as ``[n]``; ``extractive`` says it quotes passages (no model
    wrote it); ``model`` names the model that did.  ``str(answer)`` is the text."""

    question: str
    text: str
    sources: list[AnswerSource]
    extractive: bool
    model: str | None
    language: str

    @property
    def cited(self) -> list[AnswerSource]:
        """The sources the text actually cites (``[n]`` appears in it)."""
        return [s for s in self.sources if f"[{s.n}]" in self.text]

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.text,
            "sources": [s.to_dict() for s in self.sources],
            "extractive": self.extractive,
            "model": self.model,
            "language": self.language,
        }


# -- writing the text ------------------------------------------------------------------------------------------
def model_name(llm: Any) -> str:
    """A model's name for the answer (``model_name``/``model`` attribute, else its class name)."""
    for attr in ("model_name", "model", "model_path"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__


def _messages(system: str, question: str, context: str, history: Sequence[Any] | None) -> list[Any]:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

    messages: list[Any] = [
        SystemMessage(system.replace("{context}", context).replace("{question}", question))
    ]
    for turn in history or ():
        if isinstance(turn, BaseMessage):
            messages.append(turn)
            continue
        if not (isinstance(turn, Sequence) and len(turn) == 2 and isinstance(turn[1], str)):
            raise ConfigurationError(
                f"history: expected (role, text) pairs or LangChain messages, got {turn!r}"
            )
        role, content = turn
        messages.append(HumanMessage(content) if role in ("user", "human") else AIMessage(content))
    messages.append(HumanMessage(question))
    return messages


def _text(piece: Any) -> str:
    text = piece if isinstance(piece, str) else getattr(piece, "content", "")
    return text if isinstance(text, str) else ""


def model_pieces(
    llm: Any, question: str, context: str, *, history: Sequence[Any] | None = None, system: str
) -> Iterator[str]:
    """The model's answer to ``question`` from ``context``, piece by piece (any LangChain chat model or LLM)."""
    for piece in llm.stream(_messages(system, question, context, history)):
        text = _text(piece)
        if text:
            yield text


async def amodel_pieces(
    llm: Any, question: str, context: str, *, history: Sequence[Any] | None = None, system: str
) -> AsyncIterator[str]:
    """:func:`model_pieces` through the model's async stream."""
    async for piece in llm.astream(_messages(system, question, context, history)):
        text = _text(piece)
        if text:
            yield text


def extractive_pieces(
    passages: Sequence[str], note: str = EXTRACTIVE_NOTE, *, count: int = 3, max_chars: int = 400
) -> Iterator[str]:
    """No model: ``note``, then the first ``count`` passages numbered like the sources (each cut to ``max_chars``)."""
    yield note
    for n, text in enumerate(passages[:count], start=1):
        snippet = " ".join(text.split())
        if len(snippet) > max_chars:
            snippet = snippet[:max_chars].rstrip() + "…"
        yield f"\n\n[{n}] {snippet}"


# -- from a question to an answer -------------------------------------------------------------------------------
@dataclass
class _Plan:
    """What an answer is written from: the results kept, their context and the prompts."""

    question: str
    results: list[SearchResult]
    context: str
    prompts: AnswerPrompts
    llm: Any
    history: Sequence[Any] | None
    copies: dict[str, list[SearchResult]] = field(default_factory=dict)  # by the kept result's chunk id

    def pieces(self) -> Iterator[str]:
        if not self.results:
            return iter([self.prompts.no_answer])
        if self.llm is None:
            return extractive_pieces([r.content for r in self.results], self.prompts.extractive_note)
        return model_pieces(
            self.llm, self.question, self.context, history=self.history, system=self.prompts.system
        )

    async def apieces(self) -> AsyncIterator[str]:
        if not self.results or self.llm is None:
            for piece in self.pieces():
                yield piece
            return
        async for piece in amodel_pieces(
            self.llm, self.question, self.context, history=self.history, system=self.prompts.system
        ):
            yield piece

    def finish(self, text: str) -> Answer:
        return Answer(
            question=self.question,
            text=text,
            sources=[
                AnswerSource.of(n, r, self.copies.get(r.id, ())) for n, r in enumerate(self.results, start=1)
            ],
            extractive=self.llm is None and bool(self.results),
            model=None if self.llm is None else model_name(self.llm),
            language=question_language(self.question),
        )


_SEARCH_OPTIONS = (
    "k",
    "search_mode",
    "filter",
    "strategy",
    "score_threshold",
    "rerank",
    "mmr",
    "fetch_k",
    "lambda_mult",
)


_ANSWER_OPTIONS = ("history", "prompts", "citation", "max_chars")


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse option names :func:`answer` does not take (``as_rag_chain`` checks them when it is built)."""
    unknown = set(options) - set(_SEARCH_OPTIONS) - set(_ANSWER_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"answer: unknown option(s) {sorted(unknown)}; expected one of "
            f"{[*_SEARCH_OPTIONS, *_ANSWER_OPTIONS]} (llm and results are given per call)"
        )


def _plan(
    ledger: SearchableLedger,
    question: str,
    *,
    llm: Any = None,
    history: Sequence[Any] | None = None,
    prompts: Prompts = None,
    results: Sequence[SearchResult] | None = None,
    citation: Citation = None,
    max_chars: int | None = None,
    **search: Any,
) -> _Plan:
    """Search (unless ``results`` are given) and build the numbered context; results scoring 0 (no evidence
    at all) are never cited, and a passage found in several documents is cited once (its ``also`` names the
    others)."""
    if not isinstance(question, str) or not question.strip():
        raise ConfigurationError(f"question: expected a non-empty string, got {question!r}")
    check_options(search)
    chosen = resolve_prompts(prompts, question)
    if results is None:
        given = {name: value for name, value in search.items() if value is not None}
        if given.get("strategy") is not None:
            given["llm"] = llm
        results = ledger.search(question, **given)
    elif any(value is not None for value in search.values()):
        raise ConfigurationError(
            "answer: search options cannot be combined with results (they are used as given)"
        )
    kept = [r for r in results if r.score > 0]
    context = format_context(kept, citation=citation, max_chars=max_chars) if kept else ""
    # identical passages (one file added from two sources) are one source, numbered as the context numbers it
    groups = collapse_identical(kept)
    copies = {group[0].id: group[1:] for group in groups if len(group) > 1}
    return _Plan(question, [group[0] for group in groups], context, chosen, llm, history, copies)


def answer(ledger: SearchableLedger, question: str, **options: Any) -> Answer:
    """See :meth:`FinderLedge.answer <finderledge.facade.FinderLedge.answer>`."""
    plan = _plan(ledger, question, **options)
    return plan.finish("".join(plan.pieces()))


def stream_answer(ledger: SearchableLedger, question: str, **options: Any) -> Iterator[str | Answer]:
    """The answer's text piece by piece, then the whole :class:`Answer` (its sources included) as the last item.

    The search runs (and bad options raise) when this is called; the model writes as it is iterated."""
    return _streamed(_plan(ledger, question, **options))


def _streamed(plan: _Plan) -> Iterator[str | Answer]:
    pieces: list[str] = []
    for piece in plan.pieces():
        pieces.append(piece)
        yield piece
    yield plan.finish("".join(pieces))


async def aanswer(ledger: SearchableLedger, question: str, **options: Any) -> Answer:
    """:func:`answer` without blocking the event loop: the search runs in a thread, the model through its async API."""
    plan = await asyncio.to_thread(_plan, ledger, question, **options)
    return plan.finish("".join([piece async for piece in plan.apieces()]))


async def astream_answer(
    ledger: SearchableLedger, question: str, **options: Any
) -> AsyncIterator[str | Answer]:
    """:func:`stream_answer` for async code."""
    plan = await asyncio.to_thread(_plan, ledger, question, **options)
    pieces: list[str] = []
    async for piece in plan.apieces():
        pieces.append(piece)
        yield piece
    yield plan.finish("".join(pieces))
