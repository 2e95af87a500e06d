"""The embedding factory; OpenAI is exercised against a local HTTP server that speaks its protocol."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from finderledge import EmbeddingModelFactory, FinderLedge
from finderledge.embeddings import PrefixedEmbeddings, SentenceTransformerEmbeddings, default_model_path


def test_default_is_the_bundled_minilm(minilm) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(minilm, SentenceTransformerEmbeddings)
    v = np.array(minilm.embed_query("hello world"))
    assert v.shape == (384,) and abs(np.linalg.norm(v) - 1) < 1e-5
    docs = minilm.embed_documents(["hello world", "bonjour"])
    assert np.allclose(docs[0], v, atol=1e-5)


def test_provider_prefixes_and_errors() -> None:
    assert EmbeddingModelFactory.parse(None) == ("sentence-transformers", "all-MiniLM-L6-v2")
    assert EmbeddingModelFactory.parse("openai:text-embedding-3-small") == ("openai", "text-embedding-3-small")
    assert EmbeddingModelFactory.parse("ollama:nomic-embed-text") == ("ollama", "nomic-embed-text")
    assert EmbeddingModelFactory.parse("intfloat/multilingual-e5-small")[0] == "sentence-transformers"
    with pytest.raises(ValueError, match="unknown provider 'cohere'"):
        EmbeddingModelFactory.parse("cohere:embed-v3")
    with pytest.raises(ValueError, match="could not be loaded"):
        EmbeddingModelFactory.create_embeddings("sentence-transformers:/nonexistent/model")


def test_local_path_and_e5_prefixes(minilm) -> None:  # type: ignore[no-untyped-def]
    model = EmbeddingModelFactory.create_embeddings(f"sentence-transformers:{default_model_path()}",
                                                    query_prefix="query: ", passage_prefix="passage: ")
    assert isinstance(model, PrefixedEmbeddings)
    assert np.allclose(model.embed_query("cats"), minilm.embed_query("query: cats"), atol=1e-5)
    assert np.allclose(model.embed_documents(["cats"])[0], minilm.embed_documents(["passage: cats"])[0], atol=1e-5)
    wrapped = EmbeddingModelFactory.create_embeddings(minilm)
    assert wrapped is minilm


class _OpenAIHandler(BaseHTTPRequestHandler):
    """Answers POST /v1/embeddings like the OpenAI API: deterministic 8-d vectors from the text."""

    requests: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(inputs):
            if isinstance(text, list):  # token ids
                text = " ".join(map(str, text))
            rng = np.random.default_rng(abs(hash(str(text))) % (2**32))
            data.append({"object": "embedding", "index": i, "embedding": rng.normal(size=8).tolist()})
        payload = json.dumps({"object": "list", "data": data, "model": body["model"],
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def openai_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenAIHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_openai_provider_over_http(openai_server: str) -> None:
    pytest.importorskip("langchain_openai")
    _OpenAIHandler.requests.clear()
    model = EmbeddingModelFactory.create_embeddings(
        "openai:text-embedding-3-small", base_url=openai_server, api_key="sk-test", check_embedding_ctx_length=False
    )
    fl = FinderLedge(embedding=model, vector_store="faiss")
    fl.add_texts(["alpha document", "beta document"])
    assert fl.count()["chunks"] == 2
    results = fl.search("alpha document", search_mode="vector", k=1)
    assert results[0].content == "alpha document" and results[0].score == pytest.approx(1.0, abs=1e-5)
    assert _OpenAIHandler.requests[0]["path"] == "/v1/embeddings"
    assert _OpenAIHandler.requests[0]["auth"] == "Bearer sk-test"
    assert {r["model"] for r in _OpenAIHandler.requests} == {"text-embedding-3-small"}
    fl.close()


def test_model_identity_is_the_same_by_name_path_or_instance(minilm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from finderledge.embeddings import embedding_model_id

    ids = {embedding_model_id(None), embedding_model_id(minilm),
           embedding_model_id(f"sentence-transformers:{default_model_path()}")}
    assert ids == {"sentence-transformers:all-MiniLM-L6-v2"}
    fl = FinderLedge(tmp_path / "i", embedding=minilm)  # built from Python with an instance ...
    fl.add_texts(["shared identity"])
    fl.close()
    reopened = FinderLedge(tmp_path / "i")  # ... reopens with the default, as the command line does
    assert reopened.count()["documents"] == 1
    reopened.close()
