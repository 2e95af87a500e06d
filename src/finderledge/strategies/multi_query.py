"""``multi_query``: the LLM writes n rephrasings; each and the original are searched (both legs), all fused."""

from __future__ import annotations

from typing import Any

from .base import QueryStrategy, SubQuery, ask, parse_lines

__all__ = ["MultiQuery"]


class MultiQuery(QueryStrategy):
    name = "multi_query"
    prompts = {
        "en": (
            "Write {n} different rephrasings of the question below, for searching a document collection. "
            "Use other words and synonyms; keep the meaning. One per line, nothing else.\n\nQuestion: {question}"
        ),
        "ja": (
            "次の質問を、文書検索のために{n}通りに言い換えてください。意味は変えずに、別の言葉や同義語を使ってください。"
            "1行に1つずつ、言い換えだけを書いてください。\n\n質問: {question}"
        ),
    }

    def plan(self, question: str, llm: Any) -> list[SubQuery]:
        variants = [v for v in parse_lines(ask(llm, self.prompt_for(question)), self.n) if v != question]
        if not variants:
            raise ValueError("the LLM wrote no rephrasing")
        return [SubQuery(question, "original"), *(SubQuery(v, "variant") for v in variants)]
