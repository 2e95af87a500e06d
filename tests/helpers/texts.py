"""Synthetic plain text for big-file tests: paragraphs of 3-8 sentences of 6-18 words from a small vocabulary."""

from __future__ import annotations

import random
from collections.abc import Iterator

WORDS = [
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
    "the",
    "of",
    "and",
]


def paragraphs(seed: int) -> Iterator[str]:
    """An endless, seeded stream of paragraphs (no trailing blank line)."""
    rng = random.Random(seed)
    while True:
        yield " ".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
            for _ in range(rng.randint(3, 8))
        )
