"""The contract every embedding provider's model keeps (issue 26, "one registry"), as a mixin: a test class
subclasses :class:`EmbeddingsContract` and gives a ``made`` fixture returning ``(the name given to
EmbeddingModelFactory, the model it built)`` and a ``provider`` fixture. tests/contract runs it for the fast
providers; tests/integration/test_onnx_embeddings.py for the ONNX ones (their first use exports the model)."""

from __future__ import annotations

import math

import pytest
from langchain_core.embeddings import Embeddings

from finderledge.embeddings import embed_queries, embedding_model_id, model_name_id

TEXTS = ["Refunds are issued within 30 days.", "東京の天気は晴れです。", "x"]

# an instance of a service's or a user's class is recorded by its class and model name, not by the name the
# factory was given ("openai:..."), so passing the instance where a directory recorded the name is refused
BY_CLASS = {"openai": "OpenAIEmbeddings:text-embedding-3-small", "hashing-test": "Hashing:h1"}


class EmbeddingsContract:
    """What every provider's model does (vectors of unit length, one dimension, deterministic, its id)."""

    def test_is_langchain_embeddings(self, made: tuple[str, Embeddings]) -> None:
        assert isinstance(made[1], Embeddings)

    def test_one_dimension_for_passages_and_queries(self, made: tuple[str, Embeddings]) -> None:
        model = made[1]
        vectors = model.embed_documents(TEXTS)
        query = model.embed_query(TEXTS[0])
        assert len(vectors) == len(TEXTS) and len({len(v) for v in [*vectors, query]}) == 1
        assert all(isinstance(x, float) and math.isfinite(x) for v in [*vectors, query] for x in v)
        assert model.embed_documents([]) == []

    def test_deterministic_and_batch_independent(self, made: tuple[str, Embeddings]) -> None:
        model = made[1]
        together = model.embed_documents(TEXTS)
        alone = [model.embed_documents([t])[0] for t in TEXTS]
        for a, b in zip(together, alone):
            assert a == pytest.approx(b, abs=1e-4)
        queries = embed_queries(model, TEXTS)
        for text, vector in zip(TEXTS, queries):
            assert vector == pytest.approx(model.embed_query(text), abs=1e-4)

    def test_unit_length(self, made: tuple[str, Embeddings]) -> None:
        for v in made[1].embed_documents(TEXTS):
            assert math.sqrt(sum(x * x for x in v)) == pytest.approx(1.0, abs=1e-3)

    def test_the_recorded_id_is_the_one_its_name_gives(
        self, made: tuple[str, Embeddings], provider: str
    ) -> None:
        name, model = made
        assert embedding_model_id(model) == BY_CLASS.get(provider, model_name_id(name))
