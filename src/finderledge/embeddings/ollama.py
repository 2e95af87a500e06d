"""The ``ollama`` provider: ``embedding="ollama:<model>"`` through ``langchain-ollama`` (``finderledge[ollama]``).

The registry refuses this provider, naming the extra, when the package is missing, before this module is
imported.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_ollama import OllamaEmbeddings

__all__ = ["create"]


def create(name: str, *, batch_size: int = 64, **options: Any) -> Embeddings:
    """The model ``name`` served by a local Ollama."""
    model: Embeddings = OllamaEmbeddings(model=name, **options)  # untyped when the extra is missing
    return model
