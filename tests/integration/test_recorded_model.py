"""Opening a directory never loads a model or calls a service the caller did not name.

A directory records the embedding model it was built with.  That record is only compared with what the
caller passes (or the default); a crafted directory naming a local path or an API model is refused
before anything is loaded or contacted.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from finderledge import EmbeddingModelFactory, FinderLedge, IncompatibleIndexError


def _craft(directory: Path, model: str) -> None:
    """Write ``model`` into the directory's recorded settings and model id, as an attacker could."""
    con = sqlite3.connect(directory / "ledger.sqlite3")
    with con:
        settings = json.loads(con.execute("SELECT value FROM info WHERE key = 'settings'").fetchone()[0])
        settings["embedding_model"] = model
        con.execute("UPDATE info SET value = ? WHERE key = 'settings'", (json.dumps(settings),))
        con.execute("UPDATE info SET value = ? WHERE key = 'embedding_model_id'", (model,))
    con.close()


@pytest.mark.parametrize(
    "model",
    ["sentence-transformers:/any/local/path", "openai:text-embedding-3-large", "ollama:nomic-embed-text"],
)
def test_a_crafted_model_record_is_refused_before_anything_loads(
    tmp_path: Path, minilm: Any, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "index"
    with FinderLedge(directory, show_progress=False) as fl:
        fl.add_texts(["FinderLedge keeps one chunk id across every store."])
    _craft(directory, model)
    loaded: list[Any] = []
    real = EmbeddingModelFactory.create_embeddings

    def spy(m: Any = None, **kw: Any) -> Any:
        loaded.append(m)
        return real(m, **kw)

    monkeypatch.setattr(EmbeddingModelFactory, "create_embeddings", staticmethod(spy))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    with pytest.raises(IncompatibleIndexError, match="never loads the recorded model") as info:
        FinderLedge(directory, show_progress=False)
    assert f"embedding={model!r}" in str(info.value)  # tells the user exactly what to pass
    assert loaded == []


def test_the_default_model_reopens_without_naming_it(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    with FinderLedge(directory, show_progress=False) as fl:
        fl.add_texts(["The default model is recorded and reopened."])
    with FinderLedge(directory, show_progress=False) as fl:
        assert fl.search("recorded")[0].document.page_content.startswith("The default model")


def test_a_custom_embeddings_object_must_be_passed_again(tmp_path: Path, minilm: Any) -> None:
    from langchain_core.embeddings import Embeddings

    class Wrapped(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return minilm.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return minilm.embed_query(text)

    directory = tmp_path / "index"
    with FinderLedge(directory, embedding=Wrapped(), show_progress=False) as fl:
        fl.add_texts(["Built with a custom Embeddings object."])
    with pytest.raises(IncompatibleIndexError, match="same Embeddings object"):
        FinderLedge(directory, show_progress=False)
    with FinderLedge(directory, embedding=Wrapped(), show_progress=False) as fl:
        assert len(fl.search("custom")) == 1


def test_a_refused_open_leaves_no_ledger_handle_open(tmp_path: Path) -> None:
    import gc
    import os

    directory = tmp_path / "index"
    with FinderLedge(directory, show_progress=False) as fl:
        fl.add_texts(["A document, so that the directory records its model."])
    _craft(directory, "openai:text-embedding-3-large")

    def ledger_fds() -> int:
        fds = Path("/proc/self/fd")
        return sum(1 for fd in os.listdir(fds) if "ledger.sqlite3" in os.path.realpath(fds / fd))

    gc.collect()
    before = ledger_fds()
    for _ in range(3):
        with pytest.raises(IncompatibleIndexError):
            FinderLedge(directory, show_progress=False)
    gc.disable()  # the handles must be closed by the failed open itself, not by the garbage collector
    try:
        assert ledger_fds() == before
    finally:
        gc.enable()
