"""One registry for every plugin kind (vector stores, embeddings, rerankers, strategies, tokenizers, formats).

A :class:`Registry` maps a name to an implementation, given as the object itself or as a lazy
``"package.module:attribute"`` string imported on first use (so optional or slow packages cost nothing
until chosen). An unknown name raises :class:`~finderledge.errors.ConfigurationError` naming the setting
and the names it accepts; a built-in whose package is missing raises
:class:`~finderledge.errors.MissingExtraError` naming the extra that installs it.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from typing import Generic, TypeVar, cast

from .errors import ConfigurationError, MissingExtraError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Named implementations of one plugin kind; ``setting`` names the setting that chooses among them."""

    def __init__(self, kind: str, setting: str, also: str = "") -> None:
        self.kind = kind
        self.setting = setting
        self.also = also  # what else the setting accepts besides a name, for the error message
        self._entries: dict[str, T | str] = {}
        self._built_in: dict[str, str] = {}
        self._extras: dict[str, tuple[str, str]] = {}  # name -> (package it needs, extra that installs it)

    def register(self, name: str, implementation: T | str, *, extra: tuple[str, str] | None = None) -> None:
        """Make ``name`` choose ``implementation`` (an object or a lazy ``"module:attribute"`` path)."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{self.kind} name: expected a non-empty string, got {name!r}")
        self._entries[name] = implementation
        if isinstance(implementation, str):
            self._built_in.setdefault(name, implementation)
        if extra is not None:
            self._extras[name] = extra

    def names(self) -> list[str]:
        """The names this kind accepts, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __getitem__(self, name: str) -> T:
        """``registry[name]``: the same as :meth:`get` (kinds that were plain dicts keep their spelling)."""
        return self.get(name)

    def require(self, name: str) -> None:
        """Refuse a built-in whose package is not installed, without importing it."""
        needed = self._extras.get(name)
        if needed is not None and self._entries.get(name) == self._built_in.get(name):
            package, extra = needed
            if importlib.util.find_spec(package) is None:
                raise MissingExtraError(f"{self.setting}={name!r}", package, extra)

    def get(self, name: str) -> T:
        """The implementation registered as ``name`` (imported now if it was given lazily)."""
        entry = self._entries.get(name)
        if entry is None:
            raise ConfigurationError(
                f"setting {self.setting!r}: expected one of {self.names()} {self.also}".rstrip()
                + f", got {name!r}"
            )
        if isinstance(entry, str):
            self.require(name)
            module, _, attribute = entry.partition(":")
            loaded = cast(T, getattr(importlib.import_module(module), attribute))
            self._entries[name] = loaded
            return loaded
        return entry
