"""The service's settings: each one's name, default and check in one place (``FINDERLEDGE_SERVER_<NAME>``)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

__all__ = ["DESIGN_ENV", "DOCUMENT_SEARCH", "ENV_PREFIX", "LOG_LEVELS", "SERVER_DIR", "ServerConfig"]

SERVER_DIR = "server"  # under the index directory: keys.json and uploads/
ENV_PREFIX = "FINDERLEDGE_SERVER_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: the document-search design's (seed 002) environment variables, by its names, and the setting each one sets
DESIGN_ENV = {
    "DATABASE_URL": "database_url",  # the ledger (metadata and chunks) in PostgreSQL
    "QDRANT_URL": "qdrant_url",  # the vectors on a Qdrant server
    "QDRANT_COLLECTION": "qdrant_collection",
    "LOG_LEVEL": "log_level",
    "OPENAI_API_KEY": "llm",  # set: chat answers with the design's model (read by the OpenAI client itself)
}
#: the document-search profile: the design's chunking (1000 / 200 characters), top_k 5, its collection name
DOCUMENT_SEARCH: dict[str, Any] = {
    "k": 5,
    "chunk_size": 1000,
    "chunk_overlap": 200,
    "chunk_unit": "chars",
    "qdrant_collection": "documents",
}
DESIGN_LLM = "openai:gpt-4o-mini"  # the design's answering model, used when OPENAI_API_KEY is set


@dataclass(frozen=True)
class ServerConfig:
    """How ``finderledge serve`` runs: where the index is, what uploads may be, which LLM answers chat."""

    directory: Path
    max_upload_mb: float = 50.0  # a larger upload is refused with 413
    max_unpacked_mb: float = 25.0  # what a DOCX (a zip) may unpack to: more is refused (413) as a zip bomb
    max_rows: int = 50_000  # CSV/TSV records, JSONL lines or JSON items of one upload: more is refused (413)
    max_pages: int = 2_000  # pages of one PDF upload: more is refused (413)
    max_chunks: int = 50_000  # chunks one upload splits into: more is refused (413) while splitting
    index_wait: float = 3.0  # seconds an upload waits for its indexing; longer: 201 "processing", background
    llm: str | None = None  # openai:<model>, ollama:<model>, llamacpp:<path.gguf>; None: extractive answers
    llm_base_url: str | None = None  # an OpenAI-compatible or Ollama server (default: the client's own)
    llm_timeout: float = 120.0
    vector_store: str | None = None  # for a new directory (an existing one keeps its own)
    embedding: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other FinderLedge settings
    # JWT bearer tokens beside API keys: an HS256 secret or an RS256 public key (PEM text or a file's path)
    jwt_secret: str | None = None
    jwt_public_key: str | None = None
    jwt_claim: str = "sub"  # the claim naming the caller's tenant
    jwt_audience: str | None = None  # when set, a token's "aud" must name it
    jwt_issuer: str | None = None  # when set, a token's "iss" must be it
    log_level: str | None = None  # the finderledge loggers' level (DEBUG … CRITICAL); None: unchanged

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", Path(self.directory).expanduser().absolute())
        for name in ("max_upload_mb", "max_unpacked_mb", "llm_timeout", "index_wait"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ConfigurationError(f"server setting {name}: expected a positive number, got {value!r}")
        for name in ("max_rows", "max_pages", "max_chunks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"server setting {name}: expected an integer >= 1, got {value!r}")
        if self.jwt_secret is not None and self.jwt_public_key is not None:
            raise ConfigurationError(
                "server settings jwt_secret and jwt_public_key: expected one of them (HS256 or RS256), got both"
            )
        if self.jwt_secret is not None and len(self.jwt_secret) < 32:
            raise ConfigurationError(
                f"server setting jwt_secret: expected at least 32 characters, got {len(self.jwt_secret)}"
            )
        if not isinstance(self.jwt_claim, str) or not self.jwt_claim:
            raise ConfigurationError(
                f"server setting jwt_claim: expected a claim name, got {self.jwt_claim!r}"
            )
        if self.log_level is not None:
            level = str(self.log_level).upper()
            if level not in LOG_LEVELS:
                raise ConfigurationError(
                    f"server setting log_level (LOG_LEVEL): expected one of {list(LOG_LEVELS)}, "
                    f"got {self.log_level!r}"
                )
            object.__setattr__(self, "log_level", level)
        if self.llm is not None and (not isinstance(self.llm, str) or ":" not in self.llm):
            raise ConfigurationError(
                f"server setting llm: expected openai:<model>, ollama:<model> or "
                f"llamacpp:<path>, got {self.llm!r}"
            )

    @classmethod
    def document_search(
        cls, directory: str | Path, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> ServerConfig:
        """The document-search design's service (seed 002): its chunking and ``top_k``, its environment
        variables by their names (:data:`DESIGN_ENV`), and Qdrant for the vectors (a server at ``QDRANT_URL``;
        without one, qdrant-client's local mode in the index directory when it is installed).

        ``DATABASE_URL`` puts the ledger in PostgreSQL, whose vectors then live in the same database
        (pgvector, written in the ledger's transactions): it cannot be combined with ``QDRANT_URL``."""
        env = os.environ if environ is None else environ
        said = {name: env[key] for key, name in DESIGN_ENV.items() if env.get(key, "").strip()}
        extra: dict[str, Any] = dict(DOCUMENT_SEARCH)
        for name in ("database_url", "qdrant_url", "qdrant_collection"):
            if name in said:
                extra[name] = said[name]
        if "database_url" in said and "qdrant_url" in said:
            raise ConfigurationError(
                "DATABASE_URL and QDRANT_URL are both set: with DATABASE_URL FinderLedge keeps the vectors in "
                "the same PostgreSQL database (pgvector, one transaction with the metadata); unset one of them"
            )
        if "database_url" in said:
            store: str | None = "pgvector"
        elif "qdrant_url" in said or importlib.util.find_spec("qdrant_client") is not None:
            store = "qdrant"
        else:
            store = None  # the default store; pip install "finderledge[qdrant]" for the design's
            extra.pop("qdrant_collection")
        values: dict[str, Any] = {
            "directory": directory,
            "vector_store": store,
            "log_level": said.get("log_level"),
            "llm": DESIGN_LLM if "llm" in said else None,
            "extra": extra,
        }
        return cls(**{**values, **overrides})

    def apply_log_level(self) -> None:
        """Set the finderledge loggers' level (``LOG_LEVEL``), when one is configured."""
        if self.log_level is not None:
            logging.getLogger("finderledge").setLevel(self.log_level)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_unpacked_bytes(self) -> int:
        return int(self.max_unpacked_mb * 1024 * 1024)

    @property
    def jwt_enabled(self) -> bool:
        """Whether bearer tokens that are JWTs are accepted (a secret or a public key is configured)."""
        return self.jwt_secret is not None or self.jwt_public_key is not None

    @property
    def server_dir(self) -> Path:
        return self.directory / SERVER_DIR

    def to_env(self) -> dict[str, str]:
        """The settings as environment variables, so every worker process builds the same app."""
        return {
            ENV_PREFIX + "CONFIG": json.dumps(
                {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
            )
        }

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServerConfig:
        """The settings a worker was started with (:meth:`to_env`)."""
        env = os.environ if environ is None else environ
        raw = env.get(ENV_PREFIX + "CONFIG")
        if not raw:
            raise ConfigurationError(
                f"{ENV_PREFIX}CONFIG is not set: start the server with 'finderledge serve DIR'"
            )
        data = json.loads(raw)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
