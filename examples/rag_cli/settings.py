"""The example's settings: environment variables (or a ``.env`` file in the working directory), checked once.

A bad value raises :class:`SettingsError` naming the variable, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from dotenv import dotenv_values

# variable -> (default, smallest allowed value)
NUMBERS: dict[str, tuple[int, int]] = {
    "CHUNK_SIZE": (400, 50),  # FinderLedge's weighted characters (a Japanese character counts 3)
    "CHUNK_OVERLAP": (50, 0),
    "SEARCH_K": (10, 1),  # candidates the hybrid search retrieves
    "RERANK_TOP_K": (3, 1),  # passages kept by the reranker and given to the LLM
}
LLM_PROVIDERS = ("openai", "ollama", "llamacpp")


class SettingsError(ValueError):
    """A setting with a value the example cannot use; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    chunk_size: int
    chunk_overlap: int
    search_k: int
    rerank_top_k: int
    reranker: str | None  # cross-encoder name or path, "fused" or "embedding"; None: the e5 reranker
    llm: str | None  # openai:<model> | ollama:<model> | llamacpp:<path.gguf>; None: extractive answers
    llm_base_url: str | None


def load_settings(overrides: Mapping[str, str | None] | None = None, env_file: str = ".env") -> Settings:
    """Read the settings: ``overrides`` (command-line flags) > environment > ``env_file`` > defaults."""
    values: dict[str, str | None] = {**dotenv_values(env_file), **os.environ}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    numbers = {
        name: _integer(name, values.get(name), default, low) for name, (default, low) in NUMBERS.items()
    }
    if numbers["CHUNK_OVERLAP"] >= numbers["CHUNK_SIZE"]:
        raise SettingsError(
            f"CHUNK_OVERLAP must be smaller than CHUNK_SIZE ({numbers['CHUNK_SIZE']}), "
            f"got {numbers['CHUNK_OVERLAP']}"
        )
    if numbers["RERANK_TOP_K"] > numbers["SEARCH_K"]:
        raise SettingsError(
            f"RERANK_TOP_K must be at most SEARCH_K ({numbers['SEARCH_K']}), got {numbers['RERANK_TOP_K']}"
        )
    llm = (values.get("LLM") or "").strip() or None
    if llm is not None:
        provider, _, model = llm.partition(":")
        if provider not in LLM_PROVIDERS or not model:
            raise SettingsError(
                f"LLM must be openai:<model>, ollama:<model> or llamacpp:<path.gguf>, got {llm!r}"
            )
    return Settings(
        chunk_size=numbers["CHUNK_SIZE"],
        chunk_overlap=numbers["CHUNK_OVERLAP"],
        search_k=numbers["SEARCH_K"],
        rerank_top_k=numbers["RERANK_TOP_K"],
        reranker=(values.get("RERANKER") or "").strip() or None,
        llm=llm,
        llm_base_url=(values.get("LLM_BASE_URL") or "").strip() or None,
    )


def _integer(name: str, raw: str | None, default: int, low: int) -> int:
    """``raw`` as an integer >= ``low`` (unset or blank: ``default``), else a SettingsError naming ``name``."""
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise SettingsError(f"{name} must be an integer >= {low}, got {raw!r}") from None
    if value < low:
        raise SettingsError(f"{name} must be an integer >= {low}, got {value}")
    return value
