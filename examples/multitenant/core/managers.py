"""The design's managers: :class:`Settings` reads ``config/strategies.yaml``; :class:`LLMManager` builds the chat model.

The design's ``EmbeddingManager`` and ``VectorStoreManager`` are FinderLedge itself: the server opens one index
with the configured embedding model and vector store (``Settings.server_settings``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from finderledge import ConfigurationError, make_chat_model

HERE = Path(__file__).resolve().parents[1]
CONFIG = HERE / "config" / "strategies.yaml"
PROVIDERS = ("openai", "ollama", "llamacpp")


@dataclass(frozen=True)
class StrategyConfig:
    """One strategy the chat offers, with its settings from the file."""

    name: str
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """``config/strategies.yaml``: the LLM, the embedding model, retrieval sizes and the strategies."""

    llm: dict[str, Any]
    embedding: str | None
    vector_store: str | None
    n_results: int
    chunk_size: int
    chunk_overlap: int
    default_strategy: str
    strategies: dict[str, StrategyConfig]

    @classmethod
    def load(cls, path: str | os.PathLike[str] = CONFIG) -> Settings:
        """The settings in ``path``; a missing or wrong field is a :class:`ConfigurationError` naming it."""
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        retrieval = data.get("retrieval") or {}
        raw = data.get("strategies") or {}
        if not isinstance(raw, dict) or not raw:
            raise ConfigurationError(f"{path}: strategies: expected a mapping of strategy names")
        strategies = {
            name: StrategyConfig(
                name,
                str((opts or {}).get("description", "")),
                {k: v for k, v in (opts or {}).items() if k != "description"},
            )
            for name, opts in raw.items()
        }
        default = data.get("default_strategy", "basic")
        if default not in strategies:
            raise ConfigurationError(
                f"{path}: default_strategy: {default!r} is not one of {list(strategies)}"
            )
        embedding = (data.get("embedding") or {}).get("model")
        return cls(
            llm=dict(data.get("llm") or {}),
            embedding=None if embedding in (None, "default") else str(embedding),
            vector_store=data.get("vector_store"),
            n_results=int(retrieval.get("n_results", 4)),
            chunk_size=int(retrieval.get("chunk_size", 500)),
            chunk_overlap=int(retrieval.get("chunk_overlap", 50)),
            default_strategy=default,
            strategies=strategies,
        )

    def server_settings(self) -> dict[str, Any]:
        """FinderLedge settings for the index (the design's EmbeddingManager and VectorStoreManager)."""
        return {"chunk_size": self.chunk_size, "chunk_overlap": self.chunk_overlap}


class LLMManager:
    """The chat model ``config/strategies.yaml`` names (``LLM`` / ``LLM_BASE_URL`` in the environment win)."""

    def __init__(self, settings: Settings, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        llm = settings.llm
        provider, model = llm.get("provider"), llm.get("model")
        self.spec: str | None = env.get("LLM") or (f"{provider}:{model}" if provider and model else None)
        self.base_url: str | None = env.get("LLM_BASE_URL") or llm.get("base_url")
        if self.spec is not None and self.spec.split(":", 1)[0] not in PROVIDERS:
            raise ConfigurationError(f"llm.provider: expected one of {list(PROVIDERS)}, got {self.spec!r}")
        self._model: Any = None

    def get_llm(self) -> Any:
        """The LangChain chat model (built once); ``None`` when no LLM is configured."""
        if self._model is None and self.spec is not None:
            self._model = make_chat_model(self.spec, base_url=self.base_url)
        return self._model
