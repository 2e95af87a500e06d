"""Synthetic plain text: paragraphs of 3-8 sentences of 6-18 words from a small vocabulary (big-file tests), and
the English words of the keyword tests' corpora."""

from __future__ import annotations

import random
from collections.abc import Iterator

#: English words for the keyword tests' corpora (each test uses a prefix: a longer list changes its corpus)
EN_WORDS = [
    "warehouse",
    "shelf",
    "invoice",
    "refund",
    "password",
    "account",
    "storage",
    "backup",
    "region",
    "latency",
    "ledger",
    "customer",
    "order",
    "shipping",
    "delivery",
    "payment",
    "card",
    "bank",
    "transfer",
    "balance",
    "report",
    "quarter",
    "revenue",
    "growth",
    "server",
    "cluster",
    "node",
    "replica",
    "index",
    "search",
    "query",
    "vector",
    "keyword",
    "ranking",
    "score",
    "document",
    "chunk",
    "token",
    "engine",
    "database",
    "table",
]
#: the big-file vocabulary: a few content words and some stop words
WORDS = [*EN_WORDS[:11], "the", "of", "and"]


def paragraphs(seed: int) -> Iterator[str]:
    """An endless, seeded stream of paragraphs (no trailing blank line)."""
    rng = random.Random(seed)
    while True:
        yield " ".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
            for _ in range(rng.randint(3, 8))
        )
