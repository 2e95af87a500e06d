"""Settings for FinderLedge, resolved as: arguments > ``FINDERLEDGE_*`` environment > ``.env`` > defaults."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from .errors import ConfigurationError

__all__ = ["Settings", "ENV_PREFIX", "VECTOR_STORES", "SEARCH_MODES", "FUSIONS", "CHUNK_UNITS"]

ENV_PREFIX = "FINDERLEDGE_"
VECTOR_STORES = ("chroma", "faiss")
SEARCH_MODES = ("hybrid", "vector", "keyword")
FUSIONS = ("rrf", "relative_score", "dbsf")
CHUNK_UNITS = ("weighted", "chars")  # weighted: Latin-character equivalents (a CJK character counts 3)


@dataclass(frozen=True)
class Settings:
    """Every tunable of a FinderLedge instance, validated.  Build it with :meth:`resolve`."""

    persist_directory: str | None = None
    vector_store: str = "chroma"
    embedding_model: str | None = None  # None: the offline MiniLM model
    chunk_size: int = 1000
    chunk_overlap: int = 100
    chunk_unit: str = "weighted"  # what chunk_size/chunk_overlap count: "weighted" (CJK x3) or "chars"
    search_mode: str = "hybrid"
    k: int = 10
    candidate_k: int = 100  # candidates each leg fetches before fusion
    fusion: str = "relative_score"  # chosen on scifact train; see docs/evaluation.md
    rrf_k: int = 60
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    bm25_k1: float = 0.9  # keyword leg's BM25 parameters (Anserini's); query-time, see docs/evaluation.md
    bm25_b: float = 0.4
    embedding_batch_size: int = 64
    vector_scripts: str = "auto"  # scripts the embedding model reads: auto (from its name), any, latin, ...
    min_vector_share: float = 0.5  # hybrid skips the vector leg below this share of readable query text
    show_progress: bool | None = None  # None: only when stderr is a terminal
    lock_timeout: float = 120.0  # seconds a write waits for another process's write lock; < 0: forever

    def __post_init__(self) -> None:
        for name in ("vector_weight", "keyword_weight", "bm25_k1", "bm25_b", "min_vector_share", "lock_timeout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                hint = " (a negative number waits forever)" if name == "lock_timeout" else ""
                raise ConfigurationError(f"setting {name!r}: expected a finite number{hint}, got {value!r}")
        _choice("vector_store", self.vector_store, VECTOR_STORES)
        _choice("search_mode", self.search_mode, SEARCH_MODES)
        _choice("fusion", self.fusion, FUSIONS)
        _choice("chunk_unit", self.chunk_unit, CHUNK_UNITS)
        for name in ("chunk_size", "k", "candidate_k", "rrf_k", "embedding_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"setting {name!r}: expected a positive integer, got {getattr(self, name)!r}")
        if self.chunk_overlap < 0 or self.chunk_overlap >= self.chunk_size:
            raise ConfigurationError(
                f"setting 'chunk_overlap': expected 0 <= chunk_overlap < chunk_size ({self.chunk_size}), "
                f"got {self.chunk_overlap!r}"
            )
        if not 0.0 <= self.min_vector_share <= 1.0:
            raise ConfigurationError(f"setting 'min_vector_share': expected a number in [0, 1], got {self.min_vector_share!r}")
        if not 0.0 <= self.bm25_b <= 1.0:
            raise ConfigurationError(f"setting 'bm25_b': expected a number in [0, 1], got {self.bm25_b!r}")
        for name in ("vector_weight", "keyword_weight", "bm25_k1"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"setting {name!r}: expected a non-negative number, got {getattr(self, name)!r}")

    @classmethod
    def resolve(
        cls,
        arguments: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        env_file: str | os.PathLike[str] | None = ".env",
        defaults: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Merge arguments (non-``None`` ones win), environment variables, a ``.env`` file and defaults.

        ``defaults`` (for example the settings recorded in a persist directory) replace the built-in
        defaults but lose to everything the user said.
        """
        arguments = {k: v for k, v in (arguments or {}).items() if v is not None}
        unknown = set(arguments) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown FinderLedge setting(s): {sorted(unknown)}")
        environ = os.environ if environ is None else environ
        file_values: Mapping[str, str | None] = {}
        if env_file is not None and Path(env_file).is_file():
            file_values = dotenv_values(env_file)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in arguments:
                values[f.name] = _coerce(f.name, arguments[f.name], f.type, source="argument")
                continue
            key = ENV_PREFIX + f.name.upper()
            for origin, source in ((environ, "environment variable"), (file_values, ".env file")):
                raw = origin.get(key)
                if raw not in (None, ""):
                    values[f.name] = _coerce(f.name, raw, f.type, source=f"{source} {key}")
                    break
            else:
                if defaults and defaults.get(f.name) is not None:
                    values[f.name] = _coerce(f.name, defaults[f.name], f.type, source="persist directory")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every setting (JSON-serialisable)."""
        return asdict(self)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigurationError(f"setting {name!r}: expected one of {list(allowed)}, got {value!r}")


def _coerce(name: str, value: Any, type_name: Any, *, source: str) -> Any:
    """Convert a raw value (often a string from the environment) to the setting's type."""
    t = str(type_name)
    try:
        if t.startswith("bool"):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            if text in ("auto", "none"):
                return None
            raise ConfigurationError(value)
        if t.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ConfigurationError(value)
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if t.startswith("float"):
            if isinstance(value, bool):
                raise ConfigurationError(value)
            return float(value)
        if t.startswith("str"):
            if not isinstance(value, (str, os.PathLike)):
                raise ConfigurationError(value)
            return str(value).strip() if name != "persist_directory" else os.fspath(value)
    except (TypeError, ValueError, OverflowError):
        expected = {"b": "a boolean", "i": "an integer", "f": "a number", "s": "a string"}[t[0]]
        raise ConfigurationError(f"setting {name!r} (from {source}): expected {expected}, got {value!r}") from None
    return value
