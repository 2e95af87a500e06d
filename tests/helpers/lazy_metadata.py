"""A lazy metadata sequence for tests: every access builds a new dict, freed after use, so CPython reuses its
address (and ``id()``) for the next one: the trap of keying copies by ``id()`` alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class FreshDicts(Sequence[dict[str, Any]]):
    """``{"n": i}`` built anew at each access of item ``i`` (no slices)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            raise TypeError("no slices")
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"n": i}
