"""``decompose``: the LLM splits a compound question into sub-questions; each is searched, and the merged top k
represents every sub-question (taken in turn: each one's best result not yet taken)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..results import SearchResult
from .base import QueryStrategy, SubQuery, ask, parse_lines, rrf_merge

__all__ = ["Decompose"]


class Decompose(QueryStrategy):
    name = "decompose"
    prompts = {
        "en": (
            "Split the question below into at most {n} simple sub-questions that together answer it, each "
            "answerable on its own. If it is already simple, repeat it. One per line, nothing else.\n\n"
            "Question: {question}"
        ),
        "ja": (
            "次の質問を、それぞれ単独で答えられる{n}個以内の簡単な質問に分けてください。すでに簡単な質問なら、"
            "そのまま書いてください。1行に1つずつ、質問だけを書いてください。\n\n質問: {question}"
        ),
    }

    def plan(self, question: str, llm: Any) -> list[SubQuery]:
        parts = parse_lines(ask(llm, self.prompt_for(question)), self.n)
        if not parts:
            raise ValueError("the LLM wrote no sub-question")
        return [SubQuery(p, "sub_question") for p in parts]

    def merge(
        self, runs: Sequence[tuple[SubQuery, Sequence[SearchResult]]], k: int
    ) -> list[tuple[SearchResult, list[str]]]:
        merged = {r.id: (r, subs) for r, subs in rrf_merge(runs)}  # each result's best copy and who found it
        taken: list[str] = []
        queues = [[r.id for r in results] for _, results in runs]
        while len(taken) < k and any(queues):
            for queue in queues:  # one from each sub-question in turn
                while queue and queue[0] in taken:
                    queue.pop(0)
                if queue and len(taken) < k:
                    taken.append(queue.pop(0))
        return [merged[i] for i in taken]
