"""Vector backends: one module per backend behind :class:`VectorStore`, created by name from a registry.

Adding a backend (Elasticsearch, Weaviate …) is one new module with a :class:`VectorStore` subclass and a
``register("name", factory)`` line here or in the caller's code; ``tests/contract/test_vector_store_contract.py``
runs the same contract against each one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..registry import Registry
from .base import LEDGER, LOCAL, SHARED, VectorStore

__all__ = [
    "BACKENDS",
    "LEDGER",
    "LOCAL",
    "SHARED",
    "BackendFactory",
    "VectorStore",
    "adapt_vector_store",
    "backend_names",
    "create_vector_store",
    "register",
    "require_backend",
]

# factory(directory, dimension, **options): directory is where a local backend keeps its files (None: memory)
BackendFactory = Callable[..., VectorStore]

# built-in backends, imported on first use (chromadb, faiss and psycopg are slow or optional imports)
BACKENDS: Registry[BackendFactory] = Registry(
    "vector backend", "vector_store", also="or a LangChain VectorStore instance"
)
BACKENDS.register("chroma", "finderledge.vector_stores.chroma:open_chroma", extra=("chromadb", "chroma"))
BACKENDS.register("faiss", "finderledge.vector_stores.faiss:open_faiss")
BACKENDS.register("pgvector", "finderledge.vector_stores.pgvector:open_pgvector")
BACKENDS.register("qdrant", "finderledge.vector_stores.qdrant:open_qdrant", extra=("qdrant_client", "qdrant"))


def register(name: str, factory: BackendFactory) -> None:
    """Make ``vector_store=name`` create a backend with ``factory(directory, dimension, **options)``."""
    BACKENDS.register(name, factory)


def require_backend(name: str) -> None:
    """Refuse a built-in backend whose package is not installed (:class:`MissingExtraError` naming the extra),
    without importing it (chromadb takes seconds): at open, before anything is written."""
    BACKENDS.require(name)


def backend_names() -> list[str]:
    """The names ``vector_store=`` accepts."""
    return BACKENDS.names()


def create_vector_store(
    kind: str, directory: str | Path | None, dimension: int, **options: Any
) -> VectorStore:
    """Open (or create) the named backend; a local one keeps its files under ``directory/<kind>/``."""
    factory = BACKENDS.get(kind)
    path = None if directory is None else Path(directory) / kind
    return factory(path, dimension, **options)


def adapt_vector_store(store: Any) -> VectorStore:
    """A ``vector_store=`` object as a backend: one of ours as it is, a LangChain ``VectorStore`` adapted."""
    if isinstance(store, VectorStore):
        return store
    from langchain_core.vectorstores import VectorStore as LangChainBase

    if isinstance(store, LangChainBase):
        from .langchain import LangChainVectorStore

        return LangChainVectorStore(store)
    raise ConfigurationError(
        f"setting 'vector_store': expected a backend name, a LangChain VectorStore or a "
        f"finderledge VectorStore, got {type(store).__name__}"
    )
