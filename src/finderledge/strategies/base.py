"""What a query strategy is: an LLM turns one question into several searches, whose results are merged.

A strategy *plans* (asks the LLM for rephrasings, a hypothetical answer or sub-questions) and *merges* (fuses
the searches' rankings).  :func:`finderledge.strategies.run_strategy` runs the searches concurrently, each
with the caller's filter (a tenant's base filter included), and falls back to the plain search when the LLM
fails.
"""

from __future__ import annotations

import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..results import SearchResult
from ..scripts import script_of

__all__ = ["QueryStrategy", "SubQuery", "ask", "language_of", "parse_lines", "rrf_merge"]

RRF_K = 60


@dataclass(frozen=True)
class SubQuery:
    """One search a strategy runs: ``text`` in ``mode`` (``None``: the caller's mode); ``role`` says why."""

    text: str
    role: str  # "original", "variant", "hypothetical", "sub_question"
    mode: str | None = None


def language_of(text: str) -> str:
    """``ja`` when the text is mostly Japanese (kana/Han), else ``en``: which default prompt to use."""
    letters = [s for s in (script_of(c) for c in text) if s is not None]
    cjk = sum(1 for s in letters if s in ("han", "kana"))
    return "ja" if letters and cjk * 2 >= len(letters) else "en"


def ask(llm: Any, prompt: str) -> str:
    """The text an LLM (a LangChain chat model or LLM) answers to ``prompt``."""
    reply = llm.invoke(prompt)
    text = reply if isinstance(reply, str) else getattr(reply, "content", reply)
    if not isinstance(text, str):
        raise ValueError(f"the LLM returned {type(reply).__name__}, not text")
    return text


_BULLET = re.compile(r"^\s*(?:[-*•・]|\(?\d+[.)）:：]|\d+\s*[.、])\s*")


def parse_lines(text: str, limit: int) -> list[str]:
    """The non-empty lines of an LLM's list answer, bullets and numbering removed, each once, at most ``limit``."""
    out: dict[str, None] = {}
    for line in text.splitlines():
        item = _BULLET.sub("", unicodedata.normalize("NFC", line)).strip().strip('"“”「」')
        if item and len(item) <= 1000:
            out.setdefault(item, None)
    return list(out)[:limit]


def rrf_merge(
    runs: Sequence[tuple[SubQuery, Sequence[SearchResult]]],
) -> list[tuple[SearchResult, list[str]]]:
    """Reciprocal-rank fusion of several searches: each result once (its highest-scored copy), ordered by the
    sum of 1/(60 + rank) over the searches that found it, with the sub-queries that found it."""
    fused: dict[str, float] = {}
    best: dict[str, SearchResult] = {}
    found_by: dict[str, list[str]] = {}
    for sub, results in runs:
        for result in results:
            fused[result.id] = fused.get(result.id, 0.0) + 1.0 / (RRF_K + result.rank)
            if result.id not in best or result.score > best[result.id].score:
                best[result.id] = result
            found_by.setdefault(result.id, []).append(sub.text)
    order = sorted(fused, key=lambda i: (-fused[i], -best[i].score, i))
    return [(best[i], found_by[i]) for i in order]


class QueryStrategy(ABC):
    """One way of turning a question into searches.  Subclasses set :attr:`name` and :attr:`prompts`
    (``{"en": …, "ja": …}``, each with ``{question}`` and optionally ``{n}``); ``prompt=`` overrides both."""

    name: str = ""
    prompts: Mapping[str, str] = {}

    def __init__(self, *, prompt: str | None = None, n: int = 3) -> None:
        if prompt is not None and (not isinstance(prompt, str) or "{question}" not in prompt):
            raise ConfigurationError(
                f"{self.name}: prompt: expected a string with a {{question}} field, got {prompt!r}"
            )
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10:
            raise ConfigurationError(f"{self.name}: n: expected a whole number from 1 to 10, got {n!r}")
        self.prompt = prompt
        self.n = n

    def prompt_for(self, question: str) -> str:
        """The prompt sent to the LLM: the caller's, else the default in the question's language."""
        template = self.prompt or self.prompts[language_of(question)]
        return template.replace("{n}", str(self.n)).replace("{question}", question)

    @abstractmethod
    def plan(self, question: str, llm: Any) -> list[SubQuery]:
        """The searches to run for ``question`` (the LLM is asked here; it may raise)."""

    def merge(
        self, runs: Sequence[tuple[SubQuery, Sequence[SearchResult]]], k: int
    ) -> list[tuple[SearchResult, list[str]]]:
        """The merged ranking (default: reciprocal-rank fusion of every search)."""
        return rrf_merge(runs)[:k]
