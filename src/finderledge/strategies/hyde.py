"""``hyde``: the LLM writes a hypothetical answer; the vector leg embeds it, the keyword leg keeps the question.

The keyword leg keeps the question because a made-up answer adds words the documents may not contain (and
invented numbers and names), which BM25 would reward; the dense leg is what HyDE helps: an answer-shaped text
lies nearer the answering passages than a question does.  No LLM could be run where this was built, so the
choice is not measured (see docs/strategies.md).
"""

from __future__ import annotations

from typing import Any

from .base import QueryStrategy, SubQuery, ask

__all__ = ["HyDE"]


class HyDE(QueryStrategy):
    name = "hyde"
    prompts = {
        "en": (
            "Write a short passage (3-5 sentences) that answers the question below, as a document in the "
            "collection would. Write only the passage.\n\nQuestion: {question}"
        ),
        "ja": (
            "次の質問に答える短い文章（3〜5文）を、文書に書かれているような文体で書いてください。"
            "文章だけを書いてください。\n\n質問: {question}"
        ),
    }

    def plan(self, question: str, llm: Any) -> list[SubQuery]:
        passage = ask(llm, self.prompt_for(question)).strip()
        if not passage:
            raise ValueError("the LLM wrote no passage")
        return [
            SubQuery(passage[:4000], "hypothetical", mode="vector"),
            SubQuery(question, "original", mode="keyword"),
        ]
