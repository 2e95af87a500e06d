"""The ``openai`` provider: ``embedding="openai:<model>"`` through ``langchain-openai`` (``finderledge[openai]``).

The registry refuses this provider, naming the extra, when the package is missing, before this module is
imported; a missing API key is a :class:`~finderledge.errors.ConfigurationError` naming the setting.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_openai import OpenAIEmbeddings

from ..errors import ConfigurationError

__all__ = ["create"]


def create(name: str, *, batch_size: int = 64, **options: Any) -> Embeddings:
    """OpenAI's embedding model ``name`` (the client checks its key now: a missing one fails the open)."""
    try:
        return OpenAIEmbeddings(model=name, **options)
    except Exception as exc:  # openai.OpenAIError: the client refuses to start without a key
        if "OPENAI_API_KEY" not in str(exc) and "api_key" not in str(exc):
            raise
        raise ConfigurationError(
            f"setting 'embedding': 'openai:{name}' needs an OpenAI API key: set OPENAI_API_KEY "
            "(or pass api_key=...)"
        ) from exc
