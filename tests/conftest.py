"""Shared fixtures: the real offline MiniLM model (loaded once), the example folder, a real Chroma server.

The suite is layered by folder (``unit``, ``contract``, ``integration``, ``e2e``); each test gets its layer's
marker from the folder it lives in, so ``-m unit`` or a folder path selects a layer. Helpers shared by the
layers (servers, fake LLM, file builders, paths) live in ``tests/helpers/``, importable by module name.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the seal key (storage/seals.py) is a per-user file: the suite and every process it starts keep their own,
# never the real ~/.config's
os.environ["XDG_CONFIG_HOME"] = _CONFIG_HOME = tempfile.mkdtemp(prefix="finderledge-test-config-")
# removed when this process exits (each xdist worker has its own), not left in /tmp after every run
atexit.register(shutil.rmtree, _CONFIG_HOME, True)

from paths import DATASETS, EXAMPLES, REQUIRE, ROOT, dataset  # noqa: F401 - re-exported for tests that import conftest
from pg_server import pg_url  # noqa: F401 - PostgreSQL + pgvector for the session, on first use
from server_process import free_port

from finderledge import EmbeddingModelFactory, FinderLedge

LAYERS = ("unit", "contract", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the layer of its folder; a test outside the layer folders is an error."""
    for item in items:
        layer = Path(str(item.path)).resolve().relative_to(Path(__file__).resolve().parent).parts[0]
        if layer not in LAYERS:
            raise pytest.UsageError(
                f"{item.nodeid}: tests live in tests/{{{','.join(LAYERS)}}}/, not in {layer}"
            )
        item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture
def fake_embeddings():
    """Deterministic 16-d LangChain fake embeddings: the unit layer's only model (same text, same vector)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    return DeterministicFakeEmbedding(size=16)


@pytest.fixture(autouse=True)
def _unit_tests_load_no_model(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In tests/unit a real embedding model is never loaded: the layer must stay fast and model-free."""
    if request.node.get_closest_marker("unit") is None:
        return
    from finderledge import embeddings

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a unit test loaded a real embedding model: pass embedding=fake_embeddings")

    monkeypatch.setattr(embeddings.OnnxEmbeddings, "_loaded", refuse)
    monkeypatch.setattr(embeddings.SentenceTransformerEmbeddings, "_loaded", refuse)


@pytest.fixture(scope="session")
def minilm():
    """The default embeddings: the real bundled all-MiniLM-L6-v2 through ONNX Runtime int8, shared by all tests."""
    return EmbeddingModelFactory.create_embeddings()


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's FINDERLEDGE_CACHE_DIR: the ONNX export of the default model is built once per test run
    (as on a user's first run) and no test writes to the developer's own ~/.cache."""
    return tmp_path_factory.mktemp("finderledge-cache")


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, session_cache: Path
) -> None:
    """No FINDERLEDGE_* variable or .env file from the developer's shell leaks into a test (but CI's
    FINDERLEDGE_REQUIRE_DATASETS, read by tests/helpers/paths.py while the test runs)."""
    for key in list(os.environ):
        if key.startswith("FINDERLEDGE_") and key != REQUIRE:
            monkeypatch.delenv(key)
    monkeypatch.setenv("FINDERLEDGE_CACHE_DIR", str(session_cache))
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture
def example_dir(tmp_path: Path) -> Path:
    """A private copy of examples/data (tests modify it)."""
    target = tmp_path / "data"
    shutil.copytree(EXAMPLES, target)
    return target


@pytest.fixture(params=["chroma", "faiss"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ledger(tmp_path: Path, minilm, store_kind: str, example_dir: Path) -> Iterator[FinderLedge]:
    """A persistent FinderLedge over the example folder, on each vector store."""
    fl = FinderLedge(tmp_path / "index", vector_store=store_kind, embedding=minilm, show_progress=False)
    fl.add_document(example_dir)
    yield fl
    fl.close()


def run_doc_samples(page: str, namespace: dict | None = None) -> dict:
    """Execute every ```python block of ``docs/<page>`` in order, in one namespace (returned)."""
    import re

    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks, f"docs/{page} has no Python sample"
    namespace = {} if namespace is None else namespace
    for block in blocks:
        exec(compile(block, f"docs/{page}", "exec"), namespace)  # noqa: S102 - the page's own example
    return namespace


@pytest.fixture
def shared_model_in_samples(minilm, monkeypatch: pytest.MonkeyPatch) -> None:
    """``finderledge.FinderLedge(...)`` in doc samples uses the already-loaded model, unless it names one."""
    import finderledge

    real = finderledge.FinderLedge
    monkeypatch.setattr(
        finderledge,
        "FinderLedge",
        lambda *a, **kw: real(*a, **{**kw, "embedding": kw.get("embedding") or minilm}),
    )


# -- a real Chroma server (chroma run), one per test session ------------------------------------------------
@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    chroma = Path(sys.executable).with_name("chroma")
    command = [str(chroma)] if chroma.exists() else ["chroma"]
    log = (path / "server.log").open("wb")
    proc = subprocess.Popen(
        [*command, "run", "--path", str(path / "data"), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"chroma run did not start: {(path / 'server.log').read_text()[-2000:]}"
                    )
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
