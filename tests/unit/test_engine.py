"""One engine (issue 26): ``open_engine`` builds the parts once, the write and read paths run on the Engine
alone (no facade), a refused open leaves nothing open, the facade exposes the parts as ``fl.engine``, and
the facade's cluster of modules imports no cycle."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge, Settings
from finderledge.engine import Engine, open_engine
from finderledge.errors import ConfigurationError, IncompatibleIndexError
from finderledge.ingest.write import IngestReport, Writer
from finderledge.ledgers.sqlite import SQLiteLedger
from finderledge.rag.protocols import SearchableLedger
from finderledge.rag.vectorstore import FinderLedgeVectorStore
from finderledge.ranking.search import Searcher

ROOT = Path(__file__).resolve().parents[2]


def _args(directory: Path, **more: Any) -> dict[str, Any]:
    return {"persist_directory": str(directory), "show_progress": False, **more}


def test_the_write_and_read_paths_run_on_the_engine_alone(tmp_path: Path, fake_embeddings: Any) -> None:
    engine = open_engine(_args(tmp_path / "ix"), embedding=fake_embeddings, env_file=None)
    try:
        assert isinstance(engine, Engine)
        assert engine.directory == tmp_path / "ix" and engine.settings.vector_store == "faiss"
        assert engine.model_id == engine.ledger.get_info("embedding_model_id")  # recorded at open
        report = Writer(engine).ingest(
            [
                Document(page_content="the cat sat on the mat"),
                Document(page_content="stock prices fell sharply"),
            ],
            None,
            include=None,
            exclude=None,
            on_error="raise",
            prune=False,
        )
        assert isinstance(report, IngestReport) and len(report.document_ids) == 2
        hits = Searcher(engine).search(
            "cat on a mat",
            search_mode="keyword",
            k=1,
            filter=None,
            return_parents=False,
            candidate_k=None,
            rerank=True,
            score_threshold=None,
        )
        assert [h.content for h in hits] == ["the cat sat on the mat"]
        assert engine.ledger.counts()["documents"] == 2
    finally:
        engine.close()
    engine.close()  # again: a no-op


def test_a_refused_open_closes_what_it_opened(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "ix"
    FinderLedge(directory, embedding=fake_embeddings, show_progress=False, env_file=None).close()
    closed: list[str] = []
    real_close = SQLiteLedger.close

    def recording_close(self: SQLiteLedger) -> None:
        closed.append("ledger")
        real_close(self)

    monkeypatch.setattr(SQLiteLedger, "close", recording_close)
    with pytest.raises(IncompatibleIndexError, match="was built with embedding model"):
        open_engine(_args(directory), embedding=_OtherModel(size=16), env_file=None)
    assert closed == ["ledger"]  # the model check runs after the ledger opened: it was closed again
    with FinderLedge(directory, embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        assert fl.count() == {"documents": 0, "chunks": 0}


def test_the_facade_exposes_its_engine_and_shares_its_parts(tmp_path: Path, fake_embeddings: Any) -> None:
    with FinderLedge(tmp_path / "ix", embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        engine = fl.engine
        assert isinstance(fl, SearchableLedger)
        assert fl.settings is engine.settings and fl.finder is engine.finder
        assert fl.persist_directory == engine.directory
        fl.rerank_candidates = 7  # the facade's setters change the engine the read path uses
        assert engine.settings.rerank_candidates == 7
        fl.add_texts(["alpha beta", "gamma delta"])
        assert engine.ledger.counts()["documents"] == 2 == len(fl)
    assert engine.closed


def test_the_facade_cluster_has_no_import_cycle_and_no_private_reach_in() -> None:
    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "benchmarks" / "code_shape.py")
    assert spec is not None and spec.loader is not None
    shape = importlib.util.module_from_spec(spec)
    sys.modules["code_shape"] = shape
    spec.loader.exec_module(shape)
    figures = shape.scan(ROOT / "src")
    assert figures["cycles"] == []
    assert figures["slf001"] == 0


class _OtherModel(DeterministicFakeEmbedding):
    """Another model class: its recorded id differs from the directory's."""


def test_the_langchain_store_finds_the_facade_by_name(tmp_path: Path, fake_embeddings: Any) -> None:
    """The store and the facade make each other without importing each other: ``from_texts`` makes a
    FinderLedge, and the store still refuses anything else as its ledger."""
    store = FinderLedgeVectorStore.from_texts(
        ["alpha beta", "gamma delta"],
        fake_embeddings,
        persist_directory=str(tmp_path / "ix"),
        show_progress=False,
        env_file=None,
    )
    try:
        assert isinstance(store.ledger, FinderLedge) and store.ledger.count()["documents"] == 2
    finally:
        store.ledger.close()
    with pytest.raises(ConfigurationError, match="expected a FinderLedge"):
        FinderLedgeVectorStore(store.ledger.engine)  # type: ignore[arg-type]


def test_every_setting_is_a_keyword_argument_of_the_facade() -> None:
    """The facade hands ``open_engine`` its arguments by the settings' names: a setting added to
    ``Settings`` without its argument (or renamed in one place) fails here, not silently at open."""
    parameters = set(inspect.signature(FinderLedge).parameters)
    settings = {f.name for f in dataclasses.fields(Settings)}
    assert settings - {"embedding_model"} <= parameters and "embedding" in parameters
