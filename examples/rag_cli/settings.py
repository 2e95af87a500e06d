"""The example's settings: environment variables (or a ``.env`` file in the working directory), checked once.

A bad value raises :class:`SettingsError` naming the variable, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from dotenv import dotenv_values

# variable -> (default, smallest allowed value)
NUMBERS: dict[str, tuple[int, int]] = {
    "CHUNK_SIZE": (500, 50),  # characters per chunk (the design's 500)
    "CHUNK_OVERLAP": (100, 0),  # characters shared by neighbouring chunks (the design's 100)
    "SEARCH_K": (10, 1),  # candidates the hybrid search retrieves
    "RERANK_TOP_K": (3, 1),  # passages kept by the reranker and given to the LLM
    "DB_PORT": (5432, 1),  # PostgreSQL's port (the design fixes 5432)
    "LLM_N_CTX": (2048, 1),  # LlamaCpp's context window (the design's n_ctx)
    "LLM_MAX_TOKENS": (300, 1),  # LlamaCpp's longest answer (the design's max_tokens)
}
LLM_PROVIDERS = ("openai", "ollama", "llamacpp")
# the design's database settings and their defaults (used once DB_HOST is set: see get_db_config)
DB_DEFAULTS = {"DB_HOST": "localhost", "DB_USER": "rag", "DB_PASSWORD": "rag", "DB_NAME": "rag"}


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
    db: dict[str, str] | None = None  # DB_HOST, DB_USER, DB_PASSWORD, DB_NAME, DB_PORT; None: a local index
    llm_n_ctx: int = 2048
    llm_max_tokens: int = 300
    llm_verbose: bool = False

    @property
    def database_url(self) -> str | None:
        """The PostgreSQL URL FinderLedge keeps the index in (pgvector), or ``None`` for a local index."""
        return None if self.db is None else get_connection_string(self.db, driver="postgresql")


def get_db_config(values: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The design's ``get_db_config``: DB_HOST, DB_USER, DB_PASSWORD, DB_NAME (and DB_PORT) from the
    environment (or ``values``), each unset one at the design's default (localhost, rag, rag, rag, 5432)."""
    source = os.environ if values is None else values
    config = {name: (source.get(name) or "").strip() or default for name, default in DB_DEFAULTS.items()}
    config["DB_PORT"] = str(_integer("DB_PORT", source.get("DB_PORT"), *NUMBERS["DB_PORT"]))
    return config


def get_connection_string(db: Mapping[str, str] | None = None, driver: str = "postgresql+psycopg") -> str:
    """The design's ``get_connection_string``: ``postgresql+psycopg://user:pass@host:5432/dbname``.

    A DB_HOST that is a directory (starts with ``/``) is a Unix socket, passed as ``?host=`` (libpq's way)."""
    db = get_db_config() if db is None else db
    auth = f"{quote(db['DB_USER'], safe='')}:{quote(db['DB_PASSWORD'], safe='')}"
    if db["DB_HOST"].startswith("/"):
        return f"{driver}://{auth}@/{quote(db['DB_NAME'], safe='')}?host={quote(db['DB_HOST'], safe='/')}&port={db['DB_PORT']}"
    return f"{driver}://{auth}@{db['DB_HOST']}:{db['DB_PORT']}/{quote(db['DB_NAME'], safe='')}"


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
    verbose = (values.get("LLM_VERBOSE") or "false").strip().lower()
    if verbose not in ("true", "false", "1", "0"):
        raise SettingsError(f"LLM_VERBOSE must be true or false, got {verbose!r}")
    return Settings(
        chunk_size=numbers["CHUNK_SIZE"],
        chunk_overlap=numbers["CHUNK_OVERLAP"],
        search_k=numbers["SEARCH_K"],
        rerank_top_k=numbers["RERANK_TOP_K"],
        reranker=(values.get("RERANKER") or "").strip() or None,
        llm=llm,
        llm_base_url=(values.get("LLM_BASE_URL") or "").strip() or None,
        # PostgreSQL + pgvector once DB_HOST is set (the design's database); unset: a local index, no server
        db=get_db_config(values) if (values.get("DB_HOST") or "").strip() else None,
        llm_n_ctx=numbers["LLM_N_CTX"],
        llm_max_tokens=numbers["LLM_MAX_TOKENS"],
        llm_verbose=verbose in ("true", "1"),
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
